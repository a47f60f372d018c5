/* Little-endian load/store of 16/32/64-bit integers: the one set every wire
 * format uses (the built-in transport's handles, hellos and part headers in
 * src/sock/wire.h; the engine's frames and blobs in src/engine/wire.h).
 *
 * Bytes are moved one at a time, so neither the host's byte order nor its
 * alignment rules reach the wire, and p may point anywhere in a buffer. */
#ifndef TPX_COMMON_LE_H
#define TPX_COMMON_LE_H

#include <stdint.h>

static inline void tpx__put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static inline void tpx__put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static inline void tpx__put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t tpx__get16(const uint8_t *p) {
  return (uint16_t)((uint16_t)p[0] | (uint16_t)((uint16_t)p[1] << 8));
}

static inline uint32_t tpx__get32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t tpx__get64(const uint8_t *p) {
  return (uint64_t)tpx__get32(p) | ((uint64_t)tpx__get32(p + 4) << 32);
}

#endif
