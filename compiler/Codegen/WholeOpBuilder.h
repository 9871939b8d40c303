//===- WholeOpBuilder.h - The whole-op kernels' builder ---------*- C++ -*-===//
//
// The builder of a kernel.fused region of ops outside the row model
// (WholeOpKernel.h): embedding, cross-entropy, global norm and the step's
// scalars (WholeOpKernel.cpp), and blockwise FP8 quantization, also in the
// tile kernel after a norm's row kernel (WholeOpBlockQuantize.cpp). Shared
// by those two files only; the pass calls buildWholeOpKernels and
// buildNormTileKernels (WholeOpKernel.h).
//
//===----------------------------------------------------------------------===//

#ifndef OCTET_COMPILER_CODEGEN_WHOLEOPBUILDER_H
#define OCTET_COMPILER_CODEGEN_WHOLEOPBUILDER_H

#include "compiler/Codegen/Emitter.h"
#include "compiler/Codegen/Launches.h"

#include "dialects/fp8/Fp8Dialect.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/ADT/DenseSet.h"

#include <limits>
#include <string>

namespace octet::codegen::detail {

inline constexpr int64_t kWholeThreads = 256;

class WholeOpBuilder : public Emitter {
public:
  WholeOpBuilder(kernel::FusedOp fused, mlir::OpBuilder &b)
      : Emitter(b, fused.getLoc()), fused(fused) {}

  // Builds every launch into `mod`, recording them in `launches`. Fails,
  // naming the op, on anything it cannot lower.
  mlir::LogicalResult build(mlir::gpu::GPUModuleOp mod, mlir::StringRef sym,
                            LaunchList &launches);
  // The tile kernel that follows a row kernel computing an RMSNorm: the
  // region's block quantizations of the norm, the norm evaluated on each
  // tile from its input and the rows' 1/rms at `inverseAt` in the row
  // kernel's workspace of `workspaceFloats` floats.
  mlir::LogicalResult
  buildNormTiles(mlir::gpu::GPUModuleOp mod, mlir::StringRef sym,
                 LaunchList &launches,
                 const mlir::DenseMap<mlir::Value, int64_t> &inverseAt,
                 int64_t workspaceFloats);
  int64_t workspaceFloats() const { return wsFloats; }
  // The results the runtime zeroes before the launches (amaxes that blocks
  // add to by atomic maxima).
  llvm::ArrayRef<int64_t> zeroedResults() const { return zeroed; }

private:
  struct Func {
    mlir::gpu::GPUFuncOp func;
    mlir::Value tid, block, shared;
    mlir::SmallVector<mlir::Value> extra;
  };
  // A kernel of `threads` threads; `extraShared` are workgroup buffers
  // beside the reduction scratch (Func::extra, in order).
  Func begin(mlir::gpu::GPUModuleOp mod, std::string name, int64_t threads,
             mlir::ArrayRef<mlir::Type> extraShared = {});
  // The buffer of region value v: the kernel's argument, or its entry of
  // the argument table, read here (in a class's code, the entry the
  // update table gives).
  mlir::Value mem(mlir::Value v) {
    return bufferOf(v, memOf, table, tableIndex, classEntry, elementType(v));
  }
  bool inMemory(mlir::Value v) { return memOf.count(v) || tableIndex.count(v); }
  // Element i of region value v (a kernel buffer), as stored or as f32;
  // x rounded to v's type into element i.
  mlir::Value readAt(mlir::Value v, mlir::Value i) { return load(mem(v), i); }
  mlir::Value readF32(mlir::Value v, mlir::Value i) {
    return toF32(readAt(v, i));
  }
  void writeF32(mlir::Value v, mlir::Value i, mlir::Value x) {
    store(fromF32(x, elementType(v)), mem(v), i);
  }
  static mlir::Type elementType(mlir::Value v) {
    return mlir::cast<mlir::RankedTensorType>(v.getType()).getElementType();
  }
  // for (i = tid; i < n; i += threads) acc = f(acc, i), then over the block.
  mlir::Value stride(const Func &f, int64_t n, mlir::Value init, bool isMax,
                     mlir::function_ref<mlir::Value(mlir::Value)> element);
  mlir::Value blockReduce(const Func &f, mlir::Value x, bool isMax);
  mlir::Value thread0(const Func &f) {
    return cmpI(mlir::arith::CmpIPredicate::eq, f.tid, idx(0));
  }
  // Rows of a [..., V] tensor: (count, width).
  static std::pair<int64_t, int64_t> rowsOf(mlir::Value v) {
    auto t = mlir::cast<mlir::RankedTensorType>(v.getType());
    return {t.getNumElements() / t.getShape().back(), t.getShape().back()};
  }

  // fp8_max(dtype) / (max(amax, eps) · 2^margin), rounded down to a power
  // of two when asked: the one formula of scale_update and compute_scale.
  mlir::Value scaleFromAmax(mlir::Value amax, mlir::Type dtype, int64_t margin,
                            bool powerOfTwo, double eps);
  mlir::Value isFinite(mlir::Value x) {
    return cmpF(mlir::arith::CmpFPredicate::OLT, absF(x),
                f32c(std::numeric_limits<float>::infinity()));
  }

  mlir::LogicalResult scalarOps(mlir::gpu::GPUModuleOp mod, mlir::StringRef sym,
                                mlir::ArrayRef<mlir::Operation *> ops,
                                LaunchList &launches);
  mlir::LogicalResult blockQuantize(fp8::BlockQuantizeOp op,
                                    mlir::gpu::GPUModuleOp mod,
                                    mlir::StringRef name, LaunchList &launches,
                                    mlir::DenseSet<mlir::Operation *> &done);
  // A quantization of a tile kernel's input, and its fp8.transpose in the
  // same kernel (or null).
  struct TileQuantization {
    fp8::BlockQuantizeOp op;
    fp8::TransposeOp transposed;
  };
  bool isYielded(mlir::Value v) {
    return llvm::is_contained(
        fused.getBodyBlock().getTerminator()->getOperands(), v);
  }
  static bool fitsTiles(mlir::ArrayRef<TileQuantization> qs);
  // The fp8.block_factors of block scales that the kernel yields
  // (octet-fuse-block-factors).
  mlir::SmallVector<fp8::BlockFactorsOp, 1> yieldedFactors(mlir::Value scales) {
    mlir::SmallVector<fp8::BlockFactorsOp, 1> out;
    for (mlir::Operation *user : scales.getUsers())
      if (auto f = mlir::dyn_cast<fp8::BlockFactorsOp>(user);
          f && isYielded(f.getFactors()))
        out.push_back(f);
    return out;
  }
  bool writesScales(mlir::Value scales) {
    return isYielded(scales) || !yieldedFactors(scales).empty();
  }
  // Block (r, kb) of `scales` ([rows, cols]) has `scale`: stored where the
  // kernel yields the scales, and 1 / scale at its place in each of their
  // factors the kernel yields (cuBLASLt's layout, fp8.block_factors), so
  // that the GEMM reads them with no launch in between. The thread of a
  // 128x128 row's last block writes the row's padding (0).
  void writeBlockScale(mlir::Value scales, mlir::Value r, mlir::Value kb,
                       mlir::Value scale) {
    auto shape =
        mlir::cast<mlir::RankedTensorType>(scales.getType()).getShape();
    int64_t rows = shape[0], cols = shape[1];
    if (isYielded(scales))
      writeF32(scales, addI(mulI(r, cols), kb), scale);
    for (fp8::BlockFactorsOp factors : yieldedFactors(scales)) {
      mlir::ArrayRef<int64_t> block = factors.getBlock();
      int64_t stride = fp8::BlockFactorsOp::factorStride(rows, cols, block);
      bool tiles = block[0] == 1;
      mlir::Value at =
          tiles ? addI(mulI(kb, stride), r) : addI(mulI(r, stride), kb);
      writeF32(factors.getFactors(), at, divF(f32c(1), scale));
      if (!tiles && stride > cols)
        ifThen(cmpI(mlir::arith::CmpIPredicate::eq, kb, idx(cols - 1)), [&] {
          for (int64_t p = cols; p < stride; ++p)
            writeF32(factors.getFactors(), addI(mulI(r, stride), idx(p)),
                     f32c(0));
        });
    }
  }
  // Marks the factors of a quantization's scales as written with them.
  void factorsDone(mlir::Value scales,
                   mlir::DenseSet<mlir::Operation *> &done) {
    for (mlir::Operation *user : scales.getUsers())
      if (mlir::isa<fp8::BlockFactorsOp>(user))
        done.insert(user);
  }
  // A value with a buffer of the kernel: an input or a result.
  bool isBuffer(mlir::Value v) {
    return mlir::isa<mlir::BlockArgument>(v) || isYielded(v);
  }
  // The ops that compute a tile kernel's input inside the kernel (the
  // producer fusion put in front of the quantization): each square
  // evaluates them on its own elements, so the tensor is never stored.
  // Adds them to `evaluated`; fails, naming the op, on one it cannot.
  mlir::LogicalResult
  evaluatedInTiles(mlir::Value v, mlir::DenseSet<mlir::Operation *> &evaluated);
  // Rows firstRow .. + 8, columns col .. + 8 of v viewed as [rows, last
  // dimension], as f32: loaded where v is in memory, else computed.
  mlir::SmallVector<mlir::Value, 8>
  squareOf(mlir::Value v, mlir::Value firstRow, mlir::Value col);
  void blockQuantizeTiles(mlir::ArrayRef<TileQuantization> qs,
                          mlir::gpu::GPUModuleOp mod, mlir::StringRef name,
                          LaunchList &launches);
  // Global norm: thread f.tid's sum of squares over its share of the
  // `count` elements from `lo` of `mem` (a buffer of `elem`): `loads` loads
  // of `lanes` elements, the j-th at element first + (j * threads + tid) *
  // lanes of them, those past `count` read at `lo` (count >= lanes) and
  // dropped; with lanes > 1, the last count % lanes elements one a thread.
  // A fixed order: the same bits every run.
  mlir::Value sumOfSquares(const Func &f, mlir::Value mem, mlir::Type elem,
                           mlir::Value lo, mlir::Value first, mlir::Value count,
                           int64_t lanes, int64_t loads);

  // One memref argument per input and per result, in the kernel ABI's
  // order (an amax that blocks add to by atomic maxima as i32, its float
  // bits).
  void setBufferTypes();
  // An FP8 LM head's logits gradient (octet-precision with the head in
  // FP8): the cross-entropy gradient feeds, through reshapes, one
  // fp8.quantize and maybe its fp8.transpose, and the region yields the
  // FP8 tensors instead of the gradient. Null ops when it yields the
  // gradient itself; failure, naming the op, for any other use of it.
  struct Fp8LogitsGrad {
    fp8::QuantizeOp quantize;
    fp8::TransposeOp transpose;
  };
  mlir::FailureOr<Fp8LogitsGrad>
  fp8LogitsGradOf(mlir::Operation *crossEntropyGrad,
                  mlir::DenseSet<mlir::Operation *> &done);
  // A launch of kTransposeThreads that writes `t`'s copies (the FP8 data
  // and its scale) from the kernel's buffers.
  mlir::LogicalResult transposeLaunch(mlir::gpu::GPUModuleOp mod,
                                      std::string name, fp8::TransposeOp t,
                                      LaunchList &launches);
  int64_t resultIndex(mlir::Value v) {
    auto results = fused.getBodyBlock().getTerminator()->getOperands();
    return std::distance(results.begin(), llvm::find(results, v));
  }

  kernel::FusedOp fused;
  mlir::SmallVector<mlir::Type> argTypes;
  // An RMSNorm result evaluated in tiles → its rows' 1/rms in the workspace.
  mlir::DenseMap<mlir::Value, int64_t> normInverseAt;
  // The tile kernel waits for the row kernel it follows (programmatic).
  bool waitsForRowKernel = false;
  mlir::DenseMap<mlir::Value, mlir::Value> memOf;
  // Only FP8 scale updates (a model's hundreds of them): one argument table
  // (inputs, then results), and updates of the same kind share code.
  bool argTable = false;
  mlir::Value table;
  mlir::DenseMap<mlir::Value, int64_t> tableIndex;
  mlir::DenseMap<mlir::Value, mlir::Value> classEntry;
  mlir::Value workspace;
  int64_t wsFloats = 0;
  mlir::SmallVector<int64_t> zeroed;
};

} // namespace octet::codegen::detail

#endif // OCTET_COMPILER_CODEGEN_WHOLEOPBUILDER_H
