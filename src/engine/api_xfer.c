/* The public transfer API (include/tpx/xfer.h): prepare, post, test, wait
 * and free transfer handles, and the one-shot helpers. A post sends the
 * control message that starts the transfer (initiator.c, target.c and match.c
 * handle the other side) and queues its chunks on the windows (start.c:
 * larger transfers start in the progress pass instead). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/error.h"
#include "common/log.h"
#include "common/timeline.h"
#include "common/util.h"
#include "engine/channel.h"
#include "engine/core.h"
#include "engine/fail.h"
#include "engine/failover.h"
#include "engine/gpu/gpu_path.h"
#include "engine/gpu/pack_runs.h"
#include "engine/mem.h"
#include "engine/op.h"
#include "engine/peer.h"
#include "engine/progress.h"
#include "engine/start.h"
#include "net/caps.h"
#include "tpx/xfer.h"

static int check_peer_ready(struct tpx_peer *p, const char *what) {
  if (p->state == P_READY) return 0;
  if (p->state == P_DEAD || p->state == P_CLOSING)
    return tpx_err(p->err ? p->err : TPX_ECLOSED, "%s: peer %s is closed: %s", what, p->where, p->errmsg);
  return tpx_err(TPX_EUSAGE, "%s: peer %s is not connected yet", what, p->where);
}

static int local_range(const tpx_mem_t *m, size_t off, size_t len, tpx_endpoint_t *ep, const char *what) {
  if (!m) return tpx_err(TPX_EINVAL, "%s: NULL local registration", what);
  if (m->ep != ep) return tpx_err(TPX_EINVAL, "%s: registration belongs to another endpoint", what);
  if (off > m->len || len > m->len - off)
    return tpx_err(TPX_EINVAL, "%s: local range [%zu, +%zu) outside the %zu-byte registration", what, off, len, m->len);
  return 0;
}

/* Small entries share chunks (plan.h) when the peer takes packed plans and
 * each side's entries are host memory, or GPU memory of one device where
 * the GPU path stages both ways (gpu/gpu_path.h: the staging arena gathers
 * and scatters a packed chunk with one launch) on both sides (the peer's
 * HELLO_F_PACK_GPU says its does; it refuses the plan otherwise). The limit, unless
 * set: a packed chunk costs no copy when both transports take vectored
 * requests (window.c; the peer's HELLO says whether its does), nor where
 * GPU memory is in it (staged either way), so entries up to a chunk pack;
 * else the pack ring's copies pay off only for small entries. Each side
 * decides for itself how it moves its share (the ring holds any chunk,
 * pack.h). */
static int pack_log2(const struct tpx_peer *p, const struct tpx__op *o, const tpx_iov_t *iov, size_t n,
                     uint32_t chunk) {
  if (!p->pack || n < 2) return 0;
  int gpu = 0, rdev = -1;
  for (size_t i = 0; i < n; i++) {
    const struct tpx__md_info *md = &iov[i].remote->md;
    if (iov[i].local->type != TPX_MEM_HOST) gpu = 1;
    if (md->type == TPX_MEM_HOST) continue;
    if (rdev >= 0 && md->device != rdev) return 0; /* the peer's GPU entries on one GPU, as ours */
    rdev = md->device;
    gpu = 1;
  }
  if (gpu && (!tpx__gpu_pack_ok(p->ep) || !p->pack_gpu)) return 0;
  if (!tpx__pack_mem_ok(o->ents, (uint32_t)n, gpu)) return 0;
  size_t max = p->ep->cfg.pack_bytes;
  if (max == TPX_PACK_BYTES_AUTO)
    max = gpu || (tpx__net_iov_ok(p->ep->net) && p->pack_iov) ? chunk : TPX_PACK_BYTES_RING;
  if (max < 2) return 0;
  int k = 0;
  while (k < WIRE_MAX_PACK_LOG2 && (2ull << k) <= max) k++; /* rounded down to a power of two */
  return k;
}

static int prep_rw(tpx_peer_t *p, int kind, const tpx_iov_t *iov, size_t n, const void *notif,
                   size_t notif_len, tpx_xfer_t **out) {
  const char *what = kind == K_WRITE ? "tpx_xfer_prep_write" : "tpx_xfer_prep_read";
  if (!p || !out || (n && !iov)) return tpx_err(TPX_EINVAL, "%s: NULL argument", what);
  *out = NULL;
  if (n > TPX_XFER_MAX_IOV) return tpx_err(TPX_EINVAL, "%s: %zu entries exceeds %d", what, n, TPX_XFER_MAX_IOV);
  if (notif_len > TPX_NOTIF_MAX || (notif_len && !notif))
    return tpx_err(TPX_EINVAL, "%s: notification of %zu bytes (max %d)", what, notif_len, TPX_NOTIF_MAX);
  tpx_endpoint_t *ep = p->ep;
  unsigned need = kind == K_WRITE ? TPX_ACCESS_WRITE : TPX_ACCESS_READ;
  pthread_mutex_lock(&ep->lock);
  int rc = check_peer_ready(p, what);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    const tpx_iov_t *v = &iov[i];
    rc = local_range(v->local, v->local_off, v->len, ep, what);
    if (rc) break;
    if (!v->remote) {
      rc = tpx_err(TPX_EINVAL, "%s: entry %zu has no remote descriptor", what, i);
      break;
    }
    const struct tpx__md_info *md = &v->remote->md;
    if (md->owner != p->uuid) {
      rc = tpx_err(TPX_EINVAL, "%s: entry %zu: remote descriptor belongs to another endpoint than peer %s",
                   what, i, p->where);
      break;
    }
    if (v->remote_off > md->len || v->len > md->len - v->remote_off || !(md->access & need)) {
      rc = tpx_err(TPX_EACCES, "%s: entry %zu: remote range [%llu, +%zu) outside the %llu-byte %s region",
                   what, i, (unsigned long long)v->remote_off, v->len, (unsigned long long)md->len,
                   md->access & need ? "remote" : (kind == K_WRITE ? "non-writable" : "non-readable"));
      break;
    }
  }
  struct tpx__op *o = NULL;
  if (rc == 0) {
    o = tpx__op_new_user(p, kind, (uint32_t)n);
    if (o) o->rents = calloc(n ? n : 1, sizeof(*o->rents));
    if (!o || !o->rents || (notif && tpx__op_copy_notif(o, notif, (uint32_t)notif_len))) {
      if (o) tpx__op_free(o);
      rc = tpx_err(TPX_ENOMEM, "%s: out of memory", what);
    }
  }
  if (rc == 0) {
    for (size_t i = 0; i < n; i++) {
      o->ents[i].mem = iov[i].local;
      o->ents[i].off = iov[i].local_off;
      o->ents[i].len = iov[i].len;
      o->rents[i].region = iov[i].remote->md.region;
      o->rents[i].addr = iov[i].remote->md.addr + iov[i].remote_off;
      o->rents[i].len = iov[i].len;
      o->total += iov[i].len;
    }
    o->chunk = (uint32_t)tpx__config_chunk_for(&ep->cfg, o->total, p->nch, ep->ncpu);
    int k = pack_log2(p, o, iov, n, o->chunk);
    o->pack_max = k ? 1ull << k : 0;
    o->nchunks = tpx__plan_nchunks_packed(o->ents, o->nents, o->chunk, o->pack_max);
    tpx__op_user_link(o);
    *out = (tpx_xfer_t *)o;
  }
  pthread_mutex_unlock(&ep->lock);
  return rc;
}

int tpx_xfer_prep_write(tpx_peer_t *p, const tpx_iov_t *iov, size_t n, const void *notif,
                        size_t notif_len, tpx_xfer_t **out) {
  return prep_rw(p, K_WRITE, iov, n, notif, notif_len, out);
}
int tpx_xfer_prep_read(tpx_peer_t *p, const tpx_iov_t *iov, size_t n, const void *notif,
                       size_t notif_len, tpx_xfer_t **out) {
  return prep_rw(p, K_READ, iov, n, notif, notif_len, out);
}

static int prep_two(tpx_peer_t *p, int kind, tpx_mem_t *mem, size_t off, size_t len, uint64_t tag,
                    tpx_xfer_t **out) {
  const char *what = kind == K_SEND ? "tpx_xfer_prep_send" : "tpx_xfer_prep_recv";
  if (!p || !out) return tpx_err(TPX_EINVAL, "%s: NULL argument", what);
  *out = NULL;
  tpx_endpoint_t *ep = p->ep;
  pthread_mutex_lock(&ep->lock);
  int rc = check_peer_ready(p, what);
  if (rc == 0) rc = local_range(mem, off, len, ep, what);
  struct tpx__op *o = NULL;
  if (rc == 0 && !(o = tpx__op_new_user(p, kind, 1))) rc = tpx_err(TPX_ENOMEM, "%s: out of memory", what);
  if (rc == 0) {
    o->ents[0].mem = mem;
    o->ents[0].off = off;
    o->ents[0].len = len;
    o->tag = tag;
    o->cap = len;
    o->total = len;
    if (kind == K_SEND) /* a receive takes the sender's */
      o->chunk = (uint32_t)tpx__config_chunk_for(&ep->cfg, len, p->nch, ep->ncpu);
    o->nchunks = tpx__plan_nchunks(o->ents, 1, o->chunk);
    tpx__op_user_link(o);
    *out = (tpx_xfer_t *)o;
  }
  pthread_mutex_unlock(&ep->lock);
  return rc;
}

int tpx_xfer_prep_send(tpx_peer_t *p, tpx_mem_t *mem, size_t off, size_t len, uint64_t tag, tpx_xfer_t **out) {
  return prep_two(p, K_SEND, mem, off, len, tag, out);
}
int tpx_xfer_prep_recv(tpx_peer_t *p, tpx_mem_t *mem, size_t off, size_t cap, uint64_t tag, tpx_xfer_t **out) {
  return prep_two(p, K_RECV, mem, off, cap, tag, out);
}

int tpx_xfer_set_notif(tpx_xfer_t *x, const void *notif, size_t len) {
  if (!x) return tpx_err(TPX_EINVAL, "tpx_xfer_set_notif: NULL");
  struct tpx__op *o = &x->op;
  if (o->kind != K_WRITE && o->kind != K_READ)
    return tpx_err(TPX_EUSAGE, "tpx_xfer_set_notif: only writes and reads carry notifications");
  if (len > TPX_NOTIF_MAX || (len && !notif))
    return tpx_err(TPX_EINVAL, "tpx_xfer_set_notif: %zu bytes (max %d)", len, TPX_NOTIF_MAX);
  tpx_endpoint_t *ep = o->peer->ep;
  pthread_mutex_lock(&ep->lock);
  int rc = 0;
  if (o->phase != PH_IDLE) rc = tpx_err(TPX_EUSAGE, "tpx_xfer_set_notif: transfer in flight");
  else {
    uint8_t *n = len ? malloc(len) : NULL;
    if (len && !n) rc = tpx_err(TPX_ENOMEM, "tpx_xfer_set_notif: out of memory");
    else {
      if (len) memcpy(n, notif, len);
      free(o->notif);
      o->notif = n;
      o->notif_len = (uint32_t)len;
      o->has_notif = notif != NULL;
    }
  }
  pthread_mutex_unlock(&ep->lock);
  return rc;
}

int tpx_xfer_post(tpx_xfer_t *x) {
  if (!x) return tpx_err(TPX_EINVAL, "tpx_xfer_post: NULL");
  struct tpx__op *o = &x->op;
  struct tpx_peer *p = o->peer;
  tpx_endpoint_t *ep = p->ep;
  pthread_mutex_lock(&ep->lock);
  int rc = 0, kick = 0;
  if (o->phase != PH_IDLE) {
    rc = tpx_err(TPX_EUSAGE, "tpx_xfer_post: %s is still in flight", tpx__op_kind_name(o->kind));
    goto out;
  }
  rc = check_peer_ready(p, "tpx_xfer_post");
  if (rc) goto out;
  o->err = 0;
  o->errmsg[0] = '\0';
  o->acked = 0;
  o->ack_status = 0;
  o->inflight = 0;
  o->deadline = 0;
  o->posted = 1;
  if (o->kind == K_RECV) {
    o->ents[0].len = o->cap;
    o->received = 0;
  }
  if (o->kind != K_SEND) {
    o->id = tpx__id_register(p, o);
    if (!o->id_reg) {
      rc = tpx_err(TPX_ENOMEM, "tpx_xfer_post: out of memory for transfer ids");
      goto out;
    }
  }
  atomic_store_explicit(&o->status, TPX_EINPROGRESS, memory_order_relaxed);
  TPX_TRACE("peer %s: %s %llu posted (%llu bytes, %llu chunks)", p->where, tpx__op_kind_name(o->kind),
            (unsigned long long)o->id, (unsigned long long)o->total, (unsigned long long)o->nchunks);
  TPX_TL(TL_OP_POST, o->kind, o->id, o->total, o->nchunks);
  tpx__op_active_add(p, o);
  if (ep->thread_on && !tpx__start_in_post(p, o)) {
    tpx__start_defer(p, o); /* the progress thread starts it: no transport call here */
    kick = 1;
  } else {
    tpx__start_now(p, o);
    if (p->state == P_READY) { /* post and drain now, never block */
      int r = tpx__failover_progress(p);
      if (r < 0) tpx__peer_fail_last(p, r);
    }
    /* Control answers wake the progress thread through epoll; only requests
     * inside the transport need it woken now. */
    kick = ep->inflight > 0 || ep->queued > 0;
  }
out:
  pthread_mutex_unlock(&ep->lock);
  if (rc == 0 && kick) tpx__ep_wake(ep);
  return rc;
}

static int xfer_status(struct tpx__op *o) {
  int s = atomic_load_explicit(&o->status, memory_order_acquire);
  if (s < 0 && s != TPX_EINPROGRESS) {
    if (s == TPX_EUSAGE && !o->posted) return tpx_err_quiet(s, "transfer was never posted");
    return tpx_err_quiet(s, "%s", o->errmsg[0] ? o->errmsg : tpx_strerror(s));
  }
  return s;
}

int tpx_xfer_test(tpx_xfer_t *x) {
  if (!x) return tpx_err(TPX_EINVAL, "tpx_xfer_test: NULL");
  struct tpx__op *o = &x->op;
  tpx_endpoint_t *ep = o->peer->ep;
  if (!ep->thread_on && atomic_load_explicit(&o->status, memory_order_acquire) == TPX_EINPROGRESS) {
    pthread_mutex_lock(&ep->lock);
    (void)tpx__ep_pass(ep);
    pthread_mutex_unlock(&ep->lock);
  }
  return xfer_status(o);
}

static int op_settled(tpx_endpoint_t *ep, void *arg) {
  (void)ep;
  return atomic_load_explicit(&((struct tpx__op *)arg)->status, memory_order_acquire) != TPX_EINPROGRESS;
}

int tpx_xfer_wait(tpx_xfer_t *x, int timeout_ms) {
  if (!x) return tpx_err(TPX_EINVAL, "tpx_xfer_wait: NULL");
  struct tpx__op *o = &x->op;
  tpx_endpoint_t *ep = o->peer->ep;
  if (op_settled(ep, o)) return xfer_status(o);
  uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : tpx__now_ns() + tpx__ms_to_ns(timeout_ms);
  pthread_mutex_lock(&ep->lock);
  int ok = tpx__ep_wait(ep, op_settled, o, deadline);
  pthread_mutex_unlock(&ep->lock);
  if (!ok)
    return tpx_err_quiet(TPX_ETIMEDOUT, "tpx_xfer_wait: %s still in flight after %d ms", tpx__op_kind_name(o->kind),
                         timeout_ms);
  return xfer_status(o);
}

/* tpx_xfer_wait_any: the predicate scans the set for a settled transfer
 * (one atomic load each, no progress pass per transfer); it runs once per
 * wake-up of the one wait loop, and user completions signal it (op.c). */
struct any_arg {
  tpx_xfer_t *const *xs;
  size_t n, found;
};

static int any_settled(tpx_endpoint_t *ep, void *arg) {
  struct any_arg *a = arg;
  for (size_t i = 0; i < a->n; i++) {
    if (a->xs[i] && op_settled(ep, &a->xs[i]->op)) {
      a->found = i;
      return 1;
    }
  }
  return 0;
}

int tpx_xfer_wait_any(tpx_xfer_t *const *xs, size_t n, int timeout_ms, size_t *index) {
  if (index) *index = n;
  if (!index || (n && !xs)) return tpx_err(TPX_EINVAL, "tpx_xfer_wait_any: NULL argument");
  tpx_endpoint_t *ep = NULL;
  for (size_t i = 0; i < n; i++) {
    if (!xs[i]) continue;
    tpx_endpoint_t *e = xs[i]->op.peer->ep;
    if (ep && e != ep) return tpx_err(TPX_EINVAL, "tpx_xfer_wait_any: transfer %zu belongs to another endpoint than the ones before it", i);
    ep = e;
  }
  if (!ep) return tpx_err(TPX_EINVAL, "tpx_xfer_wait_any: no transfer in the set");
  struct any_arg a = {xs, n, n};
  uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : tpx__now_ns() + tpx__ms_to_ns(timeout_ms);
  pthread_mutex_lock(&ep->lock);
  int ok = any_settled(ep, &a);
  if (!ok && !ep->thread_on && timeout_ms == 0) { /* a poll still moves bytes, like tpx_xfer_test */
    (void)tpx__ep_pass(ep);
    ok = any_settled(ep, &a);
  }
  if (!ok) ok = tpx__ep_wait(ep, any_settled, &a, deadline);
  pthread_mutex_unlock(&ep->lock);
  if (!ok)
    return tpx_err_quiet(TPX_ETIMEDOUT, "tpx_xfer_wait_any: none of %zu transfers settled in %d ms", n, timeout_ms);
  *index = a.found;
  return xfer_status(&xs[a.found]->op);
}

int tpx_xfer_run(tpx_xfer_t *x, int timeout_ms) {
  int rc = tpx_xfer_post(x);
  return rc ? rc : tpx_xfer_wait(x, timeout_ms);
}

size_t tpx_xfer_received(const tpx_xfer_t *x) { return x ? (size_t)x->op.received : 0; }
tpx_op_t tpx_xfer_op(const tpx_xfer_t *x) { return x ? (tpx_op_t)x->op.kind : 0; }

void tpx_xfer_free(tpx_xfer_t *x) {
  if (!x) return;
  struct tpx__op *o = &x->op;
  tpx_endpoint_t *ep = o->peer->ep;
  pthread_mutex_lock(&ep->lock);
  if (o->phase != PH_IDLE) o->orphan = 1; /* finishes (or is cancelled) in the background */
  else tpx__op_user_destroy(o);
  pthread_mutex_unlock(&ep->lock);
}

/* ---- one-shot helpers ---- */
int tpx_write(tpx_peer_t *p, tpx_mem_t *local, size_t local_off, const tpx_rmem_t *remote,
              uint64_t remote_off, size_t len, const void *notif, size_t notif_len, tpx_xfer_t **out) {
  tpx_iov_t v = {local, local_off, remote, remote_off, len};
  int rc = tpx_xfer_prep_write(p, &v, 1, notif, notif_len, out);
  if (rc == 0 && (rc = tpx_xfer_post(*out)) != 0) {
    tpx_xfer_free(*out);
    *out = NULL;
  }
  return rc;
}
int tpx_read(tpx_peer_t *p, tpx_mem_t *local, size_t local_off, const tpx_rmem_t *remote,
             uint64_t remote_off, size_t len, tpx_xfer_t **out) {
  tpx_iov_t v = {local, local_off, remote, remote_off, len};
  int rc = tpx_xfer_prep_read(p, &v, 1, NULL, 0, out);
  if (rc == 0 && (rc = tpx_xfer_post(*out)) != 0) {
    tpx_xfer_free(*out);
    *out = NULL;
  }
  return rc;
}
int tpx_send(tpx_peer_t *p, tpx_mem_t *mem, size_t off, size_t len, uint64_t tag, tpx_xfer_t **out) {
  int rc = tpx_xfer_prep_send(p, mem, off, len, tag, out);
  if (rc == 0 && (rc = tpx_xfer_post(*out)) != 0) {
    tpx_xfer_free(*out);
    *out = NULL;
  }
  return rc;
}
int tpx_recv(tpx_peer_t *p, tpx_mem_t *mem, size_t off, size_t cap, uint64_t tag, tpx_xfer_t **out) {
  int rc = tpx_xfer_prep_recv(p, mem, off, cap, tag, out);
  if (rc == 0 && (rc = tpx_xfer_post(*out)) != 0) {
    tpx_xfer_free(*out);
    *out = NULL;
  }
  return rc;
}
