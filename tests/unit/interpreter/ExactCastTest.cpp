// The interpreter's FP8 casts against an outside oracle: ml_dtypes' casts of
// every BF16 bit pattern, made by tests/fixtures/fp8_casts/make_golden.py.

#include "support/Numerics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace octet::numerics;

namespace {

std::vector<unsigned char> readFixture(const std::string &name) {
  std::string path =
      std::string(OCTET_SOURCE_DIR) + "/tests/fixtures/fp8_casts/" + name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << path;
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), {});
}

uint32_t floatBits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

struct Fp8Format {
  const char *name;
  uint8_t (*encode)(float, Overflow);
  float (*decode)(uint8_t);
  float (*roundSat)(float);
};

class ExactCast : public ::testing::TestWithParam<Fp8Format> {};

// NaN has several encodings; any NaN is the same value.
void expectSameFp8(const Fp8Format &format, uint8_t ours, uint8_t golden,
                   uint16_t bf16Bits, const char *mode) {
  if (std::isnan(format.decode(golden))) {
    EXPECT_TRUE(std::isnan(format.decode(ours)))
        << format.name << " " << mode << " bf16 0x" << std::hex << bf16Bits;
    return;
  }
  EXPECT_EQ(ours, golden) << format.name << " " << mode << " of bf16 0x"
                          << std::hex << bf16Bits << " ("
                          << decodeBF16(bf16Bits) << ")";
}

TEST_P(ExactCast, EveryBF16ValueMatchesMlDtypes) {
  const Fp8Format &format = GetParam();
  std::string stem = format.name;
  auto ieee = readFixture(stem + "_ieee.bin");
  auto sat = readFixture(stem + "_sat.bin");
  ASSERT_EQ(ieee.size(), 65536u);
  ASSERT_EQ(sat.size(), 65536u);
  // Past the first few failures, more lines only bury the first.
  int linesAfterFailure = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    if (::testing::Test::HasFailure() && ++linesAfterFailure > 20)
      break;
    uint16_t bits = static_cast<uint16_t>(b);
    float x = decodeBF16(bits);
    expectSameFp8(format, format.encode(x, Overflow::Ieee), ieee[b], bits,
                  "ieee");
    expectSameFp8(format, format.encode(x, Overflow::SatFinite), sat[b], bits,
                  "satfinite");
    // The float-valued rounding used in the interpreter's tensors agrees
    // with the byte encoding.
    float rounded = format.roundSat(x);
    float expected = format.decode(sat[b]);
    if (std::isnan(expected))
      EXPECT_TRUE(std::isnan(rounded));
    else
      EXPECT_EQ(floatBits(rounded), floatBits(expected))
          << format.name << " roundTo of " << x;
  }
}

TEST_P(ExactCast, EveryFp8ValueWidensAsMlDtypes) {
  const Fp8Format &format = GetParam();
  auto decoded = readFixture(std::string(format.name) + "_decode.bin");
  ASSERT_EQ(decoded.size(), 256u * 4);
  for (int i = 0; i < 256; ++i) {
    uint32_t golden;
    std::memcpy(&golden, decoded.data() + 4 * i, 4);
    float ours = format.decode(static_cast<uint8_t>(i));
    float goldenValue;
    std::memcpy(&goldenValue, &golden, 4);
    if (std::isnan(goldenValue))
      EXPECT_TRUE(std::isnan(ours)) << format.name << " byte " << i;
    else
      EXPECT_EQ(floatBits(ours), golden) << format.name << " byte " << i;
  }
}

TEST(ExactCastSpecials, SaturationAndNaN) {
  EXPECT_EQ(roundToE4M3(1e6f), 448.0f);
  EXPECT_EQ(roundToE4M3(-INFINITY), -448.0f);
  EXPECT_EQ(roundToE5M2(1e9f), 57344.0f);
  EXPECT_TRUE(std::isnan(roundToE4M3(NAN)));
  EXPECT_TRUE(std::isnan(roundToE5M2(NAN)));
  EXPECT_TRUE(std::isnan(decodeE4M3(encodeE4M3(1e6f, Overflow::Ieee))));
  EXPECT_TRUE(std::isinf(decodeE5M2(encodeE5M2(1e9f, Overflow::Ieee))));
}

INSTANTIATE_TEST_SUITE_P(
    Fp8, ExactCast,
    ::testing::Values(Fp8Format{"e4m3", encodeE4M3, decodeE4M3, roundToE4M3},
                      Fp8Format{"e5m2", encodeE5M2, decodeE5M2, roundToE5M2}),
    [](const auto &info) { return std::string(info.param.name); });

} // namespace
