// The plugin's entry points: NIXL loads libplugin_TPX.so from NIXL_PLUGIN_DIR
// and calls nixl_plugin_init (backend plugin API version 1).
#include "backend/backend_plugin.h"
#include "backend.h"

extern "C" NIXL_PLUGIN_EXPORT nixlBackendPlugin *nixl_plugin_init() {
    return nixlBackendPluginCreator<tpx_nixl::Engine>::create(
        NIXL_PLUGIN_API_VERSION, "TPX", TPX_NIXL_VERSION, tpx_nixl::defaultParams(),
        {DRAM_SEG, VRAM_SEG});
}

extern "C" NIXL_PLUGIN_EXPORT void nixl_plugin_fini() {}
