// NIXL backend "TPX": NIXL's backend engine interface mapped onto the public
// tpx C API (include/tpx/*.h), one call to one call (docs/API.md has the
// table; docs/NIXL.md the parameters and what is supported). The shim keeps
// no transfer logic of its own: it translates descriptors, agent names and
// status codes. C++20, the same ABI as the NIXL core it is loaded into.
//
// Logging: a failure decided inside tpx was logged there (TPX_LOG); the shim
// repeats its detail (tpx_last_error) only at NIXL's debug level and logs
// with NIXL_ERROR what it decides itself (unknown agent, descriptor outside
// its registration, ...).
#ifndef TPX_NIXL_BACKEND_H
#define TPX_NIXL_BACKEND_H

#include <chrono>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend_engine.h"
#include "tpx/tpx.h"

namespace tpx_nixl {

// Registration (local: mem) or loaded descriptor (remote, or our own for
// transfers within the agent: rmem), with the range it covers.
struct Md : public nixlBackendMD {
    explicit Md(bool priv) : nixlBackendMD(priv) {}
    ~Md() override;
    tpx_mem_t *mem = nullptr;
    tpx_rmem_t *rmem = nullptr;
    uintptr_t addr = 0;
    size_t len = 0;
};

// One NIXL request: as many tpx transfers as TPX_XFER_MAX_IOV requires, the
// notification riding on the last one.
struct Req : public nixlBackendReqH {
    ~Req() override;
    std::vector<tpx_xfer_t *> xfers;
    bool has_notif = false; // what the last transfer carries now
    std::string notif;
    std::chrono::steady_clock::time_point posted; // by the last postXfer (checkXfer's pause)
};

// tpx code -> NIXL status: a peer that went away is NIXL_ERR_REMOTE_DISCONNECT.
nixl_status_t toNixl(int rc);

class Engine : public nixlBackendEngine {
public:
    explicit Engine(const nixlBackendInitParams *init);
    ~Engine() override;

    bool supportsRemote() const override { return true; }
    bool supportsLocal() const override { return true; }
    bool supportsNotif() const override { return true; }
    nixl_mem_list_t getSupportedMems() const override { return {DRAM_SEG, VRAM_SEG}; }

    nixl_status_t getConnInfo(std::string &str) const override;
    nixl_status_t loadRemoteConnInfo(const std::string &agent, const std::string &info) override;
    nixl_status_t connect(const std::string &agent) override;
    nixl_status_t disconnect(const std::string &agent) override;

    nixl_status_t registerMem(const nixlBlobDesc &mem, const nixl_mem_t &type,
                              nixlBackendMD *&out) override;
    nixl_status_t deregisterMem(nixlBackendMD *meta) override;
    nixl_status_t getPublicData(const nixlBackendMD *meta, std::string &str) const override;
    nixl_status_t loadLocalMD(nixlBackendMD *input, nixlBackendMD *&output) override;
    nixl_status_t loadRemoteMD(const nixlBlobDesc &input, const nixl_mem_t &type,
                               const std::string &agent, nixlBackendMD *&output) override;
    nixl_status_t unloadMD(nixlBackendMD *input) override;

    nixl_status_t prepXfer(const nixl_xfer_op_t &op, const nixl_meta_dlist_t &local,
                           const nixl_meta_dlist_t &remote, const std::string &agent,
                           nixlBackendReqH *&handle,
                           const nixl_opt_b_args_t *opt = nullptr) const override;
    nixl_status_t postXfer(const nixl_xfer_op_t &op, const nixl_meta_dlist_t &local,
                           const nixl_meta_dlist_t &remote, const std::string &agent,
                           nixlBackendReqH *&handle,
                           const nixl_opt_b_args_t *opt = nullptr) const override;
    nixl_status_t checkXfer(nixlBackendReqH *handle) const override;
    nixl_status_t releaseReqH(nixlBackendReqH *handle) const override;

    nixl_status_t getNotifs(notif_list_t &list) override;
    nixl_status_t genNotif(const std::string &agent, const std::string &msg) const override;

private:
    tpx_peer_t *findPeer(const std::string &agent) const;
    std::string agentOf(const char *endpoint_name) const;
    nixl_status_t addPeer(const std::string &agent, tpx_peer_t *peer);
    void retryDeregister();

    tpx_endpoint_t *ep_ = nullptr;
    int poll_pause_us_ = 20; // checkXfer's pause on a request in progress (docs/NIXL.md)
    mutable std::mutex mu_;
    std::unordered_map<std::string, tpx_peer_t *> peers_; // agent -> our connection to it
    std::unordered_map<std::string, std::string> agents_; // endpoint name -> agent
    std::vector<tpx_mem_t *> zombies_; // deregistered while transfers still held them
};

// Backend parameters with their defaults (as NIXL's get_backend_options shows them).
nixl_b_params_t defaultParams();

} // namespace tpx_nixl

#endif
