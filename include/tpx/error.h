/* tpx error codes.
 *
 * Every tpx_* call returns 0 on success or a negative code below. Codes -1..-7
 * mirror ncclResult_t 1..7 (so a plugin's result r maps to -r); the rest are
 * ours. tpx_last_error() gives the detail message of the most recent failure on
 * the calling thread.
 */
#ifndef TPX_ERROR_H
#define TPX_ERROR_H

#include "tpx/export.h"

#ifdef __cplusplus
extern "C" {
#endif

enum tpx_err {
  TPX_OK = 0,
  TPX_ECUDA = -1,        /* CUDA call failed (ncclUnhandledCudaError) */
  TPX_ESYSTEM = -2,      /* system error; TCPX: peer closed (ncclSystemError) */
  TPX_EINTERNAL = -3,    /* internal error (ncclInternalError) */
  TPX_EINVAL = -4,       /* invalid argument (ncclInvalidArgument) */
  TPX_EUSAGE = -5,       /* invalid usage (ncclInvalidUsage) */
  TPX_EREMOTE = -6,      /* remote side failed or closed (ncclRemoteError) */
  TPX_EINPROGRESS = -7,  /* operation still in progress (ncclInProgress) */
  TPX_ETIMEDOUT = -8,    /* a deadline passed */
  TPX_ENOMEM = -9,       /* out of memory */
  TPX_ENOTSUP = -10,     /* not supported by this plugin / build */
  TPX_ENOENT = -11,      /* not found (plugin file, interface, handle) */
  TPX_ENOSYM = -12,      /* plugin exports no known ncclNetPlugin symbol */
  TPX_EVERSION = -13,    /* unsupported version (plugin ABI, wire protocol) */
  TPX_ETRUNC = -14,      /* message larger than the posted receive */
  TPX_ECLOSED = -15,     /* connection closed */
  TPX_EPROTO = -16,      /* malformed message from the peer */
  TPX_EACCES = -17,      /* outside registered memory or its access rights */
  TPX_EADDRINUSE = -18,  /* no free port in the allowed range */
  TPX_EAGAIN = -19,      /* resource temporarily exhausted; retry */
  TPX_ECANCELED = -20,   /* cancelled by close/teardown */
  TPX_EAUTH = -21,       /* authentication failed: wrong, missing or unexpected key
                            (TPX_AUTH_KEY, docs/SECURITY.md) */
  TPX_EINTEGRITY = -22,  /* data failed its check: a chunk's bytes differ from what the peer
                            sent (TPX_INTEGRITY, docs/SECURITY.md) */
  TPX_EUNKNOWN = -23     /* sentinel: unknown code */
};

/* Short static description of an error code ("invalid argument"). Never NULL. */
TPX_API const char *tpx_strerror(int err);

/* Detail of the most recent failure on this thread (who, what, why).
 * Never NULL; empty string when none was recorded. */
TPX_API const char *tpx_last_error(void);

/* Map to/from ncclResult_t values (0..7). */
TPX_API int tpx_to_nccl(int err);
TPX_API int tpx_from_nccl(int nccl_result);

#ifdef __cplusplus
}
#endif
#endif
