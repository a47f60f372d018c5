/* The TCPX receive contract: count publication, slot reads, entry
 * validation, the CPU gather, the device handle. See contract.h and
 * docs/UNPACK.md. Built in every configuration (no CUDA). */
#include "tcpx/contract.h"

#include <stddef.h>
#include <string.h>

#include "common/error.h"
#include "tpx/net.h"

/* The contract's version is the one the public API names (the ncclNet ABI's
 * is checked where the ABI is adapted, net/adapt.c). */
_Static_assert(TPX_TCPX_DEV_VERSION == TPX_NET_UNPACK_VERSION, "public UNPACK version");
_Static_assert(TPX_TCPX_MAX_REQUESTS == TPX_NET_TCPX_MAX_REQUESTS, "public TCPX request limit (tpx_net_caps_t)");
/* The caller-owned storage holds the ncclNetDeviceHandle fields. */
_Static_assert(sizeof(tpx_net_dev_handle_t) >= 512, "device-handle storage of 512 bytes");

void tpx__tcpx_cnt_publish(tpx_unpack_meta_block_t *mb, uint32_t slot, uint64_t cnt) {
  /* A release store: the entries (and the bytes they describe) are visible
   * before the count to any reader that loads it with acquire. */
  __atomic_store_n(&mb->cnt[slot], cnt, __ATOMIC_RELEASE);
}

uint64_t tpx__tcpx_cnt_load(const tpx_unpack_meta_block_t *mb, uint32_t slot) {
  return __atomic_load_n(&mb->cnt[slot], __ATOMIC_ACQUIRE);
}

int tpx__tcpx_slot_read(const tpx_unpack_meta_block_t *mb, uint32_t slot, size_t bounce_bytes,
                       size_t dst_bytes, uint32_t *cnt, uint64_t *total) {
  if (!mb || !cnt) return tpx_err_quiet(TPX_EINVAL, "unpack slot read: NULL metadata block or count");
  if (slot >= TPX_UNPACK_SLOTS)
    return tpx_err_quiet(TPX_EINVAL, "unpack slot %u outside 0..%d", slot, TPX_UNPACK_SLOTS - 1);
  uint64_t n = tpx__tcpx_cnt_load(mb, slot);
  if (n > TPX_UNPACK_MAX_FRAGS)
    return tpx_err_quiet(TPX_EPROTO, "unpack slot %u claims %llu entries (max %d)", slot,
                   (unsigned long long)n, TPX_UNPACK_MAX_FRAGS);
  int rc = tpx__tcpx_unpack_validate(mb->mem[slot], (uint32_t)n, bounce_bytes, dst_bytes, NULL, total);
  if (rc) return tpx_err_quiet(rc, "unpack slot %u: %s", slot, tpx_last_error());
  *cnt = (uint32_t)n;
  return 0;
}

int tpx__tcpx_unpack_validate(const tpx_unpack_meta_t *meta, uint32_t cnt, size_t bounce_bytes,
                        size_t dst_bytes, uint32_t *max_len, uint64_t *total) {
  uint32_t mx = 0;
  uint64_t sum = 0;
  if (cnt && !meta) return tpx_err_quiet(TPX_EINVAL, "unpack: %u entries but no metadata", cnt);
  for (uint32_t i = 0; i < cnt; i++) {
    const tpx_unpack_meta_t m = meta[i];
    /* 64-bit sums: src_off + len cannot wrap; dst_off is checked first. */
    if ((uint64_t)m.src_off + m.len > bounce_bytes)
      return tpx_err_quiet(TPX_EPROTO, "unpack entry %u/%u: source [%u, +%u) outside bounce buffer of %zu",
                     i, cnt, m.src_off, m.len, bounce_bytes);
    if (m.dst_off > dst_bytes || m.len > dst_bytes - m.dst_off)
      return tpx_err_quiet(TPX_EPROTO,
                     "unpack entry %u/%u: destination [%llu, +%u) outside receive buffer of %zu", i,
                     cnt, (unsigned long long)m.dst_off, m.len, dst_bytes);
    if (m.len > mx) mx = m.len;
    sum += m.len;
  }
  if (max_len) *max_len = mx;
  if (total) *total = sum;
  return 0;
}

int tpx__tcpx_unpack_cpu(void *dst, size_t dst_bytes, const void *bounce, size_t bounce_bytes,
                   const tpx_unpack_meta_t *meta, uint32_t cnt) {
  if (cnt == 0) return 0;
  if (!dst || !bounce) return tpx_err_quiet(TPX_EINVAL, "unpack_cpu: NULL buffer");
  int rc = tpx__tcpx_unpack_validate(meta, cnt, bounce_bytes, dst_bytes, NULL, NULL);
  if (rc) return rc;
  const unsigned char *src = bounce;
  unsigned char *out = dst;
  /* Merge runs that are contiguous on both sides: the plugin often hands
   * consecutive pages of one packet, and one memcpy beats many. */
  uint64_t s = meta[0].src_off, d = meta[0].dst_off, n = meta[0].len;
  for (uint32_t i = 1; i < cnt; i++) {
    const tpx_unpack_meta_t m = meta[i];
    if (m.src_off == s + n && m.dst_off == d + n) {
      n += m.len;
      continue;
    }
    if (n) memcpy(out + d, src + s, n);
    s = m.src_off;
    d = m.dst_off;
    n = m.len;
  }
  if (n) memcpy(out + d, src + s, n);
  return 0;
}

void tpx__tcpx_dev_handle_fill(struct tpx_net_dev_handle *d, void *handle_dev) {
  d->type = TPX_NET_DEV_UNPACK;
  d->version = TPX_TCPX_DEV_VERSION;
  d->handle = handle_dev;
  d->size = sizeof(tpx_unpack_dev_handle_t);
  d->needs_proxy_progress = 1;
}
