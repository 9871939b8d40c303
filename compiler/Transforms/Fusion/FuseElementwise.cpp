// octet-fuse-elementwise: the remaining elementwise kernels join a
// neighbouring kernel; scale bookkeeping becomes one multi-tensor kernel.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

namespace octet {
#define GEN_PASS_DEF_OCTETFUSEELEMENTWISE
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

// Ops whose element i needs only element i of the operands (amax's atomic
// aside), so they can run inside whatever kernel visits those elements.
constexpr StringRef kElementwise[] = {
    "graph.add",  "graph.mul",       "graph.cast",     "graph.silu",
    "graph.gelu", "graph.swiglu",    "graph.silu_grad", "graph.gelu_grad",
    "graph.swiglu_grad", "graph.rope", "graph.reshape", "graph.slice",
    "graph.concat", "fp8.quantize",  "fp8.dequantize", "fp8.amax",
    "fp8.transpose"};

// A scale derived from a whole tensor's amax cannot share the kernel that
// computes the amax; these run once all amaxes are known.
constexpr StringRef kScaleOps[] = {"fp8.scale_update", "fp8.compute_scale"};

// Blockwise quantization is a kernel of its own (a block of threads per
// tile, WholeOpKernel.cpp): elementwise work stays out of it.
bool blockQuantizes(kernel::FusedOp fused) {
  return fusion::bodyHas(fused, {"fp8.block_quantize"});
}

bool readsState(kernel::FusedOp fused) {
  // The multi-tensor kernels stay as the AdamW pass built them.
  return fused.getKind() == "multi_tensor";
}

struct FuseElementwise
    : public octet::impl::OctetFuseElementwiseBase<FuseElementwise> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      fusion::normalizeStateAccess(func);
      batchScaleUpdates(func);
      absorbTransposes(func);
      joinBlockQuantizes(func);
      computeStridedSlices(func);
      for (bool changed = true; changed;) {
        changed = false;
        for (kernel::FusedOp fused : fusion::fusedOps(func)) {
          if (readsState(fused) || !fusion::bodyOnly(fused, kElementwise))
            continue;
          if (foldIntoNeighbour(fused)) {
            changed = true;
            break;
          }
        }
      }
    }
  }

  // The earlier passes have taken what slices they fuse (RoPE reads q and k
  // from the QKV GEMM's output) into their kernels. A strided slice left
  // between kernels (the gate and up halves of each row of the gate/up
  // GEMM, v for attention, the halves saved for the backward pass) is no
  // view a kernel can read in place (the memory plan rejects it): it gets a
  // kernel of its own, which the loop below folds into a neighbour where it
  // can.
  void computeStridedSlices(func::FuncOp func) {
    SmallVector<graph::SliceOp> strided;
    for (auto slice : func.getBody().front().getOps<graph::SliceOp>())
      if (!fusion::isContiguousSlice(slice))
        strided.push_back(slice);
    OpBuilder b(func.getContext());
    for (graph::SliceOp slice : strided) {
      int64_t layer = fusion::layerOf(slice);
      fusion::wrapInFused(
          b, slice,
          (layer >= 0 ? "layers." + std::to_string(layer) + "." : "") +
              std::string("slice"));
    }
  }

  bool foldIntoNeighbour(kernel::FusedOp fused) {
    // Into the kernel that produces an input. Pulling views in rebuilds
    // `fused`, so iterate over a copy of its inputs.
    SmallVector<Value> inputs(fused.getInputs());
    for (Value input : inputs) {
      kernel::FusedOp producer = fusion::producerFused(input);
      if (!producer || producer == fused || readsState(producer) ||
          blockQuantizes(producer) || fusion::bodyHas(producer, kScaleOps))
        continue;
      Operation *next = fused->getNextNode();
      fusion::pullViewsFrom(fused, producer);
      auto rebuilt = cast<kernel::FusedOp>(next->getPrevNode());
      if (fusion::mergeFused(producer, rebuilt, producer.getName()))
        return true;
      fused = rebuilt;
    }
    // Else into the one kernel that reads all its results.
    kernel::FusedOp consumer;
    for (Operation *user : fused->getUsers()) {
      auto c = dyn_cast<kernel::FusedOp>(user);
      if (!c || (consumer && consumer != c))
        return false;
      consumer = c;
    }
    if (!consumer || readsState(consumer) || blockQuantizes(consumer) ||
        fusion::bodyHas(consumer, kScaleOps))
      return false;
    return static_cast<bool>(
        fusion::mergeFused(fused, consumer, consumer.getName()));
  }

  // The K-major copy of an FP8 tensor is written by the kernel that
  // quantizes it, while the values are in registers.
  void absorbTransposes(func::FuncOp func) {
    for (bool changed = true; changed;) {
      changed = false;
      for (auto copy : func.getBody().front().getOps<kernel::CopyOp>()) {
        auto producer = copy.getInput().getDefiningOp<kernel::FusedOp>();
        if (producer && !readsState(producer) &&
            fusion::absorbTransposeCopy(producer, copy)) {
          changed = true;
          break;
        }
      }
    }
  }

  // Quantizations of one tensor (a gradient's 1x128 tiles for dgrad and
  // its 128x1 tiles, K-major, for wgrad) become one kernel, which reads the
  // tensor once for both.
  void joinBlockQuantizes(func::FuncOp func) {
    auto quantizesOnly = [](kernel::FusedOp fused) {
      return fused.getInputs().size() == 1 &&
             fusion::bodyOnly(fused, {"fp8.block_quantize", "fp8.transpose"});
    };
    for (bool changed = true; changed;) {
      changed = false;
      SmallVector<kernel::FusedOp> kernels = fusion::fusedOps(func);
      for (auto [i, first] : llvm::enumerate(kernels)) {
        if (!quantizesOnly(first))
          continue;
        for (kernel::FusedOp second : ArrayRef(kernels).drop_front(i + 1)) {
          if (!quantizesOnly(second) ||
              second.getInputs()[0] != first.getInputs()[0])
            continue;
          if (fusion::mergeFused(first, second, second.getName())) {
            changed = true;
            break;
          }
        }
        if (changed)
          break;
      }
    }
  }

  void batchScaleUpdates(func::FuncOp func) {
    SmallVector<kernel::FusedOp> updates;
    for (kernel::FusedOp fused : fusion::fusedOps(func))
      if (fusion::bodyOnly(fused, kScaleOps))
        updates.push_back(fused);
    if (updates.size() < 2)
      return;
    kernel::FusedOp batch = updates.front();
    for (kernel::FusedOp next : ArrayRef(updates).drop_front()) {
      kernel::FusedOp merged =
          fusion::mergeFused(batch, next, "fp8.scale_updates", "multi_tensor");
      if (merged) {
        merged->setAttr("layer", OpBuilder(merged).getI64IntegerAttr(-1));
        batch = merged;
      } else {
        batch = next;
      }
    }
  }
};

} // namespace
