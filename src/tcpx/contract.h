/* The receive contract of Google's GPUDirect-TCPX NCCL net plugin (UNPACK
 * device offload), in one place: the metadata layout the plugin shares with
 * its consumer, the limits, the slot rule, how a slot's count is published
 * and read, the validation of the entries and the CPU gather. The prose,
 * and which NCCL / plugin sources it follows, is docs/UNPACK.md.
 *
 * Producer here: the built-in transport's unpack mode (src/sock/unpack.c).
 * Consumers: the engine's unpack stage (src/engine/unpack_stage.c), the GPU
 * unpacker (src/cuda/unpack.c and its kernel), tests and tools.
 *
 * Plain C without CUDA; CUDA sources include it too (C++-clean). */
#ifndef TPX_TCPX_CONTRACT_H
#define TPX_TCPX_CONTRACT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- limits ---- */

/* ncclNetDeviceHandle version of UNPACK devices (NCCL's
 * NCCL_NET_DEVICE_UNPACK_VERSION); checked equal to the public
 * TPX_NET_UNPACK_VERSION and the ABI's NCCLNET_DEVICE_UNPACK_VERSION in
 * contract.c. */
#define TPX_TCPX_DEV_VERSION 7
/* Requests in flight per comm, held (unconsumed) receives included: the
 * next isend/irecv fails with "unable to allocate requests". */
#define TPX_TCPX_MAX_REQUESTS 16
/* Metadata slots per recv comm: the k-th receive uses slot k % 16. */
#define TPX_UNPACK_SLOTS 16
/* loadMeta entries per slot, i.e. fragments per request. */
#define TPX_UNPACK_MAX_FRAGS 2048
/* Bounce-buffer page; regMr of CUDA memory wants this alignment. */
#define TPX_TCPX_PAGE_BYTES 4096u
/* The most one request carries when every fragment is a whole page (8 MiB;
 * keep chunks <= 4 MiB for the real plugin). */
#define TPX_TCPX_MAX_REQ_BYTES ((uint64_t)TPX_UNPACK_MAX_FRAGS * TPX_TCPX_PAGE_BYTES)

/* ---- layout ---- */

/* One fragment, exactly the plugin's loadMeta (16 bytes, 16-aligned): copy
 * len bytes from bounce_buf + src_off to the receive buffer + dst_off. */
typedef struct tpx_unpack_meta {
  uint32_t src_off; /* offset into the bounce buffer */
  uint32_t len;     /* bytes */
  uint64_t dst_off; /* offset from the start of the receive buffer */
} __attribute__((aligned(16))) tpx_unpack_meta_t;

/* The host-mapped metadata block `meta` points to (NCCL's netUnpackMeta).
 * cnt[slot] is written after the slot's entries, behind a release fence. */
typedef struct tpx_unpack_meta_block {
  tpx_unpack_meta_t mem[TPX_UNPACK_SLOTS][TPX_UNPACK_MAX_FRAGS];
  uint64_t cnt[TPX_UNPACK_SLOTS];
} tpx_unpack_meta_block_t;

/* What the device handle's `handle` points to (NCCL's
 * unpackNetDeviceHandle, 24 bytes; device memory for the real plugin). */
typedef struct tpx_unpack_dev_handle {
  void *meta;       /* tpx_unpack_meta_block_t, host-mapped */
  void *bounce_buf; /* base for src_off */
  uint64_t head;    /* the consumer's; the plugin never reads it */
} tpx_unpack_dev_handle_t;

#define TPX_TCPX_DEV_HANDLE_BYTES 24

/* Every file that includes this checks the layout with its own compiler
 * (nvcc's host compiler too). */
#ifdef __cplusplus
#define TPX_TCPX_ASSERT(c, m) static_assert(c, m)
#define TPX_TCPX_ALIGNOF(t) alignof(t)
#else
#define TPX_TCPX_ASSERT(c, m) _Static_assert(c, m)
#define TPX_TCPX_ALIGNOF(t) _Alignof(t)
#endif
TPX_TCPX_ASSERT(sizeof(tpx_unpack_meta_t) == 16, "loadMeta is 16 bytes");
TPX_TCPX_ASSERT(TPX_TCPX_ALIGNOF(tpx_unpack_meta_t) == 16, "loadMeta is 16-aligned");
TPX_TCPX_ASSERT(offsetof(tpx_unpack_meta_t, len) == 4, "loadMeta: len at 4");
TPX_TCPX_ASSERT(offsetof(tpx_unpack_meta_t, dst_off) == 8, "loadMeta: dst_off at 8");
TPX_TCPX_ASSERT(offsetof(tpx_unpack_meta_block_t, cnt) == 16 * 2048 * 16,
                "meta block: cnt after mem[16][2048]");
TPX_TCPX_ASSERT(sizeof(tpx_unpack_meta_block_t) == 16 * 2048 * 16 + 16 * 8,
                "meta block: mem[16][2048] then cnt[16]");
TPX_TCPX_ASSERT(sizeof(tpx_unpack_dev_handle_t) == TPX_TCPX_DEV_HANDLE_BYTES,
                "device handle is 24 bytes");
TPX_TCPX_ASSERT(offsetof(tpx_unpack_dev_handle_t, head) == 16, "device handle: head at 16");
/* A slot is reused by receive k + 16 only after receive k was consumed:
 * the request limit keeps at most that many receives held. */
TPX_TCPX_ASSERT(TPX_TCPX_MAX_REQUESTS <= TPX_UNPACK_SLOTS, "held receives fit the slots");

/* ---- the slot rule and the count ---- */

/* The slot of the k-th receive posted on a recv comm (0-based, every irecv
 * that returned a request). No slot index is handed out: count receives. */
static inline uint32_t tpx__tcpx_slot(uint64_t k) {
  return (uint32_t)(k % TPX_UNPACK_SLOTS);
}

/* Producer: the entries of `slot` are written; publish their count (a
 * release fence, then the store), before test() reports the receive done. */
void tpx__tcpx_cnt_publish(tpx_unpack_meta_block_t *mb, uint32_t slot, uint64_t cnt);

/* Consumer: the count of `slot`, with an acquire load (read only after
 * test() said done). */
uint64_t tpx__tcpx_cnt_load(const tpx_unpack_meta_block_t *mb, uint32_t slot);

/* Consumer: read slot `slot` of a block whose receive test() reported done:
 * its count (acquire; more than TPX_UNPACK_MAX_FRAGS is TPX_EPROTO) and its
 * entries validated (tpx__tcpx_unpack_validate) against the bounce buffer
 * (bounce_bytes; SIZE_MAX where the plugin does not publish its size) and
 * the receive buffer (dst_bytes). *cnt gets the count, *total (may be NULL)
 * the bytes the entries describe. TPX_EINVAL for a NULL block or a slot
 * out of range. */
int tpx__tcpx_slot_read(const tpx_unpack_meta_block_t *mb, uint32_t slot, size_t bounce_bytes,
                       size_t dst_bytes, uint32_t *cnt, uint64_t *total);

/* ---- validation and the CPU gather ---- */

/* Check every entry: src_off + len <= bounce_bytes and dst_off + len <=
 * dst_bytes (64-bit, wrap-proof). Returns 0, or TPX_EPROTO naming the first
 * bad entry. *max_len (may be NULL) gets the largest len, *total (may be
 * NULL) the sum. */
int tpx__tcpx_unpack_validate(const tpx_unpack_meta_t *meta, uint32_t cnt, size_t bounce_bytes,
                        size_t dst_bytes, uint32_t *max_len, uint64_t *total);

/* CPU gather: validate, then memcpy every fragment (runs contiguous on both
 * sides merged). Both buffers must be host-accessible. Returns 0 or
 * TPX_EPROTO / TPX_EINVAL; on error nothing was copied. */
int tpx__tcpx_unpack_cpu(void *dst, size_t dst_bytes, const void *bounce, size_t bounce_bytes,
                   const tpx_unpack_meta_t *meta, uint32_t cnt);

/* ---- the device handle ---- */

struct tpx_net_dev_handle;
/* Producer (accept): write only the ncclNetDeviceHandle fields of the
 * caller's storage - type UNPACK, version 7, size 24, needs proxy
 * progress, `handle` = handle_dev (the 24-byte tpx_unpack_dev_handle_t as
 * the GPU addresses it). The spare bytes are the caller's. */
void tpx__tcpx_dev_handle_fill(struct tpx_net_dev_handle *d, void *handle_dev);

#ifdef __cplusplus
}
#endif
#endif
