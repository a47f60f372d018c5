/* The hello a data socket of the built-in transport sends first (src/sock/
 * wire.h, tpx__sock_hello_head / tpx__sock_hello_check behind the listen
 * comm's accept): the input's first byte picks the listen comm (bit 0: keyed
 * with a fixed session key; bit 1: the harness signs the hello with that key
 * itself, so the checks behind the MAC are reached too), the next 8 bytes are
 * the listen comm's nonce, the rest is the hello (zero-padded).
 *
 * A hello is accepted only with the right magic, version and length for the
 * listen comm, a MAC that proves the key (keyed), the listen comm's nonce
 * and a socket index / count in range; every refusal names the first rule
 * broken, and the first 8 bytes alone give the same verdict as the whole
 * hello for magic, version and length. */
#include "common/hmac.h"
#include "fuzz.h"
#include "sock/sock.h"
#include "sock/wire.h"

static const uint8_t key[32] = {0x74, 0x70, 0x78, 0x2d, 0x66, 0x75, 0x7a, 0x7a, 1, 2, 3, 4, 5, 6, 7, 8,
                                9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24};

static void fuzz_setup(void) {}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fuzz_in in = {data, size, 0};
  uint8_t mode = fuzz_u8(&in);
  uint64_t nonce = fuzz_take(&in, 8);
  int keyed = mode & 1;
  uint8_t h[TPX_WIRE_HELLO_KEYED_BYTES] = {0};
  size_t got = 0;
  const uint8_t *b = fuzz_bytes(&in, sizeof(h), &got);
  memcpy(h, b, got);
  size_t len = keyed ? TPX_WIRE_HELLO_KEYED_BYTES : TPX_WIRE_HELLO_BYTES;
  if (keyed && (mode & 2)) FUZZ_CHECK(tpx__sock_hello_mac(key, h, h + TPX_WIRE_HELLO_MACED) == 0);

  int head = tpx__sock_hello_head(h, keyed);
  int want_head = tpx__get32(h) != TPX_WIRE_HELLO_MAGIC  ? TPX_HELLO_MAGIC
                  : tpx__get16(h + 4) != TPX_WIRE_VERSION ? TPX_HELLO_VERSION
                  : tpx__get16(h + 6) != len             ? TPX_HELLO_LENGTH
                                                         : TPX_HELLO_OK;
  FUZZ_CHECK(head == want_head);

  uint64_t comm_id = 0;
  int index = -1, nsocks = -1;
  int v = tpx__sock_hello_check(h, keyed ? key : NULL, nonce, &comm_id, &index, &nsocks);
  if (head != TPX_HELLO_OK) {
    FUZZ_CHECK(v == head);
    return 0;
  }
  uint8_t mac[TPX_MAC_BYTES];
  int mac_ok = !keyed || ((tpx__get32(h + 28) & TPX_WIRE_HELLO_F_MAC) && tpx__sock_hello_mac(key, h, mac) == 0 &&
                          memcmp(mac, h + TPX_WIRE_HELLO_MACED, TPX_MAC_BYTES) == 0);
  if (!mac_ok) {
    FUZZ_CHECK(v == TPX_HELLO_MAC);
    return 0;
  }
  if (tpx__get64(h + 8) != nonce) {
    FUZZ_CHECK(v == TPX_HELLO_NONCE);
    return 0;
  }
  int ix = tpx__get16(h + 24), ns = tpx__get16(h + 26);
  int in_range = ns >= 1 && ns <= TPX_SOCK_MAX_NSOCKS && ix <= ns;
  FUZZ_CHECK(v == (in_range ? TPX_HELLO_OK : TPX_HELLO_SOCKETS));
  if (v == TPX_HELLO_OK)
    FUZZ_CHECK(comm_id == tpx__get64(h + 16) && index == ix && nsocks == ns && index >= 0 && nsocks >= 1);
  return 0;
}
