//===- RowOps.cpp - The ops of a row kernel -------------------------------===//
//
// Each op of a segment on the chunks a thread holds of its row: elementwise
// ops chunk by chunk, norms and their gradients with their row sums over
// the block (blockSums, blockMeanM2), RoPE with its angles in shared memory,
// AdamW, the FP8 casts with their amax, and the column sums of weight
// gradients into the block's accumulators. Every result is rounded to its
// element type, as the interpreter does op by op.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/RowKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <cmath>

using namespace mlir;

namespace octet::codegen {
namespace {

Type elementType(Value tensor) {
  return cast<RankedTensorType>(tensor.getType()).getElementType();
}

} // namespace

// Whether two RoPEs rotate by the same angles (one cos/sin table serves both).
bool sameRopeAngles(graph::RopeOp a, graph::RopeOp b) {
  return a.getPositions() == b.getPositions() && a.getTheta() == b.getTheta() &&
         a.getScaling() == b.getScaling() && a.getFactor() == b.getFactor() &&
         a.getLowFreqFactor() == b.getLowFreqFactor() &&
         a.getHighFreqFactor() == b.getHighFreqFactor() &&
         a.getOriginalMaxPosition() == b.getOriginalMaxPosition() &&
         cast<RankedTensorType>(a.getInput().getType()).getShape().back() ==
             cast<RankedTensorType>(b.getInput().getType()).getShape().back();
}

// Elementwise: f applied chunk by chunk, the result rounded to its type.
template <typename F, typename... Inputs>
void RowKernelBuilder::map(Value result, F f, Inputs... inputs) {
  Val out;
  size_t n = chunksOf(std::get<0>(std::make_tuple(inputs...))).size();
  for (size_t c = 0; c < n; ++c)
    out.chunks.push_back(
        roundTo(f(chunksOf(inputs)[c]...), elementType(result)));
  vals[result] = out;
}

Value RowKernelBuilder::masked(RowState &s, Value like, size_t c, Value x) {
  int64_t len = s.seg.length.lookup(like);
  if ((int64_t)(c + 1) * plan.threads * vec <= len)
    return x;
  Value ok = cmpI(arith::CmpIPredicate::ult, chunkBase(c), idx(len));
  return select(ok, x, chunkConst(0.0));
}

// This thread's share of a row sum (lanes past the row's end masked).
Value RowKernelBuilder::threadSum(RowState &s, Value like,
                                  ArrayRef<Value> chunks) {
  Value acc;
  for (auto [c, x] : llvm::enumerate(chunks)) {
    Value m = masked(s, like, c, x);
    acc = acc ? addF(acc, m) : m;
  }
  return reduceAdd(acc);
}

Value RowKernelBuilder::sumOver(RowState &s, Value like,
                                ArrayRef<Value> chunks) {
  return blockSums({threadSum(s, like, chunks)}).front();
}

Value RowKernelBuilder::invSqrt(Value meanSq, double eps) {
  return divF(f32c(1.0), sqrt(addF(meanSq, f32c(eps))));
}

SmallVector<Value> RowKernelBuilder::squares(ArrayRef<Value> chunks) {
  SmallVector<Value> sq;
  for (Value c : chunks)
    sq.push_back(mulF(c, c));
  return sq;
}

// LayerNorm statistics: x - mean, and 1/sqrt(var + eps) broadcast. When
// every lane holds row elements, each thread's mean and M2 merge over the
// block in one reduction; otherwise two passes (mean, then the centred
// squares).
Value RowKernelBuilder::layerStats(RowState &s, Value xv, double eps,
                                   SmallVector<Value> &centered) {
  int64_t len = s.seg.length.lookup(xv);
  SmallVector<Value> x = chunksOf(xv);
  Value mean, var;
  if (len % (plan.threads * vec) == 0) {
    int64_t perThread = (int64_t)x.size() * vec;
    Value localMean = divF(threadSum(s, xv, x), f32c((double)perThread));
    Value lm = chunkBroadcast(localMean);
    SmallVector<Value> dev;
    for (Value c : x)
      dev.push_back(subF(c, lm));
    Value localM2 = threadSum(s, xv, squares(dev));
    auto [m, m2] = blockMeanM2(localMean, localM2, perThread);
    mean = m;
    var = divF(m2, f32c((double)len));
  } else {
    mean = divF(sumOver(s, xv, x), f32c((double)len));
    SmallVector<Value> dev;
    for (Value c : x)
      dev.push_back(subF(c, chunkBroadcast(mean)));
    var = divF(sumOver(s, xv, squares(dev)), f32c((double)len));
  }
  Value meanV = chunkBroadcast(mean);
  for (Value c : x)
    centered.push_back(subF(c, meanV));
  return chunkBroadcast(invSqrt(var, eps));
}

void RowKernelBuilder::normGradTerms(ArrayRef<Value> dy,
                                     ArrayRef<Value> centred, ArrayRef<Value> w,
                                     Value inv, NormGradTerms &t) {
  for (size_t c = 0; c < centred.size(); ++c) {
    t.xhat.push_back(mulF(centred[c], inv));
    t.wdy.push_back(mulF(dy[c], w[c]));
    t.prod.push_back(mulF(t.wdy.back(), t.xhat.back()));
    t.dwTerm.push_back(mulF(dy[c], t.xhat.back()));
  }
}

void RowKernelBuilder::amaxInto(RowState &s, Value amaxResult,
                                ArrayRef<Value> chunks, Value like) {
  int i = s.accIdx.lookup(amaxResult);
  Value acc;
  for (auto [c, x] : llvm::enumerate(chunks)) {
    Value m = masked(s, like, c, absF(x));
    acc = acc ? maximumF(acc, m) : m;
  }
  Value r = reduceMaximumF(acc);
  s.accs[i] = maximumF(s.accs[i], r);
}

void RowKernelBuilder::columnAdd(RowState &s, Value result,
                                 ArrayRef<Value> chunks, Value like) {
  int i = s.accIdx.lookup(result);
  for (auto [c, x] : llvm::enumerate(chunks))
    s.accs[i + c] = addF(s.accs[i + c], masked(s, like, c, x));
}

void RowKernelBuilder::emitElementwise(Operation *op) {
  if (auto o = dyn_cast<graph::AddOp>(op)) {
    map(
        o.getResult(), [&](Value x, Value y) { return addF(x, y); }, o.getLhs(),
        o.getRhs());
  } else if (auto o = dyn_cast<graph::MulOp>(op)) {
    map(
        o.getResult(), [&](Value x, Value y) { return mulF(x, y); }, o.getLhs(),
        o.getRhs());
  } else if (auto o = dyn_cast<graph::SiluOp>(op)) {
    map(
        o.getResult(), [&](Value x) { return mulF(x, sigmoid(x)); },
        o.getInput());
  } else if (auto o = dyn_cast<graph::SwigluOp>(op)) {
    map(
        o.getResult(),
        [&](Value g, Value u) { return swiglu(g, u); },
        o.getLhs(), o.getRhs());
  } else if (auto o = dyn_cast<graph::GeluOp>(op)) {
    bool tanhForm = o.getApproximate() == "tanh";
    map(
        o.getResult(),
        [&](Value x) -> Value {
          if (tanhForm) {
            // 0.5·(1 + tanh(u)) = 1 / (1 + e^(-2u)), u = c·(x + 0.044715·x³):
            // exact, and without tanh's cancellation near -1 for x < 0.
            constexpr double c = 0.7978845608028654;
            Value arg =
                mulF(x, fma(mulF(x, x), chunkConst(-2 * c * 0.044715 * M_LOG2E),
                            chunkConst(-2 * c * M_LOG2E)));
            return mulF(x, logistic2(arg));
          }
          Value inner = math::ErfOp::create(
              b, loc, mulF(x, chunkConst(0.7071067811865476)));
          return mulF(mulF(chunkConst(0.5), x), addF(chunkConst(1.0), inner));
        },
        o.getInput());
  } else if (auto o = dyn_cast<graph::GeluGradOp>(op)) {
    bool tanhForm = o.getApproximate() == "tanh";
    map(
        o.getResult(),
        [&](Value dy, Value x) -> Value {
          Value d;
          if (tanhForm) {
            Value x2 = mulF(x, x);
            Value u = mulF(chunkConst(0.7978845608028654),
                           addF(x, mulF(chunkConst(0.044715), mulF(x2, x))));
            Value t = math::TanhOp::create(b, loc, u);
            Value du =
                mulF(chunkConst(0.7978845608028654),
                     addF(chunkConst(1.0), mulF(chunkConst(3 * 0.044715), x2)));
            Value sech2 = subF(chunkConst(1.0), mulF(t, t));
            d = addF(mulF(chunkConst(0.5), addF(chunkConst(1.0), t)),
                     mulF(mulF(chunkConst(0.5), x), mulF(sech2, du)));
          } else {
            Value cdf = mulF(
                chunkConst(0.5),
                addF(chunkConst(1.0),
                     math::ErfOp::create(
                         b, loc, mulF(x, chunkConst(0.7071067811865476)))));
            Value pdf = mulF(chunkConst(0.3989422804014327),
                             exp(mulF(chunkConst(-0.5), mulF(x, x))));
            d = addF(cdf, mulF(x, pdf));
          }
          return mulF(dy, d);
        },
        o.getGrad(), o.getInput());
  } else if (auto o = dyn_cast<graph::SiluGradOp>(op)) {
    map(
        o.getResult(),
        [&](Value dy, Value x) {
          Value s = sigmoid(x);
          return mulF(dy, mulF(s, addF(chunkConst(1.0),
                                       mulF(x, subF(chunkConst(1.0), s)))));
        },
        o.getGrad(), o.getInput());
  } else if (auto o = dyn_cast<graph::SwigluGradOp>(op)) {
    SmallVector<Value> dy = chunksOf(o.getGrad());
    SmallVector<Value> g = chunksOf(o.getGate());
    SmallVector<Value> u = chunksOf(o.getUp());
    Val dg, du;
    Type elem = elementType(o.getGateGrad());
    for (size_t c = 0; c < dy.size(); ++c) {
      auto [gateGrad, upGrad] = swigluGrad(dy[c], g[c], u[c]);
      dg.chunks.push_back(roundTo(gateGrad, elem));
      du.chunks.push_back(roundTo(upGrad, elem));
    }
    vals[o.getGateGrad()] = dg;
    vals[o.getUpGrad()] = du;
  } else if (auto o = dyn_cast<graph::CastOp>(op)) {
    Type elem = elementType(o.getResult());
    Val out;
    out.chunks = chunksOf(o.getInput());
    if (isa<Float8E4M3FNType, Float8E5M2Type>(elem))
      out.pendingFp8 = elem;
    else
      for (Value &c : out.chunks)
        c = roundTo(c, elem);
    vals[o.getResult()] = out;
  } else if (auto o = dyn_cast<fp8::DequantizeOp>(op)) {
    Value scale = chunkBroadcast(scalarOf(o.getScale()));
    map(
        o.getResult(), [&](Value q) { return divF(q, scale); }, o.getInput());
  }
}

LogicalResult RowKernelBuilder::emitLayout(RowState &s, Operation *op) {
  int64_t span = plan.threads * vec;
  if (auto o = dyn_cast<graph::FillOp>(op)) {
    Type elem = elementType(o.getResult());
    Value x = roundTo(chunkConst(o.getValue().convertToDouble()), elem);
    Val out;
    out.chunks.assign(ceilDiv(s.seg.length.lookup(o.getResult()), span), x);
    vals[o.getResult()] = out;
  } else if (auto o = dyn_cast<graph::SliceOp>(op)) {
    // The offset is a whole number of chunks (planKernel), so thread t
    // already holds the elements it owns in the slice.
    const SmallVector<Value> &in = chunksOf(o.getInput());
    int64_t first = o.getOffset() / span;
    Val out;
    for (int64_t c = 0, e = ceilDiv(s.seg.length.lookup(o.getResult()), span);
         c < e; ++c)
      // Lanes past the slice's end hold the next piece: zero them, as a
      // load past a row's end does.
      out.chunks.push_back(masked(s, o.getResult(), c, in[first + c]));
    vals[o.getResult()] = out;
  } else if (auto o = dyn_cast<graph::ConcatOp>(op)) {
    Val out;
    for (Value in : o.getInputs())
      llvm::append_range(out.chunks, chunksOf(in));
    vals[o.getResult()] = out;
  } else {
    // A reshape or a save: the same chunks.
    Value in = op->getOperand(0), out = op->getResult(0);
    if (s.seg.length.lookup(in) != s.seg.length.lookup(out))
      return op->emitOpError("changes the row length; only reshapes that keep "
                             "rows whole fuse");
    vals[out] = vals[in];
  }
  return success();
}

void RowKernelBuilder::emitRMSNorm(RowState &s, graph::RMSNormOp o) {
  int64_t len = s.seg.length.lookup(o.getInput());
  Value ss = sumOver(s, o.getInput(), squares(chunksOf(o.getInput())));
  Value invRow =
      invSqrt(divF(ss, f32c((double)len)), o.getEps().convertToDouble());
  // The tile kernel after this one evaluates the norm from these factors.
  auto kept = plan.normInverseOffset.find(o.getResult());
  if (kept != plan.normInverseOffset.end())
    ifThen(cmpI(arith::CmpIPredicate::eq, tid, idx(0)), [&] {
      store(invRow, workspace, addI(idx(kept->second), currentRow));
    });
  Value inv = chunkBroadcast(invRow);
  map(
      o.getResult(), [&](Value x, Value w) { return mulF(mulF(x, inv), w); },
      o.getInput(), o.getWeight());
}

void RowKernelBuilder::emitLayerNorm(RowState &s, graph::LayerNormOp o) {
  SmallVector<Value> x = chunksOf(o.getInput()), centered;
  Value inv =
      layerStats(s, o.getInput(), o.getEps().convertToDouble(), centered);
  SmallVector<Value> w = chunksOf(o.getWeight());
  SmallVector<Value> bias = chunksOf(o.getBias());
  Val out;
  for (size_t c = 0; c < x.size(); ++c)
    out.chunks.push_back(
        roundTo(addF(mulF(mulF(centered[c], inv), w[c]), bias[c]),
                elementType(o.getResult())));
  vals[o.getResult()] = out;
}

void RowKernelBuilder::emitRMSNormGrad(RowState &s, graph::RMSNormGradOp o) {
  int64_t len = s.seg.length.lookup(o.getInput());
  SmallVector<Value> dy = chunksOf(o.getGrad());
  SmallVector<Value> x = chunksOf(o.getInput());
  SmallVector<Value> w = chunksOf(o.getWeight());
  // Σx² and Σ w·dy·x in one block reduction: Σ w·dy·x̂ = inv·Σ w·dy·x.
  SmallVector<Value> wdyx;
  for (size_t c = 0; c < x.size(); ++c)
    wdyx.push_back(mulF(mulF(dy[c], w[c]), x[c]));
  SmallVector<Value> sums = blockSums({threadSum(s, o.getInput(), squares(x)),
                                       threadSum(s, o.getInput(), wdyx)});
  Value invS =
      invSqrt(divF(sums[0], f32c((double)len)), o.getEps().convertToDouble());
  Value inv = chunkBroadcast(invS);
  NormGradTerms t;
  normGradTerms(dy, x, w, inv, t);
  Value mean = chunkBroadcast(divF(mulF(sums[1], invS), f32c((double)len)));
  Val dx;
  for (size_t c = 0; c < x.size(); ++c)
    dx.chunks.push_back(
        roundTo(mulF(subF(t.wdy[c], mulF(t.xhat[c], mean)), inv),
                elementType(o.getInputGrad())));
  vals[o.getInputGrad()] = dx;
  columnAdd(s, o.getWeightGrad(), t.dwTerm, o.getInput());
}

void RowKernelBuilder::emitLayerNormGrad(RowState &s,
                                         graph::LayerNormGradOp o) {
  int64_t len = s.seg.length.lookup(o.getInput());
  SmallVector<Value> dy = chunksOf(o.getGrad());
  SmallVector<Value> x = chunksOf(o.getInput());
  SmallVector<Value> w = chunksOf(o.getWeight());
  SmallVector<Value> centered;
  Value inv =
      layerStats(s, o.getInput(), o.getEps().convertToDouble(), centered);
  NormGradTerms t;
  normGradTerms(dy, centered, w, inv, t);
  SmallVector<Value> sums = blockSums(
      {threadSum(s, o.getInput(), t.wdy), threadSum(s, o.getInput(), t.prod)});
  Value c1 = chunkBroadcast(divF(sums[0], f32c((double)len)));
  Value c2 = chunkBroadcast(divF(sums[1], f32c((double)len)));
  Val dx;
  for (size_t c = 0; c < x.size(); ++c)
    dx.chunks.push_back(
        roundTo(mulF(subF(subF(t.wdy[c], c1), mulF(t.xhat[c], c2)), inv),
                elementType(o.getInputGrad())));
  vals[o.getInputGrad()] = dx;
  columnAdd(s, o.getWeightGrad(), t.dwTerm, o.getInput());
  columnAdd(s, o.getBiasGrad(), dy, o.getInput());
}

void RowKernelBuilder::emitRope(graph::RopeOp o) {
  int64_t span = plan.threads * vec;
  auto type = cast<RankedTensorType>(o.getInput().getType());
  int64_t dh = type.getShape().back(), half = dh / 2;
  // A token's angles depend only on the frequency index: the first `half`
  // threads compute cos/sin once into shared memory (libdevice sinf/cosf,
  // full range reduction), everyone reads them as vectors.
  Value pos = scalarOf(o.getPositions());
  int64_t angles = kReduceFloats;
  auto sameAngles = [&](Operation *other) {
    auto r = dyn_cast_or_null<graph::RopeOp>(other);
    return r && sameRopeAngles(r, o);
  };
  if (!sameAngles(anglesFor)) {
    if (anglesFor) // others may still read the previous table
      barrier();
    Value table = ropeTable(o);
    scf::ForOp::create(b, loc, tid, idx(half), idx(plan.threads), ValueRange{},
                       [&](OpBuilder &, Location, Value i, ValueRange) {
                         Value f = load(table, i);
                         Value angle = mulF(pos, f);
                         Value at = addI(i, idx(angles));
                         store(cos(angle), shared, at);
                         Value at2 = addI(at, idx(half));
                         store(sin(angle), shared, at2);
                         scf::YieldOp::create(b, loc);
                       });
    barrier();
    anglesFor = o;
  }
  SmallVector<Value> x = chunksOf(o.getInput());
  bool sameThread = half % span == 0;
  Val out;
  for (size_t c = 0; c < x.size(); ++c) {
    Value base = chunkBase(c);
    Value inHead = remUI(base, idx(dh));
    Value firstHalf = cmpI(arith::CmpIPredicate::ult, inHead, idx(half));
    Value freqIdx = remUI(inHead, idx(half));
    Value cosAt = addI(freqIdx, idx(angles));
    Value sinAt = addI(cosAt, idx(half));
    Value cosA = vload(vecType, shared, cosAt, 16);
    Value sinA = vload(vecType, shared, sinAt, 16);
    Value partner;
    if (sameThread) {
      int64_t step = half / span;
      bool first = ((int64_t)c * span) % dh < half;
      partner = x[first ? c + step : c - step];
    } else {
      // The partner element lies (half / vec) lanes away in the same warp.
      partner = chunkConst(0.0);
      for (int64_t k = 0; k < vec; ++k)
        partner = insert(shuffleXor(extract(x[c], k), half / vec), partner, k);
    }
    // rotate-half: first half x·cos − x₂·sin, second half x·cos + x₁·sin;
    // the inverse rotates by −angle.
    Value minus = o.getInverse() ? chunkConst(1.0) : chunkConst(-1.0);
    Value plus = o.getInverse() ? chunkConst(-1.0) : chunkConst(1.0);
    Value sign = select(firstHalf, minus, plus);
    out.chunks.push_back(
        roundTo(addF(mulF(x[c], cosA), mulF(mulF(sign, partner), sinA)),
                elementType(o.getResult())));
  }
  vals[o.getResult()] = out;
}

// The interpreter's formula (compiler/Interpreter: adamwUpdate) with the
// per-element divisions taken out. Everything that depends on the step
// alone is computed once a thread, before the element loop: the step size
// lr / bc1, 1 / sqrt(bc2) and the decay factor 1 - lr·wd. Each element then
// takes one sqrt.approx and one rcp.approx.ftz (1 ulp) where it took three
// correctly rounded divisions (a dozen instructions each and a slow-path
// branch that held registers). The update differs from the interpreter's
// by a few f32 ulps of the update, itself about lr relative to the
// parameter: compiler/Codegen/README.md, "Accuracy", has the bound.
void RowKernelBuilder::emitAdamW(graph::AdamWUpdateOp o) {
  double b1 = o.getBeta1().convertToDouble();
  double b2 = o.getBeta2().convertToDouble();
  double eps = o.getEps().convertToDouble();
  double wd = o.getWeightDecay().convertToDouble();
  Value lr = scalarOf(o.getLr());
  Value t = scalarOf(o.getStep());
  Value gs = chunkBroadcast(scalarOf(o.getGradScale()));
  // 1 - beta^t as -expm1(t · ln beta), ln beta taken in double: within
  // 3 f32 ulps of the interpreter's double 1 - pow(beta, t) at any step,
  // where f32 powf(f32(beta), t) carried f32(beta)'s rounding into the
  // cancellation (3e-5 relative for beta2 = 0.999 at step 1).
  auto biasCorrection = [&](double beta) {
    return negF(math::ExpM1Op::create(b, loc, mulF(t, f32c(std::log(beta)))));
  };
  Value stepSize = chunkBroadcast(divF(lr, biasCorrection(b1)));
  Value invBc2Sqrt =
      chunkBroadcast(divF(f32c(1.0), sqrt(biasCorrection(b2))));
  Value decay = chunkBroadcast(subF(f32c(1.0), mulF(lr, f32c(wd))));
  SmallVector<Value> p = chunksOf(o.getParam());
  SmallVector<Value> g = chunksOf(o.getGrad());
  SmallVector<Value> m = chunksOf(o.getExpAvg());
  SmallVector<Value> v = chunksOf(o.getExpAvgSq());
  Val np, nm, nv;
  for (size_t c = 0; c < p.size(); ++c) {
    Value gg = mulF(g[c], gs);
    Value m1 = addF(mulF(chunkConst(b1), m[c]), mulF(chunkConst(1.0 - b1), gg));
    Value v1 = addF(mulF(chunkConst(b2), v[c]),
                    mulF(mulF(chunkConst(1.0 - b2), gg), gg));
    Value denom = addF(mulF(sqrt(v1), invBc2Sqrt), chunkConst(eps));
    Value inv = rcpApprox(denom);
    Value p1 = subF(mulF(p[c], decay), mulF(mulF(stepSize, m1), inv));
    np.chunks.push_back(roundTo(p1, elementType(o.getNewParam())));
    nm.chunks.push_back(roundTo(m1, elementType(o.getNewExpAvg())));
    nv.chunks.push_back(roundTo(v1, elementType(o.getNewExpAvgSq())));
  }
  vals[o.getNewParam()] = np;
  vals[o.getNewExpAvg()] = nm;
  vals[o.getNewExpAvgSq()] = nv;
}

LogicalResult RowKernelBuilder::emitOp(const Segment &seg, Operation *op,
                                       SmallVector<Value> &accs,
                                       DenseMap<Value, int> &accIdx) {
  RowState s{seg, accs, accIdx};
  if (isa<graph::AddOp, graph::MulOp, graph::SiluOp, graph::SwigluOp,
          graph::GeluOp, graph::GeluGradOp, graph::SiluGradOp,
          graph::SwigluGradOp, graph::CastOp, fp8::DequantizeOp>(op)) {
    emitElementwise(op);
  } else if (isa<graph::FillOp, graph::SliceOp, graph::ConcatOp,
                 graph::ReshapeOp, graph::SaveOp>(op)) {
    return emitLayout(s, op);
  } else if (auto o = dyn_cast<graph::RMSNormOp>(op)) {
    emitRMSNorm(s, o);
  } else if (auto o = dyn_cast<graph::LayerNormOp>(op)) {
    emitLayerNorm(s, o);
  } else if (auto o = dyn_cast<graph::RMSNormGradOp>(op)) {
    emitRMSNormGrad(s, o);
  } else if (auto o = dyn_cast<graph::LayerNormGradOp>(op)) {
    emitLayerNormGrad(s, o);
  } else if (auto o = dyn_cast<graph::BiasGradOp>(op)) {
    columnAdd(s, o.getResult(), chunksOf(o.getGrad()), o.getGrad());
  } else if (auto o = dyn_cast<graph::RopeOp>(op)) {
    emitRope(o);
  } else if (auto o = dyn_cast<graph::AdamWUpdateOp>(op)) {
    emitAdamW(o);
  } else if (auto o = dyn_cast<fp8::QuantizeOp>(op)) {
    SmallVector<Value> x = chunksOf(o.getInput());
    Value scale = chunkBroadcast(scalarOf(o.getScale()));
    Val q;
    for (Value c : x)
      q.chunks.push_back(mulF(c, scale));
    q.pendingFp8 = elementType(o.getResult());
    vals[o.getResult()] = q;
    amaxInto(s, o.getAmax(), x, o.getInput());
  } else if (auto o = dyn_cast<fp8::AmaxOp>(op)) {
    amaxInto(s, o.getResult(), chunksOf(o.getInput()), o.getInput());
  } else {
    return op->emitOpError("has no GPU lowering in octet-fused-to-gpu");
  }
  return success();
}

} // namespace octet::codegen
