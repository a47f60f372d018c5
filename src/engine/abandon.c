/* Connects a closing channel leaves behind (abandon.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/hmac.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/abandon.h"
#include "engine/core.h"
#include "engine/gpu/gpu_path.h"
#include "engine/peer.h"

struct abandoned {
  struct abandoned *next;
  struct tpx__dial_buf *dial;
  int dev;
  int keyed;
  uint8_t key[TPX_NET_KEY_BYTES];
  uint64_t deadline;
  char where[96];
};

static void entry_free(struct abandoned *a) {
  free(a->dial);
  tpx__cleanse(a->key, sizeof(a->key));
  free(a);
}

void tpx__abandon_connect(struct tpx_peer *p, struct tpx__channel *ch) {
  tpx_endpoint_t *ep = p->ep;
  tpx_net_t *net = ep->net;
  if (net->ops->connect_abort) {
    int rc = net->ops->connect_abort(net, ch->dial->handle);
    if (rc) TPX_WARN("peer %s channel %d: giving up its connect failed: %s", p->where, ch->idx, tpx_last_error());
    ch->dial->started = 0;
    return;
  }
  struct abandoned *a = calloc(1, sizeof(*a));
  if (!a) { /* the transport keeps the connect; nothing here can end it */
    TPX_WARN("peer %s channel %d: out of memory: its connect in progress is left to the transport", p->where,
             ch->idx);
    return;
  }
  const uint8_t *key = p->net_key;
  a->keyed = key != NULL;
  if (key) memcpy(a->key, key, sizeof(a->key));
  a->dial = ch->dial; /* the transport's buffer stays where it was */
  ch->dial = NULL;
  a->dev = ch->dev;
  a->deadline = tpx__now_ns() + tpx__ms_to_ns(ep->cfg.connect_timeout_ms);
  snprintf(a->where, sizeof(a->where), "%.80s channel %d", p->where, ch->idx);
  a->next = ep->abandoned;
  ep->abandoned = a;
}

/* One more call: 1 when the connect ended (its comm closed, or it failed). */
static int drive(tpx_endpoint_t *ep, struct abandoned *a, uint64_t now) {
  tpx_net_t *net = ep->net;
  void *comm = NULL;
  int rc = a->keyed ? net->ops->connect_keyed(net, a->dev, a->key, a->dial->handle, &comm, &a->dial->dev)
                    : net->ops->connect(net, a->dev, a->dial->handle, &comm, &a->dial->dev);
  if (rc) {
    TPX_DEBUG("%s: abandoned connect ended: %s", a->where, tpx_last_error());
    return 1;
  }
  if (comm) {
    if ((rc = net->ops->close_send(net, comm)) != 0)
      TPX_WARN("%s: closing the comm of an abandoned connect failed: %s", a->where, tpx_strerror(rc));
    return 1;
  }
  if (now <= a->deadline) return 0;
  TPX_WARN("%s: the transport's connect did not end within TPX_CONNECT_TIMEOUT_MS after its channel closed; "
           "left to the transport", a->where);
  return 1;
}

void tpx__abandon_step(tpx_endpoint_t *ep, uint64_t now) {
  struct tpx__gpu_bind b;
  if (tpx__gpu_bind_enter(ep, -1, &b) != 0) return; /* as channel connects: the plugin binds to the current GPU */
  for (struct abandoned **pp = &ep->abandoned; *pp;) {
    struct abandoned *a = *pp;
    if (!drive(ep, a, now)) {
      pp = &a->next;
      continue;
    }
    *pp = a->next;
    entry_free(a);
  }
  tpx__gpu_bind_leave(&b);
}

void tpx__abandon_free_all(tpx_endpoint_t *ep) {
  while (ep->abandoned) {
    struct abandoned *a = ep->abandoned;
    ep->abandoned = a->next;
    TPX_DEBUG("%s: endpoint destroyed with its abandoned connect in progress", a->where);
    entry_free(a);
  }
}
