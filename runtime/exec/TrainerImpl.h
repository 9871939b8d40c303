#ifndef OCTET_RUNTIME_EXEC_TRAINERIMPL_H
#define OCTET_RUNTIME_EXEC_TRAINERIMPL_H

// The Trainer's state, private to runtime/exec: Trainer.cpp defines the
// training loop's methods, TrainerCheckpoint.cpp those that save and
// restore checkpoints and weights.

#include "bundle/PipelineBundle.h"
#include "hf/HfWeights.h"
#include "runtime/exec/PipelineTimeline.h"
#include "runtime/exec/PipelineTraining.h"
#include "runtime/exec/Trainer.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace octet {

// The trainer's own types, shared by its translation units.
namespace trainer {

enum class Feed { Tokens, Labels, LossMask, Positions, CuSeqlens, Lr, Step };

struct Binding {
  Feed feed;
  std::string name;
  uint32_t slot = 0;
  uint64_t bytes = 0;
  bundle::DType dtype = bundle::DTYPE_UNSPECIFIED;
  uint64_t stageOffset = 0;
};

struct ProgramIO {
  std::vector<Binding> inputs;
  uint64_t stageBytes = 0;
  int loss = -1, gradNorm = -1, lr = -1;
};

// One tensor of a checkpoint and the slot it comes from.
struct Entry {
  std::string name;
  uint32_t slot = 0;
  octet::DType dtype = octet::DType::U8;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  // A parameter that is not one HF tensor as it is (a fused QKV or gate/up
  // weight): saved as, and loaded from, the HF tensors this says.
  std::optional<hf::HfParameterLayout> layout;
  // A state tensor the data-parallel ranks share out along dimension 0
  // (ZeRO-1): the slot holds this rank's part, `shape` is the part's, and
  // checkpoints hold the whole tensor.
  int64_t dataShards = 1;
  // A state tensor INIT makes again when a checkpoint lacks it
  // (StateTensor.remade_by_init).
  bool remadeByInit = false;
};

// A shape as error messages show it: "[2, 3]".
std::string shapeText(const std::vector<int64_t> &shape);

} // namespace trainer

struct Trainer::Impl {
  TrainBackend &backend;
  TrainData &data;
  TrainerOptions options;
  const bundle::Bundle &bundle;
  bundle::Schedule schedule;
  int64_t rows = 0, seq = 0, accum = 1, steps = 0;
  int64_t logInterval = 1, evalInterval = 0, checkpointInterval = 0;
  // This rank's place among the data-parallel ranks.
  int dpRank = 0, dpSize = 1;
  // The bundle has state INIT derives and checkpoints leave out.
  bool derivedState = false;
  // The checkpoint last restored lacked a state tensor INIT makes again.
  bool remakeByInit = false;
  trainer::ProgramIO train, optimizer, eval;
  std::vector<trainer::Entry> modelEntries, stateEntries;
  std::vector<std::string> notes;
  std::optional<metrics::GpuPeak> peak;
  std::unique_ptr<metrics::EventWriter> events;
  // Staging: [parity][microbatch] for training, one for evaluation, and
  // the scalars the loop reads back (losses, grad norm, lr).
  std::vector<std::unique_ptr<HostBuffer>> stages[2];
  std::unique_ptr<HostBuffer> evalStage, optimizerStage, scalars;
  // Data position after the batches of the stage at each parity.
  std::string stagedPosition[2];
  // Data position after the batches of the last step that ran.
  std::string checkpointPosition;
  std::optional<double> checkpointLoss; // the last step's
  int64_t stepsRunHere = 0;
  uint64_t peakUsed = 0;
  // A pipeline bundle's rank: its plan, which microbatch input each of its
  // compute instructions reads where, its index in its pipeline and the
  // pipeline's length, and the ranks whose programs use each slot (the
  // checkpoint takes a variable from the first).
  const PipelineRankPlan *pipe = nullptr;
  PipelineFeedPlan pipeFeeds;
  // Evaluation of a pipeline bundle: the rank's forward-only plan, its
  // feeds, and a staging buffer per microbatch of its steps (set up only
  // when the run evaluates).
  std::optional<PipelineRankPlan> evalPipe;
  PipelineFeedPlan evalPipeFeeds;
  std::vector<std::unique_ptr<HostBuffer>> evalPipeStages;
  int pipeRank = 0, pipeSize = 1;
  std::map<uint32_t, std::set<int>> slotUsers;
  // --pipeline-timeline: the steps' instruction times so far.
  std::unique_ptr<PipelineTimeline> timeline;
  // A pipeline rank's own arena: the slots it holds (every slot without a
  // pipeline).
  std::optional<bundle::RankMemory> rankMemory;
  bool holdsSlot(uint32_t slot) const {
    return !rankMemory || rankMemory->holds(slot);
  }

  Impl(TrainBackend &b, TrainData &d, const TrainerOptions &o)
      : backend(b), data(d), options(o), bundle(b.bundle()),
        schedule(b.bundle().schedule()) {}

  // The job's liveness, through whichever group this rank is in (a
  // pipeline of one data replica may have no data group).
  void heartbeat(int64_t step) {
    if (options.dataParallel)
      options.dataParallel->heartbeat(step);
    else if (options.pipeline)
      options.pipeline->heartbeat(step);
  }

  // Rank 0 speaks for the job.
  void print(const std::string &line) {
    if (options.out && dpRank == 0 && pipeRank == 0) {
      std::fprintf(options.out, "%s\n", line.c_str());
      std::fflush(options.out);
    }
  }

  float *scalar(size_t i) { return static_cast<float *>(scalars->data()) + i; }

  // This data-parallel rank's part of dimension 0 of a whole tensor's bytes.
  template <typename Bytes>
  Bytes rankPart(const Bytes &whole, int64_t parts) const {
    size_t part = whole.size() / size_t(parts);
    return Bytes(whole.begin() + ptrdiff_t(part * size_t(dpRank)),
                 whole.begin() + ptrdiff_t(part * size_t(dpRank + 1)));
  }

  // Defined in Trainer.cpp.
  Status bind(bundle::ProgramKind kind, trainer::ProgramIO &io,
              bool batchInputs);
  Status bindInput(const std::string &where, const std::string &name,
                   uint32_t slot, uint64_t bytes, trainer::ProgramIO &io,
                   bool batchInputs);
  Status reportTimeline();
  Status setUpPipeline();
  bool evaluates() const;
  StatusOr<int64_t> evalBatches() const;
  Status setUpPipelineEvaluation();
  Status feedPipeline(const PipeWork &w, int parity);
  Status
  feedPipelineFrom(const PipelineFeedPlan &plan,
                   const std::vector<std::unique_ptr<HostBuffer>> &staged,
                   const PipeWork &w);
  Status planEntries();
  Status stage(const trainer::ProgramIO &io, HostBuffer &buffer,
               const data::PackedBatch &batch, const char *what);
  Status enqueueInputs(const trainer::ProgramIO &io, HostBuffer &buffer);
  Status enqueueOptimizerInputs(int64_t step);
  Status prepareStep(int parity);
  uint64_t usedNow();
  Status runStep(int64_t step, int parity, bool prefetch, StepRecord &rec);
  Status report(const StepRecord &rec);
  Status zeroGradients();
  Status writeInitialValues(bool parameters);

  // Checkpoints and weights, defined in TrainerCheckpoint.cpp.
  Status readWhole(const std::vector<trainer::Entry> &entries,
                   std::vector<hf::NamedTensor> &out);
  StatusOr<checkpoint::TrainCheckpoint> gather(int64_t step);
  StatusOr<checkpoint::TrainCheckpoint>
  gatherPipeline(checkpoint::TrainCheckpoint c);
  StatusOr<std::vector<hf::NamedTensor>>
  hfTensors(std::vector<hf::NamedTensor> model);
  Status restoreEntries(const std::vector<trainer::Entry> &entries,
                        const std::string &origin,
                        const hf::HfTensorLookup &lookup, bool convert);
  Status loadWeights(const std::string &path);
  Status saveHf(const std::string &dir);
};

} // namespace octet

#endif
