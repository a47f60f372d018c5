/* Levelled logging. A disabled level costs one compare: the macros test
 * tpx__log_level before evaluating any argument. Messages should name the peer,
 * GPU, channel and chunk they concern. */
#ifndef TPX_COMMON_LOG_H
#define TPX_COMMON_LOG_H

#include "tpx/config.h"

extern int tpx__log_level; /* enum tpx__log_level; from TPX_LOG at the first config read */

void tpx__log_emit(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define TPX_LOG_AT(lvl, ...)                                                                       \
  do {                                                                                             \
    if (__builtin_expect((lvl) <= tpx__log_level, 0)) tpx__log_emit((lvl), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#define TPX_ERROR(...) TPX_LOG_AT(TPX_LOG_ERROR, __VA_ARGS__)
#define TPX_WARN(...) TPX_LOG_AT(TPX_LOG_WARN, __VA_ARGS__)
#define TPX_INFO(...) TPX_LOG_AT(TPX_LOG_INFO, __VA_ARGS__)
#define TPX_DEBUG(...) TPX_LOG_AT(TPX_LOG_DEBUG, __VA_ARGS__)
#define TPX_TRACE(...) TPX_LOG_AT(TPX_LOG_TRACE, __VA_ARGS__)

#endif
