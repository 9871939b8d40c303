#include "compiler/Interpreter/Fp8Ops.h"

#include "compiler/Interpreter/Kernels.h"
#include "dialects/fp8/Fp8Dialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace octet::interp {

using llvm::Error;

namespace {

Tensor likeResult(Value result) {
  auto type = cast<RankedTensorType>(result.getType());
  return Tensor(cantFail(dtypeOf(type.getElementType())),
                std::vector<int64_t>(type.getShape().begin(),
                                     type.getShape().end()));
}

DType fp8Format(Type type) {
  return isa<Float8E5M2Type>(type) ? DType::F8E5M2 : DType::F8E4M3FN;
}

float amaxOf(const float *x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    float a = std::fabs(x[i]);
    // NaN must win, or a poisoned tensor would look harmless.
    if (std::isnan(a))
      return a;
    m = std::max(m, a);
  }
  return m;
}

// One element's contribution to the statistics.
void countCast(float x, float scaled, DType format, Fp8TensorStats &s) {
  float q = numerics::roundTo(format, scaled, numerics::Overflow::SatFinite);
  s.underflows += x != 0.0f && q == 0.0f;
  // Saturated: beyond where round-to-nearest would still give the largest
  // finite value, so satfinite clipped it.
  s.saturations += !std::isfinite(
      numerics::roundTo(format, scaled, numerics::Overflow::Ieee));
}

// Blocks of a [rows, cols] tensor: calls body(r0, r1, c0, c1, blockIndex).
template <typename Fn>
void forEachBlock(int64_t rows, int64_t cols, ArrayRef<int64_t> block,
                  Fn body) {
  int64_t bc = (cols + block[1] - 1) / block[1];
  for (int64_t r0 = 0, br = 0; r0 < rows; r0 += block[0], ++br)
    for (int64_t c0 = 0, j = 0; c0 < cols; c0 += block[1], ++j)
      body(r0, std::min(rows, r0 + block[0]), c0, std::min(cols, c0 + block[1]),
           br * bc + j);
}

} // namespace

Error computeScale(fp8::ComputeScaleOp op, ExecContext &ctx) {
  const Tensor &amax = ctx.operand(op, 0);
  Tensor out = likeResult(op.getResult());
  Tensor inverse = likeResult(op.getScaleInv());
  float fp8Max = fp8::maxFinite(op.getDtype());
  for (int64_t i = 0; i < amax.numel(); ++i) {
    float a = amax.f()[i];
    out.f()[i] = std::isfinite(a)
                     ? fp8ScaleFromAmax(a, fp8Max, op.getMargin(),
                                        op.getPowerOfTwo(),
                                        op.getEps().convertToFloat())
                     : 1.0f;
    inverse.f()[i] = 1.0f / out.f()[i];
  }
  ctx.setResult(op, 0, std::move(out));
  ctx.setResult(op, 1, std::move(inverse));
  return Error::success();
}

Error scaleUpdate(fp8::ScaleUpdateOp op, ExecContext &ctx) {
  const Tensor &history = ctx.operand(op, 0);
  float amax = ctx.operand(op, 1).item();
  float scale = ctx.operand(op, 2).item();
  fp8::RecipeAttr recipe = op.getRecipe();
  Tensor rolled = likeResult(op.getNewHistory());
  int64_t len = history.numel();
  rolled.f()[0] = amax;
  std::copy_n(history.f(), len - 1, rolled.f() + 1);
  float effective = recipe.getAmaxAlgorithm() == fp8::AmaxAlgorithm::max
                        ? amaxOf(rolled.f(), len)
                        : amax;
  float next = std::isfinite(effective)
                   ? fp8ScaleFromAmax(effective, fp8::maxFinite(op.getDtype()),
                                      recipe.getMargin(),
                                      recipe.getPowerOfTwoScales(),
                                      op.getEps().convertToFloat())
                   : scale;
  ctx.setResult(op, 0, std::move(rolled));
  ctx.setResult(op, 1, Tensor::scalar(next));
  ctx.setResult(op, 2, Tensor::scalar(1.0f / next));
  return Error::success();
}

Error blockQuantize(fp8::BlockQuantizeOp op, ExecContext &ctx) {
  const Tensor &x = ctx.operand(op, 0);
  int64_t rows = x.dim(0), cols = x.dim(1);
  ArrayRef<int64_t> block = op.getBlock();
  Tensor q = likeResult(op.getResult());
  Tensor scales = likeResult(op.getScales());
  float fp8Max = fp8::maxFinite(op.getDtype());
  float eps = op.getEps().convertToFloat();
  forEachBlock(rows, cols, block,
               [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t b) {
                 float m = 0.0f;
                 for (int64_t r = r0; r < r1; ++r)
                   m = std::max(m, amaxOf(x.f() + r * cols + c0, c1 - c0));
                 float s = std::isfinite(m)
                               ? fp8ScaleFromAmax(m, fp8Max, 0,
                                                  op.getPowerOfTwo(), eps)
                               : 1.0f;
                 scales.f()[b] = s;
                 for (int64_t r = r0; r < r1; ++r)
                   for (int64_t c = c0; c < c1; ++c)
                     q.f()[r * cols + c] = x.f()[r * cols + c] * s;
               });
  ctx.setResult(op, 0, std::move(q));
  ctx.setResult(op, 1, std::move(scales));
  return Error::success();
}

std::vector<float> dequantizeBlocks(const Tensor &q, const Tensor &scales,
                                    ArrayRef<int64_t> block) {
  int64_t rows = q.dim(0), cols = q.dim(1);
  std::vector<float> out(q.numel());
  forEachBlock(rows, cols, block,
               [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t b) {
                 float s = scales.f()[b];
                 for (int64_t r = r0; r < r1; ++r)
                   for (int64_t c = c0; c < c1; ++c)
                     out[r * cols + c] = q.f()[r * cols + c] / s;
               });
  return out;
}

namespace {

// Where the factor of block (r, kb) of scales [rows, cols] lies in
// fp8.block_factors' layout.
int64_t factorAt(int64_t r, int64_t kb, int64_t rows, int64_t cols,
                 ArrayRef<int64_t> block) {
  int64_t stride = fp8::BlockFactorsOp::factorStride(rows, cols, block);
  return block[0] == 1 ? kb * stride + r : r * stride + kb;
}

} // namespace

Error blockFactors(fp8::BlockFactorsOp op, ExecContext &ctx) {
  const Tensor &scales = ctx.operand(op, 0);
  int64_t rows = scales.dim(0), cols = scales.dim(1);
  Tensor out = likeResult(op.getFactors());
  // The padding of a 128x128 row is never read; 0 keeps it defined.
  std::fill(out.f(), out.f() + out.numel(), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t kb = 0; kb < cols; ++kb)
      out.f()[factorAt(r, kb, rows, cols, op.getBlock())] =
          1.0f / scales.f()[r * cols + kb];
  ctx.setResult(op, 0, std::move(out));
  return Error::success();
}

std::vector<float> dequantizeBlockFactors(const Tensor &q,
                                          const Tensor &factors,
                                          ArrayRef<int64_t> block) {
  int64_t rows = q.dim(0), cols = q.dim(1);
  int64_t scaleRows = (rows + block[0] - 1) / block[0];
  int64_t scaleCols = (cols + block[1] - 1) / block[1];
  std::vector<float> out(q.numel());
  forEachBlock(rows, cols, block,
               [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t b) {
                 float factor = factors.f()[factorAt(
                     b / scaleCols, b % scaleCols, scaleRows, scaleCols,
                     block)];
                 for (int64_t r = r0; r < r1; ++r)
                   for (int64_t c = c0; c < c1; ++c)
                     out[r * cols + c] = q.f()[r * cols + c] * factor;
               });
  return out;
}

Error blockDequantize(fp8::BlockDequantizeOp op, ExecContext &ctx) {
  std::vector<float> x =
      dequantizeBlocks(ctx.operand(op, 0), ctx.operand(op, 1), op.getBlock());
  Tensor out = likeResult(op.getResult());
  std::copy(x.begin(), x.end(), out.f());
  ctx.setResult(op, 0, std::move(out));
  return Error::success();
}

// FP32 accumulation of the FP8 values themselves, one factor at the end
// when both scales are tensorwise (what cuBLASLt does): the f32 product of
// the inverse scales with inverse_scales, else 1/sa/sb; blockwise operands
// are widened block by block first.
Error fp8Matmul(fp8::MatmulOp op, ExecContext &ctx) {
  const Tensor &a = ctx.operand(op, 0), &sa = ctx.operand(op, 1);
  const Tensor &b = ctx.operand(op, 2), &sb = ctx.operand(op, 3);
  bool ta = op.getTransposeA(), tb = op.getTransposeB();
  int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  int64_t n = tb ? b.dim(0) : b.dim(1);
  float alpha = 1.0f;
  std::vector<float> wideA, wideB;
  const float *pa = a.f(), *pb = b.f();
  if (op.getInverseScales()) {
    alpha = sa.item() * sb.item();
  } else {
    if (auto block = op.getABlock()) {
      wideA = dequantizeBlocks(a, sa, *block);
      pa = wideA.data();
    } else {
      alpha /= sa.item();
    }
    if (auto block = op.getBBlock()) {
      wideB = dequantizeBlocks(b, sb, *block);
      pb = wideB.data();
    } else {
      alpha /= sb.item();
    }
  }
  Tensor out = likeResult(op.getResult());
  gemm(m, n, k, pa, ta, pb, tb, out.f(), alpha, false);
  if (op.getBias()) {
    const Tensor &bias = ctx.operand(op, 4);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < n; ++j)
        out.f()[r * n + j] += bias.f()[j];
  }
  ctx.setResult(op, 0, std::move(out));
  return Error::success();
}

namespace {

void transpose2d(const float *in, int64_t rows, int64_t cols, float *out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[c * rows + r] = in[r * cols + c];
}

} // namespace

Error fp8Transpose(fp8::TransposeOp op, ExecContext &ctx) {
  // Copies (shared storage): setResult may move the values operand() refers
  // to.
  Tensor q = ctx.operand(op, 0), s = ctx.operand(op, 1);
  Tensor qt = likeResult(op.getResult());
  transpose2d(q.f(), q.dim(0), q.dim(1), qt.f());
  ctx.setResult(op, 0, std::move(qt));
  if (s.rank() == 0) {
    ctx.setResult(op, 1, s);
    return Error::success();
  }
  Tensor st = likeResult(op.getResultScale());
  transpose2d(s.f(), s.dim(0), s.dim(1), st.f());
  ctx.setResult(op, 1, std::move(st));
  return Error::success();
}

namespace {

std::string tensorName(Operation *op) {
  if (auto name = op->getAttrOfType<StringAttr>("tensor"))
    return name.str();
  std::string text;
  llvm::raw_string_ostream os(text);
  os << op->getLoc();
  return text;
}

} // namespace

float fp8ScaleFromAmax(float amax, float fp8Max, int64_t margin,
                       bool powerOfTwo, float eps) {
  float scale = fp8Max / (std::max(amax, eps) * std::ldexp(1.0f, margin));
  if (powerOfTwo) {
    int exponent;
    std::frexp(scale, &exponent);
    // frexp gives scale = f · 2^exponent with f in [0.5, 1).
    scale = std::ldexp(1.0f, exponent - 1);
  }
  return scale;
}

//===----------------------------------------------------------------------===//
// Statistics
//===----------------------------------------------------------------------===//

OpObserver Fp8StatsCollector::observer() {
  return [this](Operation *op, ExecContext &ctx) {
    Fp8TensorStats s;
    // A cast repeated in the backward (octet-recompute-kmajor) counts once.
    if (op->hasAttr("recomputed"))
      return;
    if (auto q = dyn_cast<fp8::QuantizeOp>(op)) {
      const Tensor &x = ctx.operand(op, 0);
      Type type = q.getResult().getType().getElementType();
      DType format = fp8Format(type);
      s.format = dtypeName(format);
      s.scale = ctx.operand(op, 1).item();
      s.amax = amaxOf(x.f(), x.numel());
      s.values = x.numel();
      for (int64_t i = 0; i < x.numel(); ++i)
        countCast(x.f()[i], x.f()[i] * s.scale, format, s);
    } else if (auto bq = dyn_cast<fp8::BlockQuantizeOp>(op)) {
      const Tensor &x = ctx.operand(op, 0);
      DType format = fp8Format(bq.getDtype());
      s.format = dtypeName(format);
      s.amax = amaxOf(x.f(), x.numel());
      s.values = x.numel();
      // The scales are results, which observers do not see: recompute them
      // as block_quantize does.
      int64_t cols = x.dim(1);
      float fp8Max = numerics::maxFinite(format);
      s.scale = INFINITY;
      forEachBlock(x.dim(0), cols, bq.getBlock(),
                   [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                       int64_t) {
                     float m = 0.0f;
                     for (int64_t r = r0; r < r1; ++r)
                       m = std::max(m, amaxOf(x.f() + r * cols + c0, c1 - c0));
                     float sc = std::isfinite(m)
                                    ? fp8ScaleFromAmax(
                                          m, fp8Max, 0, bq.getPowerOfTwo(),
                                          bq.getEps().convertToFloat())
                                    : 1.0f;
                     s.scale = std::min(s.scale, sc);
                     for (int64_t r = r0; r < r1; ++r)
                       for (int64_t c = c0; c < c1; ++c) {
                         float v = x.f()[r * cols + c];
                         countCast(v, v * sc, format, s);
                       }
                   });
    } else {
      return;
    }
    record(tensorName(op), s);
  };
}

void Fp8StatsCollector::record(const std::string &name,
                               const Fp8TensorStats &s) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, fresh] = stats_.try_emplace(name, s);
  if (fresh)
    return;
  Fp8TensorStats &t = it->second;
  t.amax = std::max(t.amax, s.amax);
  t.scale = s.scale;
  t.values += s.values;
  t.underflows += s.underflows;
  t.saturations += s.saturations;
}

void Fp8StatsCollector::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.clear();
}

std::map<std::string, Fp8TensorStats> Fp8StatsCollector::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void Fp8StatsCollector::print(int64_t step, llvm::raw_ostream &os) const {
  for (const auto &[name, s] : snapshot()) {
    double n = s.values ? double(s.values) : 1.0;
    os << llvm::format("fp8 step %lld %-28s %-5s amax %10.4g scale %10.4g "
                       "underflow %6.3f%% saturated %6.3f%%\n",
                       (long long)step, name.c_str(), s.format.c_str(), s.amax,
                       s.scale, 100.0 * s.underflows / n,
                       100.0 * s.saturations / n);
  }
}

} // namespace octet::interp
