#include "compiler/Plan/PipelinePlan.h"

#include "dialects/graph/GraphDialect.h"
#include "support/RankArena.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>
#include <set>

using namespace mlir;

namespace octet::plan {

namespace {

ArenaRegion regionOf(const Slot &slot) {
  if (slot.kind == SlotKind::Stash)
    return ArenaRegion::Stash;
  return slot.program.empty() ? ArenaRegion::Persistent
                              : ArenaRegion::Activation;
}

} // namespace

FailureOr<std::vector<PipelineRankPlan>>
planPipelineRanks(ModuleOp module, const MemoryPlan &plan,
                  ArrayRef<PipelineRankFunctions> ranks) {
  std::vector<PipelineRankPlan> out;
  for (size_t r = 0; r < ranks.size(); ++r) {
    PipelineRankPlan rank;
    rank.rank = int(r);
    rank.peakStash = ranks[r].peakStash;
    rank.stashEntries = ranks[r].stashEntries;
    std::set<unsigned> held;
    uint64_t largestRegion = 0;
    for (const std::string &name : ranks[r].functions) {
      auto func = module.lookupSymbol<func::FuncOp>(name);
      const ProgramPlan *program = plan.program(name);
      if (!func || !program)
        return module.emitError("pipeline plan: pipeline rank ")
               << r << " runs @" << name
               << ", which the module or its memory plan does not have";
      for (const auto &entry : program->valueSlots)
        held.insert(entry.second.first);
      for (const auto &entry : program->workspaceSlots)
        held.insert(entry.second);
      for (const auto &entry : program->gemmScaleSlots)
        held.insert(entry.second);
      // The variables it loads and stores (a store of a cleared
      // accumulator is a memset of the variable's slot, no value's).
      func.walk([&](Operation *op) {
        for (NamedAttribute a : op->getAttrs())
          if (auto sym = dyn_cast<FlatSymbolRefAttr>(a.getValue()))
            if (auto it = plan.variableSlots.find(sym.getValue());
                it != plan.variableSlots.end())
              held.insert(it->second);
      });
      if (program->regionBytes > largestRegion || rank.largestFunction.empty()) {
        largestRegion = program->regionBytes;
        rank.largestFunction = name;
      }
    }
    if (plan.gemmWorkspaceSlot)
      held.insert(*plan.gemmWorkspaceSlot);
    for (auto var : module.getOps<graph::VariableOp>()) {
      auto owner = var->getAttrOfType<IntegerAttr>("pipeline_rank");
      if (owner && owner.getInt() != int64_t(r))
        continue;
      if (auto it = plan.variableSlots.find(var.getSymName());
          it != plan.variableSlots.end())
        held.insert(it->second);
    }
    std::vector<HeldSlot> slots;
    for (unsigned index : held) {
      const Slot &slot = plan.slots[index];
      slots.push_back({index, regionOf(slot), slot.offset, slot.bytes});
      // The GEMM workspace is no layout's to shrink.
      if (regionOf(slot) == ArenaRegion::Persistent &&
          slot.kind != SlotKind::Workspace)
        rank.largestSlots.emplace_back(slot.name, slot.bytes);
      if (slot.kind == SlotKind::Stash)
        rank.stashEntryBytes += slot.stashStride;
    }
    RankArenaLayout layout = layOutRankArena(std::move(slots), kPlanAlignment);
    rank.persistentBytes = layout.persistentBytes;
    rank.activationBytes = layout.activationBytes;
    rank.stashBytes = layout.stashBytes;
    rank.slotOffsets = std::move(layout.offsets);
    std::stable_sort(rank.largestSlots.begin(), rank.largestSlots.end(),
                     [](const auto &a, const auto &b) {
                       return a.second > b.second;
                     });
    if (rank.largestSlots.size() > 3)
      rank.largestSlots.resize(3);
    out.push_back(std::move(rank));
  }
  return out;
}

void printPipelinePlans(const std::vector<PipelineRankPlan> &ranks,
                        llvm::raw_ostream &os) {
  for (const PipelineRankPlan &r : ranks)
    os << "rank " << r.rank << ": arena " << formatBytes(r.totalBytes())
       << " = persistent " << formatBytes(r.persistentBytes)
       << " (its variables and every rank's) + activations "
       << formatBytes(r.activationBytes) << " (@" << r.largestFunction
       << ") + stash " << r.stashEntries << " entries x "
       << formatBytes(r.stashEntryBytes) << " = "
       << formatBytes(r.stashBytes) << " (the schedule's peak: "
       << r.peakStash << " in flight)\n";
}

} // namespace octet::plan
