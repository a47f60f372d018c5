#define _GNU_SOURCE
#include "netns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h" /* cmocka, for nn_test_sides */

extern char **environ;

#define NN_PREFIX "tpxns" /* namespaces: tpxns<pid>a / tpxns<pid>b */
#define IP_LIMIT_MS 20000 /* one `ip` call; it never takes this long unless stuck */

static int use_proc_counters; /* nn_enter could not mount a private /sys */

static long long mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int spawn_tool(const char *tool, char **argv, int quiet, pid_t *pid) {
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa) != 0) return -1;
  if (quiet) posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  /* PATH first, then where iproute2 lives when PATH lacks sbin. */
  static const char *const dirs[] = {"", "/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"};
  int rc = ENOENT;
  char path[64];
  for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]) && rc == ENOENT; i++) {
    snprintf(path, sizeof(path), "%s%s", dirs[i], tool);
    argv[0] = path;
    rc = posix_spawnp(pid, path, &fa, NULL, argv, environ);
  }
  posix_spawn_file_actions_destroy(&fa);
  return rc;
}

/* Run tool with the space-separated arguments of line, bounded in time. */
static int run_tool(const char *tool, int quiet, char *line) {
  char *argv[40];
  int argc = 1; /* argv[0] filled by spawn_tool */
  for (char *save = NULL, *tok = strtok_r(line, " ", &save); tok;
       tok = strtok_r(NULL, " ", &save)) {
    if (argc >= (int)(sizeof(argv) / sizeof(argv[0])) - 1) return -1;
    argv[argc++] = tok;
  }
  argv[argc] = NULL;
  pid_t pid;
  int rc = spawn_tool(tool, argv, quiet, &pid);
  if (rc == ENOENT) return 127;
  if (rc != 0) {
    fprintf(stderr, "netns: cannot run %s: %s\n", tool, strerror(rc));
    return -1;
  }
  long long deadline = mono_ms() + IP_LIMIT_MS;
  for (;;) {
    int st;
    pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (w < 0 && errno != EINTR) return -1;
    if (mono_ms() > deadline) {
      fprintf(stderr, "netns: '%s %s ...' still running after %d ms: killed\n", tool, argv[1], IP_LIMIT_MS);
      kill(pid, SIGKILL);
      while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
      }
      return -1;
    }
    usleep(2000);
  }
}

static int run_toolv(const char *tool, int quiet, const char *fmt, va_list ap) {
  char line[512];
  int n = vsnprintf(line, sizeof(line), fmt, ap);
  if (n < 0 || (size_t)n >= sizeof(line)) return -1;
  return run_tool(tool, quiet, line);
}

int nn_ip(int quiet, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = run_toolv("ip", quiet, fmt, ap);
  va_end(ap);
  return rc;
}

int nn_tc(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = run_toolv("tc", 1, fmt, ap);
  va_end(ap);
  return rc;
}

int nn_run_sides(const nn_topo_t *t, void (*fn)(const nn_topo_t *t, int me, int ready_fd), int limit_ms,
                 char *why, size_t cap) {
  fflush(stdout);
  fflush(stderr);
  int pfd[2];
  if (pipe(pfd) != 0) {
    snprintf(why, cap, "pipe: %s", strerror(errno));
    return -1;
  }
  pid_t kid[2] = {-1, -1}, parent = getpid();
  for (int me = 1; me >= 0; me--) { /* B first: it listens */
    kid[me] = fork();
    if (kid[me] < 0) {
      snprintf(why, cap, "fork: %s", strerror(errno));
      return -1;
    }
    if (kid[me] == 0) {
      /* Die with the parent (killed by a ctest timeout, say). */
      if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(11);
      close(pfd[me ? 0 : 1]);
      fn(t, me, pfd[me ? 1 : 0]);
      _exit(12); /* fn exits itself */
    }
  }
  close(pfd[0]);
  close(pfd[1]);
  int st[2] = {-1, -1}, hung[2] = {0, 0}, left = 2;
  long long until = mono_ms() + limit_ms;
  while (left > 0 && mono_ms() < until) {
    for (int i = 0; i < 2; i++) {
      if (st[i] != -1) continue;
      int s;
      if (waitpid(kid[i], &s, WNOHANG) == kid[i]) {
        st[i] = s, left--;
        /* One side failed: the other would only wait for it; cut it short. */
        if (s != 0 && mono_ms() + 2000 < until) until = mono_ms() + 2000;
      }
    }
    if (left) usleep(20000);
  }
  for (int i = 0; i < 2; i++) {
    if (st[i] != -1) continue;
    fprintf(stderr, "[netns] side %c still running: killed\n", "AB"[i]);
    kill(kid[i], SIGKILL);
    while (waitpid(kid[i], &st[i], 0) < 0 && errno == EINTR) {
    }
    hung[i] = 1;
  }
  /* The side that failed first is the story; a side we killed is not. */
  for (int i = 0; i < 2; i++) {
    if (hung[i]) continue;
    if (WIFSIGNALED(st[i])) return snprintf(why, cap, "side %c died of signal %d", "AB"[i], WTERMSIG(st[i])), -1;
    if (WEXITSTATUS(st[i]) != 0) return snprintf(why, cap, "side %c failed (exit %d)", "AB"[i], WEXITSTATUS(st[i])), -1;
  }
  for (int i = 0; i < 2; i++)
    if (hung[i]) return snprintf(why, cap, "side %c hung (still running after %d ms)", "AB"[i], limit_ms), -1;
  return 0;
}

/* Can this process make a network namespace at all? 0 yes, EPERM-ish errno no. */
static int probe_netns(void) {
  pid_t pid = fork();
  if (pid < 0) return errno;
  if (pid == 0) _exit(unshare(CLONE_NEWNET) == 0 ? 0 : (errno == EPERM || errno == EACCES ? 2 : 3));
  int st;
  while (waitpid(pid, &st, 0) < 0) {
    if (errno != EINTR) return errno;
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 2) return EPERM;
  return EINVAL;
}

static int ns_exists(const char *ns) {
  char path[96];
  snprintf(path, sizeof(path), "/run/netns/%s", ns);
  return access(path, F_OK) == 0;
}

void nn_reap_stale(void) {
  DIR *d = opendir("/run/netns");
  if (!d) return;
  int stale_pid[16];
  char stale_side[16];
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL && n < 16;) {
    int pid = 0, used = 0;
    char side = 0;
    if (sscanf(e->d_name, NN_PREFIX "%d%c%n", &pid, &side, &used) != 2) continue;
    if ((side != 'a' && side != 'b') || e->d_name[used] != '\0' || pid <= 0) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue; /* its creator is alive */
    stale_pid[n] = pid;
    stale_side[n++] = side;
  }
  closedir(d);
  for (int i = 0; i < n; i++) {
    int rc = nn_ip(1, "netns del " NN_PREFIX "%d%c", stale_pid[i], stale_side[i]);
    fprintf(stderr, "netns: removed " NN_PREFIX "%d%c left by a dead run (ip rc %d)\n",
            stale_pid[i], stale_side[i], rc);
  }
}

int nn_topo_create(nn_topo_t *t, int nlinks, const char **why) {
  static const char *msg_eperm = "creating a network namespace is not permitted here (EPERM): run "
                                 "as root or with CAP_SYS_ADMIN";
  static const char *msg_noip = "iproute2 'ip' not found";
  memset(t, 0, sizeof(*t));
  *why = "";
  if (nlinks < 1 || nlinks > NN_MAX_LINKS) return NN_FAIL;
  t->nlinks = nlinks;
  t->pid = (int)getpid();
  for (int s = 0; s < 2; s++) {
    snprintf(t->ns[s], sizeof(t->ns[s]), NN_PREFIX "%d%c", t->pid, "ab"[s]);
    for (int k = 0; k < nlinks; k++) {
      snprintf(t->ifname[s][k], NN_NAME, "tpx%d%c%d", t->pid % 10000000, "ab"[s], k + 1);
      snprintf(t->addr[s][k], sizeof(t->addr[s][k]), "198.18.%d.%d", k + 1, s + 1);
    }
  }
  if (probe_netns() == EPERM) {
    *why = msg_eperm;
    return NN_SKIP;
  }
  if (nn_ip(1, "-V") == 127) {
    *why = msg_noip;
    return NN_SKIP;
  }
  nn_reap_stale();
  for (int s = 0; s < 2; s++) {
    int rc = nn_ip(1, "netns add %s", t->ns[s]);
    if (rc != 0) {
      fprintf(stderr, "netns: 'ip netns add %s' failed (rc %d)\n", t->ns[s], rc);
      if (s == 0 && probe_netns() == EPERM) {
        *why = msg_eperm;
        return NN_SKIP;
      }
      goto fail;
    }
    t->created[s] = 1;
    if ((rc = nn_ip(1, "-n %s link set lo up", t->ns[s])) != 0) {
      fprintf(stderr, "netns: lo up in %s failed (rc %d)\n", t->ns[s], rc);
      goto fail;
    }
  }
  for (int k = 0; k < nlinks; k++) {
    /* Both ends are born inside their namespaces: nothing ever appears in ours. */
    int rc = nn_ip(1, "link add %s netns %s type veth peer name %s netns %s", t->ifname[0][k],
                   t->ns[0], t->ifname[1][k], t->ns[1]);
    if (rc != 0) {
      fprintf(stderr, "netns: veth %s <-> %s failed (rc %d)\n", t->ifname[0][k], t->ifname[1][k],
              rc);
      goto fail;
    }
    for (int s = 0; s < 2; s++) {
      rc = nn_ip(1, "-n %s addr add %s/24 dev %s", t->ns[s], t->addr[s][k], t->ifname[s][k]);
      if (rc == 0) rc = nn_ip(1, "-n %s link set %s up", t->ns[s], t->ifname[s][k]);
      if (rc != 0) {
        fprintf(stderr, "netns: configuring %s in %s failed (rc %d)\n", t->ifname[s][k], t->ns[s],
                rc);
        goto fail;
      }
    }
  }
  return NN_OK;
fail:
  *why = "building the namespace topology failed (see above)";
  nn_topo_destroy(t);
  return NN_FAIL;
}

int nn_topo_destroy(nn_topo_t *t) {
  if (!t || t->pid != (int)getpid()) return 0;
  int left = 0;
  for (int s = 0; s < 2; s++) {
    if (!t->created[s] && !ns_exists(t->ns[s])) continue;
    int rc = nn_ip(1, "netns del %s", t->ns[s]);
    if (rc != 0) fprintf(stderr, "netns: 'ip netns del %s' failed (rc %d)\n", t->ns[s], rc);
    t->created[s] = 0;
    if (ns_exists(t->ns[s])) left++;
  }
  return left ? -1 : 0;
}

int nn_enter(const char *ns) {
  char path[96];
  snprintf(path, sizeof(path), "/run/netns/%s", ns);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "netns: open %s: %s\n", path, strerror(errno));
    return -1;
  }
  int rc = setns(fd, CLONE_NEWNET);
  int e = errno;
  close(fd);
  if (rc != 0) {
    fprintf(stderr, "netns: setns %s: %s\n", ns, strerror(e));
    return -1;
  }
  /* /sys shows the namespace of whoever mounted it: mount our own, in a
   * private mount namespace, as `ip netns exec` does. */
  use_proc_counters = 1;
  if (unshare(CLONE_NEWNS) != 0) {
    fprintf(stderr, "netns: unshare(CLONE_NEWNS): %s; counters from /proc/self/net/dev\n",
            strerror(errno));
    return 0;
  }
  if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0 ||
      (umount2("/sys", MNT_DETACH) != 0 && errno != EINVAL) ||
      mount("sysfs", "/sys", "sysfs", 0, NULL) != 0) {
    fprintf(stderr, "netns: private /sys: %s; counters from /proc/self/net/dev\n", strerror(errno));
    return 0;
  }
  use_proc_counters = 0;
  return 0;
}

static int proc_counter(const char *ifname, const char *which, uint64_t *out) {
  FILE *f = fopen("/proc/self/net/dev", "r");
  if (!f) return -1;
  char line[512];
  int rc = -1;
  while (fgets(line, sizeof(line), f)) {
    char *colon = strchr(line, ':');
    if (!colon) continue;
    *colon = '\0';
    char *name = line;
    while (*name == ' ')
      name++;
    if (strcmp(name, ifname) != 0) continue;
    /* rx: bytes packets errs drop fifo frame compressed multicast; then tx: bytes ... */
    unsigned long long v[9];
    if (sscanf(colon + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
               &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]) == 9) {
      *out = strcmp(which, "rx_bytes") == 0 ? v[0] : v[8];
      rc = 0;
    }
    break;
  }
  fclose(f);
  return rc;
}

int nn_counter(const char *ifname, const char *which, uint64_t *out) {
  if (strcmp(which, "tx_bytes") != 0 && strcmp(which, "rx_bytes") != 0) return -1;
  if (use_proc_counters) return proc_counter(ifname, which, out);
  char path[128];
  snprintf(path, sizeof(path), "/sys/class/net/%s/statistics/%s", ifname, which);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  unsigned long long v = 0;
  int ok = fscanf(f, "%llu", &v) == 1;
  fclose(f);
  if (!ok) return -1;
  *out = v;
  return 0;
}

static int if_flags(const char *ifname, short *flags) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct ifreq ifr;
  memset(&ifr, 0, sizeof(ifr));
  snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
  int rc = ioctl(fd, SIOCGIFFLAGS, &ifr);
  close(fd);
  if (rc == 0) *flags = ifr.ifr_flags;
  return rc == 0 ? 0 : -1;
}

int nn_wait_running(const char *ifname, int timeout_ms) {
  long long deadline = mono_ms() + timeout_ms;
  for (;;) {
    short f = 0;
    if (if_flags(ifname, &f) != 0) return -1;
    if ((f & IFF_UP) && (f & IFF_RUNNING)) return 0;
    if (mono_ms() > deadline) return -1;
    usleep(5000);
  }
}

int nn_link_set(const char *ifname, int up) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct ifreq ifr;
  memset(&ifr, 0, sizeof(ifr));
  snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
  int rc = ioctl(fd, SIOCGIFFLAGS, &ifr);
  if (rc == 0) {
    if (up)
      ifr.ifr_flags |= IFF_UP;
    else
      ifr.ifr_flags &= ~IFF_UP;
    rc = ioctl(fd, SIOCSIFFLAGS, &ifr);
  }
  close(fd);
  return rc == 0 ? 0 : -1;
}

int nn_ep_open(const nn_topo_t *t, int me, int nlinks, tpx_config_t *cfg, int port, size_t len,
               tpx_endpoint_t **ep, uint8_t **buf, tpx_mem_t **mem, char *why, size_t cap) {
  int off = snprintf(cfg->socket_ifname, sizeof(cfg->socket_ifname), "=");
  for (int k = 0; k < nlinks; k++)
    off += snprintf(cfg->socket_ifname + off, sizeof(cfg->socket_ifname) - (size_t)off, "%s%s", k ? "," : "",
                    t->ifname[me][k]);
  snprintf(cfg->allow_dial, sizeof(cfg->allow_dial), "198.18.0.0/15");
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = cfg;
  p.name = me ? "nsB" : "nsA";
  if (me) {
    p.listen_host = t->addr[1][0];
    p.port = port;
  } else {
    p.no_listen = 1;
  }
  *ep = NULL;
  *buf = NULL;
  int rc = tpx_endpoint_create(&p, ep);
  if (rc) {
    snprintf(why, cap, "endpoint create (ifname '%s'): %s", cfg->socket_ifname, tpx_last_error());
    return -1;
  }
  if (strcmp(tpx_endpoint_transport(*ep), "tpx") != 0) {
    snprintf(why, cap, "transport %s, not the built-in one", tpx_endpoint_transport(*ep));
    return -1;
  }
  *buf = aligned_alloc(4096, len);
  if (!*buf) {
    snprintf(why, cap, "out of memory");
    return -1;
  }
  memset(*buf, 0, len);
  tpx_mem_desc_t d = {*buf, len, TPX_MEM_HOST, 0, TPX_ACCESS_READ | TPX_ACCESS_WRITE};
  rc = tpx_mem_register(*ep, &d, mem);
  if (rc) {
    snprintf(why, cap, "register: %s", tpx_last_error());
    return -1;
  }
  return 0;
}

int nn_ep_close(tpx_endpoint_t *ep, uint8_t *buf, tpx_mem_t *mem, char *why, size_t cap) {
  int rc = tpx_mem_deregister(mem);
  if (rc) snprintf(why, cap, "deregister: %s", tpx_strerror(rc));
  tpx_endpoint_destroy(ep);
  free(buf);
  return rc ? -1 : 0;
}

double nn_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void nn_side_enter(nn_side_t *s, const nn_topo_t *t, int me, const char *name, int nlinks) {
  memset(s, 0, sizeof(*s));
  s->t = t;
  s->me = me;
  s->tag = me ? 'B' : 'A';
  s->name = name;
  NN_CK(s, nn_enter(t->ns[me]) == 0, "cannot enter %s", t->ns[me]);
  for (int k = 0; k < nlinks; k++)
    NN_CK(s, nn_wait_running(t->ifname[me][k], 10000) == 0, "%s not running after 10 s", t->ifname[me][k]);
}

void nn_side_open(nn_side_t *s, int nlinks, tpx_config_t *cfg, int port, size_t len, int ready_fd, int step_ms) {
  char why[256];
  int rc = nn_ep_open(s->t, s->me, nlinks, cfg, port, len, &s->ep, &s->buf, &s->mem, why, sizeof(why));
  NN_CK(s, rc == 0, "%s", why);
  if (s->me) { /* B: listening; tell A, take its connection, hand it our buffer */
    char c = 'r';
    NN_CK(s, write(ready_fd, &c, 1) == 1, "ready pipe");
    rc = tpx_accept(s->ep, step_ms, &s->peer);
    NN_CK(s, rc == 0, "accept: %s", tpx_strerror(rc));
    uint8_t md[TPX_MD_MAX + 2] = "MD";
    size_t ml = 0;
    rc = tpx_mem_get_public_data(s->mem, md + 2, TPX_MD_MAX, &ml);
    NN_CK(s, rc == 0, "public data: %s", tpx_strerror(rc));
    rc = tpx_notify(s->peer, md, ml + 2);
    NN_CK(s, rc == 0, "notify descriptor: %s", tpx_strerror(rc));
    return;
  }
  struct pollfd pf = {ready_fd, POLLIN, 0};
  char c = 0;
  NN_CK(s, poll(&pf, 1, step_ms) == 1 && read(ready_fd, &c, 1) == 1 && c == 'r', "B never got ready");
  rc = tpx_connect(s->ep, s->t->addr[1][0], port, &s->peer);
  NN_CK(s, rc == 0, "connect to %s:%d: %s", s->t->addr[1][0], port, tpx_strerror(rc));
  tpx_notif_t n;
  rc = tpx_wait_notif(s->ep, step_ms, &n);
  NN_CK(s, rc == 1 && n.len > 2 && memcmp(n.msg, "MD", 2) == 0, "no descriptor from B");
  rc = tpx_load_remote_md(n.msg + 2, n.len - 2, &s->remote);
  NN_CK(s, rc == 0, "load descriptor: %s", tpx_strerror(rc));
}

void nn_side_close(nn_side_t *s) {
  tpx_peer_close(s->peer);
  tpx_rmem_free(s->remote);
  char why[128];
  NN_CK(s, nn_ep_close(s->ep, s->buf, s->mem, why, sizeof(why)) == 0, "%s", why);
}

void nn_test_sides(nn_topo_t *t, int nlinks, void (*fn)(const nn_topo_t *t, int me, int ready_fd), int limit_ms) {
  const char *why = "";
  double t0 = nn_now_ms();
  int rc = nn_topo_create(t, nlinks, &why);
  if (rc == NN_SKIP) {
    print_message("SKIPPED: %s\n", why);
    skip();
  }
  if (rc != NN_OK) fail_msg("%s", why);
  print_message("namespaces %s / %s, links %s..%s, built in %.0f ms\n", t->ns[0], t->ns[1], t->ifname[0][0],
                t->ifname[0][nlinks - 1], nn_now_ms() - t0);
  char fail[128];
  rc = nn_run_sides(t, fn, limit_ms, fail, sizeof(fail));
  print_message("both sides done in %.0f ms\n", nn_now_ms() - t0);
  if (rc) fail_msg("%s", fail);
}
