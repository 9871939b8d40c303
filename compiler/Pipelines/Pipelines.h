#ifndef OCTET_COMPILER_PIPELINES_PIPELINES_H
#define OCTET_COMPILER_PIPELINES_PIPELINES_H

// The compiler's pipelines as library functions, so `octet compile`,
// `octet train` and `octet-opt --octet-train-pipeline` run the same passes.

#include "compiler/Transforms/Precision.h"

#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <string>

namespace octet {

// The TrainSpec's optimizer settings, as the autodiff pass takes them.
struct TrainingPipelineOptions {
  double lr = 3.0e-4;
  double minLrRatio = 0.1;
  int64_t warmupSteps = 0;
  int64_t totalSteps = 1000;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1.0e-8;
  double weightDecay = 0.1;
  bool decayEmbeddings = false;
  double gradClip = 1.0;
  // global_batch_size / (micro_batch_size × data parallel).
  int64_t microbatches = 1;
  bool recompute = true;
  // Element type of activations and activation gradients ("bf16" or
  // "f32"); variables, parameter gradients and scalars stay F32 either way.
  std::string activationDtype = "bf16";
  // FP8 GEMMs (octet-precision, then octet-layout) after autodiff; off for
  // the bf16 recipe.
  bool fp8 = false;
  OctetPrecisionOptions precision;
};

// Forward graph → train step (autodiff and CSE, BF16 activations unless
// options.activationDtype is "f32", then the FP8 passes when options.fp8).
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const TrainingPipelineOptions &options);

} // namespace octet

#endif
