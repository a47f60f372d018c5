/* --version for every tool: `tpx-x --version` prints the tool's name, the
 * headers' version it was built with, the loaded library's (the same for
 * tools linked statically) and the control protocol's version it speaks
 * (peers of another one are refused: "protocol version N, we speak M");
 * and the text of a failed call. Tools only; never installed. */
#ifndef TPX_TOOLS_VERSION_H
#define TPX_TOOLS_VERSION_H

#include <stdio.h>
#include <string.h>

#include "tpx/error.h"
#include "tpx/version.h"

#ifndef TPX_TOOLS_WIRE_VERSION /* CMakeLists.txt passes it, from src/engine/wire.h */
#error "TPX_TOOLS_WIRE_VERSION undefined"
#endif

/* 1 (after printing) when argv holds --version: main then returns 0. */
static inline int tool_version_asked(int argc, char **argv, const char *name) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--version") == 0) {
      printf("%s (tcpx-p2p) %s, library %s, wire protocol %d\n", name, TPX_VERSION_STRING, tpx_version(),
             TPX_TOOLS_WIRE_VERSION);
      return 1;
    }
  }
  return 0;
}

/* A failed call's text for the tool's one error line: the library's detail
 * where it is this code's (it ends with the code's name; an older call's
 * detail for another code is not shown), else the code's name. The library
 * logs an error it returns only at TPX_LOG=info, so this line is the one the
 * user sees (docs/API.md, "Errors"). */
static inline const char *tool_error(int rc) {
  const char *d = tpx_last_error();
  char tail[64]; /* what the library ends a detail with: " (name)" */
  size_t tl = (size_t)snprintf(tail, sizeof(tail), " (%s)", tpx_strerror(rc)), dl = d ? strlen(d) : 0;
  return dl > tl && strcmp(d + dl - tl, tail) == 0 ? d : tpx_strerror(rc);
}

#endif
