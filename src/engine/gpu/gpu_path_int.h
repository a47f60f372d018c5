/* Shared state of the GPU data path (gpu_path.c, gpu_mem.c, staging.c,
 * unpack_stage.c). See gpu_path.h for the design. */
#ifndef TPX_ENGINE_GPU_PATH_INT_H
#define TPX_ENGINE_GPU_PATH_INT_H

#include "common/ring.h"
#include "cuda/crc.h"
#include "cuda/crc_kernel.h"
#include "cuda/gpu.h"
#include "cuda/unpack.h"
#include "tcpx/contract.h"
#include "engine/core.h"

#define GPU_NSTREAMS 8       /* copy streams per GPU and direction; comms take them by channel */
#define GPU_PRE_MAX 32       /* sends copied to staging ahead of their post, per comm (a window's worth) */
#define GPU_UNPACK_INFLIGHT 512 /* chunks in flight per GPU unpacker */
#define GPU_PAGE 4096u
#define GPU_NO_CRC ((tpx_gpu_crc_t *)1) /* this GPU has no checksum kernel: asked once */

/* One GPU's resources, created at the first registration on it and kept
 * until the endpoint goes (each holds its own context reference; the
 * endpoint holds one more for the registrations). */
struct tpx__gpu_dev {
  int dev;
  tpx_gpu_stream_t *d2h[GPU_NSTREAMS];
  tpx_gpu_stream_t *h2d[GPU_NSTREAMS];
  tpx_gpu_evpool_t *pool;
  tpx_unpacker_t *unpacker; /* UNPACK transports, on first use */
  tpx_gpu_crc_t *crc;       /* integrity's sums of GPU-only bytes, on first use (0x1: none here) */
};

struct tpx__gpu_ep {
  tpx_endpoint_t *ep;
  int unpack;      /* UNPACK transport (TCPX, or our emulation) */
  int cuda_ptr;    /* transport takes CUDA pointers */
  int send_stage;  /* CUDA sends go through our staging (host-only transports, and the
                      built-in one, whose own CUDA sends copy synchronously) */
  int recv_stage;  /* CUDA receives go through our staging (host-only, not UNPACK) */
  int unpack_mode; /* TPX_UNPACK_* from cfg.unpack */
  int stage_sm[2]; /* staging copies [0] device-to-host, [1] host-to-device by SM (the kernel
                      unpacker) rather than the copy engine: kernel mode */
  int pin_dev;     /* GPU the progress thread keeps current (-1: none yet) */
  const struct tpx__consume_ops *consume; /* gpu_path.c's consume stage, installed by whoever needs it */
  struct tpx__gpu_dev *devs[TPX_GPU_MAX_DEVICES];
  /* UNPACK transports taking CUDA pointers: the device region receives into
   * host memory are posted with (tpx__gpu_landing). */
  struct tpx_mem *landing;
  void *landing_buf;
  int landing_dev;
  /* The transport's device that CUDA registrations would crash on (no PCI
   * path, tpx__net_cuda_reg_needs_pci), or -1. */
  int cuda_reg_nopci;
  /* counters, for logs and tests */
  uint64_t staged_out, staged_in, unpacked_gpu, unpacked_cpu;
};

enum tpx__gslot_mode {
  GS_NONE = 0,   /* host memory, nothing to do */
  GS_STAGE_OUT,  /* send from staging: arena bytes held until the ring slot is released */
  GS_STAGE_IN,   /* receive into staging: H2D at completion */
  GS_UNPACK_CPU, /* UNPACK receive into host memory: CPU gather */
  GS_UNPACK_GPU, /* UNPACK receive into GPU memory: unpacker */
  GS_FLUSH       /* receive straight into GPU memory: iflush, then its request tested done */
};

/* Per ring slot of a comm (index = ring index). */
struct tpx__gslot {
  uint8_t mode;
  uint8_t busy;      /* outstanding: ev (staging), ticket (unpack) or freq (flush) */
  uint8_t deferred;  /* unpack or SM staging copy not launched yet (next pass, or the unpacker is full) */
  uint8_t kern;      /* the staging copy is an unpacker ticket (else a copy-engine event) */
  int dev;
  uint8_t *dst;      /* receive: where the chunk goes */
  uint64_t len;
  uint64_t aoff;     /* staging arena offset */
  uint64_t aend;     /* arena position after this chunk (0: holds no arena bytes) */
  tpx_gpu_event_t *ev;
  uint64_t ticket;
  uint32_t uslot;    /* unpack slot: tpx__tcpx_slot(k) for the k-th receive */
  uint32_t ucnt;     /* its entries, as tpx__unpack_stage_start read and checked them */
  void *mh;          /* GS_FLUSH: the receive's memory handle */
  void *freq;        /* GS_FLUSH: the flush request (NULL: none needed) */
  uint64_t deadline; /* GS_FLUSH: when an unfinished flush becomes an error */
  uint8_t want_sum;  /* integrity: its CRC-32C wanted (a receive from a peer that sends sums) */
  uint8_t sum_on;    /* GS_UNPACK_GPU: that sum queued right after its unpack, sum_ticket */
  uint64_t sum_ticket;
  const struct tpx__xent *pents; /* GS_STAGE_IN of a packed chunk: its transfer's entries (else NULL) */
  struct tpx__cursor pcur;       /* and the chunk (pack_runs.h scatters it) */
};

/* A send chunk copied (or being copied) into staging ahead of its post. */
struct tpx__gpre {
  struct tpx__op *o;
  uint64_t idx;
  uint64_t aoff, aend, len;
  int dev;
  int busy;             /* copy outstanding */
  int kern;             /* ticket of the GPU's unpacker (SM copy), else ev (copy engine) */
  tpx_gpu_event_t *ev;
  uint64_t ticket;
};

struct tpx__gpu_window {
  struct tpx__gpu_ep *g;
  tpx_net_t *net;
  void *comm;
  int ch, is_recv;
  uint32_t cap;
  struct tpx__gslot *slots; /* [cap] */
  uint64_t rel_pos;    /* ring positions below this gave their arena bytes back */
  /* staging arena: a byte ring (common/ring.h) */
  uint8_t *arena;
  uint8_t *arena_dev;  /* the same as GPU code addresses it (equal under UVA) */
  int adev;
  void *amh;           /* its registration with comm */
  tpx_ring_t aring;    /* allocated in posting order, released in ring order */
  /* sends staged ahead (FIFO: the first pre_n CUDA chunks of the pending queue) */
  struct tpx__gpre pre[GPU_PRE_MAX];
  uint32_t pre_head, pre_n;
  /* receive: arena space picked by prep, taken by done */
  tpx_ring_span_t tsp;
  /* UNPACK */
  uint64_t nrecv;      /* receives completed on this comm */
  int have_dh;
  int bounce_on_gpu;   /* bounce pages in GPU memory (real TCPX): no CPU gather */
  tpx_unpack_dev_handle_t dh;
  tpx_unpack_meta_t *ubatch; /* entries of several chunks gathered by one launch (unpack_stage.c) */
};

/* gpu_mem.c */
int tpx__gpu_dev_get(struct tpx__gpu_ep *g, int dev, struct tpx__gpu_dev **out);
/* The landing region, created on first use: device memory on the
 * endpoint's GPU, as large as any chunk (WIRE_MAX_CHUNK: the initiator
 * picks each transfer's), registered like any CUDA region. An UNPACK
 * plugin never writes a receive's buffer (the bytes land in its bounce
 * pages), but a host buffer makes the GPUDirect-TCPX plugin fail the
 * receive for good (docs/UNPACK.md, "Host-memory receives"), so receives
 * whose destination is host memory (or the discard scratch) are posted with
 * this region and gathered into their destination by the CPU. */
int tpx__gpu_landing(struct tpx__gpu_ep *g, struct tpx_mem **out);
void tpx__gpu_dev_free(struct tpx__gpu_dev *d);
void tpx__gpu_thread_pin(struct tpx__gpu_ep *g);
int tpx__gpu_dev_unpacker(struct tpx__gpu_ep *g, struct tpx__gpu_dev *d, tpx_unpacker_t **out);
/* One launch of c on GPU dev's unpacker (SM staging copies, unpacks): 0
 * queued (*ticket), TPX_EAGAIN the unpacker is full (retry later), < 0. */
/* Integrity: the sums of the chunks of unpack run[0..n) (GPU dev, unpack
 * ticket t) that want one, queued on the unpack's stream right after it. */
void tpx__gpu_sum_after_unpack(struct tpx__gpu_ep *g, int dev, uint64_t t, struct tpx__gslot **run, uint32_t n);
int tpx__gpu_unpack_submit(struct tpx__gpu_ep *g, int dev, const tpx_unpack_chunk_t *c, uint64_t *ticket);

/* The span [*lo, *hi) of the destinations of slots run[0..n), n >= 1: one
 * launch writes them all, entries relative to *lo. */
static inline void tpx__gslot_span(struct tpx__gslot *const *run, uint32_t n, uint8_t **lo, uint8_t **hi) {
  *lo = run[0]->dst;
  *hi = run[0]->dst + run[0]->len;
  for (uint32_t k = 1; k < n; k++) {
    if (run[k]->dst < *lo) *lo = run[k]->dst;
    if (run[k]->dst + run[k]->len > *hi) *hi = run[k]->dst + run[k]->len;
  }
}

/* gpu_path.c */
int tpx__gpu_window_get(struct tpx_peer *p, struct tpx__window *q, struct tpx__gpu_window **out);
const struct tpx__consume_ops *tpx__gpu_consume_ops(void);

/* staging.c */
int tpx__stage_send_prep(struct tpx__window *q, struct tpx__gpu_window *gq, struct tpx__wlink *l, void **data,
                         void **mh);
void tpx__stage_send_done(struct tpx__gpu_window *gq, struct tpx__gslot *s);
int tpx__stage_recv_prep(struct tpx__gpu_window *gq, struct tpx_mem *m, uint64_t len, void **data, void **mh);
void tpx__stage_recv_done(struct tpx__gpu_window *gq, struct tpx__gslot *s);
int tpx__stage_in_start(struct tpx__gpu_window *gq, struct tpx__gslot *s);
int tpx__stage_poll(struct tpx__gpu_window *gq, struct tpx__gslot *s);
void tpx__stage_slot_wait(struct tpx__gpu_window *gq, struct tpx__gslot *s);
int tpx__stage_ahead(struct tpx__window *q, struct tpx__gpu_window *gq, int setup, int max_new);
void tpx__stage_reclaim(struct tpx__gpu_window *gq, struct tpx__window *q);
void tpx__stage_purge(struct tpx__gpu_window *gq);
void tpx__stage_free(struct tpx__gpu_window *gq);

/* unpack_stage.c */
int tpx__unpack_stage_window_setup(struct tpx_peer *p, struct tpx__window *q, struct tpx__gpu_window *gq);
int tpx__unpack_stage_start(struct tpx_peer *p, struct tpx__window *q, struct tpx__gpu_window *gq,
                            struct tpx__gslot *s);
int tpx__unpack_stage_poll(struct tpx__gpu_window *gq, struct tpx__gslot *s);
void tpx__unpack_stage_purge(struct tpx__gpu_window *gq, struct tpx__gslot *s);

#endif
