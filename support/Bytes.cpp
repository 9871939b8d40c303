#include "support/Bytes.h"

#include <limits>
#include <utility>

namespace octet {

bool parseByteSize(std::string text, uint64_t &bytes) {
  uint64_t unit = 1;
  for (auto [suffix, factor] : {std::pair<const char *, uint64_t>{"KiB", 1024},
                                {"MiB", 1 << 20},
                                {"GiB", 1ull << 30},
                                {"KB", 1000},
                                {"MB", 1000000},
                                {"GB", 1000000000}}) {
    std::string s = suffix;
    if (text.size() > s.size() &&
        text.compare(text.size() - s.size(), s.size(), s) == 0) {
      text.resize(text.size() - s.size());
      unit = factor;
      break;
    }
  }
  if (text.empty() || text.size() > 19 ||
      text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  uint64_t count = std::stoull(text);
  if (count == 0 || count > std::numeric_limits<uint64_t>::max() / unit)
    return false;
  bytes = count * unit;
  return true;
}

} // namespace octet
