/* Notifications (src/engine/notif.c, and initiator.c's handling of MSG_NOTIF): a
 * peer's standalone notifications, as control frames from the input, and
 * its incoming writes carrying notifications, finished in order or failed,
 * while the application pops the endpoint's queue. Each step is chosen by
 * the input; the frames are decoded by tpx__wire_get_notif and admitted by
 * tpx__admit_notif under small limits (TPX_MAX_NOTIFS 1..16,
 * TPX_MAX_NOTIF_BYTES up to 16 KiB), as initiator.c and target.c do (a refusal
 * drops the peer there; here the harness forgets the peer's queue and goes
 * on).
 *
 * Checked against a model: the application pops exactly the notifications
 * of finished, successful requests and standalone ones, in arrival order,
 * with their bytes; none is popped before the data of a write ahead of it
 * landed; the peer's counts (notif_n, notif_bytes: each charged
 * tpx__notif_cost) and the endpoint's are what it holds and never exceed
 * the limits; forgetting the peer leaves nothing of it. */
#include "engine/admit.h"
#include "engine/core.h"
#include "engine/notif.h"
#include "engine/op.h"
#include "engine/peer.h"
#include "engine/wire.h"
#include "fuzz.h"
#include "tpx/error.h"

#define MAX_MODEL 256

struct note {
  uint32_t len;
  uint8_t *msg; /* a copy */
};

struct model {
  struct note q[MAX_MODEL]; /* delivered, not popped: the endpoint's queue */
  int qh, qn;
  struct tpx__op *ops[MAX_MODEL]; /* the peer's FIFO, oldest first */
  int oh, on;
  uint32_t held_n; /* what the peer's counts must say */
  uint64_t held_bytes;
};

static void deliver(struct model *m, const uint8_t *msg, uint32_t len) {
  FUZZ_CHECK(m->qn < MAX_MODEL);
  uint8_t *c = malloc(len ? len : 1);
  FUZZ_CHECK(c);
  if (len) memcpy(c, msg, len);
  m->q[(m->qh + m->qn++) % MAX_MODEL] = (struct note){len, c};
}

/* A request into the FIFO (a K_NOTIF one is final already). */
static void push_op(struct tpx_peer *p, struct model *m, int kind, const uint8_t *msg, uint32_t len,
                    int with) {
  struct tpx__op *o = calloc(1, sizeof(*o));
  FUZZ_CHECK(o);
  o->kind = kind;
  o->phase = kind == K_NOTIF ? PH_FINAL : PH_DATA;
  o->has_notif = with;
  o->notif_len = len;
  o->notif = len ? malloc(len) : NULL;
  if (len) memcpy(o->notif, msg, len);
  tpx__notif_fifo_push(p, o);
  m->ops[(m->oh + m->on++) % MAX_MODEL] = o;
  if (with) m->held_n++, m->held_bytes += tpx__notif_cost(len);
}

static void free_op(struct tpx__op *o) {
  free(o->notif);
  free(o);
}

/* The oldest write finishes (err: failed); what is final at the head leaves. */
static void finish_head(struct tpx_peer *p, struct model *m, int err) {
  for (int k = 0; k < m->on; k++) {
    struct tpx__op *o = m->ops[(m->oh + k) % MAX_MODEL];
    if (o->phase == PH_FINAL) continue;
    o->phase = PH_FINAL;
    o->err = err;
    break;
  }
  struct tpx__op *o;
  while ((o = tpx__notif_fifo_pop_done(p)) != NULL) {
    FUZZ_CHECK(m->on > 0 && o == m->ops[m->oh]);
    m->oh = (m->oh + 1) % MAX_MODEL;
    m->on--;
    if (o->has_notif) {
      if (o->err == 0)
        deliver(m, o->notif, o->notif_len);
      else
        m->held_n--, m->held_bytes -= tpx__notif_cost(o->notif_len);
    }
    free_op(o);
  }
}

static void pop_one(tpx_endpoint_t *ep, struct model *m) {
  static tpx_notif_t n;
  int got = tpx__notif_pop(ep, &n);
  FUZZ_CHECK(got == (m->qn > 0));
  if (!got) return;
  struct note *e = &m->q[m->qh];
  FUZZ_CHECK(n.len == e->len && (e->len == 0 || memcmp(n.msg, e->msg, e->len) == 0));
  FUZZ_CHECK(strcmp(n.peer_name, "peer") == 0);
  free(e->msg);
  m->qh = (m->qh + 1) % MAX_MODEL;
  m->qn--;
  m->held_n--;
  m->held_bytes -= tpx__notif_cost(e->len);
}

/* The peer is dropped: its FIFO goes (nothing delivered), then its queue. */
static void forget(tpx_endpoint_t *ep, struct tpx_peer *p, struct model *m) {
  struct tpx__op *o;
  while ((o = tpx__notif_fifo_pop(p)) != NULL)
    free_op(o);
  tpx__notif_forget_peer(ep, p);
  FUZZ_CHECK(p->notif_n == 0 && p->notif_bytes == 0 && ep->notif_n == 0 && ep->notif_head == NULL);
  for (int k = 0; k < m->qn; k++)
    free(m->q[(m->qh + k) % MAX_MODEL].msg);
  memset(m, 0, sizeof(*m));
}

/* A standalone notification frame from the input, as initiator.c takes it. */
static void on_frame(tpx_endpoint_t *ep, struct tpx_peer *p, struct model *m, struct fuzz_in *in) {
  size_t got;
  const uint8_t *b =
      fuzz_bytes(in, WIRE_HDR_BYTES + 4 + (fuzz_u16(in) % (TPX_NOTIF_MAX + 8)), &got);
  struct tpx__wire_frame f;
  if (tpx__wire_frame_parse(b, got, &f) <= 0 || f.type != MSG_NOTIF ||
      m->qn + m->on >= MAX_MODEL - 1)
    return;
  struct tpx__wire_notif n;
  if (tpx__wire_get_notif(&f, &n) != 0) return;
  if (tpx__admit_notif(p, n.len) != 0) {
    forget(ep, p, m);
    return;
  }
  if (!p->fifo_head) {
    m->held_n++, m->held_bytes += tpx__notif_cost(n.len);
    tpx__notif_arrive(p, n.msg, n.len);
    deliver(m, n.msg, n.len);
  } else {
    push_op(p, m, K_NOTIF, n.msg, n.len, 1);
  }
}

static void step(tpx_endpoint_t *ep, struct tpx_peer *p, struct model *m, struct fuzz_in *in) {
  uint8_t op = fuzz_u8(in);
  switch (op % 6) {
  case 0: on_frame(ep, p, m, in); break;
  case 1: { /* an incoming write, with a notification or not */
    size_t got;
    const uint8_t *b = fuzz_bytes(in, fuzz_u16(in) % (TPX_NOTIF_MAX + 1), &got);
    int with = op & 8;
    if (m->on == MAX_MODEL - 1 || m->qn + m->on >= MAX_MODEL - 1) break;
    if (with && tpx__admit_notif(p, (uint32_t)got) != 0) {
      forget(ep, p, m);
      break;
    }
    push_op(p, m, K_IN_WRITE, b, (uint32_t)got, with);
    break;
  }
  case 2: finish_head(p, m, 0); break;
  case 3: finish_head(p, m, TPX_EREMOTE); break;
  case 4: pop_one(ep, m); break;
  default: forget(ep, p, m); break;
  }
  FUZZ_CHECK(p->notif_n == m->held_n && p->notif_bytes == m->held_bytes && ep->notif_bytes == m->held_bytes);
  FUZZ_CHECK(p->notif_n <= (uint32_t)ep->cfg.max_notifs &&
             p->notif_bytes <= ep->cfg.max_notif_bytes);
  FUZZ_CHECK(ep->notif_n == m->qn);
}

static void fuzz_setup(void) {}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fuzz_in in = {data, size, 0};
  static tpx_endpoint_t ep;
  static struct tpx_peer p;
  static struct model m;
  memset(&ep, 0, sizeof(ep));
  memset(&p, 0, sizeof(p));
  memset(&m, 0, sizeof(m));
  tpx_config_defaults(&ep.cfg);
  ep.cfg.max_notifs = 1 + fuzz_u8(&in) % 16;
  ep.cfg.max_notif_bytes = fuzz_u16(&in) % (16 * 1024 + 1);
  snprintf(ep.name, sizeof(ep.name), "fuzz");
  p.ep = &ep;
  snprintf(p.name, sizeof(p.name), "peer");
  snprintf(p.where, sizeof(p.where), "peer (fuzz)");
  for (int steps = 0; fuzz_more(&in) && steps < 512; steps++)
    step(&ep, &p, &m, &in);
  forget(&ep, &p, &m);
  return 0;
}
