/* The GPU unpacker's option names (TPX_UNPACK modes, descriptor sources),
 * parsed and printed without a GPU. Built in every configuration; the
 * layout, validation and CPU gather are the contract's (tcpx/contract.c). */
#include <strings.h>

#include "common/error.h"
#include "cuda/unpack_names.h"

static const char *const mode_names[] = {"kernel", "d2d", "host"};
static const char *const desc_names[] = {"copy", "mapped", "direct", "param"};

static int parse_name(const char *s, const char *const *names, int n, int *out, const char *what) {
  if (!s || !out) return tpx_err_quiet(TPX_EINVAL, "%s: NULL", what);
  for (int i = 0; i < n; i++) {
    if (strcasecmp(s, names[i]) == 0) {
      *out = i;
      return 0;
    }
  }
  return tpx_err_quiet(TPX_EINVAL, "%s: unknown value '%s'", what, s);
}

int tpx__unpacker_mode_parse(const char *s, int *mode) {
  return parse_name(s, mode_names, 3, mode, "unpack mode (kernel|d2d|host)");
}

const char *tpx__unpacker_mode_name(int mode) {
  return (mode >= 0 && mode < 3) ? mode_names[mode] : "?";
}

int tpx__unpacker_desc_parse(const char *s, int *desc) {
  return parse_name(s, desc_names, 4, desc, "unpack descriptors (copy|mapped|direct|param)");
}

const char *tpx__unpacker_desc_name(int desc) {
  return (desc >= 0 && desc < 4) ? desc_names[desc] : "?";
}
