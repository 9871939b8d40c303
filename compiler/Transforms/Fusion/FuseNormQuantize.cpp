// octet-fuse-norm-quantize: residual add + norm + FP8 quantize + amax +
// transposed copy as one kernel, and the matching backward.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

namespace octet {
#define GEN_PASS_DEF_OCTETFUSENORMQUANTIZE
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

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
            return fusion::absorbConsumers(
                norm, {"graph.add", "fp8.quantize", "fp8.amax", "graph.cast"});
          });
    }
  }
};

} // namespace
