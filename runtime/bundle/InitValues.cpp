#include "runtime/bundle/InitValues.h"
#include "runtime/bundle/Bundle.h"

#include "compiler/Interpreter/Numerics.h"

#include <cmath>
#include <cstring>

namespace octet::bundle {
namespace {

// SplitMix64, as the interpreter's VariableStore draws.
struct SplitMix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
};

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
  uint64_t h = 1469598103934665603ull;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return specSeed ^ h;
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
    SplitMix rng{init.seed()};
    for (uint64_t i = 0; i < elements; ++i) {
      // Box-Muller; 1 - u keeps the logarithm finite.
      double u1 = 1.0 - rng.uniform(), u2 = rng.uniform();
      double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2);
      store(out, dtype, i, float(init.mean() + z * init.std()));
    }
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
