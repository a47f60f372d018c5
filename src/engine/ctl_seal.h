/* TPX_ENCRYPT on the control connection (docs/SECURITY.md): once both
 * proofs of the shared-key handshake are checked (auth.h), every byte each
 * side sends is an AES-256-GCM record under its direction's key:
 *   u32 magic TPX_CTL_SEAL_MAGIC ("TPXE"), u32 plaintext length L
 *   (1..TPX_CTL_SEAL_REC), L bytes of ciphertext, 16-byte tag
 * (the 8 header bytes are authenticated; the nonce is the record's number,
 * never sent; common/aead.h). Keys: HKDF-SHA256 of the auth key, salted
 * with both handshake nonces, one label per direction. Records and frames
 * are independent: the frames (wire.h) are cut into records on the way out
 * and reassembled into p->in on the way in, so the frame code is unchanged.
 * The connector seals from the frame after its AUTH_PROOF, the acceptor from
 * the frame after it checked that proof; each opens from the peer's next
 * byte. A peer without TPX_ENCRYPT sends frames ("TPXC") where a record
 * should be, and a record ("TPXE") reaches one where a frame should: both
 * are named as a TPX_ENCRYPT mismatch. */
#ifndef TPX_ENGINE_CTL_SEAL_H
#define TPX_ENGINE_CTL_SEAL_H

#include <stddef.h>
#include <stdint.h>

#define TPX_CTL_SEAL_MAGIC 0x45585054u /* bytes 'T' 'P' 'X' 'E' */
#define TPX_CTL_SEAL_HDR 8
#define TPX_CTL_SEAL_REC (64u * 1024u)

struct ctl_seal;
struct tpx__wbuf;

/* A sealed control connection's state. key: the auth key; nc / ns: the
 * handshake's nonces (32 bytes each); connector: our role. Bytes out holds
 * now (out_len, frames before the switch) go as they are. Input opens once
 * tpx__ctl_seal_in_start ran. Errors: tpx_err_quiet detail. */
int tpx__ctl_seal_new(const uint8_t *key, size_t key_len, const uint8_t *nc, const uint8_t *ns, int connector,
                      size_t out_len, struct ctl_seal **out);
void tpx__ctl_seal_free(struct ctl_seal *s);
/* Seal the frames appended to out since the last call, in place (out then
 * holds only wire bytes). 0 or an error (TPX_ENOMEM, TPX_EINTERNAL). */
int tpx__ctl_seal_out(struct ctl_seal *s, struct tpx__wbuf *out);
/* out was sent and emptied. */
void tpx__ctl_seal_out_sent(struct ctl_seal *s);
/* 1 once input is sealed; 1 from tpx__ctl_seal_in_due while the switch
 * waits for the dispatcher (the bytes after the frame that made it). */
int tpx__ctl_seal_in_on(const struct ctl_seal *s);
int tpx__ctl_seal_in_due(const struct ctl_seal *s);
/* The bytes of *in from `from` on are records: take them, and open the
 * whole ones back into *in (grown as needed). 0 or an error (TPX_EAUTH: a
 * record failed authentication; TPX_EPROTO: not a record, the detail says
 * whether the peer sent plaintext frames). */
int tpx__ctl_seal_in_start(struct ctl_seal *s, uint8_t **in, size_t *in_len, size_t *in_cap, size_t from);
/* Where the next read of the socket goes (*room > 0 bytes). */
int tpx__ctl_seal_room(struct ctl_seal *s, uint8_t **buf, size_t *room);
/* got bytes arrived there: open the whole records into *in. As _in_start. */
int tpx__ctl_seal_got(struct ctl_seal *s, size_t got, uint8_t **in, size_t *in_len, size_t *in_cap);
/* What a frame parser's bad magic at buf means when it is our record's:
 * 1 if buf (>= 4 bytes) starts a sealed record. */
int tpx__ctl_seal_is_record(const uint8_t *buf, size_t avail);

#endif
