/* A process that loads libtpx.so reads no configuration before it asks for
 * one: nothing of TPX_* is read at load (no refusal reported, no key file
 * opened). With "read", it asks (tpx_config_global), and the refusals show:
 * the check that the environment of abi_no_config_at_load is one that
 * reports. */
#include <stdio.h>
#include <string.h>

#include "tpx/config.h"
#include "tpx/version.h"

int main(int argc, char **argv) {
  printf("tpx %s loaded\n", tpx_version());
  fflush(stdout);
  if (argc > 1 && strcmp(argv[1], "read") == 0) (void)tpx_config_global();
  return 0;
}
