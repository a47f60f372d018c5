// Transfers: NIXL descriptor lists -> tpx (local, remote, length) triples.
#include <algorithm>
#include <chrono>
#include <thread>

#include <sched.h>

#include "backend.h"

namespace tpx_nixl {

// Released in flight: tpx finishes or cancels the transfer in the background
// and never blocks here.
Req::~Req() {
    for (tpx_xfer_t *x : xfers) tpx_xfer_free(x);
}

// One descriptor pair -> one triple; false (logged) when a descriptor lies
// outside the registration or loaded descriptor it names.
static bool toIov(const nixlMetaDesc &l, const nixlMetaDesc &r, size_t i, tpx_iov_t &v) {
    const auto *lm = static_cast<const Md *>(l.metadataP);
    const auto *rm = static_cast<const Md *>(r.metadataP);
    if (!lm || !lm->mem || !rm || !rm->rmem) {
        NIXL_ERROR << "TPX backend: descriptor " << i << " carries no TPX metadata";
        return false;
    }
    if (l.len != r.len) {
        NIXL_ERROR << "TPX backend: descriptor " << i << ": local length " << l.len
                   << " != remote length " << r.len;
        return false;
    }
    auto inside = [](const Md *m, const nixlMetaDesc &d) {
        return d.addr >= m->addr && d.len <= m->len && d.addr - m->addr <= m->len - d.len;
    };
    if (!inside(lm, l) || !inside(rm, r)) {
        NIXL_ERROR << "TPX backend: descriptor " << i << " lies outside its "
                   << (inside(lm, l) ? "remote" : "local") << " registration";
        return false;
    }
    v = {lm->mem, static_cast<size_t>(l.addr - lm->addr), rm->rmem,
         static_cast<uint64_t>(r.addr - rm->addr), l.len};
    return true;
}

nixl_status_t Engine::prepXfer(const nixl_xfer_op_t &op, const nixl_meta_dlist_t &local,
                               const nixl_meta_dlist_t &remote, const std::string &agent,
                               nixlBackendReqH *&handle, const nixl_opt_b_args_t *) const {
    handle = nullptr;
    if (op != NIXL_WRITE && op != NIXL_READ) return NIXL_ERR_INVALID_PARAM;
    if (local.descCount() != remote.descCount()) {
        NIXL_ERROR << "TPX backend: " << local.descCount() << " local descriptors vs "
                   << remote.descCount() << " remote";
        return NIXL_ERR_INVALID_PARAM;
    }
    tpx_peer_t *peer = findPeer(agent);
    if (!peer) {
        NIXL_ERROR << "TPX backend: transfer to unknown agent " << agent;
        return NIXL_ERR_NOT_FOUND;
    }
    const size_t n = static_cast<size_t>(local.descCount());
    if (n == 0) return NIXL_ERR_INVALID_PARAM;
    std::vector<tpx_iov_t> iov(n);
    for (size_t i = 0; i < n; i++)
        if (!toIov(local[i], remote[i], i, iov[i])) return NIXL_ERR_INVALID_PARAM;
    auto req = std::make_unique<Req>();
    for (size_t at = 0; at < n; at += TPX_XFER_MAX_IOV) {
        const size_t k = std::min<size_t>(n - at, TPX_XFER_MAX_IOV);
        tpx_xfer_t *x = nullptr;
        int rc = op == NIXL_WRITE ? tpx_xfer_prep_write(peer, iov.data() + at, k, nullptr, 0, &x)
                                  : tpx_xfer_prep_read(peer, iov.data() + at, k, nullptr, 0, &x);
        if (rc) return toNixl(rc);
        req->xfers.push_back(x);
    }
    handle = req.release();
    return NIXL_SUCCESS;
}

// Only the last transfer carries the notification: tpx delivers it after
// every write posted before it on that peer has landed.
static nixl_status_t setNotif(Req &r, const nixl_opt_b_args_t *opt) {
    const bool want = opt && opt->hasNotif;
    if (want && opt->notifMsg.size() > TPX_NOTIF_MAX) {
        NIXL_ERROR << "TPX backend: notification of " << opt->notifMsg.size() << " bytes (max "
                   << TPX_NOTIF_MAX << ")";
        return NIXL_ERR_INVALID_PARAM;
    }
    if (want == r.has_notif && (!want || opt->notifMsg == r.notif)) return NIXL_SUCCESS;
    const std::string msg = want ? opt->notifMsg : std::string();
    int rc = tpx_xfer_set_notif(r.xfers.back(), want ? msg.data() : nullptr, msg.size());
    if (rc) return toNixl(rc);
    r.has_notif = want;
    r.notif = msg;
    return NIXL_SUCCESS;
}

nixl_status_t Engine::postXfer(const nixl_xfer_op_t &, const nixl_meta_dlist_t &,
                               const nixl_meta_dlist_t &, const std::string &agent,
                               nixlBackendReqH *&handle, const nixl_opt_b_args_t *opt) const {
    auto *r = static_cast<Req *>(handle);
    if (!r || r->xfers.empty()) return NIXL_ERR_INVALID_PARAM;
    nixl_status_t st = setNotif(*r, opt);
    if (st != NIXL_SUCCESS) return st;
    r->posted = std::chrono::steady_clock::now();
    for (tpx_xfer_t *x : r->xfers) {
        int rc = tpx_xfer_post(x);
        if (rc) {
            // Transfers already posted finish or fail on their own; checkXfer
            // and releaseReqH handle them.
            NIXL_DEBUG << "TPX backend: posting to agent " << agent << ": " << tpx_last_error();
            return toNixl(rc);
        }
    }
    return NIXL_IN_PROG;
}

// Clients poll this back to back (nixlbench; NIXL's Python examples) while
// tpx's own threads move the bytes: "not yet" gives up the CPU, so a poller
// does not keep them off a CPU when there are few. A yield alone still keeps
// the poller runnable (a CPU's worth of time on a 2-CPU machine), so a
// request running longer than kPauseAfter pauses poll_pause_us_: a short,
// bounded wait that only a long transfer sees (a pause can oversleep on a
// busy virtual machine, so pausing sooner would slow short round trips;
// docs/notes/nixl-backend.md).
static constexpr auto kPauseAfter = std::chrono::milliseconds(1);

nixl_status_t Engine::checkXfer(nixlBackendReqH *handle) const {
    auto *r = static_cast<Req *>(handle);
    if (!r) return NIXL_ERR_INVALID_PARAM;
    nixl_status_t out = NIXL_SUCCESS;
    for (tpx_xfer_t *x : r->xfers) {
        int rc = tpx_xfer_test(x);
        if (rc == TPX_EINPROGRESS) {
            out = NIXL_IN_PROG;
        } else if (rc) {
            NIXL_DEBUG << "TPX backend: transfer failed: " << tpx_last_error();
            return toNixl(rc);
        }
    }
    if (out != NIXL_IN_PROG) return out;
    if (poll_pause_us_ > 0 && std::chrono::steady_clock::now() - r->posted > kPauseAfter)
        std::this_thread::sleep_for(std::chrono::microseconds(poll_pause_us_));
    else
        sched_yield();
    return out;
}

nixl_status_t Engine::releaseReqH(nixlBackendReqH *handle) const {
    delete static_cast<Req *>(handle);
    return NIXL_SUCCESS;
}

} // namespace tpx_nixl
