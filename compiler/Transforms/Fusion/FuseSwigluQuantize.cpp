// octet-fuse-swiglu-quantize: SwiGLU + FP8 quantize (+ transposed copy) as
// one kernel, and its backward.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

namespace octet {
#define GEN_PASS_DEF_OCTETFUSESWIGLUQUANTIZE
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

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
            return fusion::absorbConsumers(
                fused,
                {"fp8.quantize", "fp8.amax", "graph.concat", "graph.cast"});
          });
    }
  }
};

} // namespace
