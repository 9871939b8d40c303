// octet-overwrite-gradients: a wgrad GEMM that is the only writer of its
// gradient accumulator writes it (beta = 0) in the first microbatch of a
// step instead of adding to it, so the optimizer step no longer clears that
// accumulator. Such an accumulator holds nothing between steps: it is
// marked `step_local` (dialects/graph/StepLocal.h), and the memory plan
// shares its bytes with the activations outside the step's window. With one
// microbatch a step, the other accumulators the optimizer clears (the
// embedding's scatter, the norms' column sums) are cleared at the start of
// the train program instead, just before their first access, and are
// step-local as well; the embedding's scatter then starts from zero in its
// own kernel, without reading the accumulator.

#include "compiler/Transforms/Fusion/Passes.h"
#include "dialects/graph/StepLocal.h"

#include "llvm/ADT/StringSet.h"

namespace octet {
#define GEN_PASS_DEF_OCTETOVERWRITEGRADIENTS
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

constexpr StringLiteral kOverwrite = "first_microbatch_overwrites";

struct VariableUses {
  SmallVector<graph::LoadOp> loads;
  SmallVector<graph::StoreOp> stores;
};

llvm::StringMap<VariableUses> usesIn(func::FuncOp func) {
  llvm::StringMap<VariableUses> uses;
  func.walk([&](Operation *op) {
    if (auto load = dyn_cast<graph::LoadOp>(op))
      uses[load.getVariable()].loads.push_back(load);
    else if (auto store = dyn_cast<graph::StoreOp>(op))
      uses[store.getVariable()].stores.push_back(store);
  });
  return uses;
}

// The GEMM that makes the whole new value of the accumulator from its one
// read of the old one: `load` feeds only its accumulate operand, and what is
// stored is its result, or that result through the data-parallel
// all-reduce (which, in place, keeps it the accumulator's value). The
// result may go through a chain of wgrad GEMMs of the same parameter, each
// accumulating into the one before and its only reader (the head's wgrad
// over token chunks, octet-chunk-lm-head): the first of them is returned.
kernel::GemmOp soleAccumulatingGemm(graph::LoadOp load,
                                    graph::StoreOp store) {
  if (!load->hasOneUse())
    return {};
  auto gemm = dyn_cast<kernel::GemmOp>(*load->getUsers().begin());
  if (!gemm || gemm.getC() != load.getResult() ||
      gemm.getRoleAttr() != StringAttr::get(gemm.getContext(), "wgrad"))
    return {};
  Value last = gemm.getResult();
  while (last.hasOneUse()) {
    auto next = dyn_cast<kernel::GemmOp>(*last.getUsers().begin());
    if (!next || next.getC() != last || next.getA() == last ||
        next.getB() == last || next.getRoleAttr() != gemm.getRoleAttr() ||
        next.getParamAttr() != gemm.getParamAttr())
      break;
    last = next.getResult();
  }
  Value stored = store.getValue();
  if (stored == last)
    return gemm;
  auto result = dyn_cast<OpResult>(stored);
  auto all = result ? dyn_cast<kernel::CollectiveOp>(result.getOwner())
                    : kernel::CollectiveOp();
  if (all && all.getLastMicrobatch() &&
      all->getOperand(result.getResultNumber()) == last && last.hasOneUse())
    return gemm;
  return {};
}

// A zero tensor made only to be stored: a graph.fill of 0, or the one-op
// kernel fusion makes of it (the memsets the bundle emits for them).
bool isZeroForStores(Operation *op) {
  if (auto fused = dyn_cast<kernel::FusedOp>(op))
    return fused.isStoredZeroFill();
  auto fill = dyn_cast<graph::FillOp>(op);
  return fill && fill.getValue().isZero();
}

struct OverwriteGradients
    : public octet::impl::OctetOverwriteGradientsBase<OverwriteGradients> {
  using OctetOverwriteGradientsBase::OctetOverwriteGradientsBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto train = module.lookupSymbol<func::FuncOp>("train_microbatch");
    auto optimizer = module.lookupSymbol<func::FuncOp>("optimizer_step");
    if (!train || train.isExternal() || !optimizer || optimizer.isExternal())
      return;
    llvm::StringMap<VariableUses> trainUses = usesIn(train);
    llvm::StringMap<VariableUses> optimizerUses = usesIn(optimizer);
    // Other functions (eval, init) must leave the accumulators alone: the
    // value they would see is no longer zero between steps.
    llvm::StringSet<> elsewhere;
    for (auto func : module.getOps<func::FuncOp>())
      if (func != train && func != optimizer)
        for (auto &[name, uses] : usesIn(func))
          elsewhere.insert(name);

    for (auto var : module.getOps<graph::VariableOp>()) {
      StringRef name = var.getSymName();
      if (!name.starts_with("grad.") || elsewhere.contains(name))
        continue;
      auto t = trainUses.find(name);
      auto o = optimizerUses.find(name);
      if (t == trainUses.end() || o == optimizerUses.end() ||
          o->second.stores.size() != 1)
        continue;
      graph::StoreOp clear = o->second.stores[0];
      Operation *zero = clear.getValue().getDefiningOp();
      if (!zero || !isZeroForStores(zero) ||
          clear->getParentOp() != optimizer.getOperation())
        continue;
      // A read after the clearing store would see the old gradient.
      if (llvm::any_of(o->second.loads, [&](graph::LoadOp load) {
            return clear->isBeforeInBlock(load);
          }))
        continue;
      kernel::GemmOp gemm =
          t->second.loads.size() == 1 && t->second.stores.size() == 1
              ? soleAccumulatingGemm(t->second.loads[0], t->second.stores[0])
              : kernel::GemmOp();
      if (gemm)
        gemm->setAttr(kOverwrite, UnitAttr::get(&getContext()));
      else if (microbatches != 1 || !clearInTrain(train, t->second, clear))
        continue;
      var->setAttr(graph::kStepLocalAttr, UnitAttr::get(&getContext()));
      clear.erase();
      if (zero->use_empty())
        zero->erase();
    }
  }

  // With one microbatch a step, an embedding's table gradient that only
  // adds its scatter to the accumulator's one load (acc + scatter-add(dy))
  // starts from zero: the kernel makes it without the accumulator (its
  // first launch writes the table's zeros rather than reading a cleared
  // table, after a memset, and writing it again: 3 passes over the f32
  // table become one). The column sums of the norms keep their memset:
  // a few KiB.
  static bool dropZeroStart(const VariableUses &uses) {
    if (uses.loads.size() != 1 || !uses.loads[0]->hasOneUse())
      return false;
    graph::LoadOp load = uses.loads[0];
    auto fused = dyn_cast<kernel::FusedOp>(*load->getUsers().begin());
    if (!fused)
      return false;
    unsigned index = load->getUses().begin()->getOperandNumber();
    BlockArgument start = fused.getBodyBlock().getArgument(index);
    if (!start.hasOneUse())
      return false;
    auto add = dyn_cast<graph::AddOp>(*start.getUsers().begin());
    if (!add)
      return false;
    Value scatter = add.getLhs() == start ? add.getRhs() : add.getLhs();
    if (!scatter.getDefiningOp<graph::EmbeddingGradOp>() ||
        scatter.getType() != add.getType())
      return false;
    add.getResult().replaceAllUsesWith(scatter);
    add.erase();
    fused->eraseOperand(index);
    fused.getBodyBlock().eraseArgument(index);
    load.erase();
    return true;
  }

  // With one microbatch a step, clearing an accumulator at the start of
  // the train program is clearing it once a step: `clear` (a memset) is
  // copied just before the first op that reads a load of the variable or
  // stores it, and the loads placed earlier (state reads sit at the top
  // of the program) move behind it, so the bytes are the accumulator's
  // from the end of the backward on rather than through the forward.
  static bool clearInTrain(func::FuncOp train, const VariableUses &uses,
                           graph::StoreOp clear) {
    if (dropZeroStart(uses))
      return true;
    Block &body = train.getBody().front();
    Operation *first = nullptr;
    auto consider = [&](Operation *access) {
      Operation *top = body.findAncestorOpInBlock(*access);
      if (top && (!first || top->isBeforeInBlock(first)))
        first = top;
    };
    for (graph::LoadOp load : uses.loads) {
      if (load->getBlock() != &body)
        return false;
      for (Operation *user : load->getUsers())
        consider(user);
    }
    for (graph::StoreOp store : uses.stores)
      consider(store);
    if (!first)
      return false;
    OpBuilder b(first);
    Operation *zero = b.clone(*clear.getValue().getDefiningOp());
    Operation *store = b.clone(*clear.getOperation());
    store->setOperand(0, zero->getResult(0));
    for (graph::LoadOp load : uses.loads)
      if (load->isBeforeInBlock(store))
        load->moveAfter(store);
    return true;
  }
};

} // namespace
