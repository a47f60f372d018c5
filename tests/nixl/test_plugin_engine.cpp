// libplugin_TPX.so loaded the way NIXL loads it (dlopen + nixl_plugin_init)
// and driven through NIXL's backend interface directly, for what NIXL's own
// agent never lets through to a backend: bad parameters, a malformed
// connection-info or memory blob, descriptors outside registrations, an
// unknown agent, VRAM where there is no usable GPU, release of a request in
// flight. Each must be a NIXL status with a logged reason, never an abort.
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend_plugin.h"

static int failures = 0;
#define EXPECT(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);      \
            failures++;                                                                        \
        }                                                                                      \
    } while (0)

static nixlBackendPlugin *plugin;

static nixlBackendEngine *make(const std::string &name, nixl_b_params_t params) {
    nixlBackendInitParams init;
    init.localAgent = name;
    init.type = "TPX";
    params.emplace("listen_host", "127.0.0.1");
    init.customParams = &params;
    init.enableProgTh = false;
    init.syncMode = nixl_thread_sync_t::NIXL_THREAD_SYNC_RW;
    return plugin->create_engine(&init);
}

static nixl_meta_dlist_t dlist(uintptr_t addr, size_t len, nixlBackendMD *md) {
    nixl_meta_dlist_t l(DRAM_SEG);
    l.addDesc(nixlMetaDesc(addr, len, 0, md));
    return l;
}

static void badParams() {
    for (const auto &[k, v] : std::vector<std::pair<std::string, std::string>>{
             {"num_channels", "0"}, {"chunk_bytes", "8M"}, {"port", "70000"}, {"gpu", "-1"},
             {"timeout_ms", "soon"}, {"poll_pause_us", "5000"}, {"poll_pause_us", "-1"}}) {
        nixlBackendEngine *e = make("bad", {{k, v}});
        EXPECT(e && e->getInitErr());
        plugin->destroy_engine(e);
    }
    nixlBackendEngine *e = make("fine", {{"no_such_key", "1"}, {"num_channels", "1"}});
    EXPECT(e && !e->getInitErr()); // unknown keys are logged and ignored
    plugin->destroy_engine(e);
}

// A and B, B's buffer registered and A connected to B.
static void badBlobsAndDescriptors() {
    nixlBackendEngine *a = make("agentA", {}), *b = make("agentB", {});
    EXPECT(!a->getInitErr() && !b->getInitErr());
    std::vector<char> abuf(1 << 20, 'a'), bbuf(1 << 20, 'b');
    nixlBackendMD *amd = nullptr, *bmd = nullptr, *rmd = nullptr;
    EXPECT(a->registerMem(nixlBlobDesc((uintptr_t)abuf.data(), abuf.size(), 0, ""), DRAM_SEG, amd) ==
          NIXL_SUCCESS);
    EXPECT(b->registerMem(nixlBlobDesc((uintptr_t)bbuf.data(), bbuf.size(), 0, ""), DRAM_SEG, bmd) ==
          NIXL_SUCCESS);
    std::string info, pub;
    EXPECT(b->getConnInfo(info) == NIXL_SUCCESS && b->getPublicData(bmd, pub) == NIXL_SUCCESS);

    // Malformed blobs.
    EXPECT(a->loadRemoteConnInfo("agentB", "garbage") == NIXL_ERR_INVALID_PARAM);
    EXPECT(a->loadRemoteConnInfo("agentB", info.substr(0, info.size() / 2)) == NIXL_ERR_INVALID_PARAM);
    EXPECT(a->loadRemoteMD(nixlBlobDesc((uintptr_t)bbuf.data(), 16, 0, "garbage"), DRAM_SEG, "agentB",
                          rmd) == NIXL_ERR_INVALID_PARAM);
    std::string flipped = pub;
    flipped[0] ^= 0x5a;
    EXPECT(a->loadRemoteMD(nixlBlobDesc((uintptr_t)bbuf.data(), 16, 0, flipped), DRAM_SEG, "agentB",
                          rmd) != NIXL_SUCCESS);
    // A descriptor claiming more than the blob's region.
    EXPECT(a->loadRemoteMD(nixlBlobDesc((uintptr_t)bbuf.data() + 16, bbuf.size(), 0, pub), DRAM_SEG,
                          "agentB", rmd) == NIXL_ERR_INVALID_PARAM);
    EXPECT(a->loadRemoteMD(nixlBlobDesc((uintptr_t)bbuf.data(), bbuf.size(), 0, pub), DRAM_SEG,
                          "agentB", rmd) == NIXL_SUCCESS);

    // Unknown agent: not connected yet.
    nixlBackendReqH *h = nullptr;
    auto l = dlist((uintptr_t)abuf.data(), 4096, amd), r = dlist((uintptr_t)bbuf.data(), 4096, rmd);
    EXPECT(a->prepXfer(NIXL_WRITE, l, r, "agentB", h) == NIXL_ERR_NOT_FOUND);
    EXPECT(a->genNotif("nobody", "x") == NIXL_ERR_NOT_FOUND);
    EXPECT(a->connect("nobody") == NIXL_ERR_NOT_FOUND);
    EXPECT(a->loadRemoteConnInfo("agentB", info) == NIXL_SUCCESS);

    // Descriptors outside the registration / the loaded descriptor.
    auto lbad = dlist((uintptr_t)abuf.data() + abuf.size() - 100, 4096, amd);
    auto rbad = dlist((uintptr_t)bbuf.data() - 4096, 4096, rmd);
    EXPECT(a->prepXfer(NIXL_WRITE, lbad, r, "agentB", h) == NIXL_ERR_INVALID_PARAM);
    EXPECT(a->prepXfer(NIXL_READ, l, rbad, "agentB", h) == NIXL_ERR_INVALID_PARAM);
    EXPECT(a->genNotif("agentB", std::string(5000, 'n')) == NIXL_ERR_INVALID_PARAM);

    // And a good write with its notification still works after all that.
    nixl_opt_b_args_t opt;
    opt.hasNotif = true;
    opt.notifMsg = "landed";
    EXPECT(a->prepXfer(NIXL_WRITE, l, r, "agentB", h) == NIXL_SUCCESS);
    nixl_status_t st = a->postXfer(NIXL_WRITE, l, r, "agentB", h, &opt);
    for (int i = 0; i < 10000 && st == NIXL_IN_PROG; i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        st = a->checkXfer(h);
    }
    EXPECT(st == NIXL_SUCCESS);
    EXPECT(std::memcmp(bbuf.data(), abuf.data(), 4096) == 0 && bbuf[4096] == 'b');
    notif_list_t got;
    for (int i = 0; i < 10000 && got.empty(); i++) {
        EXPECT(b->getNotifs(got) == NIXL_SUCCESS);
        if (got.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT(got.size() == 1 && got[0].first == "agentA" && got[0].second == "landed");
    EXPECT(a->releaseReqH(h) == NIXL_SUCCESS);

    EXPECT(a->unloadMD(rmd) == NIXL_SUCCESS);
    EXPECT(a->deregisterMem(amd) == NIXL_SUCCESS && b->deregisterMem(bmd) == NIXL_SUCCESS);
    EXPECT(a->disconnect("agentB") == NIXL_SUCCESS);
    EXPECT(a->disconnect("agentB") == NIXL_ERR_NOT_FOUND);
    plugin->destroy_engine(a);
    plugin->destroy_engine(b);
}

// A request released in flight: releaseReqH returns, deregisterMem and
// teardown still succeed (the transfer finishes or fails in the background).
static void releaseInFlight() {
    nixlBackendEngine *a = make("relA", {}), *b = make("relB", {});
    const size_t n = 64 << 20;
    auto abuf = std::make_unique<char[]>(n), bbuf = std::make_unique<char[]>(n);
    nixlBackendMD *amd = nullptr, *bmd = nullptr, *rmd = nullptr;
    std::string info, pub;
    EXPECT(a->registerMem(nixlBlobDesc((uintptr_t)abuf.get(), n, 0, ""), DRAM_SEG, amd) == NIXL_SUCCESS);
    EXPECT(b->registerMem(nixlBlobDesc((uintptr_t)bbuf.get(), n, 0, ""), DRAM_SEG, bmd) == NIXL_SUCCESS);
    EXPECT(b->getConnInfo(info) == NIXL_SUCCESS && b->getPublicData(bmd, pub) == NIXL_SUCCESS);
    EXPECT(a->loadRemoteConnInfo("relB", info) == NIXL_SUCCESS);
    EXPECT(a->loadRemoteMD(nixlBlobDesc((uintptr_t)bbuf.get(), n, 0, pub), DRAM_SEG, "relB", rmd) ==
          NIXL_SUCCESS);
    auto l = dlist((uintptr_t)abuf.get(), n, amd), r = dlist((uintptr_t)bbuf.get(), n, rmd);
    nixlBackendReqH *h = nullptr;
    EXPECT(a->prepXfer(NIXL_WRITE, l, r, "relB", h) == NIXL_SUCCESS);
    EXPECT(a->postXfer(NIXL_WRITE, l, r, "relB", h) == NIXL_IN_PROG);
    EXPECT(a->releaseReqH(h) == NIXL_SUCCESS);
    EXPECT(a->unloadMD(rmd) == NIXL_SUCCESS);
    EXPECT(a->deregisterMem(amd) == NIXL_SUCCESS);
    plugin->destroy_engine(a);
    EXPECT(b->deregisterMem(bmd) == NIXL_SUCCESS);
    plugin->destroy_engine(b);
}

// More descriptors than one tpx transfer takes (TPX_XFER_MAX_IOV): the request
// becomes several, the notification comes once, after all of them.
static void manyDescriptors() {
    nixlBackendEngine *a = make("manyA", {}), *b = make("manyB", {});
    const size_t n = 40000, blk = 16, stride = 32;
    std::vector<unsigned char> abuf(n * stride), bbuf(n * stride, 0xee);
    for (size_t i = 0; i < abuf.size(); i++) abuf[i] = static_cast<unsigned char>(i * 7 + 1);
    nixlBackendMD *amd = nullptr, *bmd = nullptr, *rmd = nullptr;
    std::string info, pub;
    EXPECT(a->registerMem(nixlBlobDesc((uintptr_t)abuf.data(), abuf.size(), 0, ""), DRAM_SEG, amd) ==
           NIXL_SUCCESS);
    EXPECT(b->registerMem(nixlBlobDesc((uintptr_t)bbuf.data(), bbuf.size(), 0, ""), DRAM_SEG, bmd) ==
           NIXL_SUCCESS);
    EXPECT(b->getConnInfo(info) == NIXL_SUCCESS && b->getPublicData(bmd, pub) == NIXL_SUCCESS);
    EXPECT(a->loadRemoteConnInfo("manyB", info) == NIXL_SUCCESS);
    EXPECT(a->loadRemoteMD(nixlBlobDesc((uintptr_t)bbuf.data(), bbuf.size(), 0, pub), DRAM_SEG,
                           "manyB", rmd) == NIXL_SUCCESS);
    nixl_meta_dlist_t l(DRAM_SEG), r(DRAM_SEG);
    for (size_t i = 0; i < n; i++) { // block i -> block n-1-i
        l.addDesc(nixlMetaDesc((uintptr_t)abuf.data() + i * stride, blk, 0, amd));
        r.addDesc(nixlMetaDesc((uintptr_t)bbuf.data() + (n - 1 - i) * stride, blk, 0, rmd));
    }
    nixlBackendReqH *h = nullptr;
    nixl_opt_b_args_t opt;
    opt.hasNotif = true;
    opt.notifMsg = "all";
    EXPECT(a->prepXfer(NIXL_WRITE, l, r, "manyB", h) == NIXL_SUCCESS);
    nixl_status_t st = a->postXfer(NIXL_WRITE, l, r, "manyB", h, &opt);
    for (int i = 0; i < 60000 && st == NIXL_IN_PROG; i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        st = a->checkXfer(h);
    }
    EXPECT(st == NIXL_SUCCESS);
    notif_list_t got;
    for (int i = 0; i < 10000 && got.empty(); i++) {
        EXPECT(b->getNotifs(got) == NIXL_SUCCESS);
        if (got.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT(got.size() == 1 && got[0].second == "all");
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        bad += std::memcmp(&bbuf[(n - 1 - i) * stride], &abuf[i * stride], blk) != 0;
        bad += bbuf[(n - 1 - i) * stride + blk] != 0xee; // the gaps stay untouched
    }
    EXPECT(bad == 0);
    EXPECT(a->releaseReqH(h) == NIXL_SUCCESS && a->unloadMD(rmd) == NIXL_SUCCESS);
    EXPECT(a->deregisterMem(amd) == NIXL_SUCCESS && b->deregisterMem(bmd) == NIXL_SUCCESS);
    plugin->destroy_engine(a);
    plugin->destroy_engine(b);
}

// VRAM: a host pointer is never device memory; without CUDA or a GPU the
// registration is not supported. Either way a status, not a crash.
static void vram() {
    nixlBackendEngine *a = make("vram", {});
    std::vector<char> buf(4096);
    nixlBackendMD *md = nullptr;
    nixl_status_t st = a->registerMem(nixlBlobDesc((uintptr_t)buf.data(), buf.size(), 0, ""), VRAM_SEG, md);
    EXPECT(st == NIXL_ERR_NOT_SUPPORTED || st == NIXL_ERR_INVALID_PARAM || st == NIXL_ERR_BACKEND);
    EXPECT(a->registerMem(nixlBlobDesc((uintptr_t)buf.data(), buf.size(), 0, ""), FILE_SEG, md) ==
          NIXL_ERR_NOT_SUPPORTED);
    plugin->destroy_engine(a);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s path/to/libplugin_TPX.so\n", argv[0]);
        return 2;
    }
    void *so = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!so) {
        std::fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    auto init = reinterpret_cast<nixlBackendPlugin *(*)()>(dlsym(so, "nixl_plugin_init"));
    plugin = init ? init() : nullptr;
    if (!plugin || plugin->api_version != NIXL_PLUGIN_API_VERSION ||
        std::string(plugin->get_plugin_name()) != "TPX") {
        std::fprintf(stderr, "not a TPX plugin of API version %d\n", NIXL_PLUGIN_API_VERSION);
        return 1;
    }
    badParams();
    badBlobsAndDescriptors();
    releaseInFlight();
    manyDescriptors();
    vram();
    std::printf("%s\n", failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
