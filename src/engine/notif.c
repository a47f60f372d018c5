/* Notifications (notif.h): where a notification waits for its data. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "engine/core.h"
#include "engine/notif.h"
#include "engine/peer_log.h"

/* What a held notification costs: its node with the payload, and the
 * allocator's header. A notification waiting in the FIFO for its data is
 * charged the same from its arrival. */
#define MALLOC_OVERHEAD 16

uint64_t tpx__notif_cost(uint32_t len) { return offsetof(struct tpx__notif_node, msg) + len + MALLOC_OVERHEAD; }

static void account(struct tpx_peer *p, uint32_t len) {
  uint64_t c = tpx__notif_cost(len);
  p->notif_n++;
  p->notif_bytes += c;
  p->ep->notif_bytes += c;
}

/* A notification of p stops being pending (popped, dropped, purged). */
static void unaccount(struct tpx_peer *p, uint32_t len) {
  uint64_t c = tpx__notif_cost(len);
  p->notif_n--;
  p->notif_bytes -= c;
  p->ep->notif_bytes -= c;
}

void tpx__notif_deliver(tpx_endpoint_t *ep, struct tpx_peer *p, const uint8_t *msg, uint32_t len) {
  struct tpx__notif_node *n = malloc(offsetof(struct tpx__notif_node, msg) + len);
  if (!n) {
    TPX_ERROR("endpoint %s: out of memory: notification from %s lost", ep->name, p->where);
    unaccount(p, len);
    return;
  }
  n->next = NULL;
  n->owner = p;
  n->peer = p;
  snprintf(n->peer_name, sizeof(n->peer_name), "%s", p->name);
  n->len = len;
  if (len) memcpy(n->msg, msg, len);
  if (ep->notif_tail) ep->notif_tail->next = n;
  else ep->notif_head = n;
  ep->notif_tail = n;
  ep->notif_n++;
  tpx__ep_signal(ep);
}

void tpx__notif_arrive(struct tpx_peer *p, const uint8_t *msg, uint32_t len) {
  account(p, len);
  tpx__notif_deliver(p->ep, p, msg, len);
}

int tpx__notif_pop(tpx_endpoint_t *ep, tpx_notif_t *out) {
  struct tpx__notif_node *n = ep->notif_head;
  if (!n) return 0;
  ep->notif_head = n->next;
  if (!ep->notif_head) ep->notif_tail = NULL;
  ep->notif_n--;
  if (n->owner) unaccount(n->owner, n->len);
  out->peer = n->peer;
  memcpy(out->peer_name, n->peer_name, sizeof(out->peer_name));
  out->len = n->len;
  if (n->len) memcpy(out->msg, n->msg, n->len);
  free(n);
  return 1;
}

void tpx__notif_forget_peer(tpx_endpoint_t *ep, struct tpx_peer *p) {
  struct tpx__notif_node **pp = &ep->notif_head, *last = NULL;
  while (*pp) {
    struct tpx__notif_node *n = *pp;
    if (n->owner != p) {
      last = n;
      pp = &n->next;
      continue;
    }
    *pp = n->next;
    ep->notif_n--;
    unaccount(p, n->len);
    free(n);
  }
  ep->notif_tail = last;
}

void tpx__notif_queue_free(tpx_endpoint_t *ep) {
  while (ep->notif_head) {
    struct tpx__notif_node *n = ep->notif_head;
    ep->notif_head = n->next;
    free(n);
  }
  ep->notif_tail = NULL;
  ep->notif_n = 0;
}

void tpx__notif_fifo_push(struct tpx_peer *p, struct tpx__op *o) {
  o->in_fifo = 1;
  if (o->has_notif) account(p, o->notif_len);
  tpx__op_queue_push(&p->fifo_head, &p->fifo_tail, o);
}

static struct tpx__op *fifo_take(struct tpx_peer *p) {
  struct tpx__op *o = p->fifo_head;
  if (!o) return NULL;
  p->fifo_head = o->qnext;
  if (!p->fifo_head) p->fifo_tail = NULL;
  return o;
}

struct tpx__op *tpx__notif_fifo_pop(struct tpx_peer *p) {
  struct tpx__op *o = fifo_take(p);
  if (o && o->has_notif) unaccount(p, o->notif_len);
  return o;
}

struct tpx__op *tpx__notif_fifo_pop_done(struct tpx_peer *p) {
  if (!p->fifo_head || p->fifo_head->phase != PH_FINAL) return NULL;
  struct tpx__op *o = fifo_take(p);
  if (o->has_notif) {
    if (o->err == 0) {
      tpx__notif_deliver(p->ep, p, o->notif, o->notif_len);
    } else {
      TPX_PEER_LOG(p, PL_NOTIF_DROPPED, TPX_LOG_WARN, "peer %s: notification of a failed %s dropped", p->where,
                   tpx__op_kind_name(o->kind));
      unaccount(p, o->notif_len);
    }
  }
  return o;
}
