// octet-overwrite-logits: the cross-entropy gradient is written over the
// logits it reads when nothing reads the logits afterwards, so the two
// [tokens, vocabulary] tensors, the largest of the step, need one buffer.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

namespace octet {
#define GEN_PASS_DEF_OCTETOVERWRITELOGITS
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

// The input of `fused` its result may be written over, if any: the body is
// one graph.cross_entropy_grad (the only lowering that reads each element
// before writing it; WholeOpKernel) yielding its gradient, the logits are
// the result of an op of the same block (not a program input or a
// variable, whose bytes are not the step's to reuse), and every op that
// reads them, through any view, runs before this kernel.
std::optional<unsigned> overwritableLogits(kernel::FusedOp fused) {
  Block &body = fused.getBodyBlock();
  if (fused->getNumResults() != 1 ||
      !fusion::bodyOnly(fused, {"graph.cross_entropy_grad"}) ||
      body.getOperations().size() != 2)
    return std::nullopt;
  auto grad = cast<graph::CrossEntropyGradOp>(body.front());
  auto arg = dyn_cast<BlockArgument>(grad.getLogits());
  if (!arg || body.getTerminator()->getOperand(0) != grad.getResult())
    return std::nullopt;
  Value logits = fused.getInputs()[arg.getArgNumber()];
  auto in = cast<RankedTensorType>(logits.getType());
  auto out = cast<RankedTensorType>(fused.getResult(0).getType());
  if (in.getNumElements() * in.getElementTypeBitWidth() !=
      out.getNumElements() * out.getElementTypeBitWidth())
    return std::nullopt;
  Value root = fusion::throughViews(logits);
  Operation *producer = root.getDefiningOp();
  Block *block = fused->getBlock();
  if (!producer || producer->getBlock() != block ||
      isa<graph::LoadOp>(producer))
    return std::nullopt;
  for (Operation *reader : fusion::readersThroughViews(root)) {
    Operation *top = block->findAncestorOpInBlock(*reader);
    if (!top || (top != fused.getOperation() && !top->isBeforeInBlock(fused)))
      return std::nullopt;
  }
  // A second use of the logits by this kernel would read them after the
  // gradient overwrote them.
  if (llvm::count(fused.getInputs(), logits) != 1)
    return std::nullopt;
  return arg.getArgNumber();
}

struct OverwriteLogitsPass
    : public octet::impl::OctetOverwriteLogitsBase<OverwriteLogitsPass> {
  void runOnOperation() override {
    getOperation().walk([](kernel::FusedOp fused) {
      if (std::optional<unsigned> input = overwritableLogits(fused))
        fused.setOverwrites(ArrayRef<int64_t>{int64_t(*input)});
    });
  }
};

} // namespace
