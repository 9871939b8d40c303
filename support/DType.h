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

// Short lower-case names, as `octet inspect` and every report print them:
// f64 f32 bf16 f16 e4m3 e5m2 i64 i32 i16 i8 u8 bool.
const char *dtypeName(DType dtype);
// The DType `name` spells (as dtypeName writes it), if any.
std::optional<DType> parseDType(std::string_view name);
// Bytes of one element.
size_t dtypeBytes(DType dtype);

bool isFloat(DType dtype);
bool isFp8(DType dtype);

} // namespace octet

#endif
