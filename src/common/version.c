/* tpx_version(): the version this library was built as (tpx/version.h). */
#include "tpx/version.h"

const char *tpx_version(void) { return TPX_VERSION_STRING; }
