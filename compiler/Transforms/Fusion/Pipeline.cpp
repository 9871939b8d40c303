#include "compiler/Transforms/Fusion/Passes.h"

#include "mlir/Transforms/Passes.h"

namespace octet {

void addKernelFusionPasses(mlir::OpPassManager &pm,
                           const KernelFusionOptions &options) {
  // The LM head first, while its GEMMs and cross-entropy kernels are still
  // apart; then epilogues: the gradient-accumulation adds they take must not
  // be folded into row kernels by the later passes.
  if (options.chunkedLmHead)
    pm.addPass(createOctetFuseLmHead());
  pm.addPass(createOctetFuseEpilogue());
  pm.addPass(createOctetFuseRope());
  pm.addPass(createOctetFuseNormQuantize());
  pm.addPass(createOctetFuseSwigluQuantize());
  pm.addPass(createOctetFuseAdamW());
  pm.addPass(createOctetFuseElementwise());
  pm.addPass(mlir::createCanonicalizerPass());
}

} // namespace octet
