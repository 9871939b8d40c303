#include "compiler/Emit/PipelineSlots.h"

#include "compiler/Transforms/Pipeline/Passes.h"
#include "bundle/PipelineBundle.h"
#include "dialects/graph/GraphDialect.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <map>
#include <set>

using namespace mlir;

namespace octet::emit {
namespace {

unsigned namedArguments(func::FuncOp func) {
  unsigned n = 0;
  while (n < func.getNumArguments() &&
         func.getArgAttrOfType<StringAttr>(n, "graph.name"))
    ++n;
  return n;
}

uint64_t alignUp(uint64_t n) {
  return (n + plan::kPlanAlignment - 1) / plan::kPlanAlignment *
         plan::kPlanAlignment;
}

uint64_t valueBytes(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  return uint64_t(type.getNumElements()) *
         std::max(1u, type.getElementTypeBitWidth() / 8);
}

} // namespace

FailureOr<std::vector<StageFunctions>> findStageFunctions(ModuleOp module,
                                                          int64_t stages) {
  std::vector<StageFunctions> out;
  for (int64_t s = 0; s < stages; ++s) {
    StageFunctions f;
    f.stage = s;
    f.forward = module.lookupSymbol<func::FuncOp>(stageForwardName(s));
    f.backward = module.lookupSymbol<func::FuncOp>(stageBackwardName(s));
    if (!f.backward) {
      f.backward =
          module.lookupSymbol<func::FuncOp>(stageInputGradientName(s));
      f.weightGradient =
          module.lookupSymbol<func::FuncOp>(stageWeightGradientName(s));
      if (f.backward && !f.weightGradient)
        return f.backward.emitError("bundle: @")
               << f.backward.getSymName() << " has no @"
               << stageWeightGradientName(s)
               << " (octet-split-weight-gradients makes both)";
    }
    if (!f.forward || !f.backward)
      return module.emitError("bundle: the pipeline has ")
             << stages << " stage chunks, but @"
             << (f.forward ? stageBackwardName(s) : stageForwardName(s))
             << " is missing (octet-split-stages makes both of each chunk)";
    auto edges = f.forward->getAttrOfType<IntegerAttr>("octet.edge_results");
    auto stash = f.backward->getAttrOfType<IntegerAttr>("octet.stash_args");
    if (!edges || !stash)
      return f.forward.emitError("bundle: @")
             << f.forward.getSymName() << " needs octet.edge_results and @"
             << f.backward.getSymName() << " octet.stash_args";
    f.inputs = namedArguments(f.forward);
    if (namedArguments(f.backward) != f.inputs)
      return f.backward.emitError("bundle: @")
             << f.backward.getSymName() << " takes "
             << namedArguments(f.backward) << " microbatch inputs, @"
             << f.forward.getSymName() << " " << f.inputs;
    auto *ret = f.forward.getBody().front().getTerminator();
    unsigned at = 0;
    if (auto name = f.forward.getResultAttrOfType<StringAttr>(0, "graph.name");
        name && name.getValue() == "loss") {
      f.loss = true;
      at = 1;
    }
    unsigned nEdges = unsigned(edges.getInt()), nStash = unsigned(stash.getInt());
    if (ret->getNumOperands() != at + nEdges + nStash ||
        f.backward.getNumArguments() < f.inputs + nStash)
      return f.forward.emitError("bundle: @")
             << f.forward.getSymName() << " returns "
             << ret->getNumOperands() << " values, not the loss, " << nEdges
             << " edge and " << nStash << " stash values @"
             << f.backward.getSymName() << " reads";
    for (unsigned i = at; i < at + nEdges; ++i)
      f.sendActivation.push_back(ret->getOperand(i));
    for (unsigned i = f.inputs; i < f.forward.getNumArguments(); ++i)
      f.receiveActivation.push_back(f.forward.getArgument(i));
    for (unsigned i = f.inputs + nStash; i < f.backward.getNumArguments(); ++i)
      f.receiveGradient.push_back(f.backward.getArgument(i));
    Operation *backRet = f.backward.getBody().front().getTerminator();
    unsigned forW = 0;
    if (f.weightGradient) {
      auto results =
          f.backward->getAttrOfType<IntegerAttr>("octet.weight_stash_results");
      auto args = f.weightGradient->getAttrOfType<IntegerAttr>(
          "octet.weight_stash_args");
      if (!results || !args || results.getInt() != args.getInt() ||
          backRet->getNumOperands() < unsigned(results.getInt()) ||
          f.weightGradient.getNumArguments() !=
              f.backward.getNumArguments() + unsigned(args.getInt()))
        return f.weightGradient.emitError("bundle: @")
               << f.weightGradient.getSymName()
               << " does not take @" << f.backward.getSymName()
               << "'s arguments and the weight stash it returns "
                  "(octet.weight_stash_results and octet.weight_stash_args)";
      forW = unsigned(results.getInt());
    }
    for (unsigned i = 0; i < backRet->getNumOperands(); ++i)
      (i + forW < backRet->getNumOperands() ? f.sendGradient : f.weightStash)
          .push_back(backRet->getOperand(i));
    f.eval = module.lookupSymbol<func::FuncOp>(stageEvalName(s));
    if (f.eval) {
      // Evaluation moves the forward's edges: the same arguments, and the
      // loss and sent edge as the forward returns them.
      unsigned evalResults = at + nEdges;
      if (f.eval.getArgumentTypes() != f.forward.getArgumentTypes() ||
          f.eval.getNumResults() != evalResults ||
          llvm::any_of(llvm::seq(0u, evalResults), [&](unsigned i) {
            return f.eval.getResultTypes()[i] !=
                   f.forward.getResultTypes()[i];
          }))
        return f.eval.emitError("bundle: @")
               << f.eval.getSymName() << " does not take @"
               << f.forward.getSymName() << "'s arguments and return its "
               << (f.loss ? "loss and " : "") << nEdges
               << " edge results (octet-stage-eval-functions makes it so)";
    }
    out.push_back(std::move(f));
  }
  return out;
}

LogicalResult addPipelineLossSum(ModuleOp module, const StageFunctions &last,
                                 int64_t lastRank) {
  if (!last.loss)
    return last.forward.emitError("bundle: @")
           << last.forward.getSymName()
           << " is the last stage's forward but returns no loss";
  Operation *ret = last.forward.getBody().front().getTerminator();
  Value loss = ret->getOperand(0);
  auto one = RankedTensorType::get({}, Float32Type::get(module.getContext()));
  if (loss.getType() != one)
    return last.forward.emitError("bundle: the loss of @")
           << last.forward.getSymName() << " is " << loss.getType()
           << ", not an f32 scalar";
  OpBuilder b(module.getContext());
  b.setInsertionPoint(*module.getOps<func::FuncOp>().begin());
  auto sum = graph::VariableOp::create(b, module.getLoc(), kPipelineLossSum,
                                       one, "state", "zeros", FloatAttr(),
                                       StringAttr());
  sum->setAttr("pipeline_rank", b.getI64IntegerAttr(lastRank));
  for (func::FuncOp func : {last.forward, last.eval}) {
    if (!func)
      continue;
    Operation *end = func.getBody().front().getTerminator();
    b.setInsertionPoint(end);
    Location loc = end->getLoc();
    Value before = graph::LoadOp::create(b, loc, one, kPipelineLossSum);
    auto add = kernel::FusedOp::create(b, loc, TypeRange{one},
                                       ValueRange{before, end->getOperand(0)},
                                       "pipeline.loss_sum", "elementwise");
    OpBuilder inner = OpBuilder::atBlockEnd(&add.getBodyBlock());
    Value total =
        graph::AddOp::create(inner, loc, add.getBodyBlock().getArgument(0),
                             add.getBodyBlock().getArgument(1));
    kernel::YieldOp::create(inner, loc, ValueRange{total});
    add->setAttr("layer", b.getI64IntegerAttr(-1));
    add->setAttr("section", b.getStringAttr("loss"));
    graph::StoreOp::create(b, loc, add.getResult(0), kPipelineLossSum);
  }
  return success();
}

LogicalResult planStashSlots(ArrayRef<StageFunctions> stages,
                             int pipelineRanks, ArrayRef<int> entriesPerRank,
                             plan::MemoryPlan &plan) {
  // The slots that become Stash slots, with their rank; the backward
  // argument slots moved onto them (slot -> its new slot and offset).
  std::map<unsigned, int> stashRank;
  std::map<unsigned, std::pair<unsigned, uint64_t>> moved;
  auto slotOf = [&](func::FuncOp func,
                    Value v) -> FailureOr<std::pair<unsigned, uint64_t>> {
    const plan::ProgramPlan *program = plan.program(func.getSymName());
    if (!program || !program->valueSlots.count(v))
      return func.emitError("bundle: a value crossing @")
             << func.getSymName() << " has no slot in the memory plan";
    std::pair<unsigned, uint64_t> at = program->valueSlots.lookup(v);
    const plan::Slot &slot = plan.slots[at.first];
    if (slot.program.empty())
      return func.emitError("bundle: a value crossing @")
             << func.getSymName() << " is the memory of '" << slot.name
             << "'; what crosses chunk functions needs memory of its own";
    return at;
  };
  auto keep = [&](func::FuncOp func, Value v, int rank,
                  bool whole) -> LogicalResult {
    FailureOr<std::pair<unsigned, uint64_t>> at = slotOf(func, v);
    if (failed(at))
      return failure();
    if (whole && (at->second != 0 || plan.slots[at->first].bytes != valueBytes(v)))
      return func.emitError("bundle: an edge tensor of @")
             << func.getSymName() << " is part of slot '"
             << plan.slots[at->first].name
             << "'; a transfer moves whole slots";
    stashRank[at->first] = rank;
    return success();
  };
  // `reader`'s `arg` reads what `writer`'s `v` is.
  auto shareOf = [&](func::FuncOp writer, Value v, func::FuncOp reader,
                     Value arg) -> LogicalResult {
    FailureOr<std::pair<unsigned, uint64_t>> from = slotOf(writer, v);
    FailureOr<std::pair<unsigned, uint64_t>> to = slotOf(reader, arg);
    if (failed(from) || failed(to))
      return failure();
    if (to->second != 0 || from->second + plan.slots[to->first].bytes >
                               plan.slots[from->first].bytes)
      return reader.emitError("bundle: ")
             << (isa<BlockArgument>(arg)
                     ? "argument " +
                           std::to_string(cast<BlockArgument>(arg).getArgNumber())
                     : std::string("a result"))
             << " of @" << reader.getSymName()
             << " does not fit @" << writer.getSymName() << "'s slot '"
             << plan.slots[from->first].name << "'";
    moved[to->first] = *from;
    return success();
  };
  // The backward's `arg` reads what the forward's `v` is; so does the
  // weight gradient's argument of the same place.
  auto share = [&](const StageFunctions &f, Value v,
                   BlockArgument arg) -> LogicalResult {
    if (failed(shareOf(f.forward, v, f.backward, arg)))
      return failure();
    if (!f.weightGradient)
      return success();
    return shareOf(f.forward, v, f.weightGradient,
                   f.weightGradient.getArgument(arg.getArgNumber()));
  };
  for (const StageFunctions &f : stages) {
    int rank = int(f.stage % pipelineRanks);
    for (unsigned i = 0; i < f.inputs; ++i) {
      if (failed(keep(f.forward, f.forward.getArgument(i), rank, false)) ||
          failed(share(f, f.forward.getArgument(i), f.backward.getArgument(i))))
        return failure();
    }
    // The edges: whole slots, as transfers move them.
    for (auto [func, values] :
         {std::pair(f.forward, &f.sendActivation),
          std::pair(f.forward, &f.receiveActivation),
          std::pair(f.backward, &f.sendGradient),
          std::pair(f.backward, &f.receiveGradient)})
      for (Value v : *values)
        if (failed(keep(func, v, rank, true)))
          return failure();
    Operation *ret = f.forward.getBody().front().getTerminator();
    unsigned first = (f.loss ? 1 : 0) + unsigned(f.sendActivation.size());
    for (unsigned i = first; i < ret->getNumOperands(); ++i) {
      Value v = ret->getOperand(i);
      if (failed(keep(f.forward, v, rank, false)) ||
          failed(share(f, v, f.backward.getArgument(f.inputs + i - first))))
        return failure();
    }
    // Evaluation's forward reads the inputs and received edge where the
    // forward reads them and writes its sent edge where the forward
    // writes it, so a forward-only list moves the same slots.
    if (f.eval) {
      for (unsigned i = 0; i < f.forward.getNumArguments(); ++i)
        if (failed(shareOf(f.forward, f.forward.getArgument(i), f.eval,
                           f.eval.getArgument(i))))
          return failure();
      Operation *evalRet = f.eval.getBody().front().getTerminator();
      for (auto [i, v] : llvm::enumerate(f.sendActivation))
        if (failed(shareOf(f.forward, v, f.eval,
                           evalRet->getOperand((f.loss ? 1 : 0) +
                                               unsigned(i)))))
          return failure();
    }
    if (!f.weightGradient)
      continue;
    // W reads the gradient B received where B read it, and B's weight
    // stash, which stays in the microbatch's entry until W.
    for (Value v : f.receiveGradient) {
      auto arg = cast<BlockArgument>(v);
      if (failed(shareOf(f.backward, arg, f.weightGradient,
                         f.weightGradient.getArgument(arg.getArgNumber()))))
        return failure();
    }
    unsigned firstStash = f.backward.getNumArguments();
    for (auto [i, v] : llvm::enumerate(f.weightStash))
      if (failed(keep(f.backward, v, rank, false)) ||
          failed(shareOf(f.backward, v, f.weightGradient,
                         f.weightGradient.getArgument(firstStash +
                                                      unsigned(i)))))
        return failure();
  }
  for (const auto &[slot, to] : moved)
    if (stashRank.count(slot))
      return stages.front().backward.emitError("bundle: slot '")
             << plan.slots[slot].name << "' is a backward's stash or input "
             << "argument and also an edge it sends or receives";

  // What crosses the chunk functions leaves the activation region: one
  // slot per entry in flight, in the stash region.
  for (auto &[index, rank] : stashRank) {
    plan::Slot &slot = plan.slots[index];
    uint64_t stride = alignUp(slot.bytes);
    slot.kind = plan::SlotKind::Stash;
    slot.stashStride = stride;
    slot.bytes = stride * uint64_t(std::max(1, entriesPerRank[size_t(rank)]));
    slot.program.clear();
    slot.lastProgram.clear();
    slot.firstStep = slot.lastStep = 0;
  }

  // Drop the moved slots; every index after one shifts down.
  std::vector<unsigned> newIndex(plan.slots.size());
  std::vector<plan::Slot> kept;
  for (unsigned i = 0; i < plan.slots.size(); ++i) {
    newIndex[i] = unsigned(kept.size());
    if (!moved.count(i))
      kept.push_back(std::move(plan.slots[i]));
  }
  plan.slots = std::move(kept);
  for (plan::ProgramPlan &program : plan.programs) {
    for (auto &entry : program.valueSlots) {
      auto &[slot, byteOffset] = entry.second;
      if (auto it = moved.find(slot); it != moved.end()) {
        byteOffset += it->second.second;
        slot = it->second.first;
      }
      slot = newIndex[slot];
    }
    for (auto *owner : {&program.workspaceSlots, &program.gemmScaleSlots})
      for (auto &entry : *owner)
        entry.second = newIndex[entry.second];
  }
  for (auto &entry : plan.variableSlots)
    entry.second = newIndex[entry.second];
  if (plan.gemmWorkspaceSlot)
    plan.gemmWorkspaceSlot = newIndex[*plan.gemmWorkspaceSlot];

  // The chunk functions planned their values around the stash and edges
  // they held (a forward's stash is live to its end, a backward's from its
  // start): packed again without them, each function's region holds only
  // its own transient values.
  plan::repackActivations(plan);
  // The stash region, after the activation region.
  uint64_t offset = plan.persistentBytes + plan.activationBytes;
  for (plan::Slot &slot : plan.slots)
    if (slot.kind == plan::SlotKind::Stash) {
      slot.offset = offset;
      offset += slot.bytes;
    }
  plan.stashBytes = offset - plan.persistentBytes - plan.activationBytes;
  return success();
}

FailureOr<std::vector<plan::PipelineRankPlan>>
planPipelineArenas(ModuleOp module, const PipelineSchedule &schedule,
                   plan::MemoryPlan &plan) {
  FailureOr<std::vector<StageFunctions>> stages = findStageFunctions(
      module, int64_t(schedule.ranks) * schedule.virtualStages);
  if (failed(stages))
    return failure();
  StatusOr<PipeSimulation> simulation = simulatePipeline(schedule);
  if (!simulation)
    return module.emitError("pipeline plan: ")
           << simulation.status().message();
  std::vector<int> entries;
  std::vector<plan::PipelineRankFunctions> ranks(size_t(schedule.ranks));
  for (int p = 0; p < schedule.ranks; ++p) {
    plan::PipelineRankFunctions &rank = ranks[size_t(p)];
    rank.stashEntries = bundle::assignStashEntries(schedule, p).entries;
    rank.peakStash = simulation->perRank[size_t(p)].peakStash;
    entries.push_back(rank.stashEntries);
    for (int k = 0; k < schedule.virtualStages; ++k) {
      int64_t s = int64_t(k) * schedule.ranks + p;
      rank.functions.push_back(stageForwardName(s));
      const StageFunctions &f = (*stages)[size_t(s)];
      rank.functions.push_back(f.backward.getSymName().str());
      if (f.weightGradient)
        rank.functions.push_back(f.weightGradient.getSymName().str());
      if (f.eval)
        rank.functions.push_back(f.eval.getSymName().str());
    }
    rank.functions.push_back(rankOptimizerName(p));
    // The rank's part of what runs once before the first step (its FP8
    // weight casts' INIT) addresses its arena too.
    for (std::string &name : rankInitFunctions(module, p))
      rank.functions.push_back(std::move(name));
  }
  if (failed(planStashSlots(*stages, schedule.ranks, entries, plan)))
    return failure();
  return plan::planPipelineRanks(module, plan, ranks);
}

} // namespace octet::emit
