#include "compiler/Interpreter/Tensor.h"

#include "compiler/Interpreter/Kernels.h"

#include <cassert>

namespace octet::interp {

static int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  if (isFloat(dtype_))
    floats_ = std::make_shared<std::vector<float>>(product(shape_), 0.0f);
  else
    ints_ = std::make_shared<std::vector<int64_t>>(product(shape_), 0);
}

Tensor Tensor::fromFloats(std::vector<int64_t> shape, std::vector<float> data,
                          DType dtype) {
  assert(int64_t(data.size()) == product(shape));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.floats_ = std::make_shared<std::vector<float>>(std::move(data));
  t.roundToType();
  return t;
}

Tensor Tensor::fromInts(std::vector<int64_t> shape, std::vector<int64_t> data,
                        DType dtype) {
  assert(int64_t(data.size()) == product(shape));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.ints_ = std::make_shared<std::vector<int64_t>>(std::move(data));
  return t;
}

int64_t Tensor::numel() const { return product(shape_); }

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  assert(product(shape) == numel());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = *this;
  if (floats_)
    t.floats_ = std::make_shared<std::vector<float>>(*floats_);
  if (ints_)
    t.ints_ = std::make_shared<std::vector<int64_t>>(*ints_);
  return t;
}

void Tensor::roundToType() {
  if (!floats_ || dtype_ == DType::F32)
    return;
  numerics::Overflow overflow = numerics::defaultOverflow(dtype_);
  float *data = floats_->data();
  parallelFor(numel(), 1 << 15, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      data[i] = numerics::roundTo(dtype_, data[i], overflow);
  });
}

} // namespace octet::interp
