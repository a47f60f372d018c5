/* The GPUDirect-TCPX plugin's own environment: the variables it reads at
 * init (NCCL_* names, not ours: src/common/config.c reads ours) whose
 * defaults are unsafe, the values documented as safe, and filling them in
 * before the plugin's init when the user left them unset. docs/CONFIG.md
 * ("The GPUDirect-TCPX plugin's environment") gives each value's source. */
#ifndef TPX_TCPX_PLUGIN_ENV_H
#define TPX_TCPX_PLUGIN_ENV_H

#include <stddef.h>

/* 1 when a plugin is GPUDirect-TCPX by its table name ("GPUDirectTCPX...")
 * or its file name (libnccl-net-tcpx*.so, ...gpudirecttcpx...). */
int tpx__tcpx_env_is_plugin(const char *name, const char *file);

/* Set every unset variable to its safe value (setenv, before the plugin's
 * init, which reads them once) and log each one set; warn about set values
 * that are unsafe. `who` names the transport in the logs. Returns how many
 * were set. Not thread-safe against concurrent getenv (call it at open). */
int tpx__tcpx_env_apply(const char *who);

/* The public view of the variables (tpx_net_tcpx_env, include/tpx/tcpx.h)
 * is implemented in plugin_env.c too. */

/* NCCL_DYNAMIC_CHUNK_SIZE as the plugin reads it: unset = 0 (its parameter
 * default), a value outside [0, INT_MAX) = its compiled-in 128 KiB. 0 means
 * every send is cut into 0-byte pieces and never finishes. */
long tpx__tcpx_env_chunk(void);

#endif
