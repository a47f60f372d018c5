/* CUDA registrations and the per-GPU resources of an endpoint: one context
 * reference per GPU used (released at endpoint teardown), persistent copy
 * streams, an event pool and (UNPACK transports) an unpacker. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "engine/gpu/gpu_mem.h"
#include "engine/gpu/gpu_path_int.h"

void tpx__gpu_dev_free(struct tpx__gpu_dev *d) {
  if (!d) return;
  tpx__unpacker_destroy(d->unpacker);
  if (d->crc != GPU_NO_CRC) tpx__gpu_crc_destroy(d->crc);
  for (int i = 0; i < GPU_NSTREAMS; i++) {
    tpx__gpu_stream_destroy(d->d2h[i]);
    tpx__gpu_stream_destroy(d->h2d[i]);
  }
  tpx__gpu_evpool_destroy(d->pool);
  int rc = tpx__gpu_release(d->dev);
  if (rc) TPX_WARN("gpu %d: releasing the endpoint's context reference: %s", d->dev, tpx_last_error());
  free(d);
}

/* The GPU's resources, created on first use. Lock held. Errors come with
 * tpx_err_quiet's detail: the API call surfaces them, a transfer's failure
 * fails its peer (fail.c logs it), so nothing here logs. */
int tpx__gpu_dev_get(struct tpx__gpu_ep *g, int dev, struct tpx__gpu_dev **out) {
  if (dev < 0 || dev >= TPX_GPU_MAX_DEVICES) return tpx_err_quiet(TPX_EINVAL, "GPU %d: no such device", dev);
  if (g->devs[dev]) {
    *out = g->devs[dev];
    return 0;
  }
  int rc = tpx__gpu_retain(dev);
  if (rc) return rc;
  struct tpx__gpu_dev *d = calloc(1, sizeof(*d));
  if (!d) {
    tpx__gpu_release(dev);
    return tpx_err_quiet(TPX_ENOMEM, "GPU %d: out of memory", dev);
  }
  d->dev = dev;
  for (int i = 0; i < GPU_NSTREAMS && rc == 0; i++) {
    rc = tpx__gpu_stream_create(dev, &d->d2h[i]);
    if (rc == 0) rc = tpx__gpu_stream_create(dev, &d->h2d[i]);
  }
  if (rc == 0) rc = tpx__gpu_evpool_create(dev, 32, &d->pool);
  if (rc) {
    int err = rc;
    tpx__gpu_dev_free(d);
    return tpx_err_quiet(err, "endpoint %s: setting up GPU %d for transfers failed: %s", g->ep->name, dev,
                   tpx_last_error());
  }
  g->devs[dev] = d;
  if (g->pin_dev < 0) g->pin_dev = dev;
  TPX_INFO("endpoint %s: GPU %d ready for transfers (%s path)", g->ep->name, dev,
           g->unpack ? "unpack" : g->recv_stage ? "host staging" : "direct");
  *out = d;
  return 0;
}

/* The GPU's unpacker (kernel / d2d / host per cfg.unpack), created on first
 * use: it gathers UNPACK receives and, in kernel mode, does the staging
 * copies too (SM copies through the pinned mapping). Lock held. */
int tpx__gpu_dev_unpacker(struct tpx__gpu_ep *g, struct tpx__gpu_dev *d, tpx_unpacker_t **out) {
  if (!d->unpacker) {
    tpx_unpack_opts_t o;
    tpx__unpacker_opts_default(&o);
    o.mode = g->unpack_mode;
    o.max_inflight = GPU_UNPACK_INFLIGHT;
    int rc = tpx__unpacker_create(d->dev, &o, &d->unpacker);
    if (rc)
      return tpx_err_quiet(rc, "GPU %d: creating the unpacker (%s): %s", d->dev, tpx__unpacker_mode_name(o.mode),
                     tpx_last_error());
  }
  *out = d->unpacker;
  return 0;
}

/* ---- integrity's sums of bytes only a GPU sees (gpu_path.h) ---- */
static struct tpx__gpu_dev *sum_dev(tpx_endpoint_t *ep, int dev) {
  struct tpx__gpu_ep *g = ep->gpath;
  struct tpx__gpu_dev *d = NULL;
  if (!g || tpx__gpu_dev_get(g, dev, &d) != 0) return NULL;
  if (!d->crc && tpx__gpu_crc_create(dev, &d->crc) != 0) {
    TPX_INFO("GPU %d: no checksums on the GPU (%s): chunks only it sees go unchecked", dev, tpx_last_error());
    d->crc = GPU_NO_CRC;
  }
  return d->crc == GPU_NO_CRC ? NULL : d;
}

int tpx__gpu_sum_start(tpx_endpoint_t *ep, int dev, const void *p, uint64_t len, uint64_t *ticket) {
  struct tpx__gpu_dev *d = sum_dev(ep, dev);
  if (!d) return TPX_ENOTSUP;
  return tpx__gpu_crc_start(d->crc, p, len, ticket);
}

int tpx__gpu_sum_poll(tpx_endpoint_t *ep, int dev, uint64_t ticket, uint32_t *sum) {
  struct tpx__gpu_dev *d = sum_dev(ep, dev);
  if (!d) return tpx_err_quiet(TPX_EINTERNAL, "GPU %d: a checksum polled where none started", dev);
  return tpx__gpu_crc_poll(d->crc, ticket, sum);
}

void tpx__gpu_sum_drop(tpx_endpoint_t *ep, int dev, uint64_t ticket) {
  struct tpx__gpu_dev *d = sum_dev(ep, dev);
  if (d) tpx__gpu_crc_drop(d->crc, ticket);
}

void tpx__gpu_sum_after_unpack(struct tpx__gpu_ep *g, int dev, uint64_t t, struct tpx__gslot **run, uint32_t n) {
  const void *p[TPX_CRC_BATCH];
  uint64_t len[TPX_CRC_BATCH], tk[TPX_CRC_BATCH];
  struct tpx__gslot *of[TPX_CRC_BATCH];
  uint32_t m = 0;
  for (uint32_t k = 0; k < n && m < TPX_CRC_BATCH; k++)
    if (run[k]->want_sum) {
      of[m] = run[k];
      p[m] = run[k]->dst;
      len[m++] = run[k]->len;
    }
  struct tpx__gpu_dev *d = m ? sum_dev(g->ep, dev) : NULL;
  struct tpx_gpu_stream *st = d ? tpx__unpacker_ticket_stream(d->unpacker, t) : NULL;
  /* else (or a failed launch) each is summed on its own once unpacked */
  if (!st || tpx__gpu_crc_start_on(d->crc, st, p, len, m, tk) != 0) return;
  for (uint32_t k = 0; k < m; k++) {
    of[k]->sum_on = 1;
    of[k]->sum_ticket = tk[k];
  }
}

int tpx__gpu_unpack_submit(struct tpx__gpu_ep *g, int dev, const tpx_unpack_chunk_t *c, uint64_t *ticket) {
  struct tpx__gpu_dev *d = dev >= 0 && dev < TPX_GPU_MAX_DEVICES ? g->devs[dev] : NULL;
  if (!d) return tpx_err_quiet(TPX_EINTERNAL, "GPU %d was never set up", dev);
  tpx_unpacker_t *u;
  int rc = tpx__gpu_dev_unpacker(g, d, &u);
  return rc ? rc : tpx__unpacker_submit(u, c, ticket);
}

/* The progress thread keeps one GPU's context current, so the guards inside
 * gpu.c cost one query instead of two switches per call. User threads are
 * left as they were (every call restores their context). */
void tpx__gpu_thread_pin(struct tpx__gpu_ep *g) {
  static __thread const void *pinned_for;
  tpx_endpoint_t *ep = g->ep;
  if (pinned_for == g || g->pin_dev < 0 || !ep->thread_on || !pthread_equal(pthread_self(), ep->thread)) return;
  if (tpx__gpu_set_device(g->pin_dev) == 0) pinned_for = g;
}

static int transport_regs_cuda(const struct tpx__gpu_ep *g) { return g->unpack || !g->send_stage || !g->recv_stage; }

int tpx__gpu_mem_check(tpx_endpoint_t *ep, tpx_mem_desc_t *d, uint32_t *reg_pre, uint32_t *reg_post) {
  *reg_pre = *reg_post = 0;
  struct tpx__gpu_ep *g = ep->gpath;
  if (!tpx__gpu_built())
    return tpx_err(TPX_ENOTSUP, "tpx_mem_register: CUDA memory (device %d): this build has no CUDA support",
                   d->device);
  if (!g) return tpx_err(TPX_EINTERNAL, "tpx_mem_register: endpoint %s has no GPU state", ep->name);
  int ndev = 0;
  tpx__gpu_device_count(&ndev);
  if (ndev == 0)
    return tpx_err(TPX_ENOTSUP, "tpx_mem_register: CUDA memory (device %d): no usable GPU (%s)", d->device,
                   tpx_last_error());
  tpx_gpu_ptr_info_t info;
  int rc = tpx__gpu_ptr_query(d->addr, &info);
  if (rc) return rc;
  if (info.mem != TPX_GPU_MEM_DEVICE) {
    static const char *kind[] = {"ordinary host memory", "pinned host memory", "device memory", "managed memory"};
    return tpx_err(TPX_EINVAL,
                   "tpx_mem_register: %p is %s, not device memory: register it as TPX_MEM_%s",
                   d->addr, info.mem >= 0 && info.mem <= 3 ? kind[info.mem] : "unknown memory",
                   info.mem == TPX_GPU_MEM_MANAGED ? "CUDA only after cudaMalloc (managed memory is not supported)"
                                                   : "HOST");
  }
  if (d->device < 0) d->device = info.dev;
  if (d->device != info.dev)
    return tpx_err(TPX_EINVAL, "tpx_mem_register: %p is memory of GPU %d, the descriptor names GPU %d",
                   d->addr, info.dev, d->device);
  uintptr_t a = (uintptr_t)d->addr, base = (uintptr_t)info.base;
  if (a < base || d->len > info.size - (a - base))
    return tpx_err(TPX_EINVAL,
                   "tpx_mem_register: [%p, +%zu) runs past the end of its GPU %d allocation [%p, +%zu)",
                   d->addr, d->len, info.dev, info.base, info.size);
  /* Transports that register device memory (TCPX) need 4 KiB-aligned
   * regions of at least 4 KiB: widen to page boundaries inside the
   * allocation. The extra bytes are never transferred. */
  uintptr_t lo = a & ~(uintptr_t)(GPU_PAGE - 1);
  uintptr_t hi = (a + d->len + GPU_PAGE - 1) & ~(uintptr_t)(GPU_PAGE - 1);
  if (lo < base || hi > base + info.size) {
    if (transport_regs_cuda(g))
      return tpx_err(TPX_EINVAL,
                     "tpx_mem_register: [%p, +%zu) on GPU %d cannot be registered with %s: the transport needs "
                     "4 KiB-aligned regions and its allocation [%p, +%zu) does not contain the aligned range "
                     "[%p, %p); allocate with cudaMalloc and register whole 4 KiB pages",
                     d->addr, d->len, info.dev, ep->net->name, info.base, info.size, (void *)lo, (void *)hi);
    lo = a;
    hi = a + d->len;
  }
  struct tpx__gpu_dev *gd;
  rc = tpx__gpu_dev_get(g, d->device, &gd);
  if (rc) return rc;
  *reg_pre = (uint32_t)(a - lo);
  *reg_post = (uint32_t)(hi - (a + d->len));
  if (!ep->consume) ep->consume = g->consume; /* CUDA receives are consumed (staging, flush) */
  return 0;
}

int tpx__gpu_mem_after_reg(struct tpx_mem *m, void *comm, void *mhandle) {
  tpx_endpoint_t *ep = m->ep;
  struct tpx__gpu_ep *g = ep->gpath;
  if (!g || !g->unpack || m->type != TPX_MEM_CUDA || !ep->net->ops->get_device_mr) return 0;
  void *dmh = NULL;
  int rc = ep->net->ops->get_device_mr(ep->net, comm, mhandle, &dmh);
  if (rc) return tpx_err_quiet(rc, "getDeviceMr of region %llu (GPU %d) failed", (unsigned long long)m->id, m->device);
  return 0;
}

int tpx__gpu_mem_before_reg(tpx_endpoint_t *ep, const struct tpx_mem *m) {
  struct tpx__gpu_ep *g = ep->gpath;
  if (m->type != TPX_MEM_CUDA || !g || g->cuda_reg_nopci < 0) return 0;
  tpx_net_props_t pr;
  memset(&pr, 0, sizeof(pr));
  (void)ep->net->ops->get_properties(ep->net, g->cuda_reg_nopci, &pr);
  return tpx_err_quiet(TPX_ENOTSUP,
                 "endpoint %s: transport %s cannot register GPU memory: its device %d '%s' has no PCI path, "
                 "which the GPUDirect-TCPX plugin's CUDA regMr reads unchecked (it would crash); GPU memory, "
                 "and host receives, which land through a GPU region, need its data NICs (docs/A3HIGH.md)",
                 ep->name, ep->net->name, g->cuda_reg_nopci, pr.name);
}
