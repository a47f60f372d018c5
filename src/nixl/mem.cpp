// Registrations and memory descriptors.
#include "backend.h"

namespace tpx_nixl {

Md::~Md() { tpx_rmem_free(rmem); }

// tpx_mem_deregister refuses (TPX_EAGAIN) while a transfer released in flight
// still holds the region; those are retried on later calls and at teardown
// (tpx_endpoint_destroy releases whatever is left).
void Engine::retryDeregister() {
    std::lock_guard<std::mutex> g(mu_);
    for (auto it = zombies_.begin(); it != zombies_.end();)
        it = tpx_mem_deregister(*it) == 0 ? zombies_.erase(it) : std::next(it);
}

nixl_status_t Engine::registerMem(const nixlBlobDesc &mem, const nixl_mem_t &type,
                                  nixlBackendMD *&out) {
    retryDeregister();
    if (type != DRAM_SEG && type != VRAM_SEG) {
        NIXL_ERROR << "TPX backend: memory type " << type << " is not DRAM or VRAM";
        return NIXL_ERR_NOT_SUPPORTED;
    }
    tpx_mem_desc_t d{};
    d.addr = reinterpret_cast<void *>(mem.addr);
    d.len = mem.len;
    d.type = type == VRAM_SEG ? TPX_MEM_CUDA : TPX_MEM_HOST;
    d.device = type == VRAM_SEG ? static_cast<int>(mem.devId) : 0;
    d.access = TPX_ACCESS_READ | TPX_ACCESS_WRITE;
    auto md = std::make_unique<Md>(true);
    int rc = tpx_mem_register(ep_, &d, &md->mem);
    if (rc) {
        NIXL_DEBUG << "TPX backend: registering " << mem.len << " bytes of "
                   << (type == VRAM_SEG ? "VRAM" : "DRAM") << ": " << tpx_last_error();
        return toNixl(rc);
    }
    md->addr = mem.addr;
    md->len = mem.len;
    out = md.release();
    return NIXL_SUCCESS;
}

nixl_status_t Engine::deregisterMem(nixlBackendMD *meta) {
    auto *md = static_cast<Md *>(meta);
    if (!md) return NIXL_ERR_INVALID_PARAM;
    int rc = tpx_mem_deregister(md->mem);
    if (rc == TPX_EAGAIN) {
        std::lock_guard<std::mutex> g(mu_);
        zombies_.push_back(md->mem);
        rc = 0;
    }
    delete md;
    retryDeregister();
    return toNixl(rc);
}

nixl_status_t Engine::getPublicData(const nixlBackendMD *meta, std::string &str) const {
    const auto *md = static_cast<const Md *>(meta);
    if (!md || !md->mem) return NIXL_ERR_INVALID_PARAM;
    char buf[TPX_MD_MAX];
    size_t len = 0;
    int rc = tpx_mem_get_public_data(md->mem, buf, sizeof buf, &len);
    if (rc) return toNixl(rc);
    str.assign(buf, len);
    return NIXL_SUCCESS;
}

static nixl_status_t loadBlob(const std::string &blob, uintptr_t addr, size_t len,
                              const std::string &agent, nixlBackendMD *&output) {
    auto md = std::make_unique<Md>(false);
    int rc = tpx_load_remote_md(blob.data(), blob.size(), &md->rmem);
    if (rc) {
        NIXL_DEBUG << "TPX backend: memory descriptor from agent " << agent << ": "
                   << tpx_last_error();
        return toNixl(rc);
    }
    md->addr = static_cast<uintptr_t>(tpx_rmem_addr(md->rmem));
    md->len = tpx_rmem_len(md->rmem);
    // NIXL's descriptor must lie inside the region the blob describes.
    if (addr < md->addr || len > md->len || addr - md->addr > md->len - len) {
        NIXL_ERROR << "TPX backend: descriptor [" << std::hex << addr << ", +" << std::dec << len
                   << ") of agent " << agent << " is outside its region";
        return NIXL_ERR_INVALID_PARAM;
    }
    output = md.release();
    return NIXL_SUCCESS;
}

nixl_status_t Engine::loadLocalMD(nixlBackendMD *input, nixlBackendMD *&output) {
    std::string blob;
    auto *in = static_cast<Md *>(input);
    nixl_status_t st = getPublicData(input, blob);
    return st != NIXL_SUCCESS ? st : loadBlob(blob, in->addr, in->len, localAgent, output);
}

nixl_status_t Engine::loadRemoteMD(const nixlBlobDesc &input, const nixl_mem_t &type,
                                   const std::string &agent, nixlBackendMD *&output) {
    if (type != DRAM_SEG && type != VRAM_SEG) return NIXL_ERR_NOT_SUPPORTED;
    return loadBlob(input.metaInfo, input.addr, input.len, agent, output);
}

nixl_status_t Engine::unloadMD(nixlBackendMD *input) {
    delete static_cast<Md *>(input);
    return NIXL_SUCCESS;
}

} // namespace tpx_nixl
