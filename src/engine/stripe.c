/* Striping that follows each channel's speed (stripe.h). */
#include "engine/stripe.h"

#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/control.h"
#include "engine/core.h"
#include "engine/peer.h"
#include "engine/route.h"

#define STRIPE_PERIOD_MS 100
/* The peer's landing speed of a channel counts while this fresh. */
#define STRIPE_PEER_FRESH_MS 1000
/* A channel left out for being too slow is tried again this often. */
#define STRIPE_PROBE_MS 2000
/* A sample needs this much busy time to say anything about a speed. */
#define STRIPE_MIN_BUSY_NS 20000000ull

static uint64_t busy_of(const struct tpx__window *q, uint64_t now) {
  return q->busy_ns + (q->busy_since ? now - q->busy_since : 0);
}

static void base_now(const struct tpx__window *q, uint64_t now, struct tpx__stripe_base *b) {
  b->bytes = q->bytes_done;
  b->busy = busy_of(q, now);
}

/* What window q moved since base b: SAMPLE_OK with the bytes and busy time
 * (the caller that takes them moves b on, base_now), SAMPLE_NONE too little
 * busy time yet, SAMPLE_PURGED the window was purged (a lost channel: its
 * busy time went back; b starts afresh). */
enum { SAMPLE_NONE, SAMPLE_OK, SAMPLE_PURGED };
static int sample(const struct tpx__window *q, uint64_t now, struct tpx__stripe_base *b, uint64_t *db, uint64_t *dt) {
  uint64_t busy = busy_of(q, now);
  if (busy < b->busy) {
    base_now(q, now, b);
    return SAMPLE_PURGED;
  }
  *db = q->bytes_done - b->bytes;
  *dt = busy - b->busy;
  return *dt < STRIPE_MIN_BUSY_NS ? SAMPLE_NONE : SAMPLE_OK;
}

void tpx__stripe_reset(struct tpx_peer *p, int c) {
  p->stripe_rate[c] = 0;
  p->stripe_peer_rate[c] = 0;
  p->stripe_acc_bytes[c] = p->stripe_acc_busy[c] = 0;
  base_now(&p->ch[c].sq, tpx__now_ns(), &p->stripe_tx[c]);
}

void tpx__stripe_init(struct tpx_peer *p) {
  tpx__route_pat_fixed(&p->tx_pat, p->nch);
  tpx__route_pat_fixed(&p->rx_pat, p->nch);
  p->nup = p->nch;
  p->stripe_next_ns = 0;
  p->stripe_chunks = ROUTE_MAX_PAT;
  for (int c = 0; c < p->nch && c < ROUTE_MAX_PAT; c++) {
    tpx__stripe_reset(p, c);
    p->stripe_probe_ns[c] = 0;
  }
}

/* Each channel's weight: its measured speed; one within a fifth of the
 * fastest counts as the fastest (channels alike share equally: measurement
 * noise never skews the pattern, which a transfer of a few chunks feels);
 * one not yet measured gets the fastest (so it is tried); a lost one 0. */
static void weights(const struct tpx_peer *p, uint32_t *w) {
  uint32_t best = 0;
  for (int c = 0; c < p->nch; c++)
    if (!p->ch[c].down && p->stripe_rate[c] > best) best = p->stripe_rate[c];
  for (int c = 0; c < p->nch; c++) {
    if (p->ch[c].down) w[c] = 0;
    else if (p->stripe_rate[c] && (uint64_t)p->stripe_rate[c] * 5 < (uint64_t)best * 4) w[c] = p->stripe_rate[c];
    else w[c] = best ? best : 1;
  }
}

/* A channel so slow that one chunk on it takes longer than a typical
 * transfer's share on the others would set every transfer's end: with the
 * chunks of a typical transfer (p->stripe_chunks) given out one at a time
 * as the pattern's slots are (route.c), a slower channel that gets none is
 * left out, but for one period every STRIPE_PROBE_MS, so that its speed
 * is measured again (a link that recovers comes back). */
static void leave_out_slow(struct tpx_peer *p, uint32_t *w, uint64_t now) {
  uint32_t best = 0, got[ROUTE_MAX_PAT] = {0};
  for (int c = 0; c < p->nch; c++)
    if (w[c] > best) best = w[c];
  uint32_t n = p->stripe_chunks < ROUTE_MAX_PAT ? p->stripe_chunks : ROUTE_MAX_PAT;
  for (uint32_t k = 0; k < n; k++) {
    int pick = -1;
    for (int c = 0; c < p->nch; c++)
      if (w[c] && (pick < 0 || (uint64_t)(got[c] + 1) * w[pick] < (uint64_t)(got[pick] + 1) * w[c])) pick = c;
    got[pick]++;
  }
  for (int c = 0; c < p->nch; c++) {
    if (!w[c] || w[c] == best || got[c]) continue;
    if (now - p->stripe_probe_ns[c] >= tpx__ms_to_ns(STRIPE_PROBE_MS)) p->stripe_probe_ns[c] = now; /* probed */
    else w[c] = 0;
  }
}

static int slots_of(const struct tpx__route_pat *pat, int c) {
  int n = 0;
  for (int k = 0; k < pat->len; k++) n += pat->ch[k] == c;
  return n;
}

static int announce(struct tpx_peer *p, const struct tpx__route_pat *pat) {
  struct tpx__wire_sched m;
  m.len = pat->len;
  memcpy(m.ch, pat->ch, pat->len);
  p->tx_pat = *pat;
  p->next_first_ch = 0;
  return tpx__ctl_send(p, tpx__wire_put_sched(&p->out, &m));
}

/* A new pattern from the weights; announced when forced, when some
 * channel's share moved by more than one slot, or a channel was left out or
 * taken in. */
static int plan(struct tpx_peer *p, int force) {
  uint32_t w[ROUTE_MAX_PAT];
  struct tpx__route_pat pat;
  weights(p, w);
  leave_out_slow(p, w, tpx__now_ns());
  if (tpx__route_pat_weighted(&pat, w, p->nch) != 0) return 0; /* no channel left: the peer fails elsewhere */
  int moved = force;
  for (int c = 0; c < p->nch && !moved; c++) {
    int now_in = slots_of(&pat, c), was_in = slots_of(&p->tx_pat, c), d = now_in - was_in;
    moved = d > 1 || d < -1 || !now_in != !was_in; /* a channel left out or taken in always counts */
  }
  if (!moved) return 0;
  if (TPX_LOG_DEBUG <= tpx__log_level) {
    char line[512];
    int off = 0;
    for (int c = 0; c < p->nch && off < (int)sizeof(line) - 40; c++)
      off += snprintf(line + off, sizeof(line) - (size_t)off, " ch%d %d@%uKB/s", c, slots_of(&pat, c), p->stripe_rate[c]);
    TPX_DEBUG("peer %s: striping pattern%s:%s", p->where, force ? " (channels changed)" : "", line);
  }
  return announce(p, &pat);
}

/* Our receive windows' landing speeds, told to the peer (CHAN_RATE): a
 * send completes once its bytes are in the socket's buffer, so the sender's
 * own measure overstates a slow link; what lands is the truth. */
static int tell_rates(struct tpx_peer *p, uint64_t now) {
  for (int c = 0; c < p->nch; c++) {
    const struct tpx__window *q = &p->ch[c].rq;
    uint64_t db = 0, dt = 0;
    if (p->ch[c].down) { /* nothing lands: start afresh when it is back */
      base_now(q, now, &p->stripe_rx[c]);
      continue;
    }
    /* busy time with nothing landed stays in the next sample: a stalled link is slow */
    if (sample(q, now, &p->stripe_rx[c], &db, &dt) != SAMPLE_OK || !db) continue;
    base_now(q, now, &p->stripe_rx[c]);
    uint64_t kbs = db * 1000000ull / dt;
    struct tpx__wire_chan m = {
        .step = CHAN_RATE, .ch = (uint16_t)c, .gen = kbs > UINT32_MAX ? UINT32_MAX : (uint32_t)kbs};
    int rc = tpx__ctl_send(p, tpx__wire_put_chan(&p->out, &m));
    if (rc) return rc;
  }
  return 0;
}

void tpx__stripe_on_rate(struct tpx_peer *p, int c, uint32_t kbs) {
  uint32_t r = p->stripe_peer_rate[c];
  p->stripe_peer_rate[c] = r && kbs ? (uint32_t)(((uint64_t)r * 3 + kbs) / 4) : kbs;
  p->stripe_peer_at[c] = tpx__now_ns();
}

int tpx__stripe_tick(struct tpx_peer *p, uint64_t now) {
  if (!p->sched || now < p->stripe_next_ns) return 0;
  p->stripe_next_ns = now + tpx__ms_to_ns(STRIPE_PERIOD_MS);
  for (int c = 0; c < p->nch; c++) {
    uint64_t db = 0, dt = 0;
    int r = sample(&p->ch[c].sq, now, &p->stripe_tx[c], &db, &dt);
    if (r == SAMPLE_PURGED) tpx__stripe_reset(p, c); /* a lost channel's window: measured afresh */
    if (r != SAMPLE_OK || p->ch[c].down) continue;    /* too little seen: keep the sample going */
    base_now(&p->ch[c].sq, now, &p->stripe_tx[c]);
    /* Bytes and busy time each decayed by 1/8 per sample, their ratio the
     * speed: a send completes once its bytes are in the socket's buffer, so a
     * window going busy after a pause first "moves" a buffer's worth at once;
     * over the last several samples that burst is a small part. */
    p->stripe_acc_bytes[c] = p->stripe_acc_bytes[c] - p->stripe_acc_bytes[c] / 8 + db;
    p->stripe_acc_busy[c] = p->stripe_acc_busy[c] - p->stripe_acc_busy[c] / 8 + dt;
    uint64_t kbs = p->stripe_acc_bytes[c] * 1000000ull / p->stripe_acc_busy[c]; /* bytes per ns x 1e6 = KB/s */
    p->stripe_rate[c] = kbs > UINT32_MAX ? UINT32_MAX : kbs ? (uint32_t)kbs : 1;
  }
  for (int c = 0; c < p->nch; c++) /* the peer's landing speed, where it said one lately, is the truth */
    if (p->stripe_peer_rate[c] && now - p->stripe_peer_at[c] < tpx__ms_to_ns(STRIPE_PEER_FRESH_MS) &&
        p->stripe_peer_rate[c] < p->stripe_rate[c])
      p->stripe_rate[c] = p->stripe_peer_rate[c];
  int rc = tell_rates(p, now);
  return rc ? rc : plan(p, 0);
}

int tpx__stripe_replan(struct tpx_peer *p) {
  if (!p->sched) return 0;
  return plan(p, 1);
}

int tpx__stripe_on_sched(struct tpx_peer *p, const struct tpx__wire_frame *f) {
  struct tpx__wire_sched m;
  if (!p->sched)
    return tpx_err_quiet(TPX_EPROTO, "peer %s: a striping pattern, but adaptive striping was not agreed", p->where);
  int rc = tpx__wire_get_sched(f, &m);
  if (rc) return tpx_err_quiet(rc, "peer %s: bad striping pattern: %s", p->where, tpx_last_error());
  struct tpx__route_pat pat;
  pat.len = m.len;
  memcpy(pat.ch, m.ch, m.len);
  if (!tpx__route_pat_valid(&pat, p->nch))
    return tpx_err_quiet(TPX_EPROTO, "peer %s: striping pattern names a channel beyond its %d", p->where, p->nch);
  p->rx_pat = pat;
  return 0;
}
