// octet-recompute-kmajor: a K-major FP8 copy the forward saves for a wgrad
// GEMM is made again in the backward, by the kernel that reads the saved
// tensors it is cast from (or, where no backward kernel reads them, by a
// kernel of its own before the GEMM), instead of being kept from the
// forward to the backward.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace octet {
#define GEN_PASS_DEF_OCTETRECOMPUTEKMAJOR
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

// What the backward kernel may evaluate again: elementwise ops, RMSNorm
// (a row kernel's op, its reduction over the row's saved input and the
// weight), views and the tensorwise cast itself. The cast is exact to
// repeat only with the same scale, which the cone takes from a state load
// (delayed scaling: the step's scale is fixed before the forward).
constexpr StringRef kRecomputable[] = {
    "graph.add",   "graph.mul",    "graph.cast",     "graph.silu",
    "graph.gelu",  "graph.swiglu", "graph.rms_norm", "graph.reshape",
    "graph.slice", "fp8.quantize", "fp8.transpose"};

// The graph.save of `v`, if the autodiff pass routed it to the backward.
graph::SaveOp saveOf(Value v) {
  for (Operation *user : v.getUsers())
    if (auto save = dyn_cast<graph::SaveOp>(user))
      return save;
  return nullptr;
}

// The value the backward reads for an outer value of the producer: the
// save of a tensor it reads or writes anyway (or of the tensor it is a
// reshape of: the attention output, saved for the attention backward, is
// cast as [tokens, hidden]), or the state load of a scale or a norm
// weight; null for anything else. A reshaped save has the save's type; the
// recomputing kernel reshapes it again.
Value backwardValueOf(Value outer) {
  if (outer.getDefiningOp<graph::LoadOp>())
    return outer;
  for (Value v = outer;;) {
    if (graph::SaveOp save = saveOf(v))
      return save.getResult();
    auto reshape = v.getDefiningOp<graph::ReshapeOp>();
    if (!reshape)
      return nullptr;
    v = reshape.getInput();
  }
}

bool isScalar(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements() == 1;
}

// `merged` also yielding the row-major cast its first result (the K-major
// copy) transposes: codegen transposes an FP8 tensor in a launch after the
// row kernel, from memory. Nothing else reads it; its buffer lives for that
// one kernel.
kernel::FusedOp withRowMajorResult(kernel::FusedOp merged) {
  auto yield = cast<kernel::YieldOp>(merged.getBodyBlock().getTerminator());
  Value rowMajor =
      yield.getValues()[0].getDefiningOp<fp8::TransposeOp>().getInput();
  SmallVector<Value> values(yield.getValues());
  values.push_back(rowMajor);
  kernel::FusedOp rebuilt = fusion::rebuildYielding(merged, values);
  for (auto [oldResult, newResult] :
       llvm::zip(merged->getResults(), rebuilt->getResults()))
    oldResult.replaceAllUsesWith(newResult);
  merged.erase();
  return rebuilt;
}

struct RecomputeKMajor
    : public octet::impl::OctetRecomputeKMajorBase<RecomputeKMajor> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      SmallVector<kernel::GemmOp> wgrads;
      func.walk([&](kernel::GemmOp gemm) {
        if (gemm.getRole() && *gemm.getRole() == "wgrad")
          wgrads.push_back(gemm);
      });
      for (kernel::GemmOp gemm : wgrads)
        recompute(gemm);
    }
  }

  // A kernel at `b` evaluating the cone: the K-major copy, and with
  // `rowMajor` also the cast it transposes (codegen's transpose launch
  // reads or writes it; nothing else does).
  kernel::FusedOp buildCopy(OpBuilder &b, kernel::FusedOp producer,
                            const fusion::RecomputeCone &cone, Value inner,
                            StringRef name, bool rowMajor) {
    SmallVector<Type> types = {inner.getType()};
    Value rowMajorCast = inner.getDefiningOp<fp8::TransposeOp>().getInput();
    if (rowMajor)
      types.push_back(rowMajorCast.getType());
    auto copy =
        kernel::FusedOp::create(b, producer.getLoc(), types,
                                cone.inputs.getArrayRef(), name, "elementwise");
    Block &body = copy.getBodyBlock();
    IRMapping map;
    OpBuilder innerBuilder = OpBuilder::atBlockEnd(&body);
    for (auto [v, arg] : llvm::zip(cone.inputs, body.getArguments())) {
      Value innerValue = cone.innerOf.lookup(v);
      Value read = arg;
      // A save read through the forward's reshapes: the same reshapes.
      if (read.getType() != innerValue.getType())
        read = graph::ReshapeOp::create(innerBuilder, producer.getLoc(),
                                        innerValue.getType(), read);
      map.map(innerValue, read);
    }
    for (Operation *op : cone.ops) {
      Operation *clone = innerBuilder.clone(*op, map);
      // The amax the forward measured is the step's; this one repeats it
      // and is read by nothing (nor counted twice in the FP8 statistics).
      if (isa<fp8::QuantizeOp>(clone)) {
        clone->removeAttr("amax_reduce");
        clone->setAttr("recomputed", b.getUnitAttr());
      }
    }
    SmallVector<Value> yielded = {map.lookup(inner)};
    if (rowMajor)
      yielded.push_back(map.lookup(rowMajorCast));
    kernel::YieldOp::create(innerBuilder, producer.getLoc(), yielded);
    copy.setKindAttr(b.getStringAttr(fusion::kindForBody(body)));
    return copy;
  }

  // The backward kernel that reads every saved tensor of the cone already:
  // the cone then costs it no reads, only the copy's write, which the
  // forward no longer makes. Null if there is none, or if the GEMM cannot
  // move after it (something between reads its result, or it depends on
  // the result).
  kernel::FusedOp readerOf(kernel::GemmOp gemm,
                           const fusion::RecomputeCone &cone, Value saved) {
    for (Operation *user : saved.getUsers()) {
      auto fused = dyn_cast<kernel::FusedOp>(user);
      if (!fused || fused->getBlock() != gemm->getBlock() ||
          fused.getKind() == "multi_tensor")
        continue;
      if (!llvm::all_of(cone.inputs, [&](Value v) {
            return isScalar(v) || llvm::is_contained(fused.getInputs(), v);
          }))
        continue;
      if (gemm->isBeforeInBlock(fused))
        for (Operation *user : gemm->getUsers())
          if (Operation *top = gemm->getBlock()->findAncestorOpInBlock(*user);
              top && !fused->isBeforeInBlock(top))
            return nullptr;
      return fused;
    }
    return nullptr;
  }

  void recompute(kernel::GemmOp gemm) {
    for (OpOperand *operand : {&gemm.getAMutable(), &gemm.getBMutable()}) {
      auto save = operand->get().getDefiningOp<graph::SaveOp>();
      if (!save || !save.getResult().hasOneUse())
        continue;
      auto saved = dyn_cast<OpResult>(save.getInput());
      auto producer =
          saved ? dyn_cast<kernel::FusedOp>(saved.getOwner()) : nullptr;
      if (!producer || producer.getKind() == "multi_tensor" ||
          !saved.hasOneUse() || producer->getBlock() != gemm->getBlock())
        continue;
      Value inner = producer.getBodyBlock().getTerminator()->getOperand(
          saved.getResultNumber());
      if (!inner.getDefiningOp<fp8::TransposeOp>())
        continue;
      std::optional<fusion::RecomputeCone> cone = fusion::recomputeCone(
          producer, inner, kRecomputable, backwardValueOf);
      if (!cone)
        continue;
      // Cast from a saved tensor: the cone's other inputs are state loads.
      Value anySaved;
      for (Value v : cone->inputs)
        if (v.getDefiningOp<graph::SaveOp>())
          anySaved = v;
      if (!anySaved)
        continue;
      if (kernel::FusedOp reader = readerOf(gemm, *cone, anySaved)) {
        OpBuilder b(reader);
        kernel::FusedOp copy = buildCopy(b, producer, *cone, inner,
                                         reader.getName(), /*rowMajor=*/false);
        // Read before the merge, so that the merged kernel yields it.
        Value old = operand->get();
        operand->set(copy.getResult(0));
        kernel::FusedOp merged =
            fusion::mergeFused(copy, reader, reader.getName());
        if (!merged) {
          operand->set(old);
          copy.erase();
          continue;
        }
        merged = withRowMajorResult(merged);
        if (gemm->isBeforeInBlock(merged))
          gemm->moveAfter(merged);
      } else {
        // No backward kernel reads the saved tensor (the attention output
        // is read by the attention backward): a kernel of its own casts
        // it again just before the GEMM, one launch that reads the saved
        // tensor, where the forward kept the copy to here.
        if (!llvm::all_of(cone->inputs, [&](Value v) {
              Operation *def = v.getDefiningOp();
              return !def || def->isBeforeInBlock(gemm);
            }))
          continue;
        OpBuilder b(gemm);
        kernel::FusedOp copy = buildCopy(b, producer, *cone, inner,
                                         producer.getName(), /*rowMajor=*/true);
        for (StringRef attr : {"layer", "section"})
          if (Attribute value = gemm->getAttr(attr))
            copy->setAttr(attr, value);
        operand->set(copy.getResult(0));
      }
      save.erase();
      fusion::dropUnusedResults(producer);
    }
  }
};

} // namespace
