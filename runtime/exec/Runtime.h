#ifndef OCTET_RUNTIME_EXEC_RUNTIME_H
#define OCTET_RUNTIME_EXEC_RUNTIME_H

// Runs a bundle on this process's GPU: allocates the memory plan's arenas
// once, loads every module, creates every GEMM (choosing its algorithm
// once), and prepares each program of this rank as a list of ready steps
// that run eagerly or as one captured CUDA graph.

#include "runtime/blas/Gemm.h"
#include "bundle/bundle.pb.h"
#include "runtime/core/Arena.h"
#include "runtime/core/Device.h"
#include "runtime/core/Graph.h"
#include "runtime/core/Launch.h"
#include "runtime/core/Module.h"
#include "runtime/exec/ProgramTimes.h"
#include "runtime/exec/StepTimeline.h"

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace octet::comm {
class Communicator;
class NcclLibrary;
} // namespace octet::comm

namespace octet {

struct PipelineRankPlan;
struct PipeWork;
struct PipeOpTiming;
class TimelineRecorder;

// How load chooses each GEMM's cuBLASLt algorithm when the bundle records
// none that this cuBLASLt accepts: from the cache file when it has the
// GEMM's descriptor for this device and cuBLASLt, else by timing up to
// `candidates` of the heuristic's answers on the GEMM's own operands in the
// plan's arena (`reps` calls each, after one warm-up), once per distinct
// descriptor. `timed` false takes the heuristic's first answer untimed.
// Where the heuristic has fewer than `candidates` answers (on sm_90 it gives
// half of the blockwise recipe's descriptors one), other
// configurations of its algorithms are timed too, up to `configurations`
// candidates in all (blas::Gemm::create).
struct GemmTuningOptions {
  bool timed = true;
  int candidates = 8;
  int configurations = 64;
  int reps = 5;
  // Read, and written by rank 0 when it timed something; empty: none.
  std::string cacheFile;
};

// What load's algorithm choice did, for octet-run's output.
struct GemmTuningReport {
  int gemms = 0;
  // GEMMs whose algorithm the bundle recorded.
  int recorded = 0;
  // The other GEMMs' distinct descriptors (layers share them), by where
  // their algorithm came from.
  int cached = 0, timed = 0, heuristic = 0;
  // Of the timed ones: those whose candidates were more than the
  // heuristic's answers (GemmTuningOptions::configurations).
  int widened = 0;
  double seconds = 0;
  // The cache file was written.
  bool saved = false;
};

struct RuntimeOptions {
  DeviceOptions device;
  // -1: RANK from the environment, else 0.
  int rank = -1;
  GemmTuningOptions gemmTuning;
  // A pipeline rank times each instruction of its step with CUDA events
  // (pipelineTimings).
  bool pipelineTimeline = false;
  // Every program run by run or runGraph is timed with CUDA events on the
  // main stream (programTimes): where a data-parallel step loses time to
  // communication that its compute did not hide.
  bool programTimes = false;
  // Where the plan's arenas come from (null: cuMemAlloc). A data-parallel
  // rank passes NCCL's allocator to register them for its collectives.
  const DeviceAllocator *planAllocator = nullptr;
  // One training step can be recorded step by step (beginTimeline).
  bool stepTimeline = false;
};

class Runtime {
public:
  static StatusOr<std::unique_ptr<Runtime>> load(const bundle::Bundle &bundle,
                                                 const RuntimeOptions &options);
  ~Runtime();

  const Device &device() const { return *device_; }
  int rank() const { return rank_; }
  const bundle::Bundle &bundle() const { return bundle_; }
  // Notes from loading (recorded algorithms that were replaced, PTX JIT).
  const std::vector<std::string> &notes() const { return notes_; }
  const GemmTuningReport &gemmTuning() const { return tuning_; }

  // The program of this rank with that kind, or null.
  const bundle::Program *program(bundle::ProgramKind kind) const;
  // Enqueues every step of the program on the runtime's streams.
  // `lastMicrobatch` false skips the collectives marked last_microbatch (a
  // TRAIN_MICROBATCH run that does not complete the step's accumulation);
  // `firstMicrobatch` true makes the GEMMs marked
  // first_microbatch_overwrites write their accumulators (beta = 0).
  Status run(bundle::ProgramKind kind, bool lastMicrobatch = true,
             bool firstMicrobatch = true);
  // The communicators of the bundle's groups, by group index (null where
  // this rank is in none): a program's collectives run on them. NCCL's
  // types are chosen for `nccl`'s version. They must outlive the runtime's
  // last run.
  Status connect(const comm::NcclLibrary &nccl,
                 std::vector<comm::Communicator *> groups);
  // Runs the program eagerly with an event pair around every step and
  // waits for it: per-step device times in step order, for profiles. The
  // events serialize nothing the program does not already order.
  StatusOr<std::vector<double>> timeSteps(bundle::ProgramKind kind);
  // Captures the program once (first call) and replays the graph; a program
  // with collectives runs eagerly.
  // A program with first_microbatch_overwrites GEMMs has two graphs: the
  // step's first microbatch and the others.
  Status runGraph(bundle::ProgramKind kind, bool lastMicrobatch = true,
                  bool firstMicrobatch = true);
  Status synchronize();
  // The timed runs so far, oldest first (at most the last 4096), once the
  // device has finished them; empty unless RuntimeOptions.programTimes.
  StatusOr<std::vector<ProgramTime>> programTimes();
  // Needs RuntimeOptions.stepTimeline (and no pipeline). Between the two
  // calls every step of every program run (eagerly: runGraph runs eagerly
  // meanwhile) is marked with a CUDA event before and after its waits and
  // its operation, on its stream; endTimeline waits for the device and
  // reads them in ms from the start of the first program run
  // (runtime/exec/StepTimeline.h).
  Status beginTimeline();
  Status endTimeline();
  // The records of the last step endTimeline ended; empty before.
  const std::vector<TimelineRecord> &timeline() const;

  // A pipeline bundle (Bundle.pipeline): enqueues this rank's step, its
  // instruction list (runtime/exec/PipelineExecutor.h) over its CHUNK_*
  // programs, each prepared once per stash entry, and its pipeline group's
  // communicator (each PIPE_COMMUNICATE one ncclGroupStart/End on the
  // pipeline stream), ordered by events, with no host wait. Before each
  // compute instruction whose program takes inputs, once the instruction
  // has waited for its stash entry to be free, `stage(work)` enqueues its
  // microbatch's inputs into the entry on the main stream
  // (writeSlotAtAsync). The loss accumulator is cleared first; the main
  // stream has waited for every transfer at the end. `plan` is this rank's
  // (pipelinePlan) or its evaluation's (planPipelineEvaluation: no more
  // instructions or stash entries than training's, which were prepared).
  Status runPipelineStep(const PipelineRankPlan &plan,
                         const std::function<Status(const PipeWork &)> &stage);
  // This rank's plan of a pipeline bundle, or null.
  const PipelineRankPlan *pipelinePlan() const { return pipelinePlan_.get(); }
  // The last stage's loss accumulator (Pipeline.loss_sum_slot) on this
  // rank, or -1.
  int pipelineLossSlot() const;
  // When each instruction of the last pipeline step began and ended (after
  // its wait), in ms from the step's start, by its index in the plan; waits
  // for the step. Needs RuntimeOptions.pipelineTimeline.
  StatusOr<std::vector<PipeOpTiming>> pipelineTimings();

  // The device address of a plan slot; a stash-strided reference
  // (SlotRef.stash_stride) needs the stash entry.
  StatusOr<CUdeviceptr> slotAddress(const bundle::SlotRef &ref,
                                    int stashEntry = -1) const;
  // This rank's index in the bundle's group `group`.
  StatusOr<uint64_t> groupIndex(uint32_t group) const;
  // Copies between host memory and a whole slot (sizes must match), after
  // everything enqueued so far has finished.
  Status writeSlot(uint32_t slot, const void *data, uint64_t bytes);
  Status readSlot(uint32_t slot, void *data, uint64_t bytes);
  // The first `bytes` of a slot, enqueued on the main stream in order with
  // the programs: the host memory (pinned, for the copy to be truly
  // asynchronous) must stay valid until synchronize().
  Status writeSlotAsync(uint32_t slot, const void *data, uint64_t bytes);
  Status readSlotAsync(uint32_t slot, void *data, uint64_t bytes);
  // `bytes` at `offset` of a slot (a stash entry), enqueued the same way.
  Status writeSlotAtAsync(uint32_t slot, uint64_t offset, const void *data,
                          uint64_t bytes);
  // Index of the slot with that name, or -1.
  int findSlot(const std::string &name) const;

  // Writes the algorithm each GEMM uses into `out` (so a rerun takes the
  // same ones) and returns how many changed.
  int recordAlgorithms(bundle::Bundle &out) const;
  // Device memory in use outside the plan's arenas once loaded: the CUDA
  // context, cuBLASLt's handle, modules (and other processes on the same
  // GPU, if any: the driver cannot tell them apart).
  uint64_t fixedCostBytes() const { return fixedCost_; }
  uint64_t arenaBytes() const;
  // The plan's arenas (not the argument tables).
  const std::vector<std::unique_ptr<Arena>> &planArenas() const {
    return arenas_;
  }
  CUstream mainStream() const;

private:
  Runtime() = default;
  struct PreparedStep;
  struct PreparedProgram;
  Status prepare();
  // One blas::Gemm per bundle GEMM (runtime/exec/RuntimeGemms.cpp): the
  // algorithm the bundle records if cuBLASLt accepts it, else the
  // heuristic's candidates that chooseAlgorithms picks from.
  Status createGemms(const GemmTuningOptions &options);
  // After prepare(), before anything is written to the arena: the GEMMs'
  // timing calls write their outputs there.
  Status chooseAlgorithms(const GemmTuningOptions &options);
  // The slot's address once `bytes` is checked against its size (equal
  // when `whole`, else at most).
  StatusOr<CUdeviceptr> slotRange(uint32_t slot, uint64_t bytes, bool whole,
                                  const char *what) const;
  StatusOr<PreparedStep> prepareStep(const bundle::Step &step,
                                     const std::string &where,
                                     int stashEntry);
  Status prepareProgram(const bundle::Program &prog, int stashEntry);
  Status runPrepared(PreparedProgram &p, bool lastMicrobatch,
                     bool firstMicrobatch);
  class PipelineStream;
  Status preparePipeline();
  // `record`: record the step's event if a later step waits for it (a
  // grouped collective's is recorded once its group is enqueued). While a
  // timeline records, its waits are marked, and its operation unless it is
  // grouped (runPrepared marks the group).
  Status runStep(const PreparedStep &step, const PreparedProgram &program,
                 size_t index, bool firstMicrobatch, bool record = true);
  // The recorder while it records a step, else null.
  TimelineRecorder *recordingTimeline() const;
  TimelineRecord timelineRecord(const PreparedStep &step,
                                const PreparedProgram &program,
                                size_t index) const;
  PreparedProgram *find(bundle::ProgramKind kind);
  PreparedProgram *findChunk(bundle::ProgramKind kind, uint32_t chunk,
                             int stashEntry);

  bundle::Bundle bundle_;
  int rank_ = 0;
  std::unique_ptr<Device> device_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<std::unique_ptr<Arena>> arenas_;
  // A pipeline rank allocates its own arena only (PipelineRank.arena_bytes,
  // one arena): each slot's offset in it, -1 for other ranks' slots.
  std::vector<int64_t> rankOffsets_;
  // The launches' argument tables (KernelArg.table), written at load; the
  // next free byte.
  std::unique_ptr<Arena> tables_;
  uint64_t tablesUsed_ = 0;
  std::vector<std::unique_ptr<Module>> modules_;
  std::vector<CUfunction> functions_;
  std::unique_ptr<blas::BlasHandle> blas_;
  std::vector<std::unique_ptr<blas::Gemm>> gemms_;
  std::vector<std::unique_ptr<PreparedProgram>> programs_;
  std::vector<comm::Communicator *> comms_;
  const comm::NcclLibrary *nccl_ = nullptr;
  // How long enqueueing a group of collectives may take (NCCL connects on
  // first use).
  std::chrono::milliseconds groupTimeout_{0};
  std::vector<std::string> notes_;
  // A pipeline rank: its plan and what runs it (the pipeline stream, an
  // event per instruction).
  std::unique_ptr<PipelineRankPlan> pipelinePlan_;
  std::unique_ptr<PipelineStream> pipeline_;
  bool pipelineTimeline_ = false;
  // RuntimeOptions.programTimes: each timed run's events (begin, after the
  // main stream's last step, after the join).
  struct TimedRun {
    bundle::ProgramKind kind = bundle::ProgramKind();
    CUevent begin = nullptr, computed = nullptr, end = nullptr;
    // Around each collective (or group) on the compute stream.
    std::vector<std::pair<CUevent, CUevent>> mainCollectives;
  };
  bool timePrograms_ = false;
  std::deque<TimedRun> timedRuns_;
  StatusOr<TimedRun *> beginTimedRun(bundle::ProgramKind kind);
  StatusOr<std::pair<CUevent, CUevent>> timedPair();
  static void destroyTimedRun(TimedRun &t);
  std::unique_ptr<TimelineRecorder> timeline_;
  GemmTuningReport tuning_;
  uint64_t fixedCost_ = 0;
};

// Converts the bundle's GEMM descriptor to the BLAS layer's.
StatusOr<blas::GemmDesc> toGemmDesc(const bundle::GemmDescriptor &g);

} // namespace octet

#endif
