#ifndef OCTET_RUNTIME_METRICS_CRC32C_H
#define OCTET_RUNTIME_METRICS_CRC32C_H

#include <cstddef>
#include <cstdint>

namespace octet::metrics {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord uses.
uint32_t crc32c(const void *data, size_t size);

// TFRecord stores CRCs rotated and offset, so that a CRC of data that
// itself holds CRCs does not degenerate.
inline uint32_t maskCrc(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

} // namespace octet::metrics

#endif
