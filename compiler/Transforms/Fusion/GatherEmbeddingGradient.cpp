// octet-gather-embedding-gradient: the untied token embedding's gradient is
// made whole on every data-parallel rank from the gathered inputs of its
// kernel, in every microbatch, instead of reducing the (vocab x hidden) f32
// accumulator at the end of the backward.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

namespace octet {
#define GEN_PASS_DEF_OCTETGATHEREMBEDDINGGRADIENT
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

constexpr StringRef kGradientPrefix = "grad.";

RankedTensorType gatheredType(RankedTensorType part, int64_t ranks) {
  SmallVector<int64_t> shape(part.getShape());
  shape[0] *= ranks;
  return RankedTensorType::get(shape, part.getElementType());
}

struct GatherEmbeddingGradient
    : public octet::impl::OctetGatherEmbeddingGradientBase<
          GatherEmbeddingGradient> {
  using OctetGatherEmbeddingGradientBase::OctetGatherEmbeddingGradientBase;

  void runOnOperation() override {
    if (dataParallel <= 1)
      return;
    auto func = getOperation().lookupSymbol<func::FuncOp>("train_microbatch");
    if (!func || func.isExternal())
      return;
    SmallVector<kernel::FusedOp> kernels;
    for (kernel::FusedOp fused : fusion::fusedOps(func))
      if (!fused.getBodyBlock().getOps<graph::EmbeddingGradOp>().empty())
        kernels.push_back(fused);
    for (kernel::FusedOp fused : kernels)
      gather(fused);
  }

  // The store of `fused`'s only result when the kernel makes a grad.*
  // accumulator from the embedding gradient alone: its inputs are the rows
  // (output gradient, token ids) and the accumulator, loaded for it alone
  // and loaded and stored once in the program; its body adds the embedding
  // gradient to the accumulator and yields the sum, which is only stored
  // back. A tied embedding's kernel also adds the LM head's dense wgrad (an
  // input of its own, or the accumulator reaching it through that GEMM),
  // which every rank has for its own rows only: no store is returned, and
  // the accumulator keeps its reduction.
  graph::StoreOp soleAccumulatorStore(kernel::FusedOp fused,
                                      graph::EmbeddingGradOp grad) {
    Block &body = fused.getBodyBlock();
    if (fused->getNumResults() != 1 || !fused->getResult(0).hasOneUse() ||
        fused.getInputs().size() != 3 || body.getOperations().size() != 3)
      return nullptr;
    auto yield = cast<kernel::YieldOp>(body.getTerminator());
    auto sum = yield->getNumOperands() == 1
                   ? yield->getOperand(0).getDefiningOp<graph::AddOp>()
                   : nullptr;
    if (!sum || sum->getBlock() != &body)
      return nullptr;
    Value acc = sum->getOperand(0) == grad.getResult() ? sum->getOperand(1)
                                                       : sum->getOperand(0);
    auto accArg = dyn_cast<BlockArgument>(acc);
    if (!accArg || accArg.getOwner() != &body ||
        !llvm::is_contained(sum->getOperands(), grad.getResult()))
      return nullptr;
    auto store = dyn_cast<graph::StoreOp>(*fused->getResult(0).user_begin());
    if (!store || !store.getVariable().starts_with(kGradientPrefix))
      return nullptr;
    auto load = fused.getInputs()[accArg.getArgNumber()]
                    .getDefiningOp<graph::LoadOp>();
    if (!load || load.getVariable() != store.getVariable() ||
        !load->hasOneUse())
      return nullptr;
    int stores = 0, loads = 0;
    for (Operation &op : *fused->getBlock()) {
      if (auto s = dyn_cast<graph::StoreOp>(op))
        stores += s.getVariable() == store.getVariable();
      if (auto l = dyn_cast<graph::LoadOp>(op))
        loads += l.getVariable() == store.getVariable();
    }
    return stores == 1 && loads == 1 ? store : nullptr;
  }

  static int64_t bytesOf(Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    return type.getNumElements() *
           std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  }

  // Whether gathering sends fewer bytes a rank each step than reducing the
  // accumulator would (ring algorithms, as NCCL runs them): an all-gather
  // of parts of P bytes sends (data - 1) P, every microbatch; a
  // reduce-scatter of S bytes sends (data - 1) S / data, an all-reduce
  // twice that, once a step. So the rows win while microbatches x data x P
  // stays under S (2 S replicated): the whole step's tokens x (hidden x 2 B
  // + 4 B) against the table's f32 bytes. Past that (a global batch of more
  // tokens than about twice the vocabulary a step, sharded) the
  // accumulator keeps its reduction.
  bool fewerBytes(kernel::FusedOp fused, ArrayRef<unsigned> gathered,
                  graph::StoreOp store) const {
    int64_t part = 0;
    for (unsigned i : gathered)
      part += bytesOf(fused.getInputs()[i]);
    int64_t table = bytesOf(store.getValue());
    int64_t reduced = shardedOptimizer ? table : 2 * table;
    return int64_t(microbatches) * int64_t(dataParallel) * part <= reduced;
  }

  // Any kernel of another shape (a tied embedding's, or one that fused
  // more into it) keeps its accumulator's reduction, which is always right.
  void gather(kernel::FusedOp fused) {
    Block &body = fused.getBodyBlock();
    auto grads = llvm::to_vector(body.getOps<graph::EmbeddingGradOp>());
    if (grads.size() != 1)
      return;
    graph::EmbeddingGradOp grad = grads.front();
    graph::StoreOp store = soleAccumulatorStore(fused, grad);
    if (!store)
      return;

    // The rows the kernel scatters (the output gradient and the token ids)
    // are its own inputs, read by the embedding gradient alone: their
    // dimension 0 grows to the data group's rows.
    SmallVector<unsigned> gathered;
    for (Value inner : {grad.getIds(), grad.getGrad()}) {
      auto arg = dyn_cast<BlockArgument>(inner);
      if (!arg || arg.getOwner() != &body || !arg.hasOneUse())
        return;
      gathered.push_back(arg.getArgNumber());
    }
    if (!fewerBytes(fused, gathered, store))
      return;

    // On the compute stream, every microbatch: the kernel waits for them,
    // and their results are new buffers, which the communication stream's
    // collectives (in place or into variables) cannot write. One call each
    // (the token ids, then the output gradient), so that each reads as its
    // own NCCL call of its own element type.
    OpBuilder b(fused);
    for (unsigned i : gathered) {
      Value part = fused.getInputs()[i];
      auto type = cast<RankedTensorType>(part.getType());
      auto all = kernel::CollectiveOp::create(
          b, fused.getLoc(), TypeRange{gatheredType(type, dataParallel)},
          ValueRange{part}, "all_gather", "data", dataParallel, "sum");
      all->setAttr("layer", b.getI64IntegerAttr(fusion::layerOf(fused)));
      all->setAttr("section", b.getStringAttr("backward"));
      Value whole = all.getResult(0);
      fused->setOperand(i, whole);
      body.getArgument(i).setType(whole.getType());
    }
    store->setAttr(fusion::kSummedOverDataAttr, b.getUnitAttr());
  }
};

} // namespace
