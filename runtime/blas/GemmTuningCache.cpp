#include "runtime/blas/GemmTuningCache.h"

#include "support/AtomicFile.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace octet::blas {
namespace {

constexpr const char *kHeader =
    "# octet cuBLASLt algorithm cache: device, cuBLASLt version, GEMM "
    "descriptor, algorithm (hex), microseconds per call; delete a line (or "
    "the file) to time that GEMM again\n";

std::string toHex(const std::string &bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

bool fromHex(const std::string &hex, std::string &bytes) {
  if (hex.size() % 2)
    return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    return -1;
  };
  bytes.clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0)
      return false;
    bytes += char(hi << 4 | lo);
  }
  return true;
}

std::vector<std::string> splitTabs(const std::string &line) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    size_t tab = line.find('\t', start);
    fields.push_back(line.substr(start, tab - start));
    if (tab == std::string::npos)
      return fields;
    start = tab + 1;
  }
}

} // namespace

StatusOr<GemmTuningCache> GemmTuningCache::load(const std::string &path) {
  if (!isRegularFile(path))
    return GemmTuningCache();
  auto text = readWholeFile(path);
  if (!text)
    return text.status();
  return parse(*text, path);
}

StatusOr<GemmTuningCache> GemmTuningCache::parse(const std::string &text,
                                                 const std::string &origin) {
  GemmTuningCache cache;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#')
      continue;
    std::string at = origin + ":" + std::to_string(number);
    std::vector<std::string> f = splitTabs(line);
    if (f.size() != 5)
      return Status::error(at + ": expected 5 tab-separated fields (device, "
                                "cuBLASLt version, descriptor, algorithm, "
                                "microseconds) but found " +
                           std::to_string(f.size()) +
                           "; delete the line or the file to time again");
    GemmTuningEntry e;
    e.device = f[0];
    e.cublasLtVersion = f[1];
    e.descriptor = f[2];
    if (e.device.empty() || e.cublasLtVersion.empty() || e.descriptor.empty())
      return Status::error(at + ": an empty device, version or descriptor; "
                                "delete the line or the file to time again");
    if (!fromHex(f[3], e.algorithm) || e.algorithm.empty())
      return Status::error(at + ": the algorithm '" + f[3] +
                           "' is not hexadecimal bytes; delete the line or "
                           "the file to time again");
    char *end = nullptr;
    e.microseconds = std::strtod(f[4].c_str(), &end);
    if (f[4].empty() || *end != '\0' || !(e.microseconds >= 0))
      return Status::error(at + ": the time '" + f[4] +
                           "' is not a number of microseconds; delete the "
                           "line or the file to time again");
    cache.put(std::move(e));
  }
  return cache;
}

const GemmTuningEntry *
GemmTuningCache::find(const std::string &device,
                      const std::string &cublasLtVersion,
                      const std::string &descriptor) const {
  for (const GemmTuningEntry &e : entries_)
    if (e.device == device && e.cublasLtVersion == cublasLtVersion &&
        e.descriptor == descriptor)
      return &e;
  return nullptr;
}

void GemmTuningCache::put(GemmTuningEntry entry) {
  for (GemmTuningEntry &e : entries_)
    if (e.device == entry.device &&
        e.cublasLtVersion == entry.cublasLtVersion &&
        e.descriptor == entry.descriptor) {
      e = std::move(entry);
      return;
    }
  entries_.push_back(std::move(entry));
}

std::string GemmTuningCache::text() const {
  std::string out = kHeader;
  for (const GemmTuningEntry &e : entries_) {
    char us[32];
    std::snprintf(us, sizeof us, "%.3f", e.microseconds);
    out += e.device + "\t" + e.cublasLtVersion + "\t" + e.descriptor + "\t" +
           toHex(e.algorithm) + "\t" + us + "\n";
  }
  return out;
}

Status GemmTuningCache::save(const std::string &path) const {
  return writeFileAtomically(path, text());
}

} // namespace octet::blas
