#include "support/DType.h"

#include <iterator>

namespace octet {
namespace {

struct DTypeInfo {
  DType dtype;
  const char *name;
  size_t bytes;
};

// In enum order, so that infoOf indexes it.
constexpr DTypeInfo kDTypes[] = {
    {DType::F64, "f64", 8},       {DType::F32, "f32", 4},
    {DType::BF16, "bf16", 2},     {DType::F16, "f16", 2},
    {DType::F8E4M3FN, "e4m3", 1}, {DType::F8E5M2, "e5m2", 1},
    {DType::I64, "i64", 8},       {DType::I32, "i32", 4},
    {DType::I16, "i16", 2},       {DType::I8, "i8", 1},
    {DType::U8, "u8", 1},         {DType::Bool, "bool", 1},
};

constexpr bool inEnumOrder() {
  for (size_t i = 0; i < std::size(kDTypes); ++i)
    if (static_cast<size_t>(kDTypes[i].dtype) != i)
      return false;
  return std::size(kDTypes) == static_cast<size_t>(DType::Bool) + 1;
}
static_assert(inEnumOrder(), "kDTypes must list every DType in enum order");

const DTypeInfo &infoOf(DType dtype) {
  return kDTypes[static_cast<size_t>(dtype)];
}

} // namespace

const char *dtypeName(DType dtype) { return infoOf(dtype).name; }

std::optional<DType> parseDType(std::string_view name) {
  for (const DTypeInfo &info : kDTypes)
    if (name == info.name)
      return info.dtype;
  return std::nullopt;
}

size_t dtypeBytes(DType dtype) { return infoOf(dtype).bytes; }

bool isFloat(DType dtype) {
  switch (dtype) {
  case DType::F64:
  case DType::F32:
  case DType::BF16:
  case DType::F16:
  case DType::F8E4M3FN:
  case DType::F8E5M2:
    return true;
  default:
    return false;
  }
}

bool isFp8(DType dtype) {
  return dtype == DType::F8E4M3FN || dtype == DType::F8E5M2;
}

} // namespace octet
