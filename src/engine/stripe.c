/* Striping that follows each channel's speed (stripe.h). */
#include "engine/stripe.h"

#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/control.h"
#include "engine/endpoint.h"
#include "engine/peer.h"
#include "engine/route.h"

#define STRIPE_PERIOD_MS 100
/* A sample needs this much busy time to say anything about a speed. */
#define STRIPE_MIN_BUSY_NS 20000000ull

static uint64_t busy_of(const struct window *q, uint64_t now) {
  return q->busy_ns + (q->busy_since ? now - q->busy_since : 0);
}

void tpx__stripe_reset(struct tpx_peer *p, int c) {
  p->stripe_rate[c] = 0;
  p->stripe_acc_bytes[c] = p->stripe_acc_busy[c] = 0;
  p->stripe_bytes[c] = p->ch[c].sq.bytes_done;
  p->stripe_busy[c] = busy_of(&p->ch[c].sq, tpx__now_ns());
}

void tpx__stripe_init(struct tpx_peer *p) {
  tpx__route_pat_fixed(&p->tx_pat, p->nch);
  tpx__route_pat_fixed(&p->rx_pat, p->nch);
  p->nup = p->nch;
  p->stripe_next_ns = 0;
  for (int c = 0; c < p->nch && c < ROUTE_MAX_PAT; c++) tpx__stripe_reset(p, c);
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

static int slots_of(const struct route_pat *pat, int c) {
  int n = 0;
  for (int k = 0; k < pat->len; k++) n += pat->ch[k] == c;
  return n;
}

static int announce(struct tpx_peer *p, const struct route_pat *pat) {
  struct wire_sched m;
  m.len = pat->len;
  memcpy(m.ch, pat->ch, pat->len);
  p->tx_pat = *pat;
  p->next_first_ch = 0;
  return tpx__ctl_send(p, tpx__wire_put_sched(&p->out, &m));
}

/* A new pattern from the weights; announced when forced or when some
 * channel's share moved by more than one slot. */
static int plan(struct tpx_peer *p, int force) {
  uint32_t w[ROUTE_MAX_PAT];
  struct route_pat pat;
  weights(p, w);
  if (tpx__route_pat_weighted(&pat, w, p->nch) != 0) return 0; /* no channel left: the peer fails elsewhere */
  int moved = force;
  for (int c = 0; c < p->nch && !moved; c++) {
    int d = slots_of(&pat, c) - slots_of(&p->tx_pat, c);
    moved = d > 1 || d < -1;
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

int tpx__stripe_tick(struct tpx_peer *p, uint64_t now) {
  if (!p->sched || now < p->stripe_next_ns) return 0;
  p->stripe_next_ns = now + tpx__ms_to_ns(STRIPE_PERIOD_MS);
  for (int c = 0; c < p->nch; c++) {
    const struct window *q = &p->ch[c].sq;
    uint64_t busy = busy_of(q, now);
    if (busy < p->stripe_busy[c]) { /* the window was purged (a lost channel): start afresh */
      tpx__stripe_reset(p, c);
      continue;
    }
    uint64_t db = q->bytes_done - p->stripe_bytes[c], dt = busy - p->stripe_busy[c];
    if (p->ch[c].down || dt < STRIPE_MIN_BUSY_NS) continue; /* too little seen: keep the sample going */
    p->stripe_bytes[c] = q->bytes_done;
    p->stripe_busy[c] = busy;
    /* Bytes and busy time each decayed by 1/8 per sample, their ratio the
     * speed: a send completes once its bytes are in the socket's buffer, so a
     * window going busy after a pause first "moves" a buffer's worth at once;
     * over the last several samples that burst is a small part. */
    p->stripe_acc_bytes[c] = p->stripe_acc_bytes[c] - p->stripe_acc_bytes[c] / 8 + db;
    p->stripe_acc_busy[c] = p->stripe_acc_busy[c] - p->stripe_acc_busy[c] / 8 + dt;
    uint64_t kbs = p->stripe_acc_bytes[c] * 1000000ull / p->stripe_acc_busy[c]; /* bytes per ns x 1e6 = KB/s */
    p->stripe_rate[c] = kbs > UINT32_MAX ? UINT32_MAX : kbs ? (uint32_t)kbs : 1;
  }
  return plan(p, 0);
}

int tpx__stripe_replan(struct tpx_peer *p) {
  if (!p->sched) return 0;
  return plan(p, 1);
}

int tpx__stripe_on_sched(struct tpx_peer *p, const struct wire_frame *f) {
  struct wire_sched m;
  if (!p->sched)
    return tpx_err_quiet(TPX_EPROTO, "peer %s: a striping pattern, but adaptive striping was not agreed", p->where);
  int rc = tpx__wire_get_sched(f, &m);
  if (rc) return tpx_err_quiet(rc, "peer %s: bad striping pattern: %s", p->where, tpx_last_error());
  struct route_pat pat;
  pat.len = m.len;
  memcpy(pat.ch, m.ch, m.len);
  if (!tpx__route_pat_valid(&pat, p->nch))
    return tpx_err_quiet(TPX_EPROTO, "peer %s: striping pattern names a channel beyond its %d", p->where, p->nch);
  p->rx_pat = pat;
  return 0;
}
