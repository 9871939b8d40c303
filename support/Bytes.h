#ifndef OCTET_SUPPORT_BYTES_H
#define OCTET_SUPPORT_BYTES_H

#include <cstdint>
#include <cstdio>
#include <string>

namespace octet {

// "1.50 GiB", "12.0 MiB", "512 B": sizes as messages and reports print them.
inline std::string humanBytes(uint64_t bytes) {
  char buf[32];
  const double b = double(bytes);
  if (bytes >= (uint64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1 << 30));
  else if (bytes >= (uint64_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1 << 20));
  else if (bytes >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%llu B", (unsigned long long)bytes);
  return buf;
}

// "200KB", "5GB" (powers of 1000), "1GiB", "81559MiB" (powers of 1024),
// "4096" (bytes): false for anything else, zero, or an overflow.
bool parseByteSize(std::string text, uint64_t &bytes);

} // namespace octet

#endif
