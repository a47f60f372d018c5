/* Integrity of GPU memory (src/engine/integrity.h): writes from GPU memory
 * into GPU memory with a bit flipped in flight are refused, every other one
 * lands byte for byte. In the built-in transport's unpack mode the received
 * chunks exist only in GPU memory (bounce pages, then the unpack kernel), so
 * the receiver's sum is the GPU's CRC-32C kernel (cuda/crc.h); with host
 * staging it is the CPU's over the staging buffer.
 *
 * The fault injector is this program's recvmsg() (tests/util/flip_inject.h):
 * the transport's data reads come through it, and while armed it flips one
 * bit of every n-th.
 *
 *   test_engine_gpu_integrity      exit 0: passed; 1: failed; 77: no GPU
 *
 * Plain C (gpu_check.h); one process, two endpoints over 127.0.0.1. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "cuda/gpu.h"
#include "flip_inject.h"
#include "gpu_check.h"
#include "tpx/tpx.h"

#define DEV 0

static uint8_t pat(size_t i, unsigned seed) {
  return (uint8_t)((i * 131u + seed * 7u) ^ (i >> 11));
}

static void run(int unpack, int *flipped_out, int *total_out) {
  tpx_config_t cfg;
  tpx_config_from_env(&cfg);
  cfg.sock_unpack = unpack;
  cfg.sock_strict = unpack;
  cfg.chunk_bytes = 512 << 10;
  cfg.inline_bytes = 0;
  tpx_endpoint_params_t pa, pb;
  tpx_endpoint_params_init(&pa);
  tpx_endpoint_params_init(&pb);
  pa.cfg = pb.cfg = &cfg;
  pa.name = "gpu-a";
  pb.name = "gpu-b";
  pa.no_listen = 1;
  pb.port = TPX_PORT_EPHEMERAL;
  pb.listen_host = "127.0.0.1";
  pa.gpu = pb.gpu = DEV;
  tpx_endpoint_t *a, *b;
  MUST(tpx_endpoint_create(&pa, &a));
  MUST(tpx_endpoint_create(&pb, &b));
  tpx_peer_t *ab = NULL, *ba = NULL;
  MUST(tpx_connect(a, "127.0.0.1", tpx_endpoint_port(b), &ab));
  MUST(tpx_accept(b, 10000, &ba));
  const size_t area = 8u << 20;
  void *src = NULL, *dst = NULL;
  uint8_t *host = malloc(area), *back = malloc(area);
  if (!host || !back) exit(1);
  MUST(tpx__gpu_retain(DEV));
  MUST(tpx__gpu_malloc(DEV, area, &src));
  MUST(tpx__gpu_malloc(DEV, area, &dst));
  tpx_mem_desc_t ds = {src, area, TPX_MEM_CUDA, DEV, 0};
  tpx_mem_desc_t dd = {dst, area, TPX_MEM_CUDA, DEV, TPX_ACCESS_WRITE};
  tpx_mem_t *ms, *md;
  MUST(tpx_mem_register(a, &ds, &ms));
  MUST(tpx_mem_register(b, &dd, &md));
  uint8_t blob[TPX_MD_MAX];
  size_t bl;
  MUST(tpx_mem_get_public_data(md, blob, sizeof(blob), &bl));
  tpx_rmem_t *rm;
  MUST(tpx_load_remote_md(blob, bl, &rm));
  const size_t sizes[] = {4096, (1u << 20) + 3, (4u << 20) + 4097, area};
  int flipped = 0, total = 0;
  for (unsigned round = 0; round < 4; round++)
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
      size_t len = sizes[si];
      unsigned seed = round * 10 + (unsigned)si;
      for (size_t i = 0; i < len; i++)
        host[i] = pat(i, seed);
      MUST(tpx__gpu_memcpy(DEV, src, host, len));
      MUST(tpx__gpu_memset(DEV, dst, 0, area));
      unsigned before = atomic_load(&flips);
      atomic_store(&flip_every, round ? (int)(round + 1) : 0);
      tpx_xfer_t *x;
      MUST(tpx_write(ab, ms, 0, rm, 0, len, NULL, 0, &x));
      int rc = tpx_xfer_wait(x, 60000);
      atomic_store(&flip_every, 0);
      tpx_xfer_free(x);
      total++;
      if (atomic_load(&flips) != before) {
        flipped++;
        CHECK(rc == TPX_EINTEGRITY, "%s: write of %zu bytes with a flipped bit: %d (%s)",
              unpack ? "unpack" : "staging", len, rc, tpx_strerror(rc));
        continue;
      }
      CHECK(rc == 0, "%s: write of %zu bytes: %d (%s)", unpack ? "unpack" : "staging", len, rc,
            tpx_strerror(rc));
      MUST(tpx__gpu_memcpy(DEV, back, dst, len));
      size_t bad = SIZE_MAX;
      for (size_t i = 0; i < len && bad == SIZE_MAX; i++)
        if (back[i] != host[i]) bad = i;
      CHECK(bad == SIZE_MAX, "%s: %zu bytes: byte %zu differs", unpack ? "unpack" : "staging", len,
            bad);
    }
  tpx_rmem_free(rm);
  tpx_peer_close(ab);
  tpx_peer_close(ba);
  MUST(tpx_mem_deregister(ms));
  MUST(tpx_mem_deregister(md));
  tpx_endpoint_destroy(a);
  tpx_endpoint_destroy(b);
  MUST(tpx__gpu_free(DEV, src));
  MUST(tpx__gpu_free(DEV, dst));
  tpx__gpu_release(DEV);
  free(host);
  free(back);
  *flipped_out += flipped;
  *total_out += total;
  printf("%s: %d of %d writes had a bit flipped in flight\n",
         unpack ? "unpack (GPU sums)" : "staging (CPU sums)", flipped, total);
}

int main(void) {
  if (gc_count_gpus() < 1) {
    printf("test_engine_gpu_integrity: no GPU, skipped\n");
    return 77;
  }
  int flipped = 0, total = 0;
  run(1, &flipped, &total);
  run(0, &flipped, &total);
  CHECK(flipped >= 8, "only %d of %d writes had a bit flipped", flipped, total);
  return gc_finish("test_engine_gpu_integrity");
}
