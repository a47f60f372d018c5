/* The public endpoint API (include/tpx/endpoint.h, first part): create and
 * destroy, the transport it opens, accessors, caller-driven progress. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/error.h"
#include "common/hmac.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/abandon.h"
#include "engine/control.h"
#include "ncclnet/loader.h"
#include "engine/core.h"
#include "engine/fail.h"
#include "engine/gpu/gpu_path.h"
#include "engine/listen.h"
#include "engine/mem.h"
#include "engine/notif.h"
#include "engine/op.h"
#include "engine/peer.h"
#include "engine/placement.h"
#include "engine/progress.h"
#include "engine/sum_stage.h"

void tpx_endpoint_params_init(tpx_endpoint_params_t *p) {
  memset(p, 0, sizeof(*p));
}

/* Open (or adopt) the transport, set up the GPU path and the window size. */
static int open_transport(tpx_endpoint_t *ep, const tpx_endpoint_params_t *params) {
  tpx_config_t *c = &ep->cfg;
  const char *plugin = params->plugin ? params->plugin : c->net_plugin;
  int rc;
  if (params->net) {
    ep->net = params->net; /* opened by tpx_net_open*: its caps are filled */
    rc = 0;
  } else if (tpx_net_spec_is_builtin(plugin)) {
    /* Our channels spread the data: the transport's sockets per comm are
     * shared among them (tpx_config_nsocks). */
    tpx_config_t tc = *c;
    tc.nsocks = tpx_config_nsocks(c, c->num_channels);
    rc = tpx_net_open_builtin(&tc, &ep->net);
    ep->own_net = rc == 0;
  } else {
    rc = tpx__net_open_abi(plugin, c->net_abi, &ep->net);
    ep->own_net = rc == 0;
  }
  if (rc) return rc;
  const tpx_net_caps_t *caps = &ep->net->caps;
  rc = ep->net->ops->devices(ep->net, &ep->ndev);
  if (rc == 0 && ep->ndev < 1) rc = tpx_err(TPX_ENOENT, "endpoint %s: transport %s has no devices", ep->name, ep->net->name);
  if (rc == 0) rc = tpx__placement_init(ep);
  if (rc) return rc;
  if (!caps->host_ptr) TPX_WARN("endpoint %s: transport %s does not take host pointers on every device", ep->name, ep->net->name);
  if ((rc = tpx__gpu_ep_init(ep)) != 0) return rc; /* GPU path; installs the unpack stage for UNPACK transports */
  if (caps->unpack && !ep->consume) {
    /* Receives would land in the transport's bounce pages, not in our buffers:
     * refuse rather than deliver garbage until the consume stage exists. */
    return tpx_err(TPX_ENOTSUP, "endpoint %s: transport %s delivers receives through bounce buffers "
                   "(UNPACK device); the engine's unpack stage comes with GPU support", ep->name, ep->net->name);
  }
  /* Every device the channels may use carries data: by default at least one
   * channel per device, whatever the CPU count set num_channels to. */
  tpx_config_t def;
  tpx_config_defaults(&def);
  int span = ep->nchdev > 0 ? ep->nchdev : ep->ndev;
  ep->nchan = c->num_channels;
  if (c->num_channels == def.num_channels && span > ep->nchan) {
    ep->nchan = span < WIRE_MAX_CHANNELS ? span : WIRE_MAX_CHANNELS;
    TPX_INFO("endpoint %s: %d channels, one per device (TPX_NUM_CHANNELS sets it)", ep->name, ep->nchan);
  }
  int limit = caps->max_requests;
  ep->window = c->window < limit ? c->window : limit;
  if (c->window > limit)
    TPX_INFO("endpoint %s: window %d capped to %d requests per comm by transport %s", ep->name, c->window,
             limit, ep->net->name);
  return 0;
}

/* epoll set, wake-up eventfd, control listener. */
static int open_io(tpx_endpoint_t *ep, const tpx_endpoint_params_t *params) {
  /* TCPX may send without MSG_NOSIGNAL: a dead peer must not kill us. */
  struct sigaction sa;
  if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  ep->epfd = epoll_create1(EPOLL_CLOEXEC);
  ep->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (ep->epfd < 0 || ep->evfd < 0)
    return tpx_err(TPX_ESYSTEM, "endpoint %s: epoll/eventfd: %s", ep->name, strerror(errno));
  struct epoll_event e = {.events = EPOLLIN, .data.ptr = &ep->evfd};
  if (epoll_ctl(ep->epfd, EPOLL_CTL_ADD, ep->evfd, &e) != 0)
    return tpx_err(TPX_ESYSTEM, "endpoint %s: epoll: %s", ep->name, strerror(errno));
  int rc;
  if (!params->no_listen && (rc = tpx__listen_open(ep, params->listen_host, params->port)) != 0) return rc;
  return 0;
}

static tpx_endpoint_t *ep_alloc(const tpx_endpoint_params_t *params) {
  tpx_endpoint_t *ep = calloc(1, sizeof(*ep));
  if (!ep) return NULL;
  ep->cfg = params->cfg ? *params->cfg : *tpx_config_global();
  ep->listen_fd = ep->epfd = ep->evfd = -1;
  ep->gpu = params->gpu;
  ep->uuid = tpx__random_u64();
  if (params->name && params->name[0]) snprintf(ep->name, sizeof(ep->name), "%s", params->name);
  else {
    char host[32] = "host";
    gethostname(host, sizeof(host) - 1);
    snprintf(ep->name, sizeof(ep->name), "%.31s:%d:%d", host, (int)getpid(), params->gpu);
  }
  pthread_mutex_init(&ep->lock, NULL);
  pthread_cond_init(&ep->cv, NULL);
  return ep;
}

int tpx_endpoint_create(const tpx_endpoint_params_t *params, tpx_endpoint_t **out) {
  if (!out) return tpx_err(TPX_EINVAL, "tpx_endpoint_create: NULL out");
  *out = NULL;
  tpx_endpoint_params_t defp;
  if (!params) {
    tpx_endpoint_params_init(&defp);
    params = &defp;
  }
  tpx_endpoint_t *ep = ep_alloc(params);
  if (!ep) return tpx_err(TPX_ENOMEM, "tpx_endpoint_create: out of memory");
  int rc = 0;
  tpx_config_t *c = &ep->cfg;
  /* The environment's ranges for every field (tpx_config_check), then the
   * wire's limits. */
  if ((rc = tpx_config_check(c)) != 0) goto fail;
  ep->ncpu = tpx__cpu_count();
  if (c->num_channels > WIRE_MAX_CHANNELS || c->chunk_bytes > WIRE_MAX_CHUNK) {
    rc = tpx_err(TPX_EINVAL, "tpx_endpoint_create: configuration out of range (channels %d, chunk %zu)",
                 c->num_channels, c->chunk_bytes);
    goto fail;
  }
  if ((rc = open_transport(ep, params)) != 0 || (rc = open_io(ep, params)) != 0) goto fail;
  if (c->auth_key_len && !(ep->net->ops->listen_keyed && ep->net->ops->connect_keyed))
    TPX_WARN("endpoint %s: the key (TPX_AUTH_KEY) authenticates peers' control connections; transport %s "
             "makes its own data connections, which are not bound to it (docs/SECURITY.md)",
             ep->name, ep->net->name);
  if (c->encrypt && !(ep->net->ops->listen_keyed && ep->net->ops->connect_keyed))
    TPX_WARN("endpoint %s: TPX_ENCRYPT=1 encrypts the control connection only: transport %s makes its own data "
             "connections, which this endpoint cannot encrypt (docs/SECURITY.md, \"Encryption\")",
             ep->name, ep->net->name);
  if (c->progress_thread && tpx__progress_thread_start(ep) != 0) {
    rc = tpx_err(TPX_ESYSTEM, "endpoint %s: cannot start the progress thread", ep->name);
    goto fail;
  }
  TPX_INFO("endpoint %s: transport %s, %d device(s), %d channel(s), chunk %zu%s, window %d, port %d, %s progress",
           ep->name, ep->net->name, ep->ndev, ep->nchan, tpx__config_chunk_for(&ep->cfg, 0, 1, ep->ncpu),
           c->chunk_bytes ? "" : " (auto)", ep->window, ep->port,
           ep->thread_on ? "thread" : "caller");
  *out = ep;
  return 0;
fail:
  rc = tpx_err_surface(rc); /* transport, GPU and listen failures come quiet */
  tpx_endpoint_destroy(ep);
  return rc;
}

/* Peers, handles and lingering control sockets, lock held. */
static void close_all(tpx_endpoint_t *ep) {
  for (struct tpx_peer *p = ep->peers; p; p = p->next)
    if (p->state != P_DEAD) tpx__peer_shutdown(p, TPX_ECANCELED);
  while (ep->xfers) tpx__op_user_destroy(ep->xfers); /* handles the user did not free */
  ep->acceptq_n = 0;
  while (ep->peers) { /* peers the user did not close */
    struct tpx_peer *p = ep->peers;
    p->refs = 1;
    tpx__peer_release(p);
  }
  /* Give closing control connections a moment to see the peer's FIN. */
  for (int i = 0; i < 50 && ep->nclosing; i++) {
    tpx__ctl_closing_step(ep, tpx__now_ns(), 0);
    if (!ep->nclosing) break;
    pthread_mutex_unlock(&ep->lock);
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&ep->lock);
  }
  tpx__ctl_closing_step(ep, tpx__now_ns(), 1);
}

void tpx_endpoint_destroy(tpx_endpoint_t *ep) {
  if (!ep) return;
  tpx__progress_thread_stop(ep);
  pthread_mutex_lock(&ep->lock);
  close_all(ep);
  tpx__sum_stage_fini(ep); /* no sum reads a transfer's bytes any more */
  tpx__refused_log_flush(ep); /* refused connections counted and not logged yet */
  tpx__abandon_free_all(ep);
  if (ep->net) tpx__mem_free_all(ep);
  tpx__gpu_ep_fini(ep); /* peers and registrations are gone: streams, pools, GPU context references */
  pthread_mutex_unlock(&ep->lock);
  free(ep->slots);
  free(ep->closing);
  free(ep->acceptq);
  tpx__notif_queue_free(ep);
  if (ep->own_net) tpx_net_close(ep->net);
  if (ep->listen_fd >= 0) close(ep->listen_fd);
  if (ep->epfd >= 0) close(ep->epfd);
  if (ep->evfd >= 0) close(ep->evfd);
  pthread_cond_destroy(&ep->cv);
  pthread_mutex_destroy(&ep->lock);
  tpx__cleanse(ep->cfg.auth_key, sizeof(ep->cfg.auth_key));
  free(ep);
}

int tpx_endpoint_port(const tpx_endpoint_t *ep) { return ep ? ep->port : 0; }
const char *tpx_endpoint_name(const tpx_endpoint_t *ep) { return ep ? ep->name : ""; }
const char *tpx_endpoint_transport(const tpx_endpoint_t *ep) { return ep && ep->net ? ep->net->name : ""; }

int tpx_progress(tpx_endpoint_t *ep) {
  if (!ep) return tpx_err(TPX_EINVAL, "tpx_progress: NULL");
  pthread_mutex_lock(&ep->lock);
  (void)tpx__ep_pass(ep);
  pthread_mutex_unlock(&ep->lock);
  return 0;
}
