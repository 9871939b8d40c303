// octet-split-optimizer: each pipeline rank updates only the parameters of
// its own stage chunks. @optimizer_step becomes one @rank<r>_optimizer_step
// per pipeline rank, holding the AdamW updates, gradient clearing and
// gradient norm of that rank's variables; the norm is the rank's part,
// joined across the pipeline group so that clipping sees the whole
// model's. Every variable a rank alone holds is marked `pipeline_rank`.
// After ZeRO-1 (octet-shard-optimizer) the step is already cut per data
// rank: each rank keeps the per-bucket AdamW updates of its own
// parameters' parts and the all-gathers of those, and its norm of its
// parts is joined over the pipeline group before the data group's join.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Pipeline/Passes.h"
#include "dialects/graph/WeightCache.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/StringMap.h"

namespace octet {
#define GEN_PASS_DEF_OCTETSPLITOPTIMIZER
#include "compiler/Transforms/Pipeline/PipelinePasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

constexpr StringLiteral kPipelineGroup = "pipeline";

struct SplitOptimizer
    : public octet::impl::OctetSplitOptimizerBase<SplitOptimizer> {
  using OctetSplitOptimizerBase::OctetSplitOptimizerBase;

  // Variable name -> the pipeline rank that alone holds it.
  llvm::StringMap<int64_t> owner;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto chunks = module->getAttrOfType<IntegerAttr>("octet.pipeline_chunks");
    if (!chunks)
      return; // not cut into stages: one rank's optimizer
    if (ranks < 1 || chunks.getInt() % ranks != 0) {
      module.emitError("octet-split-optimizer: ")
          << chunks.getInt() << " pipeline chunks do not divide into "
          << int64_t(ranks) << " ranks; give `ranks` the pipeline size";
      return signalPassFailure();
    }
    auto step = module.lookupSymbol<func::FuncOp>("optimizer_step");
    if (!step || step.isExternal()) {
      module.emitError("octet-split-optimizer: needs @optimizer_step");
      return signalPassFailure();
    }
    if (failed(assignOwners(module, chunks.getInt())) ||
        failed(ownOptimizerState(step)))
      return signalPassFailure();
    OpBuilder b(step);
    for (int64_t r = 0; r < ranks; ++r) {
      auto copy = cast<func::FuncOp>(b.clone(*step));
      copy.setSymName(rankOptimizerName(r));
      if (failed(keepRank(copy, r)))
        return signalPassFailure();
    }
    step.erase();
    if (failed(splitInitFunctions(module)))
      return signalPassFailure();
    for (auto var : module.getOps<graph::VariableOp>())
      if (auto it = owner.find(var.getSymName()); it != owner.end())
        var->setAttr("pipeline_rank", b.getI64IntegerAttr(it->second));
  }

  // What runs once before the first step (FP8 recipes' weight casts,
  // octet.init_functions) writes every rank's state: each rank gets
  // @rank<r>_<name> with its own part, and the module lists those.
  LogicalResult splitInitFunctions(ModuleOp module) {
    auto inits = module->getAttrOfType<ArrayAttr>("octet.init_functions");
    if (!inits)
      return success();
    Builder b(module.getContext());
    SmallVector<Attribute> names;
    for (StringRef name : inits.getAsValueRange<StringAttr>()) {
      auto init = module.lookupSymbol<func::FuncOp>(name);
      if (!init)
        return module.emitError("octet-split-optimizer: octet.init_functions "
                                "names @")
               << name << ", which the module does not hold";
      OpBuilder ob(init);
      for (int64_t r = 0; r < ranks; ++r) {
        auto copy = cast<func::FuncOp>(ob.clone(*init));
        copy.setSymName(rankInitName(r, name));
        if (failed(keepRank(copy, r)))
          return failure();
        names.push_back(b.getStringAttr(copy.getSymName()));
      }
      init.erase();
    }
    module->setAttr("octet.init_functions", b.getArrayAttr(names));
    return success();
  }

  // A variable belongs to the rank whose chunk functions read or write it.
  LogicalResult assignOwners(ModuleOp module, int64_t chunks) {
    for (int64_t s = 0; s < chunks; ++s)
      for (const std::string &name :
           {stageForwardName(s), stageBackwardName(s)}) {
        auto fn = module.lookupSymbol<func::FuncOp>(name);
        if (!fn)
          return module.emitError("octet-split-optimizer: no @")
                 << name << "; run octet-split-stages first";
        int64_t rank = s % ranks;
        WalkResult walk = fn.walk([&](Operation *op) {
          StringRef var;
          if (auto load = dyn_cast<graph::LoadOp>(op))
            var = load.getVariable();
          else if (auto store = dyn_cast<graph::StoreOp>(op))
            var = store.getVariable();
          else
            return WalkResult::advance();
          auto [it, added] = owner.try_emplace(var, rank);
          if (!added && it->second != rank) {
            op->emitError("octet-split-optimizer: @")
                << var << " is used by chunks on pipeline ranks "
                << it->second << " and " << rank
                << "; a variable shared across pipeline ranks (tied "
                   "embeddings, a global scale) is not supported";
            return WalkResult::interrupt();
          }
          return WalkResult::advance();
        });
        if (walk.wasInterrupted())
          return failure();
      }
    return success();
  }

  // A parameter's moments go with it (the chunks never touch them).
  LogicalResult ownOptimizerState(func::FuncOp step) {
    WalkResult walk = step.walk([&](graph::AdamWUpdateOp update) {
      auto fused = update->getParentOfType<kernel::FusedOp>();
      auto variableOf = [&](Value inner) -> StringRef {
        Value outer = inner;
        if (auto arg = dyn_cast<BlockArgument>(inner);
            fused && arg && arg.getOwner() == &fused.getBodyBlock())
          outer = fused->getOperand(arg.getArgNumber());
        // ZeRO-1 updates the data rank's part of the parameter.
        if (auto part = outer.getDefiningOp<kernel::RankPartOp>())
          outer = part.getInput();
        auto load = outer.getDefiningOp<graph::LoadOp>();
        return load ? load.getVariable() : StringRef();
      };
      StringRef param = variableOf(update.getParam());
      auto it = owner.find(param);
      // Under FP8 recipes that cast the weights in the optimizer step, the
      // chunks read only the cast (fp8w.<param>): the parameter goes with
      // its cast.
      if (!param.empty() && it == owner.end())
        for (StringRef prefix :
             {graph::kFp8WeightCachePrefix, graph::kBf16WeightCachePrefix})
          if (auto cast = owner.find((prefix + param).str());
              cast != owner.end() && it == owner.end())
            it = owner.try_emplace(param, cast->second).first;
      if (param.empty() || it == owner.end()) {
        update.emitError("octet-split-optimizer: an AdamW update of ")
            << (param.empty() ? StringRef("a value not loaded from a "
                                          "variable")
                              : param)
            << " that no stage chunk reads";
        return WalkResult::interrupt();
      }
      for (Value state : {update.getGrad(), update.getExpAvg(),
                          update.getExpAvgSq()})
        if (StringRef name = variableOf(state); !name.empty())
          owner[name] = it->second;
      castOwners[param] = it->second;
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    // The FP8 state the optimizer step writes from a parameter (its cast,
    // the cast's K-major copy, scale and amax) goes with the parameter,
    // read by the chunks or not.
    for (auto var : step->getParentOfType<ModuleOp>().getOps<graph::VariableOp>()) {
      std::optional<StringRef> rest = graph::weightCacheRest(var.getSymName());
      if (!rest)
        continue;
      StringRef name = *rest;
      for (StringRef param = name; !param.empty();
           param = param.rsplit('.').first) {
        if (auto it = castOwners.find(param); it != castOwners.end()) {
          owner[var.getSymName()] = it->second;
          break;
        }
        if (!param.contains('.'))
          break;
      }
    }
    return success();
  }

  // Parameter -> its rank, for the weight caches named after it.
  llvm::StringMap<int64_t> castOwners;

  bool othersOwn(StringRef var, int64_t rank) const {
    auto it = owner.find(var);
    return it != owner.end() && it->second != rank;
  }

  // A value of other ranks' state: a load of their variable, or what a
  // kernel computed from them (an FP8 weight's amax taken in AdamW feeds
  // the scale kernel, whose scale feeds the weight's cast).
  bool othersOwn(Value value, int64_t rank) const {
    if (othersValues.contains(value))
      return true;
    // ZeRO-1's view of a parameter's or gradient's data-rank part.
    if (auto part = value.getDefiningOp<kernel::RankPartOp>())
      value = part.getInput();
    auto load = value.getDefiningOp<graph::LoadOp>();
    return load && othersOwn(load.getVariable(), rank);
  }

  // Of the function being cut for one rank: the results of kernels it
  // pruned, and those kernels, erased once their later readers are.
  llvm::DenseSet<Value> othersValues;
  SmallVector<Operation *> pruned;

  LogicalResult keepRank(func::FuncOp fn, int64_t rank) {
    othersValues.clear();
    pruned.clear();
    // In program order: a ZeRO-1 all-gather reads AdamW kernels' results
    // and feeds the weights' casts.
    SmallVector<Operation *> kernels;
    for (Operation &op : fn.getBody().front())
      if (isa<kernel::FusedOp, kernel::CollectiveOp>(op))
        kernels.push_back(&op);
    for (Operation *op : kernels) {
      LogicalResult kept =
          isa<kernel::FusedOp>(op)
              ? pruneKernel(cast<kernel::FusedOp>(op), rank)
              : pruneCollective(cast<kernel::CollectiveOp>(op), rank);
      if (failed(kept))
        return failure();
    }
    for (Operation *op : llvm::reverse(pruned)) {
      if (!op->use_empty())
        return (*op->user_begin())->emitError(
                   "octet-split-optimizer: reads what pipeline rank ")
               << rank << " does not compute (another rank's state)";
      op->erase();
    }
    // What is left of other ranks' state: stores (the clearing of their
    // gradient accumulators) and the loads and kernels that fed them.
    SmallVector<graph::StoreOp> stores;
    fn.walk([&](graph::StoreOp store) {
      if (othersOwn(store.getVariable(), rank))
        stores.push_back(store);
    });
    for (graph::StoreOp store : stores)
      store.erase();
    eraseDeadOps(fn);
    // The norm of the rank's own gradients (of its data part, under
    // ZeRO-1, whose join of the data ranks' norms reads a collective and
    // then sees the pipeline-joined ones).
    for (kernel::FusedOp fused : fusion::fusedOps(fn))
      if (fusion::bodyOnly(fused, {"graph.global_norm"}) &&
          llvm::none_of(fused->getOperands(), [](Value v) {
            return v.getDefiningOp<kernel::CollectiveOp>();
          }))
        fusion::joinNormAcrossRanks(fused, kPipelineGroup, ranks);
    return success();
  }

  // ZeRO-1's all-gather of updated parameter parts keeps the rank's own
  // parameters; its results of other ranks' go with their stores, and a
  // kernel that reads them (a weight's FP8 cast) drops them in turn.
  LogicalResult pruneCollective(kernel::CollectiveOp collective,
                                int64_t rank) {
    llvm::BitVector drop(collective->getNumOperands());
    for (OpOperand &operand : collective->getOpOperands())
      if (othersOwn(operand.get(), rank))
        drop.set(operand.getOperandNumber());
    if (drop.none())
      return success();
    if (collective.getKind() != "all_gather")
      return collective.emitError("octet-split-optimizer: a ")
             << collective.getKind() << " over the " << collective.getGroup()
             << " group reads what pipeline rank " << rank
             << " does not compute (another rank's state); only ZeRO-1's "
                "all-gathers of updated parameters are cut per rank";
    for (unsigned i : drop.set_bits())
      for (Operation *user :
           llvm::make_early_inc_range(collective->getResult(i).getUsers())) {
        auto store = dyn_cast<graph::StoreOp>(user);
        if (store ? !othersOwn(store.getVariable(), rank)
                  : !isa<kernel::FusedOp>(user))
          return user->emitError("octet-split-optimizer: reads what "
                                 "pipeline rank ")
                 << rank << " does not compute (another rank's state)";
        if (store)
          store.erase();
        else
          othersValues.insert(collective->getResult(i));
      }
    if (drop.all()) {
      pruned.push_back(collective);
      return success();
    }
    OpBuilder b(collective);
    SmallVector<Value> inputs;
    SmallVector<Type> types;
    for (OpOperand &operand : collective->getOpOperands())
      if (!drop.test(operand.getOperandNumber())) {
        inputs.push_back(operand.get());
        types.push_back(
            collective->getResult(operand.getOperandNumber()).getType());
      }
    OperationState state(collective.getLoc(), collective->getName());
    state.addOperands(inputs);
    state.addTypes(types);
    state.addAttributes(collective->getAttrs());
    Operation *kept = b.create(state);
    for (unsigned i = 0, k = 0; i < collective->getNumResults(); ++i)
      if (!drop.test(i))
        collective->getResult(i).replaceAllUsesWith(kept->getResult(k++));
    pruned.push_back(collective);
    return success();
  }

  // Drops from a kernel the inputs other ranks hold and what they feed:
  // their operands of a norm, their AdamW updates and those results.
  LogicalResult pruneKernel(kernel::FusedOp fused, int64_t rank) {
    Block &body = fused.getBodyBlock();
    llvm::BitVector dropInput(fused->getNumOperands());
    for (OpOperand &operand : fused->getOpOperands())
      if (othersOwn(operand.get(), rank))
        dropInput.set(operand.getOperandNumber());
    if (dropInput.none())
      return success();
    llvm::DenseSet<Value> dead;
    for (unsigned i : dropInput.set_bits())
      dead.insert(body.getArgument(i));
    llvm::BitVector dropResult(fused->getNumResults());
    SmallVector<Operation *> deadOps;
    for (Operation &op : body) {
      if (auto norm = dyn_cast<graph::GlobalNormOp>(op)) {
        for (int i = int(norm->getNumOperands()) - 1; i >= 0; --i)
          if (dead.contains(norm->getOperand(i)))
            norm.getInputsMutable().erase(i);
        if (norm->getNumOperands() == 0)
          return norm.emitError("octet-split-optimizer: pipeline rank ")
                 << rank << " holds none of this norm's gradients";
        continue;
      }
      if (auto yield = dyn_cast<kernel::YieldOp>(op)) {
        for (OpOperand &v : yield->getOpOperands())
          if (dead.contains(v.get()))
            dropResult.set(v.getOperandNumber());
        continue;
      }
      if (llvm::any_of(op.getOperands(),
                       [&](Value v) { return dead.contains(v); })) {
        for (Value r : op.getResults())
          dead.insert(r);
        deadOps.push_back(&op);
      }
    }
    // The dropped results may only be stored into other ranks' variables,
    // or read by later kernels, which drop them in turn.
    for (unsigned i : dropResult.set_bits())
      for (Operation *user : fused->getResult(i).getUsers()) {
        auto store = dyn_cast<graph::StoreOp>(user);
        if (store ? !othersOwn(store.getVariable(), rank)
                  : !isa<kernel::FusedOp, kernel::CollectiveOp>(user))
          return user->emitError("octet-split-optimizer: reads what pipeline "
                                 "rank ")
                 << rank << " does not compute (another rank's state)";
        if (!store)
          othersValues.insert(fused->getResult(i));
      }
    for (unsigned i : dropResult.set_bits())
      for (Operation *user :
           llvm::make_early_inc_range(fused->getResult(i).getUsers()))
        if (isa<graph::StoreOp>(user))
          user->erase();
    // A kernel of other ranks' state alone goes whole.
    if (dropResult.all()) {
      pruned.push_back(fused);
      return success();
    }
    OpBuilder b(fused);
    SmallVector<Value> inputs;
    for (OpOperand &operand : fused->getOpOperands())
      if (!dropInput.test(operand.getOperandNumber()))
        inputs.push_back(operand.get());
    SmallVector<Type> types;
    for (OpResult result : fused->getResults())
      if (!dropResult.test(result.getResultNumber()))
        types.push_back(result.getType());
    auto prunedKernel = kernel::FusedOp::create(
        b, fused.getLoc(), types, inputs, fused.getName(), fused.getKind());
    prunedKernel->setAttrs(fused->getAttrs());
    IRMapping map;
    for (unsigned i = 0, kept = 0; i < body.getNumArguments(); ++i)
      if (!dropInput.test(i))
        map.map(body.getArgument(i),
                prunedKernel.getBodyBlock().getArgument(kept++));
    OpBuilder ib = OpBuilder::atBlockEnd(&prunedKernel.getBodyBlock());
    llvm::DenseSet<Operation *> skip(deadOps.begin(), deadOps.end());
    for (Operation &op : body) {
      if (skip.contains(&op))
        continue;
      if (auto yield = dyn_cast<kernel::YieldOp>(op)) {
        SmallVector<Value> values;
        for (OpOperand &v : yield->getOpOperands())
          if (!dropResult.test(v.getOperandNumber()))
            values.push_back(map.lookup(v.get()));
        kernel::YieldOp::create(ib, yield.getLoc(), values);
        continue;
      }
      ib.clone(op, map);
    }
    for (unsigned i = 0, kept = 0; i < fused->getNumResults(); ++i)
      if (!dropResult.test(i))
        fused->getResult(i).replaceAllUsesWith(
            prunedKernel->getResult(kept++));
    pruned.push_back(fused);
    return success();
  }

  // Loads and kernels nothing reads any more.
  static void eraseDeadOps(func::FuncOp fn) {
    bool erased = true;
    while (erased) {
      erased = false;
      SmallVector<Operation *> dead;
      for (Operation &op : fn.getBody().front())
        if (op.getNumResults() > 0 && op.use_empty() &&
            isa<graph::LoadOp, kernel::FusedOp, kernel::RankPartOp>(op))
          dead.push_back(&op);
      for (Operation *op : llvm::reverse(dead))
        op->erase();
      erased = !dead.empty();
    }
  }
};

} // namespace
