/* The devmem stand-in's send side: the plugin's dma-bufs of GPU ranges,
 * sendmsg(SCM_DEVMEM_OFFSET) from them, DMA_BUF_CREATE_PAGES. */
#include "devmem_standin.h"

/* A descriptor standing for GPU memory: the test doubles' dma-buf (mapped
 * on first use) or a real GPU range (read into a host shadow). */
static struct {
  int fd;
  uint8_t *base; /* the mapping, or the shadow (made on first use) */
  size_t size;
  CUdeviceptr dptr; /* 0: the test doubles' */
  CUcontext ctx;
} tx[MAX_TX];

static int tx_slot(void) {
  for (int i = 0; i < MAX_TX; i++)
    if (!tx[i].base && !tx[i].dptr) return i;
  return -1;
}

/* The plugin's dma-buf of a GPU range (gpu_tx_reg_mr, its src/gpu/tx_pool.cu),
 * with its context current. */
CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size, CUmemRangeHandleType type,
                                       unsigned long long flags) {
  REAL(cuMemGetHandleForAddressRange);
  /* The driver loaded for the plugin alone (dlopen'ed, not in the global
   * scope RTLD_NEXT searches) is found by name. */
  if (!real_cuMemGetHandleForAddressRange) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib) real_cuMemGetHandleForAddressRange = (__typeof__(real_cuMemGetHandleForAddressRange))dlsym(lib, "cuMemGetHandleForAddressRange");
  }
  if (!real_cuMemGetHandleForAddressRange) {
    /* The plugin tests the descriptor, not the result, and its own starts at
     * 0 (stdin): a failure must say -1. */
    if (handle) *(int *)handle = -1;
    return dm_note("no driver's cuMemGetHandleForAddressRange"), CUDA_ERROR_NOT_FOUND;
  }
  CUresult rc = real_cuMemGetHandleForAddressRange(handle, dptr, size, type, flags);
  /* The test doubles' dma-buf is a memfd that sendmsg maps. */
  if (!dm_driver_is_real()) return rc;
  int fd = rc == CUDA_SUCCESS ? *(int *)handle : -1;
  if (type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || !dm_cu_load()) return dm_note("dma-buf of 0x%llx: not noted", (unsigned long long)dptr), rc;
  CUcontext ctx = NULL;
  CUdevice dev = 0;
  int dmabuf = 1;
  dm_cu.get_ctx(&ctx);
  if (ctx) dm_cu.ctx_dev(&dev);
  /* Copies from the range run in the context that owns it, where it has one
   * (the plugin calls this in a context of its own). */
  CUcontext owner = NULL;
  if (dm_cu.ptr_attr(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, dptr) == CUDA_SUCCESS && owner) ctx = owner;
  if (!ctx) return dm_note("dma-buf of 0x%llx: no CUDA context", (unsigned long long)dptr), rc;
  CUcontext popped;
  if (dm_cu.push(ctx) == CUDA_SUCCESS) { /* the copy stream now, while the plugin sets up */
    (void)dm_cu_stream(ctx);
    CUmemGenericAllocationHandle h; /* VMM memory: copies in the stand-in's context */
    CUdevice owner_dev;
    if (dm_cu.retain_handle && dm_cu.retain_handle(&h, (void *)dptr) == CUDA_SUCCESS) {
      dm_cu.release(h);
      CUcontext own = dm_cu.ctx_dev(&owner_dev) == CUDA_SUCCESS ? dm_copy_ctx(owner_dev) : NULL;
      if (own) ctx = own;
    }
    dm_cu.pop(&popped);
  }
  if (rc != CUDA_SUCCESS) {
    /* A driver without dma-buf support: a placeholder descriptor stands for
     * the range (only this library reads it). */
    if (dm_cu.attr(&dmabuf, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev) != CUDA_SUCCESS || dmabuf) return rc;
    if ((fd = eventfd(0, EFD_CLOEXEC)) < 0) return rc;
  }
  pthread_mutex_lock(&dm_lock);
  int i = tx_slot();
  if (i >= 0) tx[i] = (__typeof__(tx[0])){fd, NULL, size, dptr, ctx};
  pthread_mutex_unlock(&dm_lock);
  if (i < 0) {
    dm_note("more than %d GPU ranges registered for sends", MAX_TX);
    if (rc != CUDA_SUCCESS) dm_sys_close(fd);
    return rc == CUDA_SUCCESS ? CUDA_ERROR_OUT_OF_MEMORY : rc;
  }
  if (rc != CUDA_SUCCESS) {
    static int said;
    if (!said++) dm_note("the driver has no dma-buf support (CUDA error %d): placeholder descriptors stand for GPU ranges", rc);
    *(int *)handle = fd;
  }
  dm_note("dma-buf fd %d: GPU range 0x%llx, %zu bytes", fd, (unsigned long long)dptr, size);
  return CUDA_SUCCESS;
}

/* Where the bytes of descriptor fd at [off, off + len) are (dm_lock held): the
 * host address, and for a real GPU range the device address to read them
 * from first (*dptr, in *ctx; else 0). NULL when fd stands for no memory. */
static uint8_t *tx_bytes(int fd, size_t off, size_t len, CUdeviceptr *dptr, CUcontext *ctx) {
  int free_slot = -1;
  *dptr = 0;
  for (int i = 0; i < MAX_TX; i++) {
    if ((tx[i].base || tx[i].dptr) && tx[i].fd == fd) {
      if (off > tx[i].size || len > tx[i].size - off) return NULL;
      if (tx[i].dptr && !tx[i].base) { /* the shadow: pages only where bytes are sent from */
        void *m = mmap(NULL, tx[i].size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) return NULL;
        tx[i].base = m;
      }
      if (tx[i].dptr) *dptr = tx[i].dptr + off, *ctx = tx[i].ctx;
      return tx[i].base + off;
    }
    if (!tx[i].base && !tx[i].dptr && free_slot < 0) free_slot = i;
  }
  struct stat st; /* the test doubles' dma-buf: mapped */
  if (free_slot < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) return NULL;
  void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return NULL;
  tx[free_slot] = (__typeof__(tx[0])){fd, m, (size_t)st.st_size, 0, NULL};
  return off <= (size_t)st.st_size && len <= (size_t)st.st_size - off ? (uint8_t *)m + off : NULL;
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
  REAL(sendmsg);
  struct cmsghdr *cm = msg->msg_controllen ? CMSG_FIRSTHDR((struct msghdr *)msg) : NULL;
  if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_DEVMEM_OFFSET ||
      cm->cmsg_len < CMSG_LEN(2 * sizeof(int)))
    return real_sendmsg(fd, msg, flags);
  int v[2]; /* {dma-buf descriptor, offset}: gpudirectTCPXPostSend */
  memcpy(v, CMSG_DATA(cm), sizeof(v));
  size_t len = msg->msg_iovlen ? msg->msg_iov[0].iov_len : 0;
  CUdeviceptr dptr = 0;
  CUcontext ctx = NULL;
  pthread_mutex_lock(&dm_lock);
  uint8_t *p = v[1] < 0 ? NULL : tx_bytes(v[0], (size_t)v[1], len, &dptr, &ctx);
  pthread_mutex_unlock(&dm_lock);
  if (!p) {
    dm_note("sendmsg: offset %d + %zu bytes not in dma-buf fd %d", v[1], len, v[0]);
    errno = EFAULT;
    return -1;
  }
  /* A real GPU range: its bytes into the shadow first. Sends of the same
   * bytes at once copy the same values; the range is not closed while a
   * send from it is under way. */
  if (dptr && dm_cu_copy(ctx, 0, &(struct cu_run){dptr, p, len}, 1) != 0) {
    errno = EIO;
    return -1;
  }
  ssize_t n = send(fd, p, len, flags);
  trace("sendmsg fd %d: %zu bytes from dma-buf fd %d + %d: %zd", fd, len, v[0], v[1], n);
  return n;
}

int ioctl(int fd, unsigned long req, ...) {
  REAL(ioctl);
  va_list ap;
  va_start(ap, req);
  void *arg = va_arg(ap, void *);
  va_end(ap);
  if (req != DMA_BUF_CREATE_PAGES) return real_ioctl(fd, req, arg);
  int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (nfd < 0) return -1;
  /* The new descriptor stands for the same GPU range. */
  pthread_mutex_lock(&dm_lock);
  for (int i = 0; i < MAX_TX; i++)
    if (tx[i].dptr && tx[i].fd == fd) {
      int j = tx_slot();
      if (j >= 0) tx[j] = (__typeof__(tx[0])){nfd, NULL, tx[i].size, tx[i].dptr, tx[i].ctx};
      break;
    }
  pthread_mutex_unlock(&dm_lock);
  return nfd;
}

/* Descriptor fd is closing (dm_lock held): the GPU range it stood for is
 * forgotten, its mapping or shadow unmapped. */
void dm_tx_forget(int fd) {
  for (int i = 0; i < MAX_TX; i++)
    if ((tx[i].base || tx[i].dptr) && tx[i].fd == fd) {
      if (tx[i].base) munmap(tx[i].base, tx[i].size);
      tx[i].base = NULL;
      tx[i].dptr = 0;
    }
}
