#ifndef OCTET_COMPILER_INTERPRETER_TENSOR_H
#define OCTET_COMPILER_INTERPRETER_TENSOR_H

// The interpreter's value: a dense row-major tensor. Floating-point tensors of
// every width hold float32 numbers that are exactly representable in their
// element type (the rounding happens when a value is produced), so arithmetic
// never needs to know the storage width. Integer tensors hold int64.
// Storage is shared and treated as immutable once a value is produced, which
// makes reshape and copies free.

#include "support/Numerics.h"
#include "support/ShapeString.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace octet::interp {

using octet::shapeString;

class Tensor {
public:
  Tensor() = default;
  // Zero-filled.
  Tensor(DType dtype, std::vector<int64_t> shape);
  static Tensor fromFloats(std::vector<int64_t> shape, std::vector<float> data,
                           DType dtype = DType::F32);
  static Tensor fromInts(std::vector<int64_t> shape, std::vector<int64_t> data,
                         DType dtype = DType::I32);
  static Tensor scalar(float value) { return fromFloats({}, {value}); }

  DType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[i < 0 ? i + rank() : i]; }
  int64_t numel() const;
  bool valid() const { return floats_ || ints_; }

  const float *f() const { return floats_->data(); }
  float *f() { return floats_->data(); }
  const int64_t *i() const { return ints_->data(); }
  int64_t *i() { return ints_->data(); }
  float item() const { return isFloat(dtype_) ? f()[0] : float(i()[0]); }
  int64_t intItem() const { return ints_ ? i()[0] : int64_t(f()[0]); }

  // Same storage, new shape (element count must match).
  Tensor reshaped(std::vector<int64_t> shape) const;
  // A private copy whose storage can be written.
  Tensor clone() const;
  // Rounds every element to the element type (no-op for f32 and integers).
  void roundToType();

private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  std::shared_ptr<std::vector<float>> floats_;
  std::shared_ptr<std::vector<int64_t>> ints_;
};

} // namespace octet::interp

#endif
