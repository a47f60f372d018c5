/* TPX_API marks the public API: every function (and datum) declared in the
 * headers in include/tpx/ carries it. libtpx is compiled with
 * -fvisibility=hidden, so these are the only symbols libtpx.so exports;
 * everything in src/ stays internal to the library and cannot collide with
 * another library loaded into the same process (NIXL, UCX, NCCL and their
 * plugins). A definition gets the visibility of the public declaration it
 * sees, so each .c file that defines a public function includes its tpx/
 * header. tests/abi/check_exports.sh holds libtpx.so to this list.
 *
 * Define TPX_API yourself before including any tpx header to override it
 * (e.g. empty); there is no import-side decoration to do on ELF. */
#ifndef TPX_EXPORT_H
#define TPX_EXPORT_H

#ifndef TPX_API
#if defined(__GNUC__) || defined(__clang__)
#define TPX_API __attribute__((visibility("default")))
#else
#define TPX_API
#endif
#endif

#endif
