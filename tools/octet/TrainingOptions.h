#ifndef OCTET_TOOLS_OCTET_TRAININGOPTIONS_H
#define OCTET_TOOLS_OCTET_TRAININGOPTIONS_H

// The TrainSpec as the training pipeline's options, shared by `octet
// compile --dump-ir=autodiff` and `octet train`.

#include "compiler/Pipelines/Pipelines.h"
#include "spec/spec.pb.h"

#include "mlir/IR/BuiltinOps.h"

namespace octet {

// From a resolved spec (defaults applied). `steps` > 0 overrides
// train.steps, and the cosine schedule ends there.
TrainingPipelineOptions trainingOptionsFromSpec(const spec::Spec &spec,
                                                int64_t steps = 0);

// The spec's precision block as octet-precision's options. Meaningful when
// the recipe is not "bf16" (nor empty).
OctetPrecisionOptions precisionOptionsFromSpec(const spec::Spec &spec);

// The `autodiff` stage of `octet compile`: the training pipeline with the
// spec's options.
mlir::LogicalResult runAutodiffStage(mlir::ModuleOp module,
                                     const spec::Spec &spec);

} // namespace octet

#endif
