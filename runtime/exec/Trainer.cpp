#include "runtime/exec/Trainer.h"

#include "bundle/Bundle.h"
#include "bundle/HfLayout.h"
#include "bundle/InitValues.h"
#include "runtime/exec/TrainerImpl.h"
#include "support/LrSchedule.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>
#include <thread>

namespace octet {

using namespace octet::bundle;
using namespace octet::trainer;
namespace ckpt = octet::checkpoint;

double scheduledLearningRate(const Schedule &s, int64_t step,
                             int64_t totalSteps) {
  return learningRateAt(
      {s.lr(), s.warmup_steps(), totalSteps, s.min_lr_ratio()}, step);
}

std::string trainer::shapeText(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

Status Trainer::Impl::bind(ProgramKind kind, ProgramIO &io, bool batchInputs) {
  const Program *p = backend.program(kind);
  if (!p)
    return Status::ok();
  std::string where =
      std::string(programKindName(kind)) + " program '" + p->name() + "'";
  const MemoryPlan &plan = bundle.plan();
  for (const NamedSlot &in : p->inputs()) {
    const Slot &s = plan.slots(int(in.slot()));
    OCTET_RETURN_IF_ERROR(
        bindInput(where, in.name(), in.slot(), s.bytes(), io, batchInputs));
  }
  for (const NamedSlot &out : p->outputs()) {
    const Slot &s = plan.slots(int(out.slot()));
    int *target = out.name() == "loss"        ? &io.loss
                  : out.name() == "grad_norm" ? &io.gradNorm
                  : out.name() == "lr"        ? &io.lr
                                              : nullptr;
    if (!target)
      continue;
    if (s.dtype() != F32 || s.bytes() < 4)
      return Status::error(where + " output '" + out.name() + "' (slot '" +
                           s.name() + "') is " + dtypeName(s.dtype()) + " of " +
                           std::to_string(s.bytes()) +
                           " bytes; the trainer reads an f32 scalar");
    *target = int(out.slot());
  }
  return Status::ok();
}

// One input of `where`, of `bytes` a run (a microbatch's, for a batch
// input), in `io`'s staging.
Status Trainer::Impl::bindInput(const std::string &where,
                                const std::string &name, uint32_t slot,
                                uint64_t bytes, ProgramIO &io,
                                bool batchInputs) {
  const Slot &s = bundle.plan().slots(int(slot));
  uint64_t tokens = uint64_t(rows * seq);
  Binding b;
  b.name = name;
  b.slot = slot;
  b.dtype = s.dtype();
  b.bytes = bytes;
  uint64_t want = 0;
  bundle::DType wantType = I32;
  bool atLeast = false;
  if (batchInputs && name == "tokens")
    b.feed = Feed::Tokens, want = tokens * 4;
  else if (batchInputs && name == "labels")
    b.feed = Feed::Labels, want = tokens * 4;
  else if (batchInputs && name == "positions")
    b.feed = Feed::Positions, want = tokens * 4;
  else if (batchInputs && name == "loss_mask")
    b.feed = Feed::LossMask, want = tokens * 4, wantType = F32;
  else if (batchInputs && name == "cu_seqlens")
    b.feed = Feed::CuSeqlens, want = uint64_t(rows + 1) * 4, atLeast = true;
  else if (!batchInputs && name == "lr")
    b.feed = Feed::Lr, want = 4, wantType = F32;
  else if (!batchInputs && name == "step")
    b.feed = Feed::Step, want = 4, wantType = I32;
  else
    return Status::error(
        where + " takes input '" + name + "' (slot '" + s.name() +
        "'), which the trainer cannot fill: it fills " +
        (batchInputs ? "tokens, labels, loss_mask, positions and "
                       "cu_seqlens"
                     : "lr and step") +
        "; recompile the bundle with this release");
  if (b.dtype != wantType)
    return Status::error(where + " input '" + name + "' is " +
                         dtypeName(b.dtype) + "; the trainer writes " +
                         dtypeName(wantType));
  if (atLeast ? b.bytes < want : b.bytes != want)
    return Status::error(where + " input '" + name + "' (slot '" + s.name() +
                         "') has " + std::to_string(b.bytes) +
                         " bytes, but the schedule (" + std::to_string(rows) +
                         " rows of " + std::to_string(seq) + " tokens) needs " +
                         (atLeast ? "at least " : "") + std::to_string(want) +
                         ": the bundle is inconsistent; recompile");
  b.stageOffset = io.stageBytes;
  io.stageBytes += (b.bytes + 63) / 64 * 64;
  io.inputs.push_back(b);
  return Status::ok();
}

// A pipeline rank trains through its instruction list: the
// microbatches' inputs go into the stash entries of the instructions that
// read them (planPipelineFeeds), the loss is the last stage's
// accumulator, and `train` stages every input any chunk program takes.
// Every rank of the pipeline adds its steps' times to the group's, and
// rank 0 prints the measured and the predicted bubble.
Status Trainer::Impl::reportTimeline() {
  if (stepsRunHere <= 2) {
    print("note: --pipeline-timeline times the steps after the second; "
          "this run had " +
          std::to_string(stepsRunHere));
    return Status::ok();
  }
  OCTET_RETURN_IF_ERROR(options.pipeline->sum(timeline->sums()));
  std::vector<int> group;
  for (const auto &g : bundle::pipelineGroups(bundle))
    if (std::find(g.begin(), g.end(), pipe->worldRank) != g.end())
      group = g;
  auto sched = bundle::scheduleOf(bundle, group);
  if (!sched)
    return sched.status();
  auto summary = timeline->summarize(*sched);
  if (!summary)
    return summary.status();
  print(describeTimeline(*summary));
  return Status::ok();
}

Status Trainer::Impl::setUpPipeline() {
  pipe = backend.pipelinePlan();
  if (!pipe)
    return Status::error("the bundle is pipeline parallel (" +
                         parallelLayout(bundle) +
                         ") but this backend runs no pipeline step");
  const Pipeline &pl = bundle.pipeline();
  pipeRank = pipe->pipelineRank;
  pipeSize = int(pl.ranks());
  int64_t microbatches = int64_t(pl.microbatches());
  if (schedule.grad_accum_steps() > 1 &&
      schedule.grad_accum_steps() != microbatches)
    return Status::error(
        "the bundle's schedule has grad_accum_steps " +
        std::to_string(schedule.grad_accum_steps()) +
        " but its pipeline runs " + std::to_string(microbatches) +
        " microbatches a replica: the bundle is inconsistent; recompile");
  accum = std::max<int64_t>(1, microbatches);
  if (pipeSize > 1 && !options.pipeline)
    return Status::error(
        "the bundle is pipeline parallel (" + parallelLayout(bundle) +
        "): its ranks start under a launcher (octet launch --gpus " +
        std::to_string(bundle.world_size()) + " -- octet-run ...)");
  if (options.pipeline && options.pipeline->size() != pipeSize)
    return Status::error("the bundle's pipeline has " +
                         std::to_string(pipeSize) +
                         " ranks but this rank's pipeline group has " +
                         std::to_string(options.pipeline->size()));
  if (options.pipeline && options.pipeline->rank() != pipeRank)
    return Status::error("this rank is pipeline rank " +
                         std::to_string(pipeRank) + " of the bundle but rank " +
                         std::to_string(options.pipeline->rank()) +
                         " of its pipeline group");
  if (!options.saveHf.empty())
    return Status::error(
        "--save-hf with a pipeline bundle is not done yet (each rank "
        "holds its own stages' parameters): checkpoint with "
        "--checkpoint-dir and export the checkpoint (octet export-hf)");
  if (options.pipelineTimeline)
    timeline = std::make_unique<PipelineTimeline>(
        pipeSize, int(std::max<uint32_t>(1, pl.virtual_stages())));
  auto feeds = planPipelineFeeds(bundle, *pipe);
  if (!feeds)
    return feeds.status();
  pipeFeeds = std::move(*feeds);
  std::string where = "the pipeline's chunk programs";
  for (const auto &[name, bytes] : pipeFeeds.inputs) {
    uint32_t slot = 0;
    for (const auto &list : pipeFeeds.feeds)
      for (const PipelineFeed &f : list)
        if (f.name == name)
          slot = f.slot;
    OCTET_RETURN_IF_ERROR(
        bindInput(where, name, slot, bytes, train, /*batchInputs=*/true));
  }
  if (pipe->lossSumSlot >= 0) {
    const Slot &s = bundle.plan().slots(pipe->lossSumSlot);
    if (s.dtype() != F32 || s.bytes() < 4)
      return Status::error("the pipeline's loss accumulator (slot '" +
                           s.name() + "') is " + dtypeName(s.dtype()) + " of " +
                           std::to_string(s.bytes()) +
                           " bytes; the trainer reads an f32 scalar");
    train.loss = pipe->lossSumSlot;
  }
  slotUsers = pipelineSlotUsers(bundle);
  auto memory = pipelineRankMemory(bundle, pipe->worldRank);
  if (!memory)
    return memory.status();
  rankMemory = std::move(*memory);
  return Status::ok();
}

// Whether the run evaluates at its eval interval.
bool Trainer::Impl::evaluates() const {
  bool program = pipe ? evalPipe.has_value() : backend.hasProgram(EVAL);
  return evalInterval > 0 && program && data.hasEval();
}

StatusOr<int64_t> Trainer::Impl::evalBatches() const {
  return evaluationBatches(options.evalBatches, data.evalBatchCount(),
                           pipe ? accum : 0, dpSize);
}

// Evaluation runs each rank's forward-only list (planPipelineEvaluation)
// over held-out microbatches, staged and fed like training's. Asked for
// where the run evaluates, so that a bundle evaluation cannot run on is
// refused before training starts.
Status Trainer::Impl::setUpPipelineEvaluation() {
  auto plan = planPipelineEvaluation(bundle, pipe->worldRank);
  if (!plan)
    return plan.status();
  auto feeds = planPipelineFeeds(bundle, *plan);
  if (!feeds)
    return feeds.status();
  for (const auto &[name, bytes] : feeds->inputs) {
    auto bound = std::find_if(train.inputs.begin(), train.inputs.end(),
                              [&](const Binding &b) { return b.name == name; });
    if (bound == train.inputs.end() || bound->bytes != bytes)
      return Status::error("evaluation's chunk forwards take input '" + name +
                           "' of " + std::to_string(bytes) +
                           " bytes, which training's do not: the bundle is "
                           "inconsistent; recompile");
  }
  evalPipe = std::move(*plan);
  evalPipeFeeds = std::move(*feeds);
  return Status::ok();
}

// The compute instruction's microbatch inputs, from the step's staging,
// into its stash entry.
Status Trainer::Impl::feedPipeline(const PipeWork &w, int parity) {
  return feedPipelineFrom(pipeFeeds, stages[parity], w);
}

Status Trainer::Impl::feedPipelineFrom(
    const PipelineFeedPlan &plan,
    const std::vector<std::unique_ptr<HostBuffer>> &staged, const PipeWork &w) {
  const auto &feeds = plan.feeds[w.index];
  if (feeds.empty())
    return Status::ok();
  int64_t m = int64_t(w.instruction->microbatch());
  if (m < 0 || m >= accum)
    return Status::error("instruction " + std::to_string(w.index) +
                         " runs microbatch " + std::to_string(m) +
                         " of a step of " + std::to_string(accum));
  auto *base = static_cast<uint8_t *>(staged[size_t(m)]->data());
  for (const PipelineFeed &f : feeds)
    for (const Binding &b : train.inputs)
      if (b.name == f.name)
        OCTET_RETURN_IF_ERROR(backend.writeSlotAt(
            f.slot, f.offset, base + b.stageOffset, f.bytes));
  return Status::ok();
}

Status Trainer::Impl::planEntries() {
  const MemoryPlan &plan = bundle.plan();
  std::set<uint32_t> covered;
  auto entryFor = [&](const std::string &name, uint32_t slot,
                      bundle::DType dtype, std::vector<int64_t> shape,
                      const std::string &what) -> StatusOr<Entry> {
    const Slot &s = plan.slots(int(slot));
    Entry e;
    e.name = name;
    e.slot = slot;
    e.bytes = s.bytes();
    e.dtype = dtypeFromProto(dtype).value_or(octet::DType::U8);
    uint64_t element = octet::dtypeBytes(e.dtype);
    uint64_t count = 1;
    for (int64_t d : shape)
      count *= uint64_t(d);
    if (shape.empty() && e.bytes != element) {
      if (e.bytes % element)
        e.dtype = octet::DType::U8, element = 1;
      shape = {int64_t(e.bytes / element)};
    } else if (count * element != e.bytes) {
      return Status::error(what + " '" + name + "' is " + shapeText(shape) +
                           " " + dtypeName(dtype) + " but its slot '" +
                           s.name() + "' has " + std::to_string(e.bytes) +
                           " bytes: the bundle is inconsistent");
    }
    e.shape = std::move(shape);
    covered.insert(slot);
    return e;
  };
  for (const Parameter &p : bundle.parameters()) {
    // Checkpoints hold a parameter under its HF names when the bundle
    // gives them, else under its octet name.
    auto layout = hfLayoutOf(p);
    if (!layout)
      return layout.status().withContext("parameter '" + p.name() + "'");
    bool whole = *layout && hf::isWholeTensor(**layout);
    // A sharded master's slot holds this rank's part of dimension 0.
    int64_t shards = std::max<int64_t>(1, int64_t(p.data_shards()));
    std::vector<int64_t> shape(p.shape().begin(), p.shape().end());
    if (shards > 1 && !shape.empty())
      shape[0] /= shards;
    auto e = entryFor(whole ? (*layout)->pieces[0].hfName : p.name(), p.slot(),
                      p.dtype(), std::move(shape), "parameter");
    if (!e)
      return e.status();
    e->dataShards = shards;
    if (*layout && !whole)
      e->layout = std::move(**layout);
    modelEntries.push_back(std::move(*e));
  }
  for (const StateTensor &st : bundle.state()) {
    // INIT makes it again on resume; checkpoints leave it out.
    if (st.derived()) {
      covered.insert(st.slot());
      derivedState = true;
      continue;
    }
    auto e = entryFor(st.name(), st.slot(), st.dtype(),
                      {st.shape().begin(), st.shape().end()}, "state tensor");
    if (!e)
      return e.status();
    e->dataShards = std::max<int64_t>(1, int64_t(st.data_shards()));
    e->remadeByInit = st.remade_by_init();
    stateEntries.push_back(std::move(*e));
  }
  // Persistent slots outside the tables (weight caches the optimizer
  // step writes, FP8 scales it keeps) are state too: resuming without
  // them would not be bit-exact.
  for (int i = 0; i < plan.slots_size(); ++i) {
    const Slot &s = plan.slots(i);
    bool persistent = s.kind() == OPTIMIZER_STATE || s.kind() == FP8_STATE ||
                      s.kind() == WEIGHT_CACHE || s.kind() == PARAMETER;
    if (!persistent || !s.program().empty() || covered.count(uint32_t(i)))
      continue;
    auto e = entryFor(s.name(), uint32_t(i), s.dtype(),
                      {s.shape().begin(), s.shape().end()}, "slot");
    if (!e)
      return e.status();
    stateEntries.push_back(std::move(*e));
  }
  return Status::ok();
}

Status Trainer::Impl::stage(const ProgramIO &io, HostBuffer &buffer,
                            const data::PackedBatch &batch, const char *what) {
  auto *base = static_cast<uint8_t *>(buffer.data());
  const int64_t vocab = schedule.vocab_size();
  for (size_t i = 0; i < batch.inputs.size(); ++i)
    if (batch.inputs[i] < 0 || batch.inputs[i] >= vocab ||
        batch.targets[i] >= vocab)
      return Status::error(
          std::string(what) + " batch holds token id " +
          std::to_string(batch.inputs[i] < 0 || batch.inputs[i] >= vocab
                             ? batch.inputs[i]
                             : batch.targets[i]) +
          " at position " + std::to_string(i) +
          ", outside the model's vocabulary of " + std::to_string(vocab) +
          ": the data was made with another tokenizer");
  for (const Binding &b : io.inputs) {
    uint8_t *dst = base + b.stageOffset;
    switch (b.feed) {
    case Feed::Tokens:
      std::memcpy(dst, batch.inputs.data(), b.bytes);
      break;
    case Feed::Labels:
      std::memcpy(dst, batch.targets.data(), b.bytes);
      break;
    case Feed::Positions:
      std::memcpy(dst, batch.positionIds.data(), b.bytes);
      break;
    case Feed::LossMask:
      std::memcpy(dst, batch.lossMask.data(), b.bytes);
      break;
    case Feed::CuSeqlens: {
      auto padded = data::padCuSeqlens(batch.cuSeqlens, b.bytes / 4);
      if (!padded)
        return Status::error(std::string(what) + " " +
                             padded.status().message());
      std::memcpy(dst, padded->data(), b.bytes);
      break;
    }
    case Feed::Lr:
    case Feed::Step:
      break;
    }
  }
  return Status::ok();
}

Status Trainer::Impl::enqueueInputs(const ProgramIO &io, HostBuffer &buffer) {
  auto *base = static_cast<uint8_t *>(buffer.data());
  for (const Binding &b : io.inputs)
    OCTET_RETURN_IF_ERROR(
        backend.writeSlot(b.slot, base + b.stageOffset, b.bytes));
  return Status::ok();
}

// The OPTIMIZER_STEP inputs of `step`: its learning rate and number.
Status Trainer::Impl::enqueueOptimizerInputs(int64_t step) {
  if (optimizer.inputs.empty())
    return Status::ok();
  auto *base = static_cast<uint8_t *>(optimizerStage->data());
  for (const Binding &b : optimizer.inputs) {
    if (b.feed == Feed::Lr) {
      float lr = float(scheduledLearningRate(schedule, step, steps));
      std::memcpy(base + b.stageOffset, &lr, 4);
    } else {
      int32_t s = int32_t(step);
      std::memcpy(base + b.stageOffset, &s, 4);
    }
  }
  return enqueueInputs(optimizer, *optimizerStage);
}

// Every rank reads the whole global batch and stages its own share.
Status Trainer::Impl::prepareStep(int parity) {
  for (int64_t g = 0; g < accum * dpSize; ++g) {
    data::PackedBatch batch;
    OCTET_RETURN_IF_ERROR(data.next(batch));
    if (g / accum != dpRank)
      continue;
    OCTET_RETURN_IF_ERROR(
        stage(train, *stages[parity][size_t(g % accum)], batch, "training"));
  }
  stagedPosition[parity] = data.position();
  return Status::ok();
}

uint64_t Trainer::Impl::usedNow() {
  uint64_t used = backend.memory().used;
  peakUsed = std::max(peakUsed, used);
  return used;
}

Status Trainer::Impl::runStep(int64_t step, int parity, bool prefetch,
                              StepRecord &rec) {
  auto t0 = std::chrono::steady_clock::now();
  // The last step's timeline is recorded step by step, so it runs no
  // graph.
  bool recorded = options.stepTimeline && step == steps;
  bool graph = options.graph && stepsRunHere > 0 && !recorded;
  if (recorded)
    OCTET_RETURN_IF_ERROR(backend.beginTimeline());
  if (pipe) {
    // The last stage's accumulator holds the sum of its microbatches'
    // losses; the other stages add nothing.
    OCTET_RETURN_IF_ERROR(backend.runPipelineStep(
        *pipe, [&](const PipeWork &w) { return feedPipeline(w, parity); }));
    *scalar(0) = 0;
    if (train.loss >= 0)
      OCTET_RETURN_IF_ERROR(
          backend.readSlot(uint32_t(train.loss), scalar(0), 4));
  }
  for (int64_t m = 0; !pipe && m < accum; ++m) {
    OCTET_RETURN_IF_ERROR(enqueueInputs(train, *stages[parity][size_t(m)]));
    OCTET_RETURN_IF_ERROR(
        backend.run(TRAIN_MICROBATCH, {graph, m + 1 == accum, m == 0}));
    OCTET_RETURN_IF_ERROR(
        backend.readSlot(uint32_t(train.loss), scalar(size_t(m)), 4));
  }
  OCTET_RETURN_IF_ERROR(enqueueOptimizerInputs(step));
  if (backend.hasProgram(OPTIMIZER_STEP))
    OCTET_RETURN_IF_ERROR(backend.run(OPTIMIZER_STEP, {graph}));
  if (optimizer.gradNorm >= 0)
    OCTET_RETURN_IF_ERROR(backend.readSlot(uint32_t(optimizer.gradNorm),
                                           scalar(size_t(accum)), 4));
  if (optimizer.lr >= 0)
    OCTET_RETURN_IF_ERROR(
        backend.readSlot(uint32_t(optimizer.lr), scalar(size_t(accum) + 1), 4));
  // The next step's batches are read and staged while this one runs.
  if (prefetch)
    OCTET_RETURN_IF_ERROR(prepareStep(parity ^ 1));
  OCTET_RETURN_IF_ERROR(backend.synchronize());
  if (recorded)
    OCTET_RETURN_IF_ERROR(backend.endTimeline());
  ++stepsRunHere;
  // The first step runs eagerly and the second captures graphs.
  if (timeline && stepsRunHere > 2) {
    auto timings = backend.pipelineTimings();
    if (!timings)
      return timings.status();
    OCTET_RETURN_IF_ERROR(timeline->add(*pipe, *timings));
  }
  rec.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  rec.step = step;
  std::vector<double> sum = {0};
  for (int64_t m = 0; m < (pipe ? 1 : accum); ++m)
    sum[0] += *scalar(size_t(m));
  // Summed over the ranks before any rank judges it, so that all of them
  // stop at the same step: over the data replicas, then over the stages
  // (only the last one's is not 0).
  if (options.dataParallel)
    OCTET_RETURN_IF_ERROR(options.dataParallel->sum(sum));
  if (options.pipeline)
    OCTET_RETURN_IF_ERROR(options.pipeline->sum(sum));
  if (!std::isfinite(sum[0])) {
    std::string where;
    for (int64_t m = 0; !pipe && m < accum && where.empty(); ++m)
      if (!std::isfinite(*scalar(size_t(m))))
        where = ", microbatch " + std::to_string(dpRank * accum + m) +
                " of the global batch";
    return Status::error(
        "stopped: the loss is " + std::to_string(sum[0]) + " at step " +
        std::to_string(step) + where +
        "; lower the learning rate or check the data (the last "
        "checkpoint, if any, is from before this step)");
  }
  rec.loss = float(sum[0] / double(accum * dpSize));
  rec.gradNorm = optimizer.gradNorm >= 0 ? *scalar(size_t(accum)) : NAN;
  rec.lr = optimizer.lr >= 0
               ? *scalar(size_t(accum) + 1)
               : float(scheduledLearningRate(schedule, step, steps));
  if (optimizer.gradNorm >= 0 && !std::isfinite(rec.gradNorm))
    return Status::error("stopped: the gradient norm is " +
                         std::to_string(rec.gradNorm) + " at step " +
                         std::to_string(step) +
                         "; lower the learning rate or check the data");
  rec.deviceBytesUsed = usedNow();
  return Status::ok();
}

Status Trainer::Impl::report(const StepRecord &rec) {
  metrics::StepMetrics m;
  m.step = rec.step;
  m.steps = steps;
  m.loss = rec.loss;
  m.gradNorm = rec.gradNorm;
  m.lr = rec.lr;
  m.seconds = rec.seconds;
  m.tokens = rows * seq * accum * dpSize;
  m.gpus = dpSize * pipeSize;
  m.flopsPerToken = schedule.flops_per_token();
  m.deviceBytesUsed = rec.deviceBytesUsed;
  bool log =
      rec.step % logInterval == 0 || rec.step == steps || stepsRunHere == 1;
  if (log)
    print(metrics::formatStepLine(m, peak) +
          (stepsRunHere == 1 ? "  (eager, before graph capture)" : ""));
  if (events) {
    std::vector<std::pair<std::string, double>> values = {
        {"loss", rec.loss},
        {"grad_norm", rec.gradNorm},
        {"lr", rec.lr},
        {"tokens_per_s", m.tokensPerSecond()},
        {"model_tflops", m.modelTflops()}};
    if (peak) {
      values.push_back({"mfu", m.modelTflops() / peak->bf16Tflops});
      values.push_back({"mfu_fp8", m.modelTflops() / peak->fp8Tflops});
    }
    if (rec.deviceBytesUsed)
      values.push_back({"memory_gib", double(rec.deviceBytesUsed) /
                                          double(uint64_t(1) << 30)});
    OCTET_RETURN_IF_ERROR(events->scalars(rec.step, values));
    OCTET_RETURN_IF_ERROR(events->flush());
  }
  return Status::ok();
}

Status Trainer::Impl::zeroGradients() {
  const MemoryPlan &plan = bundle.plan();
  for (int i = 0; i < plan.slots_size(); ++i)
    if (plan.slots(i).kind() == GRADIENT && plan.slots(i).program().empty() &&
        holdsSlot(uint32_t(i)))
      OCTET_RETURN_IF_ERROR(backend.zeroSlot(uint32_t(i)));
  return backend.synchronize();
}

// Every state tensor, and every parameter when `parameters`, from its
// Init: computed on the host as the reference interpreter computes it, a
// tensor's ranges in parallel (a large model's normal draws take minutes on
// one core), zeros by the device.
Status Trainer::Impl::writeInitialValues(bool parameters) {
  struct Job {
    const Init *init;
    bundle::DType dtype;
    uint64_t elements;
    uint32_t slot;
    std::string what;
    // A sharded master draws the whole parameter and keeps its part, so
    // every layout starts from the same values.
    int64_t parts = 1;
  };
  std::vector<Job> jobs;
  auto elementsOf = [](const auto &shape) {
    uint64_t n = 1;
    for (int64_t d : shape)
      n *= uint64_t(d);
    return n;
  };
  // A pipeline rank initializes the variables its arena holds.
  if (parameters)
    for (const Parameter &p : bundle.parameters())
      if (holdsSlot(p.slot()))
        jobs.push_back({&p.init(), p.dtype(), elementsOf(p.shape()), p.slot(),
                        "parameter '" + p.name() + "'",
                        std::max<int64_t>(1, int64_t(p.data_shards()))});
  for (const StateTensor &st : bundle.state())
    if (holdsSlot(st.slot()))
      jobs.push_back({&st.init(), st.dtype(), elementsOf(st.shape()), st.slot(),
                      "state tensor '" + st.name() + "'"});
  unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  for (const Job &job : jobs) {
    auto width = bundle::initialElementBytes(job.dtype, job.what);
    if (!width)
      return width.status();
    // A sharded master's part of the whole parameter's values.
    uint64_t count = job.elements / uint64_t(job.parts);
    uint64_t first = job.parts > 1 ? count * uint64_t(dpRank) : 0;
    uint64_t slotBytes = bundle.plan().slots(int(job.slot)).bytes();
    if (count * *width != slotBytes)
      return Status::error(job.what + " holds " +
                           std::to_string(count * *width) +
                           " bytes but its slot has " +
                           std::to_string(slotBytes) +
                           ": the bundle is inconsistent");
    if (job.init->kind() == Init::ZEROS) {
      OCTET_RETURN_IF_ERROR(backend.zeroSlot(job.slot));
      continue;
    }
    auto bytes = bundle::initialPart(*job.init, job.dtype, first, count,
                                     job.what, workers);
    if (!bytes)
      return bytes.status();
    OCTET_RETURN_IF_ERROR(backend.writeSlot(job.slot, bytes->data(), slotBytes));
  }
  OCTET_RETURN_IF_ERROR(backend.synchronize());
  return Status::ok();
}

Trainer::Trainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Trainer::~Trainer() = default;

StatusOr<std::unique_ptr<Trainer>> Trainer::create(TrainBackend &backend,
                                                   TrainData &data,
                                                   const TrainerOptions &o) {
  auto impl = std::make_unique<Impl>(backend, data, o);
  Impl &t = *impl;
  const Schedule &s = t.schedule;
  if (o.dataParallel) {
    t.dpRank = o.dataParallel->rank();
    t.dpSize = o.dataParallel->size();
  }
  for (const bundle::Group &g : t.bundle.groups())
    if (g.name() == "data" && g.ranks_size() != t.dpSize)
      return Status::error(
          "the bundle was compiled for " + std::to_string(g.ranks_size()) +
          " data-parallel ranks (train.parallel.data) but this rank is one "
          "of " +
          std::to_string(t.dpSize) +
          ": start as many ranks as the bundle's world size (octet launch "
          "--gpus N), or recompile the spec for this number");
  t.rows = s.micro_batch_size();
  t.seq = s.seq_len();
  t.accum = std::max<int64_t>(1, s.grad_accum_steps());
  t.steps = o.steps >= 0 ? o.steps : s.steps();
  if (t.rows <= 0 || t.seq <= 0)
    return Status::error("the bundle's schedule has micro_batch_size " +
                         std::to_string(t.rows) + " and seq_len " +
                         std::to_string(t.seq) +
                         ": recompile the spec with this release");
  if (t.steps <= 0)
    return Status::error("nothing to train: the bundle's schedule has " +
                         std::to_string(s.steps()) + " steps; pass --steps N");
  t.logInterval = std::max<int64_t>(
      1, o.logInterval > 0 ? o.logInterval
                           : (s.log_interval() > 0 ? s.log_interval() : 1));
  t.evalInterval = o.evalInterval >= 0 ? o.evalInterval : s.eval_interval();
  t.checkpointInterval = o.checkpointInterval >= 0 ? o.checkpointInterval
                                                   : s.checkpoint_interval();
  if (t.bundle.has_pipeline() && o.stepTimeline)
    return Status::error("--timeline records the programs of a "
                         "data-parallel step; a pipeline bundle's step is "
                         "its instruction list: time it with "
                         "--pipeline-timeline");
  if (t.bundle.has_pipeline())
    OCTET_RETURN_IF_ERROR(t.setUpPipeline());
  else if (o.pipelineTimeline)
    return Status::error("--pipeline-timeline times a pipeline bundle's "
                         "instructions, and this bundle has no pipeline "
                         "(train.parallel.pipeline is 1): leave it out");
  else if (!backend.hasProgram(TRAIN_MICROBATCH))
    return Status::error("the bundle has no TRAIN_MICROBATCH program: it "
                         "cannot train; recompile it from a training spec");
  // A run that ends before its first evaluation sets none up, so that a
  // bundle evaluation cannot run on (a delayed-scaling pipeline's forwards
  // write scale state) still trains.
  if (t.pipe && t.evalInterval > 0 && t.evalInterval <= t.steps &&
      t.data.hasEval()) {
    OCTET_RETURN_IF_ERROR(t.setUpPipelineEvaluation());
    for (int64_t m = 0; m < t.accum; ++m) {
      auto b = backend.hostBuffer(std::max<uint64_t>(64, t.train.stageBytes));
      if (!b)
        return b.status();
      t.evalPipeStages.push_back(std::move(*b));
    }
  }
  if (auto batches = t.evalBatches(); t.evaluates() && !batches)
    return batches.status();
  if (o.resume && o.checkpointDir.empty())
    return Status::error("--resume needs --checkpoint-dir DIR (the "
                         "directory the earlier run saved into)");
  // A sharded state tensor's parts are the data group's: checkpoints join
  // them, resumes cut them, by the rank's index in the group.
  for (const StateTensor &st : t.bundle.state())
    if (st.data_shards() > 1 && int64_t(st.data_shards()) != t.dpSize)
      return Status::error(
          "state tensor '" + st.name() + "' is sharded over " +
          std::to_string(st.data_shards()) +
          " data-parallel ranks (train.parallel.shard_optimizer), but this "
          "job has " +
          std::to_string(t.dpSize) +
          ": start as many ranks as the bundle was compiled for");
  OCTET_RETURN_IF_ERROR(t.bind(TRAIN_MICROBATCH, t.train, true));
  OCTET_RETURN_IF_ERROR(t.bind(OPTIMIZER_STEP, t.optimizer, false));
  OCTET_RETURN_IF_ERROR(t.bind(EVAL, t.eval, true));
  if (t.train.loss < 0 && !t.pipe)
    return Status::error("the TRAIN_MICROBATCH program has no output "
                         "'loss': recompile the bundle with this release");
  if (backend.hasProgram(EVAL) && t.eval.loss < 0)
    return Status::error("the EVAL program has no output 'loss': recompile "
                         "the bundle with this release");
  if (backend.hasProgram(OPTIMIZER_STEP) && t.optimizer.gradNorm < 0)
    return Status::error("the OPTIMIZER_STEP program has no output "
                         "'grad_norm': recompile the bundle with this "
                         "release");
  OCTET_RETURN_IF_ERROR(t.planEntries());
  // Told now rather than after the training.
  if (!o.saveHf.empty())
    if (auto config = bundle::hfConfigForExport(t.bundle, o.initWeights);
        !config)
      return config.status();
  for (int parity = 0; parity < 2; ++parity)
    for (int64_t m = 0; m < t.accum; ++m) {
      auto b = backend.hostBuffer(std::max<uint64_t>(64, t.train.stageBytes));
      if (!b)
        return b.status();
      t.stages[parity].push_back(std::move(*b));
    }
  auto evalStage =
      backend.hostBuffer(std::max<uint64_t>(64, t.eval.stageBytes));
  auto optStage =
      backend.hostBuffer(std::max<uint64_t>(64, t.optimizer.stageBytes));
  auto scalars = backend.hostBuffer(uint64_t(t.accum + 2) * 4);
  if (!evalStage)
    return evalStage.status();
  if (!optStage)
    return optStage.status();
  if (!scalars)
    return scalars.status();
  t.evalStage = std::move(*evalStage);
  t.optimizerStage = std::move(*optStage);
  t.scalars = std::move(*scalars);
  t.peak = metrics::gpuPeak(backend.deviceName());
  if (!o.tensorboardDir.empty()) {
    auto w = metrics::EventWriter::open(o.tensorboardDir);
    if (!w)
      return w.status();
    t.events = std::move(*w);
  }
  return std::unique_ptr<Trainer>(new Trainer(std::move(impl)));
}

Status Trainer::start(TrainResult &result) {
  Impl &t = *impl_;
  for (const std::string &n : t.notes)
    t.print("note: " + n);
  DeviceMemory mem = t.backend.memory();
  t.print("memory: plan arenas " + humanBytes(mem.arenas) +
          ", runtime fixed costs " + humanBytes(mem.fixedCosts) +
          " (context, cuBLASLt, modules), device in use " +
          humanBytes(mem.used) + " of " + humanBytes(mem.total));
  if (!t.peak)
    t.print("note: no peak TFLOP/s known for '" + t.backend.deviceName() +
            "': the step line leaves MFU out");
  t.print("data: " + t.data.describe());
  // A pipeline bundle evaluates through its chunks' forwards.
  bool evalProgram = t.pipe || t.backend.hasProgram(EVAL);
  if (t.evalInterval > t.steps)
    t.print("note: eval_interval is " + std::to_string(t.evalInterval) +
            " and the run ends at step " + std::to_string(t.steps) +
            ": no evaluation");
  else if (t.evalInterval > 0 && !t.evaluates())
    t.print(std::string("note: eval_interval is ") +
            std::to_string(t.evalInterval) + " but " +
            (evalProgram ? "the data has no held-out split "
                           "(--eval-data PREFIX)"
                         : "the bundle has no EVAL program") +
            ": no evaluation");
  // Fresh start (bundle.proto, ProgramKind INIT): the host writes every
  // parameter and state tensor from its Init (parameters from
  // --init-from when given), then INIT derives what the compiler
  // computes from them. A resumed run restores every persistent slot from
  // the checkpoint instead and skips INIT. Either way the gradient
  // accumulators start at zero.
  result.startStep = 0;
  OCTET_RETURN_IF_ERROR(t.zeroGradients());
  std::string latest;
  if (t.options.resume) {
    latest = ckpt::latestTrainCheckpoint(t.options.checkpointDir);
    // The same command line starts a job and restarts it after a failure.
    if (latest.empty())
      std::fprintf(stderr,
                   "note: --resume: %s holds no checkpoint yet; starting "
                   "from step 0\n",
                   t.options.checkpointDir.c_str());
  }
  if (!latest.empty()) {
    OCTET_RETURN_IF_ERROR(loadCheckpoint(latest, result.startStep));
    // Derived state is not in checkpoints: INIT makes it from the restored
    // parameters (what it makes from them, the step made too); so are FP8
    // weight copies a checkpoint was saved without.
    if ((t.derivedState || t.remakeByInit) && t.backend.hasProgram(INIT)) {
      OCTET_RETURN_IF_ERROR(t.backend.run(INIT, {}));
      OCTET_RETURN_IF_ERROR(t.backend.synchronize());
    }
    t.print("resumed from " + latest + " at step " +
            std::to_string(result.startStep));
  } else {
    OCTET_RETURN_IF_ERROR(t.writeInitialValues(t.options.initWeights.empty()));
    if (!t.options.initWeights.empty())
      OCTET_RETURN_IF_ERROR(t.loadWeights(t.options.initWeights));
    if (t.backend.hasProgram(INIT))
      OCTET_RETURN_IF_ERROR(t.backend.run(INIT, {}));
    OCTET_RETURN_IF_ERROR(t.backend.synchronize());
  }
  t.checkpointPosition = t.data.position();
  t.usedNow();
  t.heartbeat(result.startStep);
  return Status::ok();
}

Status Trainer::evaluate(int64_t step, TrainResult &result) {
  Impl &t = *impl_;
  EvalRecord rec;
  rec.step = step;
  rec.bytesBefore = t.usedNow();
  OCTET_RETURN_IF_ERROR(t.data.startEval());
  auto counted = t.evalBatches();
  if (!counted)
    return counted.status();
  const int64_t batches = *counted;
  std::vector<double> sum = {0};
  // A pipeline takes the held-out batches as training takes a global
  // batch: each step of the forward-only list runs accum microbatches on
  // each replica (replica d the d-th accum of every accum × dpSize); the
  // last stage's accumulator holds their losses' sum, the other stages'
  // add nothing.
  const int64_t perStep = t.accum * t.dpSize;
  for (int64_t i = 0; t.pipe && i < batches; i += perStep) {
    for (int64_t g = 0; g < perStep; ++g) {
      data::PackedBatch batch;
      OCTET_RETURN_IF_ERROR(t.data.nextEval(batch));
      if (g / t.accum != t.dpRank)
        continue;
      OCTET_RETURN_IF_ERROR(t.stage(
          t.train, *t.evalPipeStages[size_t(g % t.accum)], batch, "held-out"));
    }
    OCTET_RETURN_IF_ERROR(
        t.backend.runPipelineStep(*t.evalPipe, [&](const PipeWork &w) {
          return t.feedPipelineFrom(t.evalPipeFeeds, t.evalPipeStages, w);
        }));
    *t.scalar(0) = 0;
    if (t.evalPipe->lossSumSlot >= 0)
      OCTET_RETURN_IF_ERROR(t.backend.readSlot(
          uint32_t(t.evalPipe->lossSumSlot), t.scalar(0), 4));
    OCTET_RETURN_IF_ERROR(t.backend.synchronize());
    sum[0] += *t.scalar(0);
  }
  // The ranks share the held-out batches (batch i is rank i mod n's).
  for (int64_t i = 0; !t.pipe && i < batches; ++i) {
    data::PackedBatch batch;
    OCTET_RETURN_IF_ERROR(t.data.nextEval(batch));
    if (i % t.dpSize != t.dpRank)
      continue;
    OCTET_RETURN_IF_ERROR(t.stage(t.eval, *t.evalStage, batch, "held-out"));
    OCTET_RETURN_IF_ERROR(t.enqueueInputs(t.eval, *t.evalStage));
    OCTET_RETURN_IF_ERROR(t.backend.run(EVAL, {}));
    OCTET_RETURN_IF_ERROR(
        t.backend.readSlot(uint32_t(t.eval.loss), t.scalar(0), 4));
    OCTET_RETURN_IF_ERROR(t.backend.synchronize());
    sum[0] += *t.scalar(0);
  }
  if (t.options.dataParallel)
    OCTET_RETURN_IF_ERROR(t.options.dataParallel->sum(sum));
  if (t.pipe && t.options.pipeline)
    OCTET_RETURN_IF_ERROR(t.options.pipeline->sum(sum));
  t.heartbeat(step);
  rec.batches = batches;
  rec.loss = sum[0] / double(batches);
  rec.bytesAfter = t.usedNow();
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "eval at step %lld: loss %.4f over %lld held-out batches  "
                "memory %s (before %s)",
                (long long)step, rec.loss, (long long)batches,
                humanBytes(rec.bytesAfter).c_str(),
                humanBytes(rec.bytesBefore).c_str());
  t.print(buf);
  if (t.events) {
    OCTET_RETURN_IF_ERROR(t.events->scalars(step, {{"eval_loss", rec.loss}}));
    OCTET_RETURN_IF_ERROR(t.events->flush());
  }
  result.evals.push_back(rec);
  return Status::ok();
}

Status Trainer::writeInputs(ProgramKind kind, int64_t step) {
  Impl &t = *impl_;
  if (t.pipe)
    return Status::error("a pipeline bundle's programs take their inputs in "
                         "the stash entries of its instruction list; "
                         "writeInputs fills those of TRAIN_MICROBATCH and "
                         "OPTIMIZER_STEP");
  if (kind == TRAIN_MICROBATCH) {
    data::PackedBatch batch;
    OCTET_RETURN_IF_ERROR(t.data.next(batch));
    HostBuffer &stage = *t.stages[0][0];
    OCTET_RETURN_IF_ERROR(t.stage(t.train, stage, batch, "training"));
    OCTET_RETURN_IF_ERROR(t.enqueueInputs(t.train, stage));
  } else if (kind == OPTIMIZER_STEP) {
    OCTET_RETURN_IF_ERROR(t.enqueueOptimizerInputs(step));
  } else {
    return Status::error("writeInputs fills the inputs of "
                         "TRAIN_MICROBATCH and OPTIMIZER_STEP, not " +
                         ProgramKind_Name(kind));
  }
  // The staging buffer is written again by the next call.
  return t.backend.synchronize();
}

StatusOr<TrainResult> Trainer::run() {
  Impl &t = *impl_;
  TrainResult result;
  OCTET_RETURN_IF_ERROR(start(result));
  if (result.startStep >= t.steps) {
    t.print("nothing to do: the checkpoint is at step " +
            std::to_string(result.startStep) + " of " +
            std::to_string(t.steps));
    return result;
  }
  int parity = 0;
  OCTET_RETURN_IF_ERROR(t.prepareStep(parity));
  for (int64_t step = result.startStep + 1; step <= t.steps; ++step) {
    StepRecord rec;
    OCTET_RETURN_IF_ERROR(t.runStep(step, parity, step < t.steps, rec));
    // The checkpoint's data position is the one after this step's batches.
    t.checkpointPosition = t.stagedPosition[parity];
    t.checkpointLoss = rec.loss;
    OCTET_RETURN_IF_ERROR(t.report(rec));
    t.heartbeat(step);
    result.steps.push_back(rec);
    if (t.evaluates() && step % t.evalInterval == 0)
      OCTET_RETURN_IF_ERROR(evaluate(step, result));
    bool save =
        !t.options.checkpointDir.empty() &&
        ((t.checkpointInterval > 0 && step % t.checkpointInterval == 0) ||
         step == t.steps);
    if (save) {
      auto path = saveCheckpoint(step);
      if (!path)
        return path.status();
      if (!path->empty())
        result.checkpoints.push_back(*path);
    }
    parity ^= 1;
  }
  result.peakDeviceBytes = t.peakUsed;
  if (t.timeline)
    OCTET_RETURN_IF_ERROR(t.reportTimeline());
  if (!t.options.saveHf.empty())
    OCTET_RETURN_IF_ERROR(t.saveHf(t.options.saveHf));
  return result;
}

} // namespace octet
