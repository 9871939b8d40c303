#include "tools/octet/TrainingOptions.h"

#include "mlir/Pass/PassManager.h"

namespace octet {

TrainingPipelineOptions trainingOptionsFromSpec(const spec::Spec &spec,
                                                int64_t steps) {
  const spec::TrainSpec &train = spec.train();
  const spec::AdamW &adam = train.optimizer();
  TrainingPipelineOptions o;
  o.lr = adam.lr();
  o.minLrRatio = adam.min_lr_ratio();
  o.warmupSteps = adam.warmup_steps();
  o.totalSteps = steps > 0 ? steps : train.steps();
  // A warmup longer than the run would never reach the peak.
  if (o.warmupSteps > o.totalSteps)
    o.warmupSteps = o.totalSteps / 10;
  o.beta1 = adam.beta1();
  o.beta2 = adam.beta2();
  o.eps = adam.eps();
  o.weightDecay = adam.weight_decay();
  o.gradClip = train.grad_clip();
  int64_t perStep = train.micro_batch_size() *
                    std::max<int64_t>(1, train.parallel().data());
  o.microbatches = std::max<int64_t>(1, train.global_batch_size() / perStep);
  return o;
}

mlir::LogicalResult runAutodiffStage(mlir::ModuleOp module,
                                     const spec::Spec &spec) {
  mlir::PassManager pm(module.getContext());
  buildTrainingPipeline(pm, trainingOptionsFromSpec(spec));
  return pm.run(module);
}

} // namespace octet
