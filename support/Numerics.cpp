#include "support/Numerics.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace octet::numerics {
namespace {

struct Spec {
  int exponentBits;
  int mantissaBits;
  int bias;
  float maxFinite;
  bool hasInf;
};

Spec specOf(DType dtype) {
  switch (dtype) {
  case DType::BF16:
    return {8, 7, 127, 3.38953139e38f, true};
  case DType::F16:
    return {5, 10, 15, 65504.0f, true};
  case DType::F8E4M3FN:
    return {4, 3, 7, 448.0f, false};
  case DType::F8E5M2:
    return {5, 2, 15, 57344.0f, true};
  default:
    break;
  }
  return {8, 23, 127, std::numeric_limits<float>::max(), true};
}

// The types roundTo changes: the floats narrower than float32.
bool rounds(DType dtype) { return isFloat(dtype) && dtypeBytes(dtype) < 4; }

uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

float fromBits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

float overflowValue(const Spec &spec, float x, Overflow overflow) {
  if (overflow == Overflow::SatFinite)
    return std::copysign(spec.maxFinite, x);
  if (spec.hasInf)
    return std::copysign(std::numeric_limits<float>::infinity(), x);
  return std::copysign(std::numeric_limits<float>::quiet_NaN(), x);
}

// Packs a value already representable in the format into its bit pattern.
uint32_t pack(const Spec &spec, float r) {
  uint32_t sign = std::signbit(r) ? 1u << (spec.exponentBits + spec.mantissaBits)
                                  : 0u;
  uint32_t expMask = (1u << spec.exponentBits) - 1;
  if (std::isnan(r)) {
    // Canonical NaN: all exponent and mantissa bits set for the FP8 formats
    // (what the GPU writes), quiet NaN for the IEEE half formats.
    if (spec.exponentBits + spec.mantissaBits == 7)
      return sign | 0x7f;
    return sign | (expMask << spec.mantissaBits) |
           (1u << (spec.mantissaBits - 1));
  }
  float a = std::fabs(r);
  if (std::isinf(a))
    return sign | (expMask << spec.mantissaBits);
  if (a == 0.0f)
    return sign;
  int e;
  std::frexp(a, &e);
  int exponent = e - 1;
  int emin = 1 - spec.bias;
  if (exponent < emin) {
    float units = std::ldexp(a, spec.mantissaBits - emin);
    return sign | static_cast<uint32_t>(units);
  }
  float mantissa = std::ldexp(a, spec.mantissaBits - exponent) -
                   std::ldexp(1.0f, spec.mantissaBits);
  return sign |
         (static_cast<uint32_t>(exponent + spec.bias) << spec.mantissaBits) |
         static_cast<uint32_t>(mantissa);
}

float unpack(const Spec &spec, uint32_t bits) {
  int total = spec.exponentBits + spec.mantissaBits;
  bool negative = (bits >> total) & 1;
  uint32_t expField = (bits >> spec.mantissaBits) & ((1u << spec.exponentBits) - 1);
  uint32_t mantissa = bits & ((1u << spec.mantissaBits) - 1);
  uint32_t expMax = (1u << spec.exponentBits) - 1;
  float value;
  if (!spec.hasInf && expField == expMax &&
      mantissa == (1u << spec.mantissaBits) - 1) {
    value = std::numeric_limits<float>::quiet_NaN(); // E4M3FN: S.1111.111
  } else if (spec.hasInf && expField == expMax) {
    value = mantissa ? std::numeric_limits<float>::quiet_NaN()
                     : std::numeric_limits<float>::infinity();
  } else if (expField == 0) {
    value = std::ldexp(static_cast<float>(mantissa),
                       1 - spec.bias - spec.mantissaBits);
  } else {
    value = std::ldexp(static_cast<float>(mantissa + (1u << spec.mantissaBits)),
                       static_cast<int>(expField) - spec.bias -
                           spec.mantissaBits);
  }
  return negative ? -value : value;
}

} // namespace

Overflow defaultOverflow(DType dtype) {
  return isFp8(dtype) ? Overflow::SatFinite : Overflow::Ieee;
}

float maxFinite(DType dtype) { return specOf(dtype).maxFinite; }

float roundTo(DType dtype, float x, Overflow overflow) {
  if (!rounds(dtype) || std::isnan(x))
    return x;
  Spec spec = specOf(dtype);
  if (dtype == DType::BF16 && overflow == Overflow::Ieee) {
    // The classic bias trick is exact RNE for BF16 and keeps this hot cast
    // branch-light; overflow carries into the exponent and yields infinity.
    uint32_t u = bitsOf(x);
    u += 0x7fffu + ((u >> 16) & 1u);
    return fromBits(u & 0xffff0000u);
  }
  float a = std::fabs(x);
  if (std::isinf(a))
    return overflowValue(spec, x, overflow);
  // This cast runs on every element of every quantized tensor, so it works
  // on the bits instead of frexp/ldexp/nearbyint.
  uint32_t u = bitsOf(a);
  int exponent = static_cast<int>(u >> 23) - 127;
  int emin = 1 - spec.bias;
  float r;
  if (exponent >= emin || dtype == DType::BF16) {
    // Normal in the target (BF16 shares float32's exponent range, so its
    // subnormals are float32's too): round the mantissa to nearest even;
    // a carry moves into the exponent as it should.
    int shift = 23 - spec.mantissaBits;
    u += (1u << (shift - 1)) - 1 + ((u >> shift) & 1u);
    u &= ~((1u << shift) - 1);
    r = fromBits(u);
  } else {
    // Subnormal in the target: a fixed quantum 2^(emin - mantissaBits).
    // Scaling by powers of two is exact, and adding then subtracting 2^23
    // rounds to an integer, ties to even.
    float scaled = a * std::ldexp(1.0f, spec.mantissaBits - emin);
    volatile float shifted = scaled + 8388608.0f;
    float units = shifted - 8388608.0f;
    r = units * std::ldexp(1.0f, emin - spec.mantissaBits);
  }
  if (!(r <= spec.maxFinite))
    return overflowValue(spec, x, overflow);
  return std::copysign(r, x);
}

uint16_t encodeBF16(float x) {
  Spec spec = specOf(DType::BF16);
  return static_cast<uint16_t>(
      pack(spec, roundTo(DType::BF16, x, Overflow::Ieee)));
}
float decodeBF16(uint16_t bits) {
  return fromBits(static_cast<uint32_t>(bits) << 16);
}
uint16_t encodeF16(float x) {
  return static_cast<uint16_t>(
      pack(specOf(DType::F16), roundTo(DType::F16, x, Overflow::Ieee)));
}
float decodeF16(uint16_t bits) { return unpack(specOf(DType::F16), bits); }
uint8_t encodeE4M3(float x, Overflow overflow) {
  return static_cast<uint8_t>(
      pack(specOf(DType::F8E4M3FN), roundTo(DType::F8E4M3FN, x, overflow)));
}
float decodeE4M3(uint8_t bits) { return unpack(specOf(DType::F8E4M3FN), bits); }
uint8_t encodeE5M2(float x, Overflow overflow) {
  return static_cast<uint8_t>(
      pack(specOf(DType::F8E5M2), roundTo(DType::F8E5M2, x, overflow)));
}
float decodeE5M2(uint8_t bits) { return unpack(specOf(DType::F8E5M2), bits); }

void encodeFloat(DType dtype, float x, void *out) {
  auto put = [out](auto value) { std::memcpy(out, &value, sizeof(value)); };
  switch (dtype) {
  case DType::F64:
    return put(double(x));
  case DType::F32:
    return put(x);
  case DType::BF16:
    return put(encodeBF16(x));
  case DType::F16:
    return put(encodeF16(x));
  case DType::F8E4M3FN:
    return put(encodeE4M3(x));
  case DType::F8E5M2:
    return put(encodeE5M2(x));
  default:
    return;
  }
}

float decodeFloat(DType dtype, const void *in) {
  auto get = [in](auto value) {
    std::memcpy(&value, in, sizeof(value));
    return value;
  };
  switch (dtype) {
  case DType::F64:
    return float(get(double()));
  case DType::F32:
    return get(float());
  case DType::BF16:
    return decodeBF16(get(uint16_t()));
  case DType::F16:
    return decodeF16(get(uint16_t()));
  case DType::F8E4M3FN:
    return decodeE4M3(get(uint8_t()));
  case DType::F8E5M2:
    return decodeE5M2(get(uint8_t()));
  default:
    return std::numeric_limits<float>::quiet_NaN();
  }
}

} // namespace octet::numerics
