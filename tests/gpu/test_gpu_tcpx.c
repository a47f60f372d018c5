/* The GPUDirect-TCPX plugin's device rules, on real GPUs, over the built-in
 * transport's unpack mode (docs/A3HIGH.md):
 *
 * 1. GPU binding (two GPUs or more): an endpoint on the last GPU, over the built-in
 * transport's unpack mode wrapped by tests/util/net_probe.h, which records
 * cudaGetDevice() at every listen, connect, accept and regMr - what the
 * GPUDirect-TCPX plugin reads there. Every call must see the endpoint's GPU
 * (a CUDA region's own GPU for its regMr), the emulation must have bound its
 * comms (and the recv comm's bounce pool) to it, the calling thread must get
 * its own device back, and a write into the endpoint's GPU memory must land.
 *
 * Before the fix, the calls ran on whatever device the thread had (0).
 *
 * 2. Host-memory receives (one GPU): the emulation stalls a receive into host
 * memory on an UNPACK comm for good, as the plugin does; writes into a host
 * region larger than TPX_INLINE_BYTES and a refused write (drained into the
 * discard scratch) must still complete, because the engine posts such
 * receives with its device landing region. Before the fix both hung until
 * TPX_TIMEOUT_MS.
 *
 * 3. Registrations (one GPU, 1.1 GiB free): a CUDA region of more than
 * 1 GiB whose start is not 4 KiB-aligned. The engine registers it in 1 GiB
 * pieces; the emulation refuses a CUDA registration at an unaligned pointer,
 * as the plugin does, so a write landing past the first GiB failed before
 * every piece started on a page boundary.
 *
 * Exit 0: passed; 1: failed; 77: no GPU. Plain C (gpu_check.h). */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_check.h"
#include "net_probe.h"
#include "sock/sock.h"
#include "tpx/tpx.h"

#define LEN (1u << 20)

/* Two endpoints over loopback in this process, unpack mode, B on GPU gb
 * (over net_b when not NULL), connected. */
struct pair {
  tpx_config_t cfg;
  tpx_endpoint_t *a, *b;
  tpx_peer_t *ab, *ba;
};

/* The CUDA device a send or recv comm of the built-in transport was bound to
 * when it was made, or < 0 (no GPU, not unpack mode, or not a comm). */
static int comm_gpu(tpx_net_t *net, void *comm) {
  tpx_sock_net_t *sn = tpx__sock_net_of(net, "comm_gpu");
  if (sn == NULL) return TPX_EINVAL;
  int kind = TPX_SK_NONE;
  tpx_sock_comm_t *m = tpx__sock_reg_get(&sn->reg, (uint64_t)(uintptr_t)comm, TPX_SK_NONE, &kind);
  if (m == NULL || (kind != TPX_SK_SEND && kind != TPX_SK_RECV)) return TPX_EINVAL;
  return m->gpu_bound;
}

static void unpack_cfg(tpx_config_t *cfg, int timeout_ms) {
  tpx_config_from_env(cfg);
  cfg->sock_unpack = 1;
  cfg->progress_thread = 1;
  if (timeout_ms) cfg->timeout_ms = timeout_ms;
}

static void pair_open(struct pair *p, tpx_net_t *net_b, int gb) {
  tpx_endpoint_params_t ep;
  tpx_endpoint_params_init(&ep);
  ep.cfg = &p->cfg;
  ep.port = TPX_PORT_EPHEMERAL;
  ep.listen_host = "127.0.0.1";
  ep.name = "A";
  MUST(tpx_endpoint_create(&ep, &p->a));
  ep.name = "B";
  ep.gpu = gb;
  ep.net = net_b;
  MUST(tpx_endpoint_create(&ep, &p->b));
  MUST(tpx_connect(p->a, "127.0.0.1", tpx_endpoint_port(p->b), &p->ab));
  MUST(tpx_accept(p->b, 10000, &p->ba));
}

static void pair_close(struct pair *p) {
  tpx_peer_close(p->ab);
  tpx_peer_close(p->ba);
  tpx_endpoint_destroy(p->a);
  tpx_endpoint_destroy(p->b);
}

static void part_bind(int n) {
  int gb = n - 1;
  struct pair P;
  unpack_cfg(&P.cfg, 0);
  tpx_net_t *base = NULL;
  MUST(tpx_net_open_builtin(&P.cfg, &base));
  tpx_net_t *probe = net_probe_wrap(base, tpx__gpu_current_device, gb);
  pair_open(&P, probe, gb); /* before any registration: nothing pinned a device yet */
  tpx_endpoint_t *a = P.a, *b = P.b;
  tpx_peer_t *ab = P.ab;

  /* A (GPU 0) writes into B's memory on GPU gb: B receives through the bounce pool. */
  uint8_t *src = NULL, *dst = NULL;
  CHECK(cudaMalloc((void **)&src, LEN) == cudaSuccess, "cudaMalloc on 0");
  CHECK(cudaSetDevice(gb) == cudaSuccess, "cudaSetDevice(%d)", gb);
  CHECK(cudaMalloc((void **)&dst, LEN) == cudaSuccess, "cudaMalloc on %d", gb);
  CHECK(cudaMemset(dst, 0, LEN) == cudaSuccess, "memset");
  CHECK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice(0)");
  CHECK(cudaMemset(src, 0x5c, LEN) == cudaSuccess, "memset");
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "sync");
  tpx_mem_desc_t ds = {src, LEN, TPX_MEM_CUDA, 0, TPX_ACCESS_READ};
  tpx_mem_desc_t dd = {dst, LEN, TPX_MEM_CUDA, gb, TPX_ACCESS_WRITE};
  tpx_mem_t *ms = NULL, *md = NULL;
  MUST(tpx_mem_register(a, &ds, &ms));
  MUST(tpx_mem_register(b, &dd, &md));
  uint8_t blob[TPX_MD_MAX];
  size_t bl = 0;
  tpx_rmem_t *rd = NULL;
  MUST(tpx_mem_get_public_data(md, blob, sizeof(blob), &bl));
  MUST(tpx_load_remote_md(blob, bl, &rd));
  tpx_xfer_t *x = NULL;
  MUST(tpx_write(ab, ms, 0, rd, 0, LEN, NULL, 0, &x));
  CHECK(tpx_xfer_wait(x, 30000) == 0, "write");
  tpx_xfer_free(x);
  uint8_t *h = malloc(LEN);
  CHECK(cudaMemcpy(h, dst, LEN, cudaMemcpyDeviceToHost) == cudaSuccess, "copy back");
  size_t bad = 0;
  for (size_t i = 0; i < LEN; i++)
    bad += h[i] != 0x5c;
  CHECK(bad == 0, "%zu bytes wrong on GPU %d", bad, gb);
  free(h);

  const char *kind[NP_KINDS] = {"listen", "connect", "accept", "regMr"};
  for (int k = 0; k < NP_KINDS; k++) {
    CHECK(np_g.calls[k] > 0, "no %s call seen", kind[k]);
    CHECK(np_g.wrong[k] == 0, "%s: %d of %d calls ran on GPU %d, want %d", kind[k], np_g.wrong[k],
          np_g.calls[k], np_g.seen[k], gb);
  }
  CHECK(comm_gpu(base, np_g.comm[NP_ACCEPT]) == gb,
        "recv comm (bounce pool) on GPU %d, want %d",
        comm_gpu(base, np_g.comm[NP_ACCEPT]), gb);
  CHECK(comm_gpu(base, np_g.comm[NP_CONNECT]) == gb, "send comm on GPU %d, want %d",
        comm_gpu(base, np_g.comm[NP_CONNECT]), gb);
  int cur = -1;
  CHECK(cudaGetDevice(&cur) == cudaSuccess && cur == 0,
        "the caller's device is %d after the calls, want 0", cur);

  tpx_rmem_free(rd);
  MUST(tpx_mem_deregister(ms));
  MUST(tpx_mem_deregister(md));
  pair_close(&P);
  tpx_net_close(base);
  cudaFree(src);
  cudaSetDevice(gb);
  cudaFree(dst);
  cudaSetDevice(0);
}

static tpx_rmem_t *remote_of(tpx_mem_t *m) {
  uint8_t blob[TPX_MD_MAX];
  size_t bl = 0;
  tpx_rmem_t *r = NULL;
  MUST(tpx_mem_get_public_data(m, blob, sizeof(blob), &bl));
  MUST(tpx_load_remote_md(blob, bl, &r));
  return r;
}

static int write_wait(tpx_peer_t *p, tpx_mem_t *src, tpx_rmem_t *dst, size_t len) {
  tpx_xfer_t *x = NULL;
  int rc = tpx_write(p, src, 0, dst, 0, len, NULL, 0, &x);
  if (rc == 0) rc = tpx_xfer_wait(x, 30000);
  tpx_xfer_free(x);
  return rc;
}

static void part_host_recv(void) {
  struct pair P;
  unpack_cfg(&P.cfg, 5000); /* a stalled receive fails the transfer in 5 s instead of 30 */
  pair_open(&P, NULL, 0);
  tpx_endpoint_t *a = P.a, *b = P.b;
  tpx_peer_t *ab = P.ab;
  size_t len = 4u << 20; /* far above TPX_INLINE_BYTES: through the transport */
  uint8_t *src = aligned_alloc(4096, len), *dst = aligned_alloc(4096, len),
          *gone = aligned_alloc(4096, len);
  memset(src, 0x3a, len);
  memset(dst, 0, len);
  tpx_mem_desc_t ds = {src, len, TPX_MEM_HOST, 0, TPX_ACCESS_READ};
  tpx_mem_desc_t dd = {dst, len, TPX_MEM_HOST, 0, TPX_ACCESS_WRITE};
  tpx_mem_desc_t dg = {gone, len, TPX_MEM_HOST, 0, TPX_ACCESS_WRITE};
  tpx_mem_t *ms = NULL, *md = NULL, *mg = NULL;
  MUST(tpx_mem_register(a, &ds, &ms));
  MUST(tpx_mem_register(b, &dd, &md));
  MUST(tpx_mem_register(b, &dg, &mg));
  tpx_rmem_t *rd = remote_of(md), *rg = remote_of(mg);
  CHECK(write_wait(ab, ms, rd, len) == 0, "write into B's host memory");
  size_t bad = 0;
  for (size_t i = 0; i < len; i++)
    bad += dst[i] != 0x3a;
  CHECK(bad == 0, "%zu bytes wrong in B's host memory", bad);
  /* B forgets the region: the write is refused, its bytes drained into scratch. */
  MUST(tpx_mem_deregister(mg));
  int rc = write_wait(ab, ms, rg, len);
  CHECK(rc == TPX_EACCES, "refused write: %d (%s), want TPX_EACCES", rc, tpx_strerror(rc));
  memset(dst, 0, len);
  CHECK(write_wait(ab, ms, rd, len) == 0, "write after the refused one");
  bad = 0;
  for (size_t i = 0; i < len; i++)
    bad += dst[i] != 0x3a;
  CHECK(bad == 0, "%zu bytes wrong after the refused write", bad);
  tpx_rmem_free(rd);
  tpx_rmem_free(rg);
  MUST(tpx_mem_deregister(ms));
  MUST(tpx_mem_deregister(md));
  pair_close(&P);
  free(src), free(dst), free(gone);
}

static void part_big_unaligned(void) {
  size_t alloc = (1ull << 30) + (16u << 20), skew = 4096 + 100, len = (1ull << 30) + (8u << 20);
  size_t at = (1ull << 30) + 1000, n = 4u << 20; /* lands in piece 1 */
  uint8_t *big = NULL, *src = NULL;
  if (cudaMalloc((void **)&big, alloc) != cudaSuccess) {
    printf("test_gpu_tcpx: 1.1 GiB of GPU memory not available: registration part skipped\n");
    cudaGetLastError();
    return;
  }
  CHECK(cudaMalloc((void **)&src, n) == cudaSuccess, "cudaMalloc");
  CHECK(cudaMemset(src, 0x6d, n) == cudaSuccess && cudaMemset(big, 0, alloc) == cudaSuccess,
        "memset");
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "sync");
  struct pair P;
  unpack_cfg(&P.cfg, 10000);
  pair_open(&P, NULL, 0);
  tpx_endpoint_t *a = P.a, *b = P.b;
  tpx_peer_t *ab = P.ab;
  tpx_mem_desc_t ds = {src, n, TPX_MEM_CUDA, 0, TPX_ACCESS_READ};
  tpx_mem_desc_t dd = {big + skew, len, TPX_MEM_CUDA, 0, TPX_ACCESS_WRITE};
  tpx_mem_t *ms = NULL, *md = NULL;
  MUST(tpx_mem_register(a, &ds, &ms));
  MUST(tpx_mem_register(b, &dd, &md));
  tpx_rmem_t *rd = remote_of(md);
  tpx_xfer_t *x = NULL;
  MUST(tpx_write(ab, ms, 0, rd, at, n, NULL, 0, &x));
  int rc = tpx_xfer_wait(x, 30000);
  CHECK(rc == 0, "write past the first GiB of an unaligned region: %d (%s)", rc, tpx_strerror(rc));
  tpx_xfer_free(x);
  uint8_t *h = malloc(n);
  CHECK(cudaMemcpy(h, big + skew + at, n, cudaMemcpyDeviceToHost) == cudaSuccess, "copy back");
  size_t bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += h[i] != 0x6d;
  CHECK(bad == 0, "%zu bytes wrong past the first GiB", bad);
  free(h);
  tpx_rmem_free(rd);
  MUST(tpx_mem_deregister(ms));
  MUST(tpx_mem_deregister(md));
  pair_close(&P);
  cudaFree(src);
  cudaFree(big);
}

int main(void) {
  int n = gc_count_gpus();
  if (n < 1) {
    printf("test_gpu_tcpx: no GPU: skipped\n");
    return 77;
  }
  CHECK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice(0)");
  part_host_recv();
  part_big_unaligned();
  if (n >= 2)
    part_bind(n);
  else
    printf("test_gpu_tcpx: GPU binding needs 2 GPUs, %d present: that part skipped\n", n);
  return gc_finish("test_gpu_tcpx");
}
