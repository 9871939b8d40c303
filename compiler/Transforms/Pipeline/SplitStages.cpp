// octet-split-stages: @train_microbatch cut into a forward and a backward
// function per pipeline chunk, joined only by static-shape edge tensors
// and each chunk's stash (compiler/Transforms/Pipeline/PipelinePasses.td).

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Pipeline/Passes.h"
#include "compiler/Transforms/Pipeline/OpInputs.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace octet {
#define GEN_PASS_DEF_OCTETSPLITSTAGES
#include "compiler/Transforms/Pipeline/PipelinePasses.h.inc"

std::string stageForwardName(int64_t stage) {
  return "stage" + std::to_string(stage) + "_forward";
}
std::string stageBackwardName(int64_t stage) {
  return "stage" + std::to_string(stage) + "_backward";
}
std::string rankOptimizerName(int64_t rank) {
  return "rank" + std::to_string(rank) + "_optimizer_step";
}
std::string rankInitName(int64_t rank, llvm::StringRef name) {
  return "rank" + std::to_string(rank) + "_" + name.str();
}
std::vector<std::string> rankInitFunctions(mlir::ModuleOp module,
                                           int64_t rank) {
  std::vector<std::string> names;
  std::string prefix = rankInitName(rank, "");
  if (auto inits = module->getAttrOfType<mlir::ArrayAttr>("octet.init_functions"))
    for (llvm::StringRef name : inits.getAsValueRange<mlir::StringAttr>())
      if (name.starts_with(prefix))
        names.push_back(name.str());
  return names;
}
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

// A function of the cut: chunk `chunk`'s forward or backward. Ordered as
// they run for one microbatch: forwards by chunk, then backwards in reverse.
struct Part {
  int64_t chunk = 0;
  bool backward = false;
  bool operator==(const Part &o) const {
    return chunk == o.chunk && backward == o.backward;
  }
  bool operator!=(const Part &o) const { return !(*this == o); }
};

std::string describe(const Part &p) {
  return "chunk " + std::to_string(p.chunk) +
         (p.backward ? " backward" : " forward");
}

std::string describe(Operation *op) { return pipeline::describeOp(op); }

using pipeline::capturedValues;
using pipeline::inputsOf;

struct SplitStages : public octet::impl::OctetSplitStagesBase<SplitStages> {
  using OctetSplitStagesBase::OctetSplitStagesBase;

  int64_t chunks = 0;
  func::FuncOp step;
  llvm::DenseMap<Operation *, int64_t> position;
  // The part of every op of the step's body that belongs to one.
  llvm::DenseMap<Operation *, Part> partOf;
  // A collective's part by its own section and layer, as another op's.
  llvm::DenseMap<Operation *, Part> anchorOf;
  // Per chunk: what its forward receives from the previous chunk, what its
  // backward receives from the next, and what its forward keeps for its
  // backward.
  std::vector<llvm::SetVector<Value>> activationIn, gradientIn, stash;
  llvm::StringMap<Part> storedBy;
  llvm::StringSet<> written;

  void runOnOperation() override {
    if (layerSplit.empty())
      return;
    ModuleOp module = getOperation();
    step = module.lookupSymbol<func::FuncOp>("train_microbatch");
    if (!step || step.isExternal()) {
      module.emitError("octet-split-stages: the module has no "
                       "@train_microbatch to cut into pipeline stages");
      return signalPassFailure();
    }
    if (failed(assignParts()) || failed(findBoundaries()) || failed(emit()))
      return signalPassFailure();
  }

  // The part of an op that is its own: anchored by its section.
  LogicalResult assignParts() {
    chunks = static_cast<int64_t>(layerSplit.size());
    std::vector<int64_t> chunkOfLayer;
    for (int64_t c = 0; c < chunks; ++c) {
      if (layerSplit[c] <= 0)
        return step.emitError("octet-split-stages: layer-split entry ")
               << c << " is " << layerSplit[c]
               << "; every chunk needs at least one layer";
      chunkOfLayer.insert(chunkOfLayer.end(), layerSplit[c], c);
    }
    Block &body = step.getBody().front();
    for (auto store : body.getOps<graph::StoreOp>())
      written.insert(store.getVariable());
    int64_t at = 0, firstLayerForward = -1, lastLayerBackward = -1;
    for (Operation &op : body) {
      position[&op] = at++;
      auto section = op.getAttrOfType<StringAttr>("section");
      auto layer = op.getAttrOfType<IntegerAttr>("layer");
      if (!section || !layer || layer.getInt() < 0)
        continue;
      // A layer's weight cast (FP8 recipes quantize the weights at the top
      // of the step) is copied where it is read; it does not mark where
      // the layers begin.
      if (op.getNumResults() > 0 && readsOnlyWeights(&op))
        continue;
      if (section.getValue() == "forward" && firstLayerForward < 0)
        firstLayerForward = position[&op];
      if (section.getValue() == "backward")
        lastLayerBackward = position[&op];
    }
    SmallVector<kernel::CollectiveOp> collectives;
    for (Operation &op : body) {
      // A collective goes where its operands are made (placeCollectives);
      // its own section and layer only place what it reads of the step's
      // arguments.
      auto collective = dyn_cast<kernel::CollectiveOp>(op);
      if (collective)
        collectives.push_back(collective);
      auto section = op.getAttrOfType<StringAttr>("section");
      // A weight's BF16 copy: every function that reads it makes its own
      // rather than stashing one per microbatch in flight.
      if (!collective && section && op.getNumResults() > 0 &&
          readsOnlyWeights(&op))
        continue;
      if (!section)
        continue;
      bool backward = section.getValue() == "backward";
      if (collective && !backward && section.getValue() != "forward")
        continue;
      if (!backward && section.getValue() != "forward")
        return op.emitError("octet-split-stages: ")
               << describe(&op) << " of section \"" << section.getValue()
               << "\" is neither forward nor backward; only those are cut "
                  "into pipeline stages";
      auto layerAttr = op.getAttrOfType<IntegerAttr>("layer");
      int64_t layer = layerAttr ? layerAttr.getInt() : -1;
      int64_t chunk;
      if (layer >= static_cast<int64_t>(chunkOfLayer.size()))
        return op.emitError("octet-split-stages: ")
               << describe(&op) << " is of layer " << layer
               << ", but layer-split holds " << chunkOfLayer.size()
               << " layers; make it sum to the model's layers";
      if (layer >= 0)
        chunk = chunkOfLayer[layer];
      else if (!backward)
        chunk = position[&op] < firstLayerForward ? 0 : chunks - 1;
      else
        chunk = position[&op] > lastLayerBackward ? 0 : chunks - 1;
      if (collective)
        anchorOf[&op] = Part{chunk, backward};
      else
        partOf[&op] = Part{chunk, backward};
    }
    if (failed(placeCollectives(collectives)))
    return failure();
    if (failed(splitPerTensorKernels(chunkOfLayer)))
      return failure();
    // A store goes where its value is made.
    for (auto store : body.getOps<graph::StoreOp>()) {
      std::optional<Part> part = madeIn(store.getValue());
      if (!part)
        return store.emitError("octet-split-stages: the store to @")
               << store.getVariable()
               << " writes a value no forward or backward op makes";
      partOf[store] = *part;
      auto [it, inserted] = storedBy.try_emplace(store.getVariable(), *part);
      if (!inserted && it->second.chunk != part->chunk)
        return store.emitError("octet-split-stages: @")
               << store.getVariable() << " is written by "
               << describe(it->second) << " and by " << describe(*part)
               << ", which run on different pipeline ranks (tied weights "
                  "across stages are not supported)";
    }
    // State the step both reads and writes (delayed scaling's amax
    // histories and scales) is read, by every function, as it was before
    // the part that writes it ran for this microbatch: that part loads it
    // and a later part of the chunk gets it in the stash. So a microbatch's
    // backward sees the scale its forward used, whatever forwards of later
    // microbatches ran between them.
    for (auto load : body.getOps<graph::LoadOp>())
      if (auto writer = storedBy.find(load.getVariable());
          writer != storedBy.end())
        partOf[load] = writer->second;
    return success();
  }

  // A collective runs in the function that makes its operands. One whose
  // operands two functions make (a data-parallel gradient bucket that
  // octet-reduce-gradients filled across a chunk boundary) is cut into one
  // collective per function, each with its own operands in their order and
  // right after the last op that makes them, so that every pipeline rank
  // reduces its own chunks' gradients in their backward, as soon as they
  // are made. The pieces of one function keep the step's collective order:
  // the ranks of a data group must issue them alike.
  LogicalResult placeCollectives(ArrayRef<kernel::CollectiveOp> collectives) {
    Block &body = step.getBody().front();
    llvm::DenseMap<int64_t, Operation *> lastIn; // by order(part)
    for (kernel::CollectiveOp collective : collectives) {
      llvm::MapVector<int64_t, SmallVector<unsigned>> operandsOf;
      llvm::DenseMap<int64_t, Part> parts;
      for (auto [i, operand] : llvm::enumerate(collective->getOperands())) {
        std::optional<Part> part = madeIn(operand);
        // A step argument (the token ids octet-gather-embedding-gradient
        // gathers) is read where the collective's section and layer put it,
        // as any op reading it would be.
        if (!part && isa<BlockArgument>(operand))
          if (auto it = anchorOf.find(collective); it != anchorOf.end())
            part = it->second;
        if (!part)
          return collective.emitError("octet-split-stages: ")
                 << describe(collective) << " reads operand " << i
                 << ", which no forward or backward op makes; a collective "
                    "runs in the chunk function that makes its operands";
        operandsOf[order(*part)].push_back(unsigned(i));
        parts[order(*part)] = *part;
      }
      if (operandsOf.size() == 1) {
        int64_t at = operandsOf.front().first;
        partOf[collective] = parts[at];
        lastIn[at] = collective;
        continue;
      }
      for (auto &[at, indices] : operandsOf) {
        Operation *after = lastIn.lookup(at);
        for (unsigned i : indices)
          if (Operation *producer = collective->getOperand(i).getDefiningOp())
            if (Operation *top = body.findAncestorOpInBlock(*producer);
                top && (!after || after->isBeforeInBlock(top)))
              after = top;
        OpBuilder builder(collective);
        if (after)
          builder.setInsertionPointAfter(after);
        else
          builder.setInsertionPointToStart(&body);
        OperationState state(collective.getLoc(), collective->getName());
        for (unsigned i : indices) {
          state.addOperands(collective->getOperand(i));
          state.addTypes(collective->getResult(i).getType());
        }
        state.addAttributes(collective->getAttrs());
        Operation *piece = builder.create(state);
        Attribute layer = after ? after->getAttr("layer") : Attribute();
        piece->setAttr("layer", layer ? layer : builder.getI64IntegerAttr(-1));
        for (auto [result, i] : llvm::enumerate(indices))
          collective->getResult(i).replaceAllUsesWith(piece->getResult(result));
        partOf[piece] = parts[at];
        lastIn[at] = piece;
      }
      collective.erase();
    }
    return success();
  }

  // A multi-tensor kernel of the step that no layer anchors and whose ops
  // each work on their own tensors (delayed scaling's scale updates, one
  // per FP8 tensor of every layer, after the microbatch's last amax)
  // becomes one kernel per part: each op goes where its amaxes are made,
  // or, reading state alone, to the forward of its tensor's layer. Each
  // chunk then updates its own tensors' scales as its functions run, in
  // microbatch order, as one rank does after each microbatch.
  LogicalResult splitPerTensorKernels(ArrayRef<int64_t> chunkOfLayer) {
    Block &body = step.getBody().front();
    SmallVector<kernel::FusedOp> kernels;
    for (auto fused : body.getOps<kernel::FusedOp>())
      if (fused.getKind() == "multi_tensor" && fusion::layerOf(fused) < 0 &&
          partOf.count(fused) && independentOps(fused))
        kernels.push_back(fused);
    for (kernel::FusedOp fused : kernels) {
      Block &inner = fused.getBodyBlock();
      auto yield = cast<kernel::YieldOp>(inner.getTerminator());
      // Part (by its order) -> its ops, in the kernel's order.
      llvm::MapVector<int64_t, SmallVector<Operation *>> groups;
      for (Operation &op : inner.without_terminator()) {
        std::optional<Part> part;
        int64_t layer = -1;
        for (Value arg : op.getOperands()) {
          Value outer = fused->getOperand(cast<BlockArgument>(arg).getArgNumber());
          if (auto load = outer.getDefiningOp<graph::LoadOp>())
            layer = std::max(layer, fusion::layerOfName(load.getVariable())
                                        .value_or(int64_t(-1)));
          if (std::optional<Part> made = madeIn(outer))
            if (!part || order(*made) > order(*part))
              part = made;
        }
        if (!part)
          part = Part{layer >= 0 && layer < int64_t(chunkOfLayer.size())
                          ? chunkOfLayer[layer]
                          : chunks - 1,
                      false};
        groups[order(*part)].push_back(&op);
      }
      if (groups.size() < 2)
        continue;
      OpBuilder b(fused);
      for (auto &[key, ops] : groups) {
        llvm::SetVector<unsigned> args;
        for (Operation *op : ops)
          for (Value arg : op->getOperands())
            args.insert(cast<BlockArgument>(arg).getArgNumber());
        SmallVector<Value> inputs;
        for (unsigned a : args)
          inputs.push_back(fused->getOperand(a));
        // Which of the kernel's results each op yields.
        SmallVector<unsigned> results;
        SmallVector<Type> types;
        for (OpOperand &y : yield->getOpOperands())
          if (llvm::is_contained(ops, y.get().getDefiningOp())) {
            results.push_back(y.getOperandNumber());
            types.push_back(y.get().getType());
          }
        auto part = kernel::FusedOp::create(b, fused.getLoc(), types, inputs,
                                            fused.getName(), fused.getKind());
        part->setAttrs(fused->getAttrs());
        IRMapping map;
        for (auto [i, a] : llvm::enumerate(args))
          map.map(inner.getArgument(a), part.getBodyBlock().getArgument(i));
        OpBuilder ib = OpBuilder::atBlockEnd(&part.getBodyBlock());
        for (Operation *op : ops)
          ib.clone(*op, map);
        SmallVector<Value> yielded;
        for (unsigned r : results)
          yielded.push_back(map.lookup(yield.getOperand(r)));
        kernel::YieldOp::create(ib, yield.getLoc(), yielded);
        for (auto [i, r] : llvm::enumerate(results))
          fused->getResult(r).replaceAllUsesWith(part->getResult(i));
        partOf[part] = key < chunks ? Part{key, false}
                                    : Part{2 * chunks - 1 - key, true};
        part->setAttr("section",
                      b.getStringAttr(key < chunks ? "forward" : "backward"));
        position[part] = position[fused];
      }
      partOf.erase(fused);
      position.erase(fused);
      fused.erase();
    }
    return success();
  }

  // Whether every op of a kernel reads only the kernel's arguments and
  // feeds only its yield: ops that can run in separate kernels.
  static bool independentOps(kernel::FusedOp fused) {
    Block &inner = fused.getBodyBlock();
    for (Operation &op : inner.without_terminator()) {
      if (op.getNumRegions() > 0)
        return false;
      for (Value v : op.getOperands())
        if (!isa<BlockArgument>(v))
          return false;
      for (Operation *user : op.getUsers())
        if (!isa<kernel::YieldOp>(user))
          return false;
    }
    return true;
  }

  // Whether `op` computes from variables the step does not write (and
  // constants) alone.
  bool readsOnlyWeights(Operation *op) {
    for (Value input : inputsOf(op)) {
      Operation *producer = input.getDefiningOp();
      if (!producer)
        return false;
      if (auto load = dyn_cast<graph::LoadOp>(producer)) {
        if (written.contains(load.getVariable()))
          return false;
        continue;
      }
      if (producer->getNumRegions() > 0 || !readsOnlyWeights(producer))
        return false;
    }
    return true;
  }

  // The latest part whose ops a value is computed from, or none for values
  // every part can make (arguments, loads, constants).
  std::optional<Part> madeIn(Value value) {
    Operation *op = value.getDefiningOp();
    if (!op)
      return std::nullopt;
    if (auto it = partOf.find(op); it != partOf.end())
      return it->second;
    std::optional<Part> latest;
    for (Value input : inputsOf(op))
      if (std::optional<Part> part = madeIn(input))
        if (!latest || order(*part) > order(*latest))
          latest = part;
    return latest;
  }

  int64_t order(const Part &p) const {
    return p.backward ? 2 * chunks - 1 - p.chunk : p.chunk;
  }

  bool ownedBy(Operation *op, const Part &part) {
    auto it = partOf.find(op);
    return it != partOf.end() && it->second == part;
  }

  // Records what `part` reads from another part, through the copies of
  // unanchored ops it makes.
  LogicalResult need(Value value, const Part &part, Operation *user) {
    Operation *op = value.getDefiningOp();
    if (!op)
      return success();
    auto it = partOf.find(op);
    if (it == partOf.end()) {
      for (Value input : inputsOf(op))
        if (failed(need(input, part, user)))
          return failure();
      return success();
    }
    const Part &from = it->second;
    if (from == part)
      return success();
    int64_t c = part.chunk;
    if (!from.backward && !part.backward && from.chunk == c - 1) {
      activationIn[c].insert(value);
      return success();
    }
    if (!from.backward && part.backward && from.chunk == c) {
      stash[c].insert(value);
      return success();
    }
    if (!from.backward && part.backward && from.chunk == c - 1) {
      activationIn[c].insert(value);
      stash[c].insert(value);
      return success();
    }
    if (from.backward && part.backward && from.chunk == c + 1) {
      gradientIn[c].insert(value);
      return success();
    }
    // State read before its writer ran crosses only as other values do.
    if (auto load = dyn_cast<graph::LoadOp>(op))
      return user->emitError("octet-split-stages: ")
             << describe(part) << " reads @" << load.getVariable()
             << ", which " << describe(from)
             << " writes on another pipeline rank";
    return user->emitError("octet-split-stages: ")
           << describe(user) << " of " << describe(part)
           << " reads a value of " << describe(op) << " from "
           << describe(from)
           << "; a chunk receives only the previous chunk's forward "
              "values and the next chunk's gradients";
  }

  LogicalResult findBoundaries() {
    activationIn.resize(chunks);
    gradientIn.resize(chunks);
    stash.resize(chunks);
    Block &body = step.getBody().front();
    for (Operation &op : body) {
      auto it = partOf.find(&op);
      if (it == partOf.end())
        continue;
      for (Value input : inputsOf(&op))
        if (failed(need(input, it->second, &op)))
          return failure();
    }
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    for (Value loss : ret.getOperands()) {
      std::optional<Part> part = madeIn(loss);
      if (!part || *part != Part{chunks - 1, false})
        return ret.emitError("octet-split-stages: the step's result is not "
                             "made by the last chunk's forward");
    }
    // One order for both sides of every boundary: the step's.
    auto sortByPosition = [&](llvm::SetVector<Value> &set) {
      SmallVector<Value> values(set.begin(), set.end());
      llvm::stable_sort(values, [&](Value a, Value b) {
        auto key = [&](Value v) {
          return std::make_pair(position[v.getDefiningOp()],
                                cast<OpResult>(v).getResultNumber());
        };
        return key(a) < key(b);
      });
      set.clear();
      set.insert(values.begin(), values.end());
    };
    for (int64_t c = 0; c < chunks; ++c) {
      sortByPosition(activationIn[c]);
      sortByPosition(gradientIn[c]);
      sortByPosition(stash[c]);
      SmallVector<Value> edges(activationIn[c].begin(), activationIn[c].end());
      edges.append(gradientIn[c].begin(), gradientIn[c].end());
      for (Value v : edges)
        if (!cast<ShapedType>(v.getType()).hasStaticShape())
          return v.getDefiningOp()->emitError(
              "octet-split-stages: a pipeline edge tensor needs a static "
              "shape (pack the sequences to train.seq_len)");
    }
    return success();
  }

  bool crosses(Operation *op) {
    Value v = op->getResult(0);
    for (int64_t c = 0; c < chunks; ++c)
      if (activationIn[c].contains(v) || gradientIn[c].contains(v) ||
          stash[c].contains(v))
        return true;
    return false;
  }

  // Copies what `value` needs of the unanchored ops into the function being
  // built, before the builder's insertion point.
  void materialize(Value value, OpBuilder &builder, IRMapping &map) {
    if (map.contains(value))
      return;
    Operation *op = value.getDefiningOp();
    // Loads are made where they are first read, anchored or not.
    assert(op && (!partOf.count(op) || isa<graph::LoadOp>(op)) &&
           "a boundary value was not an argument");
    for (Value input : inputsOf(op))
      materialize(input, builder, map);
    builder.clone(*op, map);
  }

  func::FuncOp makeFunction(OpBuilder &builder, const Part &part,
                            ArrayRef<Value> inputs, ArrayRef<Value> outputs,
                            ArrayRef<Value> extraResults) {
    SmallVector<Type> argTypes(step.getArgumentTypes());
    for (Value v : inputs)
      argTypes.push_back(v.getType());
    SmallVector<Value> returned(extraResults);
    returned.append(outputs.begin(), outputs.end());
    SmallVector<Type> resultTypes;
    for (Value v : returned)
      resultTypes.push_back(v.getType());
    std::string name = part.backward ? stageBackwardName(part.chunk)
                                     : stageForwardName(part.chunk);
    auto fn = func::FuncOp::create(builder, step.getLoc(), name,
                                   builder.getFunctionType(argTypes,
                                                           resultTypes));
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      fn.setArgAttrs(i, step.getArgAttrDict(i));
    Block *block = fn.addEntryBlock();
    IRMapping map;
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      map.map(step.getArgument(i), block->getArgument(i));
    for (auto [i, v] : llvm::enumerate(inputs))
      map.map(v, block->getArgument(step.getNumArguments() + i));
    OpBuilder body = OpBuilder::atBlockEnd(block);
    for (Operation &op : step.getBody().front()) {
      // A load is made where it is first read, unless other parts read it
      // too: then before the function writes the variable, in step order.
      if (!ownedBy(&op, part) || (isa<graph::LoadOp>(op) && !crosses(&op)))
        continue;
      for (Value input : inputsOf(&op))
        materialize(input, body, map);
      body.clone(op, map);
    }
    SmallVector<Value> results;
    for (Value v : returned) {
      materialize(v, body, map);
      Value result = map.lookup(v);
      // State read before this function writes it (a delayed scale) leaves
      // it as a copy: what crosses chunk functions has memory of its own,
      // not the variable's, which the next microbatch's run overwrites.
      // The copy goes right after the load: on the GPU a load names the
      // variable's bytes, so a copy after this function's own scale update
      // would send the updated value, not the one its casts used.
      if (auto load = result.getDefiningOp<graph::LoadOp>()) {
        OpBuilder atLoad(load);
        atLoad.setInsertionPointAfter(load);
        auto copy = kernel::CopyOp::create(atLoad, step.getLoc(),
                                           result.getType(), result, false);
        copy->setAttr("section", atLoad.getStringAttr(part.backward
                                                       ? "backward"
                                                       : "forward"));
        copy->setAttr("layer", atLoad.getI64IntegerAttr(-1));
        result = copy;
      }
      results.push_back(result);
    }
    func::ReturnOp::create(body, step.getLoc(), results);
    fn->setAttr("octet.stage", builder.getI64IntegerAttr(part.chunk));
    fn->setAttr("octet.phase",
                builder.getStringAttr(part.backward ? "backward" : "forward"));
    return fn;
  }

  LogicalResult emit() {
    OpBuilder builder(step);
    auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
    SmallVector<Value> loss(ret.getOperands());
    for (int64_t c = 0; c < chunks; ++c) {
      SmallVector<Value> sent;
      if (c + 1 < chunks)
        sent.assign(activationIn[c + 1].begin(), activationIn[c + 1].end());
      SmallVector<Value> outputs = sent;
      outputs.append(stash[c].begin(), stash[c].end());
      SmallVector<Value> none;
      func::FuncOp forward = makeFunction(
          builder, Part{c, false}, activationIn[c].getArrayRef(), outputs,
          c + 1 == chunks ? ArrayRef<Value>(loss) : ArrayRef<Value>(none));
      forward->setAttr("octet.edge_results",
                       builder.getI64IntegerAttr(sent.size()));
      if (c + 1 == chunks)
        for (unsigned i = 0; i < loss.size(); ++i)
          forward.setResultAttrs(i, step.getResultAttrDict(i));
      SmallVector<Value> inputs(stash[c].begin(), stash[c].end());
      inputs.append(gradientIn[c].begin(), gradientIn[c].end());
      SmallVector<Value> gradients;
      if (c > 0)
        gradients.assign(gradientIn[c - 1].begin(), gradientIn[c - 1].end());
      func::FuncOp backward =
          makeFunction(builder, Part{c, true}, inputs, gradients, none);
      backward->setAttr("octet.stash_args",
                        builder.getI64IntegerAttr(stash[c].size()));
    }
    getOperation()->setAttr("octet.pipeline_chunks",
                            builder.getI64IntegerAttr(chunks));
    step.erase();
    return success();
  }
};

} // namespace
