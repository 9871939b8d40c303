#ifndef OCTET_TOOLS_OCTET_FUSIONSTAGES_H
#define OCTET_TOOLS_OCTET_FUSIONSTAGES_H

// The `octet compile` stages from the train step to fused kernels:
// fuse-qkv, activations, precision (+ layout), kernel (lowering), fused.

#include "spec/spec.pb.h"

#include "mlir/IR/BuiltinOps.h"

namespace octet {

mlir::LogicalResult runFuseQkvStage(mlir::ModuleOp module,
                                    const spec::Spec &spec);
// BF16 activations (train.precision.activation_dtype), after fuse-qkv.
mlir::LogicalResult runActivationsStage(mlir::ModuleOp module,
                                        const spec::Spec &spec);
// octet-precision with the spec's recipe, then octet-layout.
mlir::LogicalResult runPrecisionStage(mlir::ModuleOp module,
                                      const spec::Spec &spec);
// octet-lower-to-kernel with the spec's data-parallel degree.
mlir::LogicalResult runKernelStage(mlir::ModuleOp module,
                                   const spec::Spec &spec);
mlir::LogicalResult runFusedStage(mlir::ModuleOp module,
                                  const spec::Spec &spec);

} // namespace octet

#endif
