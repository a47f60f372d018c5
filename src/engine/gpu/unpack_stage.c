/* The receive side of UNPACK transports (the TCPX contract: tcpx/contract.h,
 * docs/UNPACK.md): received bytes sit in scattered pages of the plugin's
 * bounce buffer, described by `cnt[slot]` loadMeta entries; the k-th receive
 * of a comm uses slot tpx__tcpx_slot(k). Per chunk: read cnt (acquire: it is
 * written after the entries) and validate the entries (tpx__tcpx_slot_read),
 * check they cover exactly the chunk, then gather - with
 * the CPU into host memory, or with the GPU unpacker (kernel / d2d / host
 * mode) into device memory, several completed chunks per launch. The
 * engine calls irecvConsumed only once this finished, oldest receive
 * first. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "engine/gpu/gpu_path_int.h"

/* Copy the 24-byte {meta, bounce_buf, head} that accept's device handle
 * points to (device memory for TCPX, host or mapped memory for the
 * built-in transport's emulation). */
int tpx__unpack_stage_window_setup(struct tpx_peer *p, struct tpx__window *q, struct tpx__gpu_window *gq) {
  tpx_net_dev_handle_t *dh = &p->ch[q->ch].recv_dev;
  if (dh->type != TPX_NET_DEV_UNPACK || !dh->handle)
    return tpx_err_quiet(TPX_EPROTO, "peer %s channel %d: the UNPACK transport's accept gave no device handle (type %d)",
                   p->where, q->ch, dh->type);
  tpx_gpu_ptr_info_t info;
  if (tpx__gpu_ptr_query(dh->handle, &info) != 0) info.mem = TPX_GPU_MEM_HOST;
  if (info.mem == TPX_GPU_MEM_DEVICE) {
    struct tpx__gpu_dev *d;
    int rc = tpx__gpu_dev_get(gq->g, info.dev, &d);
    if (rc == 0) rc = tpx__gpu_memcpy(info.dev, &gq->dh, dh->handle, sizeof(gq->dh));
    if (rc)
      return tpx_err_quiet(rc, "peer %s channel %d: reading the unpack device handle on GPU %d: %s", p->where, q->ch,
                     info.dev, tpx_last_error());
  } else {
    memcpy(&gq->dh, dh->handle, sizeof(gq->dh));
  }
  if (!gq->dh.meta || !gq->dh.bounce_buf)
    return tpx_err_quiet(TPX_EPROTO, "peer %s channel %d: unpack device handle without %s", p->where, q->ch,
                   gq->dh.meta ? "bounce buffer" : "metadata");
  tpx_gpu_ptr_info_t bi;
  gq->bounce_on_gpu = tpx__gpu_ptr_query(gq->dh.bounce_buf, &bi) == 0 && bi.mem == TPX_GPU_MEM_DEVICE;
  gq->have_dh = 1;
  TPX_DEBUG("peer %s channel %d: unpack metadata %p, bounce buffer %p", p->where, q->ch, gq->dh.meta,
            gq->dh.bounce_buf);
  return 0;
}

/* UNPACK receives into GPU memory: a completed chunk waits (deferred) for
 * the comm's next poll; then the chunks completed since the last one, the
 * oldest's or later, are gathered, up to UNPACK_BATCH chunks (and
 * UNPACK_BATCH_FRAGS entries, inside the kernel's parameter block) per
 * launch: one launch and one completion per chunk were what the receiving
 * progress thread spent its time on. Later chunks do not wait for the
 * oldest's launch to finish (as staging's copies to the GPU, in_batch in
 * staging.c); irecvConsumed still goes oldest first, each after its own. */
#define UNPACK_BATCH 4
#define UNPACK_BATCH_FRAGS 1024

/* One launch for chunks run[0..n) of GPU dev: 0 queued (every slot gets
 * the ticket), TPX_EAGAIN the unpacker is full (they stay deferred), < 0. */
static int submit(struct tpx__gpu_window *gq, struct tpx__gslot **run, uint32_t n) {
  tpx_unpack_meta_block_t *mb = gq->dh.meta;
  tpx_unpack_chunk_t c;
  int rc;
  if (n == 1) { /* the plugin's entries as they are (tpx__unpack_stage_start checked them) */
    const tpx_unpack_meta_t *meta = mb->mem[run[0]->uslot];
    c = (tpx_unpack_chunk_t){meta, meta, run[0]->ucnt, gq->dh.bounce_buf, SIZE_MAX, run[0]->dst, (size_t)run[0]->len};
  } else {
    /* Entries copied, each chunk's checked again against its own size (what
     * is checked is what runs), destinations made relative to the lowest. */
    uint8_t *lo, *hi;
    tpx__gslot_span(run, n, &lo, &hi);
    uint32_t ne = 0;
    for (uint32_t k = 0; k < n; k++) {
      uint32_t cnt = run[k]->ucnt;
      uint64_t total = 0;
      memcpy(gq->ubatch + ne, mb->mem[run[k]->uslot], cnt * sizeof(*gq->ubatch));
      rc = tpx__tcpx_unpack_validate(gq->ubatch + ne, cnt, SIZE_MAX, (size_t)run[k]->len, NULL, &total);
      if (rc == 0 && total != run[k]->len) rc = TPX_EPROTO;
      if (rc)
        return tpx_err_quiet(rc, "channel %d: unpack slot %u changed after its receive completed", gq->ch,
                             run[k]->uslot);
      for (uint32_t j = 0; j < cnt; j++) gq->ubatch[ne + j].dst_off += (uint64_t)(run[k]->dst - lo);
      ne += cnt;
    }
    c = (tpx_unpack_chunk_t){gq->ubatch, gq->ubatch, ne, gq->dh.bounce_buf, SIZE_MAX, lo, (size_t)(hi - lo)};
  }
  uint64_t ticket = 0;
  rc = tpx__gpu_unpack_submit(gq->g, run[0]->dev, &c, &ticket);
  if (rc == TPX_EAGAIN) return rc; /* the slots stay deferred: the next poll */
  if (rc)
    return tpx_err_quiet(rc, "channel %d: unpack of %u chunks (slot %u on) on GPU %d: %s", gq->ch, n, run[0]->uslot,
                         run[0]->dev, tpx_last_error());
  for (uint32_t k = 0; k < n; k++) {
    run[k]->ticket = ticket;
    run[k]->deferred = 0;
    gq->g->unpacked_gpu += run[k]->len;
  }
  tpx__gpu_sum_after_unpack(gq->g, run[0]->dev, ticket, run, n);
  return 0;
}

/* Deferred unpacks from s on in ring order (their receives completed in
 * that order), launched in runs. 0, or < 0. */
static int unpack_batch(struct tpx__gpu_window *gq, struct tpx__gslot *s) {
  if (!gq->ubatch && !(gq->ubatch = malloc(UNPACK_BATCH_FRAGS * sizeof(*gq->ubatch))))
    return tpx_err_quiet(TPX_ENOMEM, "channel %d: unpack entries", gq->ch);
  uint32_t at = (uint32_t)(s - gq->slots);
  for (uint32_t i = 0; i < gq->cap;) {
    struct tpx__gslot *run[UNPACK_BATCH];
    uint32_t n = 0, ne = 0;
    for (; i < gq->cap && n < UNPACK_BATCH; i++) {
      struct tpx__gslot *x = &gq->slots[(at + i) % gq->cap];
      if (!x->busy || x->mode != GS_UNPACK_GPU) {
        i = gq->cap;
        break;
      }
      if (!x->deferred) continue;
      if (n && (x->dev != run[0]->dev || ne + x->ucnt > UNPACK_BATCH_FRAGS)) break;
      run[n++] = x;
      ne += x->ucnt;
      if (ne > UNPACK_BATCH_FRAGS) { /* a chunk of many fragments goes alone */
        i++;
        break;
      }
    }
    if (n == 0) return 0;
    int rc = submit(gq, run, n);
    if (rc == TPX_EAGAIN) return 0;
    if (rc) return rc;
  }
  return 0;
}

/* 1: done (CPU), 0: GPU work queued, < 0: error. */
int tpx__unpack_stage_start(struct tpx_peer *p, struct tpx__window *q, struct tpx__gpu_window *gq,
                            struct tpx__gslot *s) {
  if (!gq->have_dh) return tpx_err_quiet(TPX_EINTERNAL, "peer %s channel %d: no unpack metadata", p->where, q->ch);
  tpx_unpack_meta_block_t *mb = gq->dh.meta;
  uint32_t cnt = 0;
  uint64_t total = 0;
  /* The plugin does not publish its bounce size: sources are unbounded. */
  int rc = tpx__tcpx_slot_read(mb, s->uslot, SIZE_MAX, (size_t)s->len, &cnt, &total);
  if (rc) return tpx_err_quiet(rc, "peer %s channel %d: %s", p->where, q->ch, tpx_last_error());
  const tpx_unpack_meta_t *meta = mb->mem[s->uslot];
  if (total != s->len)
    return tpx_err_quiet(TPX_EPROTO, "peer %s channel %d: unpack slot %u describes %llu bytes, the chunk has %llu", p->where,
                   q->ch, s->uslot, (unsigned long long)total, (unsigned long long)s->len);
  if (s->mode == GS_UNPACK_CPU) {
    if (gq->bounce_on_gpu)
      return tpx_err_quiet(TPX_ENOTSUP, "peer %s channel %d: a host receive buffer cannot be filled from bounce pages in "
                     "GPU memory (TCPX devmem): receive into registered GPU memory on this transport", p->where, q->ch);
    rc = tpx__tcpx_unpack_cpu(s->dst, (size_t)s->len, gq->dh.bounce_buf, SIZE_MAX, meta, cnt);
    if (rc) return rc;
    gq->g->unpacked_cpu += s->len;
    return 1;
  }
  s->ucnt = cnt;
  s->busy = 1;
  s->deferred = 1; /* launched by the comm's next tpx__unpack_stage_poll (unpack_batch) */
  return 0;
}

int tpx__unpack_stage_poll(struct tpx__gpu_window *gq, struct tpx__gslot *s) {
  if (!s->busy) return 1;
  int rc = unpack_batch(gq, s); /* what completed since the last pass, the head's or later */
  if (rc) return rc;
  if (s->deferred) return 0;
  int r = tpx__unpacker_done(gq->g->devs[s->dev]->unpacker, s->ticket);
  if (r < 0) return tpx_err_quiet(r, "channel %d: unpack on GPU %d failed: %s", gq->ch, s->dev, tpx_last_error());
  if (r == 1) s->busy = 0;
  return r;
}

void tpx__unpack_stage_purge(struct tpx__gpu_window *gq, struct tpx__gslot *s) {
  if (s->busy && !s->deferred) {
    int rc = tpx__unpacker_wait(gq->g->devs[s->dev]->unpacker, s->ticket, 30000);
    if (rc) TPX_WARN("channel %d: unpack on GPU %d at teardown: %s", gq->ch, s->dev, tpx_last_error());
  }
  s->busy = 0;
  s->deferred = 0;
}
