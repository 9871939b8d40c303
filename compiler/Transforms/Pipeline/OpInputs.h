#ifndef OCTET_COMPILER_TRANSFORMS_PIPELINE_OPINPUTS_H
#define OCTET_COMPILER_TRANSFORMS_PIPELINE_OPINPUTS_H

// What the pipeline passes say of an op in their errors, and everything an
// op reads: the two cuts (stages, and a backward's input and weight
// gradients) move ops between functions by those values.

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace octet::pipeline {

// "'kernel.gemm' of layers.1.attn.wo", or the op's name attribute.
std::string describeOp(mlir::Operation *op);

// Values read inside an op's regions but defined outside them.
llvm::SmallVector<mlir::Value> capturedValues(mlir::Operation *op);

// Its operands, then its captured values.
llvm::SmallVector<mlir::Value> inputsOf(mlir::Operation *op);

} // namespace octet::pipeline

#endif
