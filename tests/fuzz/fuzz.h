/* What the fuzz harnesses share: a check that aborts (libFuzzer and the
 * replay driver both report an abort as a crash, with the input saved), a
 * reader that takes typed values off the input, and quiet logs (a harness
 * makes the library refuse input millions of times; the refusals are the
 * point, not news). */
#ifndef TPX_FUZZ_H
#define TPX_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#define FUZZ_CHECK(cond)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz: %s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond);           \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

/* The harness's own byte loops need no coverage feedback (clang). */
#if defined(__clang__)
#define FUZZ_NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define FUZZ_NO_COVERAGE
#endif

/* Values off the front of the input; past its end every value is 0. */
struct fuzz_in {
  const uint8_t *p;
  size_t len, pos;
};

static inline uint64_t fuzz_take(struct fuzz_in *in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++, in->pos++)
    if (in->pos < in->len) v |= (uint64_t)in->p[in->pos] << (8 * i);
  return v;
}
static inline uint8_t fuzz_u8(struct fuzz_in *in) {
  return (uint8_t)fuzz_take(in, 1);
}
static inline uint16_t fuzz_u16(struct fuzz_in *in) {
  return (uint16_t)fuzz_take(in, 2);
}
static inline uint32_t fuzz_u32(struct fuzz_in *in) {
  return (uint32_t)fuzz_take(in, 4);
}
static inline int fuzz_more(const struct fuzz_in *in) {
  return in->pos < in->len;
}
/* Up to n bytes of the input itself (fewer at its end): *got of them. */
static inline const uint8_t *fuzz_bytes(struct fuzz_in *in, size_t n, size_t *got) {
  size_t left = in->pos < in->len ? in->len - in->pos : 0;
  *got = n < left ? n : left;
  const uint8_t *at = in->p + (in->pos < in->len ? in->pos : in->len);
  in->pos += *got;
  return at;
}

static inline void fuzz_quiet(void) {
  (void)tpx_config_global(); /* read first: its TPX_LOG would undo the quiet */
  tpx__log_level = TPX_LOG_NONE;
}

/* Each harness's one-time setup (may do nothing), after the logs are
 * quieted; libFuzzer and replay_main.c call LLVMFuzzerInitialize first. */
static void fuzz_setup(void);
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_quiet();
  fuzz_setup();
  return 0;
}

#endif
