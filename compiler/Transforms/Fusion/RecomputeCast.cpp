// octet-recompute-cast: under current scaling, a cast kernel recomputes the
// tensor it casts from the producer's inputs where that moves fewer bytes
// than the producer writing the tensor and the cast reading it back.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace octet {
#define GEN_PASS_DEF_OCTETRECOMPUTECAST
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

// Ops a cast kernel may evaluate again: elementwise ones and the row-local
// norms. Not the norm gradients (their weight gradients are column sums
// over all rows) nor anything that writes state.
constexpr StringRef kRecomputable[] = {
    "graph.add",       "graph.mul",       "graph.cast",      "graph.silu",
    "graph.gelu",      "graph.swiglu",    "graph.silu_grad", "graph.gelu_grad",
    "graph.swiglu_grad", "graph.rope",    "graph.reshape",   "graph.slice",
    "graph.concat",    "graph.rms_norm",  "graph.layer_norm"};

int64_t bytesOf(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getNumElements() *
         std::max<int64_t>(1, t.getElementTypeBitWidth() / 8);
}


// The kernel's input the quantize reads, through views, if the kernel
// does nothing but cast it (and transpose the result).
std::optional<unsigned> castOnlyInput(kernel::FusedOp fused) {
  if (fused.getKind() == "multi_tensor" ||
      !fusion::bodyOnly(fused,
                        {"fp8.quantize", "fp8.transpose", "graph.reshape"}))
    return std::nullopt;
  auto quantizes = fused.getBodyBlock().getOps<fp8::QuantizeOp>();
  if (std::distance(quantizes.begin(), quantizes.end()) != 1)
    return std::nullopt;
  Value source = (*quantizes.begin()).getInput();
  while (auto reshape = source.getDefiningOp<graph::ReshapeOp>())
    source = reshape.getInput();
  auto arg = dyn_cast<BlockArgument>(source);
  if (!arg)
    return std::nullopt;
  return arg.getArgNumber();
}

struct RecomputeCast
    : public octet::impl::OctetRecomputeCastBase<RecomputeCast> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      for (kernel::FusedOp castKernel : fusion::fusedOps(func))
        recompute(castKernel);
    }
  }

  void recompute(kernel::FusedOp castKernel) {
    std::optional<unsigned> index = castOnlyInput(castKernel);
    if (!index)
      return;
    auto x = dyn_cast<OpResult>(castKernel.getInputs()[*index]);
    auto producer =
        x ? dyn_cast<kernel::FusedOp>(x.getOwner()) : kernel::FusedOp();
    // Only the cast reads the tensor: else it is written anyway, and the
    // recomputation would only add reads.
    if (!producer || producer.getKind() == "multi_tensor" || !x.hasOneUse())
      return;
    Value inner = producer.getBodyBlock().getTerminator()->getOperand(
        x.getResultNumber());
    // The cast kernel reads the producer's inputs and results as they are.
    std::optional<fusion::RecomputeCone> cone = fusion::recomputeCone(
        producer, inner, kRecomputable, [](Value outer) { return outer; });
    if (!cone)
      return;
    // Written once and read once (2 · x) against the cone's inputs read
    // again.
    int64_t again = 0;
    for (Value v : cone->inputs)
      again += bytesOf(v);
    if (again >= 2 * bytesOf(x))
      return;

    // The cone as a kernel of its own right before the cast, merged into it.
    OpBuilder b(castKernel);
    auto copy = kernel::FusedOp::create(b, producer.getLoc(), x.getType(),
                                        cone->inputs.getArrayRef(),
                                        castKernel.getName(), "elementwise");
    Block &body = copy.getBodyBlock();
    IRMapping map;
    for (auto [outer, arg] : llvm::zip(cone->inputs, body.getArguments()))
      map.map(cone->innerOf.lookup(outer), arg);
    OpBuilder innerBuilder = OpBuilder::atBlockEnd(&body);
    for (Operation *op : cone->ops)
      innerBuilder.clone(*op, map);
    kernel::YieldOp::create(innerBuilder, producer.getLoc(), map.lookup(inner));
    copy.setKindAttr(b.getStringAttr(fusion::kindForBody(body)));
    for (StringRef attr : {"layer", "section"})
      if (Attribute a = castKernel->getAttr(attr))
        copy->setAttr(attr, a);
    castKernel->setOperand(*index, copy.getResult(0));
    if (!fusion::mergeFused(copy, castKernel, castKernel.getName())) {
      // Cannot happen (the copy sits right before the cast), but leave the
      // step as it was rather than half changed.
      castKernel->setOperand(*index, x);
      copy.erase();
      return;
    }
    fusion::dropUnusedResults(producer);
  }
};

} // namespace
