#ifndef OCTET_COMPILER_TRANSFORMS_FUSION_FUSIONUTILS_H
#define OCTET_COMPILER_TRANSFORMS_FUSION_FUSIONUTILS_H

// Building blocks the fusion passes share: which layer an op belongs to,
// one-op kernels, and merging two kernel.fused ops into one.

#include "dialects/graph/GraphDialect.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace octet::fusion {

// On a store into a grad.* accumulator: the value stored is already the
// sum over the data-parallel group (octet-gather-embedding-gradient), so
// octet-reduce-gradients leaves it out of its buckets and
// octet-shard-optimizer reads the rank's part of it as it is.
inline constexpr llvm::StringLiteral kSummedOverDataAttr = "summed_over_data";

// The N of "layers.N." anywhere in `name`, if any.
std::optional<int64_t> layerOfName(llvm::StringRef name);

// The kernel's `layer` attribute (-1 when outside the layers or unset).
int64_t layerOf(mlir::Operation *op);

// "row" when the body reduces along rows (norms, their gradients, losses,
// gathers), else "elementwise".
llvm::StringRef kindForBody(mlir::Block &body);

// True for ops that only re-view a tensor (reshape, slice): no kernel.
bool isView(mlir::Operation *op);

// `value` without the views (reshape, slice, save) wrapped around it.
mlir::Value throughViews(mlir::Value value);

// The ops that read `value`, looking through views and saves.
llvm::SmallVector<mlir::Operation *> readersThroughViews(mlir::Value value);

// A slice whose elements are one contiguous run of its input's (every
// dimension before the sliced one is 1), so a kernel can read it in place
// at a byte offset. Other slices are strided: a kernel that reads its
// operand densely would read the wrong elements, so they are computed by a
// kernel of their own (octet-fuse-elementwise).
bool isContiguousSlice(graph::SliceOp slice);

// Wraps `op` (graph or fp8, at function level) in a one-op kernel.fused
// named `name` and replaces its results. Returns the new kernel.
kernel::FusedOp wrapInFused(mlir::OpBuilder &builder, mlir::Operation *op,
                            llvm::StringRef name);

// Moves view ops (reshape, slice) that sit between a value `producer`
// computes and the inputs of `consumer` into the consumer's body, so the
// consumer reads the producer's result directly. Returns true if it moved any.
bool pullViewsFrom(kernel::FusedOp consumer, mlir::Operation *producer);

// `fused` rebuilt without the results nothing reads (the ops that made
// them stay in its body, for the canonicalizer to drop); returns the
// kernel that holds the rest (`fused` itself when every result is read).
kernel::FusedOp dropUnusedResults(kernel::FusedOp fused);

// `fused` without the results nothing reads and without the body ops that
// only those results needed; erased, and null returned, if nothing reads
// any result.
kernel::FusedOp dropUnread(kernel::FusedOp fused);

// The GEMM's inverse scale for the operand `use`, if it is A or B with a
// tensorwise (rank-0) scale; else null.
mlir::Value tensorwiseScaleInv(kernel::GemmOp gemm, mlir::OpOperand &use);

// What a kernel would compute again of `producer`: the body ops that make
// `inner`, in body order, and the outer values it reads in their place
// with the body value each stands for. An op outside `recomputable` ends
// the walk with nothing. `readAs` gives, for an input of `producer` or a
// result it writes anyway, the value the recomputing kernel reads instead
// (null: an input cannot be read, so nothing; a result is recomputed).
struct RecomputeCone {
  llvm::SmallVector<mlir::Operation *> ops;
  llvm::SetVector<mlir::Value> inputs;
  llvm::DenseMap<mlir::Value, mlir::Value> innerOf;
};
std::optional<RecomputeCone>
recomputeCone(kernel::FusedOp producer, mlir::Value inner,
              llvm::ArrayRef<llvm::StringRef> recomputable,
              llvm::function_ref<mlir::Value(mlir::Value)> readAs);

// A copy of `fused` with its body moved in, yielding `values` (the body's
// values) as its results; `fused` is left empty for the caller to map its
// results and erase it.
kernel::FusedOp rebuildYielding(kernel::FusedOp fused, mlir::ValueRange values);

// Merges `first` and `second` (same block, `first` before `second`) into one
// kernel.fused at the position of one of them, where every value stays
// defined before its uses; `second` may read results of `first`. Results of
// `first` that only `second` reads disappear. The merged kernel takes
// `name` (the first's when empty), kind "row" if either was, `kindOverride`
// when given, and the layer and section of `second`. Returns null when no
// position keeps the IR valid.
kernel::FusedOp mergeFused(kernel::FusedOp first, kernel::FusedOp second,
                           llvm::StringRef name = "",
                           llvm::StringRef kindOverride = "");

// Rewrites a kernel.copy {transpose} of an FP8 tensor that `producer`
// quantizes as an fp8.transpose inside the producer's body. Returns the
// merged kernel, or null.
kernel::FusedOp absorbTransposeCopy(kernel::FusedOp producer,
                                    kernel::CopyOp copy);

// Repeatedly merges into `fused` the kernels that read its results (through
// views) when every op of theirs is one of `allowed`, and the transposed
// copies of FP8 tensors it quantizes. Returns the final kernel.
kernel::FusedOp absorbConsumers(kernel::FusedOp fused,
                                llvm::ArrayRef<llvm::StringRef> allowed);

// The LM head as the kernel stage leaves it: the fprop GEMM, the one-op
// cross-entropy kernel and its gradient's, and the head's dgrad and wgrad
// GEMMs reading that gradient. No other op reads the logits or their
// gradient; the GEMMs are plain (no FP8 scales, no epilogue) and of one
// parameter, but the wgrad may accumulate into `wgrad.getC()` when
// `wgradMayAccumulate`.
struct LmHead {
  kernel::GemmOp fprop, dgrad, wgrad;
  kernel::FusedOp loss, lossGrad;
  graph::CrossEntropyOp crossEntropy;
  graph::CrossEntropyGradOp crossEntropyGrad;
  // The kernel.fused input behind a block argument of the loss kernels.
  mlir::Value lossInput(mlir::Value inner) const;
  mlir::Value lossGradInput(mlir::Value inner) const;
};
std::optional<LmHead> matchLmHead(kernel::GemmOp fprop,
                                  bool wgradMayAccumulate);

// Whether every reader of `results` comes after `after` in `block` (null:
// the block's start), a view that sits before it counting when all of its
// own readers do: those views are appended to `moved`, readers first, for
// placeViewsAfter once `after` has its replacement.
bool readersFollow(mlir::Block &block, mlir::Operation *after,
                   llvm::ArrayRef<mlir::Value> results,
                   llvm::SmallVectorImpl<mlir::Operation *> &moved);
// The head's input as its wgrad should read it: the forward's where the
// backward only recomputed the same tensor (`recompute` is then that
// kernel, which the rewrite leaves unread), else the wgrad's own
// (`recompute` null).
mlir::Value wgradInputOf(LmHead head, kernel::FusedOp &recompute);
// Moves readersFollow's views behind `last`, each after the one it reads.
void placeViewsAfter(llvm::ArrayRef<mlir::Operation *> moved,
                     mlir::Operation *last);
// Erases the head's kernels (and the recomputed input, if any) that their
// replacement left unread, with the views and saves that lead nowhere:
// readers before what they read.
void eraseReplacedLmHead(LmHead head, mlir::Operation *recompute);

// The one-op, one-result kernel behind `value` (through views), if any.
kernel::FusedOp oneOpKernel(mlir::Value value);

// True if `recompute` recomputes what `original` computed: the same inputs
// (saves aside), the same op with the same attributes but autodiff's
// `recomputed` mark.
bool recomputes(kernel::FusedOp recompute, kernel::FusedOp original);

// True if every op of the body is one of `names`.
bool bodyOnly(kernel::FusedOp fused, llvm::ArrayRef<llvm::StringRef> names);

// Moves every variable read to the top of the function and every write to
// just before its return, where no write (read) of the same variable stands
// in the way: state reads then see the entry values and writes land at exit
// as before, and kernels that read or write state are free to merge.
void normalizeStateAccess(mlir::Operation *func);

// The kernel.fused ops of a function, in order.
llvm::SmallVector<kernel::FusedOp> fusedOps(mlir::Operation *func);

// Calls `fuse` once on each kernel.fused of `func` that `match` accepts, in
// program order. `fuse` may merge and erase any kernel of the function, so
// the function is rescanned after each call rather than walked from a list
// taken up front; `fuse` returns the kernel its work ended in, which is not
// visited again unless a later merge folds it into a new kernel.
void forEachFused(mlir::Operation *func,
                  llvm::function_ref<bool(kernel::FusedOp)> match,
                  llvm::function_ref<kernel::FusedOp(kernel::FusedOp)> fuse);

// True if any op of the body is one of `names` ("graph.rms_norm", ...).
bool bodyHas(kernel::FusedOp fused, llvm::ArrayRef<llvm::StringRef> names);

// The single kernel.fused that produces `value`, looking through views.
kernel::FusedOp producerFused(mlir::Value value);

// Blockwise FP8: whether `value` is read (through reshapes that keep its
// last dimension) only by kernels that do nothing but block-quantize it as
// a 2-D tensor of whole 128 x 128 tiles, and by at least one. The kernel
// that computes it may then take those quantizations in: codegen's tile
// kernel evaluates the value on each tile, and it is never stored.
bool onlyQuantizedInTiles(mlir::Value value);

// `norm` (a kernel of one graph.global_norm) computes this rank's part of a
// gradient norm: its result is all-gathered over the `ranks` ranks of
// `group` and joined (the square root of the sum of the parts' squares);
// every reader of the part reads the joined norm instead.
void joinNormAcrossRanks(kernel::FusedOp norm, llvm::StringRef group,
                         int64_t ranks);

} // namespace octet::fusion

#endif
