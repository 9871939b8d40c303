#include "compiler/Interpreter/Interpreter.h"

#include "compiler/Interpreter/Collectives.h"
#include "compiler/Interpreter/Fp8Ops.h"
#include "support/InitDraws.h"
#include "support/LrSchedule.h"
#include "compiler/Interpreter/Kernels.h"
#include "dialects/fp8/Fp8Dialect.h"
#include "dialects/graph/GraphDialect.h"
#include "dialects/graph/StepLocal.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

using namespace mlir;

namespace octet::interp {
namespace {

llvm::Error errorAt(Operation *op, const llvm::Twine &message) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << op->getLoc() << ": " << op->getName() << ": " << message;
  return llvm::make_error<llvm::StringError>(text,
                                             llvm::inconvertibleErrorCode());
}

std::vector<int64_t> shapeOf(Type type) {
  auto shaped = cast<ShapedType>(type);
  return std::vector<int64_t>(shaped.getShape().begin(),
                              shaped.getShape().end());
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

float gelu(float x, bool tanhApprox) {
  if (tanhApprox)
    return 0.5f * x *
           (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
  return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2));
}

float geluGrad(float x, bool tanhApprox) {
  if (tanhApprox) {
    float inner = kSqrt2OverPi * (x + 0.044715f * x * x * x);
    float t = std::tanh(inner);
    return 0.5f * (1.0f + t) +
           0.5f * x * (1.0f - t * t) * kSqrt2OverPi *
               (1.0f + 3.0f * 0.044715f * x * x);
  }
  return 0.5f * (1.0f + std::erf(x * kInvSqrt2)) +
         x * kInvSqrt2Pi * std::exp(-0.5f * x * x);
}

// Rows of a tensor whose last dimension is the reduced one.
struct Rows {
  int64_t count, width;
};
Rows rowsOf(const Tensor &t) {
  int64_t width = t.rank() ? t.dim(-1) : 1;
  return {width ? t.numel() / width : 0, width};
}

// Sums per-chunk partial vectors in chunk order (deterministic).
std::vector<double> reduceRows(
    int64_t rows, int64_t width,
    const std::function<void(int64_t, int64_t, double *)> &accumulate) {
  constexpr int64_t kChunk = 64;
  int64_t chunks = (rows + kChunk - 1) / kChunk;
  std::vector<double> partial(chunks * width, 0.0);
  parallelFor(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c)
      accumulate(c * kChunk, std::min(rows, (c + 1) * kChunk),
                 partial.data() + c * width);
  });
  std::vector<double> total(width, 0.0);
  for (int64_t c = 0; c < chunks; ++c)
    for (int64_t j = 0; j < width; ++j)
      total[j] += partial[c * width + j];
  return total;
}

// Rotary frequencies, computed as Hugging Face computes them (float32), so
// the interpreter agrees with transformers to rounding.
std::vector<float> ropeFrequencies(graph::RopeOp op, int64_t headDim) {
  int64_t half = headDim / 2;
  float theta = static_cast<float>(op.getTheta().convertToDouble());
  std::vector<float> inv(half);
  for (int64_t i = 0; i < half; ++i)
    inv[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) /
                                        static_cast<float>(headDim));
  if (op.getScaling() == "llama3") {
    double factor = op.getFactor()->convertToDouble();
    double low = op.getLowFreqFactor()->convertToDouble();
    double high = op.getHighFreqFactor()->convertToDouble();
    double oldLen = static_cast<double>(*op.getOriginalMaxPosition());
    double lowWavelen = oldLen / low, highWavelen = oldLen / high;
    for (int64_t i = 0; i < half; ++i) {
      double f = inv[i];
      double wavelen = 2 * M_PI / f;
      double scaled = wavelen > lowWavelen ? f / factor : f;
      if (!(wavelen < highWavelen) && !(wavelen > lowWavelen)) {
        double smooth = (oldLen / wavelen - low) / (high - low);
        scaled = (1 - smooth) * scaled / factor + smooth * scaled;
      }
      inv[i] = static_cast<float>(scaled);
    }
  }
  return inv;
}

// Maps each of the B·S flattened tokens to its document index.
llvm::Expected<std::vector<int64_t>> documentIds(Operation *op,
                                                 const Tensor &cu,
                                                 int64_t tokens) {
  std::vector<int64_t> ids(tokens);
  int64_t n = cu.numel();
  if (n < 2 || cu.i()[0] != 0 || cu.i()[n - 1] != tokens)
    return errorAt(op, "cu_seqlens must start at 0 and end at B*S = " +
                           llvm::Twine(tokens));
  for (int64_t d = 0; d + 1 < n; ++d) {
    int64_t lo = cu.i()[d], hi = cu.i()[d + 1];
    if (hi < lo || hi > tokens)
      return errorAt(op, "cu_seqlens must be non-decreasing");
    for (int64_t t = lo; t < hi; ++t)
      ids[t] = d;
  }
  return ids;
}

class Frame : public ExecContext {
public:
  Frame(VariableStore &vars, const OpObserver &observer, const RankSlot &rank)
      : vars_(vars), observer_(observer), rank_(rank) {}
  const Tensor &operand(Operation *op, unsigned index) override {
    return values_.find(op->getOperand(index))->second;
  }
  Tensor takeOperand(Operation *op, unsigned index) override {
    Value v = op->getOperand(index);
    auto it = values_.find(v);
    bool lastUse = dyingNow_ && llvm::is_contained(*dyingNow_, v);
    for (unsigned j = index + 1; lastUse && j < op->getNumOperands(); ++j)
      lastUse = op->getOperand(j) != v;
    if (!lastUse)
      return it->second;
    return std::move(it->second);
  }
  void setResult(Operation *op, unsigned index, Tensor value) override {
    value.roundToType();
    values_[op->getResult(index)] = std::move(value);
  }
  // For views (reshape, save) of a value already rounded to this type.
  void setResultUnrounded(Operation *op, unsigned index, Tensor value) {
    values_[op->getResult(index)] = std::move(value);
  }
  VariableStore &variables() override { return vars_; }
  // Watches the ops of nested regions (kernel.fused bodies) too.
  const OpObserver &observer() const { return observer_; }
  // Which rank this is, and where its collectives meet the others'.
  const RankSlot &rank() const { return rank_; }
  llvm::DenseMap<Value, Tensor> values_;
  // The values whose last use is the op being executed, when handlers may
  // take them (not while an observer still wants to see the operands).
  const llvm::SmallVector<Value> *dyingNow_ = nullptr;

private:
  VariableStore &vars_;
  const OpObserver &observer_;
  const RankSlot &rank_;
};

// Runs the ops of `body` with its arguments bound to `args` and returns the
// operands of its terminator: a function's body, or a kernel.fused region.
llvm::Expected<std::vector<Tensor>> runBlock(Block &body,
                                             std::vector<Tensor> args,
                                             VariableStore &variables,
                                             const OpObserver &observer,
                                             const RankSlot &rank);

// A fresh float tensor of `result`'s type.
Tensor like(Value result) {
  auto type = cast<RankedTensorType>(result.getType());
  return Tensor(cantFail(dtypeOf(type.getElementType())), shapeOf(type));
}

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

llvm::Error embedding(graph::EmbeddingOp op, Frame &f) {
  const Tensor &table = f.operand(op, 0), &ids = f.operand(op, 1);
  int64_t vocab = table.dim(0), width = table.dim(1);
  Tensor out = like(op.getResult());
  for (int64_t t = 0; t < ids.numel(); ++t) {
    int64_t id = ids.i()[t];
    if (id < 0 || id >= vocab)
      return errorAt(op, "token id " + llvm::Twine(id) + " at position " +
                             llvm::Twine(t) + " is outside the vocabulary [0, " +
                             llvm::Twine(vocab) + ")");
    std::copy_n(table.f() + id * width, width, out.f() + t * width);
  }
  f.setResult(op, 0, std::move(out));
  return llvm::Error::success();
}

llvm::Error linear(graph::LinearOp op, Frame &f) {
  const Tensor &x = f.operand(op, 0), &w = f.operand(op, 1);
  int64_t n = w.dim(0), k = w.dim(1), m = k ? x.numel() / k : 0;
  Tensor out = like(op.getResult());
  gemm(m, n, k, x.f(), false, w.f(), true, out.f(), 1.0f, false);
  if (op.getBias()) {
    const Tensor &b = f.operand(op, 2);
    parallelFor(m, 256, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < n; ++j)
          out.f()[r * n + j] += b.f()[j];
    });
  }
  f.setResult(op, 0, std::move(out));
  return llvm::Error::success();
}

// alpha · op(a) · op(b) of the op's first two operands, as the first
// result's tensor (not yet rounded to its type).
Tensor product(Operation *op, Frame &f, bool ta, bool tb, float alpha) {
  const Tensor &a = f.operand(op, 0), &b = f.operand(op, 1);
  int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  int64_t n = tb ? b.dim(0) : b.dim(1);
  Tensor out = like(op->getResult(0));
  gemm(m, n, k, a.f(), ta, b.f(), tb, out.f(), alpha, false);
  return out;
}

llvm::Error matmul(Operation *op, Frame &f, bool ta, bool tb, float alpha) {
  f.setResult(op, 0, product(op, f, ta, tb, alpha));
  return llvm::Error::success();
}

llvm::Error rmsNorm(graph::RMSNormOp op, Frame &f) {
  const Tensor &x = f.operand(op, 0), &w = f.operand(op, 1);
  float eps = static_cast<float>(op.getEps().convertToDouble());
  Rows rows = rowsOf(x);
  Tensor out = like(op.getResult());
  parallelFor(rows.count, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *xr = x.f() + r * rows.width;
      float *yr = out.f() + r * rows.width;
      double ss = 0;
      for (int64_t j = 0; j < rows.width; ++j)
        ss += double(xr[j]) * xr[j];
      float rstd = 1.0f / std::sqrt(float(ss / rows.width) + eps);
      for (int64_t j = 0; j < rows.width; ++j)
        yr[j] = w.f()[j] * (xr[j] * rstd);
    }
  });
  f.setResult(op, 0, std::move(out));
  return llvm::Error::success();
}

struct MeanRstd {
  float mean, rstd;
};
MeanRstd layerNormStats(const float *xr, int64_t width, float eps) {
  double sum = 0;
  for (int64_t j = 0; j < width; ++j)
    sum += xr[j];
  double mean = sum / width, var = 0;
  for (int64_t j = 0; j < width; ++j)
    var += (xr[j] - mean) * (xr[j] - mean);
  return {float(mean), 1.0f / std::sqrt(float(var / width) + eps)};
}

llvm::Error layerNorm(graph::LayerNormOp op, Frame &f) {
  const Tensor &x = f.operand(op, 0), &w = f.operand(op, 1),
               &b = f.operand(op, 2);
  float eps = static_cast<float>(op.getEps().convertToDouble());
  Rows rows = rowsOf(x);
  Tensor out = like(op.getResult());
  parallelFor(rows.count, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *xr = x.f() + r * rows.width;
      float *yr = out.f() + r * rows.width;
      MeanRstd s = layerNormStats(xr, rows.width, eps);
      for (int64_t j = 0; j < rows.width; ++j)
        yr[j] = (xr[j] - s.mean) * s.rstd * w.f()[j] + b.f()[j];
    }
  });
  f.setResult(op, 0, std::move(out));
  return llvm::Error::success();
}

llvm::Error rope(graph::RopeOp op, Frame &f) {
  const Tensor &x = f.operand(op, 0), &pos = f.operand(op, 1);
  int64_t tokens = x.dim(0) * x.dim(1), heads = x.dim(2), dh = x.dim(3);
  int64_t half = dh / 2;
  std::vector<float> inv = ropeFrequencies(op, dh);
  float sign = op.getInverse() ? -1.0f : 1.0f;
  Tensor out = like(op.getResult());
  parallelFor(tokens, 16, [&](int64_t t0, int64_t t1) {
    std::vector<float> c(half), s(half);
    for (int64_t t = t0; t < t1; ++t) {
      float p = static_cast<float>(pos.i()[t]);
      for (int64_t i = 0; i < half; ++i) {
        float angle = p * inv[i];
        c[i] = std::cos(angle);
        s[i] = sign * std::sin(angle);
      }
      for (int64_t h = 0; h < heads; ++h) {
        const float *xr = x.f() + (t * heads + h) * dh;
        float *yr = out.f() + (t * heads + h) * dh;
        for (int64_t i = 0; i < half; ++i) {
          float a = xr[i], b = xr[i + half];
          yr[i] = a * c[i] - b * s[i];
          yr[i + half] = b * c[i] + a * s[i];
        }
      }
    }
  });
  f.setResult(op, 0, std::move(out));
  return llvm::Error::success();
}

// Shape, causality and scale of an attention op (forward or backward) and,
// when it has cu_seqlens (operand `cuIndex`), each token's document.
template <typename OpTy>
llvm::Expected<AttentionShape> attentionSetup(OpTy op, Frame &f, const Tensor &q,
                                              const Tensor &k, unsigned cuIndex,
                                              std::vector<int64_t> &docs) {
  AttentionShape s{q.dim(0),        q.dim(1),
                   q.dim(2),        k.dim(2),
                   q.dim(3),        op.getCausal(),
                   static_cast<float>(op.getScale().convertToDouble())};
  if (s.kvHeads == 0 || s.qHeads % s.kvHeads)
    return errorAt(op, "kv heads must divide query heads");
  if (op.getCuSeqlens()) {
    auto ids = documentIds(op, f.operand(op, cuIndex), s.batch * s.seq);
    if (!ids)
      return ids.takeError();
    docs = std::move(*ids);
  }
  return s;
}

// graph.attention and kernel.attention_fwd: the same operands and results.
template <typename OpTy>
llvm::Error attention(OpTy op, Frame &f) {
  const Tensor &q = f.operand(op, 0), &k = f.operand(op, 1),
               &v = f.operand(op, 2);
  std::vector<int64_t> docs;
  auto shape = attentionSetup(op, f, q, k, 3, docs);
  if (!shape)
    return shape.takeError();
  Tensor out = like(op.getResult()), lse = like(op.getLse());
  attentionForward(*shape, q.f(), k.f(), v.f(), docs.empty() ? nullptr : docs.data(),
                   out.f(), lse.f());
  f.setResult(op, 0, std::move(out));
  f.setResult(op, 1, std::move(lse));
  return llvm::Error::success();
}

template <typename Fn>
llvm::Error elementwise(Operation *op, Frame &f, Fn fn) {
  Tensor out = like(op->getResult(0));
  unsigned arity = op->getNumOperands();
  const float *a = f.operand(op, 0).f();
  const float *b = arity > 1 ? f.operand(op, 1).f() : nullptr;
  parallelFor(out.numel(), 1 << 14, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      out.f()[i] = fn(a[i], b ? b[i] : 0.0f);
  });
  f.setResult(op, 0, std::move(out));
  return llvm::Error::success();
}

// The tokens a loss is divided by: the sum of its mask, in token order.
double maskCount(const Tensor &mask) {
  double count = 0;
  for (int64_t i = 0; i < mask.numel(); ++i)
    count += mask.f()[i];
  return count;
}

llvm::Error crossEntropy(graph::CrossEntropyOp op, Frame &f) {
  const Tensor &logits = f.operand(op, 0), &labels = f.operand(op, 1),
               &mask = f.operand(op, 2);
  Rows rows = rowsOf(logits);
  std::vector<double> nll(rows.count, 0.0);
  for (int64_t r = 0; r < rows.count; ++r) {
    if (mask.f()[r] == 0.0f)
      continue;
    int64_t label = labels.i()[r];
    if (label < 0 || label >= rows.width)
      return errorAt(op, "label " + llvm::Twine(label) + " at position " +
                             llvm::Twine(r) + " is outside [0, " +
                             llvm::Twine(rows.width) +
                             ") where loss_mask is non-zero");
  }
  parallelFor(rows.count, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (mask.f()[r] == 0.0f)
        continue;
      const float *z = logits.f() + r * rows.width;
      float mx = *std::max_element(z, z + rows.width);
      double sum = 0;
      for (int64_t j = 0; j < rows.width; ++j)
        sum += std::exp(double(z[j]) - mx);
      nll[r] = (mx + std::log(sum) - z[labels.i()[r]]) * mask.f()[r];
    }
  });
  double total = 0;
  for (int64_t r = 0; r < rows.count; ++r)
    total += nll[r];
  double count = maskCount(op.getBatchMask() ? f.operand(op, 3) : mask);
  f.setResult(op, 0, Tensor::scalar(float(total / std::max(count, 1.0))));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

llvm::Error embeddingGrad(graph::EmbeddingGradOp op, Frame &f) {
  const Tensor &dy = f.operand(op, 0), &ids = f.operand(op, 1);
  Tensor out = like(op.getResult());
  int64_t vocab = out.dim(0), width = out.dim(1);
  // Columns in parallel: each thread owns a slice of every row, so the
  // scatter needs no atomics and sums tokens in order.
  parallelFor(width, 16, [&](int64_t c0, int64_t c1) {
    for (int64_t t = 0; t < ids.numel(); ++t) {
      int64_t id = ids.i()[t];
      if (id < 0 || id >= vocab)
        continue;
      for (int64_t c = c0; c < c1; ++c)
        out.f()[id * width + c] += dy.f()[t * width + c];
    }
  });
  f.setResult(op, 0, std::move(out));
  return llvm::Error::success();
}

llvm::Error rmsNormGrad(graph::RMSNormGradOp op, Frame &f) {
  const Tensor &dy = f.operand(op, 0), &x = f.operand(op, 1),
               &w = f.operand(op, 2);
  float eps = static_cast<float>(op.getEps().convertToDouble());
  Rows rows = rowsOf(x);
  int64_t D = rows.width;
  Tensor dx = like(op.getInputGrad()), dw = like(op.getWeightGrad());
  std::vector<double> dwSum = reduceRows(
      rows.count, D, [&](int64_t r0, int64_t r1, double *acc) {
        for (int64_t r = r0; r < r1; ++r) {
          const float *xr = x.f() + r * D, *gr = dy.f() + r * D;
          double ss = 0, dot = 0;
          for (int64_t j = 0; j < D; ++j)
            ss += double(xr[j]) * xr[j];
          float rstd = 1.0f / std::sqrt(float(ss / D) + eps);
          for (int64_t j = 0; j < D; ++j) {
            dot += double(gr[j]) * w.f()[j] * xr[j];
            acc[j] += double(gr[j]) * xr[j] * rstd;
          }
          float coef = float(dot / D) * rstd * rstd * rstd;
          float *dr = dx.f() + r * D;
          for (int64_t j = 0; j < D; ++j)
            dr[j] = rstd * gr[j] * w.f()[j] - coef * xr[j];
        }
      });
  for (int64_t j = 0; j < D; ++j)
    dw.f()[j] = float(dwSum[j]);
  f.setResult(op, 0, std::move(dx));
  f.setResult(op, 1, std::move(dw));
  return llvm::Error::success();
}

llvm::Error layerNormGrad(graph::LayerNormGradOp op, Frame &f) {
  const Tensor &dy = f.operand(op, 0), &x = f.operand(op, 1),
               &w = f.operand(op, 2);
  float eps = static_cast<float>(op.getEps().convertToDouble());
  Rows rows = rowsOf(x);
  int64_t D = rows.width;
  Tensor dx = like(op.getInputGrad()), dw = like(op.getWeightGrad()),
         db = like(op.getBiasGrad());
  // Partials hold dw in [0, D) and db in [D, 2D).
  std::vector<double> sums = reduceRows(
      rows.count, 2 * D, [&](int64_t r0, int64_t r1, double *acc) {
        std::vector<float> xhat(D);
        for (int64_t r = r0; r < r1; ++r) {
          const float *xr = x.f() + r * D, *gr = dy.f() + r * D;
          MeanRstd s = layerNormStats(xr, D, eps);
          double meanG = 0, meanGX = 0;
          for (int64_t j = 0; j < D; ++j) {
            xhat[j] = (xr[j] - s.mean) * s.rstd;
            double g = double(gr[j]) * w.f()[j];
            meanG += g;
            meanGX += g * xhat[j];
            acc[j] += double(gr[j]) * xhat[j];
            acc[D + j] += gr[j];
          }
          meanG /= D;
          meanGX /= D;
          float *dr = dx.f() + r * D;
          for (int64_t j = 0; j < D; ++j)
            dr[j] = s.rstd * (gr[j] * w.f()[j] - float(meanG) -
                              xhat[j] * float(meanGX));
        }
      });
  for (int64_t j = 0; j < D; ++j) {
    dw.f()[j] = float(sums[j]);
    db.f()[j] = float(sums[D + j]);
  }
  f.setResult(op, 0, std::move(dx));
  f.setResult(op, 1, std::move(dw));
  f.setResult(op, 2, std::move(db));
  return llvm::Error::success();
}

// graph.attention_grad and kernel.attention_bwd.
template <typename OpTy>
llvm::Error attentionGrad(OpTy op, Frame &f) {
  const Tensor &dout = f.operand(op, 0), &q = f.operand(op, 1),
               &k = f.operand(op, 2), &v = f.operand(op, 3),
               &out = f.operand(op, 4), &lse = f.operand(op, 5);
  std::vector<int64_t> docs;
  auto shape = attentionSetup(op, f, q, k, 6, docs);
  if (!shape)
    return shape.takeError();
  Tensor dq = like(op.getQGrad()), dk = like(op.getKGrad()),
         dv = like(op.getVGrad());
  attentionBackward(*shape, dout.f(), q.f(), k.f(), v.f(), out.f(), lse.f(),
                    docs.empty() ? nullptr : docs.data(), dq.f(), dk.f(),
                    dv.f());
  f.setResult(op, 0, std::move(dq));
  f.setResult(op, 1, std::move(dk));
  f.setResult(op, 2, std::move(dv));
  return llvm::Error::success();
}

llvm::Error swigluGrad(graph::SwigluGradOp op, Frame &f) {
  const Tensor &dy = f.operand(op, 0), &g = f.operand(op, 1),
               &u = f.operand(op, 2);
  Tensor dg = like(op.getGateGrad()), du = like(op.getUpGrad());
  parallelFor(dy.numel(), 1 << 14, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float x = g.f()[i], s = sigmoid(x);
      dg.f()[i] = dy.f()[i] * u.f()[i] * s * (1.0f + x * (1.0f - s));
      du.f()[i] = dy.f()[i] * x * s;
    }
  });
  f.setResult(op, 0, std::move(dg));
  f.setResult(op, 1, std::move(du));
  return llvm::Error::success();
}

llvm::Error crossEntropyGrad(graph::CrossEntropyGradOp op, Frame &f) {
  float dloss = f.operand(op, 0).item();
  const Tensor &logits = f.operand(op, 1), &labels = f.operand(op, 2),
               &mask = f.operand(op, 3);
  Rows rows = rowsOf(logits);
  double count = maskCount(op.getBatchMask() ? f.operand(op, 4) : mask);
  float norm = dloss / float(std::max(count, 1.0));
  Tensor out = like(op.getResult());
  parallelFor(rows.count, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float m = mask.f()[r];
      float *dr = out.f() + r * rows.width;
      if (m == 0.0f)
        continue; // already zero
      const float *z = logits.f() + r * rows.width;
      float mx = *std::max_element(z, z + rows.width);
      double sum = 0;
      for (int64_t j = 0; j < rows.width; ++j)
        sum += std::exp(double(z[j]) - mx);
      float lse = mx + float(std::log(sum));
      float scale = norm * m;
      for (int64_t j = 0; j < rows.width; ++j)
        dr[j] = scale * std::exp(z[j] - lse);
      int64_t label = labels.i()[r];
      if (label >= 0 && label < rows.width)
        dr[label] -= scale;
    }
  });
  f.setResult(op, 0, std::move(out));
  return llvm::Error::success();
}

llvm::Error biasGrad(graph::BiasGradOp op, Frame &f) {
  const Tensor &dy = f.operand(op, 0);
  Rows rows = rowsOf(dy);
  std::vector<double> sums = reduceRows(
      rows.count, rows.width, [&](int64_t r0, int64_t r1, double *acc) {
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t j = 0; j < rows.width; ++j)
            acc[j] += dy.f()[r * rows.width + j];
      });
  Tensor out = like(op.getResult());
  for (int64_t j = 0; j < rows.width; ++j)
    out.f()[j] = float(sums[j]);
  f.setResult(op, 0, std::move(out));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Optimizer ops
//===----------------------------------------------------------------------===//

llvm::Error lrSchedule(graph::LrScheduleOp op, Frame &f) {
  LrSchedule schedule{
      op.getLr().convertToDouble(), op.getWarmupStepsAttr().getInt(),
      op.getTotalStepsAttr().getInt(), op.getMinLrRatio().convertToDouble()};
  double value = learningRateAt(schedule, f.operand(op, 0).intItem());
  f.setResult(op, 0, Tensor::scalar(float(value)));
  return llvm::Error::success();
}

llvm::Error globalNorm(graph::GlobalNormOp op, Frame &f) {
  double total = 0;
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    const Tensor &g = f.operand(op, i);
    constexpr int64_t kChunk = 1 << 14;
    int64_t chunks = (g.numel() + kChunk - 1) / kChunk;
    std::vector<double> partial(chunks, 0.0);
    parallelFor(chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double s = 0;
        for (int64_t j = c * kChunk; j < std::min(g.numel(), (c + 1) * kChunk);
             ++j)
          s += double(g.f()[j]) * g.f()[j];
        partial[c] = s;
      }
    });
    for (double p : partial)
      total += p;
  }
  double scale = op.getScale().convertToDouble();
  f.setResult(op, 0, Tensor::scalar(float(scale * std::sqrt(total))));
  return llvm::Error::success();
}

llvm::Error clipScale(graph::ClipScaleOp op, Frame &f) {
  double norm = f.operand(op, 0).item();
  double maxNorm = op.getMaxNorm().convertToDouble();
  double coef = 1.0;
  if (maxNorm > 0)
    coef = std::min(1.0, maxNorm / (norm + 1e-6));
  f.setResult(op, 0,
              Tensor::scalar(float(op.getScale().convertToDouble() * coef)));
  return llvm::Error::success();
}

llvm::Error adamwUpdate(graph::AdamWUpdateOp op, Frame &f) {
  const Tensor &p = f.operand(op, 0), &g = f.operand(op, 1),
               &m = f.operand(op, 2), &v = f.operand(op, 3);
  float lr = f.operand(op, 4).item();
  int64_t step = f.operand(op, 5).intItem();
  float gscale = f.operand(op, 6).item();
  if (step < 1)
    return errorAt(op, "step must be at least 1 (the counter is incremented "
                       "before the update); got " +
                           llvm::Twine(step));
  double b1 = op.getBeta1().convertToDouble(), b2 = op.getBeta2().convertToDouble();
  float beta1 = float(b1), beta2 = float(b2);
  float eps = float(op.getEps().convertToDouble());
  float decay = 1.0f - lr * float(op.getWeightDecay().convertToDouble());
  float stepSize = lr / float(1.0 - std::pow(b1, double(step)));
  float bc2Sqrt = float(std::sqrt(1.0 - std::pow(b2, double(step))));
  Tensor np = like(op.getNewParam()), nm = like(op.getNewExpAvg()),
         nv = like(op.getNewExpAvgSq());
  parallelFor(p.numel(), 1 << 14, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float gi = g.f()[i] * gscale;
      float mi = beta1 * m.f()[i] + (1.0f - beta1) * gi;
      float vi = beta2 * v.f()[i] + (1.0f - beta2) * gi * gi;
      float denom = std::sqrt(vi) / bc2Sqrt + eps;
      np.f()[i] = p.f()[i] * decay - stepSize * mi / denom;
      nm.f()[i] = mi;
      nv.f()[i] = vi;
    }
  });
  f.setResult(op, 0, std::move(np));
  f.setResult(op, 1, std::move(nm));
  f.setResult(op, 2, std::move(nv));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// fp8 and kernel ops
//===----------------------------------------------------------------------===//

// A NaN anywhere makes the amax NaN (as the GPU's integer max of the float
// bits does), so the delayed scale update keeps the previous scale.
float amaxOf(const Tensor &t) {
  float m = 0.0f;
  for (int64_t i = 0; i < t.numel(); ++i) {
    float a = std::fabs(t.f()[i]);
    if (std::isnan(a))
      return a;
    m = std::max(m, a);
  }
  return m;
}

llvm::Error quantize(fp8::QuantizeOp op, Frame &f) {
  const Tensor &x = f.operand(op, 0);
  float scale = f.operand(op, 1).item();
  Tensor q = like(op.getResult());
  // setResult rounds to the FP8 type with satfinite.
  for (int64_t i = 0; i < x.numel(); ++i)
    q.f()[i] = x.f()[i] * scale;
  // Before setResult, which may move the value `x` refers to.
  float amax = amaxOf(x);
  f.setResult(op, 0, std::move(q));
  f.setResult(op, 1, Tensor::scalar(amax));
  return llvm::Error::success();
}

llvm::Error dequantize(fp8::DequantizeOp op, Frame &f) {
  const Tensor &q = f.operand(op, 0);
  float scale = f.operand(op, 1).item();
  Tensor x = like(op.getResult());
  for (int64_t i = 0; i < q.numel(); ++i)
    x.f()[i] = q.f()[i] / scale;
  f.setResult(op, 0, std::move(x));
  return llvm::Error::success();
}

// cuBLASLt's meaning of the op, one rounding at the end: the product scaled
// by the f32 product of the two dequantization factors (the A and B scale
// pointers, as the GPU applies them), then the epilogue in f32
// (fusion::expandGemmEpilogues, Fusion/GemmEpilogues.h, states the same
// meaning in graph ops).
llvm::Error kernelGemm(kernel::GemmOp op, Frame &f) {
  float alpha = 1.0f;
  bool ta = op.getTransposeA();
  Tensor out;
  if (op.getABlock()) {
    // Block scales: each block widened by its own scale, then an f32
    // product (cuBLASLt promotes the FP8 partial sums of each 128-wide K
    // block to f32 and scales them there: the same sum up to f32 order).
    // Scales of rank 1 are cuBLASLt's factors (fp8.block_factors), which
    // multiply, as on the GPU; quantize scales divide. The two agree bit
    // for bit where the scales are powers of two, the only scales whose
    // factors octet-fuse-block-factors makes.
    auto widen = [&](unsigned data, unsigned scales,
                     ArrayRef<int64_t> block) {
      const Tensor &s = f.operand(op, scales);
      return s.rank() == 1
                 ? dequantizeBlockFactors(f.operand(op, data), s, block)
                 : dequantizeBlocks(f.operand(op, data), s, block);
    };
    std::vector<float> wideA = widen(0, 2, *op.getABlock());
    std::vector<float> wideB = widen(1, 3, *op.getBBlock());
    const Tensor &a = f.operand(op, 0), &b = f.operand(op, 1);
    int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
    int64_t n = op.getTransposeB() ? b.dim(0) : b.dim(1);
    out = like(op.getResult());
    gemm(m, n, k, wideA.data(), ta, wideB.data(), op.getTransposeB(),
         out.f(), 1.0f, false);
  } else {
    // Tensorwise FP8 has scales_inv and no block scales: operands 2 and 3.
    if (op.getAScaleInv())
      alpha = f.operand(op, 2).item() * f.operand(op, 3).item();
    out = product(op, f, ta, op.getTransposeB(), alpha);
  }
  const Tensor &a = f.operand(op, 0);
  int64_t m = out.dim(0), n = out.dim(1), k = ta ? a.dim(0) : a.dim(1);
  float *d = out.f();
  // Operands by name: which of the optional ones are present moves the
  // positions of the others.
  auto operandOf = [&](Value v) -> const Tensor & {
    for (OpOperand &o : op->getOpOperands())
      if (o.get() == v)
        return f.operand(op, o.getOperandNumber());
    llvm_unreachable("not an operand of the op");
  };
  if (Value biasValue = op.getBias()) {
    const Tensor &bias = operandOf(biasValue);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        d[i * n + j] += bias.f()[j];
  }
  llvm::StringRef epilogue = op.getEpilogueKind();
  if (epilogue == "gelu_aux") {
    Tensor pre = like(op.getAux()[0]);
    std::copy(d, d + m * n, pre.f());
    f.setResult(op, 1, std::move(pre));
  }
  if (epilogue == "gelu" || epilogue == "gelu_aux")
    for (int64_t i = 0; i < m * n; ++i)
      d[i] = gelu(d[i], /*tanhApprox=*/true);
  if (epilogue == "bias_grad") {
    Tensor grad = like(op.getAux()[0]);
    for (int64_t i = 0; i < m; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < k; ++j)
        sum += ta ? a.f()[j * m + i] : a.f()[i * k + j];
      grad.f()[i] = float(sum);
    }
    f.setResult(op, 1, std::move(grad));
  }
  // In a step's first microbatch an overwriting wgrad writes its
  // accumulator (beta = 0) whatever it held.
  bool overwrite = op->hasAttr("first_microbatch_overwrites") &&
                   f.rank().firstMicrobatch;
  if (Value cValue = op.getC(); cValue && !overwrite) {
    const Tensor &c = operandOf(cValue);
    for (int64_t i = 0; i < m * n; ++i)
      d[i] += c.f()[i];
  }
  f.setResult(op, 0, std::move(out));
  return llvm::Error::success();
}

llvm::Error kernelCopy(kernel::CopyOp op, Frame &f) {
  const Tensor &x = f.operand(op, 0);
  if (!op.getTranspose()) {
    f.setResult(op, 0, x);
    return llvm::Error::success();
  }
  Tensor out = like(op.getResult());
  int64_t rows = x.dim(0), cols = x.dim(1);
  if (isFloat(x.dtype())) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        out.f()[c * rows + r] = x.f()[r * cols + c];
  } else {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        out.i()[c * rows + r] = x.i()[r * cols + c];
  }
  f.setResult(op, 0, std::move(out));
  return llvm::Error::success();
}

// Row-major strides around `dim`: outer = product of the dims before it,
// inner = product of those after.
void splitAround(const std::vector<int64_t> &shape, int64_t dim,
                 int64_t &outer, int64_t &inner) {
  outer = inner = 1;
  for (int64_t i = 0; i < dim; ++i)
    outer *= shape[i];
  for (size_t i = dim + 1; i < shape.size(); ++i)
    inner *= shape[i];
}

// Copies `count` elements of `from` at `src` to `to` at `dst` (both of one
// kind: floats or integers).
void copyElements(const Tensor &from, int64_t src, Tensor &to, int64_t dst,
                  int64_t count) {
  if (isFloat(from.dtype()))
    std::copy_n(from.f() + src, count, to.f() + dst);
  else
    std::copy_n(from.i() + src, count, to.i() + dst);
}

// Slices and concatenations copy values of the result's type: nothing to
// round.
llvm::Error slice(graph::SliceOp op, Frame &f) {
  const Tensor &x = f.operand(op, 0);
  auto type = cast<RankedTensorType>(op.getType());
  Tensor out(x.dtype(), shapeOf(type));
  int64_t outer, inner, dim = op.getDim();
  splitAround(x.shape(), dim, outer, inner);
  int64_t n = type.getDimSize(dim), full = x.dim(dim);
  int64_t off = op.getOffset();
  for (int64_t o = 0; o < outer; ++o)
    copyElements(x, (o * full + off) * inner, out, o * n * inner, n * inner);
  f.setResultUnrounded(op, 0, std::move(out));
  return llvm::Error::success();
}

llvm::Error concat(graph::ConcatOp op, Frame &f) {
  auto type = cast<RankedTensorType>(op.getType());
  int64_t dim = op.getDim();
  Tensor out(f.operand(op, 0).dtype(), shapeOf(type));
  int64_t outer, inner;
  splitAround(out.shape(), dim, outer, inner);
  int64_t total = type.getDimSize(dim), at = 0;
  for (unsigned k = 0; k < op->getNumOperands(); ++k) {
    const Tensor &x = f.operand(op, k);
    int64_t n = x.dim(dim);
    for (int64_t o = 0; o < outer; ++o)
      copyElements(x, o * n * inner, out, (o * total + at) * inner, n * inner);
    at += n;
  }
  f.setResultUnrounded(op, 0, std::move(out));
  return llvm::Error::success();
}

llvm::Error fill(graph::FillOp op, Frame &f) {
  Tensor out = like(op.getResult());
  double value = op.getValue().convertToDouble();
  if (isFloat(out.dtype()))
    std::fill(out.f(), out.f() + out.numel(), float(value));
  else
    std::fill(out.i(), out.i() + out.numel(), int64_t(value));
  f.setResult(op, 0, std::move(out));
  return llvm::Error::success();
}

// The body of a fused kernel, run in place on the op's operands. They are
// taken, not copied, so the body frees each after its last use inside it (a
// multi-tensor optimizer step holds one parameter's old and new state at a
// time, not the whole model's).
llvm::Error kernelFused(kernel::FusedOp op, Frame &f) {
  std::vector<Tensor> args;
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    args.push_back(f.takeOperand(op, i));
  auto results =
      runBlock(op.getBodyBlock(), std::move(args), f.variables(), f.observer(),
               f.rank());
  if (!results)
    return results.takeError();
  // The yielded values are the results' types (the verifier says so) and
  // were rounded when the body made them: rounding again would only cost.
  for (auto [i, t] : llvm::enumerate(*results))
    f.setResultUnrounded(op, i, std::move(t));
  return llvm::Error::success();
}

// A group of one is the identity, and so is a `last_microbatch` collective
// in an earlier microbatch; otherwise the collective meets the other ranks'
// interpreters (Collectives.h).
llvm::Error kernelCollective(kernel::CollectiveOp op, Frame &f) {
  if (op.getGroupSize() == 1 ||
      (op.getLastMicrobatch() && !f.rank().lastMicrobatch)) {
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      f.setResult(op, i, f.operand(op, i));
    return llvm::Error::success();
  }
  if (!f.rank().exchange)
    return errorAt(op, "a collective over " + llvm::Twine(op.getGroupSize()) +
                           " ranks: run every rank's interpreter with a "
                           "RankExchange (setRank), as octet train --cpu "
                           "does for train.parallel");
  CollectiveCall call{op.getKind().str(), op.getGroup().str(),
                      int64_t(op.getGroupSize()), op.getReduction().str(),
                      "", op.getInPlace()};
  llvm::raw_string_ostream where(call.where);
  op->getLoc().print(where);
  std::vector<Tensor> inputs;
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    inputs.push_back(f.operand(op, i));
  StatusOr<std::vector<Tensor>> results =
      f.rank().exchange->collective(f.rank().rank, call, std::move(inputs));
  if (!results)
    return errorAt(op, results.status().message());
  for (auto [i, t] : llvm::enumerate(*results))
    f.setResult(op, i, std::move(t));
  return llvm::Error::success();
}

// The part of dimension 0 that this rank's index in the group names.
llvm::Error kernelRankPart(kernel::RankPartOp op, Frame &f) {
  int64_t parts = op.getGroupSize();
  int64_t index = 0;
  if (parts > 1) {
    if (!f.rank().exchange)
      return errorAt(op, "a rank's part of " + llvm::Twine(parts) +
                             ": run every rank's interpreter with a "
                             "RankExchange (setRank), as octet train --cpu "
                             "does for train.parallel");
    std::vector<int> members = f.rank().exchange->layout().groupOf(
        op.getGroup().str(), f.rank().rank);
    auto it = std::find(members.begin(), members.end(), f.rank().rank);
    if (int64_t(members.size()) != parts || it == members.end())
      return errorAt(op, "the program's '" + op.getGroup() + "' group has " +
                             llvm::Twine(parts) + " ranks, the layout's " +
                             llvm::Twine(members.size()));
    index = it - members.begin();
  }
  const Tensor &in = f.operand(op, 0);
  Tensor out(in.dtype(), shapeOf(op.getType()));
  int64_t n = out.numel(), offset = index * n;
  if (isFloat(in.dtype()))
    std::copy(in.f() + offset, in.f() + offset + n, out.f());
  else
    std::copy(in.i() + offset, in.i() + offset + n, out.i());
  f.setResultUnrounded(op, 0, std::move(out));
  return llvm::Error::success();
}

llvm::Error execute(Operation *op, Frame &f) {
  using llvm::Error;
  return llvm::TypeSwitch<Operation *, Error>(op)
      .Case([&](graph::LoadOp load) -> Error {
        std::string name = load.getVariable().str();
        if (!f.variables().has(name) &&
            graph::isStepLocal(SymbolTable::lookupNearestSymbolFrom(
                op, load.getVariableAttr().getAttr()))) {
          // Its slot holds another tensor between steps; only a GEMM that
          // writes it in the step's first microbatch may name it then.
          bool overwritten =
              f.rank().firstMicrobatch &&
              llvm::all_of(load->getUses(), [&](OpOperand &use) {
                auto gemm = dyn_cast<kernel::GemmOp>(use.getOwner());
                return gemm && gemm.getC() == load.getResult() &&
                       gemm->hasAttr("first_microbatch_overwrites");
              });
          if (!overwritten)
            return errorAt(op, "variable '" + name +
                                   "' is step-local and holds nothing here: "
                                   "a step's first microbatch writes it and "
                                   "the optimizer step reads it last; its "
                                   "memory is reused outside that window");
          f.setResult(op, 0,
                      Tensor(cantFail(dtypeOf(load.getType().getElementType())),
                             shapeOf(load.getType())));
          return Error::success();
        }
        if (!f.variables().has(name))
          return errorAt(op, "variable '" + name +
                                 "' is not in the variable store; initialise "
                                 "the store from this module first");
        const Tensor &value = f.variables().get(name);
        if (value.shape() != shapeOf(load.getType()))
          return errorAt(op, "variable '" + name + "' holds shape " +
                                 shapeString(value.shape()) +
                                 ", the IR expects " +
                                 shapeString(shapeOf(load.getType())));
        // The store holds each value rounded to its element type.
        if (value.dtype() == cantFail(dtypeOf(load.getType().getElementType())))
          f.setResultUnrounded(op, 0, value);
        else
          f.setResult(op, 0, value);
        return Error::success();
      })
      .Case([&](graph::StoreOp store) -> Error {
        f.variables().set(store.getVariable().str(), f.operand(op, 0));
        return Error::success();
      })
      .Case([&](graph::EmbeddingOp o) { return embedding(o, f); })
      .Case([&](graph::LinearOp o) { return linear(o, f); })
      .Case([&](graph::MatmulOp o) {
        return matmul(o, f, o.getTransposeA(), o.getTransposeB(), 1.0f);
      })
      .Case([&](graph::RMSNormOp o) { return rmsNorm(o, f); })
      .Case([&](graph::LayerNormOp o) { return layerNorm(o, f); })
      .Case([&](graph::RopeOp o) { return rope(o, f); })
      .Case([&](graph::AttentionOp o) { return attention(o, f); })
      .Case([&](graph::SliceOp o) { return slice(o, f); })
      .Case([&](graph::ConcatOp o) { return concat(o, f); })
      .Case<graph::ReshapeOp, graph::SaveOp>([&](Operation *o) -> Error {
        f.setResultUnrounded(
            o, 0, f.operand(o, 0).reshaped(shapeOf(o->getResult(0).getType())));
        return Error::success();
      })
      .Case([&](graph::CastOp o) -> Error {
        const Tensor &in = f.operand(o, 0);
        Tensor typed = like(o.getResult());
        std::copy_n(in.f(), in.numel(), typed.f());
        f.setResult(o, 0, std::move(typed));
        return Error::success();
      })
      .Case([&](graph::SiluOp o) {
        return elementwise(o, f, [](float x, float) { return x * sigmoid(x); });
      })
      .Case([&](graph::GeluOp o) {
        bool t = o.getApproximate() == "tanh";
        return elementwise(o, f, [t](float x, float) { return gelu(x, t); });
      })
      .Case([&](graph::AddOp o) {
        return elementwise(o, f, [](float a, float b) { return a + b; });
      })
      .Case([&](graph::MulOp o) {
        return elementwise(o, f, [](float a, float b) { return a * b; });
      })
      .Case([&](graph::SwigluOp o) {
        return elementwise(
            o, f, [](float g, float u) { return g * sigmoid(g) * u; });
      })
      .Case([&](graph::CrossEntropyOp o) { return crossEntropy(o, f); })
      .Case([&](graph::FillOp o) { return fill(o, f); })
      .Case([&](graph::EmbeddingGradOp o) { return embeddingGrad(o, f); })
      .Case([&](graph::RMSNormGradOp o) { return rmsNormGrad(o, f); })
      .Case([&](graph::LayerNormGradOp o) { return layerNormGrad(o, f); })
      .Case([&](graph::AttentionGradOp o) { return attentionGrad(o, f); })
      .Case([&](graph::SiluGradOp o) {
        return elementwise(o, f, [](float dy, float x) {
          float s = sigmoid(x);
          return dy * s * (1.0f + x * (1.0f - s));
        });
      })
      .Case([&](graph::GeluGradOp o) {
        bool t = o.getApproximate() == "tanh";
        return elementwise(
            o, f, [t](float dy, float x) { return dy * geluGrad(x, t); });
      })
      .Case([&](graph::SwigluGradOp o) { return swigluGrad(o, f); })
      .Case([&](graph::CrossEntropyGradOp o) { return crossEntropyGrad(o, f); })
      .Case([&](graph::BiasGradOp o) { return biasGrad(o, f); })
      .Case([&](graph::IncrementOp o) -> Error {
        Tensor out = like(o.getResult());
        out.i()[0] = f.operand(o, 0).intItem() + 1;
        f.setResult(o, 0, std::move(out));
        return Error::success();
      })
      .Case([&](graph::LrScheduleOp o) { return lrSchedule(o, f); })
      .Case([&](graph::GlobalNormOp o) { return globalNorm(o, f); })
      .Case([&](graph::ClipScaleOp o) { return clipScale(o, f); })
      .Case([&](graph::AdamWUpdateOp o) { return adamwUpdate(o, f); })
      .Case([&](fp8::QuantizeOp o) { return quantize(o, f); })
      .Case([&](fp8::DequantizeOp o) { return dequantize(o, f); })
      .Case([&](fp8::AmaxOp o) -> Error {
        f.setResult(o, 0, Tensor::scalar(amaxOf(f.operand(o, 0))));
        return Error::success();
      })
      .Case([&](fp8::ComputeScaleOp o) { return computeScale(o, f); })
      .Case([&](fp8::ScaleUpdateOp o) { return scaleUpdate(o, f); })
      .Case([&](fp8::BlockQuantizeOp o) { return blockQuantize(o, f); })
      .Case([&](fp8::BlockDequantizeOp o) { return blockDequantize(o, f); })
      .Case([&](fp8::BlockFactorsOp o) { return blockFactors(o, f); })
      .Case([&](fp8::MatmulOp o) { return fp8Matmul(o, f); })
      .Case([&](fp8::TransposeOp o) { return fp8Transpose(o, f); })
      .Case([&](kernel::GemmOp o) { return kernelGemm(o, f); })
      .Case([&](kernel::CopyOp o) { return kernelCopy(o, f); })
      .Case([&](kernel::AttentionFwdOp o) { return attention(o, f); })
      .Case([&](kernel::AttentionBwdOp o) { return attentionGrad(o, f); })
      .Case([&](kernel::FusedOp o) { return kernelFused(o, f); })
      .Case([&](kernel::CollectiveOp o) { return kernelCollective(o, f); })
      .Case([&](kernel::RankPartOp o) { return kernelRankPart(o, f); })
      .Default([&](Operation *o) -> Error {
        return errorAt(o, "the interpreter has no implementation of this op");
      });
}

// OCTET_PROFILE=1: time per op name, printed to stderr at exit, to see
// where a CPU step goes.
bool profiling() {
  static bool on = [] {
    const char *env = std::getenv("OCTET_PROFILE");
    return env && *env && std::string(env) != "0";
  }();
  return on;
}

struct Profile {
  std::mutex mutex;
  std::map<std::string, std::pair<double, int64_t>> byOp;
  ~Profile() {
    std::vector<std::pair<double, std::string>> rows;
    double total = 0;
    for (auto &[name, entry] : byOp) {
      rows.push_back({entry.first, name});
      total += entry.first;
    }
    std::sort(rows.rbegin(), rows.rend());
    std::fprintf(stderr, "octet interpreter profile (%.2f s in ops):\n", total);
    for (auto &[seconds, name] : rows)
      std::fprintf(stderr, "  %-28s %8.3f s %5.1f%% %8lld calls\n",
                   name.c_str(), seconds, 100 * seconds / total,
                   (long long)byOp[name].second);
  }
};

void recordProfile(llvm::StringRef name, double seconds) {
  static Profile profile;
  std::lock_guard<std::mutex> lock(profile.mutex);
  auto &entry = profile.byOp[name.str()];
  entry.first += seconds;
  entry.second += 1;
}


llvm::Expected<std::vector<Tensor>> runBlock(Block &body,
                                             std::vector<Tensor> args,
                                             VariableStore &variables,
                                             const OpObserver &observer,
                                             const RankSlot &rank) {
  Frame frame(variables, observer, rank);
  for (unsigned i = 0; i < args.size(); ++i)
    if (!body.getArgument(i).use_empty())
      frame.values_[body.getArgument(i)] = std::move(args[i]);
  args.clear();
  // Drop each value after its last use so peak memory follows liveness;
  // results nothing uses go right after their op.
  llvm::DenseMap<Operation *, llvm::SmallVector<Value>> dying;
  {
    llvm::DenseMap<Value, Operation *> last;
    for (Operation &op : body) {
      for (Value v : op.getOperands())
        last[v] = &op;
      for (Value r : op.getResults())
        if (r.use_empty())
          last[r] = &op;
    }
    for (auto &[value, op] : last)
      dying[op].push_back(value);
  }
  // Variables whose stored value is dead before the block overwrites it:
  // released after the last load ahead of the first store, or at the start
  // when the block stores before it loads. Only when every load and store
  // is in the block itself, where that order is the execution order.
  llvm::DenseMap<Operation *, llvm::SmallVector<std::string>> releaseAfter;
  llvm::SmallVector<std::string> releaseAtStart;
  bool nestedAccess = false;
  for (Operation &op : body)
    op.walk([&](Operation *inner) {
      if (inner != &op && isa<graph::LoadOp, graph::StoreOp>(inner))
        nestedAccess = true;
    });
  if (!nestedAccess) {
    llvm::StringMap<Operation *> lastLoad;
    llvm::StringSet<> stored;
    for (Operation &op : body) {
      if (auto load = dyn_cast<graph::LoadOp>(op)) {
        if (!stored.contains(load.getVariable()))
          lastLoad[load.getVariable()] = &op;
      } else if (auto store = dyn_cast<graph::StoreOp>(op)) {
        StringRef var = store.getVariable();
        if (!stored.insert(var).second)
          continue;
        if (Operation *at = lastLoad.lookup(var))
          releaseAfter[at].push_back(var.str());
        else
          releaseAtStart.push_back(var.str());
      }
    }
  }
  for (const std::string &var : releaseAtStart)
    variables.release(var);
  for (Operation &op : body) {
    if (op.hasTrait<OpTrait::IsTerminator>()) {
      std::vector<Tensor> results;
      for (Value v : op.getOperands())
        results.push_back(frame.values_.find(v)->second);
      return results;
    }
    if (isa<graph::VariableOp>(op))
      continue;
    auto opStart = std::chrono::steady_clock::now();
    auto it = dying.find(&op);
    frame.dyingNow_ = it != dying.end() && !observer ? &it->second : nullptr;
    if (llvm::Error err = execute(&op, frame))
      return std::move(err);
    frame.dyingNow_ = nullptr;
    if (profiling())
      recordProfile(op.getName().getStringRef(),
                    std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - opStart)
                        .count());
    if (observer)
      observer(&op, frame);
    if (it != dying.end())
      for (Value v : it->second)
        frame.values_.erase(v);
    if (auto released = releaseAfter.find(&op); released != releaseAfter.end())
      for (const std::string &var : released->second)
        variables.release(var);
  }
  return llvm::make_error<llvm::StringError>(
      "a block without a terminator", llvm::inconvertibleErrorCode());
}
} // namespace

llvm::Expected<DType> dtypeOf(Type type) {
  if (type.isF32())
    return DType::F32;
  if (type.isBF16())
    return DType::BF16;
  if (type.isF16())
    return DType::F16;
  if (isa<Float8E4M3FNType>(type))
    return DType::F8E4M3FN;
  if (isa<Float8E5M2Type>(type))
    return DType::F8E5M2;
  if (type.isInteger(32))
    return DType::I32;
  if (type.isInteger(64))
    return DType::I64;
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "the interpreter cannot hold element type " << type;
  return llvm::make_error<llvm::StringError>(text,
                                             llvm::inconvertibleErrorCode());
}

void VariableStore::initialize(ModuleOp module, uint64_t seed) {
  module.walk([&](graph::VariableOp var) {
    std::string name = var.getSymName().str();
    // A step-local variable holds nothing until a step writes it.
    if (has(name) || graph::isStepLocal(var))
      return;
    auto type = var.getTensorType();
    DType dtype = cantFail(dtypeOf(type.getElementType()));
    // A variable the data-parallel ranks share out (`data_shards`) starts
    // whole, drawn as at one rank; the trainer keeps each rank's part.
    std::vector<int64_t> shape = shapeOf(type);
    if (auto parts = var->getAttrOfType<IntegerAttr>("data_shards");
        parts && !shape.empty())
      shape[0] *= parts.getInt();
    Tensor t(dtype, shape);
    llvm::StringRef init = var.getInit();
    if (!isFloat(dtype)) {
      if (init == "ones")
        std::fill(t.i(), t.i() + t.numel(), 1);
    } else if (init == "ones") {
      std::fill(t.f(), t.f() + t.numel(), 1.0f);
    } else if (init == "normal") {
      double stdDev = var.getInitStd() ? var.getInitStd()->convertToDouble() : 0;
      numerics::NormalDraws draws(numerics::initSeed(seed, name));
      for (int64_t i = 0; i < t.numel(); ++i)
        t.f()[i] = float(draws.next() * stdDev);
    }
    t.roundToType();
    set(name, std::move(t));
  });
}

llvm::Expected<std::vector<Tensor>>
Interpreter::run(llvm::StringRef name, std::vector<Tensor> args,
                 VariableStore &variables) {
  auto fail = [](const llvm::Twine &message) {
    return llvm::make_error<llvm::StringError>(message,
                                               llvm::inconvertibleErrorCode());
  };
  auto func = module_.lookupSymbol<func::FuncOp>(name);
  if (!func || func.isExternal())
    return fail("the module has no function @" + name);
  auto type = func.getFunctionType();
  if (type.getNumInputs() != args.size())
    return fail("@" + name + " takes " + llvm::Twine(type.getNumInputs()) +
                " arguments, got " + llvm::Twine(args.size()));
  for (unsigned i = 0; i < args.size(); ++i) {
    auto argType = cast<RankedTensorType>(type.getInput(i));
    auto expected = dtypeOf(argType.getElementType());
    if (!expected)
      return expected.takeError();
    bool shapeOk = args[i].rank() == argType.getRank();
    for (int64_t d = 0; shapeOk && d < argType.getRank(); ++d)
      shapeOk = argType.isDynamicDim(d) || argType.getDimSize(d) == args[i].dim(d);
    std::string argName = "#" + std::to_string(i);
    if (auto attr = func.getArgAttrOfType<StringAttr>(i, "graph.name"))
      argName = "'" + attr.str() + "' (#" + std::to_string(i) + ")";
    if (!shapeOk || *expected != args[i].dtype())
      return fail("argument " + argName + " of @" + name +
                  ": expected " + shapeString(shapeOf(argType)) + " " +
                  dtypeName(*expected) + ", got " +
                  shapeString(args[i].shape()) + " " +
                  dtypeName(args[i].dtype()));
  }
  auto results = runBlock(func.getBody().front(), std::move(args), variables,
                          observer_, rank_);
  // The optimizer step is the last reader of the step-local variables: on
  // the GPU their slots hold other tensors until the next step writes them.
  if (results && name == "optimizer_step")
    for (auto var : module_.getOps<graph::VariableOp>())
      if (graph::isStepLocal(var))
        variables.release(var.getSymName().str());
  return results;
}

} // namespace octet::interp
