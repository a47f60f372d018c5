/* The rendezvous' base64 (src/rendezvous/base64.c), which decodes the keys
 * and values etcd's JSON gateway answers with (the JSON itself is
 * jansson's; a value decodes to a connection-info blob, fuzz_conn_info).
 * The input is the text. Decoding is strict: text it accepts is canonical,
 * so it encodes back to itself; the output never exceeds the capacity
 * given (the input's first byte picks a capacity, to reach the "does not
 * fit" path too). */
#include "fuzz.h"
#include "rendezvous/base64.h"

static void fuzz_setup(void) {}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  size_t full = size / 4 * 3, cap = data[0] & 1 ? full : full * (data[0] >> 1) / 128;
  const char *text = (const char *)data + 1;
  size_t len = size - 1;
  uint8_t *out = malloc(cap ? cap : 1);
  FUZZ_CHECK(out);
  size_t got = SIZE_MAX;
  if (tpx__b64_decode(text, len, out, cap, &got) == 0) {
    FUZZ_CHECK(got <= cap && got <= len / 4 * 3 && len % 4 == 0);
    char *again = malloc(tpx__b64_encoded_size(got));
    FUZZ_CHECK(again);
    tpx__b64_encode(out, got, again);
    FUZZ_CHECK(strlen(again) == len && memcmp(again, text, len) == 0);
    free(again);
  }
  free(out);
  return 0;
}
