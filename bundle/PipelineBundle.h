#ifndef OCTET_BUNDLE_PIPELINEBUNDLE_H
#define OCTET_BUNDLE_PIPELINEBUNDLE_H

// A pipeline bundle's instruction lists (bundle.proto: Pipeline,
// PipelineRank) as support/PipelineSchedule's schedule and back, the stash
// entry each (chunk, microbatch) of a rank takes, and the checks that
// validate() runs on them: the simulator's (pairs match, no deadlock, every
// F/B/W once), and what only the bundle knows (each send's tensors are its
// receive's, byte for byte; every stash entry a rank uses exists; every
// compute instruction has its program; each rank's arena holds, without
// overlap, every slot it addresses).

#include "bundle/bundle.pb.h"
#include "support/PipelineSchedule.h"
#include "support/RankArena.h"
#include "support/Status.h"

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace octet::bundle {

// "1f1b", "interleaved", "zb-h1"; an error names the field and the choices.
StatusOr<PipelineScheduleKind> pipelineScheduleKind(const std::string &name);

PipeInstruction toInstruction(const PipeOp &op);
// Fails on an instruction kind the schedule has no op for.
StatusOr<PipeOp> fromInstruction(const PipeInstruction &instruction);

// The instruction lists of one pipeline: `worldRanks[p]` is the world rank
// of pipeline rank p.
StatusOr<PipelineSchedule> scheduleOf(const Bundle &bundle,
                                      const std::vector<int> &worldRanks);

// Evaluation's list of a rank, derived from its training list: the
// forwards and the activation transfers in their order, without the
// backward and weight-gradient instructions, the gradient transfers, or
// the communication groups that leaves empty. Every rank keeps the sends
// and receives its peers keep, in the same order, so the pairs still
// match; PipelineSchedule.forwardOnly lets the simulator prove it.
std::vector<PipeInstruction> forwardOnlyInstructions(const PipelineRank &rank);
// scheduleOf over those lists (forwardOnly set).
StatusOr<PipelineSchedule>
forwardOnlyScheduleOf(const Bundle &bundle, const std::vector<int> &worldRanks);

// The world ranks of each of the bundle's pipeline groups (named
// Pipeline.group), in group order.
std::vector<std::vector<int>> pipelineGroups(const Bundle &bundle);

// Where a rank keeps each (chunk, microbatch) in flight: the entry a
// compute instruction's program uses and each transfer's tensors are in.
// An entry is taken at the first instruction that names the pair (the
// receive of its activation, or its forward) and free again after the last
// (its weight gradient, or the send of its input gradient), for the next
// pair to take; the lowest free entry is taken first.
struct StashAssignment {
  // Per instruction: the entry of a compute instruction (-1 for a
  // communication group), and of each transfer of a group.
  std::vector<int> computeEntry;
  std::vector<std::vector<int>> transferEntries;
  // Entries the rank needs (PipelineRank.stash_entries at least).
  int entries = 0;
};

// The local (chunk, microbatch) a transfer of a pipeline rank reads or
// fills (support's transfer: bundle::PipeTransfer is the wire form).
struct ChunkMicrobatch {
  int chunk = 0, microbatch = 0;
  bool operator<(const ChunkMicrobatch &o) const {
    return chunk != o.chunk ? chunk < o.chunk : microbatch < o.microbatch;
  }
};
ChunkMicrobatch transferChunk(const PipelineSchedule &schedule,
                              const octet::PipeTransfer &transfer);

StashAssignment assignStashEntries(const PipelineSchedule &schedule,
                                   int rank);

// A transfer of pipeline rank `rank` as the bundle names it, and the local
// chunk whose tensors it moves (transferChunk); the builder below asks the
// caller which tensors those are.
struct TransferSite {
  int rank = 0;
  int chunk = 0;
  const PipeTransfer *transfer = nullptr;
};
using TransferTensors =
    std::function<std::vector<SlotRef>(const TransferSite &site)>;

// Lays a pipeline out in `b`: world size P·D, a "data" group per pipeline
// rank p (world ranks p·D + d) and a "pipeline" group per replica d, the
// Pipeline message (its loss_sum_slot is the caller's), and a RankProgram
// per world rank with its stage, its instruction list and its stash entry
// count, each transfer's tensors from `tensorsOf`. Programs are the
// caller's to add. `b` must have no groups or ranks yet.
Status addPipelineRanks(Bundle &b, const PipelineSchedule &schedule,
                        int data, const TransferTensors &tensorsOf);

// Every slot `m` addresses, at any depth: its SlotRefs (with their stash
// stride) and its NamedSlots (inputs and outputs, stride 0).
void visitSlotRefs(const google::protobuf::Message &m,
                   const std::function<void(uint32_t, uint64_t)> &visit);

// The region of a pipeline rank's arena that a slot of the plan goes to.
ArenaRegion arenaRegionOf(const Slot &slot);

// The slots a pipeline rank must hold: every slot its programs and its
// instruction list address, and the parameters and state that are its own
// (pipeline_rank its stage) or every rank's (pipeline_rank unset).
std::set<uint32_t> pipelineRankSlots(const Bundle &b, const RankProgram &rank);

// Sets every rank's PipelineRank.arena_bytes and slots from
// pipelineRankSlots, placed by layOutRankArena: for bundles built program
// by program (the tests' toy bundles). The compiler lays its ranks out from
// the module's plan instead (compiler/Plan/PipelinePlan.h), with the same
// placement; validate() holds both to the same rules.
void addRankArenas(Bundle &b);

// What a world rank of a pipeline bundle allocates: its arena's bytes and
// each slot's offset in it (-1: not the rank's).
struct RankMemory {
  uint64_t bytes = 0;
  std::vector<int64_t> offsets;
  bool holds(uint32_t slot) const {
    return slot < offsets.size() && offsets[slot] >= 0;
  }
};
StatusOr<RankMemory> pipelineRankMemory(const Bundle &b, int worldRank);

// A rank's arena in its parts, as its slots' offsets lay it out: the
// persistent slots from byte 0, the activation region after them, the
// stash slots to the end (PipelineRank.arena_bytes).
RankArenaLayout rankArenaParts(const Bundle &b, const RankProgram &rank);

// The checks above; the message names the pipeline, the rank, the
// instruction and the tensor. A bundle without Bundle.pipeline passes.
Status validatePipeline(const Bundle &bundle);

// How the bundle's world size comes about, for messages: "pipeline 2 ×
// data 2", or "data 4" without a pipeline.
std::string parallelLayout(const Bundle &bundle);

// The program of `kind` for local chunk `chunk` among the rank's, or null.
const Program *chunkProgram(const RankProgram &rank, ProgramKind kind,
                            uint32_t chunk);
// The CHUNK_* program a compute instruction runs.
ProgramKind programKindOf(PipeInstructionKind kind);

} // namespace octet::bundle

#endif
