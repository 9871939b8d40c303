// Exact casts: saturation, NaN, subnormals and ties, checked against values
// worked out by hand from the format definitions (OCP FP8, IEEE half, bfloat16).

#include "support/Numerics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace octet::numerics;

namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Numerics, E4M3SaturatesLikeSatfinite) {
  EXPECT_EQ(roundToE4M3(448.0f), 448.0f);
  EXPECT_EQ(roundToE4M3(1000.0f), 448.0f);
  EXPECT_EQ(roundToE4M3(-1.0e30f), -448.0f);
  EXPECT_EQ(roundToE4M3(kInf), 448.0f);
  EXPECT_EQ(roundToE4M3(-kInf), -448.0f);
  EXPECT_TRUE(std::isnan(roundToE4M3(kNaN)));
  EXPECT_EQ(encodeE4M3(kNaN), 0x7f);
  EXPECT_EQ(encodeE4M3(1000.0f), 0x7e);
}

TEST(Numerics, E4M3IeeeOverflowIsNaN) {
  // 464 is halfway between 448 (mantissa 110) and the would-be 480 (111):
  // ties go to the even mantissa, 448; anything above becomes NaN.
  EXPECT_EQ(roundTo(octet::DType::F8E4M3FN, 464.0f, Overflow::Ieee), 448.0f);
  EXPECT_TRUE(
      std::isnan(roundTo(octet::DType::F8E4M3FN, 465.0f, Overflow::Ieee)));
  EXPECT_TRUE(
      std::isnan(roundTo(octet::DType::F8E4M3FN, kInf, Overflow::Ieee)));
}

TEST(Numerics, E5M2SaturatesAndOverflowsToInf) {
  EXPECT_EQ(roundToE5M2(57344.0f), 57344.0f);
  EXPECT_EQ(roundToE5M2(1.0e6f), 57344.0f);
  EXPECT_EQ(roundToE5M2(-kInf), -57344.0f);
  EXPECT_TRUE(std::isnan(roundToE5M2(kNaN)));
  // 61440 ties between 57344 (odd mantissa 11) and 65536 (even): → inf.
  EXPECT_EQ(roundTo(octet::DType::F8E5M2, 61440.0f, Overflow::Ieee), kInf);
  EXPECT_EQ(roundTo(octet::DType::F8E5M2, 61439.0f, Overflow::Ieee), 57344.0f);
  EXPECT_EQ(encodeE5M2(kInf, Overflow::Ieee), 0x7c);
}

TEST(Numerics, Fp8RoundsToNearestEven) {
  // E4M3 around 1: spacing 1/8. 1 + 1/16 ties to 1, 1 + 3/16 ties to 1.25.
  EXPECT_EQ(roundToE4M3(1.0625f), 1.0f);
  EXPECT_EQ(roundToE4M3(1.1875f), 1.25f);
  EXPECT_EQ(roundToE4M3(1.07f), 1.125f);
  // E5M2 around 1: spacing 1/4.
  EXPECT_EQ(roundToE5M2(1.125f), 1.0f);
  EXPECT_EQ(roundToE5M2(1.375f), 1.5f);
}

TEST(Numerics, Fp8Subnormals) {
  float e4m3Tiny = std::ldexp(1.0f, -9); // smallest E4M3 subnormal
  EXPECT_EQ(roundToE4M3(e4m3Tiny), e4m3Tiny);
  EXPECT_EQ(roundToE4M3(e4m3Tiny * 0.5f), 0.0f); // tie to even (zero)
  EXPECT_EQ(roundToE4M3(e4m3Tiny * 0.51f), e4m3Tiny);
  EXPECT_EQ(roundToE4M3(e4m3Tiny * 1.5f), 2 * e4m3Tiny); // tie to even
  EXPECT_EQ(encodeE4M3(e4m3Tiny), 0x01);
  float e5m2Tiny = std::ldexp(1.0f, -16);
  EXPECT_EQ(roundToE5M2(e5m2Tiny * 3.0f), 3 * e5m2Tiny);
  EXPECT_EQ(encodeE5M2(e5m2Tiny), 0x01);
  EXPECT_TRUE(std::signbit(roundToE4M3(-e4m3Tiny * 0.25f)));
}

TEST(Numerics, Fp8CodesRoundTrip) {
  for (int code = 0; code < 256; ++code) {
    float v = decodeE4M3(uint8_t(code));
    if (std::isnan(v)) {
      EXPECT_EQ(code & 0x7f, 0x7f) << code;
      continue;
    }
    EXPECT_EQ(encodeE4M3(v), code) << "E4M3 code " << code << " value " << v;
    EXPECT_EQ(roundToE4M3(v), v);
  }
  for (int code = 0; code < 256; ++code) {
    float v = decodeE5M2(uint8_t(code));
    if (std::isnan(v))
      continue;
    EXPECT_EQ(encodeE5M2(v, Overflow::Ieee), code) << "E5M2 code " << code;
  }
  EXPECT_EQ(decodeE4M3(0x7e), 448.0f);
  EXPECT_EQ(decodeE4M3(0x08), std::ldexp(1.0f, -6)); // smallest normal
  EXPECT_EQ(decodeE5M2(0x7b), 57344.0f);
  EXPECT_EQ(decodeE5M2(0x7c), kInf);
}

TEST(Numerics, BF16RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(roundToBF16(1.0f + std::ldexp(1.0f, -8)), 1.0f);
  EXPECT_EQ(roundToBF16(1.0f + 3 * std::ldexp(1.0f, -8)),
            1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(roundToBF16(fromBits(0x3f808001)), fromBits(0x3f810000));
  EXPECT_EQ(roundToBF16(fromBits(0x7f7fffff)), kInf);
  EXPECT_TRUE(std::isnan(roundToBF16(kNaN)));
  EXPECT_EQ(encodeBF16(1.0f), 0x3f80);
  EXPECT_EQ(decodeBF16(0xc0a0), -5.0f);
}

TEST(Numerics, F16) {
  EXPECT_EQ(roundToF16(65504.0f), 65504.0f);
  EXPECT_EQ(roundToF16(65520.0f), kInf); // tie to even → overflow
  EXPECT_EQ(roundToF16(65519.0f), 65504.0f);
  EXPECT_EQ(encodeF16(1.0f), 0x3c00);
  EXPECT_EQ(decodeF16(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(roundToF16(std::ldexp(1.0f, -25)), 0.0f);
}

} // namespace
