// octet-split-weight-gradients: each chunk's backward function cut into
// the input gradient a zero-bubble schedule runs first (B) and the weight
// gradient it runs later (W), joined by a per-microbatch weight stash
// (compiler/Transforms/Pipeline/PipelinePasses.td).

#include "compiler/Transforms/Pipeline/Passes.h"
#include "compiler/Transforms/Pipeline/OpInputs.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace octet {
#define GEN_PASS_DEF_OCTETSPLITWEIGHTGRADIENTS
#include "compiler/Transforms/Pipeline/PipelinePasses.h.inc"

std::string stageInputGradientName(int64_t stage) {
  return "stage" + std::to_string(stage) + "_input_gradient";
}
std::string stageWeightGradientName(int64_t stage) {
  return "stage" + std::to_string(stage) + "_weight_gradient";
}
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

std::string describe(Operation *op) { return pipeline::describeOp(op); }

using pipeline::inputsOf;

bool isWeightGradientGemm(Operation *op) {
  auto gemm = dyn_cast<kernel::GemmOp>(op);
  return gemm && gemm.getRole() && *gemm.getRole() == "wgrad";
}

// Ops that launch nothing (a variable's memory, views of a value): W makes
// its own rather than taking them from B's stash.
bool isCopiedIntoWeightGradient(Operation *op) {
  return isa<graph::LoadOp, graph::ReshapeOp, graph::SaveOp, graph::SliceOp,
             kernel::RankPartOp>(op);
}

struct SplitWeightGradients
    : public octet::impl::OctetSplitWeightGradientsBase<SplitWeightGradients> {
  using OctetSplitWeightGradientsBase::OctetSplitWeightGradientsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto chunks = module->getAttrOfType<IntegerAttr>("octet.pipeline_chunks");
    if (!chunks) {
      module.emitError("octet-split-weight-gradients: the module is not cut "
                       "into pipeline chunks; run octet-split-stages first");
      return signalPassFailure();
    }
    for (int64_t s = 0; s < chunks.getInt(); ++s) {
      auto backward = module.lookupSymbol<func::FuncOp>(stageBackwardName(s));
      if (!backward) {
        module.emitError("octet-split-weight-gradients: the module has no @")
            << stageBackwardName(s) << " to split";
        return signalPassFailure();
      }
      if (failed(split(backward, s)))
        return signalPassFailure();
    }
  }

  LogicalResult split(func::FuncOp fn, int64_t stage) {
    Block &body = fn.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    llvm::DenseMap<Operation *, int64_t> position;
    int64_t at = 0;
    for (Operation &op : body)
      position[&op] = at++;

    // W: the wgrad GEMMs and everything that reads what they make.
    llvm::SetVector<Operation *> weight;
    auto readersOfWeightGradients = [&] {
      weight.clear();
      for (Operation &op : body.without_terminator()) {
        bool reads = isWeightGradientGemm(&op);
        for (Value v : inputsOf(&op))
          if (Operation *def = v.getDefiningOp(); def && weight.contains(def))
            reads = true;
        if (reads)
          weight.insert(&op);
      }
    };
    readersOfWeightGradients();
    // A data-parallel bucket holding gradients of both halves (a norm's,
    // which B accumulates, beside a wgrad GEMM's) is cut in two, each
    // reducing its own half's gradients after its last microbatch: B's
    // accumulation goes on after a W of an earlier microbatch, so W may
    // not store B's gradients.
    SmallVector<kernel::CollectiveOp> mixed;
    for (auto collective : body.getOps<kernel::CollectiveOp>())
      if (weight.contains(collective) &&
          llvm::any_of(collective->getOperands(), [&](Value v) {
            Operation *def = v.getDefiningOp();
            return !def || !weight.contains(def);
          }))
        mixed.push_back(collective);
    for (kernel::CollectiveOp collective : mixed) {
      SmallVector<unsigned> halves[2];
      for (auto [i, v] : llvm::enumerate(collective->getOperands())) {
        Operation *def = v.getDefiningOp();
        halves[def && weight.contains(def)].push_back(unsigned(i));
      }
      OpBuilder b(collective);
      for (ArrayRef<unsigned> indices : halves) {
        OperationState state(collective.getLoc(), collective->getName());
        for (unsigned i : indices) {
          state.addOperands(collective->getOperand(i));
          state.addTypes(collective->getResult(i).getType());
        }
        state.addAttributes(collective->getAttrs());
        Operation *piece = b.create(state);
        for (auto [result, i] : llvm::enumerate(indices))
          collective->getResult(i).replaceAllUsesWith(
              piece->getResult(unsigned(result)));
      }
      collective.erase();
    }
    if (!mixed.empty()) {
      position.clear();
      at = 0;
      for (Operation &op : body)
        position[&op] = at++;
      readersOfWeightGradients();
    }
    for (Value v : ret.getOperands())
      if (Operation *def = v.getDefiningOp(); def && weight.contains(def))
        return def->emitError("octet-split-weight-gradients: ")
               << "the gradient @" << fn.getSymName()
               << " sends to the previous chunk is made by "
               << describe(def)
               << ", which reads a weight gradient; ZB-H1 sends it before "
                  "the weight gradients run";

    // B: what the gradient edge and B's own effects (stores, collectives,
    // ops of no result) need.
    llvm::DenseSet<Operation *> neededByB;
    SmallVector<Operation *> work{ret};
    for (Operation &op : body.without_terminator())
      if (!weight.contains(&op) &&
          (op.getNumResults() == 0 ||
           isa<graph::StoreOp, kernel::CollectiveOp>(op)))
        work.push_back(&op);
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      if (!neededByB.insert(op).second)
        continue;
      for (Value v : inputsOf(op))
        if (Operation *def = v.getDefiningOp(); def && def->getBlock() == &body)
          work.push_back(def);
    }
    // Ops B does not need whose every result only W reads go with W.
    for (Operation &op : llvm::reverse(body.without_terminator())) {
      if (weight.contains(&op) || neededByB.contains(&op) ||
          op.getNumResults() == 0 || op.use_empty())
        continue;
      bool onlyW = llvm::all_of(op.getUsers(), [&](Operation *user) {
        Operation *top = body.findAncestorOpInBlock(*user);
        return top && weight.contains(top);
      });
      if (onlyW)
        weight.insert(&op);
    }

    // A variable written on one side and read on the other would be read
    // before or after its write, as the schedule places B and W.
    llvm::StringMap<Operation *> storedIn[2];
    for (Operation &op : body)
      if (auto store = dyn_cast<graph::StoreOp>(op))
        storedIn[weight.contains(&op)][store.getVariable()] = &op;
    for (Operation &op : body) {
      auto load = dyn_cast<graph::LoadOp>(op);
      if (!load)
        continue;
      bool inW = weight.contains(&op) ||
                 llvm::any_of(op.getUsers(), [&](Operation *user) {
                   Operation *top = body.findAncestorOpInBlock(*user);
                   return top && weight.contains(top);
                 });
      bool inB = !weight.contains(&op);
      for (auto [side, reads] : {std::pair(0, inW), std::pair(1, inB)})
        if (reads && storedIn[side].count(load.getVariable()))
          return load.emitError("octet-split-weight-gradients: @")
                 << load.getVariable() << " is written by the "
                 << (side ? "weight" : "input") << "-gradient half of @"
                 << fn.getSymName() << " and read by the other, which runs "
                 << (side ? "before" : "after")
                 << " it under ZB-H1; only state each half keeps to itself "
                    "can be split";
    }

    // What W reads of B's kernels: the weight stash, in the step's order.
    llvm::SetVector<Value> crossing;
    std::function<void(Value)> need = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (!def || weight.contains(def))
        return;
      if (isCopiedIntoWeightGradient(def)) {
        for (Value input : inputsOf(def))
          need(input);
        return;
      }
      crossing.insert(v);
    };
    for (Operation *op : weight)
      for (Value v : inputsOf(op))
        need(v);
    SmallVector<Value> stash(crossing.begin(), crossing.end());
    llvm::stable_sort(stash, [&](Value a, Value b) {
      auto key = [&](Value v) {
        return std::make_pair(position[v.getDefiningOp()],
                              cast<OpResult>(v).getResultNumber());
      };
      return key(a) < key(b);
    });

    // W after B in the module, taking B's arguments and the weight stash.
    OpBuilder builder(fn);
    builder.setInsertionPointAfter(fn);
    SmallVector<Type> argTypes(fn.getArgumentTypes());
    for (Value v : stash)
      argTypes.push_back(v.getType());
    auto w = func::FuncOp::create(builder, fn.getLoc(),
                                  stageWeightGradientName(stage),
                                  builder.getFunctionType(argTypes, {}));
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      w.setArgAttrs(i, fn.getArgAttrDict(i));
    Block *wBody = w.addEntryBlock();
    IRMapping map;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      map.map(fn.getArgument(i), wBody->getArgument(i));
    for (auto [i, v] : llvm::enumerate(stash))
      map.map(v, wBody->getArgument(fn.getNumArguments() + i));
    OpBuilder wb = OpBuilder::atBlockEnd(wBody);
    std::function<void(Value)> materialize = [&](Value v) {
      if (map.contains(v))
        return;
      Operation *def = v.getDefiningOp();
      assert(def && isCopiedIntoWeightGradient(def) &&
             "a value W reads was neither stashed nor copied");
      for (Value input : inputsOf(def))
        materialize(input);
      wb.clone(*def, map);
    };
    for (Operation &op : body.without_terminator()) {
      if (!weight.contains(&op))
        continue;
      for (Value v : inputsOf(&op))
        materialize(v);
      wb.clone(op, map);
    }
    func::ReturnOp::create(wb, fn.getLoc());

    // B: the rest, returning the weight stash after the gradient edge.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (weight.contains(&op))
        op.erase();
    // Loads and views only W read.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (isCopiedIntoWeightGradient(&op) && op.use_empty())
        op.erase();
    SmallVector<Value> results(ret.getOperands());
    results.append(stash.begin(), stash.end());
    SmallVector<Type> resultTypes;
    for (Value v : results)
      resultTypes.push_back(v.getType());
    builder.setInsertionPoint(ret);
    func::ReturnOp::create(builder, ret.getLoc(), results);
    ret.erase();
    fn.setType(builder.getFunctionType(fn.getArgumentTypes(), resultTypes));
    fn.setSymName(stageInputGradientName(stage));

    auto stashArgs = fn->getAttrOfType<IntegerAttr>("octet.stash_args");
    if (!stashArgs)
      return fn.emitError("octet-split-weight-gradients: @")
             << fn.getSymName() << " has no octet.stash_args";
    fn->setAttr("octet.phase", builder.getStringAttr("input_gradient"));
    fn->setAttr("octet.weight_stash_results",
                builder.getI64IntegerAttr(int64_t(stash.size())));
    w->setAttr("octet.stage", builder.getI64IntegerAttr(stage));
    w->setAttr("octet.phase", builder.getStringAttr("weight_gradient"));
    w->setAttr("octet.stash_args", stashArgs);
    w->setAttr("octet.weight_stash_args",
               builder.getI64IntegerAttr(int64_t(stash.size())));
    return success();
  }
};

} // namespace
