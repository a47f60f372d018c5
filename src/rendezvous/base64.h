/* Base64 (RFC 4648, with padding), the encoding the etcd JSON gateway uses
 * for keys and values. Decoding is strict: anything but canonical padded
 * base64 is refused (the text comes from the network). */
#ifndef TPX_RENDEZVOUS_BASE64_H
#define TPX_RENDEZVOUS_BASE64_H

#include <stddef.h>

/* Characters tpx__b64_encode writes for n bytes, plus the NUL. */
static inline size_t tpx__b64_encoded_size(size_t n) { return (n + 2) / 3 * 4 + 1; }
/* Encodes n bytes into out (tpx__b64_encoded_size(n) bytes), NUL-terminated. */
void tpx__b64_encode(const void *in, size_t n, char *out);
/* Decodes `len` characters into out (cap bytes): 0 and *outlen, or TPX_EINVAL for
 * malformed text or one that does not fit. */
int tpx__b64_decode(const char *in, size_t len, void *out, size_t cap, size_t *outlen);

#endif
