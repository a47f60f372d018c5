/* The environment's parsing and range rules (config.c), for the code that
 * takes the same settings another way (the tools' command lines), so that a
 * value means the same and is refused the same wherever it comes from. */
#ifndef TPX_COMMON_CONFIG_H
#define TPX_COMMON_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/config.h"

/* A number as the environment reads it: an integer (strtoll, base 0) with an
 * optional K/M/G suffix (binary); overflow refused. 0, or TPX_EINVAL. */
int tpx__config_parse_number(const char *s, long long *out);

/* [lo, hi] of the numeric variable `var` (e.g. "TPX_CHUNK_BYTES"); TPX_EINVAL
 * for a name the table does not have or a non-numeric one. */
int tpx__config_range(const char *var, long long *lo, long long *hi);

/* `val` parsed and range-checked exactly as `var` would be from the
 * environment: 0 and *out, or TPX_EINVAL (nothing logged: the caller names
 * its own argument; tpx__config_range gives the bounds to quote). */
int tpx__config_parse_var(const char *var, const char *val, long long *out);

/* A name as the rendezvous keys take it (TPX_ETCD_JOB, endpoint and item
 * names): 1..cap-1 characters from [A-Za-z0-9._-], not "." or "..". 1 or 0. */
int tpx__config_name_ok(const char *s, size_t cap);

/* TPX_CHUNK_BYTES=auto (tpx_config_chunk): the chunk of every transfer, and
 * on machines of fewer than 4 CPUs the largest, reached by transfers that
 * give each channel at least that much. */
#define TPX_CHUNK_BASE (512u * 1024u)
#define TPX_CHUNK_SMALL_MAX (2u * 1024u * 1024u)
/* tpx_config_chunk for a machine of `ncpu` CPUs (the engine passes the
 * count its endpoint read at create: no syscall per transfer). */
size_t tpx__config_chunk_for(const tpx_config_t *cfg, uint64_t bytes, int channels, int ncpu);

#endif
