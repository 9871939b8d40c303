//===- Launches.h - The launches codegen records on an op -------*- C++ -*-===//
//
// Every kernel family records the kernels it built, in launch order, in a
// LaunchList; the pass then writes the op's launch contract (its kernels,
// launches, workspace bytes and the results to zero first) from it.
//
//===----------------------------------------------------------------------===//

#ifndef OCTET_COMPILER_CODEGEN_LAUNCHES_H
#define OCTET_COMPILER_CODEGEN_LAUNCHES_H

#include "mlir/IR/Builders.h"

#include <optional>

// What the kernel families' entry points (RowKernel.h, WholeOpKernel.h)
// take besides the LaunchList they fill.
namespace mlir::gpu {
class GPUModuleOp;
} // namespace mlir::gpu
namespace octet::kernel {
class FusedOp;
} // namespace octet::kernel

namespace octet::codegen {

class LaunchList {
public:
  // Launches of the kernels of gpu.module `moduleSym`.
  LaunchList(mlir::OpBuilder &b, llvm::StringRef moduleSym);

  // Kernel `kernel` of the module on `grid` blocks of `block` threads, with
  // `sharedBytes` of dynamic shared memory, in clusters of `cluster` blocks;
  // `programmatic`: it may start while the launch before it finishes (it
  // waits for it with griddepcontrol.wait before reading its results).
  void add(llvm::StringRef kernel, int64_t grid, int64_t block,
           int64_t sharedBytes = 0, int64_t cluster = 1,
           bool programmatic = false);

  // The launches take the argument table (kernel.fused's `arg_table`): a
  // pointer to the operands' and results' addresses instead of them.
  void useArgTable() { argTable = true; }

  // Writes the contract onto `op`: the kernels and launches recorded, the
  // f32 workspace the runtime provides (bytes) and, when given, the results
  // accumulated with atomics, which the runtime zeroes before the first
  // launch.
  void apply(mlir::Operation *op, int64_t workspaceBytes,
             std::optional<llvm::ArrayRef<int64_t>> zeroResults) const;

private:
  mlir::OpBuilder &b;
  mlir::StringAttr moduleSym;
  llvm::SmallVector<mlir::Attribute> kernels, launches;
  bool argTable = false;
};

// Copies the launch contract of `from` (an op lowered before with the same
// kernels) onto `to`.
void copyLaunches(mlir::Operation *from, mlir::Operation *to);

} // namespace octet::codegen

#endif // OCTET_COMPILER_CODEGEN_LAUNCHES_H
