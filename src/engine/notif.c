/* Notifications (notif.h): where a notification waits for its data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "engine/endpoint.h"
#include "engine/notif.h"
#include "engine/op.h"
#include "engine/peer.h"

void tpx__notif_deliver(tpx_endpoint_t *ep, struct tpx_peer *p, const uint8_t *msg, uint32_t len) {
  struct notif_node *n = malloc(sizeof(*n));
  if (!n) {
    TPX_ERROR("endpoint %s: out of memory: notification from %s lost", ep->name, p->where);
    return;
  }
  n->next = NULL;
  n->n.peer = p;
  snprintf(n->n.peer_name, sizeof(n->n.peer_name), "%s", p->name);
  n->n.len = len;
  if (len) memcpy(n->n.msg, msg, len);
  if (ep->notif_tail) ep->notif_tail->next = n;
  else ep->notif_head = n;
  ep->notif_tail = n;
  ep->notif_n++;
  tpx__ep_signal(ep);
}

int tpx__notif_pop(tpx_endpoint_t *ep, tpx_notif_t *out) {
  struct notif_node *n = ep->notif_head;
  if (!n) return 0;
  ep->notif_head = n->next;
  if (!ep->notif_head) ep->notif_tail = NULL;
  ep->notif_n--;
  memcpy(out, &n->n, offsetof(tpx_notif_t, msg) + n->n.len);
  free(n);
  return 1;
}

void tpx__notif_queue_free(tpx_endpoint_t *ep) {
  while (ep->notif_head) {
    struct notif_node *n = ep->notif_head;
    ep->notif_head = n->next;
    free(n);
  }
  ep->notif_tail = NULL;
  ep->notif_n = 0;
}

void tpx__notif_fifo_push(struct tpx_peer *p, struct op *o) {
  o->qnext = NULL;
  o->in_fifo = 1;
  if (p->fifo_tail) p->fifo_tail->qnext = o;
  else p->fifo_head = o;
  p->fifo_tail = o;
}

struct op *tpx__notif_fifo_pop(struct tpx_peer *p) {
  struct op *o = p->fifo_head;
  if (!o) return NULL;
  p->fifo_head = o->qnext;
  if (!p->fifo_head) p->fifo_tail = NULL;
  return o;
}

struct op *tpx__notif_fifo_pop_done(struct tpx_peer *p) {
  if (!p->fifo_head || p->fifo_head->phase != PH_FINAL) return NULL;
  struct op *o = tpx__notif_fifo_pop(p);
  if (o->has_notif) {
    if (o->err == 0) tpx__notif_deliver(p->ep, p, o->notif, o->notif_len);
    else TPX_WARN("peer %s: notification of a failed %s dropped", p->where, tpx__op_kind_name(o->kind));
  }
  return o;
}
