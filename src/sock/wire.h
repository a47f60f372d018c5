/* Wire formats of the built-in TCP transport, defined once.
 *
 * All integers are little-endian on the wire (encoded with common/le.h),
 * addresses and ports are in network order where the socket API wants them.
 *
 * 1. The listen handle (TPX_NET_HANDLE_BYTES = 128 bytes), filled by listen and
 *    carried out of band to the connector:
 *      0  u32 magic TPX_WIRE_HANDLE_MAGIC
 *      4  u16 version TPX_WIRE_VERSION
 *      6  u16 family (4 or 6)
 *      8  u8  addr[16] (IPv4 in the first 4 bytes), network order
 *     24  u16 port, network order
 *     26  u16 nsocks: data sockets per comm chosen by the listener
 *     28  u32 IPv6 scope id (link-local addresses only)
 *     32  u64 listen nonce: hellos must quote it
 *     40  u32 flags: TPX_WIRE_HANDLE_F_KEYED = hellos must carry a MAC;
 *             TPX_WIRE_HANDLE_F_ENC = data sockets carry sealed records (4.)
 *     44  .. 95 zero
 *     96  u64 connector state (local to the connecting process; 0 from listen)
 *    104  u64 check word for the connector state
 *    112  .. 127 zero
 *
 * 2. The hello: the first TPX_WIRE_HELLO_BYTES bytes the connector sends on
 *    each of its nsocks + 1 sockets (index 0 = control, 1..nsocks = data).
 *      0  u32 magic TPX_WIRE_HELLO_MAGIC
 *      4  u16 version
 *      6  u16 length of the hello (TPX_WIRE_HELLO_BYTES)
 *      8  u64 listen nonce (from the handle)
 *     16  u64 comm id: random per connect, groups the sockets of one comm
 *     24  u16 socket index
 *     26  u16 nsocks
 *     28  u32 flags: 0, or TPX_WIRE_HELLO_F_MAC in a keyed hello, with
 *             TPX_WIRE_HELLO_F_ENC when the socket carries sealed records
 *     32  u64 reserved (0)
 *    A keyed hello (to a handle with TPX_WIRE_HANDLE_F_KEYED; length
 *    TPX_WIRE_HELLO_KEYED_BYTES) goes on:
 *     40  u8  nonce[16]: fresh random bytes per socket
 *     56  u8  mac[32]: HMAC-SHA256 under the session key (tpx/net.h,
 *             listen_keyed) over "tpx sock hello" and bytes 0..55
 *    The listener checks the MAC (in constant time) before anything else
 *    the hello says; a keyed listen comm takes one comm only, so a hello
 *    seen on the wire cannot be replayed into another comm, and the session
 *    key, the listen nonce and the comm id make it useless elsewhere.
 *    Nothing is ever sent back to the connector: a send comm must be able to
 *    close right after its last send without unread bytes turning its FIN into
 *    a RST.
 *
 * 3. Messages. Every message travels as one or more parts; each part is a
 *    32-byte part header followed by its bytes, on one socket of the comm:
 *      0  u32 magic TPX_WIRE_PART_MAGIC
 *      4  u32 sequence number of the message (low 32 bits)
 *      8  u64 message size in bytes (the same in every part of a message)
 *     16  u64 offset of the part in the message (a multiple of 4 KiB)
 *     24  u64 length of the part (> 0, except the one part of an empty message)
 *    Parts are self-describing: the receiver learns everything from the part
 *    headers, so how a sender cuts a message and which sockets it uses is its
 *    own choice (sock.h: small messages on socket 0, larger ones cut into at
 *    most nsocks parts over the data sockets). Rules the receiver checks:
 *    on each socket the sequence numbers strictly increase; offset + length
 *    <= size; every part header of a message names the same size; a
 *    message has at most one part per socket and its parts never overlap;
 *    the message is complete when its parts cover [0, size) and each has
 *    been read whole (a short or overlapping part fails the comm).
 *    A receiver reads a part only once the matching receive is posted, so the
 *    parts of later messages wait in the kernel (TCP flow control) meanwhile.
 *    (Version 1 sent a header per message on socket 0 and derived the cut
 *    from the size: every message then cost the receiver a hop from the
 *    control socket's thread to the data sockets' threads.)
 *
 * 4. Sealed records (TPX_ENCRYPT; seal.c). With F_ENC (always keyed), after
 *    its hello each socket's bytes -- the part headers and parts of 3. --
 *    travel as AES-256-GCM records, one key per socket (HKDF-SHA256 of the
 *    session key, salted with the hello's first 56 bytes):
 *      0  u32 plaintext length L (1..TPX_SEAL_REC_MAX), authenticated
 *      4  L bytes of ciphertext
 *    4+L  16-byte tag
 *    The nonce is the record's number on its socket (never sent). Record
 *    and part boundaries are independent. A listen comm and a connector that
 *    differ on F_ENC never exchange a byte of data (both refuse).
 */
#ifndef TPX_SOCK_WIRE_H
#define TPX_SOCK_WIRE_H

#include <stdint.h>
#include <string.h>

#include "common/le.h" /* tpx__put16 .. tpx__get64 */

#define TPX_WIRE_VERSION 2u
#define TPX_WIRE_HANDLE_MAGIC 0x4c585054u /* "TPXL" */
#define TPX_WIRE_HELLO_MAGIC 0x48585054u  /* "TPXH" */
#define TPX_WIRE_PART_MAGIC 0x50585054u   /* "TPXP" */

#define TPX_WIRE_HELLO_BYTES 40
#define TPX_WIRE_HELLO_KEYED_BYTES 88
#define TPX_WIRE_HELLO_MACED 56 /* bytes a keyed hello's MAC covers */
#define TPX_WIRE_HELLO_NONCE_BYTES 16
#define TPX_WIRE_HELLO_F_MAC 0x1u
#define TPX_WIRE_HELLO_F_ENC 0x2u
#define TPX_WIRE_HANDLE_F_KEYED 0x1u
#define TPX_WIRE_HANDLE_F_ENC 0x2u
#define TPX_WIRE_PART_BYTES 32

/* Offsets in the handle. */
#define TPX_WH_MAGIC 0
#define TPX_WH_VERSION 4
#define TPX_WH_FAMILY 6
#define TPX_WH_ADDR 8
#define TPX_WH_PORT 24
#define TPX_WH_NSOCKS 26
#define TPX_WH_SCOPE 28
#define TPX_WH_NONCE 32
#define TPX_WH_FLAGS 40
#define TPX_WH_STATE 96
#define TPX_WH_CHECK 104

static inline void tpx__wire_part_encode(uint8_t *h, uint64_t seq, uint64_t size, uint64_t off,
                                        uint64_t len) {
  tpx__put32(h, TPX_WIRE_PART_MAGIC);
  tpx__put32(h + 4, (uint32_t)seq);
  tpx__put64(h + 8, size);
  tpx__put64(h + 16, off);
  tpx__put64(h + 24, len);
}

/* A part header's own fields, with the rules that need no receive (magic;
 * size <= max_msg; offset + length <= size; length > 0 unless the message
 * is empty; offset a multiple of 4 KiB): NULL when they hold, else which
 * one broke. The fields are filled either way (for the message). */
static inline const char *tpx__wire_part_decode(const uint8_t *h, uint64_t max_msg, uint32_t *seq32,
                                                uint64_t *size, uint64_t *off, uint64_t *len) {
  uint32_t magic = tpx__get32(h);
  *seq32 = tpx__get32(h + 4);
  *size = tpx__get64(h + 8);
  *off = tpx__get64(h + 16);
  *len = tpx__get64(h + 24);
  return magic != TPX_WIRE_PART_MAGIC          ? "magic"
         : *size > max_msg                     ? "range: size above the largest message"
         : *off > *size || *len > *size - *off ? "range: offset + length beyond the size"
         : *len == 0 && *size > 0              ? "range: empty part of a non-empty message"
         : *off % 4096 != 0                    ? "range: offset not a multiple of 4 KiB"
                                               : NULL;
}

#endif
