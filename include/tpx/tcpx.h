/* GPUDirect-TCPX helpers over the net layer (tpx/net.h): whether an opened
 * transport is Google's plugin (or our emulation of it), and the plugin's own
 * environment. Kept apart from tpx/net.h, which is any transport's. */
#ifndef TPX_TCPX_H
#define TPX_TCPX_H

#include "tpx/export.h"
#include "tpx/net.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The GPUDirect-TCPX plugin's own NCCL_* variables whose defaults are unsafe
 * (docs/CONFIG.md, "The GPUDirect-TCPX plugin's environment"). Opening that
 * plugin (or the built-in transport's unpack mode, which emulates it) sets
 * each one the user left unset to its safe value before the plugin's init. */
typedef struct tpx_net_env {
  const char *name;
  const char *value;  /* now; NULL when unset */
  const char *safe;   /* what is set when unset */
  const char *danger; /* why the current value is unsafe; NULL when fine */
  int set_by_us;      /* it was unset and this process set it */
} tpx_net_env_t;
/* Row i (from 0). Returns 0, or TPX_ENOENT past the last row. */
TPX_API int tpx_net_tcpx_env(int i, tpx_net_env_t *row);
/* 1 when net is GPUDirect-TCPX (by its name or file) or emulates it (the
 * built-in transport's unpack mode), else 0. */
TPX_API int tpx_net_is_tcpx(const tpx_net_t *net);

#ifdef __cplusplus
}
#endif

#endif
