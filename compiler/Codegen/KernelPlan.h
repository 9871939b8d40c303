//===- KernelPlan.h - How a kernel.fused region maps onto blocks -*- C++
//-*-===//
//
// The kernel model of the register-resident row kernels. A region splits
// into segments: groups of ops connected through non-scalar tensors (one
// per parameter in an AdamW multi-tensor kernel, usually one otherwise).
// Each segment is a set of rows: a token for norms, RoPE and activations,
// or a fixed slice of a flattened tensor when nothing in the segment needs
// row structure. A block owns a row; its T threads hold the row in
// registers as `vec`-element f32 vectors, thread t owning elements
// [c·vec·T + vec·t, +vec) of chunk c. Blocks are dealt out to segments by
// fixed block ranges. planKernel fixes every size; the row kernel
// (RowKernel.h), its column sums and its transposes are built from the plan.
//
//===----------------------------------------------------------------------===//

#ifndef OCTET_COMPILER_CODEGEN_KERNELPLAN_H
#define OCTET_COMPILER_CODEGEN_KERNELPLAN_H

#include "compiler/Codegen/Emitter.h"

#include "dialects/fp8/Fp8Dialect.h"

#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallVector.h"

namespace octet::kernel {
class FusedOp;
} // namespace octet::kernel

namespace octet::codegen {

constexpr int64_t kVec = 8; // elements per thread access
// The narrow layout, for rows cut at offsets that no 8-element span divides
// (64-wide heads: q, k and v pieces of 128 elements).
constexpr int64_t kNarrowVec = 4;
// Shared floats of the block reductions: two slots used in turn, each with
// kMaxReduced values per warp.
constexpr int64_t kReduceFloats = 2 * kMaxReduced * kWarp;
// The transposes a row kernel writes itself: a thread gathers the bytes of
// its columns kRegisterTileRows rows at a time in registers (KernelPlan.cpp
// bounds what that may cost).
constexpr int64_t kRegisterTileRows = 8;
constexpr unsigned kGlobalSpace = 1;
constexpr unsigned kSharedSpace = 3;

// The column-sum kernel: 8 warps, each adding every 8th partial row of the
// block's 32 columns.
constexpr int64_t kColumnSumGroups = 8;
constexpr int64_t kColumnSumThreads = kColumnSumGroups * kWarp;
// Partial rows a warp loads at once.
constexpr int64_t kColumnSumUnroll = 8;

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t numElements(mlir::Type tensorType);
bool isScalarTensor(mlir::Value tensor);
// `v` without the graph.reshape ops around it.
mlir::Value throughReshapes(mlir::Value v);

enum class Role { Row, Column, PerRow, Scalar, ColumnSum, Amax };

// How a segment's rows are laid out and which blocks run it.
struct Segment {
  llvm::SmallVector<mlir::Operation *> ops;
  llvm::MapVector<mlir::Value, Role> roles;
  llvm::DenseMap<mlir::Value, int64_t>
      length;        // row length (Row, Column, ColumnSum)
  bool flat = false; // rows are slices of a flattened tensor
  int64_t flatElements = 0;
  int64_t rows = 0;
  int64_t blocks = 0;
  bool loop = false; // blocks loop over rows (column sums need it)
  bool sumsColumns = false;
  int64_t firstBlock = 0;
  llvm::SmallVector<mlir::Value> columnSums; // in accumulator order
  llvm::SmallVector<mlir::Value> amaxes;     // in accumulator order
  // Rows a block takes one after another so that it writes the transposed
  // FP8 copies of `tiled` itself (0: a row at a time, no transposes).
  int64_t tileRows = 0;
  llvm::SmallVector<fp8::TransposeOp> tiled;
  int64_t tileRegisters = 0; // per thread, gathering kRegisterTileRows
  int64_t parkBytes = 0;     // per block
};

struct KernelPlan {
  llvm::SmallVector<Segment, 0> segments;
  int64_t threads = 0;
  int64_t totalBlocks = 0;
  int64_t vec = kVec; // elements per thread access
  int64_t workspaceFloats = 0;
  int64_t ropeHalf = 0;  // largest RoPE half head size: angle table in smem
  int64_t parkBytes = 0; // shared bytes of the largest tiled segment
  // Blocks a multiprocessor runs at once for the kernels whose blocks loop
  // over rows (0: none loop).
  int64_t blocksPerSM = 0;
  llvm::DenseMap<mlir::Value, int64_t> workspaceOffset; // per ColumnSum value
  llvm::DenseMap<mlir::Value, int64_t> workspaceRows;
  // Transposed FP8 copies of tensors the kernel reads or writes whole that
  // no segment writes itself (Segment::tiled): a block of the row kernel
  // holds a row and a transpose needs columns, so they run as a kernel of
  // their own after the others.
  llvm::SmallVector<fp8::TransposeOp> transposes;
  // Blockwise FP8 quantizations of an RMSNorm's output (with their
  // transposes and the reshapes they read it through), which the row kernel
  // leaves to the tile kernel after it (WholeOpKernel.h): the row kernel
  // stores each row's 1/rms into the workspace at normInverseOffset, and
  // the tile kernel evaluates the norm from its input and those factors.
  llvm::SmallVector<mlir::Operation *> tileQuantized;
  llvm::DenseMap<mlir::Value, int64_t> normInverseOffset; // norm result
  // Gradient accumulation into a column sum (acc + dweight): the kernel that
  // adds up the partial rows adds the accumulator too. Result → (column
  // sum, accumulator).
  llvm::MapVector<mlir::Value, std::pair<mlir::Value, mlir::BlockArgument>>
      accumulated;
  // The column sum that a kernel result holds, accumulated or not.
  mlir::Value columnSumOf(mlir::Value result) const {
    if (workspaceOffset.count(result))
      return result;
    auto it = accumulated.find(result);
    return it == accumulated.end() ? mlir::Value() : it->second.first;
  }
};

// The pass options that shape a plan (Passes.td says what each does).
struct PlanOptions {
  int64_t numSMs = 132;
  int64_t columnBlocksPerSM = 2;
  int64_t rowBytesInFlight = 128;
  int64_t rowBlocksPerSM = 0;
  // Blocks per multiprocessor looping over a flattened segment: the
  // multi-tensor or the flat option, by the region's kind.
  int64_t flatBlocksPerSM = 0;
  int64_t flatChunks = 0; // 0: the planner's choice
  int64_t transposeTileRows = 0;
};

// Splits the body into segments and fixes every size. Errors name the op.
mlir::FailureOr<KernelPlan> planKernel(kernel::FusedOp fused,
                                       const PlanOptions &options);

} // namespace octet::codegen

#endif // OCTET_COMPILER_CODEGEN_KERNELPLAN_H
