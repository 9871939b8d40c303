#include "bundle/InitValues.h"
#include "bundle/Bundle.h"

#include "support/InitDraws.h"
#include "support/Numerics.h"

#include <cmath>
#include <cstring>

namespace octet::bundle {
namespace {

template <typename T> void put(std::string &out, uint64_t i, T value) {
  std::memcpy(&out[i * sizeof(T)], &value, sizeof(T));
}

// Stores one float value in `dtype`, rounded to nearest even.
void store(std::string &out, octet::DType dtype, uint64_t i, float v) {
  switch (dtype) {
  case octet::DType::I32:
    return put(out, i, static_cast<int32_t>(v));
  case octet::DType::I64:
    return put(out, i, static_cast<int64_t>(v));
  case octet::DType::U8:
    return put(out, i, static_cast<uint8_t>(v));
  default:
    return numerics::encodeFloat(dtype, v, &out[i * octet::dtypeBytes(dtype)]);
  }
}

} // namespace

uint64_t initSeed(uint64_t specSeed, std::string_view name) {
  return numerics::initSeed(specSeed, name);
}

StatusOr<std::string> initialBytes(const Init &init, DType wireDType,
                                   uint64_t elements, const std::string &what) {
  std::optional<octet::DType> known = dtypeFromProto(wireDType);
  if (!known)
    return Status::error(what + " has no element type; recompile the bundle");
  octet::DType dtype = *known;
  uint64_t width = octet::dtypeBytes(dtype);
  std::string out(elements * width, '\0');
  switch (init.kind()) {
  case Init::ZEROS:
    return out;
  case Init::ONES:
  case Init::CONSTANT: {
    float v = init.kind() == Init::ONES ? 1.0f : float(init.value());
    for (uint64_t i = 0; i < elements; ++i)
      store(out, dtype, i, v);
    return out;
  }
  case Init::NORMAL: {
    if (!octet::isFloat(dtype))
      return Status::error(what + " is " + octet::dtypeName(dtype) +
                           " but its init is normal; only floating-point "
                           "tensors draw normal values");
    numerics::NormalDraws draws(init.seed());
    for (uint64_t i = 0; i < elements; ++i)
      store(out, dtype, i, float(init.mean() + draws.next() * init.std()));
    return out;
  }
  default:
    return Status::error(what + " has init kind " +
                         std::to_string(int(init.kind())) +
                         ", which this runtime does not know: use the octet-run "
                         "of the release that compiled the bundle");
  }
}

} // namespace octet::bundle
