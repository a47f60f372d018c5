/* A program as a user of the installed library writes it: public headers
 * only. Two endpoints in this process (loopback), one 64 KiB write, checked
 * byte for byte. Prints "consumer ok <version>". Exit 0 on success. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tpx/tpx.h>

#define N (64 * 1024)
#define CHECK(x)                                                                   \
  do {                                                                             \
    int rc_ = (x);                                                                 \
    if (rc_) {                                                                     \
      fprintf(stderr, "%s: %s: %s\n", #x, tpx_strerror(rc_), tpx_last_error());    \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

static unsigned char src[N], dst[N];

int main(void) {
  if (strcmp(tpx_version(), TPX_VERSION_STRING) != 0) {
    fprintf(stderr, "library %s, headers %s\n", tpx_version(), TPX_VERSION_STRING);
    return 1;
  }
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.port = TPX_PORT_EPHEMERAL;
  p.listen_host = "127.0.0.1";
  tpx_endpoint_t *a, *b;
  CHECK(tpx_endpoint_create(&p, &a));
  CHECK(tpx_endpoint_create(&p, &b));
  tpx_peer_t *ab, *ba;
  CHECK(tpx_connect(a, "127.0.0.1", tpx_endpoint_port(b), &ab));
  CHECK(tpx_accept(b, 10000, &ba));
  for (int i = 0; i < N; i++) src[i] = (unsigned char)(i * 7 + 1);
  tpx_mem_desc_t ds = {src, N, TPX_MEM_HOST, 0, 0}, dd = {dst, N, TPX_MEM_HOST, 0, TPX_ACCESS_WRITE};
  tpx_mem_t *ms, *md;
  CHECK(tpx_mem_register(a, &ds, &ms));
  CHECK(tpx_mem_register(b, &dd, &md));
  unsigned char blob[TPX_MD_MAX];
  size_t bl;
  CHECK(tpx_mem_get_public_data(md, blob, sizeof blob, &bl));
  tpx_rmem_t *rm;
  CHECK(tpx_load_remote_md(blob, bl, &rm));
  tpx_xfer_t *x;
  CHECK(tpx_write(ab, ms, 0, rm, 0, N, NULL, 0, &x));
  CHECK(tpx_xfer_wait(x, 30000));
  tpx_xfer_free(x);
  if (memcmp(src, dst, N) != 0) {
    fprintf(stderr, "data differs\n");
    return 1;
  }
  tpx_rmem_free(rm);
  CHECK(tpx_mem_deregister(ms));
  CHECK(tpx_mem_deregister(md));
  tpx_peer_close(ab);
  tpx_endpoint_destroy(a);
  tpx_endpoint_destroy(b);
  printf("consumer ok %s\n", tpx_version());
  return 0;
}
