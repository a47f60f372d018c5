/* tpx-rxdm-standin's protocol handling: what the TCPX plugin asks (buffer
 * fd and metadata, rule create/delete, registration) answered as RxDM
 * answers it, and malformed or unexpected requests answered with errors
 * without the daemon dying; everything recorded. Runs the daemon over the
 * CUDA driver test double (RXDM_STANDIN, FAKE_CUDA_DIR from CMake). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "rxdm_proto.h"

#define PCI0 "0000:04:00.0"

static pid_t running; /* the daemon started last, until stopped */

struct daemon {
  pid_t pid;
  char dir[64], record[96];
};

static int start(struct daemon *d, const char *max_rules) {
  snprintf(d->dir, sizeof(d->dir), "/tmp/tpx-rxdm-XXXXXX");
  if (!mkdtemp(d->dir)) return -1;
  snprintf(d->record, sizeof(d->record), "%s/record", d->dir);
  int out[2];
  if (pipe(out)) return -1;
  d->pid = fork();
  if (d->pid == 0) {
    /* Its stderr goes to a file: a daemon left behind by a failed check must
     * not hold the test's output open. */
    char err[128];
    snprintf(err, sizeof(err), "%s/stderr", d->dir);
    int e = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (e >= 0) dup2(e, 2);
    dup2(out[1], 1);
    close(out[0]);
    setenv("LD_LIBRARY_PATH", FAKE_CUDA_DIR, 1);
    setenv("FAKE_CUDA_DEVICES", "2", 1);
    execl(RXDM_STANDIN, RXDM_STANDIN, "--prefix", d->dir, "--record", d->record, "--pool-bytes", "1000000",
          "--max-rules", max_rules, (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  running = d->pid;
  char line[128] = {0};
  struct pollfd p = {out[0], POLLIN, 0};
  ssize_t n = poll(&p, 1, 10000) == 1 ? read(out[0], line, sizeof(line) - 1) : -1;
  close(out[0]);
  return n > 0 && strncmp(line, "ready 2 GPU(s)", 14) == 0 ? 0 : -1;
}

static int stop(struct daemon *d) {
  running = 0;
  kill(d->pid, SIGTERM);
  int st;
  if (waitpid(d->pid, &st, 0) != d->pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void cleanup(struct daemon *d) {
  char err[128];
  snprintf(err, sizeof(err), "%s/stderr", d->dir);
  unlink(err);
  unlink(d->record);
  rmdir(d->dir);
}

/* A check that failed skipped stop(): end that daemon before the next test. */
static int teardown(void **state) {
  (void)state;
  if (running > 0) {
    kill(running, SIGKILL);
    waitpid(running, NULL, 0);
    running = 0;
  }
  return 0;
}

static int dial(const struct daemon *d, const char *name) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", d->dir, name);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct timeval tv = {10, 0}; /* bounds connect (a full backlog) and every read */
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) abort();
  return fd;
}

/* One framed answer into buf; its payload length, or -1 on EOF/timeout. */
static int reply(int fd, uint8_t *buf, size_t cap) {
  uint8_t len[2];
  if (recv(fd, len, 2, MSG_WAITALL) != 2) return -1;
  size_t n = (size_t)len[0] << 8 | len[1];
  if (n > cap || (n && recv(fd, buf, n, MSG_WAITALL) != (ssize_t)n)) return -1;
  return (int)n;
}

static int is_ok(const uint8_t *b, int n) { return n == 5 && memcmp(b, "\x0a\x03Ok.", 5) == 0; }
static int says(const uint8_t *b, int n, const char *text) { return n > 0 && memmem(b, (size_t)n, text, strlen(text)); }

/* Sends bytes on a new connection to name and returns the answer in buf. */
static int ask(const struct daemon *d, const char *name, const void *req, size_t len, uint8_t *buf, size_t cap) {
  int fd = dial(d, name);
  /* A refused connection (closed at once) fails the send or the reply: -1. */
  int n = send(fd, req, len, MSG_NOSIGNAL) == (ssize_t)len ? reply(fd, buf, cap) : -1;
  close(fd);
  return n;
}

static int rule(const struct daemon *d, const char *ep, const char *src, int sport, const char *dst, int dport,
                const char *gpu, uint8_t *buf, size_t cap) {
  struct rxdm_msg m = {0};
  m.has_flow_type = 1;
  m.flow_type = 1; /* TCP_V4_FLOW */
  m.src.has_ip = m.src.has_port = m.dst.has_ip = m.dst.has_port = 1;
  snprintf(m.src.ip, sizeof(m.src.ip), "%s", src);
  snprintf(m.dst.ip, sizeof(m.dst.ip), "%s", dst);
  m.src.port = sport;
  m.dst.port = dport;
  if (gpu) m.has_gpu = 1, snprintf(m.gpu, sizeof(m.gpu), "%s", gpu);
  uint8_t req[512];
  int len = rxdm_encode_rule(req, sizeof(req), &m);
  assert_true(len > 0);
  return ask(d, ep, req, (size_t)len, buf, cap);
}

static int recorded(const struct daemon *d, const char *text) {
  FILE *f = fopen(d->record, "r");
  if (!f) return 0;
  char line[512];
  int hit = 0;
  while (!hit && fgets(line, sizeof(line), f)) hit = strstr(line, text) != NULL;
  fclose(f);
  return hit;
}

static void t_buffer(void **state) {
  (void)state;
  struct daemon d;
  assert_int_equal(start(&d, "16"), 0);
  uint8_t req[64], buf[256];
  int len = rxdm_encode_request_raw(req, sizeof(req), PCI0);
  /* The descriptor: one byte with SCM_RIGHTS. */
  int fd = dial(&d, "get_gpu_fd_" PCI0);
  assert_int_equal(send(fd, req, (size_t)len, 0), len);
  char byte, ctl[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {&byte, 1};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
  assert_int_equal(recvmsg(fd, &mh, 0), 1);
  struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
  assert_non_null(cm);
  assert_int_equal(cm->cmsg_type, SCM_RIGHTS);
  int mem;
  memcpy(&mem, CMSG_DATA(cm), sizeof(int));
  struct stat st;
  assert_int_equal(fstat(mem, &st), 0);
  assert_int_equal(st.st_size, 2 << 20); /* 1000000 rounded up to the 2 MiB granularity */
  close(mem);
  close(fd);
  /* The metadata: exactly the 24 bytes of {int fd; size_t size; size_t align;}. */
  int n = ask(&d, "get_gpu_metadata_" PCI0, req, (size_t)len, buf, sizeof(buf));
  assert_int_equal(n, 2 + 24);
  assert_int_equal(buf[0], 0x0a);
  assert_int_equal(buf[1], 24);
  size_t size, align;
  memcpy(&size, buf + 2 + 8, 8);
  memcpy(&align, buf + 2 + 16, 8);
  assert_int_equal(size, 2 << 20);
  assert_int_equal(align, 2 << 20);
  /* Another GPU's address on this GPU's socket: no descriptor, an error. */
  len = rxdm_encode_request_raw(req, sizeof(req), "0000:14:00.0");
  n = ask(&d, "get_gpu_fd_" PCI0, req, (size_t)len, buf, sizeof(buf));
  assert_true(says(buf, n, "Not found."));
  assert_true(recorded(&d, "fd " PCI0 " size=2097152"));
  assert_true(recorded(&d, "bad fd " PCI0 ": asked for '0000:14:00.0'"));
  assert_int_equal(stop(&d), 0);
  cleanup(&d);
}

static void t_rules(void **state) {
  (void)state;
  struct daemon d;
  assert_int_equal(start(&d, "2"), 0);
  uint8_t buf[512];
  int n;
  n = rule(&d, "rx_rule_manager", "127.0.0.1", 40000, "127.0.0.1", 5000, PCI0, buf, sizeof(buf));
  assert_true(is_ok(buf, n));
  n = rule(&d, "rx_rule_manager", "127.0.0.1", 40000, "127.0.0.1", 5000, PCI0, buf, sizeof(buf));
  assert_true(is_ok(buf, n)); /* the same flow again: Ok., as RxDM */
  n = rule(&d, "rx_rule_manager", "::1", 40001, "::1", 5000, NULL, buf, sizeof(buf));
  assert_true(is_ok(buf, n)); /* no GPU named: the first */
  n = rule(&d, "rx_rule_manager", "127.0.0.1", 40002, "127.0.0.1", 5000, PCI0, buf, sizeof(buf));
  assert_true(says(buf, n, "RESOURCE_EXHAUSTED: No more rx rules available for NIC: lo"));
  n = rule(&d, "rx_rule_uninstall", "127.0.0.1", 40000, "127.0.0.1", 5000, PCI0, buf, sizeof(buf));
  assert_true(is_ok(buf, n));
  n = rule(&d, "rx_rule_uninstall", "127.0.0.1", 40000, "127.0.0.1", 5000, PCI0, buf, sizeof(buf));
  assert_true(is_ok(buf, n)); /* unknown rule: Ok., as RxDM */
  n = rule(&d, "rx_rule_manager", "127.0.0.1", 40002, "127.0.0.1", 5000, PCI0, buf, sizeof(buf));
  assert_true(is_ok(buf, n)); /* room again */
  assert_true(recorded(&d, "create 127.0.0.1:40000->127.0.0.1:5000 gpu=" PCI0 " queue=-1 ok rules=1"));
  assert_true(recorded(&d, "create 127.0.0.1:40000->127.0.0.1:5000 gpu=" PCI0 " queue=-1 ok-exists"));
  assert_true(recorded(&d, "refuse create 127.0.0.1:40002->127.0.0.1:5000"));
  assert_true(recorded(&d, "delete 127.0.0.1:40000->127.0.0.1:5000 gpu=" PCI0 " queue=-1 ok-unknown"));
  assert_int_equal(stop(&d), 0);
  cleanup(&d);
}

/* standin_flow_gpu (not RxDM's): which GPU a received flow is steered to,
 * as the devmem stand-in asks it. */
static int flow(const struct daemon *d, const char *q, uint8_t *buf, size_t cap) {
  uint8_t req[128];
  int len = rxdm_encode_request_raw(req, sizeof(req), q);
  assert_true(len > 0);
  return ask(d, "standin_flow_gpu", req, (size_t)len, buf, cap);
}

static void t_flow_gpu(void **state) {
  (void)state;
  struct daemon d;
  assert_int_equal(start(&d, "4"), 0);
  uint8_t buf[512];
  int n = rule(&d, "rx_rule_manager", "127.0.0.1", 40000, "127.0.0.1", 5000, PCI0, buf, sizeof(buf));
  assert_true(is_ok(buf, n));
  n = flow(&d, "127.0.0.1 40000 127.0.0.1 5000", buf, sizeof(buf));
  assert_true(says(buf, n, "gpu " PCI0));
  n = flow(&d, "127.0.0.1 40001 127.0.0.1 5000", buf, sizeof(buf)); /* another port: no rule */
  assert_true(says(buf, n, "none"));
  n = flow(&d, "127.0.0.1 5000 127.0.0.1 40000", buf, sizeof(buf)); /* the other direction */
  assert_true(says(buf, n, "none"));
  n = flow(&d, "127.0.0.1 40000", buf, sizeof(buf));
  assert_true(says(buf, n, "none: malformed"));
  n = rule(&d, "rx_rule_uninstall", "127.0.0.1", 40000, "127.0.0.1", 5000, PCI0, buf, sizeof(buf));
  assert_true(is_ok(buf, n));
  n = flow(&d, "127.0.0.1 40000 127.0.0.1 5000", buf, sizeof(buf)); /* deleted */
  assert_true(says(buf, n, "none"));
  assert_true(recorded(&d, "flow 127.0.0.1:40000->127.0.0.1:5000 gpu=" PCI0));
  assert_true(recorded(&d, "flow 127.0.0.1:40001->127.0.0.1:5000 none"));
  assert_true(recorded(&d, "bad flow"));
  assert_int_equal(stop(&d), 0);
  cleanup(&d);
}

static void t_registry(void **state) {
  (void)state;
  struct daemon d;
  assert_int_equal(start(&d, "16"), 0);
  uint8_t req[64], buf[512];
  int fd = dial(&d, "rxdm_application_registry");
  int len = rxdm_encode_register(req, sizeof(req), 1);
  assert_int_equal(send(fd, req, (size_t)len, 0), len);
  int n = reply(fd, buf, sizeof(buf));
  assert_true(is_ok(buf, n));
  /* The plugin deregisters on the same connection. */
  len = rxdm_encode_register(req, sizeof(req), 0);
  assert_int_equal(send(fd, req, (size_t)len, 0), len);
  n = reply(fd, buf, sizeof(buf));
  assert_true(is_ok(buf, n));
  assert_int_equal(reply(fd, buf, sizeof(buf)), -1); /* and then it is closed */
  close(fd);
  /* A registration that just disconnects is noted. */
  fd = dial(&d, "rxdm_application_registry");
  len = rxdm_encode_register(req, sizeof(req), 1);
  assert_int_equal(send(fd, req, (size_t)len, 0), len);
  assert_true(is_ok(buf, reply(fd, buf, sizeof(buf))));
  close(fd);
  assert_int_equal(stop(&d), 0);
  assert_true(recorded(&d, "deregister"));
  assert_true(recorded(&d, "registered client dropped"));
  cleanup(&d);
}

/* Everything wrong a peer can send: an error answer each, or (for a message
 * never completed) nothing; the daemon serves on. */
static void t_bad_requests(void **state) {
  (void)state;
  struct daemon d;
  assert_int_equal(start(&d, "16"), 0);
  uint8_t buf[512], req[600];
  int n;
  /* Not protobuf: a truncated varint key. */
  n = ask(&d, "rx_rule_manager", "\x00\x03\xff\xff\xff", 5, buf, sizeof(buf));
  assert_true(says(buf, n, "INVALID_ARGUMENT"));
  /* A length beyond the bytes it frames. */
  n = ask(&d, "rx_rule_manager", "\x00\x02\x0a\x7f", 4, buf, sizeof(buf));
  assert_true(says(buf, n, "INVALID_ARGUMENT"));
  /* An empty message: no payload. */
  n = ask(&d, "rx_rule_uninstall", "\x00\x00", 2, buf, sizeof(buf));
  assert_true(says(buf, n, "Invalid Flow Steering Request"));
  /* The wrong request for the socket. */
  int len = rxdm_encode_register(req, sizeof(req), 1);
  n = ask(&d, "rx_rule_manager", req, (size_t)len, buf, sizeof(buf));
  assert_true(says(buf, n, "Invalid Flow Steering Request"));
  len = rxdm_encode_request_raw(req, sizeof(req), "hello");
  n = ask(&d, "rxdm_application_registry", req, (size_t)len, buf, sizeof(buf));
  assert_true(says(buf, n, "Invalid Application Register Request"));
  n = ask(&d, "queue_ids_by_gpu", req, (size_t)len, buf, sizeof(buf));
  assert_true(says(buf, n, "Invalid Argument"));
  /* Addresses RxDM would abort on, ports out of range, families mixed. */
  n = rule(&d, "rx_rule_manager", "not-an-ip", 1, "127.0.0.1", 2, PCI0, buf, sizeof(buf));
  assert_true(says(buf, n, "malformed flow"));
  n = rule(&d, "rx_rule_manager", "127.0.0.1", 70000, "127.0.0.1", 2, PCI0, buf, sizeof(buf));
  assert_true(says(buf, n, "malformed flow"));
  n = rule(&d, "rx_rule_manager", "127.0.0.1", 1, "::1", 2, PCI0, buf, sizeof(buf));
  assert_true(says(buf, n, "malformed flow"));
  n = rule(&d, "rx_rule_manager", "127.0.0.1", 1, "127.0.0.1", 2, "0000:99:00.0", buf, sizeof(buf));
  assert_true(says(buf, n, "NOT_FOUND"));
  /* A string longer than anything legitimate. */
  char big[300];
  memset(big, 'a', sizeof(big) - 1);
  big[sizeof(big) - 1] = 0;
  len = rxdm_encode_request_raw(req, sizeof(req), big);
  n = ask(&d, "get_gpu_metadata_" PCI0, req, (size_t)len, buf, sizeof(buf));
  assert_true(says(buf, n, "undecodable"));
  /* A frame announced but never completed, then gone. */
  int fd = dial(&d, "rx_rule_manager");
  assert_int_equal(send(fd, "\xff\xff\x0a", 3, 0), 3);
  close(fd);
  /* Many connections at once, more than it serves: the extra ones are closed. */
  int many[80];
  for (int i = 0; i < 80; i++) many[i] = dial(&d, "rx_rule_manager");
  for (int i = 0; i < 80; i++) close(many[i]);
  /* Still serving, once it has seen those go (a connection arriving while
   * all its slots are taken is refused: bounded retries). */
  for (int i = 0; i < 100; i++) {
    n = rule(&d, "rx_rule_manager", "127.0.0.1", 1, "127.0.0.1", 2, PCI0, buf, sizeof(buf));
    if (is_ok(buf, n)) break;
    usleep(20 * 1000);
  }
  assert_true(is_ok(buf, n));
  assert_true(recorded(&d, "bad ") && recorded(&d, "undecodable message"));
  assert_true(recorded(&d, "malformed 5-tuple src=not-an-ip:1"));
  assert_true(recorded(&d, "unknown GPU"));
  assert_int_equal(stop(&d), 0);
  cleanup(&d);
}

static void t_decode(void **state) {
  (void)state;
  struct rxdm_msg m, back;
  memset(&m, 0, sizeof(m));
  m.has_flow_type = m.has_queue_id = m.has_gpu = 1;
  m.flow_type = 5;
  m.queue_id = -1; /* negative int32: ten varint bytes */
  m.src.has_ip = m.src.has_port = m.dst.has_ip = m.dst.has_port = 1;
  strcpy(m.src.ip, "fe80::1");
  strcpy(m.dst.ip, "198.18.0.1");
  m.src.port = 65535;
  m.dst.port = 1;
  strcpy(m.gpu, PCI0);
  uint8_t buf[512];
  int n = rxdm_encode_rule(buf, sizeof(buf), &m);
  assert_true(n > 2);
  assert_int_equal(rxdm_decode(buf + 2, (size_t)n - 2, &back), 0);
  assert_int_equal(back.kind, RXDM_RULE);
  assert_int_equal(back.queue_id, -1);
  assert_string_equal(back.src.ip, "fe80::1");
  assert_int_equal(back.src.port, 65535);
  assert_string_equal(back.gpu, PCI0);
  /* Every truncation of it is refused, none crashes. */
  for (int cut = 1; cut < n - 2; cut++) {
    int rc = rxdm_decode(buf + 2, (size_t)cut, &back);
    assert_true(rc == 0 || rc == -EBADMSG);
  }
  assert_int_equal(rxdm_decode((const uint8_t *)"\x0b", 1, &back), -EBADMSG); /* wire type 3 */
  assert_int_equal(rxdm_decode((const uint8_t *)"\x00\x01", 2, &back), -EBADMSG); /* field 0 */
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(t_decode, teardown),   cmocka_unit_test_teardown(t_buffer, teardown),
      cmocka_unit_test_teardown(t_rules, teardown),    cmocka_unit_test_teardown(t_registry, teardown),
      cmocka_unit_test_teardown(t_flow_gpu, teardown),
      cmocka_unit_test_teardown(t_bad_requests, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
