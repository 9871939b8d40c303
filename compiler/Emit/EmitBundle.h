#ifndef OCTET_COMPILER_EMIT_EMITBUNDLE_H
#define OCTET_COMPILER_EMIT_EMITBUNDLE_H

// The kernel-dialect train step and its memory plan as a .octet bundle
// (runtime/bundle/bundle.proto): parameter table, state tensors, the plan's
// slots, GEMM descriptors from kernel.gemm, and one program per function
// (train microbatch, optimizer step, eval, init) for every rank, each step
// bound to plan slots.
//
// Kernels that codegen does not cover yet are listed with missing_code set;
// the runtime refuses such a bundle and names them. Everything is emitted in
// the module's op order, so the same module gives the same bundle.

#include "compiler/Plan/MemoryPlan.h"
#include "runtime/bundle/bundle.pb.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <utility>
#include <vector>

namespace octet::emit {

struct BuildSource {
  std::string specText;
  // "pbtxt" or "hf-config".
  std::string specFormat;
  std::string trainSpecText;
  std::string modelName;
  // Options that change the output, in the compiler's order.
  std::vector<std::pair<std::string, std::string>> options;
  // Sizes and the training schedule, from the resolved spec.
  bundle::Schedule schedule;
};

mlir::FailureOr<bundle::Bundle> buildBundle(mlir::ModuleOp module,
                                            const plan::MemoryPlan &plan,
                                            const BuildSource &source);

} // namespace octet::emit

#endif
