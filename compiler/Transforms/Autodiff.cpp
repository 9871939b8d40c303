// Reverse-mode autodiff over the graph dialect: @forward → @train_microbatch
// (forward + backward + gradient accumulation) and @optimizer_step (AdamW).

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/TypeSwitch.h"

namespace octet {
#define GEN_PASS_DEF_OCTETAUTODIFF
#include "compiler/Transforms/Passes.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;
using namespace octet::graph;

namespace {

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

bool isDifferentiable(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && isa<FloatType>(type.getElementType());
}

class Differentiator {
public:
  Differentiator(func::FuncOp fn, Operation *returnOp, bool recompute,
                 bool recomputeRope)
      : builder(returnOp), recompute(recompute), recomputeRope(recomputeRope) {
    (void)fn;
  }

  OpBuilder builder;
  bool recompute;
  bool recomputeRope;
  DenseMap<Value, Value> grads;
  DenseMap<Value, Value> saved;
  DenseMap<std::pair<Value, Type>, Value> reshapes;
  // Per variable, in first-seen order, the sum of the gradients of its loads.
  llvm::MapVector<StringRef, Value> paramGrads;

  void addGrad(Value v, Value g) {
    if (!isDifferentiable(v))
      return;
    auto it = grads.find(v);
    if (it == grads.end()) {
      grads[v] = g;
      return;
    }
    it->second = AddOp::create(builder, g.getLoc(), it->second, g);
  }

  // Memoized: the wgrads of q, k and v all flatten the same input.
  Value reshapeTo(Value v, ArrayRef<int64_t> shape) {
    auto type = tensorType(v);
    if (type.getShape() == shape)
      return v;
    auto target = RankedTensorType::get(shape, type.getElementType());
    Value &cached = reshapes[{v, target}];
    if (!cached)
      cached = ReshapeOp::create(builder, v.getLoc(), target, v);
    return cached;
  }

  // RoPE only on request (recompute-rope): its backward reads no forward
  // value, so recomputing it keeps its input (as large as its output)
  // saved for nothing else and runs the rotation again.
  bool isRecomputable(Operation *op) const {
    if (isa<RopeOp>(op))
      return recomputeRope;
    return isa<RMSNormOp, LayerNormOp, SiluOp, GeluOp, SwigluOp, ReshapeOp,
               CastOp>(op);
  }

  // The forward value `v` as the backward may read it: function arguments
  // and variable loads are live anyway; cheap ops are recomputed (from
  // saved inputs) at the current backward position; anything else goes
  // through one graph.save placed right after its definition.
  Value forwardValue(Value v) {
    auto it = saved.find(v);
    if (it != saved.end())
      return it->second;
    Operation *def = v.getDefiningOp();
    Value result;
    if (!def || isa<LoadOp, FillOp>(def)) {
      result = v;
    } else if (recompute && isRecomputable(def)) {
      IRMapping mapping;
      for (Value operand : def->getOperands())
        mapping.map(operand, forwardValue(operand));
      Operation *clone = builder.clone(*def, mapping);
      clone->setAttr("recomputed", builder.getUnitAttr());
      result = clone->getResult(cast<OpResult>(v).getResultNumber());
    } else {
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPointAfter(def);
      result = SaveOp::create(builder, v.getLoc(), v.getType(), v);
    }
    saved[v] = result;
    return result;
  }

  LogicalResult backprop(Operation *op);
};

LogicalResult Differentiator::backprop(Operation *op) {
  Location loc = op->getLoc();
  auto gradOf = [&](Value v) -> Value { return grads.lookup(v); };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](LoadOp load) {
        Value g = gradOf(load.getResult());
        StringRef name = load.getVariable();
        auto it = paramGrads.find(name);
        if (it == paramGrads.end())
          paramGrads.insert({name, g});
        else
          it->second = AddOp::create(builder, loc, it->second, g);
        return success();
      })
      .Case([&](EmbeddingOp e) {
        Value dtable = EmbeddingGradOp::create(
            builder, loc, e.getTable().getType(), gradOf(e.getResult()),
            e.getIds());
        addGrad(e.getTable(), dtable);
        return success();
      })
      .Case([&](LinearOp l) {
        auto xType = tensorType(l.getInput());
        auto wType = tensorType(l.getWeight());
        int64_t n = wType.getDimSize(0), k = wType.getDimSize(1);
        int64_t m = xType.getNumElements() / k;
        Value dy = gradOf(l.getResult());
        Value dy2 = reshapeTo(dy, {m, n});
        StringAttr param = l.getParamAttr();
        auto dgrad = MatmulOp::create(
            builder, loc, RankedTensorType::get({m, k}, xType.getElementType()),
            dy2, forwardValue(l.getWeight()), false, false,
            builder.getStringAttr("dgrad"), param);
        addGrad(l.getInput(), reshapeTo(dgrad, xType.getShape()));
        Value x2 = reshapeTo(forwardValue(l.getInput()), {m, k});
        auto wgrad = MatmulOp::create(builder, loc, wType, dy2, x2,
                                      /*transpose_a=*/true, false,
                                      builder.getStringAttr("wgrad"), param);
        addGrad(l.getWeight(), wgrad);
        if (l.getBias())
          addGrad(l.getBias(), BiasGradOp::create(builder, loc,
                                                  l.getBias().getType(), dy));
        return success();
      })
      .Case([&](MatmulOp mm) {
        Value dc = gradOf(mm.getResult());
        Value a = forwardValue(mm.getLhs()), b = forwardValue(mm.getRhs());
        bool ta = mm.getTransposeA(), tb = mm.getTransposeB();
        StringAttr param = mm.getParamAttr();
        StringAttr dgrad = builder.getStringAttr("dgrad");
        StringAttr wgrad = builder.getStringAttr("wgrad");
        // C = op(A) op(B): dA = dC op(B)ᵀ (transposed back when ta), dB =
        // op(A)ᵀ dC (transposed back when tb).
        Value da = ta ? MatmulOp::create(builder, loc, mm.getLhs().getType(), b,
                                         dc, tb, true, dgrad, param)
                      : MatmulOp::create(builder, loc, mm.getLhs().getType(),
                                         dc, b, false, !tb, dgrad, param);
        Value db = tb ? MatmulOp::create(builder, loc, mm.getRhs().getType(),
                                         dc, a, true, ta, wgrad, param)
                      : MatmulOp::create(builder, loc, mm.getRhs().getType(), a,
                                         dc, !ta, false, wgrad, param);
        addGrad(mm.getLhs(), da);
        addGrad(mm.getRhs(), db);
        return success();
      })
      .Case([&](RMSNormOp n) {
        auto g = RMSNormGradOp::create(
            builder, loc, n.getInput().getType(), n.getWeight().getType(),
            gradOf(n.getResult()), forwardValue(n.getInput()),
            forwardValue(n.getWeight()), n.getEpsAttr());
        addGrad(n.getInput(), g.getInputGrad());
        addGrad(n.getWeight(), g.getWeightGrad());
        return success();
      })
      .Case([&](LayerNormOp n) {
        auto g = LayerNormGradOp::create(
            builder, loc, n.getInput().getType(), n.getWeight().getType(),
            n.getBias().getType(), gradOf(n.getResult()),
            forwardValue(n.getInput()), forwardValue(n.getWeight()),
            n.getEpsAttr());
        addGrad(n.getInput(), g.getInputGrad());
        addGrad(n.getWeight(), g.getWeightGrad());
        addGrad(n.getBias(), g.getBiasGrad());
        return success();
      })
      .Case([&](RopeOp r) {
        // A rotation's transpose is the rotation by the negative angle.
        auto inverse = cast<RopeOp>(builder.clone(*r));
        inverse->setOperand(0, gradOf(r.getResult()));
        inverse.setInverse(!r.getInverse());
        addGrad(r.getInput(), inverse.getResult());
        return success();
      })
      .Case([&](AttentionOp a) -> LogicalResult {
        if (grads.count(a.getLse()))
          return a.emitOpError(
              "its log-sum-exp result feeds the loss; autodiff differentiates "
              "only the attention output");
        Value out = forwardValue(a.getResult());
        Value lse = forwardValue(a.getLse());
        auto g = AttentionGradOp::create(
            builder, loc, a.getQ().getType(), a.getK().getType(),
            a.getV().getType(), gradOf(a.getResult()), forwardValue(a.getQ()),
            forwardValue(a.getK()), forwardValue(a.getV()), out, lse,
            a.getCuSeqlens(), a.getCausalAttr(), a.getScaleAttr());
        addGrad(a.getQ(), g.getQGrad());
        addGrad(a.getK(), g.getKGrad());
        addGrad(a.getV(), g.getVGrad());
        return success();
      })
      .Case([&](ReshapeOp r) {
        addGrad(r.getInput(),
                reshapeTo(gradOf(r.getResult()),
                          tensorType(r.getInput()).getShape()));
        return success();
      })
      .Case([&](SaveOp s) {
        addGrad(s.getInput(), gradOf(s.getResult()));
        return success();
      })
      .Case([&](CastOp c) {
        addGrad(c.getInput(), CastOp::create(builder, loc, c.getInput().getType(),
                                             gradOf(c.getResult())));
        return success();
      })
      .Case([&](SiluOp s) {
        addGrad(s.getInput(),
                SiluGradOp::create(builder, loc, s.getType(),
                                   gradOf(s.getResult()),
                                   forwardValue(s.getInput())));
        return success();
      })
      .Case([&](GeluOp g) {
        addGrad(g.getInput(),
                GeluGradOp::create(builder, loc, g.getType(),
                                   gradOf(g.getResult()),
                                   forwardValue(g.getInput()),
                                   g.getApproximateAttr()));
        return success();
      })
      .Case([&](SwigluOp s) {
        auto g = SwigluGradOp::create(builder, loc, s.getType(), s.getType(),
                                      gradOf(s.getResult()),
                                      forwardValue(s.getLhs()),
                                      forwardValue(s.getRhs()));
        addGrad(s.getLhs(), g.getGateGrad());
        addGrad(s.getRhs(), g.getUpGrad());
        return success();
      })
      .Case([&](AddOp a) {
        Value dy = gradOf(a.getResult());
        addGrad(a.getLhs(), dy);
        addGrad(a.getRhs(), dy);
        return success();
      })
      .Case([&](MulOp m) {
        Value dy = gradOf(m.getResult());
        Value lhs = forwardValue(m.getLhs()), rhs = forwardValue(m.getRhs());
        addGrad(m.getLhs(), MulOp::create(builder, loc, dy, rhs));
        addGrad(m.getRhs(), MulOp::create(builder, loc, dy, lhs));
        return success();
      })
      .Case([&](CrossEntropyOp ce) {
        Value dlogits = CrossEntropyGradOp::create(
            builder, loc, ce.getLogits().getType(), gradOf(ce.getLoss()),
            forwardValue(ce.getLogits()), ce.getLabels(), ce.getLossMask(),
            ce.getBatchMask());
        addGrad(ce.getLogits(), dlogits);
        return success();
      })
      .Default([&](Operation *other) -> LogicalResult {
        return other->emitOpError(
            "lies on the path from the parameters to the loss, but autodiff "
            "has no rule for it");
      });
}

struct AutodiffPass : public octet::impl::OctetAutodiffBase<AutodiffPass> {
  using OctetAutodiffBase::OctetAutodiffBase;

  void runOnOperation() override;

  VariableOp addStateVariable(OpBuilder &b, Location loc, StringRef name,
                              Type type) {
    return VariableOp::create(b, loc, b.getStringAttr(name),
                              TypeAttr::get(type), b.getStringAttr("state"),
                              b.getStringAttr("zeros"), FloatAttr(),
                              StringAttr());
  }
};

void AutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  SymbolTable symbols(module);
  auto forward = symbols.lookup<func::FuncOp>("forward");
  if (!forward || forward.isExternal()) {
    module.emitError("autodiff needs a func.func @forward that returns the "
                     "loss; the module has none");
    return signalPassFailure();
  }
  if (symbols.lookup("train_microbatch") || symbols.lookup("optimizer_step")) {
    module.emitError("the module already has a train step "
                     "(@train_microbatch / @optimizer_step); run autodiff on "
                     "the forward graph only");
    return signalPassFailure();
  }
  auto ftype = forward.getFunctionType();
  auto lossType = ftype.getNumResults() == 1
                      ? dyn_cast<RankedTensorType>(ftype.getResult(0))
                      : RankedTensorType();
  if (!lossType || lossType.getRank() != 0 || !lossType.getElementType().isF32()) {
    forward.emitError("@forward must return exactly one value, the scalar "
                      "loss (tensor<f32>); got ")
        << ftype.getResults();
    return signalPassFailure();
  }
  if (microbatches < 1 || dataParallel < 1) {
    module.emitError("microbatches and data-parallel must be at least 1; "
                     "got ")
        << int64_t(microbatches) << " and " << int64_t(dataParallel);
    return signalPassFailure();
  }

  SmallVector<VariableOp> params;
  for (auto var : module.getOps<VariableOp>())
    if (var.isTrainable())
      params.push_back(var);
  if (params.empty()) {
    module.emitError("the module has no trainable graph.variable: nothing to "
                     "differentiate");
    return signalPassFailure();
  }

  // @train_microbatch: a copy of @forward, then the backward.
  OpBuilder top(module.getBodyRegion());
  top.setInsertionPointAfter(forward);
  auto train = cast<func::FuncOp>(top.clone(*forward));
  train.setSymName("train_microbatch");
  auto ret = cast<func::ReturnOp>(train.getBody().front().getTerminator());
  Value loss = ret.getOperand(0);

  Differentiator diff(train, ret, recompute, recomputeRope);
  Location loc = train.getLoc();
  double seed = 1.0 / double(microbatches * dataParallel);
  diff.grads[loss] = FillOp::create(diff.builder, loc, loss.getType(),
                                    diff.builder.getF64FloatAttr(seed));
  SmallVector<Operation *> ops;
  for (Operation &op : train.getBody().front().without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) {
    bool needed = llvm::any_of(op->getResults(), [&](Value r) {
      return diff.grads.count(r) != 0;
    });
    if (!needed)
      continue;
    if (failed(diff.backprop(op)))
      return signalPassFailure();
  }

  // Every trainable parameter must get a gradient; accumulate into grad.*.
  OpBuilder vars(module.getBodyRegion());
  vars.setInsertionPoint(forward);
  for (VariableOp param : params) {
    StringRef name = param.getSymName();
    auto it = diff.paramGrads.find(name);
    if (it == diff.paramGrads.end()) {
      param.emitError("parameter '")
          << name
          << "' gets no gradient: the loss returned by @forward does not "
             "depend on it. Use it in the forward graph, or declare it with "
             "kind = \"state\" if it is not meant to be trained";
      return signalPassFailure();
    }
    for (StringRef prefix : {"grad.", "adam_m.", "adam_v."}) {
      std::string stateName = (prefix + name).str();
      if (symbols.lookup(stateName)) {
        param.emitError("state variable '")
            << stateName << "' already exists; autodiff names it itself";
        return signalPassFailure();
      }
      addStateVariable(vars, param.getLoc(), stateName, param.getType());
    }
    OpBuilder &b = diff.builder;
    Type type = param.getType();
    std::string accName = ("grad." + name).str();
    Value acc = LoadOp::create(b, loc, type, accName);
    Value sum = AddOp::create(b, loc, acc, it->second);
    StoreOp::create(b, loc, sum, accName);
  }
  if (symbols.lookup("optimizer.step")) {
    module.emitError("state variable 'optimizer.step' already exists");
    return signalPassFailure();
  }
  auto stepType = RankedTensorType::get({}, vars.getI64Type());
  addStateVariable(vars, loc, "optimizer.step", stepType);

  // @optimizer_step() -> (grad_norm, lr).
  OpBuilder b(module.getBodyRegion());
  b.setInsertionPointAfter(train);
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  auto opt = func::FuncOp::create(
      b, loc, "optimizer_step", b.getFunctionType({}, {scalar, scalar}));
  opt.setResultAttr(0, "graph.name", b.getStringAttr("grad_norm"));
  opt.setResultAttr(1, "graph.name", b.getStringAttr("lr"));
  b.setInsertionPointToStart(opt.addEntryBlock());
  Value step0 = LoadOp::create(b, loc, stepType, "optimizer.step");
  Value step = IncrementOp::create(b, loc, stepType, step0);
  StoreOp::create(b, loc, step, "optimizer.step");
  Value lrValue = LrScheduleOp::create(
      b, loc, scalar, step, b.getF64FloatAttr(lr),
      b.getI64IntegerAttr(warmupSteps), b.getI64IntegerAttr(totalSteps),
      b.getF64FloatAttr(minLrRatio));
  SmallVector<Value> accs;
  for (VariableOp param : params)
    accs.push_back(LoadOp::create(b, loc, param.getType(),
                                  ("grad." + param.getSymName()).str()));
  // The seed already averaged over the global batch.
  FloatAttr average = b.getF64FloatAttr(1.0);
  Value norm = GlobalNormOp::create(b, loc, scalar, accs, average);
  Value mult = ClipScaleOp::create(b, loc, scalar, norm,
                                   b.getF64FloatAttr(gradClip), average);
  for (auto [param, acc] : llvm::zip(params, accs)) {
    StringRef name = param.getSymName();
    Type type = param.getType();
    bool decays = param.getKind() == "weight" ||
                  (decayEmbeddings && param.getKind() == "embedding");
    std::string mName = ("adam_m." + name).str(),
                vName = ("adam_v." + name).str();
    Value p = LoadOp::create(b, loc, type, name);
    Value m = LoadOp::create(b, loc, type, mName);
    Value v = LoadOp::create(b, loc, type, vName);
    auto update = AdamWUpdateOp::create(
        b, loc, type, type, type, p, acc, m, v, lrValue, step, mult,
        b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
        b.getF64FloatAttr(eps), b.getF64FloatAttr(decays ? weightDecay : 0.0));
    StoreOp::create(b, loc, update.getNewParam(), name);
    StoreOp::create(b, loc, update.getNewExpAvg(), mName);
    StoreOp::create(b, loc, update.getNewExpAvgSq(), vName);
    Value zero = FillOp::create(b, loc, type, b.getF64FloatAttr(0.0));
    StoreOp::create(b, loc, zero, ("grad." + name).str());
  }
  func::ReturnOp::create(b, loc, ValueRange{norm, lrValue});
}

} // namespace
