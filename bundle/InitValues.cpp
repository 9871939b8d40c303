#include "bundle/InitValues.h"
#include "bundle/Bundle.h"

#include "support/InitDraws.h"
#include "support/Numerics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

namespace octet::bundle {
namespace {

template <typename T> void put(char *out, uint64_t i, T value) {
  std::memcpy(out + i * sizeof(T), &value, sizeof(T));
}

// Stores one float value in `dtype`, rounded to nearest even.
void store(char *out, octet::DType dtype, uint64_t i, float v) {
  switch (dtype) {
  case octet::DType::I32:
    return put(out, i, static_cast<int32_t>(v));
  case octet::DType::I64:
    return put(out, i, static_cast<int64_t>(v));
  case octet::DType::U8:
    return put(out, i, static_cast<uint8_t>(v));
  default:
    return numerics::encodeFloat(dtype, v, out + i * octet::dtypeBytes(dtype));
  }
}

} // namespace

uint64_t initSeed(uint64_t specSeed, std::string_view name) {
  return numerics::initSeed(specSeed, name);
}

StatusOr<uint64_t> initialElementBytes(DType wireDType,
                                       const std::string &what) {
  std::optional<octet::DType> known = dtypeFromProto(wireDType);
  if (!known)
    return Status::error(what + " has no element type; recompile the bundle");
  return uint64_t(octet::dtypeBytes(*known));
}

Status initialRange(const Init &init, DType wireDType, uint64_t first,
                    uint64_t count, char *out, const std::string &what) {
  std::optional<octet::DType> known = dtypeFromProto(wireDType);
  if (!known)
    return Status::error(what + " has no element type; recompile the bundle");
  octet::DType dtype = *known;
  switch (init.kind()) {
  case Init::ZEROS:
    std::memset(out, 0, count * octet::dtypeBytes(dtype));
    return Status::ok();
  case Init::ONES:
  case Init::CONSTANT: {
    float v = init.kind() == Init::ONES ? 1.0f : float(init.value());
    for (uint64_t i = 0; i < count; ++i)
      store(out, dtype, i, v);
    return Status::ok();
  }
  case Init::NORMAL: {
    if (!octet::isFloat(dtype))
      return Status::error(what + " is " + octet::dtypeName(dtype) +
                           " but its init is normal; only floating-point "
                           "tensors draw normal values");
    numerics::NormalDraws draws(init.seed(), first);
    for (uint64_t i = 0; i < count; ++i)
      store(out, dtype, i, float(init.mean() + draws.next() * init.std()));
    return Status::ok();
  }
  default:
    return Status::error(what + " has init kind " +
                         std::to_string(int(init.kind())) +
                         ", which this runtime does not know: use the octet-run "
                         "of the release that compiled the bundle");
  }
}

StatusOr<std::string> initialPart(const Init &init, DType wireDType,
                                  uint64_t first, uint64_t count,
                                  const std::string &what, unsigned threads) {
  auto width = initialElementBytes(wireDType, what);
  if (!width)
    return width.status();
  std::string out(count * *width, '\0');
  constexpr uint64_t kRange = uint64_t(1) << 20;
  uint64_t ranges =
      std::clamp<uint64_t>(count / kRange, 1, std::max(1u, threads));
  uint64_t per = (count + ranges - 1) / ranges;
  std::vector<Status> done(ranges, Status::ok());
  auto fill = [&](uint64_t r) {
    uint64_t begin = std::min(count, r * per);
    uint64_t n = std::min(count, begin + per) - begin;
    done[r] = initialRange(init, wireDType, first + begin, n,
                           out.data() + begin * *width, what);
  };
  std::vector<std::thread> pool;
  for (uint64_t r = 1; r < ranges; ++r)
    pool.emplace_back(fill, r);
  fill(0);
  for (std::thread &t : pool)
    t.join();
  for (const Status &st : done)
    OCTET_RETURN_IF_ERROR(st);
  return out;
}

StatusOr<std::string> initialBytes(const Init &init, DType wireDType,
                                   uint64_t elements, const std::string &what) {
  auto width = initialElementBytes(wireDType, what);
  if (!width)
    return width.status();
  std::string out(elements * *width, '\0');
  OCTET_RETURN_IF_ERROR(
      initialRange(init, wireDType, 0, elements, out.data(), what));
  return out;
}

} // namespace octet::bundle
