#ifndef OCTET_SUPPORT_NUMERICS_H
#define OCTET_SUPPORT_NUMERICS_H

// Exact scalar conversions between float32 and the narrow formats that octet
// computes in (BF16, F16, FP8 E4M3FN and E5M2). Dependency-free so that GPU
// tests and the runtime, which never link MLIR, can reuse it.
//
// All conversions from float32 round to nearest, ties to even, in a single
// rounding step (no detour through a wider format), exactly as the GPU's
// cvt.rn instructions do.

#include "support/DType.h"

#include <cstdint>

namespace octet::numerics {

// What a float32 value becomes when it is too large for the format.
enum class Overflow {
  // Clamp to the largest finite value of the same sign; NaN stays NaN;
  // infinities clamp too. This is PTX cvt.rn.satfinite, which FP8 casts on
  // Hopper use.
  SatFinite,
  // IEEE behaviour: overflow gives infinity where the format has one (BF16,
  // F16, E5M2) and NaN where it has none (E4M3FN). This is what ml_dtypes
  // and a plain cvt.rn do.
  Ieee,
};

// The largest finite value: 448 for E4M3FN, 57344 for E5M2.
float maxFinite(DType dtype);

// Rounds to the nearest value representable in `dtype` and returns it as a
// float32 (every such value is exactly representable in float32). Only the
// narrow float types round: f32, f64 and the integer types return x.
float roundTo(DType dtype, float x, Overflow overflow);

// The default of each type: FP8 saturates (satfinite), BF16 and F16 do not.
Overflow defaultOverflow(DType dtype);
inline float roundTo(DType dtype, float x) {
  return roundTo(dtype, x, defaultOverflow(dtype));
}
inline float roundToBF16(float x) {
  return roundTo(DType::BF16, x, Overflow::Ieee);
}
inline float roundToF16(float x) {
  return roundTo(DType::F16, x, Overflow::Ieee);
}
inline float roundToE4M3(float x) {
  return roundTo(DType::F8E4M3FN, x, Overflow::SatFinite);
}
inline float roundToE5M2(float x) {
  return roundTo(DType::F8E5M2, x, Overflow::SatFinite);
}

// Bit patterns, for buffers that hold the narrow formats themselves.
uint16_t encodeBF16(float x); // rounds (IEEE overflow)
float decodeBF16(uint16_t bits);
uint16_t encodeF16(float x); // rounds (IEEE overflow)
float decodeF16(uint16_t bits);
uint8_t encodeE4M3(float x, Overflow overflow = Overflow::SatFinite);
float decodeE4M3(uint8_t bits);
uint8_t encodeE5M2(float x, Overflow overflow = Overflow::SatFinite);
float decodeE5M2(uint8_t bits);

// One element of a buffer of a float type (isFloat), as the GPU holds it:
// encodeFloat writes dtypeBytes(dtype) bytes at `out`, rounded with the
// type's default overflow; decodeFloat reads them back exactly (f64 is
// rounded to float32).
void encodeFloat(DType dtype, float x, void *out);
float decodeFloat(DType dtype, const void *in);

} // namespace octet::numerics

#endif
