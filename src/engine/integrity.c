/* Data integrity: chunks checked end to end (integrity.h). */
#include "engine/integrity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/error.h"
#include "common/log.h"
#include "engine/control.h"
#include "engine/core.h"
#include "engine/ids.h"

enum { SUM_NOT_YET = 0, SUM_HAVE = 1, SUM_NONE = 2 };

uint32_t tpx__sum_flag(const struct tpx_peer *p) { return p->ep->cfg.integrity ? HELLO_F_SUM : 0; }

void tpx__sum_agree(struct tpx_peer *p, uint32_t peer_flags) {
  p->sum = p->ep->cfg.integrity && (peer_flags & HELLO_F_SUM) != 0;
  if (p->ep->cfg.integrity && !p->sum)
    TPX_INFO("peer %s does not check data (an older version, or TPX_INTEGRITY=0 there): transfers with it "
             "carry no checksums", p->where);
}

/* ---- the sender ---- */
int tpx__sum_flush(struct tpx_peer *p) {
  struct tpx__wire_sum *m = &p->sum_out;
  if (!m->n) return 0;
  int rc = p->state == P_READY && p->fd >= 0 ? tpx__ctl_send(p, tpx__wire_put_sum(&p->out, m)) : 0;
  m->n = 0;
  return rc;
}

int tpx__sum_sent(struct tpx_peer *p, const struct tpx__op *o, uint64_t chunk, int have, uint32_t sum) {
  if (!p->sum) return 0;
  struct tpx__wire_sum *m = &p->sum_out;
  uint8_t what = tpx__op_what(o);
  uint64_t key = tpx__op_key(o);
  if (m->n && (m->n == WIRE_MAX_SUMS || m->what != what || m->id != key)) {
    int rc = tpx__sum_flush(p);
    if (rc) return rc;
  }
  m->what = what;
  m->id = key;
  m->chunk[m->n] = (uint32_t)chunk | (have ? 0 : WIRE_SUM_NONE);
  m->sum[m->n++] = have ? sum : 0;
  return 0;
}

/* ---- the receiver ---- */
void tpx__sum_op_free(struct tpx__op *o) {
  free(o->sums);
  free(o->sum_st);
  o->sums = NULL;
  o->sum_st = NULL;
}

/* Bounded by the transfer: 5 bytes a chunk, a chunk at least 4 KiB of
 * memory the receiver registered or posted. */
static int room(struct tpx__op *o) {
  if (o->sums) return 0;
  o->sums = malloc(o->nchunks * sizeof(*o->sums));
  o->sum_st = calloc(o->nchunks, 1);
  if (o->sums && o->sum_st) return 0;
  tpx__sum_op_free(o);
  return tpx_err_quiet(TPX_ENOMEM, "peer %s: out of memory for %llu chunks' checksums", o->peer->where,
                       (unsigned long long)o->nchunks);
}

int tpx__sum_op_start(struct tpx__op *o) {
  o->sum_bad = 0;
  if (!o->peer->sum || o->discard || !o->nchunks) return 0;
  return room(o); /* or the sums came first; a transfer's finish frees them (a repost starts anew) */
}

static void unchecked(struct tpx_peer *p) {
  if (p->sum_unchecked++ == 0)
    TPX_INFO("peer %s: chunks whose bytes only a GPU sees (GPU memory without host staging) are not "
             "checked (docs/SECURITY.md)", p->where);
}

/* The first mismatch of o: chunk on channel ch (-1: its inline data). */
static void mismatch(struct tpx__op *o, int ch, uint64_t chunk, uint32_t got, uint32_t want) {
  if (o->sum_bad) return;
  o->sum_bad = 1;
  o->sum_bad_ch = ch;
  o->sum_bad_chunk = chunk;
  o->sum_bad_got = got;
  o->sum_bad_want = want;
  if (ch >= 0)
    TPX_WARN("peer %s channel %d: chunk %llu of %s %llu failed its check (CRC-32C %08x, sent as %08x): the "
             "transfer fails", o->peer->where, ch, (unsigned long long)chunk, tpx__op_kind_name(o->kind),
             (unsigned long long)o->id, got, want);
  else
    TPX_WARN("peer %s: the inline data of %s %llu failed its check (CRC-32C %08x, sent as %08x): the transfer "
             "fails", o->peer->where, tpx__op_kind_name(o->kind), (unsigned long long)o->id, got, want);
}

int tpx__sum_check(struct tpx_peer *p, struct tpx__op *o, uint64_t chunk, int ch, int have, uint32_t sum) {
  if (!p->sum || !o->sums || chunk >= o->nchunks) return 1;
  uint8_t st = o->sum_st[chunk];
  if (st == SUM_NOT_YET) return 0;
  if (st == SUM_NONE || !have) {
    unchecked(p);
    return 1;
  }
  if (sum != o->sums[chunk]) mismatch(o, ch, chunk, sum, o->sums[chunk]);
  return 1;
}

int tpx__sum_inline(struct tpx__op *o, const uint8_t *data, uint64_t len, uint32_t sum) {
  uint32_t got = tpx__crc32c(0, data, (size_t)len);
  if (got == sum) return 0;
  mismatch(o, -1, 0, got, sum);
  return tpx__sum_verdict(o);
}

int tpx__sum_verdict(struct tpx__op *o) {
  if (!o->sum_bad) return 0;
  char m[512], where[64]; /* the transfer's message, clipped to its size */
  if (o->sum_bad_ch >= 0)
    snprintf(where, sizeof(where), "channel %d: chunk %llu", o->sum_bad_ch, (unsigned long long)o->sum_bad_chunk);
  else
    snprintf(where, sizeof(where), "the inline data");
  snprintf(m, sizeof(m), "peer %s %s of %s %llu arrived with other bytes than were sent (CRC-32C %08x, sent as "
           "%08x)", o->peer->where, where, tpx__op_kind_name(o->kind), (unsigned long long)o->id, o->sum_bad_got,
           o->sum_bad_want);
  size_t n = strnlen(m, sizeof(o->errmsg) - 1);
  memcpy(o->errmsg, m, n);
  o->errmsg[n] = 0;
  return TPX_EINTEGRITY;
}

int tpx__sum_on_frame(struct tpx_peer *p, const struct tpx__wire_frame *f) {
  struct tpx__wire_sum m;
  int rc = tpx__wire_get_sum(f, &m);
  if (rc) return rc;
  if (!p->sum) return tpx_err_quiet(TPX_EPROTO, "peer %s: checksums, but integrity was not agreed", p->where);
  /* a transfer that already ended (failed, cancelled) has no use for them */
  struct tpx__op *o = tpx__op_find(p, m.what, m.id, 0);
  if (!o || o->discard) return 0;
  for (uint16_t i = 0; i < m.n; i++) {
    uint32_t c = m.chunk[i] & ~WIRE_SUM_NONE;
    if (c >= o->nchunks)
      return tpx_err_quiet(TPX_EPROTO, "peer %s: checksum of chunk %u of %s %llu, which has %llu", p->where, c,
                           tpx__op_kind_name(o->kind), (unsigned long long)o->id, (unsigned long long)o->nchunks);
    if ((rc = room(o)) != 0) return rc;
    if (o->sum_st[c] != SUM_NOT_YET) continue; /* sent again with the chunk (failover): the same bytes */
    o->sum_st[c] = m.chunk[i] & WIRE_SUM_NONE ? SUM_NONE : SUM_HAVE;
    o->sums[c] = m.sum[i];
  }
  return 0;
}
