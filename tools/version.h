/* --version for every tool: `tpx-x --version` prints the tool's name, the
 * headers' version it was built with and the loaded library's (the same for
 * tools linked statically). Tools only; never installed. */
#ifndef TPX_TOOLS_VERSION_H
#define TPX_TOOLS_VERSION_H

#include <stdio.h>
#include <string.h>

#include "tpx/version.h"

/* 1 (after printing) when argv holds --version: main then returns 0. */
static inline int tool_version_asked(int argc, char **argv, const char *name) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--version") == 0) {
      printf("%s (tcpx-p2p) %s, library %s\n", name, TPX_VERSION_STRING, tpx_version());
      return 1;
    }
  }
  return 0;
}

#endif
