/* CRC-32C (Castagnoli, the iSCSI / ext4 / NVMe checksum): what every data
 * chunk carries when integrity is on (engine/integrity.h). On x86 with
 * AVX-512 VPCLMULQDQ, carry-less folding 256 bytes a round; else the crc32
 * instruction (SSE4.2) on three lanes at once, so it runs at the
 * instruction's throughput, not its latency; a table elsewhere. */
#ifndef TPX_COMMON_CRC32C_H
#define TPX_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* The CRC-32C of p[0..n) continuing from crc (0 to start): calls chain, so
 * tpx__crc32c(tpx__crc32c(0, a, na), b, nb) is the CRC of a then b.
 * tpx__crc32c(0, "123456789", 9) == 0xe3069283. */
uint32_t tpx__crc32c(uint32_t crc, const void *p, size_t n);
/* The CRC-32C of a chunk's bytes: data[0..len) when nv is 0, else the nv
 * pieces in iov, in order. */
uint32_t tpx__crc32c_pieces(const void *data, uint64_t len, const struct iovec *iov, int nv);

/* Tests: use at most this fast path (0 the table, 1 the crc32 lanes, 2
 * folding; what the CPU has bounds it). Returns the previous bound. */
int tpx__crc32c_limit(int way);

/* The raw register's step over n zero bytes (pre/post inversion aside): the
 * operator that combines CRCs of pieces computed apart (the GPU's kernel
 * does so), as a 32x32 bit matrix, column i the image of bit i. */
void tpx__crc32c_zeros_op(uint64_t n, uint32_t op[32]);

#endif
