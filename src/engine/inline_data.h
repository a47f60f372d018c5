/* Inline data: small host transfers ride in the control message itself
 * (up to cfg.inline_bytes, at most WIRE_MAX_INLINE) instead of the channels. */
#ifndef TPX_ENGINE_INLINE_DATA_H
#define TPX_ENGINE_INLINE_DATA_H

#include <stdint.h>
#include <sys/uio.h>

#include "engine/plan.h"
#include "tpx/endpoint.h"

#define INLINE_MAX_IOV 64

/* The entries as an iovec (empty ones skipped): the count, or TPX_ENOTSUP when
 * they cannot go inline (GPU memory, more than INLINE_MAX_IOV pieces). */
int tpx__inline_iov(const struct tpx__xent *e, uint32_t n, struct iovec *iov);
/* The same, also TPX_ENOTSUP when total is above the endpoint's inline limit. */
int tpx__inline_ok(tpx_endpoint_t *ep, const struct tpx__xent *e, uint32_t n, uint64_t total, struct iovec *iov);
/* Copy inline bytes into the entries (checked by the caller to fit), GPU
 * memory with a CUDA copy: 0 or that copy's error. */
int tpx__inline_scatter(const struct tpx__xent *e, uint32_t n, const uint8_t *data);

#endif
