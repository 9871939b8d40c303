// The one element-type enum: names, sizes and kinds, and the float element
// codecs every buffer writer and reader shares.

#include "support/DType.h"
#include "support/Numerics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace octet {
namespace {

const DType kAll[] = {DType::F64,      DType::F32,    DType::BF16, DType::F16,
                      DType::F8E4M3FN, DType::F8E5M2, DType::I64,  DType::I32,
                      DType::I16,      DType::I8,     DType::U8,   DType::Bool};

TEST(DType, NamesAreTheReportSpellingsAndParseBack) {
  std::vector<std::string> names;
  for (DType d : kAll) {
    names.push_back(dtypeName(d));
    EXPECT_EQ(parseDType(dtypeName(d)), d) << dtypeName(d);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"f64", "f32", "bf16", "f16",
                                             "e4m3", "e5m2", "i64", "i32",
                                             "i16", "i8", "u8", "bool"}));
  EXPECT_EQ(parseDType("f8E4M3FN"), std::nullopt);
  EXPECT_EQ(parseDType(""), std::nullopt);
}

TEST(DType, BytesAndKinds) {
  std::vector<size_t> bytes;
  for (DType d : kAll)
    bytes.push_back(dtypeBytes(d));
  EXPECT_EQ(bytes, (std::vector<size_t>{8, 4, 2, 2, 1, 1, 8, 4, 2, 1, 1, 1}));
  for (DType d : kAll) {
    bool fp8 = d == DType::F8E4M3FN || d == DType::F8E5M2;
    bool floating = fp8 || d == DType::F64 || d == DType::F32 ||
                    d == DType::BF16 || d == DType::F16;
    EXPECT_EQ(isFp8(d), fp8) << dtypeName(d);
    EXPECT_EQ(isFloat(d), floating) << dtypeName(d);
  }
}

TEST(DType, FloatElementsEncodeAsTheBitPatternFunctions) {
  const float values[] = {0.0f,   -0.0f,    1.0f,    -3.140625f, 1.0e-3f,
                          500.0f, 65519.0f, 1.0e30f, INFINITY};
  for (float x : values) {
    SCOPED_TRACE(x);
    uint8_t buffer[8] = {};
    numerics::encodeFloat(DType::BF16, x, buffer);
    uint16_t half;
    std::memcpy(&half, buffer, 2);
    EXPECT_EQ(half, numerics::encodeBF16(x));
    numerics::encodeFloat(DType::F16, x, buffer);
    std::memcpy(&half, buffer, 2);
    EXPECT_EQ(half, numerics::encodeF16(x));
    numerics::encodeFloat(DType::F8E4M3FN, x, buffer);
    EXPECT_EQ(buffer[0], numerics::encodeE4M3(x)); // saturating
    numerics::encodeFloat(DType::F8E5M2, x, buffer);
    EXPECT_EQ(buffer[0], numerics::encodeE5M2(x));
  }
}

TEST(DType, FloatElementsDecodeExactly) {
  for (DType d : kAll) {
    if (!isFloat(d))
      continue;
    SCOPED_TRACE(dtypeName(d));
    for (float x : {0.5f, -2.0f, 0.375f, 448.0f}) {
      uint8_t buffer[8] = {};
      numerics::encodeFloat(d, x, buffer);
      EXPECT_EQ(numerics::decodeFloat(d, buffer), x);
    }
    // Not representable below f32: the stored value is the rounded one.
    uint8_t buffer[8] = {};
    numerics::encodeFloat(d, 0.1f, buffer);
    EXPECT_EQ(numerics::decodeFloat(d, buffer), numerics::roundTo(d, 0.1f));
  }
}

TEST(DType, DefaultOverflowSaturatesOnlyFp8) {
  EXPECT_EQ(numerics::roundTo(DType::F8E4M3FN, 1000.0f), 448.0f);
  EXPECT_EQ(numerics::roundTo(DType::F8E5M2, 1.0e6f), 57344.0f);
  EXPECT_TRUE(std::isinf(numerics::roundTo(DType::F16, 1.0e6f)));
  EXPECT_EQ(numerics::roundTo(DType::I32, 2.5f), 2.5f); // no rounding
}

} // namespace
} // namespace octet
