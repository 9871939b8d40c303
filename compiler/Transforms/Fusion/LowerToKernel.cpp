// octet-lower-to-kernel: graph + fp8 → kernel ops.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

namespace octet {
#define GEN_PASS_DEF_OCTETLOWERTOKERNEL
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

RankedTensorType with(RankedTensorType t, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, t.getElementType());
}

// [..., K] → [T, K] through a reshape view.
Value flatten(OpBuilder &b, Location loc, Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getRank() == 2)
    return v;
  int64_t rows = 1;
  for (int64_t d : t.getShape().drop_back())
    rows *= d;
  return graph::ReshapeOp::create(b, loc, with(t, {rows, t.getShape().back()}),
                                  v);
}

Value unflatten(OpBuilder &b, Location loc, Value v, Type type) {
  if (v.getType() == type)
    return v;
  return graph::ReshapeOp::create(b, loc, type, v);
}

// The name that says which layer an op works for: a variable, a parameter
// or an FP8 tensor name.
std::optional<StringRef> referencedName(Operation *op) {
  if (auto load = dyn_cast<graph::LoadOp>(op))
    return load.getVariable();
  if (auto store = dyn_cast<graph::StoreOp>(op))
    return store.getVariable();
  for (StringRef attr : {"param", "tensor"})
    if (auto s = op->getAttrOfType<StringAttr>(attr))
      return s.getValue();
  return std::nullopt;
}

bool isBackwardOp(Operation *op) {
  if (auto role = op->getAttrOfType<StringAttr>("role"))
    return role.getValue() == "dgrad" || role.getValue() == "wgrad";
  return isa<graph::CrossEntropyGradOp, graph::RMSNormGradOp,
             graph::LayerNormGradOp, graph::AttentionGradOp,
             graph::SiluGradOp, graph::GeluGradOp, graph::SwigluGradOp,
             graph::EmbeddingGradOp, graph::BiasGradOp>(op);
}

struct LowerToKernel
    : public octet::impl::OctetLowerToKernelBase<LowerToKernel> {
  using OctetLowerToKernelBase::OctetLowerToKernelBase;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      annotate(func);
      if (failed(lower(func)))
        return signalPassFailure();
      if (dataParallel > 1 && failed(agreeOnAmaxes(func)))
        return signalPassFailure();
    }
  }

  // Tags every op with its layer (the last layer a name referred to, in
  // program order) and its section.
  void annotate(func::FuncOp func) {
    StringRef name = func.getSymName();
    bool backward = false;
    int64_t layer = -1;
    Builder b(func.getContext());
    for (Operation &op : func.getBody().front()) {
      if (auto ref = referencedName(&op))
        layer = fusion::layerOfName(*ref).value_or(-1);
      // The embedding and the loss belong to no layer, whatever name came
      // last before them.
      if (isa<graph::EmbeddingOp, graph::EmbeddingGradOp,
              graph::CrossEntropyOp, graph::CrossEntropyGradOp>(op))
        layer = -1;
      if (name == "train_microbatch" && isBackwardOp(&op))
        backward = true;
      // An op that reads variables belongs to their layer (a norm to its
      // weight's), not to the op before it: the norm that opens layer N+1
      // comes right after the last op of layer N.
      // One that reads variables of several layers (the global gradient
      // norm) belongs to none.
      int64_t own = layer;
      bool readsVariable = false;
      for (Value operand : op.getOperands())
        if (auto load = operand.getDefiningOp<graph::LoadOp>();
            load && !referencedName(&op)) {
          int64_t l = fusion::layerOfName(load.getVariable()).value_or(-1);
          own = readsVariable && own != l ? -1 : l;
          readsVariable = true;
        }
      // An amax, scale or cast of a tensor another op made belongs to that
      // op's layer (the norm that opens layer N+1, not the GEMM of layer N
      // before it; the norm gradient of layer N+1, not the GEMM of layer N
      // that reads its cast), so that a pipeline stage cut between layers
      // keeps a tensor with its amax, scale and cast on one side.
      if (isa<fp8::AmaxOp, fp8::ComputeScaleOp, fp8::QuantizeOp,
              fp8::TransposeOp>(op))
        if (Operation *def =
                fusion::throughViews(op.getOperand(0)).getDefiningOp())
          if (auto attr = def->getAttrOfType<IntegerAttr>("layer"))
            own = attr.getInt();
      StringRef section = name == "train_microbatch"
                              ? (backward ? "backward" : "forward")
                              : name == "optimizer_step" ? "optimizer"
                                                         : "eval";
      op.setAttr("layer", b.getI64IntegerAttr(own));
      op.setAttr("section", b.getStringAttr(section));
    }
  }

  LogicalResult lower(func::FuncOp func) {
    SmallVector<Operation *> ops;
    for (Operation &op : func.getBody().front())
      ops.push_back(&op);
    OpBuilder b(func.getContext());
    for (Operation *op : ops) {
      b.setInsertionPoint(op);
      Location loc = op->getLoc();
      auto keep = [&](Operation *created) {
        for (StringRef attr : {"layer", "section"})
          created->setAttr(attr, op->getAttr(attr));
      };
      LogicalResult result =
          llvm::TypeSwitch<Operation *, LogicalResult>(op)
              .Case<graph::VariableOp, graph::LoadOp, graph::StoreOp,
                    graph::ReshapeOp, graph::SliceOp, graph::SaveOp,
                    func::ReturnOp>([&](Operation *o) {
                o->removeAttr("layer");
                o->removeAttr("section");
                return success();
              })
              .Case([&](graph::LinearOp l) {
                Value x = flatten(b, loc, l.getInput());
                auto wt = cast<RankedTensorType>(l.getWeight().getType());
                auto xt = cast<RankedTensorType>(x.getType());
                auto rt = cast<RankedTensorType>(l.getType());
                auto gemm = kernel::GemmOp::create(
                    b, loc, with(rt, {xt.getDimSize(0), wt.getDimSize(0)}),
                    TypeRange(), x, l.getWeight(), Value(), Value(), Value(),
                    Value(), l.getBias(), Value(), /*transpose_a=*/false,
                    /*transpose_b=*/true, b.getStringAttr("fprop"),
                    l.getParamAttr(),
                    l.getBias() ? b.getStringAttr("bias") : StringAttr(),
                    DenseI64ArrayAttr(), DenseI64ArrayAttr());
                keep(gemm);
                l.replaceAllUsesWith(
                    unflatten(b, loc, gemm.getResult(), l.getType()));
                l.erase();
                return success();
              })
              .Case([&](graph::MatmulOp m) {
                auto gemm = kernel::GemmOp::create(
                    b, loc, m.getType(), TypeRange(), m.getLhs(), m.getRhs(),
                    Value(), Value(), Value(), Value(), Value(), Value(),
                    m.getTransposeA(),
                    m.getTransposeB(), m.getRoleAttr(), m.getParamAttr(),
                    StringAttr(), DenseI64ArrayAttr(), DenseI64ArrayAttr());
                keep(gemm);
                m.replaceAllUsesWith(gemm.getResult());
                m.erase();
                return success();
              })
              .Case([&](fp8::MatmulOp m) -> LogicalResult {
                // Block scales keep the fp8 dialect's layout and meaning;
                // the kernel.gemm verifier states what cuBLASLt takes.
                // Tensorwise, cuBLASLt multiplies by one factor per
                // operand: the inverses octet-precision made beside the
                // scales.
                bool blocks = m.getABlock() || m.getBBlock();
                if (!blocks && !m.getInverseScales())
                  return m.emitOpError(
                      "has tensorwise quantize scales, but its kernel form "
                      "multiplies by their inverses: pass the scale_inv "
                      "results of fp8.compute_scale / fp8.scale_update "
                      "with inverse_scales (octet-precision does)");
                Value none;
                auto gemm = kernel::GemmOp::create(
                    b, loc, m.getType(), TypeRange(), m.getA(), m.getB(),
                    blocks ? m.getAScale() : none,
                    blocks ? m.getBScale() : none,
                    blocks ? none : m.getAScale(),
                    blocks ? none : m.getBScale(), m.getBias(), Value(),
                    m.getTransposeA(), m.getTransposeB(), m.getRoleAttr(),
                    m.getParamAttr(),
                    m.getBias() ? b.getStringAttr("bias") : StringAttr(),
                    m.getABlockAttr(), m.getBBlockAttr());
                keep(gemm);
                m.replaceAllUsesWith(gemm.getResult());
                m.erase();
                return success();
              })
              .Case([&](graph::AttentionOp a) {
                auto k = kernel::AttentionFwdOp::create(
                    b, loc, a.getResult().getType(), a.getLse().getType(), a.getQ(),
                    a.getK(), a.getV(), a.getCuSeqlens(), a.getCausalAttr(),
                    a.getScaleAttr());
                keep(k);
                a.replaceAllUsesWith(k.getResults());
                a.erase();
                return success();
              })
              .Case([&](graph::AttentionGradOp a) {
                auto k = kernel::AttentionBwdOp::create(
                    b, loc, a.getQGrad().getType(), a.getKGrad().getType(),
                    a.getVGrad().getType(), a.getGrad(), a.getQ(), a.getK(),
                    a.getV(), a.getOut(), a.getLse(), a.getCuSeqlens(),
                    a.getCausalAttr(), a.getScaleAttr());
                keep(k);
                a.replaceAllUsesWith(k.getResults());
                a.erase();
                return success();
              })
              .Case([&](fp8::TransposeOp t) -> LogicalResult {
                auto copy = kernel::CopyOp::create(b, loc, t.getResult().getType(),
                                                   t.getInput(), true);
                keep(copy);
                Value scale = t.getScale();
                if (cast<RankedTensorType>(scale.getType()).getRank()) {
                  auto scaleCopy = kernel::CopyOp::create(
                      b, loc, t.getResultScale().getType(), scale, true);
                  keep(scaleCopy);
                  scale = scaleCopy;
                }
                t.getResult().replaceAllUsesWith(copy.getResult());
                t.getResultScale().replaceAllUsesWith(scale);
                t.erase();
                return success();
              })
              .Default([&](Operation *o) -> LogicalResult {
                StringRef dialect = o->getDialect()
                                        ? o->getDialect()->getNamespace()
                                        : "";
                if (dialect == "kernel")
                  return success();
                if (dialect != "graph" && dialect != "fp8")
                  return o->emitOpError("has no kernel form");
                int64_t layer = fusion::layerOf(o);
                std::string name =
                    (layer >= 0 ? "layers." + std::to_string(layer) + "."
                                : std::string()) +
                    o->getName().stripDialect().str();
                fusion::wrapInFused(b, o, name);
                return success();
              });
      if (failed(result))
        return failure();
    }
    return success();
  }

  // Whether the op that measured `amax` (fp8.amax, fp8.quantize) asks for
  // its maximum over the data-parallel ranks: its `amax_reduce` names
  // "data". An amax loaded from a variable (the weights' amaxes the
  // optimizer step took of the whole, replicated weights) is already every
  // rank's, and stays out of the collective, which the pipeline cut could
  // place in no chunk function. An amax from anything else is reduced, to
  // be safe.
  static bool reducedOverData(Value amax) {
    if (amax.getDefiningOp<graph::LoadOp>())
      return false;
    auto result = dyn_cast<OpResult>(amax);
    auto fused = result ? dyn_cast<kernel::FusedOp>(result.getOwner())
                        : kernel::FusedOp();
    if (!fused)
      return true;
    Operation *measured = fused.getBodyBlock()
                              .getTerminator()
                              ->getOperand(result.getResultNumber())
                              .getDefiningOp();
    if (!isa_and_nonnull<fp8::AmaxOp, fp8::QuantizeOp>(measured))
      return true;
    auto groups = measured->getAttrOfType<ArrayAttr>("amax_reduce");
    return groups && llvm::any_of(groups, [](Attribute g) {
             return cast<StringAttr>(g).getValue() == "data";
           });
  }

  // Delayed scaling: every rank must derive the same FP8 scales, or the
  // ranks' scale state drifts apart, so an amax feeds a scale only after
  // its maximum over the data-parallel ranks. The updates (scale_update)
  // write state the next microbatch reads, so they move after one bucketed
  // all-reduce of all their amaxes. Current scaling (compute_scale) keeps
  // no state: a rank's scale only has to fit the values that rank casts, so
  // its amaxes are reduced over the data group only where the precision
  // pass asked for it (amax_reduce; under current scaling it names the
  // tensor group alone), each by an all-reduce right before its scale.
  LogicalResult agreeOnAmaxes(func::FuncOp func) {
    Block &body = func.getBody().front();
    // The kernel's operand that its one scale op reads as the amax.
    auto amaxOperand = [](kernel::FusedOp fused) -> OpOperand * {
      Operation *inner = nullptr;
      for (Operation &op : fused.getBodyBlock().without_terminator())
        if (isa<fp8::ScaleUpdateOp, fp8::ComputeScaleOp>(op))
          inner = inner ? nullptr : &op;
      if (!inner)
        return nullptr;
      Value amax = isa<fp8::ScaleUpdateOp>(inner)
                       ? cast<fp8::ScaleUpdateOp>(inner).getAmax()
                       : cast<fp8::ComputeScaleOp>(inner).getAmax();
      auto arg = dyn_cast<BlockArgument>(amax);
      if (!arg || arg.getOwner() != &fused.getBodyBlock())
        return nullptr;
      return &fused->getOpOperand(arg.getArgNumber());
    };
    auto collective = [&](OpBuilder &b, Location loc, ValueRange amaxes,
                          Operation *like) {
      SmallVector<Type> types(amaxes.getTypes());
      auto all = kernel::CollectiveOp::create(b, loc, types, amaxes,
                                              "all_reduce", "data",
                                              dataParallel, "max");
      for (StringRef attr : {"layer", "section"})
        if (Attribute a = like->getAttr(attr))
          all->setAttr(attr, a);
      return all;
    };
    SmallVector<kernel::FusedOp> delayed;
    SmallVector<OpOperand *> delayedAmaxes;
    for (auto fused : llvm::make_early_inc_range(body.getOps<kernel::FusedOp>())) {
      if (!fusion::bodyOnly(fused, {"fp8.scale_update", "fp8.compute_scale"}))
        continue;
      OpOperand *amax = amaxOperand(fused);
      if (!amax)
        return fused.emitError("a scale kernel whose amax the data-parallel "
                               "all-reduce cannot find");
      if (fusion::bodyHas(fused, {"fp8.compute_scale"})) {
        if (!reducedOverData(amax->get()))
          continue;
        OpBuilder b(fused);
        amax->set(collective(b, fused.getLoc(), amax->get(), fused)
                      .getResult(0));
        continue;
      }
      delayed.push_back(fused);
      if (reducedOverData(amax->get()))
        delayedAmaxes.push_back(amax);
    }
    if (delayedAmaxes.empty())
      return success();
    // After the last amax is made, and after the last of the updates' own
    // operands (history and scale loads come first anyway).
    Operation *after = nullptr;
    for (kernel::FusedOp fused : delayed)
      for (Value v : fused->getOperands())
        if (Operation *def = v.getDefiningOp();
            def && def->getBlock() == &body &&
            (!after || after->isBeforeInBlock(def)))
          after = def;
    OpBuilder b(func.getContext());
    if (after)
      b.setInsertionPointAfter(after);
    else
      b.setInsertionPointToStart(&body);
    SmallVector<Value> amaxes;
    for (OpOperand *amax : delayedAmaxes)
      amaxes.push_back(amax->get());
    auto all = collective(b, delayed.front().getLoc(), amaxes, delayed.front());
    for (auto [amax, reduced] : llvm::zip(delayedAmaxes, all.getResults()))
      amax->set(reduced);
    // The updates, then what uses their results (the state stores), move
    // after it in their order. A read of that state in between would see
    // the old value where it saw the new: refuse rather than change it.
    Operation *last = all;
    llvm::SmallPtrSet<Operation *, 16> moved;
    for (kernel::FusedOp fused : delayed) {
      if (fused->isBeforeInBlock(all)) {
        fused->moveAfter(last);
        last = fused;
      }
      moved.insert(fused);
    }
    for (kernel::FusedOp fused : delayed)
      for (Operation *user : fused->getUsers()) {
        if (moved.contains(user) || !user->isBeforeInBlock(all))
          continue;
        auto store = dyn_cast<graph::StoreOp>(user);
        if (!store)
          return user->emitError("uses a delayed-scaling update before the "
                                 "data-parallel amax all-reduce");
        for (Operation *op = store->getNextNode(); op && op != all.getOperation();
             op = op->getNextNode())
          if (auto load = dyn_cast<graph::LoadOp>(op);
              load && load.getVariable() == store.getVariable())
            return load.emitError("reads FP8 scale state that the "
                                  "data-parallel amax all-reduce would "
                                  "move the write of");
        store->moveAfter(last);
        last = store;
        moved.insert(store);
      }
    return success();
  }
};

} // namespace
