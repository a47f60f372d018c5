/* libtpx-devmem-standin.so: a stand-in for the kernel's devmem TCP receive
 * path and the NIC, preloaded (LD_PRELOAD) into a process running Google's
 * GPUDirect-TCPX plugin on a machine without them (docs/A3HIGH.md). It acts
 * only on what only the plugin asks for:
 *
 * - recvmsg(..., MSG_SOCK_DEVMEM): the bytes read go into free pages of the
 *   receive buffer RxDM handed out for the GPU the socket's flow-steering
 *   rule names (asked of the RxDM stand-in's standin_flow_gpu socket, as the
 *   NIC would look the flow up; the buffer fetched from get_gpu_fd_<pci> and
 *   get_gpu_metadata_<pci> as the plugin fetches it), and the reply is one
 *   SCM_DEVMEM_OFFSET control message per page (devmem_pages.h has the
 *   rules). No free page: EAGAIN, as if nothing had arrived.
 * - setsockopt(SOL_SOCKET, SO_DEVMEM_DONTNEED): the tokens come back; 0, or
 *   EINVAL for a token given back twice or never handed out (counted).
 * - cuMemGetHandleForAddressRange (the plugin's dma-buf of GPU memory for
 *   sends): the driver's answer, and which GPU range the descriptor stands
 *   for is noted; where the driver has no dma-buf support, a placeholder
 *   descriptor (an eventfd) stands for the range instead.
 * - ioctl(DMA_BUF_CREATE_PAGES) on a dma-buf: accepted (a new descriptor of
 *   the same memory), as the devmem kernel binds it to the NIC.
 * - sendmsg(..., SCM_DEVMEM_OFFSET {dma-buf fd, offset}): the bytes are sent
 *   from the dma-buf itself, MSG_ZEROCOPY kept, so the kernel's own
 *   completions arrive on the error queue as the plugin expects.
 * - realpath("/sys/class/net/lo/device"): a PCI-looking path, since the
 *   plugin reads the NIC's PCI address unchecked for CUDA registrations.
 *
 * Two kinds of memory, told apart by the descriptors: the CUDA test doubles'
 * (tests/fakes/cuda: memfds, mapped and used as they are) and a real GPU's
 * (NVIDIA's shareable handles and dma-bufs cannot be mapped): the receive
 * buffer is imported with the driver's VMM calls (when the plugin asks RxDM
 * for it) and written with cuMemcpyHtoDAsync on a non-blocking stream in a
 * CUDA context of the stand-in's own (copy_ctx); a send reads the
 * registered range with cuMemcpyDtoHAsync into a host shadow of the range,
 * whose pages stay put until the zero-copy completion, as the GPU memory
 * would. The driver is found with dlopen, only when real GPU memory shows
 * up.
 * DEVMEM_STANDIN_LOG=1: one line per refusal or buffer on stderr, and the
 * copies' totals (=2: a line per receive, send and token return too).
 * DEVMEM_STANDIN_COPY_CTX=owner: copies in the memory's own context. */
#include "devmem_standin.h"

/* close() is ours too, and takes the locks: their holders close with this. */
int dm_sys_close(int fd) {
  REAL(close);
  return real_close(fd);
}

int close(int fd) {
  REAL(close);
  pthread_mutex_lock(&dm_lock);
  dm_rx_forget(fd);
  dm_tx_forget(fd);
  pthread_mutex_unlock(&dm_lock);
  return real_close(fd);
}

char *realpath(const char *path, char *resolved) {
  REAL(realpath);
  if (path && strcmp(path, "/sys/class/net/lo/device") == 0) {
    if (resolved) return strcpy(resolved, LO_PCI_PATH);
    return strdup(LO_PCI_PATH);
  }
  return real_realpath(path, resolved);
}
