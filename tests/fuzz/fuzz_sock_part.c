/* The transport's part headers (src/sock/wire.h, tpx__wire_part_decode, the
 * rules comm.c checks before it looks for the receive): the input is a run
 * of 32-byte headers as a socket would carry them. A header the decoder
 * accepts must name a range inside a message no larger than the limit,
 * 4 KiB aligned, non-empty unless the message is, and encode back to its
 * own bytes; one it refuses must break one of those rules. */
#include "fuzz.h"
#include "sock/sock.h"
#include "sock/wire.h"

static void fuzz_setup(void) {}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  for (size_t at = 0; at + TPX_WIRE_PART_BYTES <= size; at += TPX_WIRE_PART_BYTES) {
    const uint8_t *h = data + at;
    uint32_t seq;
    uint64_t msize, off, len;
    const char *why = tpx__wire_part_decode(h, TPX_SOCK_MAX_MSG, &seq, &msize, &off, &len);
    int ok = tpx__get32(h) == TPX_WIRE_PART_MAGIC && msize <= TPX_SOCK_MAX_MSG && off <= msize &&
             len <= msize - off && (len > 0 || msize == 0) && off % TPX_SOCK_PAGE == 0;
    FUZZ_CHECK((why == NULL) == ok);
    if (!ok) continue;
    FUZZ_CHECK(off + len <= msize); /* no wrap: off, len <= 2^40 */
    uint8_t again[TPX_WIRE_PART_BYTES];
    tpx__wire_part_encode(again, seq, msize, off, len);
    FUZZ_CHECK(memcmp(again, h, sizeof(again)) == 0);
  }
  return 0;
}
