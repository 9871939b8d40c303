#ifndef OCTET_COMPILER_PLAN_MEMORYPLAN_H
#define OCTET_COMPILER_PLAN_MEMORYPLAN_H

// The static memory plan of a compiled train step: one arena, a persistent
// region for everything that outlives a program (parameters, gradient
// accumulators, optimizer moments, FP8 scale state and weight caches), and an
// activation region that every program (train microbatch, optimizer step,
// eval, init) reuses in turn, packed by liveness.
//
// Lifetimes are in the program order of the function's top-level ops: a
// tensor lives from the op that defines it to the last op that reads it (or
// to the end when the function returns it). Views (graph.reshape,
// graph.slice, graph.save, kernel.rank_part, an in-place all-reduce or
// reduce-scatter) and variable reads
// (graph.load) take no memory of their own; they extend the lifetime of the
// buffer they view. A result that
// is written back to a variable (graph.store) is computed in place in the
// variable's slot when no later op reads the variable's old value. An
// in-place all-gather (ZeRO-1's gather of the updated parameter parts) puts
// its operand in this rank's part of the slot its result is stored in: the
// kernel that makes the part writes it there, and NCCL gathers the rest
// around it; the plan errs where it cannot (the part read elsewhere, the
// old value read after it).
//
// Once codegen has run, an op's scratch memory is planned too, live at that
// op's step only: the f32 workspace of a generated kernel (its
// `workspace_bytes` attribute), and the dequantization factors of a
// block-scaled kernel.gemm (1 / scale per block in cuBLASLt's layout,
// written just before the call). A tensorwise FP8 GEMM needs no scratch:
// its scales_inv operands are what cuBLASLt reads.
//
// A step-local variable (dialects/graph/StepLocal.h: a gradient accumulator
// the step's first microbatch writes and the optimizer step reads last) is
// no persistent slot when a step has one microbatch: @train_microbatch and
// @optimizer_step are planned as one timeline, the train program's steps
// then the optimizer's, and the variable is a buffer of that timeline, live
// from its first write in the backward to its last read in the optimizer.
// So it shares bytes with the activations the backward has freed before it
// and with those of eval and init, which run outside the window. With
// several microbatches it carries the sum through the whole train program
// and stays persistent.
//
// Every GEMM of every program shares one cuBLASLt workspace, a persistent
// slot of kGemmWorkspaceBytes: GEMMs run on the main stream only, one at a
// time, so one workspace per GEMM stream is all they need.

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace octet::kernel {
class GemmOp;
} // namespace octet::kernel

namespace octet::plan {

constexpr uint64_t kPlanAlignment = 256;
// cuBLASLt's workspace on Hopper: 32 MiB, what cuBLAS recommends there (a
// smaller one rules out the split-K and stream-K kernels of some shapes).
constexpr uint64_t kGemmWorkspaceBytes = uint64_t(32) << 20;

enum class SlotKind {
  Parameter,
  Gradient,
  OptimizerState,
  Fp8State,
  WeightCache,
  State,
  Activation,
  IO,
  // Scratch of one op: a kernel's workspace, a GEMM's dequantization factor.
  Workspace,
  // A pipeline rank's stage-edge tensor, stash or microbatch input: one
  // entry of `stashStride` bytes per (chunk, microbatch) in flight
  // (compiler/Emit/PipelineSlots.h makes them).
  Stash,
};
const char *slotKindName(SlotKind kind);

// A zero tensor that only graph.store reads (the cleared gradient
// accumulators of an optimizer step): it gets no buffer, and each store is
// a memset of its variable.
bool isStoredZeroFill(mlir::Operation *op);

struct Slot {
  std::string name;
  SlotKind kind;
  // Offset from the start of the arena (the persistent region comes first).
  uint64_t offset = 0;
  // Bytes the tensor needs, unaligned.
  uint64_t bytes = 0;
  mlir::Type elementType;
  std::vector<int64_t> shape;
  // Function the slot belongs to; empty for persistent slots.
  std::string program;
  // [firstStep, lastStep] in that function's top-level op order.
  int64_t firstStep = 0, lastStep = 0;
  // A step-local variable's slot: live from firstStep of `program` (the
  // train microbatch) to lastStep of `lastProgram` (the optimizer step).
  std::string lastProgram;
  // A Stash slot's bytes per entry; `bytes` holds all of the rank's entries.
  uint64_t stashStride = 0;
};

struct ProgramPlan {
  std::string name;
  int64_t numSteps = 0;
  // Largest sum of live activation bytes at one step (aligned sizes).
  uint64_t peakLiveBytes = 0;
  // End of the highest activation slot, from the region's start: peak plus
  // fragmentation.
  uint64_t regionBytes = 0;
  // The slot each tensor value of the function's body lives in (views map
  // to the slot they view, with the byte offset into it).
  llvm::DenseMap<mlir::Value, std::pair<unsigned, uint64_t>> valueSlots;
  // Values that are a rank's part of their slot (kernel.rank_part): the
  // bytes each index in the data group adds to the offset above.
  llvm::DenseMap<mlir::Value, uint64_t> rankStrides;
  // The workspace slot of each top-level op with `workspace_bytes` > 0.
  llvm::DenseMap<mlir::Operation *, unsigned> workspaceSlots;
  // The f32 dequantization-factor slot of each block-scaled kernel.gemm.
  llvm::DenseMap<mlir::Operation *, unsigned> gemmScaleSlots;
};

// A block-scaled kernel.gemm's dequantization factors, in one scratch slot:
// A's (GemmOp::getDequantFactorCount) from byte 0, B's from
// dequantFactorOffsetB, 256-byte aligned as cuBLASLt's pointers like.
int64_t dequantFactorOffsetB(kernel::GemmOp gemm);
int64_t dequantFactorFloats(kernel::GemmOp gemm);
// A block-scaled kernel.gemm whose scale operands are already cuBLASLt's
// factors (rank 1, from fp8.block_factors in the quantize kernels): it needs
// neither that slot nor a launch to fill it.
bool takesBlockFactors(kernel::GemmOp gemm);

struct MemoryPlan {
  std::vector<Slot> slots;
  std::vector<ProgramPlan> programs;
  // Variable symbol -> slot index.
  llvm::StringMap<unsigned> variableSlots;
  // The cuBLASLt workspace of the main stream's GEMMs (a persistent
  // slot); unset when no program has a kernel.gemm.
  std::optional<unsigned> gemmWorkspaceSlot;
  uint64_t persistentBytes = 0;
  // The activation region: the largest region of any program.
  uint64_t activationBytes = 0;
  // A pipeline's Stash slots, after the activation region (0 without one).
  uint64_t stashBytes = 0;
  uint64_t totalBytes() const {
    return persistentBytes + activationBytes + stashBytes;
  }
  const ProgramPlan *program(llvm::StringRef name) const;
};

// Plans every function of a kernel-dialect module (the output of the fused
// stage). `microbatchesPerStep` is how often @train_microbatch runs before
// @optimizer_step (0: not known, planned as several, which keeps step-local
// variables persistent). Fails, with a
// diagnostic on the module, when a tensor has a dynamic shape, the eval
// program (`forward`) would need a larger activation region than the train
// microbatch, or a step-local variable could be read outside its window.
mlir::FailureOr<MemoryPlan> planMemory(mlir::ModuleOp module,
                                       int64_t microbatchesPerStep = 0);

// Packs each program's activation slots again from their lifetimes, as
// planMemory placed them, over the slots the plan holds now: once the
// values that cross a pipeline's chunk functions have moved to Stash
// slots, their bytes no longer sit under the programs' own values. Sets
// every program's peak and region and the plan's activation bytes. A slot
// that outlives its program (a step-local variable) stays where it is, and
// so does every slot of a program that holds one.
void repackActivations(MemoryPlan &plan);

// "512 B", "1.50 KiB", "3.25 GiB".
std::string formatBytes(uint64_t bytes);

// Total, persistent and activation bytes, each program's peak and region,
// bytes per slot kind, and the `maxSlots` largest slots.
void printMemoryPlan(const MemoryPlan &plan, llvm::raw_ostream &os,
                     int maxSlots = 12);

} // namespace octet::plan

#endif
