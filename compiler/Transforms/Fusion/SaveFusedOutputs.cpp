// octet-save-fused-outputs: the saved slices of one tensor (q, k and v of
// the fused QKV GEMM; gate and up) become slices of one save of the tensor.

#include "compiler/Transforms/Fusion/Passes.h"

#include "llvm/ADT/MapVector.h"

namespace octet {
#define GEN_PASS_DEF_OCTETSAVEFUSEDOUTPUTS
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

int64_t elements(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements();
}

struct SaveFusedOutputs
    : public octet::impl::OctetSaveFusedOutputsBase<SaveFusedOutputs> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal())
        saveWholes(func);
  }

  void saveWholes(func::FuncOp func) {
    // The saves of slices, by the tensor sliced, in program order.
    llvm::MapVector<Value, SmallVector<graph::SaveOp>> bySource;
    func.walk([&](graph::SaveOp save) {
      if (auto slice = save.getInput().getDefiningOp<graph::SliceOp>())
        bySource[slice.getInput()].push_back(save);
    });
    for (auto &[source, saves] : bySource) {
      // Distinct slices: two saves of one slice keep its bytes once.
      llvm::SetVector<Value> slices;
      for (graph::SaveOp save : saves)
        slices.insert(save.getInput());
      int64_t saved = 0;
      for (Value slice : slices)
        saved += elements(slice);
      // Saving the whole must not keep more bytes than the slices did.
      if (saved < elements(source))
        continue;
      graph::SaveOp whole = existingSave(source);
      if (whole && saves.front()->isBeforeInBlock(whole))
        whole->moveBefore(saves.front());
      if (!whole) {
        OpBuilder b(saves.front());
        whole = graph::SaveOp::create(b, saves.front().getLoc(),
                                      source.getType(), source);
        whole->setAttrs(saves.front()->getAttrs());
      }
      for (graph::SaveOp save : saves) {
        auto slice = save.getInput().getDefiningOp<graph::SliceOp>();
        // At the part's first reader (in the backward): a part that must be
        // made contiguous (v for attention) is then copied where it is read,
        // not in the forward, where the copy would live until then.
        Operation *first = nullptr;
        for (Operation *user : save->getUsers()) {
          Operation *top = save->getBlock()->findAncestorOpInBlock(*user);
          if (top && (!first || top->isBeforeInBlock(first)))
            first = top;
        }
        OpBuilder b(first ? first : save.getOperation());
        auto part = graph::SliceOp::create(
            b, save.getLoc(), save.getType(), whole.getResult(),
            slice.getDimAttr(), slice.getOffsetAttr());
        save.replaceAllUsesWith(part.getResult());
        save.erase();
        // The forward's slice stays while the forward reads it.
        if (slice->use_empty())
          slice.erase();
      }
    }
  }

  // The tensor's own save, if autodiff made one (its first).
  static graph::SaveOp existingSave(Value source) {
    graph::SaveOp first;
    for (Operation *user : source.getUsers())
      if (auto save = dyn_cast<graph::SaveOp>(user))
        if (!first || save->isBeforeInBlock(first))
          first = save;
    return first;
  }
};

} // namespace
