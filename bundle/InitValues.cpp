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
void store(std::string &out, DType dtype, uint64_t i, float v) {
  using namespace octet::numerics;
  switch (dtype) {
  case F32:
    return put(out, i, v);
  case BF16:
    return put(out, i, encodeBF16(v));
  case F16:
    return put(out, i, encodeF16(v));
  case F8E4M3FN:
    return put(out, i, encodeE4M3(v));
  case F8E5M2:
    return put(out, i, encodeE5M2(v));
  case I32:
    return put(out, i, static_cast<int32_t>(v));
  case I64:
    return put(out, i, static_cast<int64_t>(v));
  case U8:
    return put(out, i, static_cast<uint8_t>(v));
  default:
    return;
  }
}

bool isFloat(DType dtype) {
  return dtype == F32 || dtype == BF16 || dtype == F16 ||
         dtype == F8E4M3FN || dtype == F8E5M2;
}

} // namespace

uint64_t initSeed(uint64_t specSeed, std::string_view name) {
  return numerics::initSeed(specSeed, name);
}

StatusOr<std::string> initialBytes(const Init &init, DType dtype,
                                   uint64_t elements,
                                   const std::string &what) {
  uint64_t width = dtypeBytes(dtype);
  if (width == 0)
    return Status::error(what + " has no element type; recompile the bundle");
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
    if (!isFloat(dtype))
      return Status::error(what + " is " + dtypeName(dtype) +
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
