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
  o.activationDtype = train.precision().activation_dtype();
  const std::string &recipe = train.precision().recipe();
  o.fp8 = !recipe.empty() && recipe != "bf16";
  if (o.fp8)
    o.precision = precisionOptionsFromSpec(spec);
  return o;
}

OctetPrecisionOptions precisionOptionsFromSpec(const spec::Spec &spec) {
  const spec::Precision &p = spec.train().precision();
  OctetPrecisionOptions options;
  options.recipe = p.recipe();
  if (!p.format().empty())
    options.format = p.format();
  if (p.has_amax_history_len())
    options.amaxHistoryLen = p.amax_history_len();
  if (!p.amax_algorithm().empty())
    options.amaxAlgorithm = p.amax_algorithm();
  if (p.has_margin())
    options.margin = p.margin();
  options.powerOfTwoScales = p.power_of_two_scales();
  options.firstLayersBf16 = p.first_last_layers_bf16().first();
  options.lastLayersBf16 = p.first_last_layers_bf16().last();
  for (const std::string &pattern : p.bf16_patterns())
    options.bf16Patterns.push_back(pattern);
  return options;
}

mlir::LogicalResult runAutodiffStage(mlir::ModuleOp module,
                                     const spec::Spec &spec) {
  mlir::PassManager pm(module.getContext());
  TrainingPipelineOptions options = trainingOptionsFromSpec(spec);
  // `octet compile` runs BF16 activations and precision as stages of their
  // own, after fuse-qkv, which matches weights as they are loaded.
  options.fp8 = false;
  options.activationDtype = "f32";
  buildTrainingPipeline(pm, options);
  return pm.run(module);
}

} // namespace octet
