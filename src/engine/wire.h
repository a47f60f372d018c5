/* The control-plane wire format: framed, versioned binary messages.
 *
 * Byte order: little-endian for every integer, everywhere (frames, connection
 * info, memory descriptors). Encoders write bytes one at a time, so the host's
 * own byte order and struct layout never reach the wire.
 *
 * Frame: magic u32 "TPXC" | version u8 | type u8 | flags u16 (0) | length u32,
 * then `length` payload bytes (length <= WIRE_MAX_PAYLOAD). Each payload
 * layout is below; decoders require the exact length (no trailing bytes) and
 * bounds every count before using it.
 */
#ifndef TPX_ENGINE_WIRE_H
#define TPX_ENGINE_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/le.h"
#include "tpx/endpoint.h"
#include "tpx/net.h"

#define WIRE_MAGIC 0x43585054u /* bytes 'T' 'P' 'X' 'C' */
#define WIRE_VERSION 1
#define WIRE_HDR_BYTES 12
#define WIRE_MAX_PAYLOAD (1u << 20)
#define WIRE_MAX_CHANNELS 64
#define WIRE_ENTRY_BYTES 24
#define WIRE_MAX_ENTRIES 32768
#define WIRE_MAX_CHUNK (4u << 20)
#define WIRE_MAX_ERRMSG 200
#define WIRE_MAX_INLINE 65536 /* data bytes a SEND / WRITE / READ_DATA may carry itself */

enum tpx__wire_type {
  MSG_HELLO = 1,     /* connector -> acceptor: identity, channels, its listen handles */
  MSG_HELLO_ACK = 2, /* acceptor -> connector: same, channel count agreed */
  MSG_ERROR = 3,     /* fatal for the connection: code + text, then close; read even during
                        transport setup (a setup failure's reason, docs/RELIABILITY.md) */
  MSG_CTS = 4,       /* receiver posted a recv: id, tag, capacity */
  MSG_SEND = 5,      /* sender matched a CTS: data follows on the channels */
  MSG_WRITE = 6,     /* one-sided write: entries (+notif); data follows */
  MSG_READ = 7,      /* one-sided read request: entries (+notif) */
  MSG_READ_DATA = 8, /* target accepted a read: data follows */
  MSG_STATUS = 9,    /* completion/refusal of an id (write ack, read nack, send abort) */
  MSG_NOTIF = 10,    /* standalone notification */
  MSG_BYE = 11,      /* graceful close: no more messages from the sender */
  MSG_AUTH = 12,     /* shared-key challenge-response before HELLO (engine/auth.h) */
  MSG_RELISTEN = 13, /* transport setup with a plugin: fresh listen handles (engine/relisten.h) */
  MSG_SCHED = 14,    /* data sender -> receiver: the pattern its next transfers use (engine/route.h) */
  MSG_CHAN = 15,     /* a channel lost, its chunks sent again, rejoining (engine/failover.h) */
  MSG_PING = 16,     /* liveness of a ready peer: ask / answer (engine/live.h); only to a peer
                        that sent HELLO_F_LIVE */
  MSG_SUM = 17,      /* data sender -> receiver: chunks' checksums (engine/integrity.h); only to
                        a peer that sent HELLO_F_SUM */
  MSG_TYPE_MAX = 17
};

/* MSG_AUTH: step u8, then by step (sizes WIRE_AUTH_NONCE, WIRE_AUTH_MAC):
 *   AUTH_CHALLENGE (connector -> acceptor): the connector's nonce
 *   AUTH_RESPONSE  (acceptor -> connector): the acceptor's nonce, its MAC
 *   AUTH_PROOF     (connector -> acceptor): the connector's MAC */
enum tpx__wire_auth_step { AUTH_CHALLENGE = 1, AUTH_RESPONSE = 2, AUTH_PROOF = 3 };
#define WIRE_AUTH_NONCE 32
#define WIRE_AUTH_MAC 32
struct tpx__wire_auth {
  uint8_t step;
  uint8_t nonce[WIRE_AUTH_NONCE];
  uint8_t mac[WIRE_AUTH_MAC];
};

/* MSG_HELLO / MSG_HELLO_ACK flags: what this side understands. */
#define HELLO_F_PACK 0x1u /* WRITE / READ may ask for packed chunks */
#define HELLO_F_IOV 0x2u  /* and this side moves them without copies (vectored requests) */
#define HELLO_F_RELISTEN 0x4u /* MSG_RELISTEN during transport setup (sent by a side on a loaded plugin) */
#define HELLO_F_PACK_GPU 0x8u /* packed chunks may name this side's GPU memory (its GPU path stages both ways) */
#define HELLO_F_SCHED 0x10u   /* MSG_SCHED and MSG_CHAN: adaptive striping and failover of lost channels */

/* MSG_SCHED: len u8 (1..WIRE_MAX_CHANNELS) | len channels u8 (each below the
 * channels agreed). Transfers announced after it place chunk i on
 * pattern[(first_ch + i) % len] (engine/route.h). */
struct tpx__wire_sched {
  uint8_t len;
  uint8_t ch[WIRE_MAX_CHANNELS];
};

/* MSG_CHAN: step u8 | channel u16, then by step:
 *   CHAN_DOWN (either side): code i32; the channel is lost: both close its
 *     comms, and its chunks travel on the others.
 *   CHAN_ASK (data sender -> receiver): what u8 (wire_status_what) | id u64:
 *     does the transfer still need chunks it had on the lost channel?
 *   CHAN_VERDICT (data receiver -> sender): what u8 | id u64 | layers u32 |
 *     need u8: the answer, as seen after `layers` resend layers.
 *   CHAN_RESEND (data sender -> receiver): what u8 | id u64 | seed u32 | len u8
 *     | len channels u8: a resend layer: the transfer's chunks on the lost
 *     channel are placed anew (engine/route.h) and follow.
 *   CHAN_REJOIN (either side): gen u32 | handle (TPX_NET_HANDLE_BYTES): the
 *     channel's fresh listen handle; connect to it.
 *   CHAN_UP (either side): gen u32: my comms of that generation are up.
 *   CHAN_LANDED (data receiver -> sender): what u8 | id u64: every chunk of
 *     the send or read landed (its sender kept it until now, to send again).
 *   CHAN_RATE (data receiver -> sender): gen u32: the speed, KB/s, at which
 *     the channel's chunks landed lately (engine/stripe.h).
 * Exactly that long. */
enum tpx__wire_chan_step { CHAN_DOWN = 1, CHAN_ASK = 2, CHAN_VERDICT = 3, CHAN_RESEND = 4, CHAN_REJOIN = 5, CHAN_UP = 6, CHAN_LANDED = 7, CHAN_RATE = 8 };
struct tpx__wire_chan {
  uint8_t step;
  uint16_t ch;
  int32_t code;          /* CHAN_DOWN */
  uint8_t what;          /* CHAN_ASK / CHAN_VERDICT / CHAN_RESEND / CHAN_LANDED */
  uint64_t id;
  uint32_t layers;       /* CHAN_VERDICT */
  uint8_t need;
  uint32_t seed;         /* CHAN_RESEND */
  struct tpx__wire_sched pat;
  uint32_t gen;          /* CHAN_REJOIN / CHAN_UP; CHAN_RATE: KB/s */
  const uint8_t *handle; /* CHAN_REJOIN: TPX_NET_HANDLE_BYTES, into the payload */
};

#define HELLO_F_LIVE 0x20u /* this side answers MSG_PING on its own (a progress thread): it may be
                              pinged, and is judged by its silence (engine/live.h) */

#define HELLO_F_SUM 0x40u /* this side checks every chunk it receives against the sender's
                             CRC-32C (MSG_SUM) and sends them for what it sends */

/* MSG_SUM: what u8 (wire_status_what) | id u64 (the transfer, as CHAN_ASK
 * names it) | n u16 (1..WIRE_MAX_SUMS) | n times chunk u32 | sum u32: the
 * CRC-32C of each chunk as sent, or, with WIRE_SUM_NONE in chunk, "sent
 * without one" (its bytes were where this side's CPU cannot read them).
 * Exactly that long. */
#define WIRE_MAX_SUMS 128
#define WIRE_SUM_NONE 0x80000000u
struct tpx__wire_sum {
  uint8_t what;
  uint64_t id;
  uint16_t n;
  uint32_t chunk[WIRE_MAX_SUMS];
  uint32_t sum[WIRE_MAX_SUMS];
};

/* MSG_PING: kind u8 | seq u32, exactly WIRE_PING_BYTES. PING_ASK wants a
 * PING_ANSWER with the same seq; seq counts the asker's asks from 1. */
enum tpx__wire_ping_kind { PING_ASK = 1, PING_ANSWER = 2 };
#define WIRE_PING_BYTES 5
struct tpx__wire_ping {
  uint8_t kind;
  uint32_t seq;
};

/* MSG_RELISTEN: step u8 | channel u16 | gen u32 | code i32, then for
 * RELISTEN_HANDLE the handle (TPX_NET_HANDLE_BYTES); exactly that long.
 *   RELISTEN_ASK (connector -> listener): my connect to channel's handle of
 *     generation gen failed with code: listen anew and send its handle.
 *   RELISTEN_HANDLE (listener -> connector): the channel's handle of
 *     generation gen (>= 1, one more than the last); code: why my accept
 *     failed, or 0 when it answers an ASK.
 *   RELISTEN_UP: every comm of mine is up; gen = the ASK / HANDLE frames of
 *     yours I had read (channel and code 0).
 * The first handles (HELLO / HELLO_ACK) are generation 0. A failure code is
 * one of include/tpx/error.h's (TPX_EUNKNOWN..-1). */
enum tpx__wire_relisten_step { RELISTEN_ASK = 1, RELISTEN_HANDLE = 2, RELISTEN_UP = 3 };
#define WIRE_RELISTEN_BYTES 11 /* without the handle */
struct tpx__wire_relisten {
  uint8_t step;
  uint16_t ch;
  uint32_t gen;
  int32_t code;
  const uint8_t *handle; /* RELISTEN_HANDLE: TPX_NET_HANDLE_BYTES, into the payload */
};

/* MSG_WRITE / MSG_READ: the byte after the notification. Bit 0: WRITE: the
 * data follows; READ: an inline answer is welcome. Bits 1-5: k, 0 for the
 * plain plan, 1..WIRE_MAX_PACK_LOG2 for plan.h's packed plan with pieces up
 * to 2^k bytes (only to a peer that sent HELLO_F_PACK). Bit 6: WIRE_RW_SUM. Bit 7: 0. */
#define WIRE_RW_INLINE 0x1u
#define WIRE_RW_PACK_SHIFT 1
#define WIRE_RW_SUM 0x40u /* MSG_WRITE: the inline data is followed by its CRC-32C u32 (HELLO_F_SUM) */
#define WIRE_MAX_PACK_LOG2 22 /* WIRE_MAX_CHUNK */

/* MSG_STATUS.what: which id space the status refers to. */
enum tpx__wire_status_what { ST_WRITE = 1, ST_READ = 2, ST_SEND = 3 };

struct tpx__wire_frame {
  uint8_t version;
  uint8_t type;
  uint32_t len;           /* payload bytes */
  const uint8_t *payload; /* points into the caller's buffer */
};

/* Looks at the first `avail` bytes of a stream. Returns 0 when more bytes are
 * needed, the total frame size (> 0) when a whole frame is there (f filled),
 * TPX_EPROTO for a bad magic / flags / oversize length, TPX_EVERSION for
 * another protocol version (f->version set). */
long tpx__wire_frame_parse(const uint8_t *buf, size_t avail, struct tpx__wire_frame *f);

/* Growable output buffer. Encoders set `oom` on allocation failure. */
struct tpx__wbuf {
  uint8_t *p;
  size_t len, cap;
  int oom;
};
void tpx__wbuf_free(struct tpx__wbuf *b);

struct tpx__wire_hello {
  uint64_t uuid;
  int32_t gpu;
  uint16_t nch;
  uint32_t flags;
  char name[TPX_NAME_MAX];
  const uint8_t *handles; /* nch * TPX_NET_HANDLE_BYTES, into the payload */
};
struct tpx__wire_entry {
  uint64_t region, addr, len;
};
struct tpx__wire_rw { /* MSG_WRITE and MSG_READ */
  uint64_t id;
  uint16_t first_ch; /* MSG_WRITE only */
  uint32_t chunk;
  uint32_t n;
  const uint8_t *entries; /* n * WIRE_ENTRY_BYTES */
  uint8_t has_notif; /* a notification (possibly empty) rides along */
  uint32_t notif_len;
  const uint8_t *notif;
  uint8_t inl;         /* MSG_WRITE: the data follows in this message;
                          MSG_READ: an inline answer is welcome (no data here) */
  uint8_t pack_log2;   /* packed plan with pieces up to 2^pack_log2 bytes; 0 plain */
  uint64_t inl_len;    /* sum of the entries' lengths when inl */
  const uint8_t *data;
  uint8_t sum_on;      /* MSG_WRITE inline: its CRC-32C follows (put: computed over the iov) */
  uint32_t sum;
};
struct tpx__wire_read_data {
  uint64_t id;
  uint16_t first_ch;
  uint8_t inl;         /* 1 the data follows; 2 and then its CRC-32C u32 (HELLO_F_SUM) */
  uint64_t inl_len;
  const uint8_t *data;
  uint32_t sum;        /* inl 2: decoded (put computes it over the iov) */
};
struct tpx__wire_send {
  uint64_t recv_id, len;
  uint16_t first_ch;
  uint32_t chunk;
  uint8_t inl; /* 1 the len data bytes follow in this message; 2 and then their CRC-32C u32 */
  const uint8_t *data;
  uint32_t sum; /* inl 2: decoded (put computes it over the iov) */
};
struct tpx__wire_cts {
  uint64_t recv_id, tag, cap;
  uint8_t inl_ok; /* the recv buffer takes inline data (host memory) */
};
struct tpx__wire_status {
  uint8_t what;
  uint64_t id;
  int32_t status;
};
struct tpx__wire_notif {
  uint32_t len;
  const uint8_t *msg;
};
struct tpx__wire_error {
  int32_t code;
  char msg[WIRE_MAX_ERRMSG + 1];
};

/* Encoders append one whole frame to b; return 0 or TPX_ENOMEM / TPX_EINVAL. */
int tpx__wire_put_hello(struct tpx__wbuf *b, int ack, const struct tpx__wire_hello *h);
int tpx__wire_put_error(struct tpx__wbuf *b, int32_t code, const char *msg);
int tpx__wire_put_cts(struct tpx__wbuf *b, const struct tpx__wire_cts *m);
/* Inline data (m->inl / inl): gathered from iov (total must match). */
int tpx__wire_put_send(struct tpx__wbuf *b, const struct tpx__wire_send *m, const struct iovec *iov, int niov);
/* type MSG_WRITE or MSG_READ; entries given as an array; notif NULL: none,
 * non-NULL with notif_len 0: an empty notification. WRITE: iov non-NULL
 * carries the data inline. READ: iov must be NULL; niov != 0 says an inline
 * answer is welcome.
 * pack_log2: 0 for the plain plan, else the packed plan's piece limit
 * (1..WIRE_MAX_PACK_LOG2). sum_on: inline data carries its CRC-32C. */
int tpx__wire_put_rw_plan(struct tpx__wbuf *b, int type, uint64_t id, uint16_t first_ch, uint32_t chunk,
                          const struct tpx__wire_entry *e, uint32_t n, const void *notif, uint32_t notif_len,
                          const struct iovec *iov, int niov, int pack_log2, int sum_on);
int tpx__wire_put_read_data(struct tpx__wbuf *b, const struct tpx__wire_read_data *m, const struct iovec *iov,
                            int niov);
int tpx__wire_put_status(struct tpx__wbuf *b, const struct tpx__wire_status *m);
int tpx__wire_put_notif(struct tpx__wbuf *b, const void *msg, uint32_t len);
int tpx__wire_put_bye(struct tpx__wbuf *b);
int tpx__wire_put_auth(struct tpx__wbuf *b, const struct tpx__wire_auth *m);
int tpx__wire_put_relisten(struct tpx__wbuf *b, const struct tpx__wire_relisten *m);
int tpx__wire_put_sched(struct tpx__wbuf *b, const struct tpx__wire_sched *m);
int tpx__wire_put_chan(struct tpx__wbuf *b, const struct tpx__wire_chan *m);
int tpx__wire_put_ping(struct tpx__wbuf *b, const struct tpx__wire_ping *m);
int tpx__wire_put_sum(struct tpx__wbuf *b, const struct tpx__wire_sum *m);

/* Decoders: 0 or TPX_EPROTO (detail recorded). */
int tpx__wire_get_hello(const struct tpx__wire_frame *f, struct tpx__wire_hello *h);
int tpx__wire_get_error(const struct tpx__wire_frame *f, struct tpx__wire_error *m);
int tpx__wire_get_cts(const struct tpx__wire_frame *f, struct tpx__wire_cts *m);
int tpx__wire_get_send(const struct tpx__wire_frame *f, struct tpx__wire_send *m);
int tpx__wire_get_rw(const struct tpx__wire_frame *f, struct tpx__wire_rw *m);
int tpx__wire_get_read_data(const struct tpx__wire_frame *f, struct tpx__wire_read_data *m);
int tpx__wire_get_status(const struct tpx__wire_frame *f, struct tpx__wire_status *m);
int tpx__wire_get_notif(const struct tpx__wire_frame *f, struct tpx__wire_notif *m);
int tpx__wire_get_auth(const struct tpx__wire_frame *f, struct tpx__wire_auth *m);
int tpx__wire_get_relisten(const struct tpx__wire_frame *f, struct tpx__wire_relisten *m);
/* Channel numbers are checked against the channels agreed by the caller. */
int tpx__wire_get_sched(const struct tpx__wire_frame *f, struct tpx__wire_sched *m);
int tpx__wire_get_chan(const struct tpx__wire_frame *f, struct tpx__wire_chan *m);
int tpx__wire_get_ping(const struct tpx__wire_frame *f, struct tpx__wire_ping *m);
int tpx__wire_get_sum(const struct tpx__wire_frame *f, struct tpx__wire_sum *m);
void tpx__wire_entry_at(const uint8_t *entries, uint32_t i, struct tpx__wire_entry *e);
/* During transport setup the frames a peer sends once it is ready wait
 * unread, but its reason for failing the setup must not: the first whole
 * MSG_ERROR among the whole frames at the start of buf, decoded into e.
 * 1 found (*at: its offset), 0 none yet, < 0 the stream is malformed before
 * one (TPX_EPROTO / TPX_EVERSION, as tpx__wire_frame_parse). */
int tpx__wire_find_error(const uint8_t *buf, size_t len, struct tpx__wire_error *e, size_t *at);

/* Blobs handed to applications (same byte order, own magic). */
#define BLOB_CONN_MAGIC 0x49585054u /* "TPXI" */
#define BLOB_MD_MAGIC 0x4d585054u   /* "TPXM" */
#define BLOB_VERSION 1
#define CONN_MAX_ADDRS 8
#define CONN_ADDR_MAX 64

struct tpx__conn_info {
  uint64_t uuid;
  int32_t gpu;
  uint16_t port;
  char name[TPX_NAME_MAX];
  int naddr;
  char addr[CONN_MAX_ADDRS][CONN_ADDR_MAX];
};
int tpx__conn_info_encode(const struct tpx__conn_info *c, uint8_t *buf, size_t cap, size_t *len);
int tpx__conn_info_decode(const uint8_t *buf, size_t len, struct tpx__conn_info *c);

struct tpx__md_info {
  uint64_t owner; /* owner endpoint uuid */
  uint64_t region, addr, len;
  uint32_t access;
  uint8_t type;
  int32_t device;
};
#define MD_BLOB_BYTES 46
int tpx__md_encode(const struct tpx__md_info *m, uint8_t *buf, size_t cap, size_t *len);
int tpx__md_decode(const uint8_t *buf, size_t len, struct tpx__md_info *m);

#endif
