/* Memory descriptors, as peers hand them out of band (the engine's "TPXM"
 * blob: tpx_load_remote_md, the public entry the NIXL shim's loadRemoteMD
 * calls, and tpx__md_decode under it). A descriptor it accepts has a known
 * memory type, known access bits, a non-empty range that does not wrap, and
 * encodes back to its own bytes; what the public accessors return is what
 * the blob says. */
#include "engine/mem.h"
#include "engine/wire.h"
#include "fuzz.h"
#include "tpx/error.h"
#include "tpx/mem.h"

static void fuzz_setup(void) {}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct tpx__md_info md;
  int rc = tpx__md_decode(data, size, &md);
  FUZZ_CHECK(rc == 0 || rc == TPX_EPROTO || rc == TPX_EVERSION);
  tpx_rmem_t *r = NULL;
  int prc = tpx_load_remote_md(data, size, &r);
  FUZZ_CHECK(prc == rc && (r != NULL) == (rc == 0));
  if (rc) return 0;
  FUZZ_CHECK(md.type <= 1 && (md.access & ~3u) == 0 && md.len > 0 && md.addr + md.len > md.addr);
  uint8_t again[MD_BLOB_BYTES];
  size_t len = 0;
  FUZZ_CHECK(tpx__md_encode(&md, again, sizeof(again), &len) == 0);
  FUZZ_CHECK(len == size && memcmp(again, data, size) == 0);
  FUZZ_CHECK(tpx_rmem_addr(r) == md.addr && tpx_rmem_len(r) == (size_t)md.len &&
             tpx_rmem_access(r) == md.access);
  tpx_rmem_free(r);
  return 0;
}
