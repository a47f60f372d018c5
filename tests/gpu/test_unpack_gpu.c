/* Unpack on a real GPU, byte for byte against the CPU gather: every mode
 * (kernel with each descriptor source, block size and stream count, d2d
 * batched and per run, host), bounce in
 * device memory and in mapped pinned host memory, random fragments in
 * shuffled pages, every source/destination misalignment, odd lengths, large
 * (sliced) fragments, fragments touching the ends of both buffers, empty
 * chunks, refused entries, and many chunks in flight polled in FIFO order.
 * `--quick` runs a subset (for compute-sanitizer).
 * Exit 0: all passed; 1: a failure; 77: no GPU (skipped). */
#include <stdint.h>
#include <string.h>

#include "cuda/gpu.h"
#include "cuda/unpack.h"
#include "gpu_check.h"

#define PAGE 4096u
#define BOUNCE_BYTES (16u << 20)
#define DST_BYTES (16u << 20)
#define POISON 0xA5

static int quick;
static int dev;

static uint64_t rng_state = 1;
static uint64_t rnd(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}
static uint32_t rnd_below(uint32_t n) { return (uint32_t)(rnd() % n); }

static struct {
  uint8_t *ref;        /* host copy of the bounce contents */
  void *bdev;          /* bounce in device memory */
  void *bpin;          /* bounce in pinned host memory ... */
  void *bpin_dev;      /* ... as the GPU addresses it */
  tpx_unpack_meta_t *meta;     /* entries in pinned host memory (as the plugin's) */
  tpx_unpack_meta_t *meta_dev; /* their device mapping */
  void *dst;
  uint8_t *got, *want;
} E;

struct config {
  const char *name;
  int mode, desc, threads, nstreams, d2d_batch;
  tpx_unpacker_t *u;
};

static struct config configs[] = {
    {"kernel/copy/256/1s", TPX_UNPACK_KERNEL, TPX_UNPACK_DESC_COPY, 256, 1, 0, NULL},
    {"kernel/mapped/256/1s", TPX_UNPACK_KERNEL, TPX_UNPACK_DESC_MAPPED, 256, 1, 0, NULL},
    {"kernel/direct/256/2s", TPX_UNPACK_KERNEL, TPX_UNPACK_DESC_DIRECT, 256, 2, 0, NULL},
    {"kernel/param/256/1s", TPX_UNPACK_KERNEL, TPX_UNPACK_DESC_PARAM, 256, 1, 0, NULL},
    {"kernel/param/256/4s", TPX_UNPACK_KERNEL, TPX_UNPACK_DESC_PARAM, 256, 4, 0, NULL},
    {"kernel/param/64/2s", TPX_UNPACK_KERNEL, TPX_UNPACK_DESC_PARAM, 64, 2, 0, NULL},
    {"kernel/copy/512/3s", TPX_UNPACK_KERNEL, TPX_UNPACK_DESC_COPY, 512, 3, 0, NULL},
    {"d2d/batch/2s", TPX_UNPACK_D2D, 0, 0, 2, 1, NULL},
    {"d2d/per-run/1s", TPX_UNPACK_D2D, 0, 0, 1, 0, NULL},
    {"host", TPX_UNPACK_HOST, 0, 0, 1, 0, NULL},
};
#define NCONFIG (int)(sizeof configs / sizeof configs[0])

static const char *bounce_name(int pinned) { return pinned ? "pinned-host" : "device"; }

/* Unpack entries m[0..cnt) with configuration c from the chosen bounce and
 * compare the whole destination with the CPU gather (holes stay poison). */
static void run_chunk(struct config *c, int pinned, const tpx_unpack_meta_t *m, uint32_t cnt,
                      const char *what) {
  memcpy(E.meta, m, cnt * sizeof *m);
  MUST(tpx__gpu_memset(dev, E.dst, POISON, DST_BYTES));
  tpx_unpack_chunk_t ch = {.meta = E.meta,
                           .meta_dev = E.meta_dev,
                           .cnt = cnt,
                           .bounce = pinned ? E.bpin_dev : E.bdev,
                           .bounce_bytes = BOUNCE_BYTES,
                           .dst = E.dst,
                           .dst_bytes = DST_BYTES};
  uint64_t t = 0;
  int rc = tpx__unpacker_submit(c->u, &ch, &t);
  CHECK(rc == 0, "%s %s %s: submit -> %d", c->name, bounce_name(pinned), what, rc);
  if (rc) return;
  rc = tpx__unpacker_wait(c->u, t, 20000);
  CHECK(rc == 0, "%s %s %s: wait -> %d", c->name, bounce_name(pinned), what, rc);
  if (rc) return;
  CHECK(tpx__unpacker_done(c->u, t) == 1, "done stays done");
  MUST(tpx__gpu_memcpy(dev, E.got, E.dst, DST_BYTES));
  memset(E.want, POISON, DST_BYTES);
  MUST(tpx__tcpx_unpack_cpu(E.want, DST_BYTES, E.ref, BOUNCE_BYTES, m, cnt));
  if (memcmp(E.got, E.want, DST_BYTES) != 0) {
    size_t i = 0;
    while (E.got[i] == E.want[i]) i++;
    int entry = -1;
    for (uint32_t k = 0; k < cnt; k++)
      if (i >= m[k].dst_off && i < m[k].dst_off + m[k].len) entry = (int)k;
    CHECK(0, "%s %s %s: byte %zu differs (got %02x want %02x), entry %d", c->name, bounce_name(pinned),
          what, i, E.got[i], E.want[i], entry);
  } else {
    gc_checks++;
  }
}

static void for_all(const tpx_unpack_meta_t *m, uint32_t cnt, const char *what) {
  for (int i = 0; i < NCONFIG; i++)
    for (int pinned = 0; pinned < 2; pinned++) run_chunk(&configs[i], pinned, m, cnt, what);
}

static tpx_unpack_meta_t entries[TPX_UNPACK_MAX_FRAGS];

static void shuffle_u32(uint32_t *a, uint32_t n) {
  for (uint32_t i = n; i > 1; i--) {
    uint32_t j = rnd_below(i), t = a[i - 1];
    a[i - 1] = a[j];
    a[j] = t;
  }
}

/* Fragments in shuffled pages, random lengths and in-page offsets. */
static void test_scattered(void) {
  static uint32_t perm[BOUNCE_BYTES / PAGE];
  const uint32_t counts[] = {1, 17, 128, 1024, 2048};
  int seeds = quick ? 1 : 3;
  for (unsigned ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
    if (quick && counts[ci] > 128) continue;
    for (int s = 0; s < seeds; s++) {
      for (uint32_t i = 0; i < BOUNCE_BYTES / PAGE; i++) perm[i] = i;
      shuffle_u32(perm, BOUNCE_BYTES / PAGE);
      int gaps = s & 1;
      uint64_t d = rnd_below(16);
      for (uint32_t i = 0; i < counts[ci]; i++) {
        uint32_t kind = rnd_below(4);
        uint32_t len = kind == 0 ? PAGE : kind == 1 ? 1 + rnd_below(33) : 1 + rnd_below(PAGE);
        uint32_t off = kind == 0 ? 0 : rnd_below(PAGE - len + 1);
        entries[i] = (tpx_unpack_meta_t){perm[i] * PAGE + off, len, d};
        d += len + (gaps ? rnd_below(48) : 0);
      }
      char what[64];
      snprintf(what, sizeof what, "scattered cnt=%u seed=%d", counts[ci], s);
      for_all(entries, counts[ci], what);
    }
  }
}

/* Every source and destination misalignment (mod 16) with short, odd and
 * page-crossing lengths; entries in random order. */
static void test_alignment_matrix(void) {
  static const uint32_t lens_full[] = {1,  2,   3,   5,   15,  16,  17,   31,   32,   33,   63,  64,
                                       65, 100, 255, 256, 257, 511, 513, 1000, 4095, 4096, 4097, 9001};
  static const uint32_t lens_quick[] = {1, 3, 16, 17, 33, 257, 4097};
  const uint32_t *lens = quick ? lens_quick : lens_full;
  uint32_t nlens = quick ? sizeof lens_quick / 4 : sizeof lens_full / 4;
  static tpx_unpack_meta_t all[16 * 16 * 24];
  uint32_t n = 0;
  uint64_t s = 0, d = 0;
  for (uint32_t sa = 0; sa < 16; sa++)
    for (uint32_t da = 0; da < 16; da++)
      for (uint32_t li = 0; li < nlens; li++) {
        s = (s + 15) & ~15ull;
        d = (d + 15) & ~15ull;
        all[n++] = (tpx_unpack_meta_t){(uint32_t)(s + sa), lens[li], d + da};
        s += sa + lens[li] + 16;
        d += da + lens[li] + 16;
      }
  CHECK(s <= BOUNCE_BYTES && d <= DST_BYTES, "matrix fits");
  for (uint32_t i = n; i > 1; i--) { /* random order: neighbours differ */
    uint32_t j = rnd_below(i);
    tpx_unpack_meta_t t = all[i - 1];
    all[i - 1] = all[j];
    all[j] = t;
  }
  for (uint32_t off = 0; off < n; off += TPX_UNPACK_MAX_FRAGS) {
    uint32_t cnt = n - off < TPX_UNPACK_MAX_FRAGS ? n - off : TPX_UNPACK_MAX_FRAGS;
    for_all(all + off, cnt, "alignment matrix");
  }
}

/* Large fragments are cut into slices across warps; odd sizes and offsets. */
static void test_large(void) {
  uint32_t cnt = 0;
  uint64_t s = 3, d = 7;
  const uint32_t lens[] = {65536 + 3, 1u << 20, 3u * (1u << 20) + 5, 12345, 2u * (1u << 20) - 1};
  for (unsigned i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    if (quick && lens[i] > (1u << 20)) continue;
    entries[cnt++] = (tpx_unpack_meta_t){(uint32_t)s, lens[i], d};
    s += lens[i] + 1 + i;
    d += lens[i] + 5;
  }
  for_all(entries, cnt, "large fragments");
}

/* Fragments that end exactly at the end of the bounce buffer and of the
 * destination, at every misalignment: nothing outside may be read or
 * written (compute-sanitizer checks the reads). */
static void test_edges(void) {
  uint32_t cnt = 0;
  for (uint32_t k = 0; k < 16; k++) {
    uint32_t len = 1 + k * 37;
    entries[cnt++] = (tpx_unpack_meta_t){BOUNCE_BYTES - len, len, DST_BYTES - len - 8192 * (k + 1)};
    entries[cnt++] = (tpx_unpack_meta_t){k, len, 100000 + 1000 * k};
  }
  entries[cnt++] = (tpx_unpack_meta_t){BOUNCE_BYTES - 4099, 4099, DST_BYTES - 4099};
  entries[cnt++] = (tpx_unpack_meta_t){0, 4099, 1};
  for_all(entries, cnt, "buffer edges");
}

static void test_empty_and_refused(void) {
  for (int i = 0; i < NCONFIG; i++) {
    struct config *c = &configs[i];
    MUST(tpx__gpu_memset(dev, E.dst, POISON, 4096));
    tpx_unpack_chunk_t ch = {.meta = E.meta, .meta_dev = E.meta_dev, .cnt = 0, .bounce = E.bdev,
                             .bounce_bytes = BOUNCE_BYTES, .dst = E.dst, .dst_bytes = DST_BYTES};
    uint64_t t0 = 0, t1 = 0, t2 = 0;
    MUST(tpx__unpacker_submit(c->u, &ch, &t0));
    MUST(tpx__unpacker_wait(c->u, t0, 10000));
    /* A bad entry anywhere refuses the whole chunk: nothing copied, no ticket. */
    E.meta[0] = (tpx_unpack_meta_t){0, 4096, 0};
    E.meta[1] = (tpx_unpack_meta_t){BOUNCE_BYTES - 10, 11, 8192};
    ch.cnt = 2;
    CHECK(tpx__unpacker_submit(c->u, &ch, &t1) == TPX_EPROTO, "%s: bad source refused", c->name);
    E.meta[1] = (tpx_unpack_meta_t){0, 16, DST_BYTES - 15};
    CHECK(tpx__unpacker_submit(c->u, &ch, &t1) == TPX_EPROTO, "%s: bad destination refused", c->name);
    ch.cnt = TPX_UNPACK_MAX_FRAGS + 1;
    CHECK(tpx__unpacker_submit(c->u, &ch, &t1) == TPX_EINVAL, "%s: too many entries", c->name);
    ch.cnt = 0;
    MUST(tpx__unpacker_submit(c->u, &ch, &t2));
    CHECK(t2 == t0 + 1, "%s: refused chunks take no ticket (%llu after %llu)", c->name,
          (unsigned long long)t2, (unsigned long long)t0);
    MUST(tpx__unpacker_sync(c->u));
    CHECK(tpx__unpacker_done(c->u, t2 + 1) == TPX_EINVAL, "%s: unknown ticket is an error", c->name);
    uint8_t head[4096];
    MUST(tpx__gpu_memcpy(dev, head, E.dst, sizeof head));
    int untouched = 1;
    for (size_t b = 0; b < sizeof head; b++) untouched &= head[b] == POISON;
    CHECK(untouched, "%s: refused chunk copied nothing", c->name);
  }
  /* Direct descriptors need the device address of the entries. */
  struct config *c = &configs[2];
  CHECK(c->desc == TPX_UNPACK_DESC_DIRECT, "configs[2] is the direct one");
  tpx_unpack_chunk_t ch = {.meta = E.meta, .meta_dev = NULL, .cnt = 1, .bounce = E.bdev,
                           .bounce_bytes = BOUNCE_BYTES, .dst = E.dst, .dst_bytes = DST_BYTES};
  uint64_t t;
  CHECK(tpx__unpacker_submit(c->u, &ch, &t) == TPX_EINVAL, "direct without meta_dev");
}

/* Many chunks in flight, each into its own part of the destination, entries
 * overwritten right after each submit (allowed except for direct); tickets
 * complete in FIFO order. */
static void test_pipeline(void) {
  /* 96 parts of 174 KiB hold 32 fragments of at most 4 KiB each. */
  const uint32_t nchunks = quick ? 8 : 96, frags = 32;
  const uint64_t part = DST_BYTES / nchunks;
  static tpx_unpack_meta_t all[96 * 32];
  static uint32_t perm[BOUNCE_BYTES / PAGE];
  for (uint32_t i = 0; i < BOUNCE_BYTES / PAGE; i++) perm[i] = i;
  shuffle_u32(perm, BOUNCE_BYTES / PAGE);
  for (uint32_t k = 0; k < nchunks; k++) {
    uint64_t d = k * part;
    for (uint32_t f = 0; f < frags; f++) {
      uint32_t len = 1 + rnd_below(PAGE);
      all[k * frags + f] = (tpx_unpack_meta_t){perm[(k * frags + f) % (BOUNCE_BYTES / PAGE)] * PAGE, len, d};
      d += len;
    }
  }
  for (int i = 0; i < NCONFIG; i++) {
    struct config *c = &configs[i];
    if (c->desc == TPX_UNPACK_DESC_DIRECT && c->mode == TPX_UNPACK_KERNEL) continue;
    for (int pinned = 0; pinned < 2; pinned++) {
      MUST(tpx__gpu_memset(dev, E.dst, POISON, DST_BYTES));
      uint64_t first = 0, last = 0;
      int eagain = 0;
      for (uint32_t k = 0; k < nchunks; k++) {
        memcpy(E.meta, all + k * frags, frags * sizeof *E.meta);
        tpx_unpack_chunk_t ch = {.meta = E.meta, .cnt = frags, .bounce = pinned ? E.bpin_dev : E.bdev,
                                 .bounce_bytes = BOUNCE_BYTES, .dst = E.dst, .dst_bytes = DST_BYTES};
        uint64_t t = 0;
        int rc;
        int tries = 0;
        while ((rc = tpx__unpacker_submit(c->u, &ch, &t)) == TPX_EAGAIN && tries++ < 1000000) {
          eagain++;
          MUST(tpx__unpacker_wait(c->u, first, 10000)); /* oldest first, as the engine does */
        }
        CHECK(rc == 0, "%s: submit chunk %u -> %d", c->name, k, rc);
        memset(E.meta, 0xEE, frags * sizeof *E.meta); /* entries may change after submit */
        if (k == 0) first = t;
        last = t;
        /* Poll the oldest without blocking, as a progress loop would. */
        while (first <= last && tpx__unpacker_done(c->u, first) == 1) first++;
      }
      for (uint64_t t = first; t <= last; t++) MUST(tpx__unpacker_wait(c->u, t, 20000));
      for (uint64_t t = 0; t <= last; t++)
        CHECK(tpx__unpacker_done(c->u, t) == 1, "%s: ticket %llu done", c->name,
              (unsigned long long)t);
      MUST(tpx__gpu_memcpy(dev, E.got, E.dst, DST_BYTES));
      memset(E.want, POISON, DST_BYTES);
      MUST(tpx__tcpx_unpack_cpu(E.want, DST_BYTES, E.ref, BOUNCE_BYTES, all, nchunks * frags));
      CHECK(memcmp(E.got, E.want, DST_BYTES) == 0, "%s %s: pipelined chunks intact (EAGAIN %d times)",
            c->name, bounce_name(pinned), eagain);
    }
    tpx_unpack_stats_t st;
    tpx__unpacker_get_stats(c->u, &st);
    CHECK(st.events_created <= 64, "%s: events pooled (%llu created for %llu chunks)", c->name,
          (unsigned long long)st.events_created, (unsigned long long)st.chunks);
  }
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--quick") == 0) quick = 1;
  int ndev = 0;
  if (tpx__gpu_device_count(&ndev) != 0 || ndev == 0) {
    printf("test_unpack_gpu: no GPU (%s); skipped\n", tpx_last_error());
    return 77;
  }
  dev = 0;
  MUST(tpx__gpu_retain(dev));
  E.ref = malloc(BOUNCE_BYTES);
  E.got = malloc(DST_BYTES);
  E.want = malloc(DST_BYTES);
  CHECK(E.ref && E.got && E.want, "host buffers");
  if (!E.ref || !E.got || !E.want) return 1;
  for (size_t i = 0; i < BOUNCE_BYTES; i += 8) {
    uint64_t x = rnd();
    memcpy(E.ref + i, &x, 8);
  }
  MUST(tpx__gpu_malloc(dev, BOUNCE_BYTES, &E.bdev));
  MUST(tpx__gpu_memcpy(dev, E.bdev, E.ref, BOUNCE_BYTES));
  MUST(tpx__gpu_host_alloc(dev, BOUNCE_BYTES, &E.bpin));
  memcpy(E.bpin, E.ref, BOUNCE_BYTES);
  MUST(tpx__gpu_host_dev_ptr(dev, E.bpin, &E.bpin_dev));
  MUST(tpx__gpu_host_alloc(dev, (TPX_UNPACK_MAX_FRAGS + 1) * sizeof(tpx_unpack_meta_t), (void **)&E.meta));
  MUST(tpx__gpu_host_dev_ptr(dev, E.meta, (void **)&E.meta_dev));
  MUST(tpx__gpu_malloc(dev, DST_BYTES, &E.dst));
  for (int i = 0; i < NCONFIG; i++) {
    tpx_unpack_opts_t o;
    tpx__unpacker_opts_default(&o);
    o.mode = configs[i].mode;
    o.desc = configs[i].desc;
    if (configs[i].threads) o.threads = configs[i].threads;
    o.nstreams = configs[i].nstreams;
    o.d2d_batch = configs[i].d2d_batch;
    o.max_inflight = 16;
    o.host_stage_bytes = 1 << 20; /* small on purpose: grows on demand */
    MUST(tpx__unpacker_create(dev, &o, &configs[i].u));
  }
  printf("test_unpack_gpu: %s run, %d configurations x 2 bounce kinds\n", quick ? "quick" : "full", NCONFIG);
  test_scattered();
  test_alignment_matrix();
  test_large();
  test_edges();
  test_empty_and_refused();
  test_pipeline();
  for (int i = 0; i < NCONFIG; i++) tpx__unpacker_destroy(configs[i].u);
  MUST(tpx__gpu_free(dev, E.dst));
  MUST(tpx__gpu_host_free(dev, E.meta));
  MUST(tpx__gpu_host_free(dev, E.bpin));
  MUST(tpx__gpu_free(dev, E.bdev));
  MUST(tpx__gpu_release(dev));
  CHECK(tpx__gpu_ctx_retained() == 0, "contexts balanced (%d)", tpx__gpu_ctx_retained());
  free(E.ref);
  free(E.got);
  free(E.want);
  return gc_finish("test_unpack_gpu");
}
