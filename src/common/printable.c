/* Escaping of peer-supplied strings (printable.h). */
#include "common/printable.h"


char *tpx__printable(char *out, size_t cap, const char *in, size_t len) {
  static const char hex[] = "0123456789abcdef";
  size_t o = 0;
  for (size_t i = 0; i < len && in[i]; i++) {
    unsigned char c = (unsigned char)in[i];
    char esc[4];
    size_t n = 0;
    if (c == '\\') esc[n++] = '\\', esc[n++] = '\\';
    else if (c < 0x20 || c > 0x7e) esc[n++] = '\\', esc[n++] = 'x', esc[n++] = hex[c >> 4], esc[n++] = hex[c & 15];
    else esc[n++] = (char)c;
    if (o + n >= cap) break;
    for (size_t k = 0; k < n; k++) out[o++] = esc[k];
  }
  if (cap) out[o] = '\0';
  return out;
}
