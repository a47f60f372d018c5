/* CRC-32C (Castagnoli, the iSCSI / ext4 / NVMe checksum): what every data
 * chunk carries when integrity is on (engine/integrity.h). x86's crc32
 * instruction when the CPU has SSE4.2, three lanes at once so it runs at the
 * instruction's throughput, not its latency; a table elsewhere. */
#ifndef TPX_COMMON_CRC32C_H
#define TPX_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32C of p[0..n) continuing from crc (0 to start): calls chain, so
 * tpx__crc32c(tpx__crc32c(0, a, na), b, nb) is the CRC of a then b.
 * tpx__crc32c(0, "123456789", 9) == 0xe3069283. */
uint32_t tpx__crc32c(uint32_t crc, const void *p, size_t n);

/* The raw register's step over n zero bytes (pre/post inversion aside): the
 * operator that combines CRCs of pieces computed apart (the GPU's kernel
 * does so), as a 32x32 bit matrix, column i the image of bit i. */
void tpx__crc32c_zeros_op(uint64_t n, uint32_t op[32]);

#endif
