#include "runtime/exec/PipelineExecutor.h"

#include "bundle/PipelineBundle.h"

#include <map>
#include <utility>

namespace octet {

StatusOr<PipelineRankPlan> planPipelineRank(const bundle::Bundle &b,
                                            int worldRank) {
  if (!b.has_pipeline())
    return Status::error("the bundle has no pipeline");
  if (worldRank < 0 || worldRank >= b.ranks_size())
    return Status::error("rank " + std::to_string(worldRank) +
                         " is not one of the bundle's " +
                         std::to_string(b.ranks_size()));
  PipelineRankPlan plan;
  plan.worldRank = worldRank;
  const std::vector<int> *group = nullptr;
  std::vector<std::vector<int>> groups = bundle::pipelineGroups(b);
  for (const auto &g : groups)
    for (size_t p = 0; p < g.size(); ++p)
      if (g[p] == worldRank) {
        group = &g;
        plan.pipelineRank = int(p);
      }
  if (!group)
    return Status::error("rank " + std::to_string(worldRank) +
                         " is in no '" + b.pipeline().group() + "' group");
  auto schedule = bundle::scheduleOf(b, *group);
  if (!schedule)
    return schedule.status();
  bundle::StashAssignment stash =
      bundle::assignStashEntries(*schedule, plan.pipelineRank);
  const bundle::RankProgram &rank = b.ranks(worldRank);
  plan.stashEntries = int(rank.pipeline().stash_entries());
  if (plan.stashEntries < stash.entries)
    return Status::error("rank " + std::to_string(worldRank) + " has " +
                         std::to_string(plan.stashEntries) +
                         " stash entries, its schedule needs " +
                         std::to_string(stash.entries));
  int stages = int(b.pipeline().ranks() * b.pipeline().virtual_stages());
  if (plan.pipelineRank == (stages - 1) % int(b.pipeline().ranks()))
    plan.lossSumSlot = int(b.pipeline().loss_sum_slot());

  const auto &instructions = rank.pipeline().instructions();
  // The latest instruction of each stream (0 compute, 1 communication)
  // that touched each entry.
  std::vector<int> lastTouch[2];
  for (auto &v : lastTouch)
    v.assign(size_t(stash.entries), -1);
  std::map<std::pair<int, uint32_t>, size_t> firstRun, lastRun;
  for (int i = 0; i < instructions.size(); ++i) {
    PipeWork w;
    w.index = size_t(i);
    w.instruction = &instructions[i];
    int stream = w.communicate() ? 1 : 0;
    std::vector<int> touched;
    if (stream == 0) {
      bundle::ProgramKind kind = bundle::programKindOf(w.instruction->kind());
      w.program = bundle::chunkProgram(rank, kind, w.instruction->chunk());
      if (!w.program)
        return Status::error("rank " + std::to_string(worldRank) +
                             " instruction " + std::to_string(i) +
                             " has no program");
      w.entry = stash.computeEntry[size_t(i)];
      touched.push_back(w.entry);
      std::pair<int, uint32_t> key{int(kind), w.instruction->chunk()};
      firstRun.emplace(key, size_t(i));
      lastRun[key] = size_t(i);
    } else {
      w.transferEntries = stash.transferEntries[size_t(i)];
      touched = w.transferEntries;
    }
    for (int e : touched) {
      w.waitFor = std::max(w.waitFor, lastTouch[1 - stream][size_t(e)]);
      lastTouch[stream][size_t(e)] = i;
    }
    plan.work.push_back(std::move(w));
  }
  for (const auto &[key, i] : firstRun)
    plan.work[i].firstMicrobatch = true;
  for (const auto &[key, i] : lastRun)
    plan.work[i].lastMicrobatch = true;
  return plan;
}

Status runPipelineStep(const PipelineRankPlan &plan, PipelineDevice &device) {
  OCTET_RETURN_IF_ERROR(device.beginStep(plan));
  for (const PipeWork &w : plan.work) {
    Status st = w.communicate() ? device.communicate(w) : device.compute(w);
    if (!st)
      return st.withContext("pipeline rank " +
                            std::to_string(plan.pipelineRank) +
                            " instruction " + std::to_string(w.index));
  }
  return device.endStep(plan);
}

} // namespace octet
