/* tpx-unpack-bench: the unpack kernel against plain copies of the same bytes.
 *
 * A payload of --bytes (default 64 MiB) lies in --frag (default 4 KiB)
 * fragments scattered over a bounce buffer in shuffled page order, as the
 * TCPX plugin leaves it. The unpack gathers it into one device buffer:
 *   (a) bounce in device memory      vs  cudaMemcpy device-to-device,
 *   (b) bounce in mapped pinned host  vs  cudaMemcpy host-to-device (pinned),
 * for the kernel (one launch for everything, and per-chunk launches as the
 * engine issues them, for each descriptor source) and the d2d mode, plus the
 * host mode once. Times are CUDA events on the unpacker's stream, medians
 * over --iters runs after --warmup runs; GB/s counts payload bytes once.
 * Two times per variant:
 *   gpu  the stream is held at a gate (cuStreamWaitValue32 on a pinned flag)
 *        until everything is queued, so the time is the GPU's alone (the
 *        kernels, descriptor copies and gaps between launches), without the
 *        CPU's validation and submission: "the unpack kernel alone";
 *   e2e  no gate: the CPU's submission cost shows where the GPU waits on it.
 * Every variant's result is checked byte for byte.
 * Exit status: 0 ok, 1 a result was wrong or a call failed, 77 no GPU. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "version.h"

#ifndef TPX_HAVE_CUDA

int main(int argc, char **argv) {
  if (tool_version_asked(argc, argv, "tpx-unpack-bench")) return 0;
  printf("tpx-unpack-bench: this build has no GPU support (CUDA was not found at configure time;\n"
         "configure with -DTPX_CUDA=ON on a machine with nvcc). Nothing measured.\n");
  return 77;
}

#else

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "internal.h" /* the unpack kernels and GPU buffers: tools/internal.h */
#include "tpx/error.h"

#define POISON 0xA5

static struct {
  size_t bytes, frag;
  int iters, warmup, dev;
  int skip_slow; /* --quick: no d2d per-fragment / host mode runs */
} O = {64u << 20, 4096, 20, 3, 0, 0};

static struct {
  uint32_t nf;           /* fragments */
  tpx_unpack_meta_t *meta, *meta_map; /* pinned entries and their mapping */
  tpx_unpack_meta_t *meta_devmem;     /* the same entries in device memory */
  uint8_t *ref, *want, *got;          /* host: bounce contents, expected, read back */
  void *bdev, *bpin, *bpin_map, *dst, *dst2;
  cudaEvent_t t0, t1;
  int failures;
  /* the gate: a pinned flag the stream waits on */
  CUresult (*wait_value)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  uint32_t *gate;
  void *gate_dev;
  /* several streams are timed from a separate stream, forked and joined */
  cudaStream_t tstream;
  cudaEvent_t join[TPX_UNPACK_MAX_STREAMS];
} B;

#define CU(call)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));       \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

#define TPX(call)                                                                                  \
  do {                                                                                             \
    int rc_ = (call);                                                                              \
    if (rc_ != 0) {                                                                                \
      fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #call, tool_error(rc_));            \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* One timed operation: everything it issues goes to `streams` (n of them);
 * `post` (may be NULL) runs after each, untimed. With one stream the events
 * and the gate sit on that stream; with several, on a timing stream that
 * the others fork from and join back into. */
typedef void (*op_fn)(void *arg);
typedef void (*post_fn)(void *arg);

static float time_median_us(op_fn fn, post_fn post, void *arg, cudaStream_t *streams, int n, int iters,
                            int gated) {
  float *ms = calloc((size_t)iters, sizeof *ms);
  if (!ms) exit(1);
  if (gated && !B.wait_value) gated = 0;
  cudaStream_t t = n == 1 ? streams[0] : B.tstream;
  for (int i = 0; i < O.warmup; i++) {
    fn(arg);
    for (int k = 0; k < n; k++) CU(cudaStreamSynchronize(streams[k]));
    if (post) post(arg);
  }
  for (int i = 0; i < iters; i++) {
    if (gated) {
      __atomic_store_n(B.gate, 0, __ATOMIC_SEQ_CST);
      CUresult r = B.wait_value((CUstream)t, (CUdeviceptr)(uintptr_t)B.gate_dev, 1, CU_STREAM_WAIT_VALUE_GEQ);
      if (r != CUDA_SUCCESS) {
        fprintf(stderr, "cuStreamWaitValue32 failed (%d): timing without the gate\n", (int)r);
        B.wait_value = NULL;
        gated = 0;
      }
    }
    CU(cudaEventRecord(B.t0, t));
    if (n > 1)
      for (int k = 0; k < n; k++) CU(cudaStreamWaitEvent(streams[k], B.t0, 0));
    fn(arg);
    if (n > 1)
      for (int k = 0; k < n; k++) {
        CU(cudaEventRecord(B.join[k], streams[k]));
        CU(cudaStreamWaitEvent(t, B.join[k], 0));
      }
    CU(cudaEventRecord(B.t1, t));
    if (gated) __atomic_store_n(B.gate, 1, __ATOMIC_SEQ_CST);
    CU(cudaEventSynchronize(B.t1));
    CU(cudaEventElapsedTime(&ms[i], B.t0, B.t1));
    if (post) post(arg);
  }
  qsort(ms, (size_t)iters, sizeof *ms, cmp_float);
  float med = iters % 2 ? ms[iters / 2] : 0.5f * (ms[iters / 2 - 1] + ms[iters / 2]);
  free(ms);
  return med * 1000.0f;
}

/* ---- baselines ---- */

struct copy_arg {
  void *dst;
  const void *src;
  enum cudaMemcpyKind kind;
  cudaStream_t s;
};

static void op_copy(void *a) {
  struct copy_arg *c = a;
  CU(cudaMemcpyAsync(c->dst, c->src, O.bytes, c->kind, c->s));
}

/* ---- unpack ---- */

struct unpack_arg {
  tpx_unpacker_t *u;
  int pinned;     /* bounce in pinned host memory */
  int devmeta;    /* direct descriptors from device memory */
  uint32_t chunk; /* fragments per submit */
  uint32_t inflight; /* the unpacker's max_inflight */
  uint64_t last;     /* newest ticket */
};

static void op_unpack(void *a) {
  struct unpack_arg *x = a;
  for (uint32_t off = 0; off < B.nf; off += x->chunk) {
    uint32_t cnt = B.nf - off < x->chunk ? B.nf - off : x->chunk;
    tpx_unpack_chunk_t c = {
        .meta = B.meta + off,
        .meta_dev = (x->devmeta ? B.meta_devmem : B.meta_map) + off,
        .cnt = cnt,
        .bounce = x->pinned ? B.bpin_map : B.bdev,
        .bounce_bytes = O.bytes,
        .dst = B.dst,
        .dst_bytes = O.bytes,
    };
    int rc;
    /* Full: wait for the oldest chunk in flight, as the engine would. */
    while ((rc = tpx__unpacker_submit(x->u, &c, &x->last)) == TPX_EAGAIN)
      TPX(tpx__unpacker_wait(x->u, x->last + 1 - x->inflight, 60000));
    TPX(rc);
  }
}

static void post_unpack(void *a) {
  struct unpack_arg *x = a;
  TPX(tpx__unpacker_sync(x->u)); /* retire the chunks outside the timed region */
}

static int verify(const char *what) {
  CU(cudaMemcpy(B.got, B.dst, O.bytes, cudaMemcpyDeviceToHost));
  if (memcmp(B.got, B.want, O.bytes) == 0) return 1;
  size_t i = 0;
  while (B.got[i] == B.want[i]) i++;
  fprintf(stderr, "MISMATCH %s: first wrong byte %zu (got %02x want %02x)\n", what, i, B.got[i], B.want[i]);
  B.failures++;
  return 0;
}

struct row {
  char name[64];
  float us, e2e_us; /* gated (GPU alone) and ungated; 0 = not measured */
  double gbs, ratio, e2e_ratio;
  int ok;
};

static struct row rows[64];
static int nrows;

static double gbs(float us) { return (double)O.bytes / (us * 1e-6) / 1e9; }

static struct row *run_unpack(const char *name, int mode, int desc, int threads, int nstreams, int batch,
                              uint32_t chunk, int pinned, int devmeta, int iters, float base_us, float base_e2e_us) {
  tpx_unpack_opts_t o;
  tpx__unpacker_opts_default(&o);
  o.mode = mode;
  o.desc = desc;
  o.threads = threads;
  o.nstreams = nstreams;
  o.d2d_batch = batch;
  o.max_frags = chunk;
  uint32_t nchunks = (B.nf + chunk - 1) / chunk;
  o.max_inflight = nchunks + 1 > 4096 ? 4096 : nchunks + 1;
  o.host_stage_bytes = O.bytes;
  tpx_unpacker_t *u = NULL;
  TPX(tpx__unpacker_create(O.dev, &o, &u));
  struct unpack_arg a = {u, pinned, devmeta, chunk, o.max_inflight, 0};
  CU(cudaMemset(B.dst, POISON, O.bytes));
  CU(cudaDeviceSynchronize());
  cudaStream_t ustreams[TPX_UNPACK_MAX_STREAMS];
  int ns = tpx__unpacker_nstreams(u);
  for (int i = 0; i < ns; i++) ustreams[i] = (cudaStream_t)tpx__unpacker_stream_at(u, i);
  /* Gate only what cannot block in submit: the kernel mode with a bounded
   * number of queued operations (d2d queues one copy per fragment and the
   * host mode synchronises, which would deadlock on a closed gate). */
  int gate = mode == TPX_UNPACK_KERNEL && nchunks <= 128;
  struct row *r = &rows[nrows++];
  memset(r, 0, sizeof *r);
  snprintf(r->name, sizeof r->name, "%s", name);
  r->e2e_us = time_median_us(op_unpack, post_unpack, &a, ustreams, ns, iters, 0);
  r->e2e_ratio = base_e2e_us / r->e2e_us;
  if (gate && B.wait_value) {
    r->us = time_median_us(op_unpack, post_unpack, &a, ustreams, ns, iters, 1);
    r->gbs = gbs(r->us);
    r->ratio = base_us / r->us;
  }
  r->ok = verify(name);
  tpx__unpacker_destroy(u);
  return r;
}

static struct row *add_base(const char *name, float us, float e2e_us) {
  struct row *r = &rows[nrows++];
  memset(r, 0, sizeof *r);
  snprintf(r->name, sizeof r->name, "%s", name);
  r->us = us;
  r->gbs = gbs(us);
  r->ratio = 1.0;
  r->e2e_us = e2e_us;
  r->e2e_ratio = 1.0;
  r->ok = 1;
  return r;
}

static size_t parse_size(const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return (size_t)v;
}

static void usage(void) {
  printf("usage: tpx-unpack-bench [--bytes 64M] [--frag 4K] [--iters 20] [--warmup 3] [--dev 0] [--quick]\n");
}

/* -1: go on; else the exit status (0 after --help, 2 on bad usage). */
static int parse_args(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--bytes") && v) O.bytes = parse_size(argv[++i]);
    else if (!strcmp(a, "--frag") && v) O.frag = parse_size(argv[++i]);
    else if (!strcmp(a, "--iters") && v) O.iters = atoi(argv[++i]);
    else if (!strcmp(a, "--warmup") && v) O.warmup = atoi(argv[++i]);
    else if (!strcmp(a, "--dev") && v) O.dev = atoi(argv[++i]);
    else if (!strcmp(a, "--quick")) O.skip_slow = 1;
    else {
      usage();
      return strcmp(a, "--help") ? 2 : 0;
    }
  }
  if (O.frag == 0 || O.bytes % O.frag || O.bytes > (1ull << 32) || O.iters < 1 || O.warmup < 0) {
    fprintf(stderr, "bad sizes: --bytes must be a multiple of --frag and at most 4 GiB\n");
    return 2;
  }
  return -1;
}

static uint64_t xorshift(uint64_t *x) {
  *x ^= *x >> 12, *x ^= *x << 25, *x ^= *x >> 27;
  return *x * 2685821657736338717ull;
}

/* Host reference data, the scattered layout (shuffled pages) and the
 * expected result. */
static void make_data(void) {
  B.ref = malloc(O.bytes);
  B.want = malloc(O.bytes);
  B.got = malloc(O.bytes);
  uint32_t *perm = malloc(B.nf * sizeof *perm);
  if (!B.ref || !B.want || !B.got || !perm) exit(1);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < O.bytes; i += 8) {
    uint64_t v = xorshift(&x);
    memcpy(B.ref + i, &v, O.bytes - i < 8 ? O.bytes - i : 8);
  }
  for (uint32_t i = 0; i < B.nf; i++) perm[i] = i;
  for (uint32_t i = B.nf; i > 1; i--) {
    uint32_t j = (uint32_t)(xorshift(&x) % i), t = perm[i - 1];
    perm[i - 1] = perm[j];
    perm[j] = t;
  }
  TPX(tpx__gpu_host_alloc(O.dev, B.nf * sizeof *B.meta, (void **)&B.meta));
  TPX(tpx__gpu_host_dev_ptr(O.dev, B.meta, (void **)&B.meta_map));
  for (uint32_t i = 0; i < B.nf; i++)
    B.meta[i] = (tpx_unpack_meta_t){(uint32_t)(perm[i] * O.frag), (uint32_t)O.frag, (uint64_t)i * O.frag};
  free(perm);
  TPX(tpx__tcpx_unpack_cpu(B.want, O.bytes, B.ref, O.bytes, B.meta, B.nf));
}

/* The GPU side: bounce buffers (device and mapped pinned), destinations,
 * timing events, streams and the gate. */
static void make_gpu(cudaStream_t *s) {
  TPX(tpx__gpu_malloc(O.dev, B.nf * sizeof *B.meta, (void **)&B.meta_devmem));
  TPX(tpx__gpu_memcpy(O.dev, B.meta_devmem, B.meta, B.nf * sizeof *B.meta));
  TPX(tpx__gpu_malloc(O.dev, O.bytes, &B.bdev));
  TPX(tpx__gpu_memcpy(O.dev, B.bdev, B.ref, O.bytes));
  TPX(tpx__gpu_host_alloc(O.dev, O.bytes, &B.bpin));
  memcpy(B.bpin, B.ref, O.bytes);
  TPX(tpx__gpu_host_dev_ptr(O.dev, B.bpin, &B.bpin_map));
  TPX(tpx__gpu_malloc(O.dev, O.bytes, &B.dst));
  TPX(tpx__gpu_malloc(O.dev, O.bytes, &B.dst2));
  CU(cudaEventCreate(&B.t0));
  CU(cudaEventCreate(&B.t1));
  CU(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
  CU(cudaStreamCreateWithFlags(&B.tstream, cudaStreamNonBlocking));
  for (int i = 0; i < TPX_UNPACK_MAX_STREAMS; i++) CU(cudaEventCreateWithFlags(&B.join[i], cudaEventDisableTiming));
  /* The gate (see the top): a pinned flag and the driver's stream wait. */
  TPX(tpx__gpu_host_alloc(O.dev, 64, (void **)&B.gate));
  TPX(tpx__gpu_host_dev_ptr(O.dev, B.gate, &B.gate_dev));
  if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", (void **)&B.wait_value, 12000, cudaEnableDefault,
                                       NULL) != cudaSuccess)
    B.wait_value = NULL;
  if (!B.wait_value) printf("note: cuStreamWaitValue32 unavailable: GPU-alone times not measured\n");
}

static void free_gpu(cudaStream_t s) {
  CU(cudaStreamDestroy(s));
  CU(cudaStreamDestroy(B.tstream));
  for (int i = 0; i < TPX_UNPACK_MAX_STREAMS; i++) CU(cudaEventDestroy(B.join[i]));
  CU(cudaEventDestroy(B.t0));
  CU(cudaEventDestroy(B.t1));
  TPX(tpx__gpu_free(O.dev, B.dst2));
  TPX(tpx__gpu_free(O.dev, B.dst));
  TPX(tpx__gpu_host_free(O.dev, B.bpin));
  TPX(tpx__gpu_free(O.dev, B.bdev));
  TPX(tpx__gpu_free(O.dev, B.meta_devmem));
  TPX(tpx__gpu_host_free(O.dev, B.meta));
  TPX(tpx__gpu_host_free(O.dev, B.gate));
  TPX(tpx__gpu_release(O.dev));
  free(B.ref);
  free(B.want);
  free(B.got);
}

enum {
  K = TPX_UNPACK_KERNEL,
  C = TPX_UNPACK_DESC_COPY,
  M = TPX_UNPACK_DESC_MAPPED,
  D = TPX_UNPACK_DESC_DIRECT,
  P = TPX_UNPACK_DESC_PARAM
};
static const struct variant {
  const char *name;
  int mode, desc, threads, nstreams, batch;
  uint32_t chunk_bytes; /* 0: everything in one chunk */
  int devmeta, slow;
} variants[] = {
    {"kernel 1 launch, desc copy", K, C, 256, 1, 0, 0, 0, 0},
    {"kernel 1 launch, desc mapped", K, M, 256, 1, 0, 0, 0, 0},
    {"kernel 1 launch, desc direct (pinned)", K, D, 256, 1, 0, 0, 0, 0},
    {"kernel 1 launch, desc in device memory", K, D, 256, 1, 0, 0, 1, 0},
    {"kernel 1 launch, desc mapped, 512 thr", K, M, 512, 1, 0, 0, 0, 0},
    {"kernel 4 MiB chunks, copy, 1 stream", K, C, 256, 1, 0, 4u << 20, 0, 0},
    {"kernel 4 MiB chunks, mapped, 1 stream", K, M, 256, 1, 0, 4u << 20, 0, 0},
    {"kernel 4 MiB chunks, param, 1 stream", K, P, 256, 1, 0, 4u << 20, 0, 0},
    {"kernel 4 MiB chunks, param, 2 streams", K, P, 256, 2, 0, 4u << 20, 0, 0},
    {"kernel 4 MiB chunks, param, 4 streams", K, P, 256, 4, 0, 4u << 20, 0, 0},
    {"kernel 4 MiB chunks, mapped, 2 streams", K, M, 256, 2, 0, 4u << 20, 0, 0},
    {"kernel 512 KiB chunks, mapped, 1 stream", K, M, 256, 1, 0, 512u << 10, 0, 0},
    {"kernel 512 KiB chunks, param, 1 stream", K, P, 256, 1, 0, 512u << 10, 0, 0},
    {"kernel 512 KiB chunks, param, 2 streams", K, P, 256, 2, 0, 512u << 10, 0, 0},
    {"kernel 512 KiB chunks, param, 4 streams", K, P, 256, 4, 0, 512u << 10, 0, 0},
    {"kernel 512 KiB chunks, mapped, 4 streams", K, M, 256, 4, 0, 512u << 10, 0, 0},
    {"kernel 512 KiB chunks, direct, 2 streams", K, D, 256, 2, 0, 512u << 10, 0, 0},
    {"d2d 512 KiB chunks, batched, 2 streams", TPX_UNPACK_D2D, 0, 256, 2, 1, 512u << 10, 0, 1},
    {"d2d 512 KiB chunks, per fragment, 1 stream", TPX_UNPACK_D2D, 0, 256, 1, 0, 512u << 10, 0, 1},
    {"host mode, 4 MiB chunks", TPX_UNPACK_HOST, 0, 256, 1, 0, 4u << 20, 0, 1},
};

/* Per bounce kind (device, pinned): the copy baselines, where its rows
 * start, and [1 launch, 4 MiB, 512 KiB] with the default descriptors and
 * streams. */
struct results {
  struct row *key[2][3];
  float base_gpu[2], base_e2e[2];
  int first_row[2];
};

static void run_variants(cudaStream_t s, struct results *res) {
  const int nvar = (int)(sizeof variants / sizeof variants[0]);
  for (int pinned = 0; pinned < 2; pinned++) {
    struct copy_arg cp = {B.dst2, pinned ? B.bpin : B.bdev,
                          pinned ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice, s};
    float e2e = time_median_us(op_copy, NULL, &cp, &s, 1, O.iters, 0);
    float gpu = B.wait_value ? time_median_us(op_copy, NULL, &cp, &s, 1, O.iters, 1) : e2e;
    res->base_e2e[pinned] = e2e, res->base_gpu[pinned] = gpu;
    res->first_row[pinned] = nrows;
    add_base(pinned ? "cudaMemcpy H2D from pinned (baseline b)" : "cudaMemcpy D2D (baseline a)", gpu, e2e);
    for (int v = 0; v < nvar; v++) {
      const struct variant *va = &variants[v];
      if (va->slow && O.skip_slow) continue;
      uint32_t chunk = va->chunk_bytes ? (uint32_t)(va->chunk_bytes / O.frag) : B.nf;
      if (chunk == 0 || (va->chunk_bytes && chunk >= B.nf)) continue;
      int iters = va->mode == TPX_UNPACK_HOST ? 2 : va->slow ? (O.iters < 5 ? O.iters : 5) : O.iters;
      struct row *r = run_unpack(va->name, va->mode, va->desc, va->threads, va->nstreams, va->batch, chunk,
                                 pinned, va->devmeta, iters, gpu, e2e);
      /* The defaults: one launch reads mapped entries (more than PARAM_MAX
       * of them); chunks pass them as parameters over the default streams. */
      if (va->mode == K && va->threads == 256 && !va->devmeta &&
          ((va->chunk_bytes == 0 && va->desc == M) ||
           (va->chunk_bytes && va->desc == TPX_UNPACK_DESC_DEFAULT &&
            va->nstreams == TPX_UNPACK_NSTREAMS_DEFAULT)))
        res->key[pinned][va->chunk_bytes == 0 ? 0 : va->chunk_bytes == (4u << 20) ? 1 : 2] = r;
    }
  }
}

static void print_rows(const struct results *res) {
  printf("\n%-7s %-40s %10s %8s %6s | %10s %8s %6s | %s\n", "bounce", "variant", "gpu us", "GB/s", "ratio",
         "e2e us", "GB/s", "ratio", "bytes");
  for (int i = 0; i < nrows; i++) {
    const struct row *r = &rows[i];
    char g[3][16] = {"-", "-", "-"};
    if (r->us > 0) {
      snprintf(g[0], sizeof g[0], "%.1f", r->us);
      snprintf(g[1], sizeof g[1], "%.1f", r->gbs);
      snprintf(g[2], sizeof g[2], "%.3f", r->ratio);
    }
    printf("%-7s %-40s %10s %8s %6s | %10.1f %8.1f %6.3f | %s\n", i >= res->first_row[1] ? "pinned" : "device",
           r->name, g[0], g[1], g[2], r->e2e_us, gbs(r->e2e_us), r->e2e_ratio, r->ok ? "ok" : "WRONG");
  }
  printf("\nratios = copy time / unpack time (>= 1 is as fast as the copy); gpu = the GPU alone, e2e = with the "
         "CPU's submission\n");
}

static double key_ratio(const struct row *r) { return r ? (r->us > 0 ? r->ratio : r->e2e_ratio) : 0.0; }

static void print_summary(const struct results *res) {
  const char *label[2] = {"(a) bounce in device memory vs cudaMemcpy D2D",
                          "(b) bounce in mapped pinned host memory vs cudaMemcpy H2D"};
  for (int p = 0; p < 2; p++) {
    struct row *k = res->key[p][0];
    if (!k) continue;
    double ratio = key_ratio(k);
    printf("%s: kernel (one launch, mapped entries) %.1f GB/s vs copy %.1f GB/s: ratio %.3f (e2e %.3f; "
           "chunks with the default %s entries over %d streams: 4 MiB %.3f, 512 KiB %.3f); target >= 0.8: %s\n",
           label[p], k->us > 0 ? k->gbs : gbs(k->e2e_us), gbs(res->base_gpu[p]), ratio, k->e2e_ratio,
           tpx__unpacker_desc_name(TPX_UNPACK_DESC_DEFAULT), TPX_UNPACK_NSTREAMS_DEFAULT,
           key_ratio(res->key[p][1]), key_ratio(res->key[p][2]), ratio >= 0.8 ? "met" : "NOT met");
  }
  printf("correctness: %s\n", B.failures ? "FAILED" : "every variant byte-for-byte identical to the CPU gather");
}

int main(int argc, char **argv) {
  if (tool_version_asked(argc, argv, "tpx-unpack-bench")) return 0;
  int st = parse_args(argc, argv);
  if (st >= 0) return st;
  int ndev = 0;
  if (tpx__gpu_device_count(&ndev) != 0 || ndev <= O.dev) {
    printf("tpx-unpack-bench: no GPU %d (%s)\n", O.dev, tpx_last_error());
    return 77;
  }
  TPX(tpx__gpu_retain(O.dev));
  TPX(tpx__gpu_set_device(O.dev));
  struct cudaDeviceProp prop;
  CU(cudaGetDeviceProperties(&prop, O.dev));
  char bus[32];
  TPX(tpx__gpu_pci_bus_id(O.dev, bus, sizeof bus));
  B.nf = (uint32_t)(O.bytes / O.frag);
  printf("tpx-unpack-bench: GPU %d %s (%d SMs, %s), %zu MiB in %u fragments of %zu bytes, shuffled pages; "
         "median of %d after %d warm-up\n",
         O.dev, prop.name, prop.multiProcessorCount, bus, O.bytes >> 20, B.nf, O.frag, O.iters, O.warmup);
  make_data();
  cudaStream_t s;
  make_gpu(&s);
  struct results res;
  memset(&res, 0, sizeof(res));
  run_variants(s, &res);
  print_rows(&res);
  print_summary(&res);
  free_gpu(s);
  return B.failures ? 1 : 0;
}

#endif /* TPX_HAVE_CUDA */
