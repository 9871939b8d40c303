#include "support/DType.h"

#include <iterator>

namespace octet {
namespace {

constexpr bool inEnumOrder() {
  for (size_t i = 0; i < std::size(detail::kDTypes); ++i)
    if (static_cast<size_t>(detail::kDTypes[i].dtype) != i)
      return false;
  return std::size(detail::kDTypes) == static_cast<size_t>(DType::Bool) + 1;
}
static_assert(inEnumOrder(), "kDTypes must list every DType in enum order");

} // namespace

std::optional<DType> parseDType(std::string_view name) {
  for (const detail::DTypeInfo &info : detail::kDTypes)
    if (name == info.name)
      return info.dtype;
  return std::nullopt;
}

} // namespace octet
