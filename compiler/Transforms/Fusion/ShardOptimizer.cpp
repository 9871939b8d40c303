// octet-shard-optimizer: ZeRO-1 over the data-parallel ranks. Each rank
// keeps the moments of, and updates, only its part of every parameter; the
// gradient buckets are reduce-scattered instead of all-reduced, and the
// updated parts are all-gathered back into every rank's parameters.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

namespace octet {
#define GEN_PASS_DEF_OCTETSHARDOPTIMIZER
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

constexpr StringLiteral kGradientPrefix = "grad.";
constexpr StringLiteral kDataGroup = "data";
// Marks a kernel of splitWeightCasts until the all-gather feeds it.
constexpr StringLiteral kWeightCast = "octet.sharded_weight_cast";

RankedTensorType partType(RankedTensorType full, int64_t parts) {
  SmallVector<int64_t> shape(full.getShape());
  shape[0] /= parts;
  return RankedTensorType::get(shape, full.getElementType());
}

struct ShardOptimizer
    : public octet::impl::OctetShardOptimizerBase<ShardOptimizer> {
  using OctetShardOptimizerBase::OctetShardOptimizerBase;

  void runOnOperation() override {
    if (dataParallel <= 1)
      return;
    ModuleOp module = getOperation();
    auto train = module.lookupSymbol<func::FuncOp>("train_microbatch");
    auto optimizer = module.lookupSymbol<func::FuncOp>("optimizer_step");
    if (!train || train.isExternal() || !optimizer || optimizer.isExternal()) {
      module.emitError("octet-shard-optimizer: needs @train_microbatch and "
                       "@optimizer_step (the train step autodiff makes)");
      return signalPassFailure();
    }
    llvm::StringMap<unsigned> scattered;
    if (failed(scatterGradients(train, scattered)) ||
        failed(shardStep(module, optimizer, scattered)) ||
        (shardCastWeights && failed(narrowCastWeights(module, optimizer))))
      signalPassFailure();
  }

  // The gradient all-reduces of octet-reduce-gradients become in-place
  // reduce-scatters: each rank's part of every accumulator gets the sum
  // over the ranks, which is all its optimizer reads. `scattered` maps each
  // accumulator to its bucket's index in the backward's order.
  LogicalResult scatterGradients(func::FuncOp train,
                                 llvm::StringMap<unsigned> &scattered) {
    SmallVector<kernel::CollectiveOp> buckets;
    train.walk([&](kernel::CollectiveOp coll) {
      if (coll.getKind() == "all_reduce" && coll.getReduction() == "sum" &&
          coll.getLastMicrobatch() && coll.getGroup() == kDataGroup)
        buckets.push_back(coll);
    });
    unsigned bucket = 0;
    for (kernel::CollectiveOp coll : buckets) {
      SmallVector<StringRef> stored;
      for (Value result : coll.getResults()) {
        graph::StoreOp store;
        for (Operation *user : result.getUsers())
          if (auto s = dyn_cast<graph::StoreOp>(user);
              s && s.getVariable().starts_with(kGradientPrefix))
            store = s;
        if (!store || !result.hasOneUse())
          return coll.emitError("octet-shard-optimizer: a data-parallel "
                                "gradient all-reduce whose result is not "
                                "only stored into a grad.* accumulator; "
                                "run it right after octet-reduce-gradients");
        stored.push_back(store.getVariable());
      }
      for (auto [in, name] : llvm::zip(coll.getInputs(), stored)) {
        auto type = cast<RankedTensorType>(in.getType());
        if (type.getRank() == 0 || type.getDimSize(0) % dataParallel != 0)
          return coll.emitError("octet-shard-optimizer: @")
                 << name << " has dimension 0 of "
                 << (type.getRank() ? type.getDimSize(0) : 0)
                 << ", which does not divide into " << int64_t(dataParallel)
                 << " equal data-parallel shards; set "
                    "train.parallel.shard_optimizer to false, or a data "
                    "size that divides every parameter's first dimension";
        scattered[name] = bucket;
      }
      ++bucket;
      coll.setKind("reduce_scatter");
      coll.setInPlace(true);
    }
    // Accumulators every rank makes whole (octet-gather-embedding-gradient):
    // the rank's part is read as it is. Each is a bucket of its own after
    // the reduced ones, for the per-bucket AdamW kernels and gathers.
    WalkResult whole = train.walk([&](graph::StoreOp store) {
      if (!store->hasAttr(fusion::kSummedOverDataAttr))
        return WalkResult::advance();
      auto type = cast<RankedTensorType>(store.getValue().getType());
      if (type.getRank() == 0 || type.getDimSize(0) % dataParallel != 0) {
        store.emitError("octet-shard-optimizer: @")
            << store.getVariable() << " has dimension 0 of "
            << (type.getRank() ? type.getDimSize(0) : 0)
            << ", which does not divide into " << int64_t(dataParallel)
            << " equal data-parallel shards; set "
               "train.parallel.shard_optimizer to false, or a data size "
               "that divides every parameter's first dimension";
        return WalkResult::interrupt();
      }
      scattered[store.getVariable()] = bucket++;
      return WalkResult::advance();
    });
    return failure(whole.wasInterrupted());
  }

  // The rank's part of `full` (a load), made once, right after the load.
  Value partOf(Value full, llvm::DenseMap<Value, Value> &parts) {
    if (Value done = parts.lookup(full))
      return done;
    OpBuilder b(full.getContext());
    b.setInsertionPointAfterValue(full);
    auto type = cast<RankedTensorType>(full.getType());
    Value part = kernel::RankPartOp::create(
        b, full.getLoc(), partType(type, dataParallel), full, kDataGroup,
        dataParallel);
    parts[full] = part;
    return part;
  }

  LogicalResult shardStep(ModuleOp module, func::FuncOp step,
                          const llvm::StringMap<unsigned> &scattered) {
    SmallVector<kernel::FusedOp> adams, norms;
    for (kernel::FusedOp fused : fusion::fusedOps(step)) {
      bool updates = false;
      fused.getBodyBlock().walk([&](graph::AdamWUpdateOp) { updates = true; });
      if (updates) {
        FailureOr<kernel::FusedOp> adam = splitWeightCasts(fused);
        if (failed(adam))
          return failure();
        adams.push_back(*adam);
        continue;
      }
      if (fusion::bodyOnly(fused, {"graph.global_norm"}))
        norms.push_back(fused);
    }
    if (adams.empty())
      return step.emitError("octet-shard-optimizer: @optimizer_step has no "
                            "AdamW kernel to shard; run octet-fuse-adamw "
                            "first");

    auto loadOf = [&](Value v) -> graph::LoadOp {
      return v.getDefiningOp<graph::LoadOp>();
    };
    llvm::DenseMap<Value, Value> parts;
    // The parameters' all-gathers, and the kernels that cast what they
    // gather, in program order.
    SmallVector<Operation *> gathers, casts;
    // Moments, by variable: they hold the rank's part only.
    llvm::SetVector<StringRef> moments;
    // The AdamW kernels' new parameters and the variables they are stored in.
    for (kernel::FusedOp fused : adams) {
      Block &body = fused.getBodyBlock();
      for (auto update : body.getOps<graph::AdamWUpdateOp>()) {
        auto operandOf = [&](Value inner) -> OpOperand * {
          auto arg = dyn_cast<BlockArgument>(inner);
          if (!arg || arg.getOwner() != &body)
            return nullptr;
          return &fused->getOpOperand(arg.getArgNumber());
        };
        OpOperand *param = operandOf(update.getParam());
        OpOperand *grad = operandOf(update.getGrad());
        OpOperand *m = operandOf(update.getExpAvg());
        OpOperand *v = operandOf(update.getExpAvgSq());
        graph::LoadOp paramLoad = param ? loadOf(param->get()) : nullptr;
        graph::LoadOp gradLoad = grad ? loadOf(grad->get()) : nullptr;
        graph::LoadOp mLoad = m ? loadOf(m->get()) : nullptr;
        graph::LoadOp vLoad = v ? loadOf(v->get()) : nullptr;
        if (!paramLoad || !gradLoad || !mLoad || !vLoad)
          return update.emitError("octet-shard-optimizer: an AdamW update "
                                  "whose parameter, gradient and moments are "
                                  "not loaded from their variables");
        if (!scattered.contains(gradLoad.getVariable()))
          return update.emitError("octet-shard-optimizer: @")
                 << gradLoad.getVariable()
                 << " is not reduce-scattered in @train_microbatch (no "
                    "data-parallel gradient all-reduce stores it)";
        for (OpOperand *operand : {param, grad, m, v}) {
          auto type = cast<RankedTensorType>(operand->get().getType());
          RankedTensorType part = partType(type, dataParallel);
          if (operand == param || operand == grad)
            operand->set(partOf(operand->get(), parts));
          body.getArgument(operand->getOperandNumber()).setType(part);
        }
        for (Value result : update->getResults())
          result.setType(partType(cast<RankedTensorType>(result.getType()),
                                  dataParallel));
        moments.insert(mLoad.getVariable());
        moments.insert(vLoad.getVariable());
      }
      auto yield = cast<kernel::YieldOp>(body.getTerminator());
      for (auto [result, yielded] :
           llvm::zip(fused->getResults(), yield.getOperands()))
        result.setType(yielded.getType());
      FailureOr<SmallVector<kernel::FusedOp>> perBucket =
          splitByBucket(fused, scattered);
      if (failed(perBucket))
        return failure();
      for (kernel::FusedOp bucket : *perBucket)
        if (failed(gatherParameters(bucket, gathers, casts)))
          return failure();
    }
    // The casts of the whole weights come after every AdamW kernel, so the
    // compute stream updates the next bucket while the communication stream
    // gathers the last; each cast waits only for its own bucket's gather,
    // and those that read only the gathered weights and values made before
    // (delayed scaling's casts, current scaling's amaxes) come in the
    // gathers' order (`casts` is in bucket order), so that no cast waits
    // for a later gather while an earlier one's weights are there to cast.
    // Current scaling's casts read the scale made from every amax after
    // the gathers: they stay after it, in their order.
    if (!gathers.empty()) {
      Operation *lastGather = gathers.front();
      for (Operation *gather : gathers)
        if (lastGather->isBeforeInBlock(gather))
          lastGather = gather;
      auto readsOnlyBefore = [&](Operation *op) {
        return llvm::all_of(op->getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return !def || def->getBlock() != lastGather->getBlock() ||
                 def == lastGather || def->isBeforeInBlock(lastGather);
        });
      };
      Operation *last = lastGather;
      for (Operation *castKernel : casts)
        if (readsOnlyBefore(castKernel)) {
          castKernel->moveAfter(last);
          last = castKernel;
        }
    }
    for (kernel::FusedOp norm : norms)
      if (failed(shardNorm(norm, scattered, parts)))
        return failure();
    return shardMoments(module, moments);
  }

  // The FP8 recipes' AdamW kernel also casts the weights it updates (the
  // FP8 copy, its K-major copy, the amax: octet-fuse-adamw). A rank holds
  // its part of each new weight only, so the casts leave the kernel: one
  // kernel per weight, which gatherParameters places after the all-gather,
  // reading the whole weight. Every rank casts the same whole values with
  // the same scale, so the FP8 copies, their amaxes and the delayed
  // recipe's amax history stay equal on every rank, and to one rank's,
  // with no collective of their own. Returns the kernel of the AdamW
  // updates alone (`fused` itself when it casts nothing).
  FailureOr<kernel::FusedOp> splitWeightCasts(kernel::FusedOp fused) {
    Block &body = fused.getBodyBlock();
    if (fusion::bodyOnly(fused, {"graph.adamw_update"}))
      return fused;
    // Each cast op, grouped by the new weight (an AdamW result) it reads.
    llvm::MapVector<Value, SmallVector<Operation *>> casts;
    llvm::DenseMap<Operation *, Value> rootOf;
    for (Operation &op : body.without_terminator()) {
      if (isa<graph::AdamWUpdateOp>(op))
        continue;
      Value root;
      for (Value operand : op.getOperands()) {
        Operation *def = operand.getDefiningOp();
        Value candidate;
        if (def && isa<graph::AdamWUpdateOp>(def))
          candidate = operand;
        else if (def)
          candidate = rootOf.lookup(def);
        if (candidate && root && candidate != root)
          root = Value();
        else if (candidate)
          root = candidate;
      }
      auto update = root ? root.getDefiningOp<graph::AdamWUpdateOp>()
                         : graph::AdamWUpdateOp();
      if (!update || root != update.getNewParam())
        return op.emitError("octet-shard-optimizer: an op of the optimizer "
                            "kernel that is neither an AdamW update nor a "
                            "cast of one updated weight; only such kernels "
                            "are sharded");
      rootOf[&op] = root;
      casts[root].push_back(&op);
    }
    auto yield = cast<kernel::YieldOp>(body.getTerminator());
    // Where each of the old kernel's results comes from after the split.
    SmallVector<std::pair<Operation *, unsigned>> sources(
        fused->getNumResults(), {nullptr, 0});
    OpBuilder b(fused);
    Location loc = fused.getLoc();

    // The AdamW kernel: its updates, yielding what the old kernel yielded
    // of them plus every new weight a cast reads.
    SmallVector<Value> adamYields;
    for (Value v : yield.getOperands())
      if (v.getDefiningOp<graph::AdamWUpdateOp>())
        adamYields.push_back(v);
    for (auto &entry : casts)
      if (!llvm::is_contained(adamYields, entry.first))
        adamYields.push_back(entry.first);
    llvm::SetVector<Value> adamInputs;
    for (auto update : body.getOps<graph::AdamWUpdateOp>())
      for (Value operand : update->getOperands())
        adamInputs.insert(
            fused.getInputs()[cast<BlockArgument>(operand).getArgNumber()]);
    SmallVector<Type> adamTypes;
    for (Value v : adamYields)
      adamTypes.push_back(v.getType());
    auto adam = kernel::FusedOp::create(b, loc, adamTypes,
                                        adamInputs.getArrayRef(),
                                        fused.getName(), fused.getKind());
    adam->setAttrs(fused->getAttrs());
    IRMapping map;
    {
      Block &inner = adam.getBodyBlock();
      for (auto [outer, arg] : llvm::zip(adamInputs, inner.getArguments()))
        map.map(outer, arg);
      for (auto [arg, outer] : llvm::zip(body.getArguments(), fused.getInputs()))
        if (adamInputs.contains(outer))
          map.map(arg, map.lookup(outer));
      OpBuilder ib = OpBuilder::atBlockEnd(&inner);
      for (auto update : body.getOps<graph::AdamWUpdateOp>())
        ib.clone(*update, map);
      SmallVector<Value> yields;
      for (Value v : adamYields)
        yields.push_back(map.lookup(v));
      kernel::YieldOp::create(ib, loc, yields);
    }
    auto adamResult = [&](Value inner) {
      return adam->getResult(llvm::find(adamYields, inner) -
                             adamYields.begin());
    };
    for (auto [i, v] : llvm::enumerate(yield.getOperands()))
      if (v.getDefiningOp<graph::AdamWUpdateOp>())
        sources[i] = {adam, adamResult(v).getResultNumber()};

    // One kernel per weight's casts, on the new weight and the scales.
    for (auto &[root, ops] : casts) {
      llvm::SetVector<Value> outerInputs;
      outerInputs.insert(adamResult(root));
      for (Operation *op : ops)
        for (Value operand : op->getOperands())
          if (auto arg = dyn_cast<BlockArgument>(operand);
              arg && arg.getOwner() == &body)
            outerInputs.insert(fused.getInputs()[arg.getArgNumber()]);
      SmallVector<unsigned> yielded;
      SmallVector<Type> types;
      for (auto [i, v] : llvm::enumerate(yield.getOperands()))
        if (Operation *def = v.getDefiningOp();
            def && llvm::is_contained(ops, def)) {
          yielded.push_back(i);
          types.push_back(v.getType());
        }
      StringRef name = "optimizer.fp8_weight_amax";
      if (llvm::any_of(ops, [](Operation *op) { return isa<fp8::QuantizeOp>(op); }))
        name = "optimizer.fp8_weights";
      else if (llvm::any_of(ops, [](Operation *op) { return isa<graph::CastOp>(op); }))
        name = "optimizer.bf16_weights";
      auto castKernel = kernel::FusedOp::create(
          b, loc, types, outerInputs.getArrayRef(), name, "elementwise");
      castKernel->setAttr("layer", b.getI64IntegerAttr(-1));
      castKernel->setAttr("section", b.getStringAttr("optimizer"));
      castKernel->setAttr(kWeightCast, b.getUnitAttr());
      Block &inner = castKernel.getBodyBlock();
      IRMapping castMap;
      castMap.map(root, inner.getArgument(0));
      for (auto [arg, outer] : llvm::zip(body.getArguments(), fused.getInputs()))
        if (outerInputs.contains(outer))
          castMap.map(arg, inner.getArgument(llvm::find(outerInputs, outer) -
                                             outerInputs.begin()));
      OpBuilder ib = OpBuilder::atBlockEnd(&inner);
      for (Operation *op : ops)
        ib.clone(*op, castMap);
      SmallVector<Value> yields;
      for (unsigned i : yielded)
        yields.push_back(castMap.lookup(yield.getOperand(i)));
      kernel::YieldOp::create(ib, loc, yields);
      for (auto [j, i] : llvm::enumerate(yielded))
        sources[i] = {castKernel, unsigned(j)};
    }
    for (auto [i, source] : llvm::enumerate(sources))
      fused->getResult(i).replaceAllUsesWith(
          source.first->getResult(source.second));
    fused.erase();
    return adam;
  }

  // One AdamW kernel per gradient bucket (by the bucket of each update's
  // gradient), so that a bucket's all-gather starts on the communication
  // stream as soon as its updates are written, while the compute stream
  // updates the next. The largest buckets come first: the program's end
  // waits for the last gather, and the weights' casts after the last
  // kernel each wait for their own bucket's, so the gathers that take
  // longest (the embedding's and the LM head's, a quarter of a Llama 3 8B
  // layer stack's elements each) run beside the other buckets' updates,
  // and the ones left at the end are the smallest. Each update keeps its
  // operands and results; only the kernels change.
  FailureOr<SmallVector<kernel::FusedOp>>
  splitByBucket(kernel::FusedOp fused,
                const llvm::StringMap<unsigned> &scattered) {
    Block &body = fused.getBodyBlock();
    llvm::MapVector<unsigned, SmallVector<graph::AdamWUpdateOp>> groups;
    for (auto update : body.getOps<graph::AdamWUpdateOp>()) {
      auto arg = cast<BlockArgument>(update.getGrad());
      Value grad = fused.getInputs()[arg.getArgNumber()];
      if (auto part = grad.getDefiningOp<kernel::RankPartOp>())
        grad = part.getInput();
      auto load = grad.getDefiningOp<graph::LoadOp>();
      auto it = load ? scattered.find(load.getVariable()) : scattered.end();
      if (it == scattered.end())
        return update.emitError("octet-shard-optimizer: an AdamW update "
                                "whose gradient is no reduce-scattered "
                                "accumulator");
      groups[it->second].push_back(update);
    }
    if (groups.size() <= 1)
      return SmallVector<kernel::FusedOp>{fused};
    auto elements = [](ArrayRef<graph::AdamWUpdateOp> updates) {
      int64_t n = 0;
      for (graph::AdamWUpdateOp u : updates)
        n += cast<RankedTensorType>(u.getNewParam().getType()).getNumElements();
      return n;
    };
    SmallVector<SmallVector<graph::AdamWUpdateOp>> order;
    for (auto &entry : groups)
      order.push_back(entry.second);
    llvm::stable_sort(order, [&](const auto &a, const auto &b) {
      return elements(a) > elements(b);
    });

    auto yield = cast<kernel::YieldOp>(body.getTerminator());
    OpBuilder b(fused);
    SmallVector<kernel::FusedOp> kernels;
    for (ArrayRef<graph::AdamWUpdateOp> updates : order) {
      llvm::SetVector<Value> inputs;
      for (graph::AdamWUpdateOp update : updates)
        for (Value operand : update->getOperands())
          inputs.insert(
              fused.getInputs()[cast<BlockArgument>(operand).getArgNumber()]);
      // The old kernel's results these updates make, in its order.
      SmallVector<unsigned> yielded;
      SmallVector<Type> types;
      for (auto [i, v] : llvm::enumerate(yield.getOperands()))
        if (auto def = v.getDefiningOp<graph::AdamWUpdateOp>();
            def && llvm::is_contained(updates, def)) {
          yielded.push_back(i);
          types.push_back(v.getType());
        }
      auto kernel = kernel::FusedOp::create(b, fused.getLoc(), types,
                                            inputs.getArrayRef(),
                                            fused.getName(), fused.getKind());
      kernel->setAttrs(fused->getAttrs());
      Block &inner = kernel.getBodyBlock();
      IRMapping map;
      // The body keeps the old one's argument types: the moments' loads
      // become the rank's part only when shardMoments retypes them.
      for (auto [arg, outer] : llvm::zip(body.getArguments(), fused.getInputs()))
        if (inputs.contains(outer)) {
          BlockArgument to =
              inner.getArgument(llvm::find(inputs, outer) - inputs.begin());
          to.setType(arg.getType());
          map.map(arg, to);
        }
      OpBuilder ib = OpBuilder::atBlockEnd(&inner);
      for (graph::AdamWUpdateOp update : updates)
        ib.clone(*update, map);
      SmallVector<Value> yields;
      for (unsigned i : yielded)
        yields.push_back(map.lookup(yield.getOperand(i)));
      kernel::YieldOp::create(ib, fused.getLoc(), yields);
      for (auto [j, i] : llvm::enumerate(yielded))
        fused->getResult(i).replaceAllUsesWith(kernel->getResult(j));
      kernels.push_back(kernel);
    }
    fused.erase();
    return kernels;
  }

  // The new parameter parts of one AdamW kernel, all-gathered into every
  // rank's parameters on the communication stream, right after the kernel;
  // the weights' FP8 casts (splitWeightCasts', and current scaling's
  // kernels after the optimizer) read the gathered weights. Appends the
  // gather to `gathers` and the cast kernels it feeds to `casts`.
  LogicalResult gatherParameters(kernel::FusedOp fused,
                                 SmallVectorImpl<Operation *> &gathers,
                                 SmallVectorImpl<Operation *> &casts) {
    SmallVector<Value> news;
    SmallVector<graph::StoreOp> stores;
    SmallVector<std::pair<OpOperand *, Value>> castReads;
    for (Value result : fused->getResults())
      for (OpOperand &use : result.getUses()) {
        Operation *user = use.getOwner();
        auto castKernel = dyn_cast<kernel::FusedOp>(user);
        if (castKernel &&
            (castKernel->hasAttr(kWeightCast) ||
             fusion::bodyOnly(castKernel, {"fp8.quantize", "fp8.transpose",
                                           "fp8.amax"}))) {
          castReads.push_back({&use, result});
          continue;
        }
        auto store = dyn_cast<graph::StoreOp>(user);
        if (!store)
          return user->emitError("octet-shard-optimizer: reads a result of "
                                 "the sharded AdamW kernel, which holds this "
                                 "rank's part only");
        auto var = SymbolTable::lookupNearestSymbolFrom<graph::VariableOp>(
            store, store.getVariableAttr());
        if (var && var.isTrainable()) {
          news.push_back(result);
          stores.push_back(store);
        }
      }
    if (news.empty())
      return castReads.empty()
                 ? success()
                 : fused.emitError("octet-shard-optimizer: casts weights "
                                   "that no parameter store all-gathers");
    OpBuilder b(fused);
    b.setInsertionPointAfter(fused);
    SmallVector<Type> types;
    for (graph::StoreOp store : stores)
      types.push_back(
          SymbolTable::lookupNearestSymbolFrom<graph::VariableOp>(
              store, store.getVariableAttr())
              .getType());
    auto gather = kernel::CollectiveOp::create(b, fused.getLoc(), types, news,
                                               "all_gather", kDataGroup,
                                               dataParallel, "sum");
    gather->setAttr("comm_stream", b.getUnitAttr());
    // The AdamW kernel writes each new part into the rank's part of its
    // parameter's slot, and the gather fills the rest of that slot: nothing
    // of it lives in the activation region, which the next program reuses.
    gather.setInPlace(true);
    gather->setAttr("layer", b.getI64IntegerAttr(-1));
    gather->setAttr("section", b.getStringAttr("optimizer"));
    for (auto [store, whole] : llvm::zip(stores, gather.getResults())) {
      store.getValueMutable().assign(whole);
      if (store->isBeforeInBlock(gather))
        store->moveAfter(gather);
    }
    gathers.push_back(gather);
    for (auto [use, part] : castReads) {
      Operation *castKernel = use->getOwner();
      auto at = llvm::find(news, part);
      if (at == news.end())
        return castKernel->emitError(
            "octet-shard-optimizer: casts an updated weight that is not "
            "stored into its parameter");
      use->set(gather.getResult(at - news.begin()));
      castKernel->removeAttr(kWeightCast);
      if (!llvm::is_contained(casts, castKernel))
        casts.push_back(castKernel);
    }
    return success();
  }

  // A weight cast that a rank can make of its part alone: a tensorwise FP8
  // cast with a scale from the state (delayed scaling), whose body
  // quantizes input `weight` with input `scale` and transposes the FP8
  // result with the same scale, yielding the FP8 copy, the K-major copy
  // and the amax; or a BF16 cast (octet-fuse-adamw's bf16w cache), one
  // graph.cast of input `weight`.
  //
  // Or current scaling's cast, which reads `scale` made (`computeScale`, in
  // kernel `scales`, which may make other weights' scales too) from the
  // amax that kernel `amax` takes of the same weight, and yields the FP8
  // copy and the K-major copy. The rank then takes the amax of its part,
  // and the scale is made from the parts' amaxes' maximum over the ranks
  // (the whole's amax): the same scale on every rank as one rank's.
  struct PartCast {
    unsigned weight;
    std::optional<unsigned> scale;
    kernel::FusedOp amax = nullptr;
    kernel::FusedOp scales = nullptr;
    fp8::ComputeScaleOp computeScale = nullptr;
    bool current() const { return bool(amax); }
  };

  static std::optional<PartCast> matchPartCast(kernel::FusedOp castKernel) {
    Block &body = castKernel.getBodyBlock();
    auto yield = cast<kernel::YieldOp>(body.getTerminator());
    if (castKernel->getNumResults() == 1 &&
        fusion::bodyOnly(castKernel, {"graph.cast"}) &&
        body.getOperations().size() == 2) {
      auto bf16 = cast<graph::CastOp>(body.front());
      auto weight = dyn_cast<BlockArgument>(bf16.getInput());
      if (!weight || weight.getOwner() != &body ||
          yield.getOperand(0) != bf16.getResult() ||
          !cast<RankedTensorType>(bf16.getType()).getElementType().isBF16())
        return std::nullopt;
      return PartCast{weight.getArgNumber(), std::nullopt};
    }
    bool current = castKernel->getNumResults() == 2;
    if ((castKernel->getNumResults() != 3 && !current) ||
        !fusion::bodyOnly(castKernel, {"fp8.quantize", "fp8.transpose"}))
      return std::nullopt;
    auto quantizes = body.getOps<fp8::QuantizeOp>();
    auto transposes = body.getOps<fp8::TransposeOp>();
    if (std::distance(quantizes.begin(), quantizes.end()) != 1 ||
        std::distance(transposes.begin(), transposes.end()) != 1)
      return std::nullopt;
    fp8::QuantizeOp quantize = *quantizes.begin();
    fp8::TransposeOp transpose = *transposes.begin();
    auto weight = dyn_cast<BlockArgument>(quantize.getInput());
    auto scale = dyn_cast<BlockArgument>(quantize.getScale());
    if (!weight || !scale || weight.getOwner() != &body ||
        scale.getOwner() != &body ||
        transpose.getInput() != quantize.getResult() ||
        transpose.getScale() != scale || transpose.getBlock() ||
        cast<RankedTensorType>(scale.getType()).getRank() != 0)
      return std::nullopt;
    if (yield.getOperand(0) != quantize.getResult() ||
        yield.getOperand(1) != transpose.getResult() ||
        (!current && yield.getOperand(2) != quantize.getAmax()))
      return std::nullopt;
    PartCast match{weight.getArgNumber(), scale.getArgNumber()};
    Value scaleIn = castKernel.getInputs()[scale.getArgNumber()];
    if (!current)
      return scaleIn.getDefiningOp<graph::LoadOp>() ? std::optional(match)
                                                    : std::nullopt;
    auto scales = scaleIn.getDefiningOp<kernel::FusedOp>();
    if (!scales)
      return std::nullopt;
    Block &scaleBody = scales.getBodyBlock();
    Value made = cast<kernel::YieldOp>(scaleBody.getTerminator())
                     .getOperand(cast<OpResult>(scaleIn).getResultNumber());
    auto computeScale = made.getDefiningOp<fp8::ComputeScaleOp>();
    if (!computeScale || made != computeScale.getResult())
      return std::nullopt;
    auto amaxArg = dyn_cast<BlockArgument>(computeScale.getAmax());
    if (!amaxArg || amaxArg.getOwner() != &scaleBody)
      return std::nullopt;
    auto amax = scales.getInputs()[amaxArg.getArgNumber()]
                    .getDefiningOp<kernel::FusedOp>();
    // (the scale alone reads the amax: the rewrite erases its kernel)
    if (!amax || amax->getNumResults() != 1 ||
        !amax->getResult(0).hasOneUse() || amax.getInputs().size() != 1 ||
        !fusion::bodyOnly(amax, {"fp8.amax"}) ||
        amax.getBodyBlock().getOperations().size() != 2 ||
        amax.getInputs()[0] != castKernel.getInputs()[match.weight])
      return std::nullopt;
    match.amax = amax;
    match.scales = scales;
    match.computeScale = computeScale;
    return match;
  }

  // The cast `castKernel` made of this rank's part `part` of its weight
  // instead of the whole: the rank casts its part (the same bytes as that
  // part of the whole's cast: a BF16 rounding, or an FP8 one with the scale
  // every rank holds), and the parts are all-gathered in place into the
  // cache. An FP8 cast's K-major copy is made from the gathered copy by a
  // kernel of its own (`kmajor`), and the parts' amaxes go to `amaxParts`
  // (their maximum over the ranks is the whole's, `amaxWholes`; current
  // scaling's were joined before its scale: `scale` is made from them).
  // With `placedAfter` the cast goes right after what made the part (or
  // what was placed there), else where `castKernel` is. Returns the gather.
  kernel::CollectiveOp castPart(kernel::FusedOp castKernel, PartCast match,
                                Value part, Value scale,
                                SmallVectorImpl<Value> &amaxParts,
                                SmallVectorImpl<Value> &amaxWholes,
                                kernel::FusedOp &kmajor,
                                llvm::DenseMap<Operation *, Operation *>
                                    *placedAfter) {
    Block &body = castKernel.getBodyBlock();
    Operation *castOp = &body.front();
    auto whole = cast<RankedTensorType>(castOp->getResult(0).getType());
    RankedTensorType cachePart = partType(whole, dataParallel);
    Location loc = castKernel.getLoc();
    // Right after what made the part (and the casts placed there before),
    // so its gather starts while the compute stream goes on.
    OpBuilder b(castKernel);
    Operation *def = part.getDefiningOp();
    if (placedAfter && def && def->getBlock() == castKernel->getBlock()) {
      Operation *&at = (*placedAfter)[def];
      if (!at)
        at = def;
      b.setInsertionPointAfter(at);
    }

    SmallVector<Value> ins = {part};
    SmallVector<Type> types = {cachePart};
    if (match.scale) {
      ins.push_back(scale);
      if (!match.current())
        types.push_back(castOp->getResult(1).getType());
    }
    auto partCast = kernel::FusedOp::create(b, loc, types, ins,
                                            castKernel.getName(),
                                            castKernel.getKind());
    partCast->setAttrs(castKernel->getAttrs());
    {
      Block &inner = partCast.getBodyBlock();
      OpBuilder ib = OpBuilder::atBlockEnd(&inner);
      IRMapping map;
      map.map(castOp->getOperand(0), inner.getArgument(0));
      if (match.scale)
        map.map(castOp->getOperand(1), inner.getArgument(1));
      Operation *clone = ib.clone(*castOp, map);
      for (auto [result, type] : llvm::zip(clone->getResults(), types))
        result.setType(type);
      kernel::YieldOp::create(ib, loc,
                              clone->getResults().take_front(types.size()));
    }
    b.setInsertionPointAfter(partCast);
    auto gather = kernel::CollectiveOp::create(
        b, loc, TypeRange{whole}, ValueRange{partCast->getResult(0)},
        "all_gather", kDataGroup, dataParallel, "sum");
    gather->setAttr("comm_stream", b.getUnitAttr());
    gather.setInPlace(true);
    gather->setAttr("layer", b.getI64IntegerAttr(-1));
    gather->setAttr("section", castKernel->getAttr("section"));
    if (placedAfter && def && placedAfter->count(def))
      (*placedAfter)[def] = gather;
    castKernel->getResult(0).replaceAllUsesWith(gather.getResult(0));
    kmajor = nullptr;
    if (!match.scale)
      return gather;

    auto transpose = *body.getOps<fp8::TransposeOp>().begin();
    kmajor = kernel::FusedOp::create(
        b, loc, TypeRange{transpose.getResult().getType()},
        ValueRange{gather.getResult(0), ins[1]}, "optimizer.fp8_weight_kmajor",
        "elementwise");
    kmajor->setAttr("layer", b.getI64IntegerAttr(-1));
    kmajor->setAttr("section", castKernel->getAttr("section"));
    {
      Block &inner = kmajor.getBodyBlock();
      OpBuilder ib = OpBuilder::atBlockEnd(&inner);
      auto t = fp8::TransposeOp::create(
          ib, loc, transpose->getResultTypes(), inner.getArgument(0),
          inner.getArgument(1), transpose.getBlockAttr());
      kernel::YieldOp::create(ib, loc, ValueRange{t.getResult()});
    }
    castKernel->getResult(1).replaceAllUsesWith(kmajor->getResult(0));
    if (!match.current()) {
      amaxParts.push_back(partCast->getResult(1));
      amaxWholes.push_back(castKernel->getResult(2));
    }
    return gather;
  }

  // The amaxes of the weights' parts, their maximum over the ranks in one
  // small all-reduce after `after`, stored where the whole casts' were.
  void joinAmaxes(Operation *after, ArrayRef<Value> parts,
                  ArrayRef<Value> wholes) {
    if (parts.empty())
      return;
    OpBuilder b(after->getContext());
    b.setInsertionPointAfter(after);
    SmallVector<Type> types;
    for (Value v : parts)
      types.push_back(v.getType());
    auto reduce = kernel::CollectiveOp::create(
        b, after->getLoc(), types, parts, "all_reduce", kDataGroup,
        dataParallel, "max");
    reduce->setAttr("comm_stream", b.getUnitAttr());
    reduce->setAttr("layer", b.getI64IntegerAttr(-1));
    reduce->setAttr("section", after->getAttr("section")
                                   ? after->getAttr("section")
                                   : b.getStringAttr("optimizer"));
    for (auto [whole, joined] : llvm::zip(wholes, reduce.getResults()))
      Value(whole).replaceAllUsesWith(joined);
  }

  // Current scaling's scales for the casts `casts` of the parts `parts`,
  // made after `after`: each part's amax (a copy of the whole's amax
  // kernel), their maximum over the ranks in one all-reduce (max) on the
  // communication stream, and the scales of those maxima (the whole
  // weights' amaxes) in one kernel, whose scales and inverse scales replace
  // the whole weights'. `scales` gets each cast's scale. Returns the scale
  // kernel, the last op made.
  Operation *joinCurrentAmaxes(Operation *after, ArrayRef<PartCast> casts,
                               ArrayRef<Value> parts,
                               SmallVectorImpl<Value> &scales) {
    OpBuilder b(after->getContext());
    b.setInsertionPointAfter(after);
    PartCast first = casts.front();
    Location loc = first.amax.getLoc();
    Attribute section = first.amax->getAttr("section");
    SmallVector<Value> amaxes;
    for (auto [match, part] : llvm::zip(casts, parts)) {
      kernel::FusedOp whole = PartCast(match).amax;
      auto amax = kernel::FusedOp::create(b, whole.getLoc(),
                                          whole->getResultTypes(),
                                          ValueRange{part}, whole.getName(),
                                          whole.getKind());
      amax->setAttrs(whole->getAttrs());
      Block &inner = amax.getBodyBlock();
      OpBuilder ib = OpBuilder::atBlockEnd(&inner);
      IRMapping map;
      map.map(whole.getBodyBlock().getArgument(0), inner.getArgument(0));
      for (Operation &op : whole.getBodyBlock())
        ib.clone(op, map);
      amaxes.push_back(amax->getResult(0));
    }
    auto reduce = kernel::CollectiveOp::create(
        b, loc, ValueRange(amaxes).getTypes(), amaxes, "all_reduce",
        kDataGroup, dataParallel, "max");
    reduce->setAttr("comm_stream", b.getUnitAttr());
    reduce->setAttr("layer", b.getI64IntegerAttr(-1));
    reduce->setAttr("section", section);
    SmallVector<Type> types;
    for (const PartCast &match : casts)
      llvm::append_range(types, match.computeScale->getResultTypes());
    bool many = casts.size() > 1;
    auto scaleKernel = kernel::FusedOp::create(
        b, loc, types, reduce.getResults(),
        many ? "fp8.scale_updates" : "optimizer.fp8_weight_scale",
        many ? "multi_tensor" : "elementwise");
    scaleKernel->setAttr("layer", b.getI64IntegerAttr(-1));
    scaleKernel->setAttr("section", section);
    Block &inner = scaleKernel.getBodyBlock();
    OpBuilder ib = OpBuilder::atBlockEnd(&inner);
    SmallVector<Value> yields;
    for (auto [i, each] : llvm::enumerate(casts)) {
      PartCast match = each;
      IRMapping map;
      map.map(match.computeScale.getAmax(), inner.getArgument(i));
      llvm::append_range(yields, ib.clone(*match.computeScale, map)
                                     ->getResults());
    }
    kernel::YieldOp::create(ib, loc, yields);
    for (auto [i, each] : llvm::enumerate(casts)) {
      PartCast match = each;
      auto yield =
          cast<kernel::YieldOp>(match.scales.getBodyBlock().getTerminator());
      for (auto [j, made] : llvm::enumerate(yield.getOperands()))
        for (auto [k, whole] :
             llvm::enumerate(match.computeScale->getResults()))
          if (made == whole)
            match.scales->getResult(j).replaceAllUsesWith(
                scaleKernel->getResult(2 * i + k));
      scales.push_back(scaleKernel->getResult(2 * i));
    }
    return scaleKernel;
  }

  // After the casts `casts` are erased: current scaling's kernels that
  // made their scales from the whole weights' amaxes lose those scales
  // (erased when nothing else is left), and the amax kernels go.
  static void eraseWholeAmaxes(ArrayRef<PartCast> casts) {
    llvm::SetVector<Operation *> scales, amaxes;
    for (const PartCast &match : casts)
      if (match.current()) {
        scales.insert(match.scales);
        amaxes.insert(match.amax);
      }
    for (Operation *op : scales)
      pruneKernel(cast<kernel::FusedOp>(op));
    for (Operation *op : amaxes)
      op->erase();
  }

  // `fused` without the results nothing reads, the body ops that made only
  // those, and the inputs nothing left reads; erased when nothing is read.
  static void pruneKernel(kernel::FusedOp fused) {
    if (fused->use_empty()) {
      fused.erase();
      return;
    }
    Block &body = fused.getBodyBlock();
    auto yield = cast<kernel::YieldOp>(body.getTerminator());
    SmallVector<unsigned> kept;
    SmallVector<Value> values;
    for (OpResult r : fused->getResults())
      if (!r.use_empty()) {
        kept.push_back(r.getResultNumber());
        values.push_back(yield.getOperand(r.getResultNumber()));
      }
    yield->setOperands(values);
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (&op != yield.getOperation() && op.use_empty())
        op.erase();
    SmallVector<Value> inputs;
    SmallVector<BlockArgument> used;
    for (BlockArgument arg : body.getArguments())
      if (!arg.use_empty()) {
        inputs.push_back(fused.getInputs()[arg.getArgNumber()]);
        used.push_back(arg);
      }
    OpBuilder b(fused);
    auto rebuilt = kernel::FusedOp::create(
        b, fused.getLoc(), ValueRange(values).getTypes(), inputs,
        fused.getName(), fused.getKind());
    rebuilt->setAttrs(fused->getAttrs());
    Block &newBody = rebuilt.getBodyBlock();
    for (auto [old, now] : llvm::zip(used, newBody.getArguments()))
      old.replaceAllUsesWith(now);
    newBody.getOperations().splice(newBody.end(), body.getOperations());
    for (auto [j, i] : llvm::enumerate(kept))
      fused->getResult(i).replaceAllUsesWith(rebuilt->getResult(j));
    fused.erase();
  }

  // Stores that now read a value made after them move after it.
  static void storesAfterValues(Block &block) {
    for (Operation &op : llvm::make_early_inc_range(block)) {
      auto store = dyn_cast<graph::StoreOp>(op);
      if (!store)
        continue;
      Operation *def = store.getValue().getDefiningOp();
      if (def && def->getBlock() == &block && store->isBeforeInBlock(def))
        store->moveAfter(def);
    }
  }

  // FP8 weights keep their f32 master sharded: each rank holds and
  // updates its part of the parameter only (`data_shards`, as the
  // moments), casts that part with the step's scale, and the FP8 parts are
  // what is all-gathered: 1 byte an element instead of the f32
  // parameter's 4. Each rank then transposes the gathered FP8 copy into
  // the K-major one. Delayed scaling's parts' amaxes meet in one
  // all-reduce (max) at the end; current scaling's meet before the scale
  // that is made from them (joinCurrentAmaxes). The bytes each rank holds
  // are the same as one rank's: a part quantized with the same scale is
  // that part of the whole's cast, and the maximum of the parts' amaxes is
  // the whole's. Only a weight whose f32 values nothing else reads
  // qualifies (the forward reads its FP8 copies; the init cast is
  // rewritten the same way); BF16 caches are cast the same way, and the
  // others (norms) keep the f32 gather.
  LogicalResult narrowCastWeights(ModuleOp module, func::FuncOp step) {
    auto initNames = module->getAttrOfType<ArrayAttr>("octet.init_functions");
    auto isInit = [&](func::FuncOp f) {
      return initNames && llvm::any_of(initNames, [&](Attribute a) {
               return cast<StringAttr>(a).getValue() == f.getSymName();
             });
    };
    struct Candidate {
      kernel::FusedOp cast;
      PartCast match;
      kernel::CollectiveOp gather;
      unsigned gathered; // the f32 gather's result the cast reads
      graph::StoreOp store;
    };
    llvm::MapVector<StringRef, Candidate> candidates;
    for (kernel::FusedOp castKernel : fusion::fusedOps(step)) {
      auto match = matchPartCast(castKernel);
      if (!match)
        continue;
      Value weight = castKernel.getInputs()[match->weight];
      auto gather = weight.getDefiningOp<kernel::CollectiveOp>();
      if (!gather || gather.getKind() != "all_gather" || !gather.getInPlace())
        continue;
      graph::StoreOp store;
      bool other = false;
      for (Operation *user : weight.getUsers()) {
        if (auto s = dyn_cast<graph::StoreOp>(user); s && !store)
          store = s;
        else if (user != castKernel.getOperation() &&
                 user != match->amax.getOperation())
          other = true;
      }
      if (!store || other)
        continue;
      candidates[store.getVariable()] = {
          castKernel, *match, gather,
          cast<OpResult>(weight).getResultNumber(), store};
    }
    // Every other reader of the f32 weight: the step's AdamW kernel (through
    // the rank's part) and the init functions' casts (and current scaling's
    // amaxes for them) may read it.
    auto castOf = [](Operation *op, Value weight) -> std::optional<PartCast> {
      auto k = dyn_cast<kernel::FusedOp>(op);
      std::optional<PartCast> match = k ? matchPartCast(k) : std::nullopt;
      if (match && k.getInputs()[match->weight] == weight)
        return match;
      return std::nullopt;
    };
    module.walk([&](graph::LoadOp load) {
      auto it = candidates.find(load.getVariable());
      if (it == candidates.end())
        return;
      auto func = load->getParentOfType<func::FuncOp>();
      bool ok = true;
      for (Operation *user : load->getUsers()) {
        if (func == step) {
          ok &= isa<kernel::RankPartOp>(user);
          continue;
        }
        ok &= isInit(func) &&
              (castOf(user, load) ||
               llvm::any_of(load->getUsers(), [&](Operation *reader) {
                 std::optional<PartCast> match = castOf(reader, load);
                 return match && match->amax.getOperation() == user;
               }));
      }
      if (!ok)
        candidates.erase(it);
    });
    module.walk([&](graph::StoreOp store) {
      auto it = candidates.find(store.getVariable());
      if (it != candidates.end() && store != it->second.store)
        candidates.erase(it);
    });
    if (candidates.empty())
      return success();

    // The step: each cast reads the AdamW kernel's new part, right after
    // that kernel, and its gather follows it; the f32 gathers lose these
    // weights.
    SmallVector<Value> amaxParts, amaxWholes;
    SmallVector<kernel::FusedOp> kmajors;
    llvm::DenseMap<Operation *, Operation *> placedAfter;
    Operation *lastGather = nullptr;
    llvm::MapVector<Operation *, SmallVector<unsigned>> dropped;
    // Current scaling: the scale each rank casts its part with needs every
    // part's amax first. The amaxes meet in one all-reduce per AdamW kernel
    // (a bucket), right after it and before its gathers: NCCL runs the
    // data group's calls in issue order, so a single all-reduce after the
    // last AdamW kernel would wait for every gather issued before it (or,
    // issued before them, hold every FP8 gather until all buckets are
    // updated), while one per bucket waits only for the earlier buckets'
    // gathers, which ran beside this bucket's update (each FP8 part is 1 B
    // an element against AdamW's 28 B of memory traffic), so each bucket's
    // FP8 gather still runs beside the next bucket's AdamW kernel, as
    // delayed scaling's do.
    llvm::MapVector<Operation *, SmallVector<StringRef>> currentByKernel;
    for (auto &[name, c] : candidates)
      if (c.match.current())
        currentByKernel[c.gather.getInputs()[c.gathered].getDefiningOp()]
            .push_back(name);
    llvm::StringMap<Value> currentScales;
    for (auto &[adam, names] : currentByKernel) {
      SmallVector<PartCast> matches;
      SmallVector<Value> parts, scales;
      for (StringRef name : names) {
        Candidate &c = candidates[name];
        matches.push_back(c.match);
        parts.push_back(c.gather.getInputs()[c.gathered]);
      }
      placedAfter[adam] = joinCurrentAmaxes(adam, matches, parts, scales);
      for (auto [name, scale] : llvm::zip(names, scales))
        currentScales[name] = scale;
    }
    for (auto &[name, c] : candidates) {
      Value part = c.gather.getInputs()[c.gathered];
      Value scale;
      if (c.match.current())
        scale = currentScales.lookup(name);
      else if (c.match.scale)
        scale = c.cast.getInputs()[*c.match.scale];
      kernel::FusedOp kmajor;
      kernel::CollectiveOp gather =
          castPart(c.cast, c.match, part, scale, amaxParts, amaxWholes,
                   kmajor, &placedAfter);
      if (kmajor)
        kmajors.push_back(kmajor);
      if (!lastGather || lastGather->isBeforeInBlock(gather))
        lastGather = gather;
      c.store.getValueMutable().assign(part);
      dropped[c.gather].push_back(c.gathered);
    }
    // The transposes go last, in the gathers' order: the compute stream
    // casts every part and updates every bucket before it waits for the
    // first gathered copy.
    Operation *terminator = step.getBody().front().getTerminator();
    for (kernel::FusedOp kmajor : kmajors)
      kmajor->moveBefore(terminator);
    joinAmaxes(lastGather, amaxParts, amaxWholes);
    SmallVector<PartCast> erased;
    for (auto &entry : candidates) {
      entry.second.cast.erase();
      erased.push_back(entry.second.match);
    }
    eraseWholeAmaxes(erased);
    for (auto &[op, indices] : dropped)
      dropGathered(cast<kernel::CollectiveOp>(op), indices);
    storesAfterValues(step.getBody().front());

    // The parameters hold the rank's part: the step's loads are that part
    // (no view of the whole), the init functions' casts make it as above.
    OpBuilder b(module.getContext());
    for (auto &[name, c] : candidates) {
      auto var = module.lookupSymbol<graph::VariableOp>(name);
      RankedTensorType part = partType(var.getTensorType(), dataParallel);
      var.setType(part);
      var->setAttr("data_shards", b.getI64IntegerAttr(dataParallel));
    }
    SmallVector<graph::LoadOp> loads;
    module.walk([&](graph::LoadOp load) {
      if (candidates.contains(load.getVariable()))
        loads.push_back(load);
    });
    llvm::MapVector<Operation *, SmallVector<kernel::FusedOp>> initCasts;
    for (graph::LoadOp load : loads) {
      load.getResult().setType(partType(
          cast<RankedTensorType>(load.getType()), dataParallel));
      for (Operation *user : llvm::make_early_inc_range(load->getUsers())) {
        if (auto view = dyn_cast<kernel::RankPartOp>(user)) {
          view.getResult().replaceAllUsesWith(load.getResult());
          view.erase();
        } else if (auto castKernel = cast<kernel::FusedOp>(user);
                   matchPartCast(castKernel)) {
          // (current scaling's amax kernels go with their casts)
          initCasts[load->getParentOfType<func::FuncOp>()].push_back(
              castKernel);
        }
      }
    }
    for (auto &[func, casts] : initCasts) {
      SmallVector<Value> parts, wholes;
      // The amaxes' all-reduce goes after the last op made here, in the
      // block's order (the casts come in their loads' order).
      Operation *last = nullptr;
      auto later = [&](Operation *op) {
        if (op && (!last || last->isBeforeInBlock(op)))
          last = op;
      };
      SmallVector<PartCast> matches, current;
      SmallVector<Value> currentParts, currentScales;
      Operation *loaded = nullptr;
      for (kernel::FusedOp castKernel : casts) {
        matches.push_back(*matchPartCast(castKernel));
        if (!matches.back().current())
          continue;
        current.push_back(matches.back());
        currentParts.push_back(castKernel.getInputs()[matches.back().weight]);
        Operation *def = currentParts.back().getDefiningOp();
        if (!loaded || loaded->isBeforeInBlock(def))
          loaded = def;
      }
      // Current scaling's scales, from one all-reduce of every part's amax
      // after the last part is loaded (the init program has no update to
      // overlap), before the casts that read them.
      llvm::DenseMap<Operation *, Operation *> placedAfter;
      if (!current.empty()) {
        Operation *scales =
            joinCurrentAmaxes(loaded, current, currentParts, currentScales);
        for (Value part : currentParts)
          placedAfter[part.getDefiningOp()] = scales;
      }
      unsigned nextScale = 0;
      for (auto [castKernel, match] : llvm::zip(casts, matches)) {
        Value part = castKernel.getInputs()[match.weight];
        Value scale;
        if (match.current())
          scale = currentScales[nextScale++];
        else if (match.scale)
          scale = castKernel.getInputs()[*match.scale];
        kernel::FusedOp kmajor;
        later(castPart(castKernel, match, part, scale, parts, wholes, kmajor,
                       match.current() ? &placedAfter : nullptr));
        later(kmajor);
      }
      joinAmaxes(last, parts, wholes);
      for (kernel::FusedOp castKernel : casts)
        castKernel.erase();
      eraseWholeAmaxes(matches);
      storesAfterValues(cast<func::FuncOp>(func).getBody().front());
    }
    return success();
  }

  // `gather` without its results `indices` (their parts are stored as they
  // are); erased when nothing is left to gather.
  static void dropGathered(kernel::CollectiveOp gather,
                           ArrayRef<unsigned> indices) {
    SmallVector<Value> inputs;
    SmallVector<Type> types;
    SmallVector<unsigned> kept;
    for (auto [i, in] : llvm::enumerate(gather.getInputs()))
      if (!llvm::is_contained(indices, unsigned(i))) {
        inputs.push_back(in);
        types.push_back(gather.getResult(i).getType());
        kept.push_back(i);
      }
    if (!inputs.empty()) {
      OpBuilder b(gather);
      auto fewer = kernel::CollectiveOp::create(
          b, gather.getLoc(), types, inputs, gather.getKind(),
          gather.getGroup(), gather.getGroupSize(), gather.getReduction());
      fewer->setAttrs(gather->getAttrs());
      for (auto [j, i] : llvm::enumerate(kept))
        gather.getResult(i).replaceAllUsesWith(fewer.getResult(j));
    }
    gather.erase();
  }

  // The gradient norm from the ranks' parts: each rank's norm of its part,
  // all-gathered, and the norm of those (sqrt of the sum of their squares).
  LogicalResult shardNorm(kernel::FusedOp norm,
                          const llvm::StringMap<unsigned> &scattered,
                          llvm::DenseMap<Value, Value> &parts) {
    Block &body = norm.getBodyBlock();
    for (OpOperand &operand : norm->getOpOperands()) {
      graph::LoadOp load = operand.get().getDefiningOp<graph::LoadOp>();
      if (!load || !scattered.contains(load.getVariable()))
        return norm.emitError("octet-shard-optimizer: a gradient norm over "
                              "what is not a reduce-scattered gradient "
                              "accumulator");
      auto type = cast<RankedTensorType>(operand.get().getType());
      operand.set(partOf(operand.get(), parts));
      body.getArgument(operand.getOperandNumber())
          .setType(partType(type, dataParallel));
    }
    fusion::joinNormAcrossRanks(norm, kDataGroup, dataParallel);
    return success();
  }

  // The moments' variables hold the rank's part of dimension 0;
  // `data_shards` says so to whoever saves or compares them.
  LogicalResult shardMoments(ModuleOp module,
                             const llvm::SetVector<StringRef> &moments) {
    OpBuilder b(module.getContext());
    for (StringRef name : moments) {
      auto var = module.lookupSymbol<graph::VariableOp>(name);
      if (!var)
        return module.emitError("octet-shard-optimizer: no variable @")
               << name;
      RankedTensorType part = partType(var.getTensorType(), dataParallel);
      var.setType(part);
      var->setAttr("data_shards", b.getI64IntegerAttr(dataParallel));
    }
    WalkResult walk = module.walk([&](Operation *op) {
      if (auto load = dyn_cast<graph::LoadOp>(op);
          load && moments.contains(load.getVariable())) {
        load.getResult().setType(partType(
            cast<RankedTensorType>(load.getType()), dataParallel));
        return WalkResult::advance();
      }
      if (auto store = dyn_cast<graph::StoreOp>(op);
          store && moments.contains(store.getVariable())) {
        auto type = cast<RankedTensorType>(store.getValue().getType());
        auto var =
            module.lookupSymbol<graph::VariableOp>(store.getVariable());
        if (type != var.getTensorType()) {
          store.emitError("octet-shard-optimizer: stores a whole tensor "
                          "into @")
              << store.getVariable() << ", which holds this rank's part";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }
};

} // namespace
