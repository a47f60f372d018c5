/* tpx-info: which net transport would be used, what it sees, and with which
 * configuration.
 *
 *   tpx-info [--plugin SPEC] [--sysfs ROOT] [--gpu-bus-ids ID,ID,...]
 *
 * SPEC is what TPX_NET_PLUGIN takes: "" / "tpx" / "builtin" for the built-in
 * TCP transport, a path to an ncclNet plugin, or a bare name N
 * (libnccl-net-N.so, e.g. "tcpx"). Without --plugin, TPX_NET_PLUGIN decides.
 * The GPU-NIC topology section reads ROOT instead of /sys (a copy of a node's
 * tree, or a test's fake one), with the GPUs given by their PCI bus ids
 * instead of the CUDA driver's (e.g. from `nvidia-smi --query-gpu=pci.bus_id`).
 * Exit status: 0; 1 when the transport cannot be opened or a setting of the
 * environment was rejected (the engine would run without it); 2 on bad usage. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "tpx/config.h"
#include "tpx/error.h"
#include "tpx/net.h"
#include "tpx/rendezvous.h"
#include "tpx/tcpx.h"
#include "tpx/topo.h"
#include "version.h"

/* The interface's IP addresses (what peers dial when it carries the
 * traffic), comma-separated; "" when it has none or is no interface. */
static const char *if_addrs(const char *ifname, char *buf, size_t cap) {
  struct ifaddrs *ifa = NULL;
  size_t off = 0;
  buf[0] = '\0';
  if (getifaddrs(&ifa) != 0) return buf;
  for (struct ifaddrs *a = ifa; a; a = a->ifa_next) {
    if (!a->ifa_addr || strcmp(a->ifa_name, ifname) != 0) continue;
    int fam = a->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    char h[INET6_ADDRSTRLEN];
    const void *src = fam == AF_INET ? (const void *)&((struct sockaddr_in *)a->ifa_addr)->sin_addr
                                     : (const void *)&((struct sockaddr_in6 *)a->ifa_addr)->sin6_addr;
    if (!inet_ntop(fam, src, h, sizeof(h))) continue;
    int n = snprintf(buf + off, cap - off, "%s%s", off ? ", " : "", h);
    if (n < 0 || (size_t)n >= cap - off) break;
    off += (size_t)n;
  }
  freeifaddrs(ifa);
  return buf;
}

static void usage(FILE *f) {
  fprintf(
      f,
      "usage: tpx-info [--plugin SPEC] [--sysfs ROOT] [--gpu-bus-ids ID,ID,...]\n"
      "  SPEC: \"\", tpx or builtin (the built-in TCP transport), a path to an NCCL net\n"
      "        plugin, or a name N for libnccl-net-N.so (e.g. tcpx). Default: TPX_NET_PLUGIN.\n"
      "  ROOT: sysfs to read the GPU-NIC topology from (default /sys).\n"
      "  ID:   the GPUs' PCI bus ids, GPU 0 first (default: the CUDA driver's).\n");
}

static const char *ptr_str(int bits, char *buf, size_t cap) {
  snprintf(buf, cap, "%s%s%s%s", bits & TPX_PTR_HOST ? "HOST " : "",
           bits & TPX_PTR_CUDA ? "CUDA " : "", bits & TPX_PTR_DMABUF ? "DMABUF " : "",
           bits == 0 ? "none " : "");
  size_t n = strlen(buf);
  if (n) buf[n - 1] = '\0';
  return buf;
}

static const char *bytes_str(size_t v, char *buf, size_t cap) {
  if (v == SIZE_MAX)
    snprintf(buf, cap, "unlimited");
  else if (v >= (1ull << 30) && v % (1ull << 30) == 0)
    snprintf(buf, cap, "%zu GiB", v >> 30);
  else if (v >= (1ull << 20) && v % (1ull << 20) == 0)
    snprintf(buf, cap, "%zu MiB", v >> 20);
  else
    snprintf(buf, cap, "%zu B", v);
  return buf;
}

static void why_str(const tpx_topo_t *t, const tpx_topo_gpu_t *g, char *buf, size_t cap) {
  switch (g->why) {
  case TPX_TOPO_MAP: snprintf(buf, cap, "TPX_GPU_NIC_MAP"); break;
  case TPX_TOPO_PCI:
    snprintf(buf, cap, "nearest on the PCI tree: behind bridge %s with the GPU (%d path levels shared)",
             g->via[0] ? g->via : "(several)", g->depth);
    break;
  case TPX_TOPO_HOST:
    snprintf(buf, cap, "no PCI switch shared; same host bridge %s", g->via[0] ? g->via : "(several)");
    break;
  case TPX_TOPO_NUMA: snprintf(buf, cap, "no PCI bridge shared; same NUMA node %d", g->numa); break;
  case TPX_TOPO_ANY:
    if (g->nnics == 1)
      snprintf(buf, cap, "the only NIC with a PCI path (no bridge shared, %s)",
               g->numa < 0 ? "NUMA node unknown" : "not on the GPU's NUMA node");
    else
      snprintf(buf, cap, "all %d equally far (no bridge shared, %s): channels spread over them", g->nnics,
               g->numa < 0 ? "NUMA node unknown" : "none on the GPU's NUMA node");
    break;
  default:
    snprintf(buf, cap, "nothing known (%s): channel c on device (c + gpu) %% ndev",
             g->pci_path[0] ? "no NIC with a PCI path" : "no PCI path for the GPU");
  }
  (void)t;
}

/* The GPU-NIC map over the transport's devices, why each GPU got its NICs,
 * and a warning for every NIC on another NUMA node than its GPU. */
static int print_topology(tpx_net_t *net, int ndev, const char *sysfs, char *gpu_ids) {
  const char *names[TPX_TOPO_MAX_NICS];
  static tpx_net_props_t props[TPX_TOPO_MAX_NICS];
  int n = 0, warnings = 0;
  for (int d = 0; d < ndev && n < TPX_TOPO_MAX_NICS; d++, n++) {
    if (net->ops->get_properties(net, d, &props[n]) != 0) props[n].name[0] = '\0';
    names[n] = props[n].name;
  }
  tpx_topo_params_t q;
  tpx_topo_params_init(&q);
  q.sysfs_root = sysfs;
  q.nics = names;
  q.nnics = n;
  const char *ids[TPX_TOPO_MAX_GPUS];
  for (char *tok = gpu_ids ? strtok(gpu_ids, ",") : NULL; tok && q.ngpus < TPX_TOPO_MAX_GPUS; tok = strtok(NULL, ","))
    ids[q.ngpus++] = tok;
  if (gpu_ids) q.gpu_bus_ids = ids;
  tpx_topo_t *t = NULL;
  const char *map = tpx_config_global()->gpu_nic_map;
  printf("\n== GPU-NIC topology (TPX_GPU_NIC_MAP %s; sysfs %s)\n", map[0] ? map : "unset", sysfs ? sysfs : "/sys");
  if (tpx_topo_detect(&q, &t) != 0) {
    printf("WARNING        %s\n", tpx_last_error());
    return 1;
  }
  for (int i = 0; i < t->nnics; i++)
    printf("nic %-10s %-13s NUMA %2d  %s\n", t->nics[i].name, t->nics[i].bus_id[0] ? t->nics[i].bus_id : "-",
           t->nics[i].numa, t->nics[i].pci_path[0] ? t->nics[i].pci_path : "(no PCI device)");
  if (t->ngpus == 0) printf("no GPU known (no CUDA driver or device, and no map)\n");
  for (int g = 0; g < t->ngpus; g++) {
    const tpx_topo_gpu_t *x = &t->gpus[g];
    char list[TPX_TOPO_MAX_NICS * TPX_TOPO_NAME_MAX] = "", why[256];
    size_t len = 0;
    for (int i = 0; i < x->nnics; i++)
      len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", i ? "," : "", t->nics[x->nics[i]].name);
    why_str(t, x, why, sizeof(why));
    printf("gpu %-3d %-13s NUMA %2d  -> %-16s %s: %s\n", g, x->bus_id[0] ? x->bus_id : "-", x->numa,
           len ? list : "(all devices)", tpx_topo_why_str(x->why), why);
    for (int i = 0; i < x->nnics; i++) {
      const tpx_topo_nic_t *nic = &t->nics[x->nics[i]];
      if (x->numa >= 0 && nic->numa >= 0 && nic->numa != x->numa) {
        printf("WARNING        GPU %d is on NUMA node %d but its NIC %s on node %d: its traffic crosses "
               "the socket interconnect\n", g, x->numa, nic->name, nic->numa);
        warnings++;
      }
    }
  }
  tpx_topo_free(t);
  return warnings;
}

static int is_loopback_name(const char *name) {
  return strncmp(name, "lo", 2) == 0;
}

struct info_opts {
  const char *spec, *sysfs;
  char *gpu_ids;
};

/* 0, or the exit status: 0 after --help, 2 on bad usage (-1: go on). */
static int parse_args(int argc, char **argv, struct info_opts *o) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--sysfs") == 0 && i + 1 < argc) {
      o->sysfs = argv[++i];
    } else if (strcmp(argv[i], "--gpu-bus-ids") == 0 && i + 1 < argc) {
      o->gpu_ids = argv[++i];
    } else if ((strcmp(argv[i], "--plugin") == 0 || strcmp(argv[i], "-p") == 0) && i + 1 < argc) {
      o->spec = argv[++i];
    } else if (strncmp(argv[i], "--plugin=", 9) == 0) {
      o->spec = argv[i] + 9;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "tpx-info: unknown argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  return -1;
}

static void print_build(void) {
  printf("== build\n");
  printf("version        tcpx-p2p %s (library %s), wire protocol %d\n", TPX_VERSION_STRING, tpx_version(),
         TPX_TOOLS_WIRE_VERSION);
#ifdef TPX_HAVE_CUDA
  const char *cuda = "yes";
#else
  const char *cuda = "no (host memory only)";
#endif
  printf("features       CUDA %s; etcd rendezvous %s; NIXL backend %s\n", cuda,
         tpx_rdv_supported() ? "yes" : "no (libcurl, jansson)", TPX_TOOLS_NIXL ? "built" : "not built");
  printf("\n");
}

static void print_transport(const tpx_net_t *net) {
  const char *file = tpx_net_plugin_file(net);
  printf("name           %s\n", net->name);
  if (net->caps.builtin)
    printf("ncclNet ABI    (built in, not loaded through the plugin ABI)\n");
  else
    printf("ncclNet ABI    v%d\n", net->abi_version);
  printf("file           %s\n", file ? file : "(part of this program)");
  const tpx_net_caps_t *caps = &net->caps;
  printf("requests/comm  %d%s\n", caps->max_requests,
         caps->max_requests == TPX_NET_TCPX_MAX_REQUESTS ? " (the TCPX plugin's limit)" : "");
  printf("receives       %s\n", caps->unpack ? "UNPACK: into bounce pages, unpacked by the caller"
                                             : "into the posted buffer");
  printf("pointers       %s%s%s\n", caps->host_ptr ? "HOST " : "", caps->cuda_ptr ? "CUDA " : "",
         caps->host_ptr || caps->cuda_ptr ? "(every device)" : "none common to every device");
  printf("iflush         %s\n", caps->flush ? "yes" : "no");
  printf("iovecs         %s\n",
         caps->iov ? "yes: a packed chunk is one request over its blocks, no copy"
                   : "no: packed chunks go through the pack ring (a copy on each side)");
}

/* One warning line; the enclosing function counts them in `warnings`. */
#define WARNF(...) (printf("WARNING        " __VA_ARGS__), putchar('\n'), warnings++)

/* What the devices section saw, for the checks. */
struct dev_seen {
  int ndev, any_unpack, any_cuda;
};

static int print_device(tpx_net_t *net, int d, struct dev_seen *seen) {
  int warnings = 0;
  tpx_net_props_t p;
  if (net->ops->get_properties(net, d, &p) != 0) {
    printf("[%d] error: %s\n", d, tpx_last_error());
    return 0;
  }
  char pb[32], mp[32], mc[32];
  char ad[256];
  printf("[%d] %s\n", d, p.name);
  if (if_nametoindex(p.name) != 0)
    printf("    address        %s\n", if_addrs(p.name, ad, sizeof(ad))[0] ? ad : "(none: no IP address)");
  printf("    pci path       %s\n", p.pci_path[0] ? p.pci_path : "(none: virtual interface)");
  printf("    guid           0x%llx\n", (unsigned long long)p.guid);
  printf("    pointers       %s\n", ptr_str(p.ptr_support, pb, sizeof(pb)));
  printf("    speed          %d Mbps\n", p.speed_mbps);
  printf("    port           %d\n", p.port);
  printf("    latency        %.1f us\n", (double)p.latency_us);
  printf("    max comms      %d\n", p.max_comms);
  printf("    max recvs      %d (buffers per grouped receive)\n", p.max_recvs);
  if (p.dev_type == TPX_NET_DEV_UNPACK)
    printf("    device offload UNPACK v%d\n", p.dev_version);
  else
    printf("    device offload none (HOST)\n");
  printf("    reg is global  %s\n", p.reg_is_global ? "yes" : "no");
  printf("    force flush    %s\n", p.force_flush ? "yes" : "no");
  printf("    max p2p bytes  %s\n", bytes_str(p.max_p2p_bytes, mp, sizeof(mp)));
  printf("    max coll bytes %s\n", bytes_str(p.max_coll_bytes, mc, sizeof(mc)));
  if (p.rail_id >= 0 || p.plane_id >= 0)
    printf("    rail / plane   %d / %d\n", p.rail_id, p.plane_id);
  if (p.dev_type == TPX_NET_DEV_UNPACK) {
    seen->any_unpack = 1;
    /* Real devmem plugins only: the built-in transport's emulation works anywhere. */
    if (is_loopback_name(p.name) && strcmp(net->name, "tpx") != 0)
      WARNF(
          "device %d (%s) is loopback but the plugin offloads receives (UNPACK): devmem TCP does "
          "not work over loopback (the receiver fails with \"rx no cmsg\"); use two nodes",
          d, p.name);
  }
  if (p.ptr_support & TPX_PTR_CUDA) seen->any_cuda = 1;
  /* The plugin's CUDA regMr does strrchr() on the NIC's PCI path unchecked
   * (docs/A3HIGH.md, "Verified against the plugin's code"). */
  if ((p.ptr_support & TPX_PTR_CUDA) && p.pci_path[0] == '\0' && tpx_net_is_tcpx(net) &&
      strcmp(net->name, "tpx") != 0)
    WARNF("device %d (%s) has no PCI path: the GPUDirect-TCPX plugin would crash registering GPU memory on "
          "it, so the engine refuses GPU memory there, and host receives, which land through a GPU region",
          d, p.name);
  return warnings;
}

static int print_devices(tpx_net_t *net, struct dev_seen *seen) {
  int warnings = 0;
  if (net->ops->devices(net, &seen->ndev) != 0) {
    printf("error          devices: %s\n", tpx_last_error());
    seen->ndev = 0;
  }
  printf("\n== devices (%d)\n", seen->ndev);
  for (int d = 0; d < seen->ndev; d++) warnings += print_device(net, d, seen);
  return warnings;
}

static int print_tcpx_env(const tpx_net_t *net) {
  int warnings = 0;
  if (!tpx_net_is_tcpx(net)) return 0;
  /* The loader (or the emulation) filled in what was unset before init. */
  printf("\n== GPUDirect-TCPX plugin environment (docs/CONFIG.md)\n");
  tpx_net_env_t r;
  for (int i = 0; tpx_net_tcpx_env(i, &r) == 0; i++) {
    printf("%-30s %s%s\n", r.name, r.value ? r.value : "(unset)", r.set_by_us ? "  (was unset: set by tpx-p2p)" : "");
    if (r.danger) WARNF("%s=%s: %s; use %s", r.name, r.value ? r.value : "(unset)", r.danger, r.safe);
  }
  return warnings;
}

/* The checks section; `warnings` so far. Returns the exit status: 1 when a
 * setting of the environment was rejected (env_why says which). */
static int print_checks(const tpx_net_t *net, const tpx_config_t *cfg, const struct dev_seen *seen, int warnings,
                        const char *env_why) {
  printf("\n== checks\n");
  if (seen->ndev == 0)
    WARNF("no devices: nothing can be sent (check TPX_SOCKET_IFNAME / the plugin's NIC list)");
  if (net->abi_version == 7 || net->abi_version == 8)
    printf("note           ncclNet v%d takes int sizes: at most 2 GiB - 1 per request%s\n",
           net->abi_version, net->abi_version == 7 ? " and per registration" : "");
  if (cfg->window > net->caps.max_requests)
    WARNF("TPX_WINDOW=%d but this transport allows %d requests per comm (the engine caps it)",
          cfg->window, net->caps.max_requests);
#ifndef TPX_HAVE_CUDA
  if (seen->any_cuda || seen->any_unpack)
    WARNF("the transport takes GPU memory but this build has no CUDA support: host memory only");
#endif
  if (net->caps.builtin && cfg->socket_ifname[0] == '\0')
    printf("note           TPX_SOCKET_IFNAME unset: NCCL's default choice (docs/CONFIG.md); the devices above are what it picked\n");
  int failed = env_why != NULL;
  if (failed) printf("ERROR          a setting of the environment was rejected and is not in effect: %s\n", env_why);
  if (warnings == 0 && !failed) printf("ok             no warnings\n");
  return failed;
}

int main(int argc, char **argv) {
  if (tool_version_asked(argc, argv, "tpx-info")) return 0;
  struct info_opts o = {0};
  int st = parse_args(argc, argv, &o);
  if (st >= 0) return st;
  const tpx_config_t *cfg = tpx_config_global();
  const char *shown = o.spec ? o.spec : cfg->net_plugin;
  /* The environment again, for its verdict: a rejected setting was warned
   * about once (above the report) and the engine runs without it. */
  tpx_config_t env_cfg;
  int env_rc = tpx_config_from_env(&env_cfg);
  char env_why[512];
  snprintf(env_why, sizeof(env_why), "%s", env_rc ? tpx_last_error() : "");

  print_build();
  printf("== transport\n");
  printf("requested      %s%s\n", shown[0] ? shown : "(built-in)", o.spec ? "  (--plugin)" : "  (TPX_NET_PLUGIN)");
  tpx_net_t *net = NULL;
  int rc = tpx_net_open(o.spec, &net);
  if (rc != 0) {
    printf("error          %s\n", tool_error(rc));
    printf("\n== configuration\n");
    tpx_config_print(cfg, stdout);
    return 1;
  }
  print_transport(net);
  struct dev_seen seen = {0};
  int warnings = print_devices(net, &seen);
  warnings += print_topology(net, seen.ndev, o.sysfs, o.gpu_ids);
  warnings += print_tcpx_env(net);
  int failed = print_checks(net, cfg, &seen, warnings, env_rc ? env_why : NULL);
  printf("\n== configuration\n");
  tpx_config_print(cfg, stdout);
  tpx_net_close(net);
  return failed;
}
