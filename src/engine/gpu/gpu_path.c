/* The GPU data path's entry points: endpoint setup from the transport's
 * properties, per-comm state, the post hooks that pick a chunk's path, and
 * the receive consume stage (staging copy or unpack, then FIFO release by
 * the engine). See gpu_path.h. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/gpu/gpu_path.h"
#include "engine/gpu/gpu_path_int.h"
#include "engine/mem.h"
#include "net/caps.h"

int tpx__gpu_ep_init(tpx_endpoint_t *ep) {
  int unpack = 0, cuda_all = 1, version = TPX_TCPX_DEV_VERSION, nopci = -1;
  for (int d = 0; d < ep->ndev; d++) {
    tpx_net_props_t pr;
    memset(&pr, 0, sizeof(pr));
    int rc = ep->net->ops->get_properties(ep->net, d, &pr);
    if (rc) return tpx_err(rc, "endpoint %s: properties of net device %d: %s", ep->name, d, tpx_last_error());
    if (pr.dev_type == TPX_NET_DEV_UNPACK) {
      unpack = 1;
      version = pr.dev_version;
    }
    if (!(pr.ptr_support & TPX_PTR_CUDA)) cuda_all = 0;
    if (nopci < 0 && pr.pci_path[0] == '\0' && tpx__net_cuda_reg_needs_pci(ep->net)) nopci = d;
  }
  if (unpack && version != TPX_TCPX_DEV_VERSION)
    return tpx_err(TPX_EVERSION, "endpoint %s: transport %s offers UNPACK device offload version %d, only %d is "
                   "supported", ep->name, ep->net->name, version, TPX_TCPX_DEV_VERSION);
  if (!unpack && !tpx__gpu_built()) return 0; /* host memory only: nothing to do per chunk */
  int mode = TPX_UNPACK_KERNEL;
  if (tpx__unpacker_mode_parse(ep->cfg.unpack, &mode) != 0)
    return tpx_err(TPX_EINVAL, "endpoint %s: TPX_UNPACK=%s: expected kernel, d2d or host", ep->name, ep->cfg.unpack);
  struct tpx__gpu_ep *g = calloc(1, sizeof(*g));
  if (!g) return tpx_err(TPX_ENOMEM, "endpoint %s: out of memory", ep->name);
  g->ep = ep;
  g->unpack = unpack;
  g->cuda_ptr = cuda_all;
  g->send_stage = !cuda_all || ep->net->caps.builtin;
  g->recv_stage = !cuda_all && !unpack;
  g->unpack_mode = mode;
  g->cuda_reg_nopci = nopci;
  /* Staging copies: SM copies (the kernel unpacker) in kernel mode, the copy
   * engine otherwise (docs/notes/gpu-vs-host-memory.md). */
  g->stage_sm[0] = g->stage_sm[1] = mode == TPX_UNPACK_KERNEL;
  g->pin_dev = -1;
  g->consume = tpx__gpu_consume_ops();
  ep->gpath = g;
  if (unpack) ep->consume = tpx__gpu_consume_ops(); /* every receive lands in bounce pages */
  TPX_DEBUG("endpoint %s: GPU path: transport %s, %s%s", ep->name, ep->net->name,
            unpack ? "UNPACK device offload, unpack " : cuda_all ? "takes CUDA pointers" : "host pointers only",
            unpack ? tpx__unpacker_mode_name(mode) : "");
  TPX_DEBUG("endpoint %s: CUDA sends %s, CUDA receives %s", ep->name, g->send_stage ? "staged" : "direct",
            unpack ? "unpacked" : g->recv_stage ? "staged" : "direct");
  return 0;
}

void tpx__gpu_ep_fini(tpx_endpoint_t *ep) {
  struct tpx__gpu_ep *g = ep->gpath;
  if (!g) return;
  if (g->staged_out || g->staged_in || g->unpacked_gpu || g->unpacked_cpu)
    TPX_DEBUG("endpoint %s: staged %llu bytes out, %llu in; unpacked %llu bytes on GPUs, %llu with the CPU", ep->name,
              (unsigned long long)g->staged_out, (unsigned long long)g->staged_in,
              (unsigned long long)g->unpacked_gpu, (unsigned long long)g->unpacked_cpu);
  /* The landing region's registration went with the others (tpx__mem_free_all). */
  if (g->landing_buf) tpx__gpu_free(g->landing_dev, g->landing_buf);
  for (int d = 0; d < TPX_GPU_MAX_DEVICES; d++) tpx__gpu_dev_free(g->devs[d]);
  free(g);
  ep->gpath = NULL;
  ep->consume = NULL;
}

int tpx__gpu_landing(struct tpx__gpu_ep *g, struct tpx_mem **out) {
  if (g->landing) {
    *out = g->landing;
    return 0;
  }
  tpx_endpoint_t *ep = g->ep;
  int dev = ep->gpu > 0 ? ep->gpu : 0;
  size_t len = WIRE_MAX_CHUNK;
  struct tpx__gpu_dev *gd;
  int rc = tpx__gpu_dev_get(g, dev, &gd); /* holds the context the buffer lives in */
  void *buf = NULL;
  if (rc == 0) rc = tpx__gpu_malloc(dev, len, &buf);
  if (rc) return tpx_err_quiet(rc, "endpoint %s: landing region for host receives (%zu bytes on GPU %d): %s",
                               ep->name, len, dev, tpx_last_error());
  tpx_mem_desc_t d = {buf, len, TPX_MEM_CUDA, dev, 0};
  if ((rc = tpx__mem_add(ep, &d, 1, &g->landing)) != 0) {
    tpx__gpu_free(dev, buf);
    return rc;
  }
  g->landing_buf = buf;
  g->landing_dev = dev;
  TPX_DEBUG("endpoint %s: host receives on %s are posted with %zu bytes of GPU %d memory", ep->name,
            ep->net->name, len, dev);
  *out = g->landing;
  return 0;
}

int tpx__gpu_window_get(struct tpx_peer *p, struct tpx__window *q, struct tpx__gpu_window **out) {
  if (q->gpu) {
    *out = q->gpu;
    return 0;
  }
  struct tpx__gpu_window *gq = calloc(1, sizeof(*gq));
  if (gq) gq->slots = calloc(q->cap, sizeof(*gq->slots));
  if (!gq || !gq->slots) {
    free(gq);
    return tpx_err_quiet(TPX_ENOMEM, "peer %s channel %d: out of memory", p->where, q->ch);
  }
  gq->g = p->ep->gpath;
  gq->net = p->ep->net;
  gq->comm = q->comm;
  gq->ch = q->ch;
  gq->is_recv = q->is_recv;
  gq->cap = q->cap;
  gq->rel_pos = q->tail;
  gq->adev = -1;
  if (gq->g->unpack && q->is_recv) {
    int rc = tpx__unpack_stage_window_setup(p, q, gq);
    if (rc) {
      free(gq->slots);
      free(gq);
      return rc;
    }
  }
  q->gpu = gq;
  *out = gq;
  return 0;
}

int tpx__gpu_post_prep(struct tpx_peer *p, struct tpx__window *q, struct tpx__wlink *l, struct tpx_mem *m, uint64_t off,
                       uint64_t len, void **data, void **mh) {
  (void)off;
  struct tpx__gpu_ep *g = p->ep->gpath;
  int cuda = m->type == TPX_MEM_CUDA;
  int unpack_recv = g->unpack && q->is_recv;
  if (!cuda && !unpack_recv) return GPU_POST_DEFAULT;
  tpx__gpu_thread_pin(g);
  struct tpx__gpu_window *gq;
  int rc = tpx__gpu_window_get(p, q, &gq);
  if (rc) return rc;
  tpx__stage_reclaim(gq, q);
  if (!cuda && unpack_recv && g->cuda_ptr) { /* never a host buffer on a devmem comm */
    struct tpx_mem *lm;
    if ((rc = tpx__gpu_landing(g, &lm)) != 0 || (rc = tpx__mem_mhandle(lm, q->slot, q->comm, 0, mh)) != 0)
      return rc;
    *data = lm->base;
    return GPU_POST_STAGED; /* data and mh are set; the destination stays the host region */
  }
  if (!cuda) return GPU_POST_DEFAULT;
  if (q->is_recv) return g->recv_stage ? tpx__stage_recv_prep(gq, m, len, data, mh) : GPU_POST_DEFAULT;
  return g->send_stage ? tpx__stage_send_prep(q, gq, l, data, mh) : GPU_POST_DEFAULT;
}

int tpx__gpu_pack_ok(const tpx_endpoint_t *ep) {
  const struct tpx__gpu_ep *g = ep->gpath;
  return g && g->send_stage && g->recv_stage && !g->unpack;
}

void tpx__gpu_post_done(struct tpx_peer *p, struct tpx__window *q, const struct tpx__wlink *l, struct tpx_mem *m,
                        uint64_t off, uint64_t len, void *mh, int prep) {
  struct tpx__gpu_window *gq = q->gpu;
  if (!gq) return;
  tpx__stage_reclaim(gq, q); /* the slot being reused gives its bytes back first */
  struct tpx__gslot *s = &gq->slots[q->tail % q->cap];
  memset(s, 0, sizeof(*s));
  s->dst = m->base + off;
  s->len = len;
  s->dev = m->type == TPX_MEM_CUDA ? m->device : -1;
  s->want_sum = q->is_recv && p->sum && !l->op->discard;
  if (q->is_recv && p->ep->gpath->unpack) {
    s->mode = m->type == TPX_MEM_CUDA ? GS_UNPACK_GPU : GS_UNPACK_CPU;
  } else if (prep == GPU_POST_STAGED) {
    s->mode = q->is_recv ? GS_STAGE_IN : GS_STAGE_OUT;
    if (q->is_recv) tpx__stage_recv_done(gq, s);
    else tpx__stage_send_done(gq, s);
    if (q->is_recv && tpx__plan_gathered(l->op->ents, &l->cur)) { /* packed: scattered at completion */
      s->pents = l->op->ents;
      s->pcur = l->cur;
    }
  } else if (q->is_recv && m->type == TPX_MEM_CUDA && p->ep->net->ops->iflush) {
    s->mode = GS_FLUSH; /* the transport wrote GPU memory itself */
    s->mh = mh;
  }
}

int tpx__gpu_recv_sum_taken(const struct tpx__window *q, const struct tpx__wslot *s, uint64_t *ticket) {
  struct tpx__gslot *g = q->gpu ? &q->gpu->slots[s - q->ring] : NULL;
  if (!g || !g->sum_on) return 0;
  g->sum_on = 0;
  *ticket = g->sum_ticket;
  return 1;
}

int tpx__gpu_recv_view(const struct tpx__window *q, const struct tpx__wslot *s, const void **at, int *dev) {
  *at = s->data;
  *dev = -1;
  if (!q->gpu) return GPU_VIEW_NOW;
  const struct tpx__gslot *g = &q->gpu->slots[s - q->ring];
  switch (g->mode) {
  case GS_UNPACK_CPU: *at = g->dst; return GPU_VIEW_CONSUMED;
  case GS_UNPACK_GPU:
  case GS_FLUSH: *at = g->dst; *dev = g->dev; return GPU_VIEW_NONE;
  case GS_NONE: /* host memory, or GPU memory the transport wrote itself */
    *dev = g->dev;
    return g->dev >= 0 ? GPU_VIEW_NONE : GPU_VIEW_NOW;
  default: return GPU_VIEW_NOW; /* the staging slot the transport wrote */
  }
}

void tpx__gpu_window_ahead(struct tpx_peer *p, struct tpx__window *q) {
  struct tpx__gpu_window *gq = q->gpu;
  if (!gq || q->is_recv || !gq->arena || !p->ep->gpath->send_stage) return;
  tpx__stage_reclaim(gq, q);
  (void)tpx__stage_ahead(q, gq, 0, 2); /* errors come back through the next post */
}

void tpx__gpu_window_purge(struct tpx_peer *p, struct tpx__window *q) {
  struct tpx__gpu_window *gq = q->gpu;
  if (!gq) return;
  /* GPU work still reading or writing memory (user buffers, staging) must
   * end before the transfers are failed and their memory handed back. */
  for (uint64_t pos = q->head; pos < q->tail; pos++) {
    struct tpx__gslot *s = &gq->slots[pos % q->cap];
    if (!s->busy) continue;
    if (s->sum_on) tpx__gpu_sum_drop(p->ep, s->dev, s->sum_ticket); /* never taken by the window */
    if (s->mode == GS_UNPACK_GPU) tpx__unpack_stage_purge(gq, s);
    else if (s->mode != GS_FLUSH) tpx__stage_slot_wait(gq, s); /* a flush request goes with its comm */
    s->busy = 0;
  }
  tpx__stage_purge(gq);
  memset(gq->slots, 0, q->cap * sizeof(*gq->slots));
  gq->rel_pos = 0; /* the engine resets the ring positions too */
  gq->comm = NULL;
  gq->have_dh = 0;
}

void tpx__gpu_window_free(struct tpx__window *q) {
  struct tpx__gpu_window *gq = q->gpu;
  if (!gq) return;
  tpx__stage_free(gq); /* after the comm closed: the transport no longer touches the arena */
  free(gq->slots);
  free(gq->ubatch);
  free(gq);
  q->gpu = NULL;
}

/* ---- receive consume stage ---- */

/* A receive the transport wrote into GPU memory (GPUDirect RDMA): as NCCL
 * does, iflush once the receive completed, and count the chunk landed only
 * when the flush request (if the transport gives one) tests done. */
static int flush_start(struct tpx_peer *p, struct tpx__window *q, struct tpx__gslot *s) {
  tpx_net_t *net = p->ep->net;
  void *data = s->dst;
  size_t size = (size_t)s->len;
  s->freq = NULL;
  int rc = net->ops->iflush(net, q->comm, 1, &data, &size, &s->mh, &s->freq);
  if (rc) return tpx_err_quiet(rc, "peer %s channel %d: iflush of %llu bytes at %p: %s", p->where, q->ch,
                         (unsigned long long)s->len, data, tpx_last_error());
  if (!s->freq) return 1;
  s->busy = 1;
  s->deadline = tpx__now_ns() + tpx__ms_to_ns(p->ep->cfg.timeout_ms);
  return 0;
}

static int flush_poll(struct tpx_peer *p, struct tpx__window *q, struct tpx__gslot *s) {
  if (!s->busy) return 1;
  tpx_net_t *net = p->ep->net;
  int done = 0;
  int rc = net->ops->test(net, s->freq, &done, NULL);
  if (rc) return tpx_err_quiet(rc, "peer %s channel %d: test of a flush request: %s", p->where, q->ch, tpx_last_error());
  if (done) {
    s->busy = 0;
    s->freq = NULL;
    return 1;
  }
  if (tpx__now_ns() > s->deadline)
    return tpx_err_quiet(TPX_ETIMEDOUT, "peer %s channel %d: flush of a %llu-byte receive not done after %d ms", p->where,
                   q->ch, (unsigned long long)s->len, p->ep->cfg.timeout_ms);
  return 0;
}

static int c_start(struct tpx_peer *p, struct tpx__window *q, struct tpx__wslot *rs) {
  struct tpx__gpu_window *gq = q->gpu;
  if (!gq) {
    rs->state = WS_CONSUMED;
    return 0;
  }
  struct tpx__gslot *s = &gq->slots[rs - q->ring];
  uint64_t k = gq->nrecv++;
  int rc = 0;
  switch (s->mode) {
  case GS_STAGE_IN: return tpx__stage_in_start(gq, s);
  case GS_FLUSH:
    rc = flush_start(p, q, s);
    if (rc < 0) return rc;
    if (rc == 1) rs->state = WS_CONSUMED;
    return 0;
  case GS_UNPACK_CPU:
  case GS_UNPACK_GPU:
    s->uslot = tpx__tcpx_slot(k);
    rc = tpx__unpack_stage_start(p, q, gq, s);
    if (rc < 0) return rc;
    if (rc == 1) rs->state = WS_CONSUMED;
    return 0;
  default: rs->state = WS_CONSUMED; return 0;
  }
}

static int c_poll(struct tpx_peer *p, struct tpx__window *q, struct tpx__wslot *rs) {
  struct tpx__gpu_window *gq = q->gpu;
  if (!gq) return 1;
  struct tpx__gslot *s = &gq->slots[rs - q->ring];
  if (s->mode == GS_STAGE_IN) return tpx__stage_poll(gq, s);
  if (s->mode == GS_UNPACK_GPU) return tpx__unpack_stage_poll(gq, s);
  if (s->mode == GS_FLUSH) return flush_poll(p, q, s);
  return 1;
}

static const struct tpx__consume_ops ops = {c_start, c_poll};

const struct tpx__consume_ops *tpx__gpu_consume_ops(void) { return &ops; }
