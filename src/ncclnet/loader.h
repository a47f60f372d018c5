/* Internal side of the plugin loader (tpx_net_open in tpx/net.h is the public
 * entry). Tools and tests use these to force an older ABI or to say which file
 * was loaded. */
#ifndef TPX_NCCLNET_LOADER_H
#define TPX_NCCLNET_LOADER_H

#include "tpx/net.h"

/* As tpx_net_open, but probe ncclNetPlugin_v<max_version> down to v7 only
 * (7..12). Lets tests drive the v7..v10 adapters against a plugin that also
 * exports newer tables. */
int tpx__net_open_version(const char *spec, int max_version, tpx_net_t **out);

/* As tpx_net_open, but drive exactly ncclNetPlugin_v<abi> (7..11; 0 = the
 * highest exported): TPX_NET_ABI, taken from the caller's configuration (an
 * endpoint's) rather than the process-wide one. A plugin without that table
 * is TPX_EVERSION, naming the tables it has. */
int tpx__net_open_abi(const char *spec, int abi, tpx_net_t **out);

/* The file a loaded plugin came from (as the dynamic loader resolved it);
 * NULL for the built-in transport. */
const char *tpx_net_plugin_file(const tpx_net_t *net);

/* Where the loader looks last for a bare name N: <dir>/libnccl-net-N.so. */
#define TPX_NET_TCPX_LIBDIR "/usr/local/tcpx/lib64"

#endif
