/* The library's version.
 *
 * TPX_VERSION_* are the version of the headers compiled against; tpx_version()
 * is the version of the library loaded at run time. They differ only when a
 * program runs against another build than it was compiled with. This header
 * is the one place the version is written: CMakeLists.txt reads it for
 * project(VERSION), the soname and the pkg-config / CMake package files. */
#ifndef TPX_VERSION_H
#define TPX_VERSION_H

#include "tpx/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TPX_VERSION_MAJOR 0
#define TPX_VERSION_MINOR 1
#define TPX_VERSION_PATCH 0
#define TPX_VERSION_STRING "0.1.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH, for #if comparisons. */
#define TPX_VERSION_NUMBER (TPX_VERSION_MAJOR * 10000 + TPX_VERSION_MINOR * 100 + TPX_VERSION_PATCH)

/* The loaded library's version, "MAJOR.MINOR.PATCH". Never NULL. */
TPX_API const char *tpx_version(void);

#ifdef __cplusplus
}
#endif
#endif
