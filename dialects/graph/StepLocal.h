#ifndef OCTET_DIALECTS_GRAPH_STEPLOCAL_H
#define OCTET_DIALECTS_GRAPH_STEPLOCAL_H

// A graph.variable marked `step_local` holds nothing from one step to the
// next: the step's first run of @train_microbatch writes it before anything
// reads it (a wgrad GEMM marked first_microbatch_overwrites), and
// @optimizer_step is its last reader. The memory plan gives it a slot only
// for that window, shared with activations outside it; the interpreter
// drops its value when @optimizer_step returns, and a read before the next
// write is an error there.

#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringRef.h"

namespace octet::graph {

inline constexpr llvm::StringLiteral kStepLocalAttr = "step_local";

inline bool isStepLocal(mlir::Operation *variable) {
  return variable && variable->hasAttr(kStepLocalAttr);
}

} // namespace octet::graph

#endif
