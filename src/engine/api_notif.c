/* The public notification API (include/tpx/endpoint.h, third part). Where a
 * notification waits for its data: notif.c. */
#include <stdint.h>

#include "common/error.h"
#include "common/util.h"
#include "engine/control.h"
#include "engine/core.h"
#include "engine/fail.h"
#include "engine/notif.h"
#include "engine/peer.h"
#include "engine/progress.h"
#include "engine/start.h"

int tpx_notify(tpx_peer_t *p, const void *msg, size_t len) {
  if (!p || (len && !msg)) return tpx_err(TPX_EINVAL, "tpx_notify: NULL argument");
  if (len > TPX_NOTIF_MAX) return tpx_err(TPX_EINVAL, "tpx_notify: %zu bytes exceeds %d", len, TPX_NOTIF_MAX);
  tpx_endpoint_t *ep = p->ep;
  pthread_mutex_lock(&ep->lock);
  int rc = p->state == P_READY ? 0
           : tpx_err(p->err ? p->err : TPX_EUSAGE, "tpx_notify: peer %s is not connected: %s", p->where, p->errmsg);
  if (rc == 0 && p->start_head) (void)tpx__start_deferred(p); /* writes posted before it go first */
  if (rc == 0 && (rc = tpx__ctl_send(p, tpx__wire_put_notif(&p->out, msg, (uint32_t)len))) != 0) {
    tpx__peer_fail(p, rc, "peer %s: notification not sent: %s", p->where, tpx_last_error());
    rc = tpx_err_quiet(rc, "tpx_notify: peer %s: %s", p->where, p->errmsg);
  }
  pthread_mutex_unlock(&ep->lock);
  if (rc == 0) tpx__ep_wake(ep);
  return rc;
}

int tpx_get_notif(tpx_endpoint_t *ep, tpx_notif_t *out) {
  if (!ep || !out) return tpx_err(TPX_EINVAL, "tpx_get_notif: NULL argument");
  pthread_mutex_lock(&ep->lock);
  if (!ep->thread_on && !ep->notif_head) (void)tpx__ep_pass(ep);
  int r = tpx__notif_pop(ep, out);
  pthread_mutex_unlock(&ep->lock);
  return r;
}

static int notif_ready(tpx_endpoint_t *ep, void *arg) {
  (void)arg;
  return ep->notif_head != NULL;
}

int tpx_wait_notif(tpx_endpoint_t *ep, int timeout_ms, tpx_notif_t *out) {
  if (!ep || !out) return tpx_err(TPX_EINVAL, "tpx_wait_notif: NULL argument");
  uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : tpx__now_ns() + tpx__ms_to_ns(timeout_ms);
  pthread_mutex_lock(&ep->lock);
  int r = 0;
  if (tpx__ep_wait(ep, notif_ready, NULL, deadline)) r = tpx__notif_pop(ep, out);
  pthread_mutex_unlock(&ep->lock);
  return r;
}
