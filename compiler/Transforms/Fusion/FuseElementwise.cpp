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

constexpr StringRef kViews[] = {"graph.slice", "graph.reshape"};

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
  using OctetFuseElementwiseBase::OctetFuseElementwiseBase;

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
      // A slice carries no layer; the kernels that read it do (attention
      // reads v's copy), and the copy is named after the first of them.
      // It gets no layer or section attribute: octet-split-stages places
      // such a view copy where it is read.
      Operation *reader = nullptr;
      for (Operation *user : fusion::readersThroughViews(slice.getResult()))
        if (user->hasAttr("layer") && (!reader || user->isBeforeInBlock(reader)))
          reader = user;
      int64_t layer = fusion::layerOf(reader ? reader : slice.getOperation());
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
      // A kernel that only copies a strided slice, or only recomputes a
      // forward value, names nothing the profile should show: the merged
      // kernel keeps the name of the work it does (the backward's SwiGLU
      // recomputed for w_down's wgrad joins the SwiGLU gradient's kernel).
      StringRef name = onlyViewsOrRecomputes(producer) ? rebuilt.getName()
                                                       : producer.getName();
      if (fusion::mergeFused(producer, rebuilt, name))
        return true;
      fused = rebuilt;
    }
    // Else into the one kernel that reads all its results.
    kernel::FusedOp consumer;
    for (Operation *user : fused->getUsers()) {
      auto c = dyn_cast<kernel::FusedOp>(user);
      if (!c || (consumer && consumer != c)) {
        consumer = nullptr;
        break;
      }
      consumer = c;
    }
    if (consumer && !readsState(consumer) && !blockQuantizes(consumer) &&
        !fusion::bodyHas(consumer, kScaleOps) &&
        fusion::mergeFused(fused, consumer, consumer.getName()))
      return true;
    return joinSibling(fused);
  }

  // Else with a later kernel that reads one of the same tensors and neither
  // of whose results depends on the other (the backward's SwiGLU recomputed
  // for w_down's wgrad and the SwiGLU gradient both read gate and up): one
  // kernel reads the shared input once and writes both kernels' results.
  // mergeFused finds no position for two kernels that depend on each other
  // through ops between them. RoPE's row kernels keep their own launch.
  // Only within one layer and section: the merged kernel runs where one of
  // the two did, so a backward kernel joined to a forward one would make
  // its results in the forward and keep them alive until the backward.
  bool joinSibling(kernel::FusedOp fused) {
    if (!joinSiblings || !plainElementwise(fused) ||
        !fused->hasAttr("section"))
      return false;
    for (Value input : fused.getInputs()) {
      auto type = dyn_cast<RankedTensorType>(input.getType());
      if (!type || type.getRank() == 0)
        continue;
      for (Operation *user : input.getUsers()) {
        auto sibling = dyn_cast<kernel::FusedOp>(user);
        if (!sibling || sibling == fused ||
            sibling->getBlock() != fused->getBlock() ||
            !fused->isBeforeInBlock(sibling) || !plainElementwise(sibling) ||
            sibling->getAttr("section") != fused->getAttr("section") ||
            fusion::layerOf(sibling) != fusion::layerOf(fused))
          continue;
        if (fusion::mergeFused(fused, sibling, sibling.getName()))
          return true;
      }
    }
    return false;
  }

  static bool onlyViewsOrRecomputes(kernel::FusedOp fused) {
    return llvm::all_of(
        fused.getBodyBlock().without_terminator(), [](Operation &op) {
          return llvm::is_contained(kViews, op.getName().getStringRef()) ||
                 op.hasAttr("recomputed");
        });
  }

  // A copy of a strided slice is left to join its readers: two copies
  // joined would make one kernel of pieces that feed different kernels
  // (attention reads v's copy, RoPE q and k).
  static bool plainElementwise(kernel::FusedOp fused) {
    return fused.getKind() == "elementwise" &&
           !fusion::bodyOnly(fused, kViews) &&
           fusion::bodyOnly(fused, kElementwise) &&
           !fusion::bodyHas(fused, {"graph.rope"}) && !blockQuantizes(fused) &&
           !fusion::bodyHas(fused, kScaleOps);
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
