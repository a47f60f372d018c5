/* libtpx-devmem-standin.so: a stand-in for the kernel's devmem TCP receive
 * path and the NIC, preloaded (LD_PRELOAD) into a process running Google's
 * GPUDirect-TCPX plugin on a machine without them (docs/A3HIGH.md). It acts
 * only on what only the plugin asks for:
 *
 * - recvmsg(..., MSG_SOCK_DEVMEM): the bytes read go into free pages of the
 *   GPU receive buffer RxDM handed out (fetched from the RxDM stand-in's
 *   get_gpu_fd_<pci> socket, first GPU), and the reply is one
 *   SCM_DEVMEM_OFFSET control message per page (devmem_pages.h has the
 *   rules). No free page: EAGAIN, as if nothing had arrived.
 * - setsockopt(SOL_SOCKET, SO_DEVMEM_DONTNEED): the tokens come back; 0, or
 *   EINVAL for a token given back twice or never handed out (counted).
 * - ioctl(DMA_BUF_CREATE_PAGES) on a dma-buf: accepted (a new descriptor of
 *   the same memory), as the devmem kernel binds it to the NIC.
 * - realpath("/sys/class/net/lo/device"): a PCI-looking path, since the
 *   plugin reads the NIC's PCI address unchecked for CUDA registrations.
 *
 * - sendmsg(..., SCM_DEVMEM_OFFSET {dma-buf fd, offset}): the bytes are sent
 *   from the dma-buf itself (mapped), MSG_ZEROCOPY kept, so the kernel's own
 *   completions arrive on the error queue as the plugin expects.
 * DEVMEM_STANDIN_LOG=1: one line per refusal on stderr. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "devmem_pages.h"

/* The plugin's constants (its src/sock/tcpx.h, src/devcomm/unpack_defs1.h, src/gpu/tx_pool.cu). */
#define MSG_SOCK_DEVMEM 0x2000000
#define SO_DEVMEM_DONTNEED 97
#define SCM_DEVMEM_OFFSET 99
struct dma_buf_create_pages_info {
  uint64_t pci_bdf[3];
  int32_t dma_buf_fd;
  int32_t create_page_pool;
};
#define DMA_BUF_CREATE_PAGES _IOW('b', 2, struct dma_buf_create_pages_info)
#define LO_PCI_PATH "/sys/devices/pci0000:00/0000:00:00.0"
#define READ_MAX (512u << 10) /* bytes read per recvmsg at most */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* dma-bufs mapped for sends, by descriptor (closed ones dropped in close()). */
#define MAX_TX_MAPS 64
static struct {
  int fd;
  uint8_t *base;
  size_t size;
} tx_maps[MAX_TX_MAPS];
static struct devmem_pages pages;
static int ready = -1; /* -1 not tried, 0 failed, 1 ready */

static void note(const char *fmt, ...) {
  static int on = -1;
  if (on < 0) on = getenv("DEVMEM_STANDIN_LOG") && getenv("DEVMEM_STANDIN_LOG")[0] == '1';
  if (!on) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("devmem-standin: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

#define REAL(name, ...)                                                        \
  static __typeof__(name) *real_##name;                                        \
  if (!real_##name) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

/* close() is ours too, and takes the lock: the lock's holders close with this. */
static int sys_close(int fd) {
  REAL(close);
  return real_close(fd);
}

/* The receive buffer: asked of the RxDM stand-in as the plugin asks it. */
static int fetch_buffer(void) {
  const char *prefix = getenv("NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX");
  if (!prefix) prefix = "/tmp";
  char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  /* The first GPU's socket, get_gpu_fd_<pci> (the CUDA test double's PCI ids). */
  int found = 0;
  for (int bus = 0x04; bus < 0x04 + 0x10 * 16 && !found; bus += 0x10) {
    snprintf(path, sizeof(path), "%s/get_gpu_fd_0000:%02x:00.0", prefix, bus);
    struct stat st;
    found = stat(path, &st) == 0;
  }
  if (!found) return note("no get_gpu_fd_ socket under %s", prefix), -1;
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
  if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    if (s >= 0) sys_close(s);
    return note("cannot reach %s", path), -1;
  }
  const char *pci = strrchr(path, '_') + 1;
  uint8_t req[64];
  size_t n = strlen(pci);
  req[0] = 0, req[1] = (uint8_t)(2 + n), req[2] = 0x0a, req[3] = (uint8_t)n; /* raw_bytes = pci */
  memcpy(req + 4, pci, n);
  int fd = -1;
  if (send(s, req, 4 + n, MSG_NOSIGNAL) == (ssize_t)(4 + n)) {
    char byte, ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {&byte, 1};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
    if (recvmsg(s, &mh, 0) == 1 && CMSG_FIRSTHDR(&mh) && CMSG_FIRSTHDR(&mh)->cmsg_type == SCM_RIGHTS)
      memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof(int));
  }
  sys_close(s);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return note("no buffer from %s", path), -1;
  void *base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  sys_close(fd);
  if (base == MAP_FAILED) return note("cannot map the buffer"), -1;
  if (devmem_pages_init(&pages, base, (size_t)st.st_size) != 0) return -1;
  note("buffer of GPU %s: %lld bytes", pci, (long long)st.st_size);
  return 0;
}

static int have_buffer(void) {
  if (ready < 0) ready = fetch_buffer() == 0;
  return ready;
}


ssize_t recvmsg(int fd, struct msghdr *msg, int flags) {
  REAL(recvmsg);
  if (!(flags & MSG_SOCK_DEVMEM)) return real_recvmsg(fd, msg, flags);
  flags &= ~MSG_SOCK_DEVMEM;
  pthread_mutex_lock(&lock);
  if (!have_buffer()) {
    pthread_mutex_unlock(&lock);
    errno = ENODEV;
    return -1;
  }
  /* As much as fits: the caller's first iovec, its control room, free pages. */
  size_t room = msg->msg_controllen / CMSG_SPACE(sizeof(struct devmemvec));
  size_t want = msg->msg_iovlen ? msg->msg_iov[0].iov_len : 0;
  if (want > room * DEVMEM_PAGE) want = room * DEVMEM_PAGE;
  if (want > (size_t)pages.nfree * DEVMEM_PAGE) want = (size_t)pages.nfree * DEVMEM_PAGE;
  if (want == 0) { /* the buffer is full: nothing arrives until tokens come back */
    pthread_mutex_unlock(&lock);
    errno = EAGAIN;
    return -1;
  }
  /* Read through a per-thread heap buffer (the plugin loops for the rest). */
  static _Thread_local uint8_t *tmp;
  if (!tmp && !(tmp = malloc(READ_MAX))) {
    pthread_mutex_unlock(&lock);
    errno = ENOMEM;
    return -1;
  }
  if (want > READ_MAX) want = READ_MAX;
  ssize_t r = recv(fd, tmp, want, flags);
  if (r <= 0) {
    pthread_mutex_unlock(&lock);
    return r;
  }
  struct devmemvec frags[READ_MAX / DEVMEM_PAGE];
  size_t nf;
  devmem_pages_rx(&pages, fd, tmp, (size_t)r, frags, READ_MAX / DEVMEM_PAGE, &nf);
  pthread_mutex_unlock(&lock);
  struct cmsghdr *cm = CMSG_FIRSTHDR(msg);
  for (size_t i = 0; i < nf; i++) {
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_DEVMEM_OFFSET;
    cm->cmsg_len = CMSG_LEN(sizeof(struct devmemvec));
    memcpy(CMSG_DATA(cm), &frags[i], sizeof(frags[i]));
    cm = (struct cmsghdr *)((char *)cm + CMSG_SPACE(sizeof(struct devmemvec)));
  }
  msg->msg_controllen = nf * CMSG_SPACE(sizeof(struct devmemvec));
  msg->msg_flags = 0;
  return r;
}

/* The mapping of dma-buf fd (lock held), made on first use. */
static uint8_t *tx_map(int fd, size_t *size) {
  int free_slot = -1;
  for (int i = 0; i < MAX_TX_MAPS; i++) {
    if (tx_maps[i].base && tx_maps[i].fd == fd) return *size = tx_maps[i].size, tx_maps[i].base;
    if (!tx_maps[i].base && free_slot < 0) free_slot = i;
  }
  struct stat st;
  if (free_slot < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) return NULL;
  void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return NULL;
  tx_maps[free_slot].fd = fd;
  tx_maps[free_slot].base = m;
  tx_maps[free_slot].size = (size_t)st.st_size;
  *size = (size_t)st.st_size;
  return m;
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
  REAL(sendmsg);
  struct cmsghdr *cm = msg->msg_controllen ? CMSG_FIRSTHDR((struct msghdr *)msg) : NULL;
  if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_DEVMEM_OFFSET ||
      cm->cmsg_len < CMSG_LEN(2 * sizeof(int)))
    return real_sendmsg(fd, msg, flags);
  int v[2]; /* {dma-buf descriptor, offset}: gpudirectTCPXPostSend */
  memcpy(v, CMSG_DATA(cm), sizeof(v));
  size_t len = msg->msg_iovlen ? msg->msg_iov[0].iov_len : 0, size = 0;
  pthread_mutex_lock(&lock);
  uint8_t *base = tx_map(v[0], &size);
  pthread_mutex_unlock(&lock);
  if (!base || v[1] < 0 || (size_t)v[1] > size || len > size - (size_t)v[1]) {
    note("sendmsg: offset %d + %zu bytes outside dma-buf fd %d (%zu bytes)", v[1], len, v[0], size);
    errno = EFAULT;
    return -1;
  }
  return send(fd, base + v[1], len, flags);
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len) {
  REAL(setsockopt);
  if (level != SOL_SOCKET || name != SO_DEVMEM_DONTNEED) return real_setsockopt(fd, level, name, val, len);
  pthread_mutex_lock(&lock);
  long rc = ready == 1 ? devmem_pages_dontneed(&pages, fd, val, len / sizeof(struct devmemtoken)) : -EINVAL;
  pthread_mutex_unlock(&lock);
  if (rc < 0) {
    note("SO_DEVMEM_DONTNEED on fd %d: a token given back twice or never handed out", fd);
    errno = EINVAL;
    return -1;
  }
  return 0; /* the plugin wants 0 (Google's kernel), not the count freed */
}

int close(int fd) {
  REAL(close);
  pthread_mutex_lock(&lock);
  if (ready == 1) devmem_pages_release_sock(&pages, fd);
  for (int i = 0; i < MAX_TX_MAPS; i++)
    if (tx_maps[i].base && tx_maps[i].fd == fd) {
      munmap(tx_maps[i].base, tx_maps[i].size);
      tx_maps[i].base = NULL;
    }
  pthread_mutex_unlock(&lock);
  return real_close(fd);
}

int ioctl(int fd, unsigned long req, ...) {
  REAL(ioctl);
  va_list ap;
  va_start(ap, req);
  void *arg = va_arg(ap, void *);
  va_end(ap);
  if (req != DMA_BUF_CREATE_PAGES) return real_ioctl(fd, req, arg);
  return fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

char *realpath(const char *path, char *resolved) {
  REAL(realpath);
  if (path && strcmp(path, "/sys/class/net/lo/device") == 0) {
    if (resolved) return strcpy(resolved, LO_PCI_PATH);
    return strdup(LO_PCI_PATH);
  }
  return real_realpath(path, resolved);
}
