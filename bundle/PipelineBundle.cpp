#include "bundle/PipelineBundle.h"

#include "bundle/Bundle.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <tuple>

namespace octet::bundle {

StatusOr<PipelineScheduleKind> pipelineScheduleKind(const std::string &name) {
  for (PipelineScheduleKind kind :
       {PipelineScheduleKind::OneFOneB, PipelineScheduleKind::Interleaved,
        PipelineScheduleKind::ZeroBubbleH1})
    if (name == pipelineScheduleName(kind))
      return kind;
  return Status::error("pipeline.schedule is '" + name +
                       "': expected \"1f1b\", \"interleaved\" or \"zb-h1\"");
}

namespace {

// Each schedule op and its wire form.
constexpr std::pair<PipeOpKind, PipeInstructionKind> kInstructionKinds[] = {
    {PipeOpKind::F, PIPE_FORWARD},
    {PipeOpKind::B, PIPE_INPUT_GRADIENT},
    {PipeOpKind::W, PIPE_WEIGHT_GRADIENT},
    {PipeOpKind::BW, PIPE_BACKWARD},
    {PipeOpKind::Comm, PIPE_COMMUNICATE},
};

} // namespace

PipeInstruction toInstruction(const PipeOp &op) {
  PipeInstruction out;
  for (const auto &[kind, wire] : kInstructionKinds)
    if (kind == op.kind)
      out.set_kind(wire);
  if (op.kind != PipeOpKind::Comm) {
    out.set_chunk(uint32_t(op.chunk));
    out.set_microbatch(uint32_t(op.microbatch));
  }
  for (const octet::PipeTransfer &t : op.transfers) {
    PipeTransfer *x = out.add_transfers();
    x->set_send(t.send);
    x->set_gradient(t.gradient);
    x->set_peer(uint32_t(t.peer));
    x->set_producer_stage(uint32_t(t.producerStage));
    x->set_microbatch(uint32_t(t.microbatch));
  }
  return out;
}

StatusOr<PipeOp> fromInstruction(const PipeInstruction &in) {
  PipeOp op;
  const auto *found = std::find_if(
      std::begin(kInstructionKinds), std::end(kInstructionKinds),
      [&](const auto &pair) { return pair.second == in.kind(); });
  if (found == std::end(kInstructionKinds))
    return Status::error("instruction of kind " +
                         std::to_string(int(in.kind())) +
                         ", which no schedule has");
  op.kind = found->first;
  op.chunk = int(in.chunk());
  op.microbatch = int(in.microbatch());
  if (op.kind != PipeOpKind::Comm && in.transfers_size() > 0)
    return Status::error("a compute instruction with transfers");
  for (const PipeTransfer &t : in.transfers())
    op.transfers.push_back({t.send(), t.gradient(), int(t.peer()),
                            int(t.producer_stage()), int(t.microbatch())});
  return op;
}

std::vector<std::vector<int>> pipelineGroups(const Bundle &b) {
  std::vector<std::vector<int>> groups;
  for (const Group &g : b.groups())
    if (g.name() == b.pipeline().group())
      groups.push_back({g.ranks().begin(), g.ranks().end()});
  return groups;
}

std::vector<PipeInstruction> forwardOnlyInstructions(const PipelineRank &rank) {
  std::vector<PipeInstruction> out;
  for (const PipeInstruction &in : rank.instructions()) {
    if (in.kind() == PIPE_FORWARD) {
      out.push_back(in);
      continue;
    }
    if (in.kind() != PIPE_COMMUNICATE)
      continue;
    PipeInstruction group = in;
    group.clear_transfers();
    for (const PipeTransfer &t : in.transfers())
      if (!t.gradient())
        *group.add_transfers() = t;
    if (group.transfers_size() > 0)
      out.push_back(std::move(group));
  }
  return out;
}

namespace {

// The schedule of the pipeline `worldRanks` runs, each rank's list from
// `listOf`.
StatusOr<PipelineSchedule> scheduleFrom(
    const Bundle &b, const std::vector<int> &worldRanks,
    const std::function<std::vector<PipeInstruction>(const PipelineRank &)>
        &listOf) {
  const Pipeline &p = b.pipeline();
  auto kind = pipelineScheduleKind(p.schedule());
  if (!kind)
    return kind.status();
  PipelineSchedule s;
  s.kind = *kind;
  s.ranks = int(p.ranks());
  s.virtualStages = int(p.virtual_stages());
  s.microbatches = int(p.microbatches());
  for (int world : worldRanks) {
    if (world < 0 || world >= b.ranks_size())
      return Status::error("pipeline group names rank " +
                           std::to_string(world) + " of " +
                           std::to_string(b.ranks_size()));
    std::vector<PipeOp> ops;
    std::vector<PipeInstruction> list = listOf(b.ranks(world).pipeline());
    for (size_t i = 0; i < list.size(); ++i) {
      auto op = fromInstruction(list[i]);
      if (!op)
        return op.status().withContext("rank " + std::to_string(world) +
                                       " instruction " + std::to_string(i));
      ops.push_back(std::move(*op));
    }
    s.perRank.push_back(std::move(ops));
  }
  return s;
}

} // namespace

StatusOr<PipelineSchedule> scheduleOf(const Bundle &b,
                                      const std::vector<int> &worldRanks) {
  return scheduleFrom(b, worldRanks, [](const PipelineRank &rank) {
    return std::vector<PipeInstruction>(rank.instructions().begin(),
                                        rank.instructions().end());
  });
}

StatusOr<PipelineSchedule>
forwardOnlyScheduleOf(const Bundle &b, const std::vector<int> &worldRanks) {
  auto s = scheduleFrom(b, worldRanks, forwardOnlyInstructions);
  if (s)
    s->forwardOnly = true;
  return s;
}

ChunkMicrobatch transferChunk(const PipelineSchedule &schedule,
                              const octet::PipeTransfer &t) {
  // Activations go from producer_stage to the stage after it, gradients
  // from producer_stage to the stage before it; the rank's own stage is the
  // producer's on a send and its neighbour on a receive.
  int stage = t.producerStage;
  if (!t.send)
    stage += t.gradient ? -1 : 1;
  return {stage / schedule.ranks, t.microbatch};
}

StashAssignment assignStashEntries(const PipelineSchedule &schedule,
                                   int rank) {
  const std::vector<PipeOp> &ops = schedule.perRank[size_t(rank)];
  // The last instruction that names each pair.
  std::map<ChunkMicrobatch, size_t> last;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind != PipeOpKind::Comm)
      last[{ops[i].chunk, ops[i].microbatch}] = i;
    for (const octet::PipeTransfer &t : ops[i].transfers)
      last[transferChunk(schedule, t)] = i;
  }
  StashAssignment a;
  std::map<ChunkMicrobatch, int> held;
  std::set<int> free;
  auto entryOf = [&](ChunkMicrobatch key) {
    auto it = held.find(key);
    if (it != held.end())
      return it->second;
    int entry;
    if (free.empty()) {
      entry = a.entries++;
    } else {
      entry = *free.begin();
      free.erase(free.begin());
    }
    held[key] = entry;
    return entry;
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    std::vector<ChunkMicrobatch> named;
    if (ops[i].kind != PipeOpKind::Comm) {
      named.push_back({ops[i].chunk, ops[i].microbatch});
      a.computeEntry.push_back(entryOf(named.back()));
    } else {
      a.computeEntry.push_back(-1);
    }
    std::vector<int> entries;
    for (const octet::PipeTransfer &t : ops[i].transfers) {
      named.push_back(transferChunk(schedule, t));
      entries.push_back(entryOf(named.back()));
    }
    a.transferEntries.push_back(std::move(entries));
    for (const ChunkMicrobatch &key : named)
      if (last[key] == i && held.count(key)) {
        free.insert(held[key]);
        held.erase(key);
      }
  }
  return a;
}

Status addPipelineRanks(Bundle &b, const PipelineSchedule &schedule,
                        int data, const TransferTensors &tensorsOf) {
  if (b.groups_size() || b.ranks_size())
    return Status::error("pipeline layout: the bundle already has " +
                         std::to_string(b.groups_size()) + " groups and " +
                         std::to_string(b.ranks_size()) + " ranks");
  if (data < 1 || schedule.ranks < 1 ||
      int(schedule.perRank.size()) != schedule.ranks)
    return Status::error(
        "pipeline layout: " + std::to_string(schedule.perRank.size()) +
        " instruction lists for pipeline " + std::to_string(schedule.ranks) +
        " × data " + std::to_string(data));
  const int world = schedule.ranks * data;
  b.set_world_size(uint32_t(world));
  for (int p = 0; p < schedule.ranks; ++p) {
    Group *g = b.add_groups();
    g->set_name("data");
    for (int d = 0; d < data; ++d)
      g->add_ranks(uint32_t(p * data + d));
  }
  for (int d = 0; d < data; ++d) {
    Group *g = b.add_groups();
    g->set_name("pipeline");
    for (int p = 0; p < schedule.ranks; ++p)
      g->add_ranks(uint32_t(p * data + d));
  }
  Pipeline *pipe = b.mutable_pipeline();
  pipe->set_schedule(pipelineScheduleName(schedule.kind));
  pipe->set_ranks(uint32_t(schedule.ranks));
  pipe->set_virtual_stages(uint32_t(schedule.virtualStages));
  pipe->set_microbatches(uint32_t(schedule.microbatches));
  pipe->set_group("pipeline");
  // The replicas of one pipeline rank run the same list.
  std::vector<PipelineRank> lists(size_t(schedule.ranks));
  for (int p = 0; p < schedule.ranks; ++p) {
    PipelineRank &list = lists[size_t(p)];
    list.set_stash_entries(
        uint32_t(assignStashEntries(schedule, p).entries));
    for (const PipeOp &op : schedule.perRank[size_t(p)]) {
      PipeInstruction ins = toInstruction(op);
      for (PipeTransfer &t : *ins.mutable_transfers()) {
        octet::PipeTransfer wire{t.send(), t.gradient(), int(t.peer()),
                                 int(t.producer_stage()), int(t.microbatch())};
        TransferSite site{p, transferChunk(schedule, wire).chunk, &t};
        for (SlotRef &ref : tensorsOf(site))
          *t.add_tensors() = std::move(ref);
      }
      *list.add_instructions() = std::move(ins);
    }
  }
  for (int w = 0; w < world; ++w) {
    RankProgram *rank = b.add_ranks();
    rank->set_rank(uint32_t(w));
    rank->set_stage(uint32_t(w / data));
    *rank->mutable_pipeline() = lists[size_t(w / data)];
  }
  return Status::ok();
}

void visitSlotRefs(const google::protobuf::Message &m,
                   const std::function<void(uint32_t, uint64_t)> &visit) {
  using google::protobuf::FieldDescriptor;
  const auto *descriptor = m.GetDescriptor();
  if (descriptor == SlotRef::descriptor()) {
    const auto &ref = static_cast<const SlotRef &>(m);
    visit(ref.slot(), ref.stash_stride());
    return;
  }
  if (descriptor == NamedSlot::descriptor()) {
    visit(static_cast<const NamedSlot &>(m).slot(), 0);
    return;
  }
  const auto *reflection = m.GetReflection();
  std::vector<const FieldDescriptor *> fields;
  reflection->ListFields(m, &fields);
  for (const FieldDescriptor *f : fields) {
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE)
      continue;
    if (f->is_repeated())
      for (int i = 0; i < reflection->FieldSize(m, f); ++i)
        visitSlotRefs(reflection->GetRepeatedMessage(m, f, i), visit);
    else
      visitSlotRefs(reflection->GetMessage(m, f), visit);
  }
}

ArenaRegion arenaRegionOf(const Slot &slot) {
  if (slot.kind() == STASH)
    return ArenaRegion::Stash;
  return slot.program().empty() ? ArenaRegion::Persistent
                                : ArenaRegion::Activation;
}

std::set<uint32_t> pipelineRankSlots(const Bundle &b, const RankProgram &rank) {
  std::set<uint32_t> held;
  for (const Program &p : rank.programs())
    visitSlotRefs(p, [&](uint32_t slot, uint64_t) { held.insert(slot); });
  visitSlotRefs(rank.pipeline(),
                [&](uint32_t slot, uint64_t) { held.insert(slot); });
  for (const Parameter &p : b.parameters())
    if (!p.has_pipeline_rank() || p.pipeline_rank() == rank.stage())
      held.insert(p.slot());
  for (const StateTensor &st : b.state())
    if (!st.has_pipeline_rank() || st.pipeline_rank() == rank.stage())
      held.insert(st.slot());
  return held;
}

void addRankArenas(Bundle &b) {
  const MemoryPlan &plan = b.plan();
  uint64_t alignment =
      plan.arenas_size() ? std::max<uint32_t>(1, plan.arenas(0).alignment()) : 1;
  for (RankProgram &rank : *b.mutable_ranks()) {
    std::vector<HeldSlot> held;
    for (uint32_t slot : pipelineRankSlots(b, rank)) {
      if (slot >= uint32_t(plan.slots_size()))
        continue; // validate() names it
      const Slot &s = plan.slots(int(slot));
      held.push_back({slot, arenaRegionOf(s), s.offset(), s.bytes()});
    }
    RankArenaLayout layout = layOutRankArena(std::move(held), alignment);
    PipelineRank *pipe = rank.mutable_pipeline();
    pipe->set_arena_bytes(layout.bytes());
    pipe->clear_slots();
    for (const auto &[slot, offset] : layout.offsets) {
      RankSlot *r = pipe->add_slots();
      r->set_slot(slot);
      r->set_offset(offset);
    }
  }
}

StatusOr<RankMemory> pipelineRankMemory(const Bundle &b, int worldRank) {
  if (worldRank < 0 || worldRank >= b.ranks_size())
    return Status::error("rank " + std::to_string(worldRank) +
                         " is not one of the bundle's " +
                         std::to_string(b.ranks_size()));
  const PipelineRank &pipe = b.ranks(worldRank).pipeline();
  std::string at = "pipeline rank " + std::to_string(worldRank);
  if (pipe.arena_bytes() == 0 || pipe.slots_size() == 0)
    return Status::error(at + " has no arena of its own "
                              "(PipelineRank.arena_bytes); recompile the "
                              "bundle with this compiler");
  RankMemory m;
  m.bytes = pipe.arena_bytes();
  m.offsets.assign(size_t(b.plan().slots_size()), -1);
  for (int i = 0; i < pipe.slots_size(); ++i) {
    const RankSlot &r = pipe.slots(i);
    if (r.slot() >= uint32_t(b.plan().slots_size()))
      return Status::error(at + "'s arena lists slot " +
                           std::to_string(r.slot()) + " of " +
                           std::to_string(b.plan().slots_size()));
    if (i > 0 && r.slot() <= pipe.slots(i - 1).slot())
      return Status::error(at + "'s arena lists slot " +
                           std::to_string(r.slot()) + " after slot " +
                           std::to_string(pipe.slots(i - 1).slot()) +
                           "; the list is in increasing slot order");
    const Slot &s = b.plan().slots(int(r.slot()));
    if (r.offset() + s.bytes() > m.bytes)
      return Status::error(at + "'s slot '" + s.name() + "' ends at byte " +
                           std::to_string(r.offset() + s.bytes()) +
                           ", past the end of its arena (" +
                           std::to_string(m.bytes) + " bytes)");
    uint32_t alignment = b.plan().arenas_size() ? b.plan().arenas(0).alignment() : 1;
    if (alignment > 1 && r.offset() % alignment != 0)
      return Status::error(at + "'s slot '" + s.name() + "' at offset " +
                           std::to_string(r.offset()) + " is not aligned to " +
                           std::to_string(alignment) + " bytes");
    m.offsets[r.slot()] = int64_t(r.offset());
  }
  return m;
}

RankArenaLayout rankArenaParts(const Bundle &b, const RankProgram &rank) {
  const MemoryPlan &plan = b.plan();
  uint64_t alignment =
      plan.arenas_size() ? std::max<uint32_t>(1, plan.arenas(0).alignment()) : 1;
  uint64_t persistentEnd = 0, activationEnd = 0;
  RankArenaLayout parts;
  for (const RankSlot &r : rank.pipeline().slots()) {
    if (r.slot() >= uint32_t(plan.slots_size()))
      continue;
    const Slot &s = plan.slots(int(r.slot()));
    uint64_t end =
        r.offset() + (s.bytes() + alignment - 1) / alignment * alignment;
    if (arenaRegionOf(s) == ArenaRegion::Persistent)
      persistentEnd = std::max(persistentEnd, end);
    else if (arenaRegionOf(s) == ArenaRegion::Activation)
      activationEnd = std::max(activationEnd, end);
    parts.offsets.emplace_back(r.slot(), r.offset());
  }
  activationEnd = std::max(activationEnd, persistentEnd);
  uint64_t arena = std::max(rank.pipeline().arena_bytes(), activationEnd);
  parts.persistentBytes = persistentEnd;
  parts.activationBytes = activationEnd - persistentEnd;
  parts.stashBytes = arena - activationEnd;
  return parts;
}

namespace {

// Each rank's arena: in bounds, every slot the rank addresses or keeps in
// it, no two live slots sharing a byte.
Status checkRankArena(const Bundle &b, int worldRank) {
  StatusOr<RankMemory> memory = pipelineRankMemory(b, worldRank);
  if (!memory)
    return memory.status();
  std::string at = "pipeline rank " + std::to_string(worldRank);
  for (uint32_t slot : pipelineRankSlots(b, b.ranks(worldRank)))
    if (slot < uint32_t(b.plan().slots_size()) && !memory->holds(slot))
      return Status::error(
          at + " addresses or keeps slot '" + b.plan().slots(int(slot)).name() +
          "', which its arena (PipelineRank.slots) does not hold");
  std::vector<std::pair<uint32_t, uint64_t>> placed;
  for (const RankSlot &r : b.ranks(worldRank).pipeline().slots())
    placed.emplace_back(r.slot(), r.offset());
  return checkSlotsDisjointWhileLive(b.plan(), std::move(placed),
                                     at + "'s arena");
}

} // namespace

std::string parallelLayout(const Bundle &b) {
  uint32_t world = std::max<uint32_t>(1, b.world_size());
  if (!b.has_pipeline() || b.pipeline().ranks() == 0)
    return "data " + std::to_string(world);
  uint32_t p = b.pipeline().ranks();
  return "pipeline " + std::to_string(p) + " × data " +
         std::to_string(std::max<uint32_t>(1, world / p));
}

ProgramKind programKindOf(PipeInstructionKind kind) {
  switch (kind) {
  case PIPE_FORWARD:
    return CHUNK_FORWARD;
  case PIPE_BACKWARD:
    return CHUNK_BACKWARD;
  case PIPE_INPUT_GRADIENT:
    return CHUNK_INPUT_GRADIENT;
  case PIPE_WEIGHT_GRADIENT:
    return CHUNK_WEIGHT_GRADIENT;
  default:
    return PROGRAM_UNSPECIFIED;
  }
}

const Program *chunkProgram(const RankProgram &rank, ProgramKind kind,
                            uint32_t chunk) {
  for (const Program &p : rank.programs())
    if (p.kind() == kind && p.chunk() == chunk)
      return &p;
  return nullptr;
}

namespace {

uint64_t tensorBytes(const Slot &slot) {
  uint64_t n = 1;
  for (int64_t d : slot.shape())
    n *= uint64_t(std::max<int64_t>(d, 0));
  return n * dtypeBytes(slot.dtype());
}

std::string describeTransfer(const PipeTransfer &t) {
  return std::string(t.send() ? "send" : "receive") + " of the " +
         (t.gradient() ? "gradient" : "activation") + " edge of stage " +
         std::to_string(t.producer_stage()) + " microbatch " +
         std::to_string(t.microbatch());
}

// A transfer's tensors are stash entries of STASH slots, each entry inside
// its slot.
Status checkTransferTensors(const Bundle &b, const PipelineRank &rank,
                            const PipeTransfer &t, const std::string &at) {
  if (t.tensors_size() == 0)
    return Status::error(at + ": the " + describeTransfer(t) +
                         " moves no tensors");
  for (int k = 0; k < t.tensors_size(); ++k) {
    const SlotRef &ref = t.tensors(k);
    std::string what = at + ": tensor " + std::to_string(k) + " of the " +
                       describeTransfer(t);
    if (ref.slot() >= uint32_t(b.plan().slots_size()))
      return Status::error(what + " is slot " + std::to_string(ref.slot()) +
                           " of " + std::to_string(b.plan().slots_size()));
    const Slot &slot = b.plan().slots(int(ref.slot()));
    if (slot.kind() != STASH || ref.stash_stride() == 0)
      return Status::error(
          what + " is slot '" + slot.name() +
          "', not an entry of a stash slot: a transfer in flight while "
          "other programs run needs memory of its own");
    if (tensorBytes(slot) > ref.stash_stride() ||
        ref.byte_offset() + rank.stash_entries() * ref.stash_stride() >
            slot.bytes())
      return Status::error(what + ": slot '" + slot.name() + "' (" +
                           std::to_string(slot.bytes()) + " bytes) does not "
                           "hold " + std::to_string(rank.stash_entries()) +
                           " entries of " +
                           std::to_string(ref.stash_stride()) + " bytes for "
                           "a " + std::to_string(tensorBytes(slot)) +
                           "-byte tensor");
  }
  return Status::ok();
}

// A chunk's evaluation forward stands in for its forward on a forward-only
// list, whose feeds and transfers are the forward's: it reads the same
// inputs in the same slots, and a chunk has one at most.
Status checkEvalForwards(const RankProgram &rank, const std::string &at) {
  std::set<uint32_t> chunks;
  for (const Program &eval : rank.programs()) {
    if (eval.kind() != CHUNK_EVAL_FORWARD)
      continue;
    std::string what = at + " program '" + eval.name() + "' (" +
                       programKindName(CHUNK_EVAL_FORWARD) + " of chunk " +
                       std::to_string(eval.chunk()) + ")";
    if (!chunks.insert(eval.chunk()).second)
      return Status::error(what + " is the chunk's second; a chunk has one "
                                  "evaluation forward at most");
    const Program *forward = chunkProgram(rank, CHUNK_FORWARD, eval.chunk());
    if (!forward)
      return Status::error(what + " stands in for a forward the rank does "
                                  "not have");
    bool same = eval.inputs_size() == forward->inputs_size();
    for (int i = 0; same && i < eval.inputs_size(); ++i) {
      const NamedSlot &e = eval.inputs(i), &f = forward->inputs(i);
      same = e.name() == f.name() && e.slot() == f.slot() &&
             e.stash_stride() == f.stash_stride();
    }
    if (!same)
      return Status::error(what + " does not read the inputs of '" +
                           forward->name() + "' in its slots; evaluation "
                           "feeds it as the forward");
  }
  return Status::ok();
}

} // namespace

Status validatePipeline(const Bundle &b) {
  if (!b.has_pipeline())
    return Status::ok();
  const Pipeline &p = b.pipeline();
  if (p.ranks() < 2)
    return Status::error("pipeline.ranks is " + std::to_string(p.ranks()) +
                         ": a pipeline bundle has at least 2 stages' ranks");
  if (p.virtual_stages() < 1 || p.microbatches() < 1)
    return Status::error("pipeline.virtual_stages and pipeline.microbatches "
                         "must be at least 1");
  if (auto kind = pipelineScheduleKind(p.schedule()); !kind)
    return kind.status();
  std::vector<std::vector<int>> groups = pipelineGroups(b);
  if (groups.empty())
    return Status::error("pipeline.group is '" + p.group() +
                         "', but the bundle has no group of that name");
  std::vector<int> seen(size_t(b.ranks_size()), 0);
  for (const auto &g : groups) {
    if (g.size() != p.ranks())
      return Status::error("a '" + p.group() + "' group has " +
                           std::to_string(g.size()) + " ranks, but the "
                           "pipeline has " + std::to_string(p.ranks()));
    for (int r : g)
      if (r >= 0 && r < b.ranks_size())
        ++seen[size_t(r)];
  }
  for (int r = 0; r < b.ranks_size(); ++r)
    if (seen[size_t(r)] != 1)
      return Status::error("rank " + std::to_string(r) + " is in " +
                           std::to_string(seen[size_t(r)]) + " '" + p.group() +
                           "' groups; every rank is in exactly one pipeline");
  if (b.world_size() != p.ranks() * groups.size())
    return Status::error(
        "world_size is " + std::to_string(b.world_size()) + " but the "
        "pipeline has " + std::to_string(p.ranks()) + " ranks × " +
        std::to_string(groups.size()) + " replicas");

  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const std::vector<int> &group = groups[gi];
    std::string where = "pipeline " + std::to_string(gi);
    auto schedule = scheduleOf(b, group);
    if (!schedule)
      return schedule.status().withContext(where);
    auto simulation = simulatePipeline(*schedule);
    if (!simulation)
      return simulation.status().withContext(where);

    // Sends and receives meet in FIFO order per (sender, receiver,
    // channel), as the simulator matched them; what each carries must be
    // the same tensors.
    std::map<std::tuple<int, int, bool>, std::vector<std::pair<int, const PipeTransfer *>>>
        sends, recvs;
    for (int pr = 0; pr < int(group.size()); ++pr) {
      const RankProgram &rank = b.ranks(group[size_t(pr)]);
      const PipelineRank &pipe = rank.pipeline();
      std::string at = where + " rank " + std::to_string(group[size_t(pr)]);
      if (Status st = checkEvalForwards(rank, at); !st)
        return st;
      StashAssignment stash = assignStashEntries(*schedule, pr);
      if (int(pipe.stash_entries()) < stash.entries)
        return Status::error(
            at + " has " + std::to_string(pipe.stash_entries()) +
            " stash entries, but its schedule holds " +
            std::to_string(stash.entries) +
            " (chunk, microbatch) pairs in flight at once");
      for (int i = 0; i < pipe.instructions_size(); ++i) {
        const PipeInstruction &ins = pipe.instructions(i);
        std::string insAt = at + " instruction " + std::to_string(i);
        if (ins.kind() != PIPE_COMMUNICATE) {
          ProgramKind kind = programKindOf(ins.kind());
          if (!chunkProgram(rank, kind, ins.chunk()))
            return Status::error(insAt + " runs " + programKindName(kind) +
                                 " of chunk " + std::to_string(ins.chunk()) +
                                 ", which the rank has no program for");
          continue;
        }
        for (const PipeTransfer &t : ins.transfers()) {
          if (Status st = checkTransferTensors(b, pipe, t, insAt); !st)
            return st;
          auto key = t.send() ? std::make_tuple(pr, int(t.peer()), t.gradient())
                              : std::make_tuple(int(t.peer()), pr, t.gradient());
          (t.send() ? sends : recvs)[key].push_back({pr, &t});
        }
      }
    }
    for (const auto &[key, list] : sends) {
      const auto &other = recvs[key];
      for (size_t k = 0; k < list.size() && k < other.size(); ++k) {
        const PipeTransfer &s = *list[k].second, &r = *other[k].second;
        std::string pair = where + ": rank " +
                           std::to_string(group[size_t(std::get<0>(key))]) +
                           "'s " + describeTransfer(s) + " and rank " +
                           std::to_string(group[size_t(std::get<1>(key))]) +
                           "'s " + describeTransfer(r);
        if (s.tensors_size() != r.tensors_size())
          return Status::error(pair + " move " +
                               std::to_string(s.tensors_size()) + " and " +
                               std::to_string(r.tensors_size()) + " tensors");
        for (int k2 = 0; k2 < s.tensors_size(); ++k2) {
          const Slot &a = b.plan().slots(int(s.tensors(k2).slot()));
          const Slot &c = b.plan().slots(int(r.tensors(k2).slot()));
          if (a.dtype() != c.dtype() || tensorBytes(a) != tensorBytes(c))
            return Status::error(
                pair + " differ in tensor " + std::to_string(k2) + ": '" +
                a.name() + "' is " + std::to_string(tensorBytes(a)) +
                " bytes of " + dtypeName(a.dtype()) + ", '" + c.name() +
                "' " + std::to_string(tensorBytes(c)) + " bytes of " +
                dtypeName(c.dtype()));
        }
      }
    }
  }
  for (int r = 0; r < b.ranks_size(); ++r)
    if (Status st = checkRankArena(b, r); !st)
      return st;
  if (p.loss_sum_slot() >= uint32_t(b.plan().slots_size()))
    return Status::error("pipeline.loss_sum_slot is " +
                         std::to_string(p.loss_sum_slot()) + " of " +
                         std::to_string(b.plan().slots_size()) + " slots");
  return Status::ok();
}

} // namespace octet::bundle
