// octet-reduce-gradients: the data-parallel gradient all-reduce moves into
// the backward of the microbatch that completes a step, one bucket at a time,
// so that it runs while the backward computes the next bucket.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

namespace octet {
#define GEN_PASS_DEF_OCTETREDUCEGRADIENTS
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

constexpr StringRef kGradientPrefix = "grad.";

struct GradientStore {
  graph::StoreOp store;
  // The op of the function's block whose result is stored: the bucket's
  // all-reduce waits for the last of these.
  Operation *producer;
  int64_t elements;
};

struct ReduceGradients
    : public octet::impl::OctetReduceGradientsBase<ReduceGradients> {
  using OctetReduceGradientsBase::OctetReduceGradientsBase;

  void runOnOperation() override {
    if (dataParallel <= 1)
      return;
    auto func = getOperation().lookupSymbol<func::FuncOp>("train_microbatch");
    if (!func || func.isExternal())
      return;
    if (failed(reduce(func)))
      return signalPassFailure();
    overlapAmaxReduce(func.getBody().front());
  }

  // The delayed recipe's amax all-reduce (octet-lower-to-kernel: one
  // bucketed max over the data group, every microbatch, before the scale
  // updates) shares the communicator with the buckets, whose calls NCCL
  // runs in issue order: issued on the compute stream in the backward, it
  // would hold the compute stream there until the buckets issued before it
  // are done. It goes on the communication stream as soon as its amaxes
  // are made, ahead of the buckets that fill later, and the scale updates
  // it feeds and their stores go to the program's end: there the compute
  // stream finds it done and updates the scales while the last buckets
  // (a tied embedding's, made by the backward's last kernel) are still
  // being reduced, instead of waiting for them first. Left where it is
  // when the updates feed more than stores, or when the program loads
  // their state after they store it (it would read the old value).
  void overlapAmaxReduce(Block &body) {
    for (auto coll :
         llvm::make_early_inc_range(body.getOps<kernel::CollectiveOp>())) {
      if (coll.getKind() != "all_reduce" || coll.getReduction() != "max" ||
          coll.getCommStream() || coll.getLastMicrobatch() ||
          coll.getGroup() != "data")
        continue;
      llvm::SetVector<Operation *> updates, stores;
      bool onlyStored = true;
      for (Operation *user : coll->getUsers()) {
        if (!isa<kernel::FusedOp>(user) || user->getBlock() != &body) {
          onlyStored = false;
          break;
        }
        updates.insert(user);
        for (Operation *use : user->getUsers()) {
          if (!isa<graph::StoreOp>(use) || use->getBlock() != &body)
            onlyStored = false;
          else
            stores.insert(use);
        }
      }
      if (!onlyStored || updates.empty())
        continue;
      bool stateReadLater = llvm::any_of(stores, [&](Operation *op) {
        auto store = cast<graph::StoreOp>(op);
        for (Operation *next = store->getNextNode(); next;
             next = next->getNextNode())
          if (auto load = dyn_cast<graph::LoadOp>(next);
              load && load.getVariable() == store.getVariable())
            return true;
        return false;
      });
      if (stateReadLater)
        continue;
      auto inOrder = [](llvm::SetVector<Operation *> &ops) {
        SmallVector<Operation *> sorted(ops.begin(), ops.end());
        llvm::sort(sorted, [](Operation *a, Operation *b) {
          return a->isBeforeInBlock(b);
        });
        return sorted;
      };
      Operation *ready = nullptr;
      for (Value operand : coll->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (Operation *top = body.findAncestorOpInBlock(*def);
              top && (!ready || ready->isBeforeInBlock(top)))
            ready = top;
      if (ready)
        coll->moveAfter(ready);
      else
        coll->moveBefore(&body.front());
      coll.setCommStream(true);
      Operation *end = body.getTerminator();
      for (Operation *op : inOrder(updates))
        op->moveBefore(end);
      for (Operation *op : inOrder(stores))
        op->moveBefore(end);
    }
  }

  int64_t bucketThreshold() const {
    if (bucketElements > 0)
      return bucketElements;
    return std::max<int64_t>(40'000'000, 1'000'000 * dataParallel);
  }

  LogicalResult reduce(func::FuncOp func) {
    Block &body = func.getBody().front();
    llvm::DenseMap<Operation *, int64_t> position;
    int64_t at = 0;
    for (Operation &op : body)
      position[&op] = at++;

    SmallVector<GradientStore> stores;
    for (auto store : body.getOps<graph::StoreOp>()) {
      // Already the data group's sum (octet-gather-embedding-gradient).
      if (!store.getVariable().starts_with(kGradientPrefix) ||
          store->hasAttr(fusion::kSummedOverDataAttr))
        continue;
      Value value = store.getValue();
      Operation *producer = value.getDefiningOp();
      if (producer)
        producer = body.findAncestorOpInBlock(*producer);
      auto type = cast<RankedTensorType>(value.getType());
      stores.push_back({store, producer, type.getNumElements()});
    }
    if (stores.empty())
      return success();
    // The backward's order: a bucket fills as its last gradient is made.
    llvm::stable_sort(stores, [&](const GradientStore &a,
                                  const GradientStore &b) {
      return (a.producer ? position[a.producer] : -1) <
             (b.producer ? position[b.producer] : -1);
    });

    int64_t threshold = bucketThreshold();
    Operation *previous = nullptr;
    for (size_t begin = 0; begin < stores.size();) {
      size_t end = begin;
      int64_t elements = 0;
      while (end < stores.size() && elements < threshold)
        elements += stores[end++].elements;
      auto bucket = llvm::ArrayRef(stores).slice(begin, end - begin);
      auto reduced = reduceBucket(body, bucket, previous);
      if (failed(reduced))
        return failure();
      previous = *reduced;
      begin = end;
    }
    return success();
  }

  // One all-reduce over `bucket`, right after the last of its producers
  // (and after the previous bucket's, so the buckets reach NCCL in the
  // backward's order); the stores move after it to store its results.
  FailureOr<Operation *> reduceBucket(Block &body,
                                      llvm::ArrayRef<GradientStore> bucket,
                                      Operation *previous) {
    Operation *after = previous;
    for (const GradientStore &g : bucket)
      if (g.producer && (!after || after->isBeforeInBlock(g.producer)))
        after = g.producer;
    OpBuilder b(body.getParentOp()->getContext());
    if (after)
      b.setInsertionPointAfter(after);
    else
      b.setInsertionPointToStart(&body);

    SmallVector<Value> values;
    SmallVector<Type> types;
    for (GradientStore g : bucket) {
      values.push_back(g.store.getValue());
      types.push_back(g.store.getValue().getType());
    }
    Location loc = bucket.back().store->getLoc();
    auto all = kernel::CollectiveOp::create(b, loc, types, values, "all_reduce",
                                            "data", dataParallel, "sum");
    all->setAttr("last_microbatch", b.getUnitAttr());
    all->setAttr("comm_stream", b.getUnitAttr());
    Attribute layer = after ? after->getAttr("layer") : Attribute();
    all->setAttr("layer", layer ? layer : b.getI64IntegerAttr(-1));
    all->setAttr("section", b.getStringAttr("backward"));

    Operation *last = all;
    for (auto [g, result] : llvm::zip(bucket, all.getResults())) {
      graph::StoreOp store = g.store;
      Value value = store.getValue();
      // The all-reduce works in the accumulator's memory while the backward
      // goes on: nothing after it may read the sum it is making.
      for (Operation *user : value.getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*user);
        if (top && top != store.getOperation() && all->isBeforeInBlock(top))
          return user->emitError("reads the gradient stored into @")
                 << store.getVariable()
                 << " after its data-parallel all-reduce starts";
      }
      if (store->isBeforeInBlock(all)) {
        for (Operation *op = store->getNextNode(); op != all.getOperation();
             op = op->getNextNode())
          if (auto load = dyn_cast<graph::LoadOp>(op);
              load && load.getVariable() == store.getVariable())
            return load.emitError("reads @")
                   << store.getVariable()
                   << " between its store and the data-parallel all-reduce "
                      "the store must wait for";
        store->moveAfter(last);
        last = store;
      }
      store.getValueMutable().assign(result);
    }
    return all.getOperation();
  }
};

} // namespace
