//===- Emitter.h - The IR vocabulary of every kernel family -----*- C++ -*-===//
//
// One set of IR-building helpers for every kernel Codegen writes: the row
// kernels, their column sums and transposes, the whole-op kernels, the
// clustered norm + transpose and attention. A helper is named after the op
// it creates, so a name means one thing everywhere:
//   addI / subI / mulI / divUI / remUI / andI / orI / xOrI / shLI / shRUI /
//   maxSI / minSI   arith integer ops, on index and i32 alike (the int64_t
//                   overloads make a constant of the operand's type and
//                   fold x + 0, x · 1 and x / 1 away);
//   cmpI / cmpF     arith.cmpi / arith.cmpf with the predicate given;
//   addF / subF / mulF / divF / maximumF / minimumF / fma   float ops;
//   load / store    memref.load / memref.store;
//   vload / vstore  vector.load / vector.store;
//   loadPtr / storePtr / gep   LLVM pointer accesses (kernels written at the
//                   level of LLVM pointers and PTX: attention, the clustered
//                   norm + transpose).
// One block reduction (blockReduce) serves every kernel that reduces over a
// block.
//
//===----------------------------------------------------------------------===//

#ifndef OCTET_COMPILER_CODEGEN_EMITTER_H
#define OCTET_COMPILER_CODEGEN_EMITTER_H

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <array>

namespace mlir::arith {
enum class CmpIPredicate : uint64_t;
enum class CmpFPredicate : uint64_t;
} // namespace mlir::arith
namespace mlir::gpu {
class GPUFuncOp;
class GPUModuleOp;
} // namespace mlir::gpu

namespace octet::codegen {

constexpr int64_t kWarp = 32;
// Values reduced over a block at once (one barrier): LayerNorm's mean and
// M2, a norm gradient's two row sums.
constexpr int64_t kMaxReduced = 2;

class Emitter {
public:
  Emitter(mlir::OpBuilder &b, mlir::Location loc);

  mlir::OpBuilder &b;
  mlir::Location loc;
  mlir::MLIRContext *ctx;
  mlir::Type i32, f32, bf16, ptrG, ptrS;
  // addF, subF and mulF carry the `contract` fast-math flag when set: a
  // product feeding a sum may then fuse into one fma (a single rounding
  // instead of two, and fewer instructions an element). The row kernels
  // set it; their stated f32 tolerances allow it.
  bool contract = false;

  // Constants.
  mlir::Value idx(int64_t v);
  mlir::Value i32c(int64_t v);
  mlir::Value f32c(double v);
  // A constant of integer type `type` (index or an integer width).
  mlir::Value intc(mlir::Type type, int64_t v);
  // A vector of `type` with every lane `v`.
  mlir::Value splat(mlir::VectorType type, double v);
  mlir::Value zeros(mlir::Type type);

  // Integer arithmetic.
  mlir::Value addI(mlir::Value x, mlir::Value y);
  mlir::Value addI(mlir::Value x, int64_t y);
  mlir::Value subI(mlir::Value x, mlir::Value y);
  mlir::Value mulI(mlir::Value x, mlir::Value y);
  mlir::Value mulI(mlir::Value x, int64_t y);
  mlir::Value divUI(mlir::Value x, mlir::Value y);
  mlir::Value divUI(mlir::Value x, int64_t y);
  mlir::Value remUI(mlir::Value x, mlir::Value y);
  mlir::Value remUI(mlir::Value x, int64_t y);
  mlir::Value andI(mlir::Value x, mlir::Value y);
  mlir::Value andI(mlir::Value x, int64_t y);
  mlir::Value orI(mlir::Value x, mlir::Value y);
  mlir::Value xOrI(mlir::Value x, mlir::Value y);
  mlir::Value shLI(mlir::Value x, int64_t y);
  mlir::Value shRUI(mlir::Value x, int64_t y);
  mlir::Value maxSI(mlir::Value x, mlir::Value y);
  mlir::Value minSI(mlir::Value x, mlir::Value y);
  // arith.cmpi with that predicate.
  mlir::Value cmpI(mlir::arith::CmpIPredicate predicate, mlir::Value x,
                   mlir::Value y);
  mlir::Value select(mlir::Value cond, mlir::Value x, mlir::Value y);
  mlir::Value indexCast(mlir::Value x); // to index

  // Float arithmetic (scalars or vectors).
  mlir::Value addF(mlir::Value x, mlir::Value y);
  mlir::Value subF(mlir::Value x, mlir::Value y);
  mlir::Value mulF(mlir::Value x, mlir::Value y);
  mlir::Value divF(mlir::Value x, mlir::Value y);
  mlir::Value negF(mlir::Value x);
  mlir::Value maximumF(mlir::Value x, mlir::Value y);
  mlir::Value minimumF(mlir::Value x, mlir::Value y);
  mlir::Value fma(mlir::Value x, mlir::Value y, mlir::Value z); // math.fma
  mlir::Value absF(mlir::Value x);
  mlir::Value sqrt(mlir::Value x);
  mlir::Value exp(mlir::Value x);
  mlir::Value log(mlir::Value x);
  mlir::Value cos(mlir::Value x);
  mlir::Value sin(mlir::Value x);
  // arith.cmpf with that predicate.
  mlir::Value cmpF(mlir::arith::CmpFPredicate predicate, mlir::Value x,
                   mlir::Value y);
  // Same-width reinterpretation (arith.bitcast), e.g. f32 ↔ i32.
  mlir::Value bitcast(mlir::Type type, mlir::Value x);
  // x (any float or integer element, scalar or vector) as f32: extf or
  // sitofp of the same shape; f32 stays as it is.
  mlir::Value toF32(mlir::Value x);
  // f32 (scalar or vector) to element type `elem` by truncf.
  mlir::Value fromF32(mlir::Value x, mlir::Type elem);
  // Rounded to `elem` and back: what storing as `elem` would keep.
  mlir::Value roundTo(mlir::Value x, mlir::Type elem);

  // Vectors.
  mlir::Value broadcast(mlir::VectorType type, mlir::Value scalar);
  mlir::Value extract(mlir::Value vector, int64_t lane);
  mlir::Value insert(mlir::Value scalar, mlir::Value vector, int64_t lane);
  mlir::Value shuffle(mlir::Value x, mlir::Value y,
                      llvm::ArrayRef<int64_t> mask); // vector.shuffle
  mlir::Value reduceAdd(mlir::Value vector);
  mlir::Value reduceMaximumF(mlir::Value vector);

  // Memory: memrefs (row kernels, whole-op kernels, transposes).
  mlir::Value load(mlir::Value mem, mlir::Value index);
  void store(mlir::Value x, mlir::Value mem, mlir::Value index);
  mlir::Value vload(mlir::VectorType type, mlir::Value mem, mlir::Value index,
                    int64_t alignBytes);
  void vstore(mlir::Value x, mlir::Value mem, mlir::Value index,
              int64_t alignBytes);
  // One atomic of the unsigned integer maximum (of float bits, say).
  void atomicMaxU(mlir::Value x, mlir::Value mem, mlir::Value index);
  void atomicAddF(mlir::Value x, mlir::Value mem, mlir::Value index);
  // LLVM pointers: element `index` of a typed buffer, loads and stores.
  mlir::Value gep(mlir::Value base, mlir::Type elem, mlir::Value index);
  mlir::Value loadPtr(mlir::Type type, mlir::Value ptr, unsigned align = 0);
  void storePtr(mlir::Value x, mlir::Value ptr, unsigned align = 0);
  // The buffer whose address is entry `entry` (index) of an argument table
  // (memref of i64 addresses, kernel.fused's arg_table), as a global memref
  // of `elem` whose size is unknown.
  mlir::Value tableEntry(mlir::Value table, mlir::Value entry, mlir::Type elem);
  // Where a kernel finds the buffer of region value v: its own argument
  // (`arguments`), else its entry of the argument table (`tableIndex`; in
  // code a class of tensors shares, the entry `classEntry` holds), as a
  // memref of `elem`; null when it is in neither.
  mlir::Value bufferOf(
      mlir::Value v, const llvm::DenseMap<mlir::Value, mlir::Value> &arguments,
      mlir::Value table, const llvm::DenseMap<mlir::Value, int64_t> &tableIndex,
      const llvm::DenseMap<mlir::Value, mlir::Value> &classEntry,
      mlir::Type elem);
  // Byte `byteOffset` (i32) of the shared memory at `smem`.
  mlir::Value smemAt(mlir::Value smem, mlir::Value byteOffset);

  // Threads: gpu.thread_id / gpu.block_id (index), or the NVVM special
  // registers (i32) in kernels written over LLVM pointers.
  mlir::Value threadId();
  mlir::Value blockId();
  mlir::Value threadId32();
  mlir::Value blockId32();
  void barrier();
  // gpu.shuffle xor over the warp: lane i gets lane i ^ offset's `x`.
  mlir::Value shuffleXor(mlir::Value x, int64_t offset);

  // Control flow. `body` runs with the builder inside; the insertion point
  // is restored after.
  void ifThen(mlir::Value cond, llvm::function_ref<void()> body);
  // for (i = lb; i < ub; i += step) over values `init`: `body` gets i and
  // the carried values and returns the next ones.
  mlir::ValueRange
  forLoop(mlir::Value lb, mlir::Value ub, int64_t step, mlir::ValueRange init,
          llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::Value,
                                                            mlir::ValueRange)>
              body);

  // PTX: one instruction with register operands, or text with no result,
  // kept where it is (side effects); a "~{memory}" constraint also keeps
  // memory accesses from moving across it.
  mlir::Value asmOp(mlir::Type result, llvm::StringRef text,
                    llvm::StringRef constraints, mlir::ValueRange args,
                    bool sideEffects = false);
  void asmVoid(llvm::StringRef text, llvm::StringRef constraints,
               mlir::ValueRange args);
  // ex2.approx.ftz / lg2.approx.ftz (at most 2 ulp, PTX ISA).
  mlir::Value exp2(mlir::Value x);
  mlir::Value log2(mlir::Value x);
  // f applied to every lane of a vector (a scalar: f of it).
  mlir::Value perLane(mlir::Value v,
                      llvm::function_ref<mlir::Value(mlir::Value)> f);
  // 1 / x by rcp.approx.ftz.f32 (at most 1 ulp, PTX ISA; subnormal inputs
  // and results flush to zero), lane by lane.
  mlir::Value rcpApprox(mlir::Value x);
  // 1 / (1 + 2^y) through the SFU: ex2.approx.ftz (at most 2 ulp, PTX ISA)
  // and rcp.approx.ftz (1 ulp). Four instructions a lane where libdevice's
  // expf and a correctly rounded division take about twenty, which made the
  // activation kernels instruction-bound. y = +inf gives 0, y = -inf 1.
  mlir::Value logistic2(mlir::Value y);
  // sigmoid(x) = 1 / (1 + 2^(-x·log2 e)).
  mlir::Value sigmoid(mlir::Value x);
  // SwiGLU silu(g)·u, and its gradient (d_gate, d_up) from dy, g and u, in
  // f32 before any rounding: the row kernels and the block-quantize tiles
  // that evaluate SwiGLU compute them with the same instructions.
  mlir::Value swiglu(mlir::Value g, mlir::Value u);
  std::pair<mlir::Value, mlir::Value> swigluGrad(mlir::Value dy, mlir::Value g,
                                                 mlir::Value u);
  // A constant like x: a splat vector of x's type, or an f32 scalar.
  mlir::Value constLike(mlir::Value x, double v);
  // Two f32 → bf16x2 (round to nearest even), `lo` in the low half.
  mlir::Value packBf16(mlir::Value lo, mlir::Value hi);
  // ldmatrix.x4 (transposed when `trans`): four 8x8 b16 matrices, lane l
  // giving the row address of matrix l / 8.
  std::array<mlir::Value, 4> ldmatrix4(mlir::Value ptr, bool trans);
  // D = A·B + C for one m16n8k16 tile: A 4 regs of bf16x2, B 2, C/D 4 f32.
  void mma(llvm::ArrayRef<mlir::Value> a, llvm::ArrayRef<mlir::Value> bfrag,
           llvm::MutableArrayRef<mlir::Value> acc);
  // Adds (x, y) to the two f32 at `ptr` (8-byte aligned, global).
  void reduceAdd2(mlir::Value ptr, mlir::Value x, mlir::Value y);
  void cpAsync16(mlir::Value dst, mlir::Value src);
  void cpAsyncCommit();
  void cpAsyncWaitAll();
};

// The shared memory where a block reduction's warps exchange their
// partials: a memref<f32> in workgroup memory (`shared`), or bytes
// `byteOffset` on of the dynamic shared memory at LLVM pointer `shared`
// (kernels written over LLVM pointers). A slot holds kMaxReduced values per
// warp; with `slots` = 2 consecutive reductions use the slots in turn, so
// the barrier of the reduction in between orders a slot's reuse. With
// `barrierFirst` a reduction waits for a barrier before it writes (one
// slot, whose last readers may still be reading it).
struct ReductionScratch {
  mlir::Value shared;
  int64_t byteOffset = 0, warps = 1, slots = 1;
  bool barrierFirst = false;
  // This thread's lane and warp, or null to compute them from `tid` at
  // each reduction.
  mlir::Value lane, warp, tid;
  int next = 0; // the slot of the next reduction
};

// Combines two partials (one value each, or several reduced together);
// `step` is the butterfly level or, across warps, the warp folded in.
using Combine = llvm::function_ref<llvm::SmallVector<mlir::Value>(
    llvm::ArrayRef<mlir::Value>, llvm::ArrayRef<mlir::Value>, int64_t step)>;

// The block's reduction of `xs` (each thread's partials, at most
// kMaxReduced): a butterfly over each warp (warpReduce), then each warp's
// lane 0 writes its values to the scratch, and after a barrier the warps'
// values are folded in warp order by `merge`, so that the bits do not
// depend on scheduling. Every thread gets the result.
llvm::SmallVector<mlir::Value> blockReduce(Emitter &e,
                                           ReductionScratch &scratch,
                                           llvm::SmallVector<mlir::Value> xs,
                                           Combine combine, Combine merge);
// A sum (addF) or a maximum (maximumF) of one value over the block.
mlir::Value blockSum(Emitter &e, ReductionScratch &scratch, mlir::Value x);
mlir::Value blockMax(Emitter &e, ReductionScratch &scratch, mlir::Value x);
// The block's maximum of `x` in thread 0 only (scratch.tid), handed to
// `use` there: one atomic a block.
void blockMaxInThread0(Emitter &e, ReductionScratch &scratch, mlir::Value x,
                       llvm::function_ref<void(mlir::Value)> use);
// The butterfly alone (gpu.shuffle xor; `combine` must be symmetric, so
// that every lane ends with the same bits): every lane gets the reduction
// over its aligned group of `lanes` lanes (a power of two; the warp by
// default).
llvm::SmallVector<mlir::Value>
warpReduce(Emitter &e, llvm::SmallVector<mlir::Value> xs, Combine combine,
           int64_t lanes = 32);
mlir::Value warpSum(Emitter &e, mlir::Value x, int64_t lanes = 32);
mlir::Value warpMax(Emitter &e, mlir::Value x);

// A kernel `name` of arguments `args`, workgroup buffers `workgroup` and
// `threads` threads a block, the builder left inside it before its return.
mlir::gpu::GPUFuncOp createKernel(mlir::OpBuilder &b, mlir::Location loc,
                                  mlir::gpu::GPUModuleOp mod,
                                  llvm::StringRef name, mlir::TypeRange args,
                                  mlir::TypeRange workgroup, int64_t threads);
// A kernel of `numArgs` global pointers (the builder's insertion point is
// kept).
mlir::gpu::GPUFuncOp makeKernel(mlir::OpBuilder &b, mlir::gpu::GPUModuleOp mod,
                                llvm::StringRef name, unsigned numArgs,
                                int64_t threads, mlir::Location loc);

// A constant array of the module, `name`, holding `values` (a memref of
// their type, read through memref.get_global in the current kernel).
mlir::Value constantArray(Emitter &e, mlir::gpu::GPUModuleOp mod,
                          llvm::StringRef name,
                          mlir::DenseElementsAttr values);
// The argument table of a kernel that takes one (arg_table): a memref of
// its `entries` i64 addresses.
mlir::MemRefType argTableType(mlir::OpBuilder &b, int64_t entries);

// The dynamic shared memory of every kernel of the module, as the external
// shared array `name`.
mlir::Value sharedBase(Emitter &e, mlir::gpu::GPUModuleOp mod,
                       llvm::StringRef name);

} // namespace octet::codegen

#endif // OCTET_COMPILER_CODEGEN_EMITTER_H
