#include "rendezvous/base64.h"

#include <stdint.h>

#include "tpx/error.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void tpx__b64_encode(const void *in, size_t n, char *out) {
  const uint8_t *p = in;
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16;
    if (i + 1 < n) v |= (uint32_t)p[i + 1] << 8;
    if (i + 2 < n) v |= p[i + 2];
    out[o++] = alphabet[v >> 18 & 63];
    out[o++] = alphabet[v >> 12 & 63];
    out[o++] = i + 1 < n ? alphabet[v >> 6 & 63] : '=';
    out[o++] = i + 2 < n ? alphabet[v & 63] : '=';
  }
  out[o] = '\0';
}

enum { NOT_BASE64 = -1 };
static int value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return NOT_BASE64;
}

int tpx__b64_decode(const char *in, size_t len, void *out, size_t cap, size_t *outlen) {
  uint8_t *q = out;
  size_t o = 0;
  if (len % 4 != 0) return TPX_EINVAL;
  for (size_t i = 0; i < len; i += 4) {
    int last = i + 4 == len;
    int pad = last && in[i + 3] == '=' ? (in[i + 2] == '=' ? 2 : 1) : 0;
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
      int d = k >= 4 - pad ? 0 : value(in[i + k]);
      if (d == NOT_BASE64) return TPX_EINVAL;
      v = v << 6 | (uint32_t)d;
    }
    /* canonical: the bits a padded group leaves out are zero */
    if ((pad == 1 && (v & 0xff)) || (pad == 2 && (v & 0xffff))) return TPX_EINVAL;
    size_t nb = 3 - (size_t)pad;
    if (o + nb > cap) return TPX_EINVAL;
    q[o++] = (uint8_t)(v >> 16);
    if (nb > 1) q[o++] = (uint8_t)(v >> 8);
    if (nb > 2) q[o++] = (uint8_t)v;
  }
  *outlen = o;
  return 0;
}
