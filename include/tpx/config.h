/* Configuration: one struct, filled with defaults, then from the environment
 * (TPX_* and the NCCL/UCCL synonyms listed in docs/CONFIG.md), then overridable
 * in code. src/common/config.c is the only place that reads the environment. */
#ifndef TPX_CONFIG_H
#define TPX_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tpx/export.h"

#ifdef __cplusplus
extern "C" {
#endif

enum tpx__log_level {
  TPX_LOG_NONE = 0,
  TPX_LOG_ERROR = 1,
  TPX_LOG_WARN = 2,
  TPX_LOG_INFO = 3,
  TPX_LOG_DEBUG = 4,
  TPX_LOG_TRACE = 5
};

/* Shared-key authentication (docs/SECURITY.md): key length bounds, bytes. */
/* pack_bytes (TPX_PACK_BYTES): "auto", the default: entries up to the chunk
 * size share chunks when the local transport takes vectored requests
 * (tpx_net_caps_t.iov: no copies) or GPU memory is in the transfer (staged
 * either way), else entries up to TPX_PACK_BYTES_RING bytes (through the
 * pack ring: a copy on each side). */
#define TPX_PACK_BYTES_AUTO ((size_t)-1)
#define TPX_PACK_BYTES_RING 8192

#define TPX_AUTH_KEY_MIN 16
#define TPX_AUTH_KEY_MAX 256

typedef struct tpx_config {
  int log_level;           /* TPX_LOG: none|error|warn|info|debug|trace */
  char net_plugin[256];    /* TPX_NET_PLUGIN: "" = built-in transport */
  /* built-in transport */
  char socket_ifname[256]; /* TPX_SOCKET_IFNAME (NCCL_SOCKET_IFNAME syntax) */
  char socket_family[16];  /* TPX_SOCKET_FAMILY: "" (IPv4 first), AF_INET or AF_INET6 */
  int nsocks;              /* TPX_NSOCKS: data sockets per comm; 0 = automatic
                              (tpx_config_nsocks) */
  int nthreads;            /* TPX_NTHREADS: I/O threads per device */
  int sock_strict;         /* TPX_SOCK_STRICT: enforce the TCPX plugin's rules */
  int sock_unpack;         /* TPX_SOCK_UNPACK: emulate the TCPX unpack contract */
  size_t sock_bounce_bytes; /* TPX_SOCK_BOUNCE_BYTES: unpack mode's bounce pool per recv comm
                               (and CUDA-send staging per send comm) */
  /* engine */
  int num_channels;        /* TPX_NUM_CHANNELS */
  size_t chunk_bytes;      /* TPX_CHUNK_BYTES, <= 4 MiB; 0 = automatic ("auto", the
                              default: per transfer, tpx_config_chunk) */
  int window;              /* TPX_WINDOW: requests in flight per comm (capped by the plugin) */
  int port_base;           /* TPX_PORT_BASE */
  int port_span;           /* TPX_PORT_SPAN: ports tried past base+gpu on EADDRINUSE */
  int timeout_ms;          /* TPX_TIMEOUT_MS: deadline per request */
  int connect_timeout_ms;  /* TPX_CONNECT_TIMEOUT_MS */
  char unpack[16];         /* TPX_UNPACK: kernel|d2d|host */
  int progress_thread;     /* TPX_PROGRESS_THREAD: 1 = background progress */
  size_t staging_bytes;    /* TPX_STAGING_BYTES: pinned staging per channel direction */
  size_t inline_bytes;     /* TPX_INLINE_BYTES: host transfers up to this size ride in the
                              engine's control message (0 = never) */
  /* hostile peers (docs/SECURITY.md) */
  char allow_dial[256];    /* TPX_ALLOW_DIAL: addresses/CIDRs a peer's transport handles may
                              name besides its control connection's address; "*" = any */
  int max_dials;           /* TPX_MAX_DIALS: transport connections one peer's handles may ask for */
  size_t max_held_bytes;    /* TPX_MAX_HELD_BYTES: what one peer's requests we hold cost (entries included) */
  size_t max_ep_held_bytes; /* TPX_MAX_EP_HELD_BYTES: the same, all peers of the endpoint */
  int dial_syns;           /* TPX_DIAL_SYNS: SYNs the built-in transport may send per data socket of
                              one connect, retries and the kernel's retransmissions included */
  int max_unauth;          /* TPX_MAX_UNAUTH: incoming control connections before their HELLO */
  int max_unauth_per_source; /* TPX_MAX_UNAUTH_PER_SOURCE: of those, from one address (IPv6: /64) */
  size_t max_preauth_bytes; /* TPX_MAX_PREAUTH_BYTES: largest frame before the handshake */
  int max_peers;           /* TPX_MAX_PEERS: peers (in setup or connected) per endpoint */
  int max_notifs;          /* TPX_MAX_NOTIFS: notifications of one peer not yet popped */
  size_t max_notif_bytes;  /* TPX_MAX_NOTIF_BYTES: what they cost (payload + bookkeeping) */
  size_t max_ep_notif_bytes; /* TPX_MAX_EP_NOTIF_BYTES: the same for all peers of the endpoint */
  int max_ctl_queue;       /* TPX_MAX_CTL_QUEUE: a peer's requests queued or being served */
  size_t max_ctl_out_bytes; /* TPX_MAX_CTL_OUT_BYTES: control bytes waiting for a peer to read them */
  /* shared-key authentication (docs/SECURITY.md): set by TPX_AUTH_KEY, TPX_AUTH_KEY_FILE or
     tpx_config_set_auth_key; never printed */
  unsigned char auth_key[TPX_AUTH_KEY_MAX];
  size_t auth_key_len;      /* 0: no key, peers are not authenticated */
  char auth_key_file[256];  /* TPX_AUTH_KEY_FILE: the file the key was read from ("": none) */
  char auth_error[160];     /* why a key setting from the environment was refused: endpoints
                               then refuse to start (tpx_config_check) instead of running
                               without the key */
  int net_abi;             /* TPX_NET_ABI: drive exactly ncclNetPlugin_v<net_abi> (7..12);
                              0 = the highest the plugin exports */
  char gpu_nic_map[256];   /* TPX_GPU_NIC_MAP: static GPU -> NIC map ("0-3:eth1,eth2;4-7:eth3,eth4");
                              "" = detected from sysfs (docs/TOPOLOGY.md) */
  int progress_spin_us;    /* TPX_PROGRESS_SPIN_US: 0 = the progress thread naps 10-100 us when a
                              pass finds nothing done with requests in flight; > 0 = it keeps
                              polling (yielding between passes) for this long after the last
                              progress, then blocks as when idle (NCCL's proxy style) */
  size_t pack_bytes;       /* TPX_PACK_BYTES: entries of a vectored write / read up to this
                              size (rounded down to a power of two) share chunks (host memory, or
                              GPU memory both sides stage); < 2 = never;
                              TPX_PACK_BYTES_AUTO (the default, "auto"): the transfer's chunk when the
                              transport takes iovecs (no copies) or GPU memory is in the transfer,
                              else TPX_PACK_BYTES_RING */
  /* rendezvous through etcd (tpx/rendezvous.h, docs/RENDEZVOUS.md) */
  char etcd_endpoints[256]; /* TPX_ETCD_ENDPOINTS: "http://host:port[,...]"; "" = none */
  char etcd_job[64];       /* TPX_ETCD_JOB: the job's namespace ([A-Za-z0-9._-]); "" = "default" */
  int etcd_timeout_ms;     /* TPX_ETCD_TIMEOUT_MS: how long a lookup waits (and any one etcd request) */
  int etcd_ttl_s;          /* TPX_ETCD_TTL_S: lease of what this process publishes */
  /* diagnostics */
  char timeline[256];      /* TPX_TIMELINE: record the data path's events, written to
                              <timeline>.<pid> at exit (process-wide: read once, at load) */
  /* connection setup on transient errors (docs/RELIABILITY.md, "Connection setup") */
  int socket_retry_cnt;    /* TPX_SOCKET_RETRY_CNT: connect retries after an attempt failed with
                              EHOSTUNREACH, ENETUNREACH, ECONNREFUSED or ETIMEDOUT (0 = none);
                              TPX_CONNECT_TIMEOUT_MS still bounds them */
  int socket_retry_sleep_msec; /* TPX_SOCKET_RETRY_SLEEP_MSEC: pause before retry k is k times this,
                              at most max(1000, this) ms */
  /* channels (docs/RELIABILITY.md, "Links that differ or go away") */
  int stripe;              /* TPX_STRIPE: 1 "adaptive" (the default: chunks follow each channel's
                              measured speed, a lost channel's chunks are sent again on the others),
                              0 "fixed" (chunk i on channel (first + i) % channels; a lost channel
                              fails the peer), as peers without adaptive striping do */
  int channel_stall_ms;    /* TPX_CHANNEL_STALL_MS: a channel whose requests make no progress this
                              long while another channel of the peer moves is taken for lost */
  int peer_timeout_ms;     /* TPX_PEER_TIMEOUT_MS: a ready peer with no sign of life for this long
                              fails (docs/RELIABILITY.md, "A silent peer"); 0 = never judged */
  int integrity;           /* TPX_INTEGRITY: 1 (the default): every chunk carries a CRC-32C its
                              receiver checks before the chunk counts as landed, with a peer that
                              has it too (docs/SECURITY.md, "Data integrity"); 0: unchecked */
  int integrity_threads;   /* TPX_INTEGRITY_THREADS: threads that sum large chunks beside the
                              progress thread; 0 (the default) = a quarter of the CPUs, 1..8, from
                              4 CPUs, none (sums in place) below */
  int encrypt;             /* TPX_ENCRYPT: 1 = the built-in transport's data sockets and the
                              engine's control connection carry AES-256-GCM records under keys
                              derived from the auth key (required); docs/SECURITY.md */
} tpx_config_t;

/* Defaults only; never reads the environment. */
TPX_API void tpx_config_defaults(tpx_config_t *cfg);

/* Defaults, then the environment. A malformed value is reported (warn, once
 * per process for each value) and the default kept; returns TPX_EINVAL in that case, 0 otherwise (cfg usable
 * either way). */
TPX_API int tpx_config_from_env(tpx_config_t *cfg);

/* Every numeric field within the range its environment variable accepts
 * (docs/CONFIG.md): 0, or TPX_EINVAL naming the variable. Endpoint creation
 * applies it, so code and environment have the same limits. */
TPX_API int tpx_config_check(const tpx_config_t *cfg);
/* Set one field by name, with the environment's parsing and range checks:
 * key is the variable (TPX_NUM_CHANNELS), its synonym, or the variable
 * without "TPX_" in any case (num_channels); value as in the environment
 * ("8", "512K", "info"). TPX_ENOENT for an unknown key, TPX_EINVAL for a
 * malformed or out-of-range value (cfg unchanged either way). */
TPX_API int tpx_config_set(tpx_config_t *cfg, const char *key, const char *value);
/* The authentication key as bytes (a key file read elsewhere, a binary
 * key): TPX_AUTH_KEY_MIN..TPX_AUTH_KEY_MAX bytes, else TPX_EINVAL (cfg
 * unchanged). key NULL with len 0 removes the key. tpx_config_set also takes
 * "TPX_AUTH_KEY" (the string is the key) and "TPX_AUTH_KEY_FILE" (a path:
 * the file must be a regular file owned by this user or root, neither
 * readable nor writable by group or others; one trailing newline is not part
 * of the key), with the same checks as the environment. */
TPX_API int tpx_config_set_auth_key(tpx_config_t *cfg, const void *key, size_t len);
/* sizeof(tpx_config_t) of the library: for bindings that allocate one
 * without knowing its layout (the Python package). */
TPX_API size_t tpx_config_size(void);

/* The process-wide configuration read from the environment once. */
TPX_API const tpx_config_t *tpx_config_global(void);

/* Data sockets per comm of the built-in transport when `comms` comms carry
 * one peer's traffic together (an endpoint's channels; 1 for a comm on its
 * own): cfg->nsocks when set (> 0), else the machine's default for one comm
 * (4; 2 with at most 2 CPUs), lowered so that the comms together have no
 * more data sockets than the machine has CPUs (at least 1 each). */
TPX_API int tpx_config_nsocks(const tpx_config_t *cfg, int comms);
/* The chunk size of a write, read or send of `bytes` bytes over `channels`
 * channels: cfg->chunk_bytes when set (> 0), else automatic: 512 KiB, and
 * on machines of fewer than 4 CPUs larger chunks (up to 2 MiB, a power of
 * two) as long as every channel still gets a whole one, since there each
 * chunk's requests and wake-ups cost CPU the copies need (docs/CONFIG.md). */
TPX_API size_t tpx_config_chunk(const tpx_config_t *cfg, uint64_t bytes, int channels);
/* Print the effective configuration as a table (name, value, synonym): the
 * values that differ from the defaults first, then the defaults, each part
 * in docs/CONFIG.md's order of tiers. */
TPX_API void tpx_config_print(const tpx_config_t *cfg, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
