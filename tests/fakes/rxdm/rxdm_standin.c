/* tpx-rxdm-standin: a stand-in for Google's receive-datapath manager (RxDM,
 * google/tcpgpudmarxd) for running the GPUDirect-TCPX plugin where RxDM
 * cannot run (no gVNIC, no devmem TCP: docs/A3HIGH.md, "The real plugin on
 * this machine"). It serves, under --prefix (the plugin's
 * NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX), the UNIX sockets RxDM serves:
 *
 *   rx_rule_manager / rx_rule_uninstall  flow-steering rule create / delete:
 *       "Ok." or an error text (RxDM's src/rx_rule_manager.cc). No NIC is
 *       programmed; rules are counted against --max-rules, past which creates
 *       fail as RxDM's do ("No more rx rules available").
 *   queue_ids_by_gpu                     the GPU's receive queue ids.
 *   get_gpu_fd_<pci>, get_gpu_metadata_<pci>  the GPU's receive buffer, a
 *       CUDA allocation exported as a file descriptor, and {fd, size, align}
 *       as RxDM's struct IpcGpuMemFdMetadata (cuda/cu_ipc_memfd_exporter.cu).
 *   rxdm_application_registry            application (de)registration
 *       (src/application_registry_manager.cc). RxDM exits when the last
 *       registered application disconnects; the stand-in records it instead.
 *   standin_flow_gpu                     not RxDM's: what the NIC does with a
 *       rule, for the devmem TCP stand-in (tests/fakes/devmem). Asked raw
 *       bytes "SRC_IP SRC_PORT DST_IP DST_PORT" (a received flow: the peer,
 *       then the local end), it answers "gpu <pci>" of the rule steering that
 *       flow, or "none" when no rule does.
 *
 * Malformed or unexpected requests get an error answer and the connection is
 * closed; nothing read is trusted. Every request is recorded, one line each,
 * in --record FILE, for tests to check. "ready" on stdout once listening.
 *
 *   tpx-rxdm-standin --prefix DIR [--gpus N] [--pool-bytes N] [--max-rules N]
 *                    [--record FILE] [--ifname NAME]
 * SIGTERM or SIGINT: remove the sockets and exit 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "rxdm_gpumem.h"
#include "rxdm_proto.h"

#define MAX_CONNS 64
#define MAX_RULES_LIMIT 65536
/* google.rpc.Code values RxDM puts in its error status. */
#define CODE_INVALID_ARGUMENT 3
#define CODE_NOT_FOUND 5
#define CODE_RESOURCE_EXHAUSTED 8

enum ep_kind { EP_RULE_CREATE, EP_RULE_DELETE, EP_QUEUES, EP_REGISTRY, EP_GPU_FD, EP_GPU_META, EP_FLOW };

struct endpoint {
  enum ep_kind kind;
  int gpu; /* EP_GPU_*: index into gpus */
  int fd;
  char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

struct conn {
  int fd; /* -1: free */
  int ep;
  int registered;
  size_t have;
  uint8_t buf[2 + RXDM_FRAME_MAX];
};

struct rule {
  char src[RXDM_STR_MAX], dst[RXDM_STR_MAX];
  int64_t sport, dport;
  int gpu;
};

static struct rxdm_gpu gpus[RXDM_MAX_GPUS];
static int ngpus;
static struct endpoint eps[5 + 2 * RXDM_MAX_GPUS];
static int neps;
static struct conn conns[MAX_CONNS];
static struct rule *rules;
static int nrules, max_rules = 1024;
static FILE *record;
static const char *ifname = "lo";
static volatile sig_atomic_t stop;

static void on_signal(int sig) { (void)sig; stop = 1; }

static void note(const char *fmt, ...) {
  if (!record) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(record, fmt, ap);
  va_end(ap);
  fputc('\n', record);
  fflush(record);
}

static void answer(struct conn *c, const uint8_t *frame, int n) {
  if (n < 0) return;
  if (send(c->fd, frame, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n) note("send-failed %s", strerror(errno));
}

static void answer_text(struct conn *c, const char *text, int code) {
  uint8_t out[512];
  answer(c, out, rxdm_encode_raw(out, sizeof(out), text, code));
}

/* One dummy byte carrying the descriptor (SCM_RIGHTS), as RxDM sends it. */
static int answer_fd(struct conn *c, int fd) {
  char byte = 0, ctl[CMSG_SPACE(sizeof(int))] = {0};
  struct iovec iov = {&byte, 1};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &fd, sizeof(int));
  return sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == 1 ? 0 : -1;
}

static int gpu_by_pci(const char *pci) {
  for (int i = 0; i < ngpus; i++)
    if (strcmp(gpus[i].pci, pci) == 0) return i;
  return -1;
}

static int valid_ip(const char *ip, int *family) {
  unsigned char tmp[16];
  if (inet_pton(AF_INET, ip, tmp) == 1) return *family = AF_INET, 1;
  if (inet_pton(AF_INET6, ip, tmp) == 1) return *family = AF_INET6, 1;
  return 0;
}

static int find_rule(const struct rxdm_msg *m) {
  for (int i = 0; i < nrules; i++)
    if (rules[i].sport == m->src.port && rules[i].dport == m->dst.port && !strcmp(rules[i].src, m->src.ip) &&
        !strcmp(rules[i].dst, m->dst.ip))
      return i;
  return -1;
}

/* Returns 1 when the connection is to be closed after the answer. */
static int handle_rule(struct conn *c, const struct rxdm_msg *m, int create) {
  const char *op = create ? "create" : "delete";
  char why[256];
  if (m->kind != RXDM_RULE) {
    note("bad %s: not a flow-steering request (payload %d)", op, (int)m->kind);
    answer_text(c, "Failed to update flow steering rule, error: INVALID_ARGUMENT: Invalid Flow Steering Request.",
                CODE_INVALID_ARGUMENT);
    return 1;
  }
  int fs, fd;
  /* RxDM CHECK-fails (aborts) on an unparsable address (flow_steer_proto_utils
   * AddressFromStr); the stand-in answers an error instead. */
  if (!m->src.has_ip || !m->dst.has_ip || !m->src.has_port || !m->dst.has_port || !valid_ip(m->src.ip, &fs) ||
      !valid_ip(m->dst.ip, &fd) || fs != fd || m->src.port < 0 || m->src.port > 65535 || m->dst.port < 0 ||
      m->dst.port > 65535) {
    note("bad %s: malformed 5-tuple src=%s:%lld dst=%s:%lld", op, m->src.ip, (long long)m->src.port, m->dst.ip,
         (long long)m->dst.port);
    answer_text(c, "Failed to update flow steering rule, error: INVALID_ARGUMENT: malformed flow.", CODE_INVALID_ARGUMENT);
    return 1;
  }
  int g = m->has_gpu ? gpu_by_pci(m->gpu) : 0; /* RxDM: no GPU named, the NIC's first */
  if (g < 0 || ngpus == 0) {
    note("refuse %s %s:%lld->%s:%lld gpu=%s: unknown GPU", op, m->src.ip, (long long)m->src.port, m->dst.ip,
         (long long)m->dst.port, m->gpu);
    snprintf(why, sizeof(why), "Failed to update flow steering rule, error: NOT_FOUND: %s not found in gpu_to_ifname_map_.",
             m->gpu);
    answer_text(c, why, CODE_NOT_FOUND);
    return 1;
  }
  int at = find_rule(m);
  const char *result = "ok";
  if (create && at < 0) {
    if (nrules >= max_rules) {
      note("refuse create %s:%lld->%s:%lld gpu=%s: no more rules (%d)", m->src.ip, (long long)m->src.port, m->dst.ip,
           (long long)m->dst.port, gpus[g].pci, max_rules);
      snprintf(why, sizeof(why),
               "Failed to update flow steering rule, error: RESOURCE_EXHAUSTED: No more rx rules available for NIC: %s.",
               ifname);
      answer_text(c, why, CODE_RESOURCE_EXHAUSTED);
      return 1;
    }
    struct rule *r = &rules[nrules++];
    snprintf(r->src, sizeof(r->src), "%s", m->src.ip);
    snprintf(r->dst, sizeof(r->dst), "%s", m->dst.ip);
    r->sport = m->src.port;
    r->dport = m->dst.port;
    r->gpu = g;
  } else if (create) {
    result = "ok-exists"; /* RxDM: an existing rule is success */
  } else if (at >= 0) {
    rules[at] = rules[--nrules];
  } else {
    result = "ok-unknown"; /* RxDM answers Ok. for a rule it does not have */
  }
  note("%s %s:%lld->%s:%lld gpu=%s queue=%lld %s rules=%d", op, m->src.ip, (long long)m->src.port, m->dst.ip,
       (long long)m->dst.port, gpus[g].pci, m->has_queue_id ? (long long)m->queue_id : -1LL, result, nrules);
  answer_text(c, "Ok.", 0);
  return 0;
}

static int handle(struct conn *c, const uint8_t *payload, size_t n) {
  struct endpoint *ep = &eps[c->ep];
  struct rxdm_msg m;
  int rc = rxdm_decode(payload, n, &m);
  if (rc) {
    note("bad %s: undecodable message (%zu bytes, %s)", ep->path, n, strerror(-rc));
    answer_text(c, "Failed to process request, error: INVALID_ARGUMENT: undecodable message.", CODE_INVALID_ARGUMENT);
    return 1;
  }
  switch (ep->kind) {
    case EP_RULE_CREATE: return handle_rule(c, &m, 1);
    case EP_RULE_DELETE: return handle_rule(c, &m, 0);
    case EP_QUEUES: {
      int g = m.kind == RXDM_QUEUE_QUERY ? gpu_by_pci(m.gpu) : -1;
      if (g < 0) {
        note("bad queue_ids_by_gpu: %s", m.kind == RXDM_QUEUE_QUERY ? "unknown GPU" : "not a queue id query");
        answer_text(c, "Invalid Argument", CODE_INVALID_ARGUMENT);
        return 1;
      }
      int ids[1] = {g}; /* one receive queue per GPU on lo */
      uint8_t out[64];
      note("queues %s", gpus[g].pci);
      answer(c, out, rxdm_encode_queues(out, sizeof(out), ids, 1));
      return 0;
    }
    case EP_REGISTRY:
      if (m.kind != RXDM_REGISTER) {
        note("bad registry: not a registration (payload %d)", (int)m.kind);
        answer_text(c, "Failed to process request, error: INVALID_ARGUMENT: Invalid Application Register Request.",
                    CODE_INVALID_ARGUMENT);
        return 1;
      }
      if (m.has_register && !m.register_client) {
        note("deregister");
        c->registered = 0;
        answer_text(c, "Ok.", 0);
        return 1;
      }
      note("register");
      c->registered = 1;
      answer_text(c, "Ok.", 0);
      return 0;
    case EP_FLOW: {
      char src[RXDM_STR_MAX], dst[RXDM_STR_MAX];
      long long sp, dp;
      char extra;
      if (m.kind != RXDM_RAW || sscanf(m.raw, "%63s %lld %63s %lld %c", src, &sp, dst, &dp, &extra) != 4) {
        note("bad flow: not 'SRC SPORT DST DPORT'");
        answer_text(c, "none: malformed flow", CODE_INVALID_ARGUMENT);
        return 1;
      }
      for (int i = 0; i < nrules; i++)
        if (rules[i].sport == sp && rules[i].dport == dp && !strcmp(rules[i].src, src) && !strcmp(rules[i].dst, dst)) {
          char text[RXDM_STR_MAX + 8];
          snprintf(text, sizeof(text), "gpu %s", gpus[rules[i].gpu].pci);
          note("flow %s:%lld->%s:%lld gpu=%s", src, sp, dst, dp, gpus[rules[i].gpu].pci);
          answer_text(c, text, 0);
          return 0;
        }
      note("flow %s:%lld->%s:%lld none", src, sp, dst, dp);
      answer_text(c, "none: no rule steers this flow", 0);
      return 0;
    }
    case EP_GPU_FD:
    case EP_GPU_META: {
      struct rxdm_gpu *g = &gpus[ep->gpu];
      const char *what = ep->kind == EP_GPU_FD ? "fd" : "metadata";
      if (m.kind != RXDM_RAW || strcmp(m.raw, g->pci) != 0) {
        note("bad %s %s: asked for '%s'", what, g->pci, m.kind == RXDM_RAW ? m.raw : "(not raw bytes)");
        /* An answer without an fd: the plugin reports "GPU fd not found". */
        answer_text(c, "Not found.", CODE_INVALID_ARGUMENT);
        return 1;
      }
      note("%s %s size=%zu align=%zu", what, g->pci, g->size, g->align);
      if (ep->kind == EP_GPU_FD) return answer_fd(c, g->fd) ? 1 : 0;
      /* RxDM sends the bytes of struct IpcGpuMemFdMetadata {int fd; size_t
       * size; size_t align;}; the plugin copies as many bytes as it gets
       * into its own copy of it (rx_pool.cu), so exactly that many. */
      struct {
        int fd;
        size_t size, align;
      } md = {g->fd, g->size, g->align};
      char raw[sizeof(md) + 1];
      memcpy(raw, &md, sizeof(md));
      uint8_t out[128];
      out[0] = 0;
      /* raw_bytes may hold NULs: encode by hand (field 1, length-delimited). */
      uint8_t *p = out + 2;
      *p++ = 0x0a;
      *p++ = (uint8_t)sizeof(md);
      memcpy(p, raw, sizeof(md));
      p += sizeof(md);
      out[1] = (uint8_t)(p - out - 2);
      answer(c, out, (int)(p - out));
      return 0;
    }
  }
  return 1;
}

static void drop(struct conn *c) {
  if (c->registered) note("registered client dropped (RxDM would exit when none is left)");
  close(c->fd);
  c->fd = -1;
  c->have = 0;
  c->registered = 0;
}

/* Reads what is there and answers every complete message. */
static void serve(struct conn *c) {
  ssize_t r = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have, MSG_DONTWAIT);
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
    drop(c);
    return;
  }
  if (r < 0) return;
  c->have += (size_t)r;
  while (c->have >= 2) {
    size_t len = (size_t)c->buf[0] << 8 | c->buf[1];
    if (c->have < 2 + len) return;
    int close_it = handle(c, c->buf + 2, len);
    memmove(c->buf, c->buf + 2 + len, c->have - 2 - len);
    c->have -= 2 + len;
    if (close_it) {
      drop(c);
      return;
    }
  }
}

static int add_endpoint(const char *prefix, enum ep_kind kind, int gpu, const char *name) {
  struct endpoint *ep = &eps[neps];
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int n = snprintf(ep->path, sizeof(ep->path), "%s/%s", prefix, name);
  if (n < 0 || (size_t)n >= sizeof(ep->path) || (size_t)n >= sizeof(sa.sun_path)) {
    fprintf(stderr, "tpx-rxdm-standin: socket path %s/%s too long\n", prefix, name);
    return -1;
  }
  memcpy(sa.sun_path, ep->path, (size_t)n + 1);
  ep->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (ep->fd < 0) return perror("socket"), -1;
  unlink(ep->path); /* a stale socket of an earlier run */
  if (bind(ep->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(ep->fd, 64) != 0) {
    fprintf(stderr, "tpx-rxdm-standin: %s: %s\n", ep->path, strerror(errno));
    close(ep->fd);
    return -1;
  }
  ep->kind = kind;
  ep->gpu = gpu;
  neps++;
  return 0;
}

static long number(const char *opt, const char *v, long lo, long hi) {
  char *end;
  errno = 0;
  long n = strtol(v, &end, 0);
  if (errno || *v == '\0' || *end != '\0' || n < lo || n > hi) {
    fprintf(stderr, "tpx-rxdm-standin: %s '%s' is not in %ld..%ld\n", opt, v, lo, hi);
    exit(2);
  }
  return n;
}

int main(int argc, char **argv) {
  const char *prefix = NULL, *record_path = NULL;
  long want_gpus = 0, pool = 4L << 30; /* RxDM's own size, RX_POOL_SIZE */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      fprintf(stderr, "tpx-rxdm-standin: %s needs a value (see the top of rxdm_standin.c)\n", a);
      return 2;
    }
    if (!strcmp(a, "--prefix")) prefix = v;
    else if (!strcmp(a, "--gpus")) want_gpus = number(a, v, 1, RXDM_MAX_GPUS);
    else if (!strcmp(a, "--pool-bytes")) pool = number(a, v, 4096, 1L << 40);
    else if (!strcmp(a, "--max-rules")) max_rules = (int)number(a, v, 0, MAX_RULES_LIMIT);
    else if (!strcmp(a, "--record")) record_path = v;
    else if (!strcmp(a, "--ifname")) ifname = v;
    else {
      fprintf(stderr, "tpx-rxdm-standin: unknown option %s\n", a);
      return 2;
    }
    i++;
  }
  if (!prefix) {
    fprintf(stderr, "usage: tpx-rxdm-standin --prefix DIR [--gpus N] [--pool-bytes N] [--max-rules N] [--record FILE]\n");
    return 2;
  }
  if (record_path && !(record = fopen(record_path, "a"))) {
    fprintf(stderr, "tpx-rxdm-standin: %s: %s\n", record_path, strerror(errno));
    return 1;
  }
  char err[256];
  if (rxdm_gpumem_open(gpus, &ngpus, (int)want_gpus, (size_t)pool, err, sizeof(err)) != 0) {
    fprintf(stderr, "tpx-rxdm-standin: the GPU receive buffers: %s\n", err);
    return 1;
  }
  rules = calloc((size_t)max_rules + 1, sizeof(*rules));
  if (!rules) return perror("calloc"), 1;
  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  int ok = add_endpoint(prefix, EP_RULE_CREATE, -1, "rx_rule_manager") == 0 &&
           add_endpoint(prefix, EP_RULE_DELETE, -1, "rx_rule_uninstall") == 0 &&
           add_endpoint(prefix, EP_QUEUES, -1, "queue_ids_by_gpu") == 0 &&
           add_endpoint(prefix, EP_REGISTRY, -1, "rxdm_application_registry") == 0 &&
           add_endpoint(prefix, EP_FLOW, -1, "standin_flow_gpu") == 0;
  for (int g = 0; ok && g < ngpus; g++) {
    char name[128];
    snprintf(name, sizeof(name), "get_gpu_fd_%.32s", gpus[g].pci);
    ok = add_endpoint(prefix, EP_GPU_FD, g, name) == 0;
    snprintf(name, sizeof(name), "get_gpu_metadata_%.32s", gpus[g].pci);
    ok = ok && add_endpoint(prefix, EP_GPU_META, g, name) == 0;
  }
  for (int i = 0; i < MAX_CONNS; i++) conns[i].fd = -1;
  if (ok) {
    for (int g = 0; g < ngpus; g++) note("gpu %s buffer size=%zu align=%zu", gpus[g].pci, gpus[g].size, gpus[g].align);
    printf("ready %d GPU(s) at %s\n", ngpus, prefix);
    fflush(stdout);
  }
  while (ok && !stop) {
    struct pollfd pfd[5 + 2 * RXDM_MAX_GPUS + MAX_CONNS];
    int n = 0;
    for (int i = 0; i < neps; i++) pfd[n++] = (struct pollfd){eps[i].fd, POLLIN, 0};
    int map[MAX_CONNS];
    for (int i = 0; i < MAX_CONNS; i++)
      if (conns[i].fd >= 0) map[n - neps] = i, pfd[n++] = (struct pollfd){conns[i].fd, POLLIN, 0};
    if (poll(pfd, (nfds_t)n, 1000) < 0) {
      if (errno == EINTR) continue;
      perror("poll");
      break;
    }
    for (int i = 0; i < neps; i++) {
      if (!(pfd[i].revents & POLLIN)) continue;
      int fd = accept4(eps[i].fd, NULL, NULL, SOCK_CLOEXEC);
      if (fd < 0) continue;
      int slot = -1;
      for (int k = 0; k < MAX_CONNS && slot < 0; k++)
        if (conns[k].fd < 0) slot = k;
      if (slot < 0) {
        note("bad %s: more than %d connections, refused", eps[i].path, MAX_CONNS);
        close(fd);
        continue;
      }
      conns[slot].fd = fd;
      conns[slot].ep = i;
      conns[slot].have = 0;
      conns[slot].registered = 0;
    }
    for (int i = neps; i < n; i++)
      if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) serve(&conns[map[i - neps]]);
  }
  for (int i = 0; i < MAX_CONNS; i++)
    if (conns[i].fd >= 0) drop(&conns[i]);
  for (int i = 0; i < neps; i++) {
    close(eps[i].fd);
    unlink(eps[i].path);
  }
  rxdm_gpumem_close(gpus, ngpus);
  free(rules);
  note("stopped");
  if (record) fclose(record);
  return ok ? 0 : 1;
}
