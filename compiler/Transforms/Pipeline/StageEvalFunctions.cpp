// octet-stage-eval-functions: per pipeline chunk whose forward writes
// state, a forward for evaluation that writes none
// (compiler/Transforms/Pipeline/PipelinePasses.td).
//
// Made from the chunk's training forward, not by cutting @forward (the
// one-rank evaluation function) again: the training forward already has
// the cut, its edge tensors in the order the transfers move them and the
// stash slots the receives land in, so the evaluation function's inputs
// and edge results are the training forward's own and a forward-only list
// can move them unchanged. What it drops is exactly what evaluation must
// not do. The training forward reads every piece of state it also writes
// as it was before its own update ran (octet-split-stages loads it before
// the writer), so with the stores gone each GEMM casts with the scales
// one rank's @forward reads, and the values only the stores and the stash
// needed (amax reductions, scale updates, the copies of the scales kept
// for the backward, the transposed FP8 copies only the backward reads)
// have no reader left. Cutting @forward would repeat octet-split-stages'
// partition on a second function whose fusion differs, and would need its
// edges matched to the training forward's by hand.

#include "compiler/Transforms/Pipeline/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

namespace octet {
#define GEN_PASS_DEF_OCTETSTAGEEVALFUNCTIONS
#include "compiler/Transforms/Pipeline/PipelinePasses.h.inc"

std::string stageEvalName(int64_t stage) {
  return "stage" + std::to_string(stage) + "_eval";
}
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

// A fused kernel without the results nobody reads, so that it neither
// computes nor gets memory for them (a quantize's transposed copy, its
// amax). Its body's ops that fed only those go too.
void dropUnreadResults(kernel::FusedOp fused) {
  SmallVector<unsigned> kept;
  for (OpResult r : fused->getResults())
    if (!r.use_empty())
      kept.push_back(r.getResultNumber());
  if (kept.size() == fused->getNumResults() || kept.empty())
    return;
  Block &inner = fused.getBodyBlock();
  auto yield = cast<kernel::YieldOp>(inner.getTerminator());
  SmallVector<Type> types;
  SmallVector<Value> yielded;
  for (unsigned i : kept) {
    types.push_back(fused->getResult(i).getType());
    yielded.push_back(yield.getOperand(i));
  }
  OpBuilder b(fused);
  auto narrow = kernel::FusedOp::create(b, fused.getLoc(), types,
                                        fused->getOperands(), fused.getName(),
                                        fused.getKind());
  narrow->setAttrs(fused->getAttrs());
  narrow.getRegion().takeBody(fused.getRegion());
  Block &moved = narrow.getBodyBlock();
  auto oldYield = cast<kernel::YieldOp>(moved.getTerminator());
  OpBuilder ib(oldYield);
  kernel::YieldOp::create(ib, oldYield.getLoc(), yielded);
  oldYield.erase();
  for (auto [n, i] : llvm::enumerate(kept))
    fused->getResult(i).replaceAllUsesWith(narrow->getResult(n));
  fused.erase();
  // The body's ops no yield reads, innermost first.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(moved)))
    if (!op.hasTrait<OpTrait::IsTerminator>() && op.getNumResults() > 0 &&
        op.use_empty())
      op.erase();
}

struct StageEvalFunctions
    : public octet::impl::OctetStageEvalFunctionsBase<StageEvalFunctions> {
  using OctetStageEvalFunctionsBase::OctetStageEvalFunctionsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto chunks = module->getAttrOfType<IntegerAttr>("octet.pipeline_chunks");
    if (!chunks) {
      module.emitError("octet-stage-eval-functions: the module is not cut "
                       "into pipeline chunks; run octet-split-stages first");
      return signalPassFailure();
    }
    for (int64_t s = 0; s < chunks.getInt(); ++s) {
      auto forward = module.lookupSymbol<func::FuncOp>(stageForwardName(s));
      if (!forward || forward.isExternal()) {
        module.emitError("octet-stage-eval-functions: the module has no @")
            << stageForwardName(s) << " (octet-split-stages makes one per "
            << "chunk)";
        return signalPassFailure();
      }
      if (failed(makeEval(forward, s)))
        return signalPassFailure();
    }
  }

  LogicalResult makeEval(func::FuncOp forward, int64_t stage) {
    // A forward that writes nothing already is one evaluation can run.
    if (forward.getBody().front().getOps<graph::StoreOp>().empty())
      return success();
    auto edges = forward->getAttrOfType<IntegerAttr>("octet.edge_results");
    if (!edges)
      return forward.emitError("octet-stage-eval-functions: @")
             << forward.getSymName()
             << " has no octet.edge_results (octet-split-stages sets it)";
    auto loss = forward.getResultAttrOfType<StringAttr>(0, "graph.name");
    unsigned lead = loss && loss.getValue() == "loss" ? 1 : 0;
    unsigned keep = lead + unsigned(edges.getInt());
    if (keep > forward.getNumResults())
      return forward.emitError("octet-stage-eval-functions: @")
             << forward.getSymName() << " returns "
             << forward.getNumResults() << " values, fewer than its "
             << edges.getInt() << " edge results";

    OpBuilder builder(forward);
    builder.setInsertionPointAfter(forward);
    auto eval = cast<func::FuncOp>(builder.clone(*forward));
    eval.setSymName(stageEvalName(stage));
    Block &body = eval.getBody().front();
    for (auto store : llvm::make_early_inc_range(body.getOps<graph::StoreOp>()))
      store.erase();
    // The loss and the activation edge; the stash is the backward's.
    Operation *ret = body.getTerminator();
    ret->eraseOperands(keep, ret->getNumOperands() - keep);
    SmallVector<DictionaryAttr> resultAttrs;
    for (unsigned i = 0; i < keep; ++i)
      resultAttrs.push_back(forward.getResultAttrDict(i));
    eval.setType(builder.getFunctionType(
        eval.getArgumentTypes(), ret->getOperandTypes()));
    for (auto [i, attrs] : llvm::enumerate(resultAttrs))
      if (attrs)
        eval.setResultAttrs(unsigned(i), attrs);
    // What only the stores and the stash read, latest first so that a
    // chain goes in one sweep; a kernel keeps only the results read.
    bool changed = true;
    while (changed) {
      changed = false;
      for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body))) {
        if (op.hasTrait<OpTrait::IsTerminator>() || op.getNumResults() == 0)
          continue;
        if (op.use_empty()) {
          op.erase();
          changed = true;
        } else if (auto fused = dyn_cast<kernel::FusedOp>(op);
                   fused && llvm::any_of(fused->getResults(),
                                         [](Value r) { return r.use_empty(); })) {
          dropUnreadResults(fused);
          changed = true;
        }
      }
    }
    eval->setAttr("octet.phase", builder.getStringAttr("eval"));
    return success();
  }
};

} // namespace
