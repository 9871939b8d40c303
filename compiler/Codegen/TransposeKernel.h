//===- TransposeKernel.h - FP8 transpose launches ---------------*- C++ -*-===//
//
// The launch that trails a row kernel and writes the transposed copies of
// its FP8 tensors (fp8.transpose: [R, C] -> [C, R], with the scale beside
// it). Byte tensors whose sides are whole tiles go through shared memory in
// tiles, with 4-byte global reads and writes; anything else (scales, odd
// shapes) is copied an element per thread.
//
//===----------------------------------------------------------------------===//

#ifndef OCTET_COMPILER_CODEGEN_TRANSPOSEKERNEL_H
#define OCTET_COMPILER_CODEGEN_TRANSPOSEKERNEL_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"

#include <functional>

namespace octet::codegen {

// Threads of a transpose launch's block.
constexpr int64_t kTransposeThreads = 256;

// One copy: `from` holds [rows, cols] row-major, `to` receives [cols, rows];
// both are 1-D global memrefs of the kernel's arguments.
//
// With `source` the copy also does the quantize that feeds it (a tiled copy
// only): `from` is then written, not read, as quantize(source · scale) of a
// wider-typed `source` [rows, cols] (the FP8 cast rounds to nearest even,
// saturating, as the row kernels' does), and `amax`, when set, receives the
// largest |source| by one atomic max a block (of the float bits, the value
// being non-negative or NaN; zeroed before the launch).
//
// With `pieces` instead of `source`, the quantized tensor is the join of
// column pieces [rows, width], each an input read as it is or rotated
// (RoPE, head size kRopeTileHead, the angles of `positions` and the
// inverse frequencies `invFreq`: a memref of kRopeTileHead / 2 floats).
struct TransposePiece {
  mlir::Value source;
  int64_t col0, width;
  mlir::Value invFreq = {};
  bool inverse = false;
  // The rotated values are rounded to this type before they are quantized.
  mlir::Type roundTo = {};
};

struct TransposeCopy {
  // `from` is null for a quantizing copy whose row-major FP8 tensor is no
  // result: the copy then writes the transposed one alone.
  mlir::Value from, to;
  int64_t rows, cols;
  mlir::Value source = {}, scale = {}, amax = {};
  llvm::SmallVector<TransposePiece> pieces = {};
  mlir::Value positions = {};
  // Or the quantized tensor is the join of an elementwise op's n results,
  // each [rows, cols / n]: `operands` ([rows, cols / n] each) are read at a
  // place and `evaluate` gives the n results there (four f32 elements a
  // value, in join order).
  llvm::SmallVector<mlir::Value> operands = {};
  std::function<llvm::SmallVector<mlir::Value>(llvm::ArrayRef<mlir::Value>)>
      evaluate = {};
};

// Head size of the RoPE pieces a quantizing copy can rotate itself: a
// head's halves are two tiles side by side.
constexpr int64_t kRopeTileHead = 128;

// Whether a copy with `source` set can be emitted for these sizes.
bool canQuantizeInTranspose(int64_t rows, int64_t cols);
// Whether a copy with `pieces` can be: every piece a whole number of
// kRopeTileHead-column units.
bool canQuantizePiecesInTranspose(int64_t rows,
                                  llvm::ArrayRef<int64_t> widths);
// Whether a copy with `evaluate` can be: results of one width, whole tiles.
bool canQuantizeResultsInTranspose(int64_t rows,
                                   llvm::ArrayRef<int64_t> widths);

// Emits every copy into `func` (a kernel of kTransposeThreads threads, the
// builder's insertion point inside it), taking blocks `firstBlock` on, and
// returns how many it takes. Adds the shared tile to the function's
// workgroup attributions. `bind`, when given, gives copy i its buffers
// where its blocks start (a kernel of the argument table reads their
// addresses there, not all of them before the dispatch).
int64_t emitTransposeCopies(
    mlir::OpBuilder &b, mlir::Location loc, mlir::gpu::GPUFuncOp func,
    llvm::ArrayRef<TransposeCopy> copies, int64_t firstBlock = 0,
    llvm::function_ref<void(size_t, TransposeCopy &)> bind = {});

} // namespace octet::codegen

#endif // OCTET_COMPILER_CODEGEN_TRANSPOSEKERNEL_H
