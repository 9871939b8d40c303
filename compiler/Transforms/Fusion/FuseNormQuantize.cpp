// octet-fuse-norm-quantize: residual add + norm + FP8 quantize + amax +
// transposed copy as one kernel (blockwise: the norm's block
// quantizations), and the matching backward.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

#include "dialects/fp8/Fp8Dialect.h"

namespace octet {
#define GEN_PASS_DEF_OCTETFUSENORMQUANTIZE
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

// Blockwise: the kernels that only block-quantize an RMSNorm's output join
// the norm's kernel, so that the BF16 output is neither written nor read
// back. Codegen runs the row kernel (it keeps each row's 1/rms) and then
// the 128 x 128 tile kernel, which evaluates the norm on its tiles from the
// norm's input and those factors. That input must stay in memory: a kernel
// input, or a result read elsewhere (the residual stream). Kernels that
// quantize another of the norm kernel's results are left alone.
kernel::FusedOp quantizeNormInTiles(kernel::FusedOp norm) {
  graph::RMSNormOp rms;
  for (Operation &op : norm.getBodyBlock().without_terminator()) {
    if (isa<graph::RMSNormGradOp, graph::LayerNormOp, graph::LayerNormGradOp,
            fp8::QuantizeOp>(op))
      return norm;
    if (auto r = dyn_cast<graph::RMSNormOp>(op)) {
      if (rms)
        return norm;
      rms = r;
    }
  }
  if (!rms)
    return norm;
  auto yield = cast<kernel::YieldOp>(norm.getBodyBlock().getTerminator());
  auto resultOf = [&](Value inner) -> Value {
    for (auto [i, v] : llvm::enumerate(yield.getValues()))
      if (v == inner)
        return norm->getResult(i);
    return nullptr;
  };
  Value input = rms.getInput();
  Value output = resultOf(rms.getResult());
  if (!output || (!isa<BlockArgument>(input) && !resultOf(input)) ||
      !fusion::onlyQuantizedInTiles(output))
    return norm;
  for (Value result : norm->getResults())
    if (result != output &&
        llvm::any_of(result.getUsers(), [](Operation *user) {
          auto consumer = dyn_cast<kernel::FusedOp>(user);
          return consumer &&
                 fusion::bodyOnly(consumer, {"fp8.block_quantize"});
        }))
      return norm;
  norm = fusion::absorbConsumers(norm, {"fp8.block_quantize", "fp8.transpose"});
  // Each absorbed kernel brought its own view of the output: one view, so
  // that codegen sees one tensor and reads it once for every quantization.
  SmallVector<graph::ReshapeOp> views(
      norm.getBodyBlock().getOps<graph::ReshapeOp>());
  for (auto [i, view] : llvm::enumerate(views))
    for (graph::ReshapeOp earlier : ArrayRef(views).take_front(i))
      if (earlier && earlier.getInput() == view.getInput() &&
          earlier.getType() == view.getType()) {
        view.getResult().replaceAllUsesWith(earlier.getResult());
        view.erase();
        views[i] = nullptr;
        break;
      }
  return norm;
}

struct FuseNormQuantize
    : public octet::impl::OctetFuseNormQuantizeBase<FuseNormQuantize> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      fusion::normalizeStateAccess(func);
      fusion::forEachFused(
          func,
          [](kernel::FusedOp fused) {
            return fusion::bodyHas(fused, {"graph.rms_norm",
                                           "graph.layer_norm",
                                           "graph.rms_norm_grad",
                                           "graph.layer_norm_grad"});
          },
          [](kernel::FusedOp norm) {
            // The residual add that makes the norm's input (forward).
            for (Value input : norm.getInputs()) {
              auto add =
                  dyn_cast_or_null<kernel::FusedOp>(input.getDefiningOp());
              if (add && fusion::bodyOnly(add, {"graph.add"}))
                if (auto merged =
                        fusion::mergeFused(add, norm, norm.getName())) {
                  norm = merged;
                  break;
                }
            }
            // Residual-gradient add (backward), the weight-gradient
            // accumulation, and the FP8 cast with its amax and K-major copy.
            norm = fusion::absorbConsumers(
                norm, {"graph.add", "fp8.quantize", "fp8.amax", "graph.cast"});
            return quantizeNormInTiles(norm);
          });
    }
  }
};

} // namespace
