/* devmem_pages.h: page and token bookkeeping of the devmem TCP stand-in. */
#include "devmem_pages.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int devmem_pages_init(struct devmem_pages *dp, void *base, size_t size) {
  memset(dp, 0, sizeof(*dp));
  size_t n = size / DEVMEM_PAGE;
  if (n == 0 || n > UINT32_MAX) return -EINVAL;
  dp->owner = malloc(n * sizeof(*dp->owner));
  dp->free = malloc(n * sizeof(*dp->free));
  if (!dp->owner || !dp->free) {
    devmem_pages_fini(dp);
    return -ENOMEM;
  }
  dp->base = base;
  dp->npages = (uint32_t)n;
  /* Lowest pages first, so a fresh buffer fills from its start. */
  for (uint32_t i = 0; i < dp->npages; i++) {
    dp->owner[i] = -1;
    dp->free[i] = dp->npages - 1 - i;
  }
  dp->nfree = dp->npages;
  return 0;
}

void devmem_pages_fini(struct devmem_pages *dp) {
  free(dp->owner);
  free(dp->free);
  memset(dp, 0, sizeof(*dp));
}

size_t devmem_pages_rx(struct devmem_pages *dp, int sock, const void *data, size_t len, struct devmemvec *frags,
                       size_t max, size_t *nfrags) {
  size_t done = 0, n = 0;
  while (done < len && n < max && dp->nfree > 0) {
    uint32_t page = dp->free[--dp->nfree];
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
      dp->owner[t] = -1;
      dp->free[dp->nfree++] = (uint32_t)t;
      freed++;
    }
  }
  return bad ? -EINVAL : freed;
}

uint32_t devmem_pages_release_sock(struct devmem_pages *dp, int sock) {
  uint32_t n = 0;
  for (uint32_t p = 0; p < dp->npages; p++)
    if (dp->owner[p] == sock) {
      dp->owner[p] = -1;
      dp->free[dp->nfree++] = p;
      n++;
    }
  return n;
}
