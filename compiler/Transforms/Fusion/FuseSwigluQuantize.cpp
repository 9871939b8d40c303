// octet-fuse-swiglu-quantize: SwiGLU + FP8 quantize (+ transposed copy) as
// one kernel, and its backward.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

#include "dialects/fp8/Fp8Dialect.h"

namespace octet {
#define GEN_PASS_DEF_OCTETFUSESWIGLUQUANTIZE
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

constexpr int64_t kTileSide = 128;

bool tileMultiple(Type type) {
  auto shape = cast<RankedTensorType>(type).getShape();
  return shape.back() % kTileSide == 0;
}

// Blockwise: whether the block-quantize tile kernel can compute the kernel's
// one result itself from the kernel's inputs (GPU codegen evaluates SwiGLU,
// its gradient, reshapes and joins of pieces 128 wide on each 8 x 8 square
// of a 128 x 128 tile) and every reader of it only block-quantizes it, so
// that the BF16 tensor need not be stored and read back. Inputs that are
// strided slices (the forward's gate and up halves of the GEMM output) are
// left alone: they are stored by a kernel of their own for the backward
// anyway, so the tiles would read as many bytes as they save.
bool quantizedInTiles(kernel::FusedOp fused) {
  if (fused->getNumResults() != 1)
    return false;
  for (Value input : fused.getInputs())
    if (auto slice = input.getDefiningOp<graph::SliceOp>();
        slice && !fusion::isContiguousSlice(slice))
      return false;
  for (Operation &op : fused.getBodyBlock().without_terminator()) {
    if (auto concat = dyn_cast<graph::ConcatOp>(op)) {
      if (concat.getDim() + 1 !=
              cast<RankedTensorType>(concat.getType()).getRank() ||
          !llvm::all_of(concat.getInputs(), [](Value piece) {
            return tileMultiple(piece.getType());
          }))
        return false;
    } else if (auto reshape = dyn_cast<graph::ReshapeOp>(op)) {
      if (cast<RankedTensorType>(reshape.getInput().getType()).getShape().back() !=
          cast<RankedTensorType>(reshape.getType()).getShape().back())
        return false;
    } else if (!isa<graph::SwigluOp, graph::SwigluGradOp>(op)) {
      return false;
    }
  }
  return fusion::onlyQuantizedInTiles(fused->getResult(0));
}

struct FuseSwigluQuantize
    : public octet::impl::OctetFuseSwigluQuantizeBase<FuseSwigluQuantize> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      fusion::forEachFused(
          func,
          [](kernel::FusedOp fused) {
            return fusion::bodyHas(fused,
                                   {"graph.swiglu", "graph.swiglu_grad"});
          },
          [](kernel::FusedOp fused) {
            // Backward: d_gate and d_up are concatenated for the fused
            // gate/up GEMMs, then cast to FP8.
            fused = fusion::absorbConsumers(
                fused,
                {"fp8.quantize", "fp8.amax", "graph.concat", "graph.cast"});
            if (!quantizedInTiles(fused))
              return fused;
            return fusion::absorbConsumers(
                fused, {"fp8.block_quantize", "fp8.transpose"});
          });
    }
  }
};

} // namespace
