/* The devmem stand-in asking the RxDM stand-in (its sockets under
 * NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX), and a GPU's buffer fetched as soon
 * as the plugin asks RxDM for it (connect). */
#include "devmem_standin.h"

static _Thread_local int in_ask; /* our own requests are not the plugin's (connect below) */
const char *dm_prefix(void) {
  const char *p = getenv("NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX");
  return p ? p : "/tmp";
}

/* One request (raw bytes) to <dm_prefix>/<name>; the answer's frame decoded into
 * *m, or the descriptor it carried into *fd (fd != NULL). 0 or -1. */
int dm_ask(const char *name, const char *text, struct rxdm_msg *m, int *fd) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dm_prefix(), name) >= (int)sizeof(sa.sun_path)) return -1;
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  struct timeval tv = {2, 0}; /* the stand-in answers at once; never hang on it */
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  uint8_t req[256], ans[2 + 512];
  int n = rxdm_encode_request_raw(req, sizeof(req), text);
  int rc = -1;
  in_ask = 1;
  int c = connect(s, (struct sockaddr *)&sa, sizeof(sa));
  in_ask = 0;
  if (c != 0 || n < 0 || send(s, req, (size_t)n, MSG_NOSIGNAL) != n) goto out;
  if (fd) {
    char byte, ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {&byte, 1};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
    if (recvmsg(s, &mh, MSG_CMSG_CLOEXEC) == 1 && CMSG_FIRSTHDR(&mh) &&
        CMSG_FIRSTHDR(&mh)->cmsg_type == SCM_RIGHTS) {
      memcpy(fd, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof(int));
      rc = 0;
    }
    goto out;
  }
  size_t have = 0, want = 2;
  while (have < want) {
    ssize_t r = recv(s, ans + have, want - have, 0);
    if (r <= 0) goto out;
    have += (size_t)r;
    if (have == 2) {
      want = 2 + ((size_t)ans[0] << 8 | ans[1]);
      if (want > sizeof(ans)) goto out;
    }
  }
  rc = rxdm_decode(ans + 2, want - 2, m) == 0 && m->kind == RXDM_RAW ? 0 : -1;
out:
  dm_sys_close(s);
  return rc;
}

/* The contexts the import and the copies of the GPU named pci use (its
 * primary context, retained, and dm_copy_ctx's), with their streams, made here,
 * in the plugin's own call, so that they exist when its accept returns: made
 * by the import's thread, their descriptors would appear some time after the
 * plugin set up, looking like a leak of whatever ran next. Real drivers
 * only; the import needs RxDM's answer, so it stays in that thread. */
static void early_contexts(const char *pci) {
  CUdevice dev;
  CUcontext primary, copy;
  if (dm_driver_is_real() && dm_cu_load()) (void)dm_gpu_contexts(pci, &dev, &primary, &copy);
}

/* The plugin asks RxDM for a GPU's receive buffer while it sets up a receive
 * comm (its accept), before any kernel runs: the buffer is imported then, in
 * a thread of its own (RxDM answers the plugin first). Imported at the first
 * receive instead, the driver's mapping calls ran while NCCL's kernel spun
 * waiting for those very bytes. */
static void *prefetch_main(void *arg) {
  dm_note("the plugin asked RxDM for the buffer of GPU %s: importing it now", (const char *)arg);
  pthread_mutex_lock(&dm_fetch_lock);
  (void)dm_buffer_of(arg);
  pthread_mutex_unlock(&dm_fetch_lock);
  free(arg);
  return NULL;
}

int connect(int fd, const struct sockaddr *sa, socklen_t len) {
  REAL(connect);
  int rc = real_connect(fd, sa, len);
  if (in_ask || !sa || sa->sa_family != AF_UNIX || len <= offsetof(struct sockaddr_un, sun_path)) return rc;
  static const char key[] = "/get_gpu_fd_";
  char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
  size_t n = len - offsetof(struct sockaddr_un, sun_path);
  if (n > sizeof(path) - 1) n = sizeof(path) - 1;
  memcpy(path, ((const struct sockaddr_un *)sa)->sun_path, n);
  path[n] = '\0';
  const char *k = strstr(path, key);
  if (!k || strncmp(path, dm_prefix(), strlen(dm_prefix())) != 0) return rc;
  static char asked[MAX_BUFS][40];
  static int nasked;
  int fresh = 1;
  pthread_mutex_lock(&dm_lock);
  for (int i = 0; i < nasked; i++) fresh &= strcmp(asked[i], k + sizeof(key) - 1) != 0;
  if (fresh && nasked < MAX_BUFS) snprintf(asked[nasked++], sizeof(asked[0]), "%.39s", k + sizeof(key) - 1);
  else fresh = 0;
  pthread_mutex_unlock(&dm_lock);
  char *pci = fresh ? strdup(k + sizeof(key) - 1) : NULL;
  if (pci) early_contexts(pci);
  if (pci && dm_spawn_detached(prefetch_main, pci) != 0) free(pci);
  return rc;
}
