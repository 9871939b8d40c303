#include "compiler/Plan/PipelinePlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "dialects/graph/GraphDialect.h"

#include <algorithm>

using namespace mlir;

namespace octet::plan {

namespace {

uint64_t bytesOf(Type type) {
  auto shaped = cast<ShapedType>(type);
  unsigned bits = shaped.getElementType().getIntOrFloatBitWidth();
  return (uint64_t(shaped.getNumElements()) * bits + 7) / 8;
}


} // namespace

FailureOr<std::vector<PipelineRankPlan>>
planPipelineRanks(ModuleOp module, const MemoryPlan &plan,
                  const PipelineSchedule &schedule,
                  const PipeSimulation &simulation) {
  std::vector<PipelineRankPlan> ranks(schedule.ranks);
  int stages = schedule.ranks * schedule.virtualStages;
  for (int r = 0; r < schedule.ranks; ++r) {
    PipelineRankPlan &rank = ranks[r];
    rank.rank = r;
    rank.peakStash = simulation.perRank[r].peakStash;
    // Persistent slots of the other ranks' variables are not this rank's.
    rank.persistentBytes = plan.persistentBytes;
    for (const Slot &slot : plan.slots) {
      if (!slot.program.empty() || slot.kind == SlotKind::Workspace)
        continue;
      auto var = module.lookupSymbol<graph::VariableOp>(slot.name);
      auto owner =
          var ? var->getAttrOfType<IntegerAttr>("pipeline_rank") : IntegerAttr();
      if (owner && owner.getInt() != r) {
        rank.persistentBytes -= std::min(rank.persistentBytes, slot.bytes);
        continue;
      }
      rank.largestSlots.emplace_back(slot.name, slot.bytes);
    }
    std::stable_sort(rank.largestSlots.begin(), rank.largestSlots.end(),
                     [](const auto &a, const auto &b) {
                       return a.second > b.second;
                     });
    if (rank.largestSlots.size() > 3)
      rank.largestSlots.resize(3);
    for (int k = 0; k < schedule.virtualStages; ++k) {
      int s = k * schedule.ranks + r;
      std::string forwardName = "stage" + std::to_string(s) + "_forward";
      std::string backwardName = "stage" + std::to_string(s) + "_backward";
      auto forward = module.lookupSymbol<func::FuncOp>(forwardName);
      auto edges = forward ? forward->getAttrOfType<IntegerAttr>(
                                 "octet.edge_results")
                           : IntegerAttr();
      if (!edges)
        return module.emitError("pipeline plan: no @")
               << forwardName << " with octet.edge_results; the module is "
               << "not cut into " << stages << " chunks";
      // Results: [loss,] edge tensors, then the stash.
      unsigned first = (s + 1 == stages ? 1 : 0) + edges.getInt();
      uint64_t stash = 0;
      for (Type type : forward.getResultTypes().drop_front(first))
        stash += bytesOf(type);
      rank.stashBytesPerMicrobatch =
          std::max(rank.stashBytesPerMicrobatch, stash);
      for (const std::string &name : {forwardName, backwardName})
        if (const ProgramPlan *program = plan.program(name);
            program && program->regionBytes > rank.activationBytes) {
          rank.activationBytes = program->regionBytes;
          rank.largestFunction = name;
        }
    }
    rank.stashBytes = rank.stashBytesPerMicrobatch * uint64_t(rank.peakStash);
  }
  return ranks;
}

void printPipelinePlans(const std::vector<PipelineRankPlan> &ranks,
                        llvm::raw_ostream &os) {
  for (const PipelineRankPlan &r : ranks)
    os << "rank " << r.rank << ": " << formatBytes(r.totalBytes())
       << " = persistent " << formatBytes(r.persistentBytes)
       << " (its chunks' variables) + activations "
       << formatBytes(r.activationBytes) << " (@" << r.largestFunction
       << ") + stash " << r.peakStash << " in flight x "
       << formatBytes(r.stashBytesPerMicrobatch) << " = "
       << formatBytes(r.stashBytes) << "\n";
}

} // namespace octet::plan
