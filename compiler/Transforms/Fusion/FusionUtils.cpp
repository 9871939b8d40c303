#include "compiler/Transforms/Fusion/FusionUtils.h"

#include "dialects/fp8/Fp8Dialect.h"
#include "dialects/graph/GraphDialect.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"


#include <functional>
using namespace mlir;


namespace octet::fusion {

std::optional<int64_t> layerOfName(StringRef name) {
  size_t pos = name.find("layers.");
  if (pos == StringRef::npos)
    return std::nullopt;
  StringRef rest = name.drop_front(pos + 7);
  StringRef digits = rest.take_while([](char c) { return c >= '0' && c <= '9'; });
  int64_t layer;
  if (digits.empty() || digits.getAsInteger(10, layer))
    return std::nullopt;
  return layer;
}

int64_t layerOf(Operation *op) {
  if (auto attr = op->getAttrOfType<IntegerAttr>("layer"))
    return attr.getInt();
  return -1;
}

StringRef kindForBody(Block &body) {
  for (Operation &op : body)
    if (isa<graph::RMSNormOp, graph::LayerNormOp, graph::RMSNormGradOp,
            graph::LayerNormGradOp, graph::CrossEntropyOp,
            graph::CrossEntropyGradOp, graph::EmbeddingOp,
            graph::EmbeddingGradOp, graph::BiasGradOp>(op))
      return "row";
  return "elementwise";
}

bool isView(Operation *op) {
  return isa_and_nonnull<graph::ReshapeOp, graph::SliceOp>(op);
}

Value throughViews(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (!isView(def) && !isa<graph::SaveOp>(def))
      break;
    value = def->getOperand(0);
  }
  return value;
}

SmallVector<Operation *> readersThroughViews(Value value) {
  SmallVector<Operation *> out;
  SmallVector<Value> work = {value};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (isView(user) || isa<graph::SaveOp>(user))
        work.push_back(user->getResult(0));
      else
        out.push_back(user);
    }
  }
  return out;
}

bool isContiguousSlice(graph::SliceOp slice) {
  auto in = cast<RankedTensorType>(slice.getInput().getType());
  for (int64_t d = 0; d < slice.getDim(); ++d)
    if (in.getDimSize(d) != 1)
      return false;
  return true;
}

bool bodyHas(kernel::FusedOp fused, ArrayRef<StringRef> names) {
  for (Operation &op : fused.getBodyBlock())
    if (llvm::is_contained(names, op.getName().getStringRef()))
      return true;
  return false;
}

kernel::FusedOp producerFused(Value value) {
  Operation *def = value.getDefiningOp();
  while (isView(def))
    def = def->getOperand(0).getDefiningOp();
  return dyn_cast_or_null<kernel::FusedOp>(def);
}

static void copyKernelAttrs(Operation *from, Operation *to) {
  for (StringRef name : {"layer", "section"})
    if (Attribute attr = from->getAttr(name))
      to->setAttr(name, attr);
}

kernel::FusedOp wrapInFused(OpBuilder &builder, Operation *op, StringRef name) {
  builder.setInsertionPoint(op);
  llvm::SetVector<Value> inputs;
  for (Value v : op->getOperands())
    inputs.insert(v);
  auto fused = kernel::FusedOp::create(builder, op->getLoc(),
                                       op->getResultTypes(),
                                       inputs.getArrayRef(), name, "elementwise");
  Block &body = fused.getBodyBlock();
  IRMapping map;
  for (auto [outer, arg] : llvm::zip(inputs, body.getArguments()))
    map.map(outer, arg);
  OpBuilder inner = OpBuilder::atBlockEnd(&body);
  Operation *clone = inner.clone(*op, map);
  // Function-level bookkeeping attributes stay on the kernel.
  clone->removeAttr("layer");
  clone->removeAttr("section");
  kernel::YieldOp::create(inner, op->getLoc(), clone->getResults());
  fused.setKindAttr(builder.getStringAttr(kindForBody(body)));
  copyKernelAttrs(op, fused);
  op->replaceAllUsesWith(fused.getResults());
  op->erase();
  return fused;
}

// Rebuilds `fused` with `extraInputs` appended; returns the new op and maps
// each extra input to its block argument.
static kernel::FusedOp addInputs(kernel::FusedOp fused,
                                 ArrayRef<Value> extraInputs) {
  SmallVector<Value> inputs(fused.getInputs());
  inputs.append(extraInputs.begin(), extraInputs.end());
  OpBuilder builder(fused);
  auto rebuilt = kernel::FusedOp::create(builder, fused.getLoc(),
                                         fused.getResultTypes(), inputs,
                                         fused.getName(), fused.getKind());
  rebuilt->setAttrs(fused->getAttrs());
  Block &oldBody = fused.getBodyBlock();
  Block &newBody = rebuilt.getBodyBlock();
  for (auto [oldArg, newArg] :
       llvm::zip(oldBody.getArguments(),
                 newBody.getArguments().take_front(oldBody.getNumArguments())))
    oldArg.replaceAllUsesWith(newArg);
  newBody.getOperations().splice(newBody.end(), oldBody.getOperations());
  fused.replaceAllUsesWith(rebuilt.getResults());
  fused.erase();
  return rebuilt;
}

// Erases the view ops (reshape, slice) hanging off `op`'s results that
// nothing reads, transitively.
static void eraseDeadViews(Operation *op) {
  SmallVector<Operation *> views;
  for (Operation *user : op->getUsers())
    if (isView(user))
      views.push_back(user);
  for (Operation *view : views) {
    eraseDeadViews(view);
    if (view->use_empty())
      view->erase();
  }
}

bool pullViewsFrom(kernel::FusedOp consumer, Operation *producer) {
  bool changed = false;
  for (bool again = true; again;) {
    again = false;
    for (auto [index, input] : llvm::enumerate(consumer.getInputs())) {
      Operation *view = input.getDefiningOp();
      // A pulled view's old argument stays until the cleanup below.
      if (!isView(view) || consumer.getBodyBlock().getArgument(index).use_empty())
        continue;
      // Only views whose chain starts at the producer.
      Operation *root = view;
      while (isView(root))
        root = root->getOperand(0).getDefiningOp();
      if (root != producer)
        continue;
      Value source = view->getOperand(0);
      // A source the kernel already reads keeps its one argument.
      auto known = llvm::find(consumer.getInputs(), source);
      kernel::FusedOp rebuilt =
          known != consumer.getInputs().end() ? consumer
                                              : addInputs(consumer, {source});
      Block &body = rebuilt.getBodyBlock();
      OpBuilder inner = OpBuilder::atBlockBegin(&body);
      IRMapping map;
      map.map(source,
              known != consumer.getInputs().end()
                  ? body.getArgument(known - consumer.getInputs().begin())
                  : body.getArguments().back());
      Operation *clone = inner.clone(*view, map);
      body.getArgument(index).replaceAllUsesWith(clone->getResult(0));
      consumer = rebuilt;
      changed = again = true;
      break;
    }
  }
  if (changed) {
    // Drop block arguments nobody reads any more (the former view inputs).
    Block &body = consumer.getBodyBlock();
    SmallVector<Value> keep;
    SmallVector<unsigned> dead;
    for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
      if (arg.use_empty())
        dead.push_back(i);
      else
        keep.push_back(consumer.getInputs()[i]);
    }
    if (!dead.empty()) {
      OpBuilder builder(consumer);
      auto rebuilt = kernel::FusedOp::create(builder, consumer.getLoc(),
                                             consumer.getResultTypes(), keep,
                                             consumer.getName(),
                                             consumer.getKind());
      rebuilt->setAttrs(consumer->getAttrs());
      Block &newBody = rebuilt.getBodyBlock();
      unsigned next = 0;
      for (auto [i, arg] : llvm::enumerate(body.getArguments()))
        if (!arg.use_empty())
          arg.replaceAllUsesWith(newBody.getArgument(next++));
      newBody.getOperations().splice(newBody.end(), body.getOperations());
      consumer.replaceAllUsesWith(rebuilt.getResults());
      consumer.erase();
    }
    // Views left without readers would pin the producer's position for
    // mergeFused: erase them.
    eraseDeadViews(producer);
  }
  return changed;
}

std::optional<RecomputeCone>
recomputeCone(kernel::FusedOp producer, Value inner,
              ArrayRef<StringRef> recomputable,
              function_ref<Value(Value)> readAs) {
  Block &body = producer.getBodyBlock();
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  RecomputeCone cone;
  llvm::SmallPtrSet<Operation *, 16> seen;
  SmallVector<Value> work = {inner};
  auto leaf = [&](Value outer, Value innerValue) {
    Value read = readAs(outer);
    if (!read)
      return false;
    cone.inputs.insert(read);
    cone.innerOf[read] = innerValue;
    return true;
  };
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (!leaf(producer.getInputs()[arg.getArgNumber()], v))
        return std::nullopt;
      continue;
    }
    // A value the producer writes anyway is read back, not recomputed.
    if (v != inner)
      if (auto it = llvm::find(yield.getValues(), v);
          it != yield.getValues().end())
        if (leaf(producer->getResult(it - yield.getValues().begin()), v))
          continue;
    Operation *op = v.getDefiningOp();
    if (!llvm::is_contained(recomputable, op->getName().getStringRef()))
      return std::nullopt;
    if (!seen.insert(op).second)
      continue;
    llvm::append_range(work, op->getOperands());
  }
  for (Operation &op : body)
    if (seen.contains(&op))
      cone.ops.push_back(&op);
  return cone;
}

kernel::FusedOp rebuildYielding(kernel::FusedOp fused, ValueRange values) {
  Block &body = fused.getBodyBlock();
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  SmallVector<Type> types(values.getTypes());
  SmallVector<Value> yielded(values);
  OpBuilder b(fused);
  auto rebuilt =
      kernel::FusedOp::create(b, fused.getLoc(), types, fused.getInputs(),
                              fused.getName(), fused.getKind());
  rebuilt->setAttrs(fused->getAttrs());
  Block &newBody = rebuilt.getBodyBlock();
  for (auto [oldArg, newArg] :
       llvm::zip(body.getArguments(), newBody.getArguments()))
    oldArg.replaceAllUsesWith(newArg);
  newBody.getOperations().splice(newBody.end(), body.getOperations());
  b.setInsertionPoint(yield);
  kernel::YieldOp::create(b, yield.getLoc(), yielded);
  yield.erase();
  return rebuilt;
}

kernel::FusedOp dropUnusedResults(kernel::FusedOp fused) {
  SmallVector<unsigned> kept;
  for (OpResult r : fused->getResults())
    if (!r.use_empty())
      kept.push_back(r.getResultNumber());
  if (kept.size() == fused->getNumResults())
    return fused;
  auto yield = cast<kernel::YieldOp>(fused.getBodyBlock().getTerminator());
  SmallVector<Value> values;
  for (unsigned i : kept)
    values.push_back(yield.getValues()[i]);
  kernel::FusedOp rebuilt = rebuildYielding(fused, values);
  for (auto [j, i] : llvm::enumerate(kept))
    fused->getResult(i).replaceAllUsesWith(rebuilt->getResult(j));
  fused.erase();
  return rebuilt;
}

Value tensorwiseScaleInv(kernel::GemmOp gemm, OpOperand &use) {
  Value scale;
  if (&use == &gemm.getAMutable())
    scale = gemm.getAScaleInv();
  else if (&use == &gemm.getBMutable())
    scale = gemm.getBScaleInv();
  if (!scale || cast<RankedTensorType>(scale.getType()).getRank() != 0)
    return nullptr;
  return scale;
}

kernel::FusedOp dropUnread(kernel::FusedOp fused) {
  if (fused->use_empty()) {
    fused.erase();
    return nullptr;
  }
  kernel::FusedOp rebuilt = dropUnusedResults(fused);
  Block &body = rebuilt.getBodyBlock();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
  return rebuilt;
}

kernel::FusedOp mergeFused(kernel::FusedOp first, kernel::FusedOp second,
                           StringRef name, StringRef kindOverride) {
  if (first == second || first->getBlock() != second->getBlock())
    return nullptr;
  if (second->isBeforeInBlock(first))
    std::swap(first, second);
  // Where the merged kernel can sit: at `second` if nothing between the two
  // reads `first`'s results; else at `first` if `second` reads nothing
  // defined between them.
  auto between = [&](Operation *op) {
    return first->isBeforeInBlock(op) && op->isBeforeInBlock(second);
  };
  bool atSecond = true;
  for (Operation *user : first->getUsers()) {
    Operation *top = second->getBlock()->findAncestorOpInBlock(*user);
    if (top && top != second && between(top))
      atSecond = false;
  }
  bool atFirst = true;
  // Inputs of `second` that `first` computes become values of the merged
  // body, so only those defined strictly between the two are in the way.
  for (Value v : second.getInputs()) {
    Operation *def = v.getDefiningOp();
    if (def && def != first.getOperation() && between(def))
      atFirst = false;
  }
  if (!atSecond && !atFirst)
    return nullptr;

  llvm::SetVector<Value> inputs;
  for (Value v : first.getInputs())
    inputs.insert(v);
  for (Value v : second.getInputs())
    if (v.getDefiningOp() != first.getOperation())
      inputs.insert(v);
  // Results of `first` that something other than `second` still reads.
  SmallVector<unsigned> firstKept;
  for (OpResult r : first->getResults())
    if (llvm::any_of(r.getUsers(),
                     [&](Operation *u) {
                       return second->getBlock()->findAncestorOpInBlock(*u) !=
                              second.getOperation();
                     }))
      firstKept.push_back(r.getResultNumber());
  SmallVector<Type> types;
  for (unsigned i : firstKept)
    types.push_back(first->getResult(i).getType());
  llvm::append_range(types, second->getResultTypes());

  OpBuilder builder(atSecond ? second.getOperation() : first.getOperation());
  StringRef kind = kindOverride;
  if (kind.empty())
    kind = (first.getKind() == "row" || second.getKind() == "row")
               ? "row"
               : (first.getKind() == "multi_tensor" ||
                          second.getKind() == "multi_tensor"
                      ? "multi_tensor"
                      : "elementwise");
  auto merged = kernel::FusedOp::create(
      builder, second.getLoc(), types, inputs.getArrayRef(),
      name.empty() ? first.getName() : name, kind);
  copyKernelAttrs(second, merged);
  Block &body = merged.getBodyBlock();
  IRMapping map;
  for (auto [outer, arg] : llvm::zip(inputs, body.getArguments()))
    map.map(outer, arg);
  OpBuilder inner = OpBuilder::atBlockEnd(&body);
  auto cloneBody = [&](kernel::FusedOp fused) -> SmallVector<Value> {
    Block &old = fused.getBodyBlock();
    for (auto [arg, outer] : llvm::zip(old.getArguments(), fused.getInputs()))
      map.map(arg, map.lookup(outer));
    for (Operation &op : old.without_terminator())
      inner.clone(op, map);
    SmallVector<Value> yielded;
    for (Value v : old.getTerminator()->getOperands())
      yielded.push_back(map.lookup(v));
    return yielded;
  };
  SmallVector<Value> firstYield = cloneBody(first);
  for (auto [i, r] : llvm::enumerate(first->getResults()))
    map.map(r, firstYield[i]);
  SmallVector<Value> secondYield = cloneBody(second);
  SmallVector<Value> yields;
  for (unsigned i : firstKept)
    yields.push_back(firstYield[i]);
  llvm::append_range(yields, secondYield);
  kernel::YieldOp::create(inner, merged.getLoc(), yields);

  for (auto [j, i] : llvm::enumerate(firstKept))
    first->getResult(i).replaceAllUsesWith(merged->getResult(j));
  for (auto [j, r] : llvm::enumerate(second->getResults()))
    r.replaceAllUsesWith(merged->getResult(firstKept.size() + j));
  second.erase();
  first.erase();
  return merged;
}

// Blockwise: the K-major copy of the data and the transpose of its scales
// (two copies side by side, LowerToKernel's form of fp8.transpose) become
// one fp8.transpose in the kernel that quantizes.
static kernel::FusedOp absorbBlockTransposeCopy(kernel::FusedOp producer,
                                                kernel::CopyOp copy,
                                                fp8::BlockQuantizeOp quantize) {
  Block &body = producer.getBodyBlock();
  Value outerScale;
  for (auto [i, v] : llvm::enumerate(body.getTerminator()->getOperands()))
    if (v == quantize.getScales())
      outerScale = producer->getResult(i);
  if (!outerScale)
    return nullptr;
  kernel::CopyOp scaleCopy;
  for (Operation *user : outerScale.getUsers())
    if (auto c = dyn_cast<kernel::CopyOp>(user); c && c.getTranspose())
      scaleCopy = c;
  if (!scaleCopy || scaleCopy->getBlock() != copy->getBlock())
    return nullptr;
  // One op replaces both copies: at the later of the two.
  kernel::CopyOp later =
      copy->isBeforeInBlock(scaleCopy) ? scaleCopy : copy;
  OpBuilder builder(later);
  auto transpose = fp8::TransposeOp::create(
      builder, copy.getLoc(), copy.getResult().getType(),
      scaleCopy.getResult().getType(), copy.getInput(), outerScale,
      quantize.getBlockAttr());
  copy.getResult().replaceAllUsesWith(transpose.getResult());
  scaleCopy.getResult().replaceAllUsesWith(transpose.getResultScale());
  copyKernelAttrs(copy, transpose);
  copy.erase();
  scaleCopy.erase();
  kernel::FusedOp wrapped =
      wrapInFused(builder, transpose, producer.getName());
  return mergeFused(producer, wrapped);
}

kernel::FusedOp absorbTransposeCopy(kernel::FusedOp producer,
                                    kernel::CopyOp copy) {
  if (!copy.getTranspose() || copy.getInput().getDefiningOp() != producer)
    return nullptr;
  auto result = cast<OpResult>(copy.getInput());
  Block &body = producer.getBodyBlock();
  Value inner = body.getTerminator()->getOperand(result.getResultNumber());
  if (auto block = inner.getDefiningOp<fp8::BlockQuantizeOp>())
    return block.getResult() == inner
               ? absorbBlockTransposeCopy(producer, copy, block)
               : nullptr;
  auto quantize = inner.getDefiningOp<fp8::QuantizeOp>();
  if (!quantize || quantize.getResult() != inner)
    return nullptr;
  // The scale as the code after the producer sees it.
  Value scale = quantize.getScale(), outerScale;
  if (auto arg = dyn_cast<BlockArgument>(scale)) {
    outerScale = producer.getInputs()[arg.getArgNumber()];
  } else {
    for (auto [i, v] : llvm::enumerate(body.getTerminator()->getOperands()))
      if (v == scale)
        outerScale = producer->getResult(i);
  }
  if (!outerScale)
    return nullptr;
  OpBuilder builder(copy);
  auto transpose = fp8::TransposeOp::create(
      builder, copy.getLoc(), copy.getResult().getType(), scale.getType(),
      copy.getInput(), outerScale, DenseI64ArrayAttr());
  copy.getResult().replaceAllUsesWith(transpose.getResult());
  copyKernelAttrs(copy, transpose);
  copy.erase();
  kernel::FusedOp wrapped = wrapInFused(builder, transpose, producer.getName());
  // The transposed scale of a tensorwise scale is the scale itself; keep the
  // kernel's result only if someone reads it.
  return mergeFused(producer, wrapped);
}

bool bodyOnly(kernel::FusedOp fused, ArrayRef<StringRef> names) {
  for (Operation &op : fused.getBodyBlock().without_terminator())
    if (!llvm::is_contained(names, op.getName().getStringRef()))
      return false;
  return true;
}

// Kernel ops that read `op`'s results, directly or through views.
static SmallVector<Operation *> kernelUsers(Operation *op) {
  SmallVector<Operation *> users, work(op->getUsers().begin(),
                                       op->getUsers().end());
  while (!work.empty()) {
    Operation *u = work.pop_back_val();
    if (isView(u)) {
      work.append(u->getUsers().begin(), u->getUsers().end());
      continue;
    }
    if (isa<kernel::FusedOp, kernel::CopyOp>(u) && !llvm::is_contained(users, u))
      users.push_back(u);
  }
  return users;
}

kernel::FusedOp absorbConsumers(kernel::FusedOp fused,
                                ArrayRef<StringRef> allowed) {
  for (bool changed = true; changed;) {
    changed = false;
    for (Operation *user : kernelUsers(fused)) {
      if (auto copy = dyn_cast<kernel::CopyOp>(user)) {
        if (auto merged = absorbTransposeCopy(fused, copy)) {
          fused = merged;
          changed = true;
          break;
        }
        continue;
      }
      auto consumer = cast<kernel::FusedOp>(user);
      if (consumer.getKind() == "multi_tensor" || !bodyOnly(consumer, allowed))
        continue;
      // Pulling the views in rebuilds the consumer; find it again by its
      // position.
      Operation *next = consumer->getNextNode();
      pullViewsFrom(consumer, fused);
      auto rebuilt = cast<kernel::FusedOp>(next->getPrevNode());
      if (auto merged = mergeFused(fused, rebuilt, fused.getName())) {
        fused = merged;
        changed = true;
        break;
      }
    }
  }
  return fused;
}

bool onlyQuantizedInTiles(Value value) {
  constexpr int64_t kTileSide = 128;
  SmallVector<Operation *> work(value.getUsers().begin(),
                                value.getUsers().end());
  bool any = false;
  while (!work.empty()) {
    Operation *user = work.pop_back_val();
    if (auto reshape = dyn_cast<graph::ReshapeOp>(user)) {
      if (cast<RankedTensorType>(reshape.getInput().getType()).getShape().back() !=
          cast<RankedTensorType>(reshape.getType()).getShape().back())
        return false;
      work.append(user->getUsers().begin(), user->getUsers().end());
      continue;
    }
    auto consumer = dyn_cast<kernel::FusedOp>(user);
    if (!consumer || !bodyOnly(consumer, {"fp8.block_quantize"}))
      return false;
    for (auto q : consumer.getBodyBlock().getOps<fp8::BlockQuantizeOp>()) {
      auto shape = cast<RankedTensorType>(q.getInput().getType()).getShape();
      if (shape.size() != 2 || shape[0] % kTileSide || shape[1] % kTileSide)
        return false;
    }
    any = true;
  }
  return any;
}

void normalizeStateAccess(Operation *func) {
  Block &body = func->getRegion(0).front();
  SmallVector<graph::LoadOp> loads(body.getOps<graph::LoadOp>());
  SmallVector<graph::StoreOp> stores(body.getOps<graph::StoreOp>());
  Operation *terminator = body.getTerminator();
  Operation *lastHoisted = nullptr;
  for (graph::LoadOp load : loads) {
    bool blocked = false;
    for (Operation &op : body) {
      if (&op == load.getOperation())
        break;
      if (auto store = dyn_cast<graph::StoreOp>(op))
        blocked |= store.getVariable() == load.getVariable();
    }
    if (blocked)
      continue;
    if (lastHoisted)
      load->moveAfter(lastHoisted);
    else
      load->moveBefore(&body, body.begin());
    lastHoisted = load;
  }
  for (graph::StoreOp store : stores) {
    bool blocked = false;
    for (Operation *op = store->getNextNode(); op; op = op->getNextNode())
      if (auto load = dyn_cast<graph::LoadOp>(op))
        blocked |= load.getVariable() == store.getVariable();
    if (!blocked)
      store->moveBefore(terminator);
  }
}

SmallVector<kernel::FusedOp> fusedOps(Operation *func) {
  SmallVector<kernel::FusedOp> out;
  for (Operation &op : func->getRegion(0).front())
    if (auto f = dyn_cast<kernel::FusedOp>(op))
      out.push_back(f);
  return out;
}

void forEachFused(Operation *func, function_ref<bool(kernel::FusedOp)> match,
                  function_ref<kernel::FusedOp(kernel::FusedOp)> fuse) {
  // A marker attribute rather than a set of pointers: an erased kernel's
  // address may be reused by the kernel a merge creates.
  constexpr StringLiteral kVisited = "octet.fusion_visited";
  auto next = [&]() -> kernel::FusedOp {
    for (kernel::FusedOp fused : fusedOps(func))
      if (!fused->hasAttr(kVisited) && match(fused))
        return fused;
    return nullptr;
  };
  while (kernel::FusedOp fused = next()) {
    fused->setAttr(kVisited, UnitAttr::get(func->getContext()));
    if (kernel::FusedOp result = fuse(fused))
      result->setAttr(kVisited, UnitAttr::get(func->getContext()));
  }
  for (kernel::FusedOp fused : fusedOps(func))
    fused->removeAttr(kVisited);
}

void joinNormAcrossRanks(kernel::FusedOp norm, StringRef group,
                         int64_t ranks) {
  Value mine = norm->getResult(0);
  OpBuilder b(norm);
  b.setInsertionPointAfter(norm);
  Location loc = norm.getLoc();
  auto f32 = b.getF32Type();
  auto one = RankedTensorType::get({1}, f32);
  auto all = RankedTensorType::get({ranks}, f32);
  Value asVector = graph::ReshapeOp::create(b, loc, one, mine);
  auto gathered = kernel::CollectiveOp::create(
      b, loc, TypeRange{all}, ValueRange{asVector}, "all_gather", group,
      ranks, "sum");
  gathered->setAttr("layer", b.getI64IntegerAttr(-1));
  gathered->setAttr("section", b.getStringAttr("optimizer"));
  auto joined = kernel::FusedOp::create(b, loc, TypeRange{mine.getType()},
                                        ValueRange{gathered.getResult(0)},
                                        "global_norm", "elementwise");
  Block &inner = joined.getBodyBlock();
  OpBuilder ib = OpBuilder::atBlockEnd(&inner);
  // Each rank's norm already carries the scale.
  Value total = graph::GlobalNormOp::create(ib, loc, mine.getType(),
                                            ValueRange{inner.getArgument(0)},
                                            ib.getF64FloatAttr(1.0));
  kernel::YieldOp::create(ib, loc, ValueRange{total});
  joined->setAttr("layer", b.getI64IntegerAttr(-1));
  joined->setAttr("section", b.getStringAttr("optimizer"));
  mine.replaceAllUsesExcept(joined->getResult(0), asVector.getDefiningOp());
}


static kernel::FusedOp singleOpKernel(Operation *op, StringRef name) {
  auto fused = dyn_cast_or_null<kernel::FusedOp>(op);
  if (!fused || !bodyOnly(fused, {name}) ||
      fused.getBodyBlock().getOperations().size() != 2)
    return nullptr;
  return fused;
}

static Value outerInput(kernel::FusedOp fused, Value inner) {
  return fused.getInputs()[cast<BlockArgument>(inner).getArgNumber()];
}

Value LmHead::lossInput(Value inner) const {
  return outerInput(loss, inner);
}

Value LmHead::lossGradInput(Value inner) const {
  return outerInput(lossGrad, inner);
}

std::optional<LmHead> matchLmHead(kernel::GemmOp fprop,
                                  bool wgradMayAccumulate) {
  auto plain = [](kernel::GemmOp g, bool mayAccumulate) {
    return g && !g.getAScale() && !g.getBias() &&
           (mayAccumulate || !g.getC()) && g.getEpilogueKind() == "none";
  };
  if (!plain(fprop, false) || fprop.getRole() != "fprop" ||
      !fprop.getTransposeB() || fprop.getTransposeA())
    return std::nullopt;
  LmHead m;
  m.fprop = fprop;
  for (Operation *reader : readersThroughViews(fprop.getResult())) {
    if (auto f = singleOpKernel(reader, "graph.cross_entropy"); f && !m.loss)
      m.loss = f;
    else if (auto g = singleOpKernel(reader, "graph.cross_entropy_grad");
             g && !m.lossGrad)
      m.lossGrad = g;
    else
      return std::nullopt;
  }
  if (!m.loss || !m.lossGrad)
    return std::nullopt;
  Value dlogits = m.lossGrad->getResult(0);
  for (Operation *reader : readersThroughViews(dlogits)) {
    auto g = dyn_cast<kernel::GemmOp>(reader);
    bool wgrad = g && g.getRole() == "wgrad";
    if (!plain(g, wgrad && wgradMayAccumulate) ||
        g.getParam() != fprop.getParam() || throughViews(g.getA()) != dlogits ||
        (g.getC() && throughViews(g.getC()) == dlogits))
      return std::nullopt;
    if (g.getRole() == "dgrad" && !m.dgrad && !g.getTransposeA() &&
        !g.getTransposeB() && g.getB() == fprop.getB())
      m.dgrad = g;
    else if (wgrad && !m.wgrad && g.getTransposeA() && !g.getTransposeB())
      m.wgrad = g;
    else
      return std::nullopt;
  }
  if (!m.dgrad || !m.wgrad)
    return std::nullopt;
  // Both cross-entropy kernels read the same logits, labels and mask, and
  // divide by their own mask's count.
  m.crossEntropy = *m.loss.getBodyBlock().getOps<graph::CrossEntropyOp>().begin();
  m.crossEntropyGrad =
      *m.lossGrad.getBodyBlock().getOps<graph::CrossEntropyGradOp>().begin();
  graph::CrossEntropyOp ce = m.crossEntropy;
  graph::CrossEntropyGradOp ceGrad = m.crossEntropyGrad;
  if (ce.getBatchMask() || ceGrad.getBatchMask() ||
      throughViews(m.lossGradInput(ceGrad.getLogits())) !=
          fprop.getResult() ||
      m.lossInput(ce.getLabels()) != m.lossGradInput(ceGrad.getLabels()) ||
      m.lossInput(ce.getLossMask()) != m.lossGradInput(ceGrad.getLossMask()))
    return std::nullopt;
  return m;
}

kernel::FusedOp oneOpKernel(Value value) {
  auto fused = throughViews(value).getDefiningOp<kernel::FusedOp>();
  if (!fused || fused.getBodyBlock().getOperations().size() != 2 ||
      fused->getNumResults() != 1)
    return nullptr;
  return fused;
}

bool recomputes(kernel::FusedOp recompute, kernel::FusedOp original) {
  // A save is the same tensor, kept for the backward.
  auto unsaved = [](Value v) {
    while (auto save = v.getDefiningOp<graph::SaveOp>())
      v = save->getOperand(0);
    return v;
  };
  if (!recompute || !original || recompute == original ||
      recompute.getInputs().size() != original.getInputs().size() ||
      !llvm::all_of_zip(recompute.getInputs(), original.getInputs(),
                        [&](Value a, Value b) {
                          return unsaved(a) == unsaved(b);
                        }))
    return false;
  Operation &a = recompute.getBodyBlock().front();
  Operation &b = original.getBodyBlock().front();
  if (a.getName() != b.getName() || !a.hasAttr("recomputed"))
    return false;
  NamedAttrList attrs(a.getAttrDictionary());
  attrs.erase("recomputed");
  return attrs.getDictionary(a.getContext()) == b.getAttrDictionary();
}

bool readersFollow(Block &block, Operation *after, ArrayRef<Value> results,
                   SmallVectorImpl<Operation *> &moved) {
  std::function<bool(Operation *)> lateEnough = [&](Operation *user) {
    Operation *top = block.findAncestorOpInBlock(*user);
    if (!after || after->isBeforeInBlock(top))
      return true;
    if (!isView(top) || !llvm::all_of(top->getUsers(), lateEnough))
      return false;
    moved.push_back(top);
    return true;
  };
  for (Value r : results)
    if (!llvm::all_of(r.getUsers(), lateEnough))
      return false;
  return true;
}

Value wgradInputOf(LmHead head, kernel::FusedOp &recompute) {
  Value x = head.fprop.getA(), xw = head.wgrad.getB();
  recompute = oneOpKernel(xw);
  if (xw.getType() == x.getType() && recomputes(recompute, oneOpKernel(x)))
    return x;
  recompute = nullptr;
  return xw;
}

void placeViewsAfter(ArrayRef<Operation *> moved, Operation *last) {
  for (Operation *view : llvm::reverse(moved)) {
    view->moveAfter(last);
    last = view;
  }
}

void eraseReplacedLmHead(LmHead head, Operation *recompute) {
  std::function<void(Operation *)> eraseDead = [&](Operation *op) {
    for (Operation *user : llvm::to_vector(op->getUsers()))
      if (isView(user) || isa<graph::SaveOp>(user))
        eraseDead(user);
    if (op->use_empty())
      op->erase();
  };
  for (Operation *op : {head.wgrad.getOperation(), head.dgrad.getOperation(),
                        head.lossGrad.getOperation(), head.loss.getOperation(),
                        head.fprop.getOperation()})
    eraseDead(op);
  if (recompute)
    eraseDead(recompute);
}

} // namespace octet::fusion
