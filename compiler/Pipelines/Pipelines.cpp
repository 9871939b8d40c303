#include "compiler/Pipelines/Pipelines.h"

#include "compiler/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace octet {

void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const TrainingPipelineOptions &options) {
  OctetAutodiffOptions autodiff;
  autodiff.lr = options.lr;
  autodiff.minLrRatio = options.minLrRatio;
  autodiff.warmupSteps = options.warmupSteps;
  autodiff.totalSteps = options.totalSteps;
  autodiff.beta1 = options.beta1;
  autodiff.beta2 = options.beta2;
  autodiff.eps = options.eps;
  autodiff.weightDecay = options.weightDecay;
  autodiff.decayEmbeddings = options.decayEmbeddings;
  autodiff.gradClip = options.gradClip;
  autodiff.microbatches = options.microbatches;
  autodiff.recompute = options.recompute;
  pm.addPass(createOctetAutodiff(autodiff));
  pm.addPass(mlir::createCSEPass());
  OctetBf16ActivationsOptions activations;
  activations.activationDtype = options.activationDtype;
  pm.addPass(createOctetBf16Activations(activations));
  if (options.fp8) {
    pm.addPass(createOctetPrecision(options.precision));
    pm.addPass(createOctetLayout());
    pm.addPass(mlir::createCSEPass());
  }
}

void registerTrainingPipeline() {
  mlir::PassPipelineRegistration<>(
      "octet-train-pipeline",
      "forward graph to train step with the default training options",
      [](mlir::OpPassManager &pm) {
        buildTrainingPipeline(pm, TrainingPipelineOptions());
      });
}

} // namespace octet
