/* The built-in TCP transport: open/destroy, devices, properties, memory
 * registration, and the ops tables: the top of src/sock/, which no file
 * below it calls (a net is known as ours by its devices entry, handles.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/hmac.h"
#include "common/ifname.h"
#include "common/log.h"
#include "common/util.h"
#include "cuda/gpu.h"
#include "net/caps.h"
#include "sock/sock.h"
#include "tcpx/plugin_env.h"

/* Reported when /sys/class/net/<if>/speed is missing or invalid (lo, many
 * virtual NICs): a 10 Gbps guess is what NCCL's socket transport uses too. */
#define DEFAULT_SPEED_MBPS 10000

/* ---- discovery ------------------------------------------------------------------ */

static void read_pci_path(const char *ifname, char *out, size_t cap) {
  char path[128], real[PATH_MAX];
  out[0] = '\0';
  snprintf(path, sizeof(path), "/sys/class/net/%s/device", ifname);
  if (realpath(path, real) != NULL && strlen(real) < cap) memcpy(out, real, strlen(real) + 1);
}

static int read_speed(const char *ifname) {
  char path[128], buf[32];
  snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname);
  FILE *f = fopen(path, "r");
  int speed = -1;
  if (f != NULL) {
    if (fgets(buf, sizeof(buf), f) != NULL) speed = atoi(buf);
    fclose(f);
  }
  if (speed <= 0) {
    TPX_DEBUG("sock: %s reports no link speed; assuming %d Mbps", ifname, DEFAULT_SPEED_MBPS);
    speed = DEFAULT_SPEED_MBPS;
  }
  return speed;
}

/* Nothing selected: the error names the variable and what exists. Frees
 * all and sel. */
static int none_selected(const tpx_sock_net_t *sn, int family, tpx_sock_ifaddr_t *all, int k, tpx_sock_ifaddr_t *sel) {
  const char *names[64];
  int n = 0;
  for (int i = 0; i < k && n < 64; i++)
    if (all[i].up && (family == 0 || all[i].addr.ss_family == family)) names[n++] = all[i].name;
  char msg[768];
  tpx__ifname_none(sn->cfg.socket_ifname, 0,
                   family == AF_INET    ? "up with an IPv4 address"
                   : family == AF_INET6 ? "up with an IPv6 address"
                                        : "up with an address",
                   names, n, msg, sizeof(msg));
  free(all);
  free(sel);
  return tpx_err_quiet(TPX_ENOENT, "sock: %s", msg);
}

static int discover(tpx_sock_net_t *sn) {
  int family = tpx__sock_parse_family(sn->cfg.socket_family);
  if (family < 0) return family;
  struct ifaddrs *ifa = NULL;
  if (getifaddrs(&ifa) != 0) return tpx_err_quiet(TPX_ESYSTEM, "sock: getifaddrs: %s", strerror(errno));
  int n = 0;
  for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
    n++;
  tpx_sock_ifaddr_t *all = calloc((size_t)n + 1, sizeof(*all));
  tpx_sock_ifaddr_t *sel = calloc(TPX_SOCK_MAX_DEVS, sizeof(*sel));
  if (all == NULL || sel == NULL) {
    free(all);
    free(sel);
    freeifaddrs(ifa);
    return tpx_err_quiet(TPX_ENOMEM, "sock: out of memory listing interfaces");
  }
  int k = 0;
  for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
    if (i->ifa_addr == NULL || i->ifa_name == NULL) continue;
    int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (strlen(i->ifa_name) >= TPX_SOCK_IFNAMSIZ) continue;
    tpx_sock_ifaddr_t *a = &all[k++];
    snprintf(a->name, sizeof(a->name), "%s", i->ifa_name);
    a->up = (i->ifa_flags & IFF_UP) != 0 && (i->ifa_flags & IFF_RUNNING) != 0;
    a->loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    memcpy(&a->addr, i->ifa_addr,
           fam == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
  }
  freeifaddrs(ifa);
  int cnt = tpx__sock_select(sn->cfg.socket_ifname, family, all, k, sel, TPX_SOCK_MAX_DEVS);
  if (cnt == 0) return none_selected(sn, family, all, k, sel);
  free(all);
  if (cnt < 0) {
    free(sel);
    return cnt;
  }
  for (int i = 0; i < cnt; i++) {
    tpx_sock_dev_t *d = &sn->devs[i];
    snprintf(d->name, sizeof(d->name), "%s", sel[i].name);
    d->addr = sel[i].addr;
    if (d->addr.ss_family == AF_INET6) {
      struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&d->addr;
      s6->sin6_port = 0;
      if (!IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) s6->sin6_scope_id = 0;
    } else {
      ((struct sockaddr_in *)&d->addr)->sin_port = 0;
    }
    read_pci_path(d->name, d->pci_path, sizeof(d->pci_path));
    d->speed_mbps = read_speed(d->name);
    pthread_mutex_init(&d->pool_mu, NULL);
    char as[80];
    tpx__sock_addr_str(&d->addr, as, sizeof(as));
    TPX_INFO("sock: device %d = %s (%s), %d Mbps%s%s", i, d->name, as, d->speed_mbps,
             d->pci_path[0] ? ", " : "", d->pci_path);
  }
  sn->ndev = cnt;
  free(sel);
  return 0;
}

/* ---- ops -------------------------------------------------------------------------- */

static int check_dev(tpx_sock_net_t *sn, int dev, const char *fn) {
  if (dev < 0 || dev >= sn->ndev)
    return tpx_err_quiet(TPX_EINVAL, "%s: device %d does not exist (%d devices)", fn, dev, sn->ndev);
  return 0;
}

static int sock_get_properties(tpx_net_t *net, int dev, tpx_net_props_t *props) {
  tpx_sock_net_t *sn = tpx__sock_net_of(net, "getProperties");
  if (sn == NULL) return TPX_EINVAL;
  int rc = check_dev(sn, dev, "getProperties");
  if (rc != 0) return rc;
  if (props == NULL) return tpx_err_quiet(TPX_EINVAL, "getProperties: props is NULL");
  tpx_sock_dev_t *d = &sn->devs[dev];
  memset(props, 0, sizeof(*props));
  snprintf(props->name, sizeof(props->name), "%s", d->name);
  snprintf(props->pci_path, sizeof(props->pci_path), "%s", d->pci_path);
  props->guid = (uint64_t)dev;
  props->ptr_support = TPX_PTR_HOST;
  /* Unpack mode: CUDA memory too when a GPU is usable (sends are staged
   * through pinned memory; receives never touch the buffer). */
  if (sn->unpack && sn->gpu_ok) props->ptr_support |= TPX_PTR_CUDA;
  /* Memory handles are not tied to a comm (see regMr). */
  props->reg_is_global = 1;
  props->force_flush = 0;
  props->speed_mbps = d->speed_mbps;
  props->port = 0;
  props->latency_us = 0; /* not measured; NCCL's socket transport reports 0 too */
  props->max_comms = TPX_SOCK_MAX_OBJECTS;
  props->max_recvs = 1;
  props->dev_type = TPX_NET_DEV_HOST;
  props->dev_version = 0;
  props->max_p2p_bytes = TPX_SOCK_MAX_MSG;
  props->max_coll_bytes = TPX_SOCK_MAX_MSG;
  props->rail_id = -1;
  props->plane_id = -1;
  if (sn->unpack) {
    props->dev_type = TPX_NET_DEV_UNPACK;
    props->dev_version = TPX_TCPX_DEV_VERSION;
    props->max_p2p_bytes = TPX_SOCK_UNPACK_MAX_MSG;
    props->max_coll_bytes = TPX_SOCK_UNPACK_MAX_MSG;
  }
  return 0;
}

static int mr_comm_check(tpx_sock_net_t *sn, void *comm, const char *fn) {
  int kind = TPX_SK_NONE;
  void *obj = tpx__sock_reg_get(&sn->reg, (uint64_t)(uintptr_t)comm, TPX_SK_NONE, &kind);
  if (obj != NULL && (kind == TPX_SK_SEND || kind == TPX_SK_RECV)) return 0;
  if (obj != NULL) return tpx_err_quiet(TPX_EINVAL, "%s: handle %p is not a send or recv comm", fn, comm);
  return tpx_err_quiet(TPX_EINVAL, "%s: comm %p is not open (closed, NULL, or not from this transport)",
                 fn, comm);
}

/* Unpack mode, regMr of CUDA memory: the TCPX plugin's rules (4 KiB aligned)
 * and a check that it is GPU memory, whose GPU the send path needs. */
static int cuda_region(void *data, size_t size, int *gpu) {
  if (data == NULL) return tpx_err_quiet(TPX_EINVAL, "regMr: NULL CUDA buffer");
  if ((uintptr_t)data % TPX_SOCK_PAGE != 0)
    return tpx_err_quiet(TPX_EINVAL,
                   "regMr: CUDA buffer %p is not 4 KiB aligned; the TCPX contract (unpack mode)"
                   " registers GPU memory on 4 KiB boundaries",
                   data);
  tpx_gpu_ptr_info_t info;
  int rc = tpx__gpu_ptr_query(data, &info);
  if (rc != 0) return tpx_err_quiet(rc, "regMr: querying %p: %s", data, tpx_last_error());
  if (info.mem != TPX_GPU_MEM_DEVICE && info.mem != TPX_GPU_MEM_MANAGED)
    return tpx_err_quiet(TPX_EINVAL, "regMr: %p registered as CUDA memory is %s memory", data,
                   info.mem == TPX_GPU_MEM_PINNED ? "pinned host" : "host");
  if (info.base != NULL && info.size > 0 &&
      ((uintptr_t)data - (uintptr_t)info.base > info.size ||
       size > info.size - ((uintptr_t)data - (uintptr_t)info.base)))
    return tpx_err_quiet(TPX_EINVAL, "regMr: CUDA region %p + %zu runs past its allocation %p + %zu",
                   data, size, info.base, info.size);
  *gpu = info.dev >= 0 ? info.dev : 0; /* managed memory may name no GPU: any context copies it */
  return 0;
}

static int sock_reg_mr(tpx_net_t *net, void *comm, void *data, size_t size, int type,
                       void **mhandle) {
  tpx_sock_net_t *sn = tpx__sock_net_of(net, "regMr");
  if (sn == NULL) return TPX_EINVAL;
  if (mhandle == NULL) return tpx_err_quiet(TPX_EINVAL, "regMr: mhandle pointer is NULL");
  *mhandle = NULL;
  int rc = mr_comm_check(sn, comm, "regMr");
  if (rc != 0) return rc;
  int cuda_ok = type == TPX_PTR_CUDA && sn->unpack && sn->gpu_ok;
  if ((type == TPX_PTR_CUDA && !cuda_ok) || type == TPX_PTR_DMABUF)
    return tpx_err_quiet(TPX_ENOTSUP, "regMr: %s memory is not supported by the built-in transport%s",
                   type == TPX_PTR_CUDA ? "CUDA" : "DMA-BUF",
                   type == TPX_PTR_CUDA ? (sn->unpack ? " (unpack mode, but no usable GPU)"
                                                      : " (host memory only; CUDA memory needs"
                                                        " TPX_SOCK_UNPACK=1 and a GPU)")
                                        : "");
  if (type != TPX_PTR_HOST && type != TPX_PTR_CUDA)
    return tpx_err_quiet(TPX_EINVAL, "regMr: unknown memory type %d", type);
  if (data == NULL && size > 0) return tpx_err_quiet(TPX_EINVAL, "regMr: NULL buffer of %zu bytes", size);
  if (size > 0 && (uintptr_t)data + size < (uintptr_t)data)
    return tpx_err_quiet(TPX_EINVAL, "regMr: region %p + %zu wraps the address space", data, size);
  int gpu = -1;
  if (type == TPX_PTR_CUDA && (rc = cuda_region(data, size, &gpu)) != 0) return rc;
  tpx_sock_mr_t *mr = calloc(1, sizeof(*mr));
  if (mr == NULL) return tpx_err_quiet(TPX_ENOMEM, "regMr: out of memory");
  mr->base = data;
  mr->size = size;
  mr->type = type;
  mr->gpu = gpu;
  uint64_t tok = tpx__sock_reg_add(&sn->reg, TPX_SK_MR, mr);
  if (tok == 0) {
    free(mr);
    return tpx_err_quiet(TPX_ENOMEM, "regMr: more than %d open handles", TPX_SOCK_MAX_OBJECTS);
  }
  *mhandle = (void *)(uintptr_t)tok;
  return 0;
}

static int sock_dereg_mr(tpx_net_t *net, void *comm, void *mhandle) {
  tpx_sock_net_t *sn = tpx__sock_net_of(net, "deregMr");
  if (sn == NULL) return TPX_EINVAL;
  int rc = mr_comm_check(sn, comm, "deregMr");
  if (rc != 0) return rc;
  int kind = TPX_SK_NONE;
  tpx_sock_mr_t *mr = tpx__sock_reg_get(&sn->reg, (uint64_t)(uintptr_t)mhandle, TPX_SK_MR, &kind);
  if (mr == NULL)
    return tpx_err_quiet(TPX_EINVAL, "deregMr: %p is not a registered memory handle (%s)", mhandle,
                   kind != TPX_SK_NONE ? "wrong kind of handle"
                                       : "unknown or already deregistered");
  tpx__sock_reg_del(&sn->reg, (uint64_t)(uintptr_t)mhandle);
  free(mr);
  return 0;
}

/* Unpack mode: the same handle serves the device side (nothing to map: the
 * GPU never addresses the transport's view of the memory). */
static int sock_get_device_mr(tpx_net_t *net, void *comm, void *mhandle, void **dptr_mhandle) {
  tpx_sock_net_t *sn = tpx__sock_net_of(net, "getDeviceMr");
  if (sn == NULL) return TPX_EINVAL;
  if (dptr_mhandle == NULL) return tpx_err_quiet(TPX_EINVAL, "getDeviceMr: dptr_mhandle is NULL");
  *dptr_mhandle = NULL;
  int rc = mr_comm_check(sn, comm, "getDeviceMr");
  if (rc != 0) return rc;
  int kind = TPX_SK_NONE;
  if (tpx__sock_reg_get(&sn->reg, (uint64_t)(uintptr_t)mhandle, TPX_SK_MR, &kind) == NULL)
    return tpx_err_quiet(TPX_EINVAL, "getDeviceMr: %p is not a registered memory handle (%s)", mhandle,
                   kind != TPX_SK_NONE ? "wrong kind of handle" : "unknown or deregistered");
  *dptr_mhandle = mhandle;
  return 0;
}

static void sock_destroy(tpx_net_t *net) {
  tpx_sock_net_t *sn = tpx__sock_net_of(net, "destroy");
  if (sn == NULL) return;
  uint32_t it = 0;
  uint64_t tok;
  int left[6] = {0};
  while ((tok = tpx__sock_reg_next(&sn->reg, &it)) != 0) {
    int kind = TPX_SK_NONE;
    void *obj = tpx__sock_reg_get(&sn->reg, tok, TPX_SK_NONE, &kind);
    if (obj == NULL) continue;
    tpx__sock_reg_del(&sn->reg, tok);
    if (kind >= 0 && kind < 6) left[kind]++;
    switch (kind) {
    case TPX_SK_SEND:
    case TPX_SK_RECV: tpx__sock_comm_destroy(obj); break;
    case TPX_SK_LISTEN: tpx__sock_listen_free(obj); break;
    case TPX_SK_CONNECT: tpx__sock_connect_free(obj); break;
    case TPX_SK_MR: free(obj); break;
    default: break;
    }
  }
  if (left[TPX_SK_SEND] + left[TPX_SK_RECV] + left[TPX_SK_LISTEN] + left[TPX_SK_CONNECT] > 0)
    TPX_DEBUG("sock: destroy closed %d send, %d recv, %d listen comms and %d connects left open",
              left[TPX_SK_SEND], left[TPX_SK_RECV], left[TPX_SK_LISTEN], left[TPX_SK_CONNECT]);
  for (int i = 0; i < sn->ndev; i++) {
    tpx_sock_dev_t *d = &sn->devs[i];
    tpx__sock_pool_destroy(d->pool); /* NULL unless a comm leaked out of the table */
    d->pool = NULL;
    pthread_mutex_destroy(&d->pool_mu);
  }
  tpx__sock_ready_fini(&sn->ready);
  tpx__sock_reg_fini(&sn->reg);
  tpx__cleanse(sn->plugin_key, sizeof(sn->plugin_key));
  free(sn);
}

/* Entry points shared by both modes; unpack mode adds the UNPACK device's two. */
#define SOCK_OPS_COMMON                                                                            \
  .devices = tpx__sock_devices, .get_properties = sock_get_properties, .listen = tpx__sock_listen,       \
  .connect = tpx__sock_connect, .accept = tpx__sock_accept, .reg_mr = sock_reg_mr,                   \
  .dereg_mr = sock_dereg_mr, .isend = tpx__sock_isend, .irecv = tpx__sock_irecv,                     \
  .iflush = tpx__sock_iflush, .test = tpx__sock_test, .close_send = tpx__sock_close_send,             \
  .close_recv = tpx__sock_close_recv, .close_listen = tpx__sock_close_listen, .destroy = sock_destroy,     \
  .handle_dials = tpx__sock_handle_dials, .listen_keyed = tpx__sock_listen_keyed,                    \
  .connect_keyed = tpx__sock_connect_keyed, .connect_abort = tpx__sock_connect_abort

/* Plain and strict mode: strict comms refuse the vectored calls, and
 * caps.iov is 0 there (net/caps.c). */
static const tpx_net_ops_t sock_ops = {SOCK_OPS_COMMON, .isendv = tpx__sock_isendv,
                                       .irecvv = tpx__sock_irecvv};

static const tpx_net_ops_t sock_ops_unpack = {
    SOCK_OPS_COMMON,
    .get_device_mr = sock_get_device_mr,
    .irecv_consumed = tpx__sock_irecv_consumed,
};

int tpx_net_open_builtin(const tpx_config_t *cfg, tpx_net_t **out) {
  if (out == NULL) return tpx_err_quiet(TPX_EINVAL, "tpx_net_open_builtin: out is NULL");
  *out = NULL;
  if (cfg == NULL) cfg = tpx_config_global();
  if (cfg->nsocks < 0 || cfg->nsocks > TPX_SOCK_MAX_NSOCKS)
    return tpx_err_quiet(TPX_EINVAL, "sock: nsocks %d outside [1, %d] (0 = automatic)", cfg->nsocks,
                   TPX_SOCK_MAX_NSOCKS);
  if (cfg->nthreads < 1 || cfg->nthreads > TPX_SOCK_MAX_THREADS)
    return tpx_err_quiet(TPX_EINVAL, "sock: nthreads %d outside [1, %d]", cfg->nthreads,
                   TPX_SOCK_MAX_THREADS);
  if (cfg->sock_unpack &&
      (cfg->sock_bounce_bytes < TPX_SOCK_UNPACK_MAX_MSG || cfg->sock_bounce_bytes > (4ull << 30)))
    return tpx_err_quiet(TPX_EINVAL,
                   "sock: bounce pool of %zu bytes outside [8 MiB, 4 GiB] (one request of 2048"
                   " pages must fit; offsets are 32-bit)",
                   cfg->sock_bounce_bytes);
  if (cfg->encrypt && cfg->auth_key_len == 0)
    return tpx_err_quiet(TPX_EINVAL, "sock: TPX_ENCRYPT=1 needs the shared key: set TPX_AUTH_KEY or "
                                     "TPX_AUTH_KEY_FILE (the same on every peer)");
  if (cfg->encrypt && cfg->sock_unpack)
    return tpx_err_quiet(TPX_ENOTSUP, "sock: TPX_ENCRYPT=1 with unpack mode (TPX_SOCK_UNPACK=1): the bytes land in "
                                      "bounce pages a GPU kernel reads, which no record layer checks; set one");
  tpx_sock_net_t *sn = calloc(1, sizeof(*sn));
  if (sn == NULL) return tpx_err_quiet(TPX_ENOMEM, "sock: out of memory");
  sn->cfg = *cfg;
  sn->encrypt = cfg->encrypt != 0;
  if (sn->encrypt) { /* listen / connect without a session key (NCCL's): one from the auth key */
    static const char info[] = "tpx sock plugin key v1";
    if (tpx__hkdf_sha256(cfg->auth_key, cfg->auth_key_len, NULL, 0, (const uint8_t *)info, sizeof(info) - 1,
                         sn->plugin_key, sizeof(sn->plugin_key)) != 0) {
      free(sn);
      return TPX_EINTERNAL; /* detail recorded */
    }
  }
  sn->cfg.nsocks = tpx_config_nsocks(cfg, 1);
  atomic_store(&sn->rng, tpx__random_u64());
  tpx__sock_reg_init(&sn->reg, (uint32_t)tpx__sock_random(sn) | 0x100u);
  int rc = tpx__sock_ready_init(&sn->ready);
  if (rc == 0 && (rc = discover(sn)) != 0) tpx__sock_ready_fini(&sn->ready);
  if (rc != 0) {
    tpx__sock_reg_fini(&sn->reg);
    free(sn);
    return rc;
  }
  if (cfg->sock_unpack) {
    /* Only unpack mode asks CUDA anything: HOST mode never loads the runtime. */
    int ngpu = 0;
    sn->unpack = 1;
    sn->gpu_ok = tpx__gpu_device_count(&ngpu) == 0 && ngpu > 0;
    sn->host_recv_stalls = sn->gpu_ok;
    /* The emulation stands for the plugin: its environment is filled in the
     * same way, and read the way the plugin reads it. */
    tpx__tcpx_env_apply("tpx unpack mode (GPUDirect-TCPX emulation)");
    sn->tcpx_chunk = tpx__tcpx_env_chunk();
    TPX_INFO("sock: unpack mode (TCPX receive contract), bounce pool %zu bytes per recv comm in %s",
             cfg->sock_bounce_bytes,
             sn->gpu_ok ? "pinned host memory mapped into the GPUs"
                        : "host memory (no usable GPU)");
  }
  sn->pub.ops = sn->unpack ? &sock_ops_unpack : &sock_ops;
  snprintf(sn->pub.name, sizeof(sn->pub.name), "tpx");
  sn->pub.abi_version = 0;
  sn->pub.impl = sn;
  /* Unpack mode follows the TCPX plugin's rules too (comm.c). */
  rc = tpx__net_caps_init(&sn->pub, 1, cfg->sock_strict || cfg->sock_unpack);
  if (rc != 0) {
    sock_destroy(&sn->pub);
    return rc;
  }
  *out = &sn->pub;
  return 0;
}
