#ifndef OCTET_COMPILER_REGISTRATION_H
#define OCTET_COMPILER_REGISTRATION_H

// One place that knows every dialect and pass the compiler uses, so that
// `octet compile` and `octet-opt` can never disagree about what they accept.

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace octet {

// Our dialects and the upstream ones the pipeline passes through (func,
// arith, tensor, scf, math, memref, vector, gpu, nvgpu, nvvm, llvm).
void registerCompilerDialects(mlir::DialectRegistry &registry);

// Our passes, the upstream ones our pipelines run, and the pipelines
// themselves (compiler/Pipelines).
void registerCompilerPasses();

} // namespace octet

#endif
