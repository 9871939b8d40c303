#include "runtime/exec/PipelineExecutor.h"

#include "bundle/PipelineBundle.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <utility>

namespace octet {

namespace {

// The plan of `worldRank` running its training list, or evaluation's
// derived from it (forwardOnly).
StatusOr<PipelineRankPlan> planInstructions(const bundle::Bundle &b,
                                            int worldRank, bool forwardOnly) {
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
  auto schedule = forwardOnly ? bundle::forwardOnlyScheduleOf(b, *group)
                              : bundle::scheduleOf(b, *group);
  if (!schedule)
    return schedule.status();
  bundle::StashAssignment stash =
      bundle::assignStashEntries(*schedule, plan.pipelineRank);
  const bundle::RankProgram &rank = b.ranks(worldRank);
  plan.stashEntries = int(rank.pipeline().stash_entries());
  if (plan.stashEntries < stash.entries)
    return Status::error(
        "rank " + std::to_string(worldRank) + " has " +
        std::to_string(plan.stashEntries) +
        " stash entries (PipelineRank.stash_entries), its " +
        (forwardOnly ? "forward-only (evaluation) " : "") + "schedule needs " +
        std::to_string(stash.entries) +
        (forwardOnly ? ": evaluation would need more memory than training; "
                       "set eval_interval to 0 (--eval-interval 0)"
                     : ""));
  int stages = int(b.pipeline().ranks() * b.pipeline().virtual_stages());
  if (plan.pipelineRank == (stages - 1) % int(b.pipeline().ranks()))
    plan.lossSumSlot = int(b.pipeline().loss_sum_slot());

  std::vector<const bundle::PipeInstruction *> instructions;
  if (forwardOnly) {
    plan.ownedInstructions =
        std::make_shared<const std::vector<bundle::PipeInstruction>>(
            bundle::forwardOnlyInstructions(rank.pipeline()));
    for (const bundle::PipeInstruction &in : *plan.ownedInstructions)
      instructions.push_back(&in);
  } else {
    for (const bundle::PipeInstruction &in : rank.pipeline().instructions())
      instructions.push_back(&in);
  }
  const size_t count = instructions.size();
  // The latest instruction of each stream (0 compute, 1 communication)
  // that touched each entry.
  std::vector<int> lastTouch[2];
  for (auto &v : lastTouch)
    v.assign(size_t(stash.entries), -1);
  std::map<std::pair<int, uint32_t>, size_t> firstRun, lastRun;
  for (size_t i = 0; i < count; ++i) {
    PipeWork w;
    w.index = i;
    w.instruction = instructions[i];
    int stream = w.communicate() ? 1 : 0;
    std::vector<int> touched;
    if (stream == 0) {
      bundle::ProgramKind kind = bundle::programKindOf(w.instruction->kind());
      // Evaluation runs a chunk's evaluation forward where its training
      // forward writes state (delayed scaling's scale updates).
      if (forwardOnly && kind == bundle::CHUNK_FORWARD &&
          bundle::chunkProgram(rank, bundle::CHUNK_EVAL_FORWARD,
                               w.instruction->chunk()))
        kind = bundle::CHUNK_EVAL_FORWARD;
      w.program = bundle::chunkProgram(rank, kind, w.instruction->chunk());
      if (!w.program)
        return Status::error("rank " + std::to_string(worldRank) +
                             " instruction " + std::to_string(i) +
                             " has no program");
      w.entry = stash.computeEntry[i];
      touched.push_back(w.entry);
      std::pair<int, uint32_t> key{int(kind), w.instruction->chunk()};
      firstRun.emplace(key, i);
      lastRun[key] = i;
    } else {
      w.transferEntries = stash.transferEntries[i];
      touched = w.transferEntries;
    }
    for (int e : touched) {
      w.waitFor = std::max(w.waitFor, lastTouch[1 - stream][size_t(e)]);
      lastTouch[stream][size_t(e)] = int(i);
    }
    plan.work.push_back(std::move(w));
  }
  for (const auto &[key, i] : firstRun)
    plan.work[i].firstMicrobatch = true;
  for (const auto &[key, i] : lastRun)
    plan.work[i].lastMicrobatch = true;
  return plan;
}

// Whether a step writes `ref`'s bytes, where the step says so: a GEMM's
// outputs, a memset, a copy (onto another place), a collective's receive.
// A kernel launch's arguments do not say which they write.
bool writtenBy(const bundle::Step &step, uint32_t slot) {
  auto is = [&](const bundle::SlotRef &r) { return r.slot() == slot; };
  if (step.has_gemm()) {
    const bundle::GemmCall &g = step.gemm();
    return (g.has_d() && is(g.d())) || (g.has_aux() && is(g.aux())) ||
           (g.has_amax_d() && is(g.amax_d()));
  }
  if (step.has_memset())
    return step.memset().has_dst() && is(step.memset().dst());
  if (step.has_copy())
    return step.copy().has_dst() && is(step.copy().dst()) &&
           !(step.copy().src().slot() == slot &&
             step.copy().src().byte_offset() ==
                 step.copy().dst().byte_offset());
  if (step.has_collective())
    return step.collective().has_recv() && is(step.collective().recv());
  return false;
}

// Evaluation runs the chunks' forwards only (each chunk's
// CHUNK_EVAL_FORWARD where it has one, else its CHUNK_FORWARD: the programs
// the plan's work names), so one that writes training state would change
// the run it evaluates. A forward may read parameters and weight caches
// (written by the optimizer step and INIT alone) and, in an evaluation
// forward, FP8 scale state (the compiler makes one, without the updates,
// where the training forward updates it), but not address gradients or
// optimizer moments, nor FP8 scale state from a training forward (delayed
// scaling's amax histories and scales, which it updates), nor write a
// variable in a step that says it writes.
Status checkForwardsWriteNoState(const bundle::Bundle &b,
                                 const PipelineRankPlan &plan) {
  std::set<const bundle::Program *> seen;
  for (const PipeWork &w : plan.work) {
    if (w.communicate() || !seen.insert(w.program).second)
      continue;
    for (const bundle::Step &step : w.program->steps()) {
      Status bad = Status::ok();
      bundle::visitSlotRefs(step, [&](uint32_t slot, uint64_t) {
        if (!bad.ok() || slot >= uint32_t(b.plan().slots_size()))
          return;
        const bundle::Slot &s = b.plan().slots(int(slot));
        if (!s.program().empty() || int(slot) == plan.lossSumSlot)
          return;
        bool evalForward = w.program->kind() == bundle::CHUNK_EVAL_FORWARD;
        bool state = s.kind() == bundle::GRADIENT ||
                     s.kind() == bundle::OPTIMIZER_STATE ||
                     (s.kind() == bundle::FP8_STATE && !evalForward);
        bool variable = s.kind() == bundle::PARAMETER ||
                        s.kind() == bundle::WEIGHT_CACHE ||
                        s.kind() == bundle::FP8_STATE;
        if (state || (variable && writtenBy(step, slot)))
          bad = Status::error(
              "evaluation of this pipeline bundle would run program '" +
              w.program->name() + "' (" +
              bundle::ProgramKind_Name(w.program->kind()) + "), whose step '" +
              step.label() + "' " + (state ? "addresses" : "writes") +
              " slot '" + s.name() + "' (" + bundle::SlotKind_Name(s.kind()) +
              "), state that training's forward updates (as delayed "
              "scaling's amax histories are, train.precision.recipe "
              "\"delayed\"): a forward-only evaluation would change the "
              "run it measures; set eval_interval to 0 (--eval-interval 0) "
              "or evaluate a checkpoint on one rank");
      });
      OCTET_RETURN_IF_ERROR(bad);
    }
  }
  return Status::ok();
}

} // namespace

StatusOr<PipelineRankPlan> planPipelineRank(const bundle::Bundle &b,
                                            int worldRank) {
  return planInstructions(b, worldRank, /*forwardOnly=*/false);
}

StatusOr<PipelineRankPlan> planPipelineEvaluation(const bundle::Bundle &b,
                                                  int worldRank) {
  auto plan = planInstructions(b, worldRank, /*forwardOnly=*/true);
  if (!plan)
    return plan.status().withContext("evaluation");
  // validate() proved the training lists; the forward-only ones are proved
  // here, before any rank issues a transfer that could wait forever.
  std::vector<int> group;
  for (const auto &g : bundle::pipelineGroups(b))
    if (std::find(g.begin(), g.end(), worldRank) != g.end())
      group = g;
  auto schedule = bundle::forwardOnlyScheduleOf(b, group);
  if (!schedule)
    return schedule.status();
  if (auto sim = simulatePipeline(*schedule); !sim)
    return sim.status().withContext("evaluation's forward-only schedule");
  OCTET_RETURN_IF_ERROR(checkForwardsWriteNoState(b, *plan));
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
