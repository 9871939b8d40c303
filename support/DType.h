#ifndef OCTET_SUPPORT_DTYPE_H
#define OCTET_SUPPORT_DTYPE_H

// The element types octet computes in, stores and reads: one enum for every
// layer. The wire formats keep their own spellings and convert at their
// edge: bundle.proto's DType (bundle/Bundle.h), safetensors' "F8_E4M3" and
// friends (hf/Safetensors.cpp), cuBLASLt's cudaDataType_t
// (runtime/blas/Gemm.cpp), MLIR's element types (the compiler).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace octet {

enum class DType : uint8_t {
  F64,
  F32,
  BF16,
  F16,
  F8E4M3FN, // FP8 with 4 exponent bits, finite only (no infinity)
  F8E5M2,
  I64,
  I32,
  I16,
  I8,
  U8,
  Bool, // one byte
};

namespace detail {
struct DTypeInfo {
  DType dtype;
  const char *name;
  size_t bytes;
  bool floating;
};
// In enum order: the accessors below index it (they run per element in the
// numerics, so they stay inline).
inline constexpr DTypeInfo kDTypes[] = {
    {DType::F64, "f64", 8, true},       {DType::F32, "f32", 4, true},
    {DType::BF16, "bf16", 2, true},     {DType::F16, "f16", 2, true},
    {DType::F8E4M3FN, "e4m3", 1, true}, {DType::F8E5M2, "e5m2", 1, true},
    {DType::I64, "i64", 8, false},      {DType::I32, "i32", 4, false},
    {DType::I16, "i16", 2, false},      {DType::I8, "i8", 1, false},
    {DType::U8, "u8", 1, false},        {DType::Bool, "bool", 1, false},
};
constexpr const DTypeInfo &infoOf(DType dtype) {
  return kDTypes[static_cast<size_t>(dtype)];
}
} // namespace detail

// Short lower-case names, as `octet inspect` and every report print them:
// f64 f32 bf16 f16 e4m3 e5m2 i64 i32 i16 i8 u8 bool.
constexpr const char *dtypeName(DType dtype) {
  return detail::infoOf(dtype).name;
}
// The DType `name` spells (as dtypeName writes it), if any.
std::optional<DType> parseDType(std::string_view name);
// Bytes of one element.
constexpr size_t dtypeBytes(DType dtype) { return detail::infoOf(dtype).bytes; }
constexpr bool isFloat(DType dtype) { return detail::infoOf(dtype).floating; }
constexpr bool isFp8(DType dtype) {
  return dtype == DType::F8E4M3FN || dtype == DType::F8E5M2;
}

} // namespace octet

#endif
