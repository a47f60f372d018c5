/* Parts of the unpack module that need no GPU: names, entry validation and
 * the CPU gather. Built in every configuration. */
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "common/error.h"
#include "cuda/unpack.h"

_Static_assert(sizeof(tpx_unpack_meta_t) == 16, "loadMeta is 16 bytes");
_Static_assert(_Alignof(tpx_unpack_meta_t) == 16, "loadMeta is 16-aligned");
_Static_assert(offsetof(tpx_unpack_meta_t, dst_off) == 8, "loadMeta layout");
_Static_assert(offsetof(tpx_unpack_meta_block_t, cnt) == 16 * 2048 * 16, "meta block layout");
_Static_assert(sizeof(tpx_unpack_dev_handle_t) == 24, "device handle is 24 bytes");

static const char *const mode_names[] = {"kernel", "d2d", "host"};
static const char *const desc_names[] = {"copy", "mapped", "direct", "param"};

static int parse_name(const char *s, const char *const *names, int n, int *out, const char *what) {
  if (!s || !out) return tpx_err(TPX_EINVAL, "%s: NULL", what);
  for (int i = 0; i < n; i++) {
    if (strcasecmp(s, names[i]) == 0) {
      *out = i;
      return 0;
    }
  }
  return tpx_err(TPX_EINVAL, "%s: unknown value '%s'", what, s);
}

int tpx_unpack_mode_parse(const char *s, int *mode) {
  return parse_name(s, mode_names, 3, mode, "unpack mode (kernel|d2d|host)");
}

const char *tpx_unpack_mode_name(int mode) {
  return (mode >= 0 && mode < 3) ? mode_names[mode] : "?";
}

int tpx_unpack_desc_parse(const char *s, int *desc) {
  return parse_name(s, desc_names, 4, desc, "unpack descriptors (copy|mapped|direct|param)");
}

const char *tpx_unpack_desc_name(int desc) {
  return (desc >= 0 && desc < 4) ? desc_names[desc] : "?";
}

int tpx_unpack_validate(const tpx_unpack_meta_t *meta, uint32_t cnt, size_t bounce_bytes,
                        size_t dst_bytes, uint32_t *max_len, uint64_t *total) {
  uint32_t mx = 0;
  uint64_t sum = 0;
  if (cnt && !meta) return tpx_err(TPX_EINVAL, "unpack: %u entries but no metadata", cnt);
  for (uint32_t i = 0; i < cnt; i++) {
    const tpx_unpack_meta_t m = meta[i];
    /* 64-bit sums: src_off + len cannot wrap; dst_off is checked first. */
    if ((uint64_t)m.src_off + m.len > bounce_bytes)
      return tpx_err(TPX_EPROTO, "unpack entry %u/%u: source [%u, +%u) outside bounce buffer of %zu",
                     i, cnt, m.src_off, m.len, bounce_bytes);
    if (m.dst_off > dst_bytes || m.len > dst_bytes - m.dst_off)
      return tpx_err(TPX_EPROTO,
                     "unpack entry %u/%u: destination [%llu, +%u) outside receive buffer of %zu", i,
                     cnt, (unsigned long long)m.dst_off, m.len, dst_bytes);
    if (m.len > mx) mx = m.len;
    sum += m.len;
  }
  if (max_len) *max_len = mx;
  if (total) *total = sum;
  return 0;
}

int tpx_unpack_cpu(void *dst, size_t dst_bytes, const void *bounce, size_t bounce_bytes,
                   const tpx_unpack_meta_t *meta, uint32_t cnt) {
  if (cnt == 0) return 0;
  if (!dst || !bounce) return tpx_err(TPX_EINVAL, "unpack_cpu: NULL buffer");
  int rc = tpx_unpack_validate(meta, cnt, bounce_bytes, dst_bytes, NULL, NULL);
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
