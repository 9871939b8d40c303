//===- RowKernelBuilder.h - The row kernels' builder ------------*- C++ -*-===//
//
// The builder of a planned kernel.fused region (KernelPlan.h): the row
// kernel (RowKernel.cpp, its ops in RowOps.cpp), the column sums that
// follow it (ColumnSums.cpp) and the FP8 transposes of its results, in a
// launch of their own or written by the row kernel itself
// (RowTransposes.cpp). Shared by those files only; the pass calls
// buildRowKernels (RowKernel.h).
//
// Values are carried as f32 and rounded to each op's result type after the
// op (bf16/f16 results are rounded at once, FP8 ones when first read or
// stored), which is what the interpreter does op by op.
//
//===----------------------------------------------------------------------===//

#ifndef OCTET_COMPILER_CODEGEN_ROWKERNELBUILDER_H
#define OCTET_COMPILER_CODEGEN_ROWKERNELBUILDER_H

#include "compiler/Codegen/Emitter.h"
#include "compiler/Codegen/KernelPlan.h"

#include "dialects/graph/GraphDialect.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace octet::codegen {

// Whether two RoPEs rotate by the same angles (one cos/sin table serves both).
bool sameRopeAngles(graph::RopeOp a, graph::RopeOp b);

// A value as the threads of a block hold it.
struct Val {
  llvm::SmallVector<mlir::Value> chunks; // vector<vec x f32>: Row, Column
  mlir::Value scalar;                    // f32: Scalar and PerRow values
  mlir::Type pendingFp8; // chunks still need rounding to this FP8 type
  mlir::Type rawElem;    // chunks are as loaded (vector of this type), not f32
  // A column input not loaded yet: read where first used, so that a row
  // kernel does not hold norm weights in registers through its reductions.
  mlir::Value deferredFrom;
  int64_t deferredLength = 0;
};

class RowKernelBuilder : public Emitter {
public:
  // `argTable`: the kernels take the argument table (kernel.fused's
  // arg_table), and segments of the same ops share one piece of code
  // (usesArgTable says whether the plan allows it).
  RowKernelBuilder(kernel::FusedOp fused, const KernelPlan &plan,
                   mlir::OpBuilder &b, bool argTable);
  static bool usesArgTable(kernel::FusedOp fused, const KernelPlan &plan);

  mlir::gpu::GPUFuncOp buildMain(mlir::gpu::GPUModuleOp module,
                                 llvm::StringRef name);
  mlir::gpu::GPUFuncOp buildColumnSum(mlir::gpu::GPUModuleOp module,
                                      llvm::StringRef name);
  // The column sums and the trailing transposes in one launch (the column
  // sums' blocks first): a kernel with both saves a launch, whose few
  // microseconds of ramp are most of a column sum's time.
  mlir::gpu::GPUFuncOp
  buildColumnSumAndTransposes(mlir::gpu::GPUModuleOp module,
                              llvm::StringRef name, int64_t &grid);
  int64_t columnSumBlocks();
  // Every trailing transpose of the plan; returns the grid it needs. With
  // `quantize` (quantizeInTranspose's op) the launch also does that
  // quantize, and no row kernel runs.
  mlir::gpu::GPUFuncOp buildTransposes(mlir::gpu::GPUModuleOp module,
                                       llvm::StringRef name, int64_t &grid,
                                       fp8::QuantizeOp quantize = nullptr);
  // A kernel that only quantizes a [R, C] input and transposes the result
  // (tensorwise scale, tiles that divide R and C): its quantize, which the
  // transpose launch can do itself, reading the input once. Null otherwise.
  // The input may also be a join (along its rows) of inputs, each as it is
  // or through a RoPE of head size kRopeTileHead (RoPE backward and the
  // q/k/v join): inTransposePieces then lists them. A plain input may be
  // seen through reshapes (a [B, S, H] norm output cast as [B·S, H]: one
  // buffer either way); inTransposeSource is then the input itself.
  fp8::QuantizeOp quantizeInTranspose();
  mlir::BlockArgument inTransposeSource;

  // A column piece of the join quantizeInTranspose found.
  struct JoinPiece {
    mlir::BlockArgument input;
    int64_t col0, width;
    graph::RopeOp rope;
  };
  llvm::SmallVector<JoinPiece> inTransposePieces;
  // Or a join of the results of one elementwise op (SwiGLU's gradient:
  // gate and up), each computed from the op's operands at the same place.
  mlir::Operation *inTransposeOp = nullptr;
  llvm::SmallVector<mlir::Value> inTransposeResults; // in join order

private:
  // A kernel of the region's arguments and `threads` threads that follows
  // the row kernel, the builder at its body.
  mlir::gpu::GPUFuncOp createFollowingKernel(mlir::gpu::GPUModuleOp module,
                                             llvm::StringRef name,
                                             int64_t threads,
                                             mlir::TypeRange workgroup);
  mlir::MemRefType columnSumSharedType();
  // Column sums of blocks [0, columnSumBlocks()) of `blockId`.
  void emitColumnSums(mlir::gpu::GPUFuncOp func, mlir::Value blockId);
  // The trailing transposes, block firstBlock on; returns their blocks.
  int64_t emitTransposes(mlir::gpu::GPUFuncOp func, fp8::QuantizeOp quantize,
                         int64_t firstBlock);
  // inTransposeOp's results (join order) from its operands' values.
  llvm::SmallVector<mlir::Value>
  evaluateInTranspose(llvm::ArrayRef<mlir::Value> operands);
  // Kernel arguments: inputs, results (or the argument table), then the
  // workspace.
  llvm::SmallVector<mlir::Type> argumentTypes();
  // The memrefs of the inputs and results, in order.
  llvm::SmallVector<mlir::Type> bufferTypes();
  // The buffer of region value `v` (an input or result): the kernel's
  // argument, or its argument table's entry, read here; null when `v` is
  // not in memory.
  mlir::Value mem(mlir::Value v);
  bool inMemory(mlir::Value v) {
    return memOf.count(v) || tableIndex.count(v);
  }
  // Segments of an argument-table kernel by the code they need: the class
  // key (ops, attributes, element types, roles; not sizes or tensors), and
  // the buffers the code reads or writes through the table, in a fixed
  // order, which the segment table lists per segment.
  std::string classKey(const Segment &seg);
  llvm::SmallVector<mlir::Value> segmentBuffers(const Segment &seg);
  bool ownScalar(mlir::Value v);
  // The argument-table kernel's segments: a binary search of the segment
  // table for the block's segment, then the code of its class.
  void emitSegmentClasses(mlir::Value block);
  mlir::Type memrefFor(mlir::Value tensorValue, bool atomicMax);

  // A constant chunk (every lane `v`), a scalar in every lane.
  mlir::Value chunkConst(double v) { return splat(vecType, v); }
  mlir::Value chunkBroadcast(mlir::Value s) { return broadcast(vecType, s); }

  // Chunk c of a row of `len` elements: this thread's first element, and
  // whether it lies inside the row (null when it always does).
  mlir::Value chunkBase(int64_t c);
  mlir::Value chunkValid(const Segment &seg, int64_t len, int64_t c,
                         mlir::Value rowStart);

  mlir::Value loadChunk(mlir::Value mem, mlir::Type elem, mlir::Value offset,
                        mlir::Value valid);
  void storeChunk(mlir::Value mem, mlir::Type elem, mlir::Value offset,
                  mlir::Value valid, mlir::Value v);
  // A chunk already in its stored type.
  void storeNarrow(mlir::Value mem, mlir::Value offset, mlir::Value valid,
                   mlir::Value narrow);
  mlir::Value loadScalar(mlir::Value mem, mlir::Type elem, mlir::Value index);

  // Sums over the block (up to kMaxReduced at once); every thread gets them.
  llvm::SmallVector<mlir::Value> blockSums(llvm::SmallVector<mlir::Value> xs);
  std::pair<mlir::Value, mlir::Value>
  blockMeanM2(mlir::Value mean, mlir::Value m2, int64_t perThread);

  const llvm::SmallVector<mlir::Value> &chunksOf(mlir::Value v);
  mlir::Value scalarOf(mlir::Value v) { return vals[v].scalar; }

  void emitSegment(const Segment &seg, mlir::Value localBlock);
  // The sizes of the segment emitted: constants, or in the code of a
  // segment class read from the segment table (rows, blocks and elements;
  // its last slice may then be partial).
  mlir::Value segRows, segBlocks, segFlatElements;
  llvm::SmallVector<mlir::Value> loadRow(const Segment &seg, mlir::Value row);
  void loadColumns(const Segment &seg);
  // A column input's chunks, as stored.
  llvm::SmallVector<mlir::Value> loadColumn(mlir::Value mem, mlir::Type elem,
                                            int64_t len);
  // `stored`, when given, receives the FP8 chunks of the segment's tiled
  // transpose inputs as they were stored.
  llvm::SmallVector<mlir::Value>
  emitRow(const Segment &seg, mlir::Value row, mlir::ValueRange accs,
          mlir::ValueRange raw,
          llvm::DenseMap<mlir::Value, llvm::SmallVector<mlir::Value>> *stored =
              nullptr);
  // A tiled segment: tiles of seg.tileRows rows, each row after the other,
  // and the transposed copies of its tiles. `accs` in: the accumulators'
  // initial values; out: their final ones.
  void emitTiledRows(const Segment &seg, mlir::Value localBlock,
                     llvm::SmallVector<mlir::Value> &accs);
  // Loaded chunks to f32 (once, where first needed).
  void widen(Val &val);

  // The ops of a row (RowOps.cpp): each op's result chunks from its
  // operands', column sums and maxima into the accumulators.
  struct RowState {
    const Segment &seg;
    llvm::SmallVector<mlir::Value> &accs;
    llvm::DenseMap<mlir::Value, int> &accIdx;
  };
  mlir::LogicalResult emitOp(const Segment &seg, mlir::Operation *op,
                             llvm::SmallVector<mlir::Value> &accs,
                             llvm::DenseMap<mlir::Value, int> &accIdx);
  // Elementwise: f applied chunk by chunk, the result rounded to its type.
  template <typename F, typename... Inputs>
  void map(mlir::Value result, F f, Inputs... inputs);
  void emitElementwise(mlir::Operation *op);
  // Fills, slices, joins and reshapes of rows.
  mlir::LogicalResult emitLayout(RowState &s, mlir::Operation *op);
  void emitRMSNorm(RowState &s, graph::RMSNormOp op);
  void emitLayerNorm(RowState &s, graph::LayerNormOp op);
  void emitRMSNormGrad(RowState &s, graph::RMSNormGradOp op);
  void emitLayerNormGrad(RowState &s, graph::LayerNormGradOp op);
  void emitRope(graph::RopeOp op);
  void emitAdamW(graph::AdamWUpdateOp op);
  // Row-op helpers: a chunk's lanes inside the row (the others zeroed),
  // this thread's share of a row sum and the block's, 1/sqrt(x + eps), the
  // LayerNorm statistics, maxima and column sums into the accumulators.
  mlir::Value masked(RowState &s, mlir::Value like, size_t c, mlir::Value x);
  mlir::Value threadSum(RowState &s, mlir::Value like,
                        llvm::ArrayRef<mlir::Value> chunks);
  mlir::Value sumOver(RowState &s, mlir::Value like,
                      llvm::ArrayRef<mlir::Value> chunks);
  mlir::Value invSqrt(mlir::Value meanSq, double eps);
  llvm::SmallVector<mlir::Value> squares(llvm::ArrayRef<mlir::Value> chunks);
  mlir::Value layerStats(RowState &s, mlir::Value x, double eps,
                         llvm::SmallVector<mlir::Value> &centered);
  // Per chunk of a norm gradient: x̂ = centred·inv, w·dy, w·dy·x̂ (row-summed
  // next) and dy·x̂ (the weight gradient's column term).
  struct NormGradTerms {
    llvm::SmallVector<mlir::Value> xhat, wdy, prod, dwTerm;
  };
  void normGradTerms(llvm::ArrayRef<mlir::Value> dy,
                     llvm::ArrayRef<mlir::Value> centred,
                     llvm::ArrayRef<mlir::Value> w, mlir::Value inv,
                     NormGradTerms &terms);
  void amaxInto(RowState &s, mlir::Value amaxResult,
                llvm::ArrayRef<mlir::Value> chunks, mlir::Value like);
  void columnAdd(RowState &s, mlir::Value result,
                 llvm::ArrayRef<mlir::Value> chunks, mlir::Value like);

  void emitDispatch(llvm::ArrayRef<int64_t> starts, int64_t lo, int64_t hi,
                    mlir::Value blockId,
                    llvm::function_ref<void(int64_t, mlir::Value)> emitCase);
  mlir::Value ropeTable(graph::RopeOp rope);
  // Region values in memory (inputs, results) → `func`'s arguments.
  void bindArguments(mlir::gpu::GPUFuncOp func);

  kernel::FusedOp fused;
  const KernelPlan &plan;
  int64_t vec; // elements per thread access
  mlir::VectorType vecType;
  mlir::gpu::GPUModuleOp module;
  mlir::Value tid, tid8, shared, workspace;
  mlir::Value currentRow; // the row emitRow is emitting
  mlir::Value parked; // i8 shared buffer of the tiled transposes' parked groups
  ReductionScratch reduction;
  llvm::DenseMap<mlir::Value, mlir::Value> memOf; // region value → argument
  bool argTable = false;
  mlir::Value table;                               // the argument table
  llvm::DenseMap<mlir::Value, int64_t> tableIndex; // region value → entry
  llvm::DenseMap<mlir::Value, mlir::Type> tableElem;
  // In a segment class's code: the entry of each of its first segment's
  // buffers, read from the segment table.
  llvm::DenseMap<mlir::Value, mlir::Value> classEntry;
  llvm::DenseMap<mlir::Value, Val> vals;
  llvm::DenseMap<mlir::Value, Val> columns; // Column inputs as loaded
  llvm::DenseMap<mlir::Value, int64_t> lengthOf;
  int ropeTables = 0;
  // Which RoPE angles the shared table holds in the current row.
  mlir::Operation *anglesFor = nullptr;
};

} // namespace octet::codegen

#endif // OCTET_COMPILER_CODEGEN_ROWKERNELBUILDER_H
