/* CRC-32C (Castagnoli), the checksum of checkpoint format version 2.
 *
 * om_crc32c(crc, p, n) continues a standard CRC-32C (initial and final inversion, reflected,
 * polynomial 0x1EDC6F41): om_crc32c(om_crc32c(0, a), b) is the CRC-32C of a followed by b.
 * Every path gives the same value (integer arithmetic); the fastest one this CPU has runs.
 */
#ifndef OM_CRC32C_H
#define OM_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The paths: a portable table (slicing by 8), the CRC32 instruction (SSE4.2 on x86-64, the
 * CRC extension on aarch64; one stream), and carry-less multiplication folding 256 bytes at a
 * time (x86-64 AVX-512 with VPCLMULQDQ). */
enum { OM_CRC_TABLE = 0, OM_CRC_INSTRUCTION = 1, OM_CRC_FOLD = 2, OM_CRC_PATHS = 3 };

/* Fills the tables and picks the path; called once at import, before any other call. */
void om_crc32c_init(void);
int om_crc32c_available(int path);
/* The best path, or the given one (which must be available). */
uint32_t om_crc32c(uint32_t crc, const void *p, size_t n);
uint32_t om_crc32c_path(int path, uint32_t crc, const void *p, size_t n);

#endif
