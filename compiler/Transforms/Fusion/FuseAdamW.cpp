// octet-fuse-adamw: every AdamW update of a function in one multi-tensor
// kernel, with the zeroing of the gradient accumulators.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

namespace octet {
#define GEN_PASS_DEF_OCTETFUSEADAMW
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

struct FuseAdamW : public octet::impl::OctetFuseAdamWBase<FuseAdamW> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      fusion::normalizeStateAccess(func);
      SmallVector<kernel::FusedOp> members;
      for (kernel::FusedOp fused : fusion::fusedOps(func))
        if (fusion::bodyOnly(fused, {"graph.adamw_update"}) ||
            (fusion::bodyOnly(fused, {"graph.fill"}) &&
             fused.getInputs().empty() &&
             llvm::all_of(fused->getUsers(), [](Operation *u) {
               auto store = dyn_cast<graph::StoreOp>(u);
               return store && store.getVariable().starts_with("grad.");
             })))
          members.push_back(fused);
      if (members.size() < 2)
        continue;
      kernel::FusedOp batch = members.front();
      for (kernel::FusedOp next : ArrayRef(members).drop_front())
        if (auto merged = fusion::mergeFused(batch, next, "optimizer.adamw",
                                             "multi_tensor"))
          batch = merged;
        else
          batch = next;
      batch->setAttr("layer", OpBuilder(batch).getI64IntegerAttr(-1));
    }
  }
};

} // namespace
