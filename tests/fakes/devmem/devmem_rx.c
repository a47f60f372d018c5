/* The devmem stand-in's receive side: one buffer per GPU, as RxDM hands it
 * out; recvmsg(MSG_SOCK_DEVMEM) into its pages, SO_DEVMEM_DONTNEED giving
 * them back. */
#include "devmem_standin.h"

static struct rxbuf bufs[MAX_BUFS];
static int nbufs;
pthread_mutex_t dm_lock = PTHREAD_MUTEX_INITIALIZER; /* nbufs, sock_buf, tx */
/* Fetching a buffer (RxDM and CUDA calls) holds this one, not dm_lock, which
 * close() takes: the driver may close descriptors inside its calls. */
pthread_mutex_t dm_fetch_lock = PTHREAD_MUTEX_INITIALIZER;
static int8_t sock_buf[MAX_SOCK_FD];                     /* socket -> 1 + its buffer; 0 unknown */

/* The real GPU's buffer: imported as the plugin imports it (its
 * src/gpu/common.cu), in the GPU's primary context. */
static int import_gpu(struct rxbuf *b, int fd) {
  struct rxdm_msg m;
  char meta[64];
  snprintf(meta, sizeof(meta), "get_gpu_metadata_%.32s", b->pci);
  struct { int fd; size_t size, align; } md;
  if (dm_ask(meta, b->pci, &m, NULL) != 0 || m.raw_len != sizeof(md)) return dm_note("no metadata from %s", meta), -1;
  memcpy(&md, m.raw, sizeof(md));
  if (!dm_cu_load()) return -1;
  CUdevice dev;
  CUmemGenericAllocationHandle h;
  CUcontext copy, popped;
  CUresult rc = dm_gpu_contexts(b->pci, &dev, &b->ctx, &copy);
  if (rc != CUDA_SUCCESS || dm_cu.push(b->ctx) != CUDA_SUCCESS) return dm_note("GPU %s: CUDA error %d", b->pci, rc), -1;
  int w = dm_watch_begin("importing RxDM's buffer (cuMemImportFromShareableHandle, cuMemMap, cuMemSetAccess)", md.size);
  rc = dm_cu.import(&h, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  if (rc == CUDA_SUCCESS) {
    rc = dm_cu.reserve(&b->dptr, md.size, md.align, 0, 0);
    if (rc == CUDA_SUCCESS) rc = dm_cu.map(b->dptr, md.size, 0, h, 0);
    dm_cu.release(h); /* the mapping keeps the memory */
  }
  CUmemAccessDesc desc = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev},
                          .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  if (rc == CUDA_SUCCESS) rc = dm_cu.access(b->dptr, md.size, &desc, 1);
  dm_watch_end(w);
  if (rc == CUDA_SUCCESS) {
    dm_read_pool_fill();
    if (copy) b->ctx = copy;
  }
  dm_cu.pop(&popped);
  if (rc != CUDA_SUCCESS) return dm_note("importing the buffer of GPU %s: CUDA error %d", b->pci, rc), -1;
  if (devmem_pages_init(&b->pages, NULL, md.size) != 0) return -1;
  dm_note("buffer of GPU %s: %zu bytes of GPU memory", b->pci, md.size);
  return 0;
}

/* The buffer of GPU pci (dm_fetch_lock held), fetched from RxDM on first use. */
struct rxbuf *dm_buffer_of(const char *pci) {
  for (int i = 0; i < nbufs; i++)
    if (!strcmp(bufs[i].pci, pci)) return &bufs[i];
  if (nbufs == MAX_BUFS) return NULL;
  struct rxbuf *b = &bufs[nbufs];
  memset(b, 0, sizeof(*b));
  snprintf(b->pci, sizeof(b->pci), "%.32s", pci);
  char name[64];
  snprintf(name, sizeof(name), "get_gpu_fd_%.32s", b->pci);
  int fd = -1, ok = -1;
  struct stat st;
  if (dm_ask(name, pci, NULL, &fd) != 0 || fstat(fd, &st) != 0) {
    dm_note("no buffer from %s/%s", dm_prefix(), name);
  } else if (S_ISREG(st.st_mode) && st.st_size > 0) { /* the test doubles' memfd */
    void *base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) dm_note("cannot map the buffer of GPU %s", pci);
    else if ((ok = devmem_pages_init(&b->pages, base, (size_t)st.st_size)) == 0)
      dm_note("buffer of GPU %s: %lld bytes (mapped)", pci, (long long)st.st_size);
  } else {
    ok = import_gpu(b, fd);
  }
  if (fd >= 0) dm_sys_close(fd);
  if (ok != 0) return NULL;
  pthread_mutex_init(&b->lock, NULL);
  pthread_mutex_lock(&dm_lock);
  nbufs++;
  pthread_mutex_unlock(&dm_lock);
  return b;
}

/* The buffer socket fd receives into: its flow-steering rule's GPU, as the
 * RxDM stand-in has it (a NIC steers by the rule). NULL when there is none. */
static struct rxbuf *socket_buffer(int fd) {
  if (fd < 0 || fd >= MAX_SOCK_FD) return NULL;
  pthread_mutex_lock(&dm_lock);
  int k = sock_buf[fd];
  pthread_mutex_unlock(&dm_lock);
  if (k) return &bufs[k - 1];
  struct sockaddr_storage peer, self;
  socklen_t pl = sizeof(peer), sl = sizeof(self);
  char pip[INET6_ADDRSTRLEN], sip[INET6_ADDRSTRLEN], q[160];
  if (getpeername(fd, (struct sockaddr *)&peer, &pl) != 0 || getsockname(fd, (struct sockaddr *)&self, &sl) != 0)
    return NULL;
  int v4 = peer.ss_family == AF_INET;
  const void *pa = v4 ? (void *)&((struct sockaddr_in *)&peer)->sin_addr : (void *)&((struct sockaddr_in6 *)&peer)->sin6_addr;
  const void *sa = v4 ? (void *)&((struct sockaddr_in *)&self)->sin_addr : (void *)&((struct sockaddr_in6 *)&self)->sin6_addr;
  int pp = ntohs(v4 ? ((struct sockaddr_in *)&peer)->sin_port : ((struct sockaddr_in6 *)&peer)->sin6_port);
  int sp = ntohs(v4 ? ((struct sockaddr_in *)&self)->sin_port : ((struct sockaddr_in6 *)&self)->sin6_port);
  if (!inet_ntop(peer.ss_family, pa, pip, sizeof(pip)) || !inet_ntop(peer.ss_family, sa, sip, sizeof(sip)))
    return NULL;
  snprintf(q, sizeof(q), "%s %d %s %d", pip, pp, sip, sp);
  struct rxdm_msg m = {.kind = RXDM_EMPTY};
  if (dm_ask("standin_flow_gpu", q, &m, NULL) != 0 || strncmp(m.raw, "gpu ", 4) != 0) {
    dm_note("flow %s:%d -> %s:%d: no flow-steering rule (%s)", pip, pp, sip, sp, m.kind == RXDM_RAW ? m.raw : "no answer");
    return NULL;
  }
  pthread_mutex_lock(&dm_fetch_lock);
  struct rxbuf *b = dm_buffer_of(m.raw + 4);
  pthread_mutex_unlock(&dm_fetch_lock);
  pthread_mutex_lock(&dm_lock);
  if (b) sock_buf[fd] = (int8_t)(1 + (b - bufs));
  pthread_mutex_unlock(&dm_lock);
  return b;
}

/* The thread's read buffer: pinned when the driver is there. */
static uint8_t *read_buffer(struct rxbuf *b) {
  static _Thread_local uint8_t *tmp;
  if (tmp) return tmp;
  if (!b->pages.base) { /* no CUDA call here: see dm_read_pool */
    pthread_mutex_lock(&dm_cu_lock);
    if (dm_read_pool_n > 0) tmp = dm_read_pool[--dm_read_pool_n];
    pthread_mutex_unlock(&dm_cu_lock);
    if (tmp) return tmp;
  }
  return tmp = malloc(READ_MAX);
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags) {
  REAL(recvmsg);
  if (!(flags & MSG_SOCK_DEVMEM)) return real_recvmsg(fd, msg, flags);
  flags &= ~MSG_SOCK_DEVMEM;
  struct rxbuf *b = socket_buffer(fd);
  if (!b) {
    errno = ENODEV;
    return -1;
  }
  uint8_t *tmp = read_buffer(b);
  if (!tmp) {
    errno = ENOMEM;
    return -1;
  }
  pthread_mutex_lock(&b->lock);
  struct devmem_pages *dp = &b->pages;
  /* As much as fits: the caller's first iovec, its control room, free pages. */
  size_t room = msg->msg_controllen / CMSG_SPACE(sizeof(struct devmemvec));
  size_t want = msg->msg_iovlen ? msg->msg_iov[0].iov_len : 0;
  if (want > room * DEVMEM_PAGE) want = room * DEVMEM_PAGE;
  if (want > (size_t)dp->nfree * DEVMEM_PAGE) want = (size_t)dp->nfree * DEVMEM_PAGE;
  if (want == 0) { /* the buffer is full: nothing arrives until tokens come back */
    pthread_mutex_unlock(&b->lock);
    errno = EAGAIN;
    return -1;
  }
  if (want > READ_MAX) want = READ_MAX;
  ssize_t r = recv(fd, tmp, want, flags);
  if (r <= 0) {
    pthread_mutex_unlock(&b->lock);
    return r;
  }
  struct devmemvec frags[READ_MAX / DEVMEM_PAGE];
  size_t nf;
  devmem_pages_rx(dp, fd, tmp, (size_t)r, frags, READ_MAX / DEVMEM_PAGE, &nf);
  pthread_mutex_unlock(&b->lock);
  /* GPU memory: the pages are this socket's now; copy them in, a run of
   * consecutive pages at a time. */
  if (!dp->base) {
    struct cu_run runs[READ_MAX / DEVMEM_PAGE];
    size_t done = 0, nruns = 0;
    for (size_t i = 0; i < nf;) {
      size_t j = i + 1, len = frags[i].frag_size;
      while (j < nf && frags[j].frag_offset == frags[j - 1].frag_offset + DEVMEM_PAGE &&
             frags[j - 1].frag_size == DEVMEM_PAGE)
        len += frags[j++].frag_size;
      runs[nruns++] = (struct cu_run){b->dptr + frags[i].frag_offset, tmp + done, len};
      done += len;
      i = j;
    }
    if (dm_cu_copy(b->ctx, 1, runs, nruns) != 0) {
      errno = EIO;
      return -1;
    }
  }
  struct cmsghdr *cm = CMSG_FIRSTHDR(msg);
  for (size_t i = 0; i < nf; i++) {
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_DEVMEM_OFFSET;
    cm->cmsg_len = CMSG_LEN(sizeof(struct devmemvec));
    memcpy(CMSG_DATA(cm), &frags[i], sizeof(frags[i]));
    cm = (struct cmsghdr *)((char *)cm + CMSG_SPACE(sizeof(struct devmemvec)));
  }
  msg->msg_controllen = nf * CMSG_SPACE(sizeof(struct devmemvec));
  msg->msg_flags = 0;
  trace("recvmsg fd %d: %zd bytes in %zu fragments, %u pages free", fd, r, nf, dp->nfree);
  return r;
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len) {
  REAL(setsockopt);
  if (level != SOL_SOCKET || name != SO_DEVMEM_DONTNEED) return real_setsockopt(fd, level, name, val, len);
  pthread_mutex_lock(&dm_lock);
  int k = fd >= 0 && fd < MAX_SOCK_FD ? sock_buf[fd] : 0;
  pthread_mutex_unlock(&dm_lock);
  long rc = -EINVAL;
  if (k) {
    pthread_mutex_lock(&bufs[k - 1].lock);
    rc = devmem_pages_dontneed(&bufs[k - 1].pages, fd, val, len / sizeof(struct devmemtoken));
    pthread_mutex_unlock(&bufs[k - 1].lock);
  }
  trace("SO_DEVMEM_DONTNEED fd %d: %zu tokens: %ld", fd, (size_t)(len / sizeof(struct devmemtoken)), rc);
  if (rc < 0) {
    dm_note("SO_DEVMEM_DONTNEED on fd %d: a token given back twice or never handed out", fd);
    errno = EINVAL;
    return -1;
  }
  return 0; /* the plugin wants 0 (Google's kernel), not the count freed */
}
/* Socket fd is closing (dm_lock held): its pages come back. */
void dm_rx_forget(int fd) {
  int k = fd >= 0 && fd < MAX_SOCK_FD ? sock_buf[fd] : 0;
  if (k) {
    sock_buf[fd] = 0;
    pthread_mutex_lock(&bufs[k - 1].lock);
    devmem_pages_release_sock(&bufs[k - 1].pages, fd);
    pthread_mutex_unlock(&bufs[k - 1].lock);
  }
}
