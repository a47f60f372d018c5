/* Connection info, as peers hand it out of band (the engine's "TPXI" blob,
 * tpx__conn_info_decode, behind tpx_load_remote_conn_info and the NIXL
 * shim's loadRemoteConnInfo), and the transport's listen handles, as a
 * peer's HELLO carries them (tpx__sock_handle_dials, which the engine's dial
 * policy asks before it dials anything). The whole input is one blob; its
 * first 128 bytes (zero-padded) are one handle.
 *
 * A blob the decoder accepts has 1..8 addresses, a port, NUL-terminated
 * strings without embedded NULs, and encodes back to its own bytes. A
 * handle the transport accepts names IPv4 or IPv6, 2..65 connections, no
 * connector state, and the address it names is the one in the handle. */
#include <netinet/in.h>

#include "engine/wire.h"
#include "fuzz.h"
#include "sock/sock.h"
#include "sock/wire.h"
#include "tpx/error.h"

static void blob(const uint8_t *data, size_t size) {
  struct tpx__conn_info c;
  int rc = tpx__conn_info_decode(data, size, &c);
  FUZZ_CHECK(rc == 0 || rc == TPX_EPROTO || rc == TPX_EVERSION);
  if (rc) return;
  FUZZ_CHECK(c.naddr >= 1 && c.naddr <= CONN_MAX_ADDRS && c.port != 0);
  FUZZ_CHECK(memchr(c.name, 0, sizeof(c.name)) != NULL);
  for (int i = 0; i < c.naddr; i++)
    FUZZ_CHECK(memchr(c.addr[i], 0, CONN_ADDR_MAX) != NULL);
  uint8_t *again = malloc(size);
  size_t len = 0;
  FUZZ_CHECK(again && tpx__conn_info_encode(&c, again, size, &len) == 0);
  FUZZ_CHECK(len == size && memcmp(again, data, size) == 0);
  free(again);
}

static void handle(const uint8_t *data, size_t size) {
  uint8_t h[TPX_NET_HANDLE_BYTES] = {0};
  memcpy(h, data, size < sizeof(h) ? size : sizeof(h));
  struct sockaddr_storage a;
  int conns = 0;
  int rc = tpx__sock_handle_dials(NULL, h, &a, &conns);
  FUZZ_CHECK(rc == 0 || rc == TPX_EPROTO);
  if (rc) return;
  FUZZ_CHECK(conns >= 2 && conns <= TPX_SOCK_MAX_NSOCKS + 1);
  FUZZ_CHECK(tpx__get64(h + TPX_WH_STATE) == 0 && tpx__get64(h + TPX_WH_CHECK) == 0);
  if (tpx__get16(h + TPX_WH_FAMILY) == 4) {
    const struct sockaddr_in *s = (const struct sockaddr_in *)&a;
    FUZZ_CHECK(s->sin_family == AF_INET && memcmp(&s->sin_addr, h + TPX_WH_ADDR, 4) == 0);
    FUZZ_CHECK(memcmp(&s->sin_port, h + TPX_WH_PORT, 2) == 0);
  } else {
    const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)&a;
    FUZZ_CHECK(tpx__get16(h + TPX_WH_FAMILY) == 6 && s->sin6_family == AF_INET6);
    FUZZ_CHECK(memcmp(&s->sin6_addr, h + TPX_WH_ADDR, 16) == 0 &&
               memcmp(&s->sin6_port, h + TPX_WH_PORT, 2) == 0);
  }
  char where[96];
  tpx__sock_addr_str(&a, where, sizeof(where));
  FUZZ_CHECK(memchr(where, 0, sizeof(where)) != NULL);
}

static void fuzz_setup(void) {}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  blob(data, size);
  handle(data, size);
  return 0;
}
