#ifndef OCTET_SUPPORT_SHAPESTRING_H
#define OCTET_SUPPORT_SHAPESTRING_H

// A tensor shape as messages print it: "[2, 128, 4096]". Any sequence of
// integers with size() and operator[] (std::vector, protobuf's
// RepeatedField), so that the bundle's and the interpreter's messages agree.

#include <string>

namespace octet {

template <typename Dims> std::string shapeString(const Dims &dims) {
  std::string out = "[";
  for (decltype(dims.size()) i = 0; i < dims.size(); ++i) {
    if (i)
      out += ", ";
    out += std::to_string(dims[i]);
  }
  return out + "]";
}

} // namespace octet

#endif
