/* The GPU unpacker's options (unpack.h) and their names, parsed and printed
 * without a GPU (unpack_names.c): the TPX_UNPACK modes and where the kernel
 * reads its entries from. */
#ifndef TPX_CUDA_UNPACK_NAMES_H
#define TPX_CUDA_UNPACK_NAMES_H

#ifdef __cplusplus
extern "C" {
#endif

enum tpx_unpack_mode { TPX_UNPACK_KERNEL = 0, TPX_UNPACK_D2D = 1, TPX_UNPACK_HOST = 2 };

/* Where the kernel reads the entries from. In every mode but DIRECT the CPU
 * copies the entries once and validates the copy, so what is checked is what
 * the GPU reads, and the caller may reuse its entries when submit returns. */
enum tpx_unpack_desc {
  /* Copied into a pinned staging ring, then one async copy per chunk into a
   * persistent device buffer ring; the kernel reads device memory. */
  TPX_UNPACK_DESC_COPY = 0,
  /* Copied into the pinned staging ring; the kernel reads them there through
   * the mapping (no copy on the stream). */
  TPX_UNPACK_DESC_MAPPED = 1,
  /* The kernel reads the caller's entries in place (chunk.meta_dev); no CPU
   * copy. The caller keeps them unchanged until the ticket completes (true
   * for the plugin's slots: they are reused only after irecvConsumed). */
  TPX_UNPACK_DESC_DIRECT = 2,
  /* Passed by value in the kernel launch's parameters (up to 2040 entries;
   * larger chunks fall back to MAPPED): no copy on the stream and no
   * dependent read over PCIe. */
  TPX_UNPACK_DESC_PARAM = 3
};

/* "kernel" | "d2d" | "host" (case-insensitive) -> TPX_UNPACK_*; TPX_EINVAL else. */
int tpx__unpacker_mode_parse(const char *s, int *mode);
const char *tpx__unpacker_mode_name(int mode);
int tpx__unpacker_desc_parse(const char *s, int *desc); /* "copy" | "mapped" | "direct" | "param" */
const char *tpx__unpacker_desc_name(int desc);

#ifdef __cplusplus
}
#endif
#endif
