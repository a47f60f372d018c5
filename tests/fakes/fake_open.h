/* Finding the fake plugins (tests/fakes) and reading their counters, for
 * every test that loads them. TPX_FAKES_DIR comes from CMake. */
#ifndef TPX_FAKE_OPEN_H
#define TPX_FAKE_OPEN_H

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "fake_stats.h"
#include "testutil.h"

#ifndef TPX_FAKES_DIR
#error "TPX_FAKES_DIR is set by tests/fakes/CMakeLists.txt or tests/engine/CMakeLists.txt"
#endif

/* <fakes>/libnccl-net-<name>.so; four calls may be in use at once. */
static inline const char *fake_path(const char *name) {
  static char buf[4][PATH_MAX];
  static int next;
  char *b = buf[next++ % 4];
  snprintf(b, PATH_MAX, "%s/libnccl-net-%s.so", TPX_FAKES_DIR, name);
  return b;
}

/* Our own reference to the fake keeps its counters readable across
 * tpx_net_close; they are zeroed first. */
static inline struct fake_stats *hold(const char *name, void **dl) {
  *dl = dlopen(fake_path(name), RTLD_NOW | RTLD_LOCAL);
  assert_non_null(*dl);
  struct fake_stats *st = dlsym(*dl, "fake_stats");
  assert_non_null(st);
  memset(st, 0, sizeof(*st));
  return st;
}

#endif
