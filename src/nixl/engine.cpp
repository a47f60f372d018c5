// Engine life cycle, parameters, connections and notifications.
#include <sched.h>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "backend.h"

namespace tpx_nixl {

nixl_status_t toNixl(int rc) {
    switch (rc) {
    case TPX_OK: return NIXL_SUCCESS;
    case TPX_EINPROGRESS: return NIXL_IN_PROG;
    case TPX_EINVAL:
    case TPX_EUSAGE:
    case TPX_EPROTO:
    case TPX_EVERSION:
    case TPX_EACCES:
    case TPX_ETRUNC: return NIXL_ERR_INVALID_PARAM;
    case TPX_ENOTSUP: return NIXL_ERR_NOT_SUPPORTED;
    case TPX_ENOENT: return NIXL_ERR_NOT_FOUND;
    case TPX_ECLOSED:
    case TPX_EREMOTE:
    case TPX_ESYSTEM: return NIXL_ERR_REMOTE_DISCONNECT;
    case TPX_ECANCELED: return NIXL_ERR_CANCELED;
    default: return NIXL_ERR_BACKEND; // TPX_ETIMEDOUT (a stalled transfer) among others
    }
}

// Parameters the shim handles itself; every other one is a tpx_config_t
// field by its docs/CONFIG.md name without "TPX_" (tpx_config_set checks it).
static const char *const kShimKeys[] = {"gpu", "port", "listen_host", "poll_pause_us"};
// Keys NIXL's own tests and bindings pass to every backend.
static const char *const kIgnoredKeys[] = {"engine_config", "num_threads", "num_workers"};

nixl_b_params_t defaultParams() {
    return {
        {"gpu", "0"},           // GPU index of the endpoint (VRAM registrations, port choice)
        {"port", "0"},          // control port: 0 = any free port, else exactly this one
        {"listen_host", ""},    // control listener address: "" = all interfaces
        {"poll_pause_us", "20"}, // checkXfer pauses this long on a request running > 1 ms; 0 = yield only
        {"num_channels", ""},   // "" = TPX_NUM_CHANNELS or its default (docs/CONFIG.md)
        {"chunk_bytes", ""},    // "" = TPX_CHUNK_BYTES, else auto
        {"timeout_ms", ""},     // "" = TPX_TIMEOUT_MS or 30000: a stalled transfer fails after it
        {"connect_timeout_ms", ""}, // "" = TPX_CONNECT_TIMEOUT_MS or 10000
        {"net_plugin", ""},     // "" = TPX_NET_PLUGIN or the built-in TCP transport
        {"socket_ifname", ""},  // "" = TPX_SOCKET_IFNAME or NCCL's interface choice
    };
}

static bool inList(const std::string &k, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (k == list[i]) return true;
    return false;
}

struct ShimParams {
    int gpu = 0, port = 0, poll_pause_us = 20;
    std::string host;
};

// A shim key's integer value: its target and upper bound (lower bound 0).
static int *shimInt(const std::string &k, ShimParams &sp, long &hi) {
    hi = k == "port" ? 65535 : 1023;
    if (k == "port") return &sp.port;
    if (k == "poll_pause_us") return &sp.poll_pause_us;
    return &sp.gpu;
}

// Apply NIXL init parameters to cfg / sp. False (logged) on a bad one.
static bool applyParams(const nixl_b_params_t &in, tpx_config_t &cfg, ShimParams &sp) {
    for (const auto &[k, v] : in) {
        if (v.empty() || inList(k, kIgnoredKeys, std::size(kIgnoredKeys))) continue;
        if (inList(k, kShimKeys, std::size(kShimKeys))) {
            if (k == "listen_host") {
                sp.host = v;
                continue;
            }
            char *end = nullptr;
            long n = std::strtol(v.c_str(), &end, 10), hi = 0;
            int *dst = shimInt(k, sp, hi);
            if (!end || *end || n < 0 || n > hi) {
                NIXL_ERROR << "TPX backend: parameter " << k << "='" << v << "' is not in [0, "
                           << hi << "]";
                return false;
            }
            *dst = static_cast<int>(n);
            continue;
        }
        int rc = tpx_config_set(&cfg, k.c_str(), v.c_str());
        if (rc == TPX_ENOENT) {
            NIXL_WARN << "TPX backend: unknown parameter '" << k << "' ignored (docs/NIXL.md)";
        } else if (rc != 0) {
            NIXL_DEBUG << "TPX backend: parameter " << k << "='"
                       << (k == "auth_key" ? std::string("(not shown)") : v) << "': " << tpx_last_error();
            return false;
        }
    }
    return true;
}

// Endpoint names travel with notifications and are at most TPX_NAME_MAX - 1
// bytes: a longer agent name is cut and made unique with a hash of it.
static std::string endpointName(const std::string &agent) {
    if (agent.size() < TPX_NAME_MAX) return agent;
    char tail[24];
    std::snprintf(tail, sizeof tail, "#%016zx", std::hash<std::string>{}(agent));
    return agent.substr(0, TPX_NAME_MAX - 1 - std::char_traits<char>::length(tail)) + tail;
}

Engine::Engine(const nixlBackendInitParams *init) : nixlBackendEngine(init) {
    tpx_config_t cfg;
    (void)tpx_config_from_env(&cfg); // a bad variable is logged and its default kept
    ShimParams sp;
    if (!init->customParams || !applyParams(*init->customParams, cfg, sp)) {
        initErr = true;
        return;
    }
    poll_pause_us_ = sp.poll_pause_us;
    const std::string name = endpointName(localAgent);
    tpx_endpoint_params_t p;
    tpx_endpoint_params_init(&p);
    p.cfg = &cfg;
    p.gpu = sp.gpu;
    p.port = sp.port ? sp.port : TPX_PORT_EPHEMERAL;
    p.name = name.c_str();
    p.listen_host = sp.host.empty() ? nullptr : sp.host.c_str();
    int rc = tpx_endpoint_create(&p, &ep_);
    if (rc) {
        NIXL_DEBUG << "TPX backend: endpoint for agent " << localAgent << ": " << tpx_last_error();
        initErr = true;
        ep_ = nullptr;
    }
}

Engine::~Engine() {
    // Peers, registrations and transfers still alive go with the endpoint.
    tpx_endpoint_destroy(ep_);
}

nixl_status_t Engine::getConnInfo(std::string &str) const {
    char buf[TPX_CONN_INFO_MAX];
    size_t len = 0;
    int rc = tpx_get_conn_info(ep_, buf, sizeof buf, &len);
    if (rc) return toNixl(rc);
    str.assign(buf, len);
    return NIXL_SUCCESS;
}

tpx_peer_t *Engine::findPeer(const std::string &agent) const {
    std::lock_guard<std::mutex> g(mu_);
    auto it = peers_.find(agent);
    return it == peers_.end() ? nullptr : it->second;
}

std::string Engine::agentOf(const char *endpoint_name) const {
    std::lock_guard<std::mutex> g(mu_);
    auto it = agents_.find(endpoint_name);
    return it == agents_.end() ? std::string(endpoint_name) : it->second;
}

nixl_status_t Engine::addPeer(const std::string &agent, tpx_peer_t *peer) {
    std::lock_guard<std::mutex> g(mu_);
    if (!peers_.emplace(agent, peer).second) {
        // Two loads raced: keep the first connection.
        tpx_peer_close(peer);
        return NIXL_SUCCESS;
    }
    agents_[tpx_peer_name(peer)] = agent;
    return NIXL_SUCCESS;
}

// Connects now (bounded by connect_timeout_ms), so a bad blob or an
// unreachable agent is reported here rather than at the first transfer.
nixl_status_t Engine::loadRemoteConnInfo(const std::string &agent, const std::string &info) {
    if (findPeer(agent)) return NIXL_SUCCESS;
    tpx_peer_t *peer = nullptr;
    int rc = tpx_load_remote_conn_info(ep_, info.data(), info.size(), &peer);
    if (rc) {
        NIXL_DEBUG << "TPX backend: connection info of agent " << agent << ": " << tpx_last_error();
        return toNixl(rc);
    }
    return addPeer(agent, peer);
}

// Transfers within the agent go through a connection to our own endpoint.
nixl_status_t Engine::connect(const std::string &agent) {
    if (findPeer(agent)) return NIXL_SUCCESS;
    if (agent != localAgent) {
        NIXL_ERROR << "TPX backend: connect to unknown agent " << agent
                   << " (its metadata was not loaded)";
        return NIXL_ERR_NOT_FOUND;
    }
    std::string self;
    nixl_status_t st = getConnInfo(self);
    return st == NIXL_SUCCESS ? loadRemoteConnInfo(agent, self) : st;
}

nixl_status_t Engine::disconnect(const std::string &agent) {
    tpx_peer_t *peer = nullptr;
    {
        std::lock_guard<std::mutex> g(mu_);
        auto it = peers_.find(agent);
        if (it == peers_.end()) return NIXL_ERR_NOT_FOUND;
        peer = it->second;
        peers_.erase(it);
        for (auto a = agents_.begin(); a != agents_.end();)
            a = a->second == agent ? agents_.erase(a) : std::next(a);
    }
    tpx_peer_close(peer); // its unfinished transfers fail with TPX_ECANCELED
    return NIXL_SUCCESS;
}

// Nothing new gives up the CPU before returning (never blocks), as checkXfer
// does: a receiver polling back to back keeps tpx's threads off a CPU
// otherwise.
nixl_status_t Engine::getNotifs(notif_list_t &list) {
    // tpx_notif_t carries a 4 KiB buffer: one per call, off the stack.
    auto n = std::make_unique<tpx_notif_t>();
    const size_t before = list.size();
    for (int i = 0; i < 1 << 20; i++) { // bounded; a pass takes what is there
        int rc = tpx_get_notif(ep_, n.get());
        if (rc < 0) return toNixl(rc);
        if (rc == 0) break;
        list.emplace_back(agentOf(n->peer_name),
                          std::string(reinterpret_cast<const char *>(n->msg), n->len));
    }
    if (list.size() == before) sched_yield();
    return NIXL_SUCCESS;
}

nixl_status_t Engine::genNotif(const std::string &agent, const std::string &msg) const {
    tpx_peer_t *peer = findPeer(agent);
    if (!peer) {
        NIXL_ERROR << "TPX backend: notification to unknown agent " << agent;
        return NIXL_ERR_NOT_FOUND;
    }
    if (msg.size() > TPX_NOTIF_MAX) {
        NIXL_ERROR << "TPX backend: notification of " << msg.size() << " bytes (max "
                   << TPX_NOTIF_MAX << ")";
        return NIXL_ERR_INVALID_PARAM;
    }
    return toNixl(tpx_notify(peer, msg.data(), msg.size()));
}

} // namespace tpx_nixl
