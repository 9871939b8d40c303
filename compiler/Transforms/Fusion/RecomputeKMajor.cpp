// octet-recompute-kmajor: a K-major FP8 copy the forward saves for a wgrad
// GEMM is made again in the backward, by the kernel that reads the saved
// tensors it is cast from, instead of being kept from the forward to the
// backward.

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

// What the backward kernel may evaluate again: elementwise ops, views and
// the tensorwise cast itself. The cast is exact to repeat only with the
// same scale, which the cone takes from a state load (delayed scaling: the
// step's scale is fixed before the forward).
constexpr StringRef kRecomputable[] = {
    "graph.add",   "graph.mul",     "graph.cast",    "graph.silu",
    "graph.gelu",  "graph.swiglu",  "graph.reshape", "graph.slice",
    "fp8.quantize", "fp8.transpose"};

// The graph.save of `v`, if the autodiff pass routed it to the backward.
graph::SaveOp saveOf(Value v) {
  for (Operation *user : v.getUsers())
    if (auto save = dyn_cast<graph::SaveOp>(user))
      return save;
  return nullptr;
}

// The value the backward reads for an outer value of the producer: the
// save of a tensor it reads or writes anyway, or the state load of a
// scale; null for anything else.
Value backwardValueOf(Value outer) {
  if (outer.getDefiningOp<graph::LoadOp>())
    return outer;
  if (graph::SaveOp save = saveOf(outer))
    return save.getResult();
  return nullptr;
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
      // The backward kernel that reads every saved tensor of the cone
      // already: the cone then costs it no reads, only the copy's write,
      // which the forward no longer makes.
      kernel::FusedOp reader;
      Value anySaved;
      for (Value v : cone->inputs)
        if (!isScalar(v))
          anySaved = v;
      if (!anySaved)
        continue;
      for (Operation *user : anySaved.getUsers()) {
        auto fused = dyn_cast<kernel::FusedOp>(user);
        if (!fused || fused->getBlock() != gemm->getBlock() ||
            fused.getKind() == "multi_tensor")
          continue;
        if (llvm::all_of(cone->inputs, [&](Value v) {
              return isScalar(v) || llvm::is_contained(fused.getInputs(), v);
            })) {
          reader = fused;
          break;
        }
      }
      if (!reader)
        continue;
      // The GEMM moves after the reader: nothing between may read its
      // result, and the reader must not depend on it.
      if (gemm->isBeforeInBlock(reader)) {
        bool blocked = false;
        for (Operation *user : gemm->getUsers())
          if (Operation *top = gemm->getBlock()->findAncestorOpInBlock(*user);
              top && !reader->isBeforeInBlock(top))
            blocked = true;
        if (blocked)
          continue;
      }
      OpBuilder b(reader);
      auto copy = kernel::FusedOp::create(b, producer.getLoc(), inner.getType(),
                                          cone->inputs.getArrayRef(),
                                          reader.getName(), "elementwise");
      Block &body = copy.getBodyBlock();
      IRMapping map;
      for (auto [v, arg] : llvm::zip(cone->inputs, body.getArguments()))
        map.map(cone->innerOf.lookup(v), arg);
      OpBuilder innerBuilder = OpBuilder::atBlockEnd(&body);
      for (Operation *op : cone->ops) {
        Operation *clone = innerBuilder.clone(*op, map);
        // The amax the forward measured is the step's; this one repeats it
        // and is read by nothing (nor counted twice in the FP8 statistics).
        if (isa<fp8::QuantizeOp>(clone)) {
          clone->removeAttr("amax_reduce");
          clone->setAttr("recomputed", b.getUnitAttr());
        }
      }
      kernel::YieldOp::create(innerBuilder, producer.getLoc(),
                              map.lookup(inner));
      copy.setKindAttr(b.getStringAttr(fusion::kindForBody(body)));
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
      save.erase();
      fusion::dropUnusedResults(producer);
    }
  }
};

} // namespace
