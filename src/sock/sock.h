/* The built-in TCP transport ("tpx"): internal declarations, the types'
 * floor of src/sock/ (this header has no sock.c: the top is net.c).
 *
 * Layout of the code:
 *   ifaces.c   interface selection (common/ifname.h matcher), addresses
 *   handles.c  the per-net handle table: every object given to the caller
 *              (listen/send/recv comm, memory handle, connect state, request)
 *              is an opaque token checked on every call, so unknown, freed and
 *              wrong-kind handles are reported instead of dereferenced; a
 *              net's fresh ids; a buffer checked against its registration;
 *              the net's own check (tpx__sock_net_of)
 *   setup.c    listen, connect, accept (never block; state kept in the handle
 *              buffer / the listen comm)
 *   ready.c    one epoll set over the sockets in setup, so that accept reads
 *              only the listen comms with something to read
 *   io.c       the per-device pool of epoll I/O threads
 *   comm.c     comms, requests, isend/irecv/test, close, per-socket progress
 *   iov.c      vectored requests (isendv / irecvv): checks, copies, slices
 *   seal.c     the record layer of TPX_ENCRYPT: AES-256-GCM records per data
 *              socket, sealed and opened in the I/O threads
 *   unpack.c   unpack mode (TPX_SOCK_UNPACK=1): the TCPX receive contract
 *              (bounce pages, loadMeta slots, irecvConsumed) and the staging
 *              of CUDA sends; docs/UNPACK.md
 *   net.c      open/destroy, properties, regMr, the ops tables: the top,
 *              which no file below calls
 *
 * Data path. A comm has nsocks + 1 sockets: socket 0 carries the small
 * messages (<= TPX_SOCK_INLINE_MAX), sockets 1..nsocks the larger ones, cut
 * by the sender into at most nsocks contiguous parts (tpx__sock_split). Every
 * part starts with a header naming its message, size, offset and length
 * (wire.h), so each socket is a self-describing stream and the receiver
 * needs no per-message control traffic: the thread serving a socket reads a
 * part header, waits (if need be) until the matching receive is posted, and
 * reads the bytes straight into the posted buffer. On the sender the caller
 * queues the parts when it posts and kicks their sockets' threads. Each
 * request counts what is left (`pending`: parts on the sender, bytes on the
 * receiver, where the size is learned from the first part to arrive); the
 * last part to finish completes it. The receiver believes no header: each
 * part is claimed before its first byte is read (its range must lie in the
 * message, agree on the size, overlap no earlier part; a socket brings at
 * most one part of a message, so at most nsocks + 1 ranges per receive), a
 * part counts only once every byte of it is read, and a receive is done only
 * when its parts cover exactly [0, size). A header that breaks these rules
 * breaks the comm (TPX_EPROTO): every socket stops, and every receive fails
 * once no socket can write into it any more.
 *
 * Threads. The I/O threads are the only ones touching sockets after setup:
 * the caller's isend/irecv/test only fill ring slots, queue parts, and kick
 * (wake) threads. Threads use edge-triggered epoll plus an eventfd, spin a
 * bounded time after activity only when the process has CPUs to spare, and
 * never spin on idle comms. Each socket goes to the least-loaded thread of
 * its device's pool. A receive socket whose next part belongs to a receive
 * not yet posted stops reading and is kicked by irecv.
 */
#ifndef TPX_SOCK_SOCK_H
#define TPX_SOCK_SOCK_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "common/aead.h"
#include "common/ring.h"
#include "tcpx/contract.h"
#include "tpx/config.h"
#include "tpx/net.h"

#define TPX_SOCK_MAX_DEVS 32
#define TPX_SOCK_MAX_NSOCKS 64
#define TPX_SOCK_MAX_THREADS 64
/* Request slots per comm: NCCL keeps up to 32 in flight; 64 leaves room. */
#define TPX_SOCK_RING 64
/* The GPUDirect-TCPX plugin's request limit, enforced in strict mode. */
#define TPX_SOCK_STRICT_REQUESTS TPX_TCPX_MAX_REQUESTS
/* Messages up to this size travel whole on socket 0. */
#define TPX_SOCK_INLINE_MAX (16u * 1024u)
/* Smallest part the sender cuts a message into (tpx__sock_split); parts are
 * 4 KiB multiples. A sender's choice: the receiver follows the part headers. */
#define TPX_SOCK_MIN_PART (64u * 1024u)
/* Largest message (NCCL's limit for maxP2pBytes). */
#define TPX_SOCK_MAX_MSG (1ull << 40)
/* Objects (comms, memory handles, connect states) alive per net. */
#define TPX_SOCK_MAX_OBJECTS 65534
#define TPX_SOCK_IFNAMSIZ 16

/* ---- interfaces (ifaces.c) ------------------------------------------------- */

/* One usable address of one interface (what getifaddrs gives). */
typedef struct tpx_sock_ifaddr {
  char name[TPX_SOCK_IFNAMSIZ];
  int up;
  int loopback;
  struct sockaddr_storage addr; /* AF_INET or AF_INET6, port 0 */
} tpx_sock_ifaddr_t;

/* Pick devices from a list of interface addresses: spec (NCCL_SOCKET_IFNAME
 * syntax, common/ifname.h; NULL/empty: NCCL's automatic choice, which falls
 * back to docker* and lo* only when nothing else is up), family (0 = IPv4
 * first, AF_INET, AF_INET6). One entry per interface, in first-seen order,
 * with its preferred address (IPv4; else global IPv6; else link-local IPv6;
 * loopback: 127.0.0.1 or ::1). Returns the count (<= max) or a negative
 * code. Pure. */
int tpx__sock_select(const char *spec, int family, const tpx_sock_ifaddr_t *all, int n,
                    tpx_sock_ifaddr_t *out, int max);

/* Parse TPX_SOCKET_FAMILY: 0, AF_INET, AF_INET6 or TPX_EINVAL. */
int tpx__sock_parse_family(const char *s);

/* "1.2.3.4:80" / "[::1]:80" */
void tpx__sock_addr_str(const struct sockaddr_storage *a, char *buf, size_t cap);
socklen_t tpx__sock_addr_len(const struct sockaddr_storage *a);

/* ---- handle table (handles.c) ---------------------------------------------- */

enum tpx_sock_kind {
  TPX_SK_NONE = 0,
  TPX_SK_LISTEN,
  TPX_SK_SEND,
  TPX_SK_RECV,
  TPX_SK_MR,
  TPX_SK_CONNECT,
};

struct tpx_sock_reg_entry {
  _Atomic(void *) obj;
  _Atomic uint32_t gen; /* bumped on every free */
  _Atomic int kind;
  uint32_t next_free;
};

#define TPX_SOCK_REG_PAGE 1024
typedef struct tpx_sock_reg {
  pthread_mutex_t mu;
  _Atomic(struct tpx_sock_reg_entry *)
      pages[(TPX_SOCK_MAX_OBJECTS + TPX_SOCK_REG_PAGE) / TPX_SOCK_REG_PAGE];
  _Atomic uint32_t hiwater; /* entries ever handed out */
  uint32_t free_head;       /* index + 1, 0 = none */
  uint32_t salt;            /* first generation of new entries (per net) */
  int live;
} tpx_sock_reg_t;

/* Object tokens: bits 0..31 index + 1, bits 32..47 generation, bits 48..63
 * zero. Request tokens: bits 48..63 comm index + 1, bits 32..47 the comm's
 * generation, bits 0..31 the request's sequence number. Never NULL, never
 * 0x1 (NCCL's "optional receive completion" marker). */
void tpx__sock_reg_init(tpx_sock_reg_t *r, uint32_t salt);
void tpx__sock_reg_fini(tpx_sock_reg_t *r);
uint64_t tpx__sock_reg_add(tpx_sock_reg_t *r, int kind, void *obj); /* 0 when full */
/* The object for token if alive and of `kind` (TPX_SK_NONE: any), else NULL;
 * *kind_out (may be NULL) receives its kind. */
void *tpx__sock_reg_get(tpx_sock_reg_t *r, uint64_t token, int kind, int *kind_out);
void tpx__sock_reg_del(tpx_sock_reg_t *r, uint64_t token);
/* Iterate live objects: *it starts at 0; returns the next token or 0. */
uint64_t tpx__sock_reg_next(tpx_sock_reg_t *r, uint32_t *it);

/* ---- devices and the net (net.c) ------------------------------------------- */

struct tpx_sock_pool;

typedef struct tpx_sock_dev {
  char name[TPX_SOCK_IFNAMSIZ];
  struct sockaddr_storage addr; /* listen address, port 0 */
  char pci_path[256];
  int speed_mbps;
  pthread_mutex_t pool_mu;
  struct tpx_sock_pool *pool; /* created with the first comm, freed with the last */
  int pool_refs;
} tpx_sock_dev_t;

/* ---- setup readiness (ready.c) --------------------------------------------- */

/* One epoll set per net over the listen sockets and the accepted
 * connections owing their hello (data: the listen comm's token). */
typedef struct tpx_sock_ready {
  pthread_mutex_t mu; /* refresh, and freeing a listen comm */
  int ep;
  _Atomic uint64_t polled; /* last refresh */
} tpx_sock_ready_t;

typedef struct tpx_sock_net tpx_sock_net_t;
int tpx__sock_ready_init(tpx_sock_ready_t *r);
void tpx__sock_ready_fini(tpx_sock_ready_t *r);
int tpx__sock_ready_watch(tpx_sock_ready_t *r, int fd, uint64_t token);
void tpx__sock_ready_unwatch(tpx_sock_ready_t *r, int fd);
/* Mark (mark(listen comm)) every listen comm with a readable socket, unless
 * a refresh ran less than 100 us ago or runs in another thread now. */
void tpx__sock_ready_refresh(tpx_sock_net_t *sn, void (*mark)(void *listen));

typedef struct tpx_sock_net {
  tpx_net_t pub; /* pub.impl == this */
  tpx_config_t cfg;
  int ndev;
  tpx_sock_dev_t devs[TPX_SOCK_MAX_DEVS];
  tpx_sock_reg_t reg;
  tpx_sock_ready_t ready; /* setup readiness (ready.c) */
  _Atomic uint64_t rng; /* comm ids, nonces */
  int unpack;           /* unpack mode (cfg.sock_unpack) */
  int gpu_ok;           /* unpack mode: a GPU is usable (pools pinned + mapped, CUDA sends) */
  long tcpx_chunk;      /* unpack mode: NCCL_DYNAMIC_CHUNK_SIZE as the plugin reads it; 0: every
                           send of bytes stalls its comm (0-byte pieces, docs/CONFIG.md) */
  int encrypt;          /* TPX_ENCRYPT: data sockets carry sealed records (seal.c) */
  uint8_t plugin_key[TPX_NET_KEY_BYTES]; /* encrypt: the session key of listen / connect called
                           without one (NCCL's calls), from the auth key */
  uint64_t seal_rekey;  /* records per key (0: TPX_SEAL_REKEY_RECORDS; tests) */
  int host_recv_stalls; /* unpack mode taking CUDA pointers, as the TCPX plugin: a receive into
                           host memory stalls its comm for good (docs/UNPACK.md, "Host-memory
                           receives"); tests may set it on a GPU-less host */
} tpx_sock_net_t;

/* A fresh 64-bit id (comm ids, nonces): handles.c. */
uint64_t tpx__sock_random(tpx_sock_net_t *sn);
/* The transport state of a tpx_net_t, or NULL (logged) if it is not ours:
 * handles.c, the floor, as is the devices entry every ops table of ours
 * has (tpx__sock_devices), by which a net is known as ours. */
tpx_sock_net_t *tpx__sock_net_of(tpx_net_t *net, const char *fn);
int tpx__sock_devices(tpx_net_t *net, int *ndev);

/* ---- I/O threads (io.c) ---------------------------------------------------- */

struct tpx_sock_conn;
struct tpx_sock_io;

struct tpx_sock_comm;

typedef struct tpx_sock_pool {
  int nthreads;
  struct tpx_sock_io *thr;
  unsigned next;      /* rotating tie-break for placement (mu) */
  uint64_t spin_ns;   /* spin after activity before sleeping */
  int pair;           /* place both ends of an in-process comm on the same threads */
  struct tpx_sock_comm *comms; /* comms placed on this pool (mu) */
  pthread_mutex_t mu; /* placement; with cv: detach acknowledgements */
  pthread_cond_t cv;
  char devname[TPX_SOCK_IFNAMSIZ];
} tpx_sock_pool_t;

int tpx__sock_pool_create(const char *devname, int nthreads, tpx_sock_pool_t **out);
/* Socket weights for placement: socket 0 carries only small messages. */
#define TPX_SOCK_W_CTRL 1
#define TPX_SOCK_W_DATA 4
/* Choose the threads of a new comm's sockets (conns[i].placed) and list the
 * comm on the pool / take it off and give the weights back. */
void tpx__sock_pool_place(tpx_sock_pool_t *p, struct tpx_sock_comm *m);
void tpx__sock_pool_forget(tpx_sock_pool_t *p, struct tpx_sock_comm *m);
void tpx__sock_pool_destroy(tpx_sock_pool_t *p);
/* Acquire / release the device's I/O pool: made with its first comm, gone
 * with its last. */
int tpx__sock_pool_get(tpx_sock_net_t *sn, int dev, tpx_sock_pool_t **out);
void tpx__sock_pool_put(tpx_sock_net_t *sn, int dev);
/* Hand a connected socket to thread `t` (edge-triggered epoll) and kick it. */
int tpx__sock_io_attach(struct tpx_sock_io *t, struct tpx_sock_conn *c);
/* Take conns back: when it returns, their threads hold no reference to them.
 * Synchronous (a round trip to each thread). */
void tpx__sock_io_detach(struct tpx_sock_conn **cs, int n);
/* Ask the conn's thread to run its progress function soon. Any thread. */
void tpx__sock_io_kick(struct tpx_sock_conn *c);

/* Per-thread scratch for discarded (truncated) bytes. */
#define TPX_SOCK_SCRATCH (64u * 1024u)

/* ---- iovec requests (iov.c) ------------------------------------------------ */

struct tpx_sock_req;

/* isendv / irecvv (tpx/net.h): a request's bytes are its pieces one after
 * another; parts and the wire are those of one buffer of the same size,
 * only the reads and writes of a part go through the pieces' sub-list. */

/* The pieces covering bytes [off, off + len) of iov[0..cnt): at most `max`
 * entries into out (empty pieces skipped), *got the bytes they hold
 * (< len when max ran out, or the list ends first). Returns the count. */
int tpx__sock_iov_slice(const struct iovec *iov, int cnt, size_t off, size_t len, struct iovec *out,
                        int max, size_t *got);
/* A caller's list: count in [0, TPX_NET_IOV_MAX], no NULL piece with bytes,
 * no wrap, at most TPX_SOCK_MAX_MSG together (*total). Logged (fn). */
int tpx__sock_iov_check(const struct iovec *iov, int cnt, size_t *total, const char *fn);
/* Copy the list into the (free) request slot r. 0 or TPX_ENOMEM (quiet). */
int tpx__sock_req_set_iov(struct tpx_sock_req *r, const struct iovec *iov, int cnt);

/* ---- record layer (seal.c): TPX_ENCRYPT --------------------------------------- */

/* A record: u32 plaintext length, ciphertext, 16-byte tag (wire.h, 4). */
#define TPX_SEAL_HDR 4
#define TPX_SEAL_TAG TPX_AEAD_TAG_BYTES
/* Plaintext per record: large enough that the per-record cost (a nonce, a
 * tag, a send) is small next to AES at a few GB/s per core. */
#define TPX_SEAL_REC_MAX (256u * 1024u)
/* Records per key before both ends step to the next (2^20 full records =
 * 256 GiB, well inside AES-GCM's bounds for one key). */
#define TPX_SEAL_REKEY_RECORDS (1ull << 20)
/* Pieces of the caller's list one record takes at most. */
#define TPX_SEAL_IOV 128

typedef struct tpx_sock_seal tpx_sock_seal_t;
/* The key of the data socket whose hello is `hello` (its first
 * TPX_WIRE_HELLO_MACED bytes) under the session key. */
int tpx__sock_seal_key(const uint8_t *session_key, const uint8_t *hello, uint8_t out[TPX_AEAD_KEY_BYTES]);
/* A record layer for one direction (send 1: seals). rekey: records per key
 * (0: TPX_SEAL_REKEY_RECORDS; tests make it small). */
int tpx__sock_seal_new(const uint8_t key[TPX_AEAD_KEY_BYTES], int send, uint64_t rekey, tpx_sock_seal_t **out);
void tpx__sock_seal_free(tpx_sock_seal_t *s);
/* As sendmsg(fd) of the list (plaintext from the first unsent byte): the
 * plaintext bytes of a record wholly in the kernel now, or -1 with errno
 * (EAGAIN: the record's rest goes at the next call, with the same list). */
ssize_t tpx__sock_seal_send(tpx_sock_seal_t *s, int fd, const struct iovec *iov, int niov);
/* As recvmsg(fd) into the list: checked plaintext only; 0 when the peer
 * closed; -1 with errno: EAGAIN, EBADMSG (a record failed authentication),
 * EMSGSIZE (a record length out of range), or the socket's error. */
ssize_t tpx__sock_seal_recv(tpx_sock_seal_t *s, int fd, const struct iovec *iov, int niov);

/* ---- comms and requests (comm.c) ------------------------------------------- */

struct tpx_sock_comm;

/* Receive `pending` before the first part header of the message arrived:
 * larger than any message, so no byte count can bring it to 0 (wire.h). */
#define TPX_SOCK_UNSIZED (1ull << 62)

typedef struct tpx_sock_req {
  /* written by the caller before the request is published */
  char *buf;   /* NULL for a vectored request */
  size_t size; /* send: bytes to send; recv: capacity */
  struct iovec
      *iov;   /* vectored request (iovcnt > 0): its pieces (iov.c; kept for the slot's next ones) */
  int iovcnt; /* 0: one buffer */
  int iov_cap; /* entries allocated at iov */
  uint64_t seq;
  uint64_t stage_end; /* send from CUDA memory: its staging span's end (0 = none) */
  /* recv: the parts claimed so far (comm->rx_mu; reset by irecv). Parts of
   * one message never overlap and lie in [0, size): rx_covered, their sum,
   * reaches the size only when they cover exactly [0, size). */
  uint64_t rx_seq;     /* the receive this accounting belongs to */
  uint64_t rx_msize;   /* 0 until a part was claimed, then msg_size + 1 */
  uint64_t rx_covered; /* bytes of the claimed parts */
  uint32_t rx_nparts;  /* their ranges: comm->rx_ranges[slot * (nsocks + 1) ..] */
  /* written by I/O threads */
  size_t msg_size;          /* recv: size announced by the sender */
  _Atomic uint64_t pending; /* send: parts left; recv: bytes not yet accounted for:
                               those of no part yet, and every byte of each part not
                               wholly read (+ TPX_SOCK_UNSIZED until sized); 0 =
                               complete, and then no thread writes into buf */
  _Atomic int err;          /* first failure (tpx code), 0 = none */
  /* caller only */
  int state; /* TPX_SR_* */
} tpx_sock_req_t;

/* DONE: unpack-mode receive that test reported done; its slot and bounce
 * pages stay held until irecvConsumed. */
enum { TPX_SR_FREE = 0, TPX_SR_INFLIGHT, TPX_SR_RELEASED, TPX_SR_DONE };

/* A part's range of its message, as claimed by its header. */
typedef struct tpx_sock_range {
  uint64_t off, len;
} tpx_sock_range_t;

/* One contiguous part of a message on one socket. */
typedef struct tpx_sock_part {
  tpx_sock_req_t *req;
  char *buf;               /* buffer start + offset; NULL for a vectored request's part */
  const struct iovec *iov; /* vectored: the request's pieces, the part at `off` of them */
  int iovcnt;              /* 0: buf */
  size_t off;              /* the part's offset in its message */
  size_t len;  /* bytes on the wire (after the part header) */
  size_t keep; /* recv: bytes that fit the buffer; the rest is discarded */
  uint64_t seq;
  const uint32_t *pages; /* unpack recv: bounce page of each 4 KiB of the part (buf unused) */
  uint8_t hdr[32];       /* send: the part header (TPX_WIRE_PART_BYTES) */
} tpx_sock_part_t;

typedef struct tpx_sock_conn {
  int fd;
  int index; /* 0 = control, 1..nsocks = data */
  struct tpx_sock_comm *comm;
  struct tpx_sock_io *thr;
  struct tpx_sock_io *placed; /* thread whose load counts this socket */
  /* What its I/O thread runs after an event or a kick: set by comm.c, which
   * io.c below it does not call (tpx__sock_conn_progress). */
  int (*progress)(struct tpx_sock_conn *c, void *scratch);
  /* kick stack (any thread pushes, the owner pops) */
  _Atomic int kicked;
  struct tpx_sock_conn *kick_next;
  /* the owner thread's run queue */
  struct tpx_sock_conn *rq_next, *rq_prev;
  int in_rq;
  /* send conns: parts queue, single producer (the caller, under comm->mu) */
  tpx_sock_part_t *parts; /* TPX_SOCK_RING entries (send comms only) */
  _Atomic uint64_t parts_head; /* producer */
  _Atomic uint64_t parts_tail; /* consumer */
  size_t done_bytes;           /* send: header + payload bytes of parts[tail] sent;
                                  recv: payload bytes of `cur` read */
  /* recv conns (owner thread only, except the flags) */
  uint8_t rhdr[32]; /* next part header (TPX_WIRE_PART_BYTES) */
  size_t rhdr_got;  /* bytes of it read */
  int have;         /* `cur` holds a part being read */
  tpx_sock_part_t cur;
  uint64_t rseq;             /* sequence number of the last part read (have_rseq) */
  int have_rseq;
  _Atomic int wait_post;     /* stopped: its next part's receive is not posted yet */
  _Atomic uint64_t pos;      /* for lost receives: 0 reading (may still bring any message),
                                UINT64_MAX ended, s + 1 stopped at a part of message s */
  int upk_wait;              /* unpack: stopped until admission moves (under upk->mu) */
  /* failure (owner thread) */
  int dead; /* tpx code once the socket failed */
  tpx_sock_seal_t *seal; /* TPX_ENCRYPT: the socket's records (owner thread); NULL: plaintext */
} tpx_sock_conn_t;

struct tpx_sock_upk;
struct tpx_sock_stage;

typedef struct tpx_sock_comm {
  tpx_sock_net_t *sn;
  int kind; /* TPX_SK_SEND or TPX_SK_RECV */
  int dev;
  uint64_t token;
  uint64_t comm_id;
  int nsocks;
  int strict;
  int limit; /* requests in flight */
  tpx_sock_pool_t *pool;
  tpx_sock_conn_t *conns; /* nsocks + 1 */
  char peer[64];
  /* caller side */
  pthread_mutex_t mu;
  uint64_t tail;           /* oldest request not yet released */
  uint64_t thead;          /* strict: oldest request test has not reported done */
  unsigned misses;         /* consecutive tests that found nothing done */
  _Atomic uint64_t posted; /* next sequence number */
  unsigned rot;            /* send: data socket of the next message's first part */
  /* any thread */
  _Atomic int peer_closed; /* a socket saw FIN / RST / error */
  _Atomic int ndead;       /* recv: sockets that failed or ended (see recv_fail_lost) */
  _Atomic int closing;     /* teardown started: no more cross-socket kicks */
  _Atomic int errset;      /* 0, 1 = being written, 2 = errmsg valid */
  char errmsg[256];
  /* recv: part accounting (comm.c: recv_header, recv_claim_check) */
  pthread_mutex_t rx_mu;            /* claims, slot resets by irecv, kicks of comm_break */
  struct tpx_sock_range *rx_ranges; /* TPX_SOCK_RING * (nsocks + 1) claimed ranges */
  int rx_live;                      /* every socket attached: comm_break may kick them */
  _Atomic int broken;               /* recv: the peer broke the protocol (tpx code): every
                                       socket stops and every receive fails */
  /* unpack mode */
  struct tpx_sock_upk *upk;     /* recv comms: bounce pool and metadata */
  struct tpx_sock_stage *stage; /* send comms: pinned staging of CUDA sends (lazy) */
  uint64_t gpus_held;           /* GPUs this comm retained (bit per device) */
  uint64_t stall_seq;           /* host_recv_stalls: the first host-memory receive; it and every
                                   later request of the comm never complete (UINT64_MAX: none) */
  int gpu_bound;                /* unpack mode: the CUDA device current when the comm was made
                                   (connect / accept), as the TCPX plugin binds its comm and
                                   bounce pages (-1: no GPU) */
  struct tpx_sock_comm *pool_next, *pool_prev; /* the pool's list (pool->mu) */
  int listed;
  tpx_sock_req_t reqs[TPX_SOCK_RING];
} tpx_sock_comm_t;

/* Build a comm from connected sockets (fds[0] control); takes the fds (closed
 * on failure too). Returns its token in *out. */
int tpx__sock_comm_create(tpx_sock_net_t *sn, int kind, int dev, int nsocks, uint64_t comm_id,
                         int *fds, const char *peer, const uint8_t (*keys)[TPX_AEAD_KEY_BYTES], void **out);
/* The comm alone (tpx__sock_comm_create's first step): its sockets are
 * served by no I/O thread and it has no token until the caller gives it
 * both (tests/fuzz drives tpx__sock_conn_progress itself). Takes the fds
 * (closed on failure too); tpx__sock_comm_destroy frees it. */
int tpx__sock_comm_new(tpx_sock_net_t *sn, int kind, int dev, int nsocks, uint64_t comm_id, int *fds,
                       const char *peer, tpx_sock_comm_t **out);
void tpx__sock_comm_destroy(tpx_sock_comm_t *c);
/* TPX_ENCRYPT: give comm m's sockets their record layers, keys[i] for
 * socket i (before the sockets are attached to I/O threads). */
int tpx__sock_comm_seal(tpx_sock_comm_t *m, const uint8_t (*keys)[TPX_AEAD_KEY_BYTES]);
/* Called by the owner I/O thread after an epoll event or a kick. Returns 1
 * when the conn wants to run again (budget used up), else 0 (idle, or waiting
 * for its socket's next edge). */
int tpx__sock_conn_progress(tpx_sock_conn_t *c, void *scratch);

/* How the sender cuts a message of `size` bytes over `nsocks` data sockets
 * when `busy` earlier requests of the comm are still in flight: the number
 * of parts and *part_bytes, the size of all but the last (a 4 KiB multiple).
 * 0 = small: one part on socket 0. A message is cut only while it adds
 * parallelism: with nsocks or more requests in flight, every data socket
 * already has work (consecutive messages go to consecutive sockets), so the
 * message goes whole and costs each side one part instead of nsocks (at
 * 512 KiB messages on 2 cores: fewer wake-ups, less CPU per byte). A
 * sender's policy only: part headers tell the receiver (wire.h). */
static inline int tpx__sock_split(size_t size, int nsocks, uint64_t busy, size_t *part_bytes) {
  if (size <= TPX_SOCK_INLINE_MAX) return 0;
  if (busy >= (uint64_t)nsocks) {
    *part_bytes = size;
    return 1;
  }
  size_t per = (size + (size_t)nsocks - 1) / (size_t)nsocks;
  per = (per + 4095) & ~(size_t)4095;
  if (per < TPX_SOCK_MIN_PART) per = TPX_SOCK_MIN_PART;
  *part_bytes = per;
  return (int)((size + per - 1) / per);
}

/* ops implemented in comm.c */
int tpx__sock_isend(tpx_net_t *net, void *comm, void *data, size_t size, int tag, void *mh,
                   void **request);
int tpx__sock_irecv(tpx_net_t *net, void *comm, int n, void **data, size_t *sizes, int *tags,
                   void **mhandles, void **request);
int tpx__sock_isendv(tpx_net_t *net, void *comm, const struct iovec *iov, int iovcnt, int tag,
                     void **mhandles, void **request);
int tpx__sock_irecvv(tpx_net_t *net, void *comm, const struct iovec *iov, int iovcnt, int tag,
                     void **mhandles, void **request);
int tpx__sock_iflush(tpx_net_t *net, void *comm, int n, void **data, size_t *sizes, void **mhandles,
                    void **request);
int tpx__sock_test(tpx_net_t *net, void *request, int *done, size_t *sizes);
int tpx__sock_close_send(tpx_net_t *net, void *comm);
int tpx__sock_close_recv(tpx_net_t *net, void *comm);

/* ops implemented in setup.c */
int tpx__sock_listen(tpx_net_t *net, int dev, void *handle, void **listen_comm);
/* The address and socket count a listen handle would make connect dial. */
int tpx__sock_handle_dials(tpx_net_t *net, const void *handle, struct sockaddr_storage *addr, int *conns);
/* listen / connect bound to a session key (tpx/net.h, listen_keyed). */
int tpx__sock_listen_keyed(tpx_net_t *net, int dev, const uint8_t *key, void *handle, void **listen_comm);
int tpx__sock_connect_keyed(tpx_net_t *net, int dev, const uint8_t *key, void *handle, void **send_comm,
                            tpx_net_dev_handle_t *send_dev);
/* The MAC of a keyed hello (wire.h): HMAC-SHA256 under key over a label and
 * the hello's first TPX_WIRE_HELLO_MACED bytes. 0 or TPX_EINTERNAL. */
int tpx__sock_hello_mac(const uint8_t *key, const uint8_t *hello, uint8_t *mac);
/* What a listen comm makes of a data socket's hello (wire.h), from its bytes
 * alone (setup.c, and tests/fuzz): _head from the first 8 bytes, whether
 * this listen comm is keyed; _check from the whole hello (key: the session
 * key of a keyed listen comm, else NULL; nonce: the listen comm's), with the
 * comm id and socket fields on TPX_HELLO_OK. */
enum {
  TPX_HELLO_OK = 0,
  TPX_HELLO_MAGIC,
  TPX_HELLO_VERSION,
  TPX_HELLO_LENGTH, /* not the length this listen comm takes (keyed: with a MAC) */
  TPX_HELLO_MAC,    /* keyed: no MAC flag, or the MAC does not prove the key */
  TPX_HELLO_NONCE,  /* another listen comm's handle */
  TPX_HELLO_SOCKETS, /* socket index / count out of range */
  TPX_HELLO_TAKEN,  /* keyed listen comm that already accepted its comm (setup.c only) */
  TPX_HELLO_ENC     /* asks for sealed records and the listen comm does not, or the reverse (setup.c only) */
};
int tpx__sock_hello_head(const uint8_t *h, int keyed);
int tpx__sock_hello_check(const uint8_t *h, const uint8_t *key, uint64_t nonce, uint64_t *comm_id, int *index,
                          int *nsocks);
int tpx__sock_connect(tpx_net_t *net, int dev, void *handle, void **send_comm,
                     tpx_net_dev_handle_t *send_dev);
/* Give up the connect in progress in a handle buffer (tpx/net.h). */
int tpx__sock_connect_abort(tpx_net_t *net, void *handle);
int tpx__sock_accept(tpx_net_t *net, void *listen_comm, void **recv_comm,
                    tpx_net_dev_handle_t *recv_dev);
int tpx__sock_close_listen(tpx_net_t *net, void *listen_comm);
/* destroy helpers */
void tpx__sock_listen_free(void *listen_obj);
void tpx__sock_connect_free(void *connect_obj);

/* Memory handles (net.c). */
typedef struct tpx_sock_mr {
  char *base;
  size_t size;
  int type;
  int gpu; /* TPX_PTR_CUDA: the GPU owning the memory */
} tpx_sock_mr_t;
/* Check that [data, data+size) lies in memory handle mh (NULL mh: no check;
 * handles.c). */
int tpx__sock_mr_check(tpx_sock_net_t *sn, void *mh, const void *data, size_t size, const char *fn);

/* ---- unpack mode (unpack.c) ------------------------------------------------ */

/* Bounce pages are the contract's pages (4 KiB). */
#define TPX_SOCK_PAGE TPX_TCPX_PAGE_BYTES
/* One request holds at most 2048 fragments of 4 KiB (the TCPX plugin's limit). */
#define TPX_SOCK_UNPACK_MAX_MSG ((size_t)TPX_TCPX_MAX_REQ_BYTES)
/* Page iovecs per recvmsg: 1 MiB per call at most. */
#define TPX_SOCK_UNPACK_IOV 256

typedef struct tpx_sock_upk {
  int gpu;             /* GPU whose context pinned the memory; -1: ordinary host memory */
  char *bounce;        /* pool, host address */
  void *bounce_dev;    /* the same as kernels address it (published in the device handle) */
  size_t bounce_bytes; /* npages * 4 KiB */
  uint32_t npages;
  char *meta_mem; /* one allocation: the metadata block, then the device handle */
  tpx_unpack_meta_block_t *meta;
  tpx_unpack_dev_handle_t *dh; /* host address of the 24-byte {meta, bounce_buf, head} */
  void *meta_dev, *dh_dev;     /* their device addresses */
  /* page allocator: a stack of free page numbers, shuffled at creation */
  pthread_mutex_t mu;
  uint32_t *freeq;
  uint32_t fq_count;
  uint64_t admit_next; /* receives admitted (pages taken), in order */
  int waiters;         /* sockets stopped until admission moves or pages return */
  uint64_t stalls;     /* times a message found too few free pages (tests, debug) */
  /* per slot (k-th receive -> slot k % 16): pages held and their numbers */
  uint32_t npg[TPX_UNPACK_SLOTS];
  uint32_t pages[TPX_UNPACK_SLOTS][TPX_UNPACK_MAX_FRAGS];
} tpx_sock_upk_t;

typedef struct tpx_sock_stage {
  int gpu;         /* context that allocated buf */
  char *buf;       /* pinned, ring.size bytes */
  tpx_ring_t ring; /* FIFO byte ring over buf, 64-byte aligned pieces */
} tpx_sock_stage_t;

/* Recv comm: create / free the bounce pool and metadata. */
int tpx__sock_upk_create(tpx_sock_comm_t *m);
void tpx__sock_upk_destroy(tpx_sock_comm_t *m);
/* A socket of recv comm m has a part header of receive `seq` (which keeps
 * `keep` bytes): admit the receive unless done already. Receives are
 * admitted in order, each taking the pages for its bytes and writing its
 * slot's entries. 0 = admitted (now or before); 1 = not yet (an earlier
 * receive is not admitted, or too few pages are free): nothing changed, and
 * socket c is kicked when admission moves or pages return. */
int tpx__sock_upk_admit(tpx_sock_comm_t *m, tpx_sock_conn_t *c, uint64_t seq, size_t keep);
/* Read bytes [from, to) of a run of pages (4 KiB each, from page 0 of
 * `pages`) with one recvmsg, then up to `more` (may be NULL) as one more
 * iovec. Returns what recvmsg returns. */
ssize_t tpx__sock_upk_recv(int fd, const tpx_sock_upk_t *u, const uint32_t *pages, size_t from,
                          size_t to, const struct iovec *more);
/* Teardown: no more kicks between the comm's sockets. */
void tpx__sock_upk_quiesce(tpx_sock_comm_t *m);
/* Receive `seq` failed before it was admitted: admission moves past it (no
 * pages), so later receives are not held up by it. */
void tpx__sock_upk_skip(tpx_sock_comm_t *m, uint64_t seq);
/* test(): receive `seq` is complete: publish cnt[slot] (release). */
void tpx__sock_upk_publish(tpx_sock_comm_t *m, uint64_t seq);
/* Receive `seq` released (consumed or failed): its pages go back. */
void tpx__sock_upk_release(tpx_sock_comm_t *m, uint64_t seq);
/* accept: fill the caller's device handle. */
void tpx__sock_upk_fill_dev(tpx_sock_comm_t *m, tpx_net_dev_handle_t *d);
/* isend from CUDA memory on `gpu`: copy into the comm's staging ring. 0 with
 * *out = the staged copy, 1 = no room now (retry after sends complete), or an
 * error. Sets r->stage_end. */
int tpx__sock_stage_copy(tpx_sock_comm_t *m, tpx_sock_req_t *r, int gpu, const void *src,
                        size_t size, void **out);
void tpx__sock_stage_release(tpx_sock_comm_t *m, tpx_sock_req_t *r);
/* Comm teardown: staging and GPU references. */
void tpx__sock_gpu_fini(tpx_sock_comm_t *m);
/* ops of unpack mode (irecv_consumed in comm.c, get_device_mr in net.c) */
int tpx__sock_irecv_consumed(tpx_net_t *net, void *comm, int n, void *request);

#endif
