#include "tools/octet/FusionStages.h"
#include "tools/octet/TrainingOptions.h"

#include "compiler/Transforms/Fusion/Passes.h"
#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/Precision.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace octet {

static LogicalResult run(ModuleOp module,
                         llvm::function_ref<void(PassManager &)> build) {
  PassManager pm(module.getContext());
  build(pm);
  return pm.run(module);
}

LogicalResult runFuseQkvStage(ModuleOp module, const spec::Spec &) {
  return run(module, [](PassManager &pm) {
    pm.addPass(createOctetFuseQkv());
    pm.addPass(createCSEPass());
  });
}

LogicalResult runActivationsStage(ModuleOp module, const spec::Spec &spec) {
  OctetBf16ActivationsOptions options;
  options.activationDtype = spec.train().precision().activation_dtype();
  return run(module, [&](PassManager &pm) {
    pm.addPass(createOctetBf16Activations(options));
  });
}

LogicalResult runPrecisionStage(ModuleOp module, const spec::Spec &spec) {
  const spec::Precision &p = spec.train().precision();
  if (p.recipe() == "bf16" || p.recipe().empty())
    return success();
  OctetPrecisionOptions options = precisionOptionsFromSpec(spec);
  return run(module, [&](PassManager &pm) {
    pm.addPass(createOctetPrecision(options));
    pm.addPass(createOctetLayout());
    pm.addPass(createCanonicalizerPass());
  });
}

LogicalResult runKernelStage(ModuleOp module, const spec::Spec &spec) {
  OctetLowerToKernelOptions options;
  options.dataParallel = std::max<int64_t>(1, spec.train().parallel().data());
  return run(module, [&](PassManager &pm) {
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createOctetLowerToKernel(options));
  });
}

LogicalResult runFusedStage(ModuleOp module, const spec::Spec &) {
  return run(module, [](PassManager &pm) { addKernelFusionPasses(pm); });
}

} // namespace octet
