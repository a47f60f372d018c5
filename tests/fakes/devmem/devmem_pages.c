/* devmem_pages.h: page and token bookkeeping of the devmem TCP stand-in. */
#include "devmem_pages.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void page_free(struct devmem_pages *dp, uint32_t p) {
  dp->owner[p] = -1;
  dp->freebits[p / 64] |= UINT64_C(1) << (p % 64);
  if (p / 64 < dp->hint) dp->hint = p / 64;
  dp->nfree++;
}

/* The lowest free page; the caller has checked that one is free. */
static uint32_t page_take(struct devmem_pages *dp) {
  while (dp->freebits[dp->hint] == 0) dp->hint++;
  uint64_t *w = &dp->freebits[dp->hint];
  uint32_t p = dp->hint * 64 + (uint32_t)__builtin_ctzll(*w);
  *w &= *w - 1;
  dp->nfree--;
  return p;
}

int devmem_pages_init(struct devmem_pages *dp, void *base, size_t size) {
  memset(dp, 0, sizeof(*dp));
  size_t n = size / DEVMEM_PAGE;
  if (n == 0 || n > INT32_MAX) return -EINVAL;
  dp->owner = malloc(n * sizeof(*dp->owner));
  dp->freebits = calloc((n + 63) / 64, sizeof(*dp->freebits));
  if (!dp->owner || !dp->freebits) {
    devmem_pages_fini(dp);
    return -ENOMEM;
  }
  dp->base = base;
  dp->npages = (uint32_t)n;
  for (uint32_t p = 0; p < dp->npages; p++) page_free(dp, p);
  return 0;
}

void devmem_pages_fini(struct devmem_pages *dp) {
  free(dp->owner);
  free(dp->freebits);
  memset(dp, 0, sizeof(*dp));
}

size_t devmem_pages_rx(struct devmem_pages *dp, int sock, const void *data, size_t len, struct devmemvec *frags,
                       size_t max, size_t *nfrags) {
  size_t done = 0, n = 0;
  while (done < len && n < max && dp->nfree > 0) {
    uint32_t page = page_take(dp);
    size_t take = len - done < DEVMEM_PAGE ? len - done : DEVMEM_PAGE;
    if (dp->base) memcpy(dp->base + (size_t)page * DEVMEM_PAGE, (const uint8_t *)data + done, take);
    dp->owner[page] = sock;
    /* The token is the page's index: unique while the page is held. */
    frags[n++] = (struct devmemvec){page * DEVMEM_PAGE, (uint32_t)take, page};
    done += take;
  }
  *nfrags = n;
  return done;
}

long devmem_pages_dontneed(struct devmem_pages *dp, int sock, const struct devmemtoken *toks, size_t n) {
  long freed = 0;
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t start = toks[i].token_start, end = start + toks[i].token_count;
    if (end > dp->npages) { /* tokens never handed out: counted, not walked */
      dp->misuse += end - (start > dp->npages ? start : dp->npages);
      bad = 1;
      end = dp->npages;
    }
    for (uint64_t t = start; t < end; t++) {
      if (dp->owner[t] != sock) { /* twice, never handed out, or another socket's */
        dp->misuse++;
        bad = 1;
        continue;
      }
      page_free(dp, (uint32_t)t);
      freed++;
    }
  }
  return bad ? -EINVAL : freed;
}

uint32_t devmem_pages_release_sock(struct devmem_pages *dp, int sock) {
  uint32_t n = 0;
  for (uint32_t p = 0; p < dp->npages; p++)
    if (dp->owner[p] == sock) {
      page_free(dp, p);
      n++;
    }
  return n;
}
