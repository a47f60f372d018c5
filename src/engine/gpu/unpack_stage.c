/* The receive side of UNPACK transports (the TCPX contract: tcpx/contract.h,
 * docs/UNPACK.md): received bytes sit in scattered pages of the plugin's
 * bounce buffer, described by `cnt[slot]` loadMeta entries; the k-th receive
 * of a comm uses slot tpx__tcpx_slot(k). Per chunk: read cnt (acquire: it is
 * written after the entries) and validate the entries (tpx__tcpx_slot_read),
 * check they cover exactly the chunk, then gather - with
 * the CPU into host memory, or with the GPU unpacker (kernel / d2d / host
 * mode, one pooled event per chunk) into device memory. The engine calls
 * irecvConsumed only once this finished, oldest receive first. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "engine/gpu/gpu_path_int.h"

/* Copy the 24-byte {meta, bounce_buf, head} that accept's device handle
 * points to (device memory for TCPX, host or mapped memory for the
 * built-in transport's emulation). */
int tpx__unpack_window_setup(struct tpx_peer *p, struct window *q, struct gpu_window *gq) {
  tpx_net_dev_handle_t *dh = &p->ch[q->ch].recv_dev;
  if (dh->type != TPX_NET_DEV_UNPACK || !dh->handle)
    return tpx_err_quiet(TPX_EPROTO, "peer %s channel %d: the UNPACK transport's accept gave no device handle (type %d)",
                   p->where, q->ch, dh->type);
  tpx_gpu_ptr_info_t info;
  if (tpx__gpu_ptr_query(dh->handle, &info) != 0) info.mem = TPX_GPU_MEM_HOST;
  if (info.mem == TPX_GPU_MEM_DEVICE) {
    struct gpu_dev *d;
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

static int submit(struct gpu_window *gq, struct gslot *s, const tpx_unpack_meta_t *meta, uint32_t cnt) {
  struct gpu_dev *d = gq->g->devs[s->dev];
  if (!d) return tpx_err_quiet(TPX_EINTERNAL, "channel %d: GPU %d was never set up", gq->ch, s->dev);
  tpx_unpacker_t *u;
  int rc = tpx__gpu_dev_unpacker(gq->g, d, &u);
  if (rc) return rc;
  tpx_unpack_chunk_t c = {meta, meta, cnt, gq->dh.bounce_buf, SIZE_MAX, s->dst, (size_t)s->len};
  rc = tpx__unpack_submit(u, &c, &s->ticket);
  if (rc == TPX_EAGAIN) {
    s->deferred = 1; /* unpacker full: the slot keeps its entries, retry from poll */
    return 0;
  }
  if (rc) return tpx_err_quiet(rc, "channel %d: unpack of slot %u (%u entries) on GPU %d: %s", gq->ch, s->uslot, cnt,
                         s->dev, tpx_last_error());
  s->deferred = 0;
  gq->g->unpacked_gpu += s->len;
  return 0;
}

/* 1: done (CPU), 0: GPU work queued, < 0: error. */
int tpx__unpack_start(struct tpx_peer *p, struct window *q, struct gpu_window *gq, struct gslot *s) {
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
    rc = tpx__unpack_cpu(s->dst, (size_t)s->len, gq->dh.bounce_buf, SIZE_MAX, meta, cnt);
    if (rc) return rc;
    gq->g->unpacked_cpu += s->len;
    return 1;
  }
  s->busy = 1;
  return submit(gq, s, meta, cnt);
}

int tpx__unpack_poll(struct gpu_window *gq, struct gslot *s) {
  if (!s->busy) return 1;
  if (s->deferred) {
    tpx_unpack_meta_block_t *mb = gq->dh.meta;
    uint32_t cnt = (uint32_t)tpx__tcpx_cnt_load(mb, s->uslot); /* checked by tpx__unpack_start */
    int rc = submit(gq, s, mb->mem[s->uslot], cnt);
    if (rc) return rc;
    if (s->deferred) return 0;
  }
  int r = tpx__unpack_done(gq->g->devs[s->dev]->unpacker, s->ticket);
  if (r < 0) return tpx_err_quiet(r, "channel %d: unpack on GPU %d failed: %s", gq->ch, s->dev, tpx_last_error());
  if (r == 1) s->busy = 0;
  return r;
}

void tpx__unpack_purge(struct gpu_window *gq, struct gslot *s) {
  if (s->busy && !s->deferred) {
    int rc = tpx__unpack_wait(gq->g->devs[s->dev]->unpacker, s->ticket, 30000);
    if (rc) TPX_WARN("channel %d: unpack on GPU %d at teardown: %s", gq->ch, s->dev, tpx_last_error());
  }
  s->busy = 0;
  s->deferred = 0;
}
