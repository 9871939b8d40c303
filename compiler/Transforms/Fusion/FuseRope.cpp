// octet-fuse-rope: RoPE of q and k with the head split in one kernel after
// the QKV GEMM; the inverse in the backward's dq/dk/dv kernel.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

namespace octet {
#define GEN_PASS_DEF_OCTETFUSEROPE
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

bool isInverse(kernel::FusedOp fused) {
  for (auto rope : fused.getBodyBlock().getOps<graph::RopeOp>())
    return rope.getInverse();
  return false;
}

struct FuseRope : public octet::impl::OctetFuseRopeBase<FuseRope> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      // Group the RoPE kernels of one attention: same layer, same section,
      // same direction.
      std::map<std::tuple<int64_t, std::string, bool>,
               SmallVector<kernel::FusedOp>>
          groups;
      for (kernel::FusedOp fused : fusion::fusedOps(func))
        if (fusion::bodyOnly(fused, {"graph.rope"})) {
          auto section = fused->getAttrOfType<StringAttr>("section");
          groups[{fusion::layerOf(fused),
                  section ? section.str() : std::string(),
                  isInverse(fused)}]
              .push_back(fused);
        }
      for (auto &[key, ropes] : groups) {
        std::string name =
            (std::get<0>(key) >= 0
                 ? "layers." + std::to_string(std::get<0>(key)) + "."
                 : std::string()) +
            (std::get<2>(key) ? "rope_qkv_bwd" : "rope_qk");
        kernel::FusedOp fused = ropes.front();
        for (kernel::FusedOp next : ArrayRef(ropes).drop_front())
          if (auto merged = fusion::mergeFused(fused, next, name))
            fused = merged;
        // The head split: read the GEMM's output through its views.
        for (Value input : fused.getInputs())
          if (Operation *def = input.getDefiningOp(); fusion::isView(def)) {
            Operation *root = def;
            while (fusion::isView(root))
              root = root->getOperand(0).getDefiningOp();
            if (root && isa<kernel::GemmOp>(root)) {
              Operation *next = fused->getNextNode();
              if (fusion::pullViewsFrom(fused, root))
                fused = cast<kernel::FusedOp>(next->getPrevNode());
              break;
            }
          }
        fused.setName(name);
        if (std::get<2>(key))
          // Backward: the dq/dk/dv concatenation for the QKV GEMMs and its
          // FP8 cast.
          fusion::absorbConsumers(fused, {"graph.concat", "fp8.quantize",
                                          "fp8.amax", "graph.cast"});
      }
    }
  }
};

} // namespace
