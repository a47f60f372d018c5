/* The page and token bookkeeping of a devmem TCP stand-in: what the kernel
 * does, on A3-high, with the GPU receive buffer RxDM binds to a NIC queue,
 * as the GPUDirect-TCPX plugin (4b8ea7f) sees it. Only the bookkeeping;
 * devmem_rx.c gives the plugin's sockets these receives.
 *
 * Rules, with their source:
 * - The buffer is cut into 4 KiB pages; a received fragment lies in one page,
 *   at most a page long, and is described to the reader as
 *   {frag_offset (bytes from the buffer's start), frag_size, frag_token}
 *   (`struct devmemvec`, the plugin's src/sock/tcpx.h; the kernel's devmem
 *   hands out PAGE_SIZE net_iovs: net/core/devmem.c).
 * - A page stays the reader's until it gives its token back with
 *   SO_DEVMEM_DONTNEED, as {token_start, token_count} ranges (`struct
 *   devmemtoken`, the plugin's src/devcomm/unpack_defs1.h, which merges
 *   consecutive tokens). Tokens belong to the socket that received them.
 * - Pages are handed out lowest free address first: the kernel takes each
 *   one from the binding's genpool (net/core/devmem.c,
 *   net_devmem_alloc_dmabuf -> gen_pool_alloc_owner, first fit by address
 *   in lib/genalloc.c). So pages given back together are reused as one
 *   run, as they are there. The kernel's page_pool also caches recycled
 *   pages ahead of the genpool; that order is not modelled.
 * - The buffer full (tokens not given back), nothing more arrives: the NIC
 *   has nowhere to put packets and the kernel drops them (devmem.rst); here
 *   a receive then takes nothing.
 * - A token given back twice, or never handed out, is an error here. The
 *   kernel ignores such tokens and returns the number of pages it freed
 *   (devmem.rst, SO_DEVMEM_DONTNEED), while the plugin asserts the call
 *   returns 0 (`do_recycle_devmem_batch`, written for Google's earlier kernel):
 *   the stand-in reports the misuse instead of hiding it. */
#ifndef DEVMEM_PAGES_H
#define DEVMEM_PAGES_H

#include <stddef.h>
#include <stdint.h>

#define DEVMEM_PAGE 4096u

struct devmemvec { /* the plugin's layout */
  uint32_t frag_offset, frag_size, frag_token;
};

struct devmemtoken { /* the plugin's layout */
  uint32_t token_start, token_count;
};

struct devmem_pages {
  uint8_t *base;       /* the receive buffer (host), or NULL */
  uint32_t npages;
  int32_t *owner;      /* per page: the socket holding it, or -1 (free) */
  uint64_t *freebits;  /* bit p set: page p is free */
  uint32_t hint;       /* no free page in the words below this one */
  uint32_t nfree;
  uint64_t misuse;     /* tokens given back twice or never handed out */
};

/* Over a buffer of size bytes (whole pages used). 0 or -ENOMEM. base NULL:
 * bookkeeping only, the caller copies the bytes (GPU memory). */
int devmem_pages_init(struct devmem_pages *dp, void *base, size_t size);
void devmem_pages_fini(struct devmem_pages *dp);

/* Places up to len bytes of data for socket sock into free pages, one
 * fragment per page, filling frags[0..max). Returns the bytes placed (0 when
 * no page is free) and sets *nfrags. */
size_t devmem_pages_rx(struct devmem_pages *dp, int sock, const void *data, size_t len, struct devmemvec *frags,
                       size_t max, size_t *nfrags);

/* SO_DEVMEM_DONTNEED: gives back the pages of n token ranges of socket sock.
 * Returns the pages freed, or -EINVAL when any token was not the socket's
 * (the valid ones are still freed; dp->misuse counts the others). */
long devmem_pages_dontneed(struct devmem_pages *dp, int sock, const struct devmemtoken *toks, size_t n);

/* A socket closed: its pages come back (the kernel frees a closed socket's
 * frags). Returns how many. */
uint32_t devmem_pages_release_sock(struct devmem_pages *dp, int sock);

#endif
