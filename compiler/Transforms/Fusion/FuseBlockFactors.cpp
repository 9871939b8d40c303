// octet-fuse-block-factors: a block-scaled GEMM's dequantization factors
// written by the kernels that quantize its operands, in cuBLASLt's layout,
// instead of by a launch of their own before each call.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

#include "dialects/fp8/Fp8Dialect.h"

#include "llvm/ADT/MapVector.h"

namespace octet {
#define GEN_PASS_DEF_OCTETFUSEBLOCKFACTORS
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

// Where a GEMM's quantize scales come from: the kernel that quantizes the
// operand (its scales written by the block-quantize codegen, directly or
// as the scales of its fp8.transpose), seen through the graph.save that
// carries a forward tensor to the backward.
struct ScaleSource {
  kernel::FusedOp producer;
  // The scales as the producer's result, and inside its body.
  Value result, inner;
  graph::SaveOp save;
};

std::optional<ScaleSource> sourceOf(Value scales) {
  ScaleSource s;
  s.result = scales;
  if ((s.save = scales.getDefiningOp<graph::SaveOp>()))
    s.result = s.save.getInput();
  auto result = dyn_cast<OpResult>(s.result);
  if (!result)
    return std::nullopt;
  s.producer = dyn_cast<kernel::FusedOp>(result.getOwner());
  if (!s.producer)
    return std::nullopt;
  s.inner = s.producer.getBodyBlock().getTerminator()->getOperand(
      result.getResultNumber());
  auto quantize = s.inner.getDefiningOp<fp8::BlockQuantizeOp>();
  if (auto transpose = s.inner.getDefiningOp<fp8::TransposeOp>();
      transpose && transpose.getResultScale() == s.inner)
    quantize = transpose.getScale().getDefiningOp<fp8::BlockQuantizeOp>();
  else if (quantize && quantize.getScales() != s.inner)
    quantize = nullptr;
  // Power-of-two scales only: their factors are exact, so a GEMM that
  // multiplies by them (cuBLASLt, the interpreter's kernel.gemm on
  // factors) gives the bits of one that divides by the scales (the
  // interpreter's kernel.gemm on scales, and fp8.matmul above it). Other
  // scales keep the factors launch before the call.
  if (!quantize || !quantize.getPowerOfTwo())
    return std::nullopt;
  return s;
}

// The producer's result that holds fp8.block_factors of `inner` in
// `block`'s layout, if it has one.
Value existingFactors(ScaleSource s, ArrayRef<int64_t> block) {
  Operation *yield = s.producer.getBodyBlock().getTerminator();
  for (auto [i, v] : llvm::enumerate(yield->getOperands()))
    if (auto f = v.getDefiningOp<fp8::BlockFactorsOp>();
        f && f.getScales() == s.inner && f.getBlock() == block)
      return s.producer->getResult(i);
  return nullptr;
}

// Points every operand in `uses` (GEMM scale operands of one producer's
// scales, directly or through graph.save ops, all in `block`'s layout) at
// factors that the producer's kernel writes, as a new result of it: one
// result for them all, one graph.save of it in place of each save of the
// scales. All uses move before the kernels merge, so that a scales result
// nothing else reads leaves the kernel. Fails only if the kernels cannot
// be merged, which cannot happen for a kernel right after the producer
// that reads nothing else.
LogicalResult useFactors(ArrayRef<OpOperand *> uses, ArrayRef<int64_t> block) {
  ScaleSource s = *sourceOf(uses.front()->get());
  Value factors = existingFactors(s, block);
  kernel::FusedOp wrapped;
  if (!factors) {
    OpBuilder builder(s.producer->getContext());
    builder.setInsertionPointAfter(s.producer);
    auto scaleType = cast<RankedTensorType>(s.result.getType());
    int64_t count = fp8::BlockFactorsOp::factorCount(
        scaleType.getDimSize(0), scaleType.getDimSize(1), block);
    auto op = fp8::BlockFactorsOp::create(
        builder, s.producer.getLoc(),
        RankedTensorType::get({count}, scaleType.getElementType()), s.result,
        builder.getDenseI64ArrayAttr(block));
    for (StringRef name : {"layer", "section"})
      if (Attribute attr = s.producer->getAttr(name))
        op->setAttr(name, attr);
    wrapped = fusion::wrapInFused(builder, op, s.producer.getName());
    factors = wrapped->getResult(0);
  }
  llvm::MapVector<Operation *, Value> saves;
  for (OpOperand *use : uses) {
    Value value = factors;
    if (auto save = use->get().getDefiningOp<graph::SaveOp>()) {
      Value &saved = saves[save];
      if (!saved) {
        OpBuilder builder(save);
        auto made = graph::SaveOp::create(builder, save.getLoc(),
                                          factors.getType(), factors);
        made->setAttrs(save->getAttrs());
        saved = made.getResult();
      }
      value = saved;
    }
    use->set(value);
  }
  for (auto &[save, saved] : saves)
    if (save->use_empty())
      save->erase();
  if (wrapped && !fusion::mergeFused(s.producer, wrapped))
    return wrapped->emitOpError("could not join the kernel that quantizes "
                                "this GEMM operand"),
           failure();
  return success();
}

struct FuseBlockFactors
    : public octet::impl::OctetFuseBlockFactorsBase<FuseBlockFactors> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      // The scale operands of the GEMMs whose two operands' scales come
      // from quantize kernels (a GEMM reads factors of both or scales of
      // both), by the producer's scales result and layout.
      llvm::MapVector<std::pair<Value, int64_t>, SmallVector<OpOperand *>>
          groups;
      func.walk([&](kernel::GemmOp gemm) {
        if (!gemm.getABlock() || !gemm.getAScale() ||
            cast<RankedTensorType>(gemm.getAScale().getType()).getRank() != 2)
          return;
        std::optional<ScaleSource> a = sourceOf(gemm.getAScale());
        std::optional<ScaleSource> b = sourceOf(gemm.getBScale());
        if (!a || !b)
          return;
        // Blocks are [1, 128] or [128, 128]: the first side names the
        // layout.
        groups[{a->result, (*gemm.getABlock())[0]}].push_back(
            &gemm.getAScaleMutable()[0]);
        groups[{b->result, (*gemm.getBBlock())[0]}].push_back(
            &gemm.getBScaleMutable()[0]);
      });
      for (auto &[key, uses] : groups) {
        SmallVector<int64_t> block = {key.second, 128};
        if (failed(useFactors(uses, block)))
          return signalPassFailure();
      }
    }
  }
};

} // namespace
