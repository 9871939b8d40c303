// The training loop over a pipeline bundle, on the CPU: ToyBackend's model
// cut into two stages (the first looks the tokens' weights up, the last
// adds the bias and takes the loss), laid out by addPipelineRanks with the
// microbatch inputs as stash slots, each world rank a Trainer in a thread
// over a backend in host memory that runs its instruction list through
// the runtime's executor, transfers meeting in host queues. Against the
// one-rank toy: the printed loss, the grad norm, every parameter and
// every checkpointed tensor, and checkpoints that move between the
// layouts.

#include "bundle/Bundle.h"
#include "bundle/PipelineBundle.h"
#include "runtime/checkpoint/TrainState.h"
#include "runtime/exec/PipelineExecutor.h"
#include "runtime/exec/Trainer.h"
#include "support/Numerics.h"
#include "tests/unit/pipeline/HostWire.h"
#include "tests/unit/trainer/HostRanks.h"
#include "tests/unit/trainer/ToyBackend.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <tuple>

namespace octet::test {
namespace {

using namespace octet::bundle;

int slotIndex(const Bundle &b, const std::string &name) {
  for (int i = 0; i < b.plan().slots_size(); ++i)
    if (b.plan().slots(i).name() == name)
      return i;
  ADD_FAILURE() << "no slot " << name;
  return 0;
}

// The toy bundle of `shape` (shape.accum microbatches a replica) as
// pipeline 2 × `data`, 1F1B; with `shardW`, ZeRO-1: the first stage's
// moments are sharded over its data group (the last stage's bias, one
// element, stays whole). Each chunk program's steps are markers: they
// address the slots the C++ below reads, with the stash stride of the
// stash-strided ones, which is what the trainer learns the inputs' entries
// and each rank's variables from. With `forwardWritesState`, each rank's
// forward also writes FP8 state (as delayed scaling's forwards update
// their amax histories) and the rank has a CHUNK_EVAL_FORWARD, the forward
// without that write, for evaluation to run.
Bundle makePipelineToyBundle(const ToyShape &shape, int data,
                             bool shardW = false,
                             bool forwardWritesState = false) {
  Bundle b = makeToyBundle(shape);
  if (shardW)
    for (StateTensor &st : *b.mutable_state())
      if (st.name() == "adam_m.w" || st.name() == "adam_v.w") {
        st.set_data_shards(uint32_t(data));
        st.set_shape(0, st.shape(0) / data);
        b.mutable_plan()->mutable_slots(int(st.slot()))->set_bytes(
            uint64_t(st.shape(0)) * 4);
      }
  b.clear_ranks();
  auto schedule = makePipelineSchedule(PipelineScheduleKind::OneFOneB, 2, 1,
                                       int(shape.accum));
  EXPECT_TRUE(schedule.isOk()) << schedule.status().message();
  int entries = 0;
  for (int r = 0; r < 2; ++r)
    entries = std::max(entries, assignStashEntries(*schedule, r).entries);
  const int64_t n = shape.rows * shape.seq;
  const uint64_t stride = (uint64_t(n) * 4 + 255) / 256 * 256;
  MemoryPlan *plan = b.mutable_plan();
  uint64_t offset = plan->arenas(0).bytes();
  auto addSlot = [&](const std::string &name, SlotKind kind,
                     bundle::DType dtype, bool perMicrobatch) {
    Slot *s = plan->add_slots();
    s->set_name(name);
    s->set_kind(kind);
    s->set_dtype(dtype);
    if (perMicrobatch)
      s->add_shape(n);
    s->set_bytes(perMicrobatch ? stride * uint64_t(entries) : 4);
    s->set_offset(offset);
    offset += (s->bytes() + 255) / 256 * 256;
    return uint32_t(plan->slots_size() - 1);
  };
  uint32_t tokens = addSlot("tokens.stash", STASH, I32, true);
  uint32_t labels = addSlot("labels.stash", STASH, I32, true);
  uint32_t mask = addSlot("loss_mask.stash", STASH, F32, true);
  uint32_t act = addSlot("act", STASH, F32, true);
  uint32_t gradAct = addSlot("grad.act", STASH, F32, true);
  uint32_t lossSum = addSlot("loss_sum", IO, F32, false);
  uint32_t state = forwardWritesState
                       ? addSlot("fp8.amax_history", FP8_STATE, F32, false)
                       : 0;
  plan->mutable_arenas(0)->set_bytes(offset);
  plan->set_peak_live_bytes(offset);

  auto stashRef = [&](uint32_t slot) {
    SlotRef r;
    r.set_slot(slot);
    r.set_stash_stride(stride);
    return r;
  };
  auto ref = [&](const std::string &name) {
    SlotRef r;
    r.set_slot(uint32_t(slotIndex(b, name)));
    return r;
  };
  EXPECT_TRUE(
      addPipelineRanks(b, *schedule, data, [&](const TransferSite &site) {
        return std::vector<SlotRef>{
            stashRef(site.transfer->gradient() ? gradAct : act)};
      }).isOk());
  b.mutable_pipeline()->set_loss_sum_slot(lossSum);
  auto marker = [](Program &p, const std::vector<SlotRef> &refs) {
    for (const SlotRef &r : refs) {
      Copy *c = p.add_steps()->mutable_copy();
      *c->mutable_dst() = r;
      *c->mutable_src() = r;
    }
  };
  auto named = [](google::protobuf::RepeatedPtrField<NamedSlot> *list,
                  const std::string &name, uint32_t slot) {
    NamedSlot *x = list->Add();
    x->set_name(name);
    x->set_slot(slot);
  };
  for (RankProgram &rank : *b.mutable_ranks()) {
    bool first = rank.rank() / uint32_t(data) == 0;
    auto program = [&](ProgramKind kind, const std::string &name) {
      Program *p = rank.add_programs();
      p->set_kind(kind);
      p->set_name(name);
      return p;
    };
    Program *init = program(INIT, "init");
    Program *forward = program(CHUNK_FORWARD, "stage_forward");
    Program *backward = program(CHUNK_BACKWARD, "stage_backward");
    Program *opt = program(OPTIMIZER_STEP, "optimizer_step");
    named(opt->mutable_outputs(), "grad_norm",
          uint32_t(slotIndex(b, "grad_norm")));
    named(opt->mutable_outputs(), "lr", uint32_t(slotIndex(b, "lr")));
    marker(*opt, {ref("step")});
    if (first) {
      named(forward->mutable_inputs(), "tokens", tokens);
      marker(*init, {ref("w"), ref("cache.w")});
      marker(*forward, {stashRef(tokens), stashRef(act), ref("cache.w")});
      marker(*backward, {stashRef(tokens), stashRef(gradAct), ref("grad.w")});
      marker(*opt, {ref("w"), ref("grad.w"), ref("adam_m.w"), ref("adam_v.w"),
                    ref("cache.w")});
    } else {
      named(forward->mutable_inputs(), "labels", labels);
      named(forward->mutable_inputs(), "loss_mask", mask);
      marker(*forward, {stashRef(labels), stashRef(mask), stashRef(act),
                        ref("b"), ref("loss_sum")});
      marker(*backward, {stashRef(labels), stashRef(mask), stashRef(act),
                         stashRef(gradAct), ref("b"), ref("grad.b")});
      marker(*opt, {ref("b"), ref("grad.b"), ref("adam_m.b"), ref("adam_v.b")});
    }
    if (forwardWritesState) {
      // The evaluation forward: the forward's inputs and markers, reading
      // the state the forward writes (a kernel's argument).
      Program *eval = program(CHUNK_EVAL_FORWARD, "stage_eval");
      *eval->mutable_inputs() = forward->inputs();
      *eval->mutable_steps() = forward->steps();
      eval->add_steps()->mutable_launch()->add_args()->mutable_slot()->set_slot(
          state);
      Step *update = forward->add_steps();
      update->set_label("amax history update");
      update->mutable_memset()->mutable_dst()->set_slot(state);
      update->mutable_memset()->set_bytes(4);
    }
  }
  // Each stage's parameter and moments are its rank's, as
  // octet-split-optimizer gives them; the step counter every rank's.
  for (Parameter &p : *b.mutable_parameters())
    p.set_pipeline_rank(p.name() == "w" ? 0 : 1);
  for (StateTensor &st : *b.mutable_state())
    if (!st.owner().empty())
      st.set_pipeline_rank(st.owner() == "w" ? 0 : 1);
  addRankArenas(b);
  Status valid = validatePipeline(b);
  EXPECT_TRUE(valid.isOk()) << valid.message();
  b.set_content_hash(computeContentHash(b));
  return b;
}

// One world rank of the pipeline toy: the plan's arena in host memory, its
// stage of the model in C++ on stash entries. `norms` joins the stages'
// squared gradient norms (the compiled all-gather over the pipeline
// group); `grads`, with data > 1, sums the stage's gradients over its data
// group (the compiled all-reduce).
class PipelineToyBackend : public TrainBackend, private PipelineDevice {
public:
  PipelineToyBackend(Bundle bundle, int world, HostWire &wire, HostRank &norms,
                     HostRank *grads, bool shardW = false)
      : b_(std::move(bundle)), world_(world), wire_(wire), norms_(norms),
        grads_(grads), shardW_(shardW) {
    // The rank allocates its own arena only; a slot outside it is another
    // rank's memory, which any access below refuses.
    auto memory = pipelineRankMemory(b_, world);
    EXPECT_TRUE(memory.isOk()) << memory.status().message();
    if (memory)
      memory_ = std::move(*memory);
    arena_.assign(memory_.bytes, 0xA5);
    auto plan = planPipelineRank(b_, world);
    EXPECT_TRUE(plan.isOk()) << plan.status().message();
    plan_ = std::move(*plan);
    first_ = plan_.pipelineRank == 0;
  }

  const Bundle &bundle() const override { return b_; }
  const Program *program(ProgramKind kind) const override {
    for (const Program &p : b_.ranks(world_).programs())
      if (p.kind() == kind)
        return &p;
    return nullptr;
  }
  Status run(ProgramKind kind, RunMode) override {
    if (kind == INIT) {
      if (first_)
        refreshCache();
      return Status::ok();
    }
    if (kind == OPTIMIZER_STEP)
      return optimizerStep();
    return Status::error("the pipeline toy runs no program " +
                         std::string(programKindName(kind)) + " alone");
  }
  Status writeSlot(uint32_t slot, const void *data, uint64_t bytes) override {
    return writeSlotAt(slot, 0, data, bytes);
  }
  Status writeSlotAt(uint32_t slot, uint64_t offset, const void *data,
                     uint64_t bytes) override {
    if (offset + bytes > b_.plan().slots(int(slot)).bytes())
      return Status::error("write past the slot");
    OCTET_RETURN_IF_ERROR(held(slot));
    std::memcpy(at(slot) + offset, data, bytes);
    return Status::ok();
  }
  Status readSlot(uint32_t slot, void *data, uint64_t bytes) override {
    OCTET_RETURN_IF_ERROR(held(slot));
    std::memcpy(data, at(slot), bytes);
    return Status::ok();
  }
  Status zeroSlot(uint32_t slot) override {
    OCTET_RETURN_IF_ERROR(held(slot));
    std::memset(at(slot), 0, b_.plan().slots(int(slot)).bytes());
    return Status::ok();
  }
  uint64_t arenaBytes() const { return memory_.bytes; }
  Status synchronize() override { return Status::ok(); }
  StatusOr<std::unique_ptr<HostBuffer>> hostBuffer(uint64_t bytes) override {
    return std::unique_ptr<HostBuffer>(new HostVectorBuffer(bytes));
  }
  DeviceMemory memory() const override { return {}; }
  std::string deviceName() const override { return "NVIDIA H100 80GB HBM3"; }
  const PipelineRankPlan *pipelinePlan() const override { return &plan_; }
  Status runPipelineStep(
      const PipelineRankPlan &plan,
      const std::function<Status(const PipeWork &)> &feed) override {
    feed_ = &feed;
    Status st = octet::runPipelineStep(plan, *this);
    feed_ = nullptr;
    return st;
  }

  std::vector<uint8_t> slotBytes(const std::string &name) {
    const Slot &s = b_.plan().slots(slotIndex(b_, name));
    return {at(uint32_t(slotIndex(b_, name))),
            at(uint32_t(slotIndex(b_, name))) + s.bytes()};
  }

private:
  Status held(uint32_t slot) const {
    if (memory_.holds(slot))
      return Status::ok();
    return Status::error("world rank " + std::to_string(world_) +
                         " addressed slot '" + b_.plan().slots(int(slot)).name() +
                         "', which its arena does not hold");
  }
  uint8_t *at(uint32_t slot) {
    EXPECT_TRUE(memory_.holds(slot))
        << "world rank " << world_ << " uses slot '"
        << b_.plan().slots(int(slot)).name() << "', not in its arena";
    return arena_.data() +
           (memory_.holds(slot) ? uint64_t(memory_.offsets[slot]) : 0);
  }
  template <typename T> T *get(const std::string &name) {
    return reinterpret_cast<T *>(at(uint32_t(slotIndex(b_, name))));
  }
  int64_t tokens() const {
    return b_.schedule().micro_batch_size() * b_.schedule().seq_len();
  }
  void refreshCache() {
    for (int64_t i = 0; i < b_.schedule().vocab_size(); ++i)
      get<uint16_t>("cache.w")[i] = numerics::encodeBF16(get<float>("w")[i]);
  }

  // The stash slots hold as many entries as the most any rank needs,
  // which every rank's plan addresses with one stride.
  template <typename T> T *entry(const std::string &name, int e) {
    const Slot &s = b_.plan().slots(slotIndex(b_, name));
    uint64_t stride = (uint64_t(tokens()) * 4 + 255) / 256 * 256;
    EXPECT_LE(uint64_t(e + 1) * stride, s.bytes());
    return reinterpret_cast<T *>(at(uint32_t(slotIndex(b_, name))) +
                                 uint64_t(e) * stride);
  }

  Status beginStep(const PipelineRankPlan &plan) override {
    if (plan.lossSumSlot >= 0)
      *get<float>("loss_sum") = 0;
    return Status::ok();
  }
  Status compute(const PipeWork &w) override {
    if (w.program->inputs_size() > 0)
      OCTET_RETURN_IF_ERROR((*feed_)(w));
    const int64_t n = tokens();
    const float vocab = float(b_.schedule().vocab_size());
    int e = w.entry;
    bool forward = w.instruction->kind() == PIPE_FORWARD;
    if (forward)
      ++(w.program->kind() == CHUNK_EVAL_FORWARD ? evalForwards
                                                 : trainingForwards);
    if (first_ && forward) {
      const int32_t *tok = entry<int32_t>("tokens.stash", e);
      float *a = entry<float>("act", e);
      for (int64_t i = 0; i < n; ++i)
        a[i] = numerics::decodeBF16(get<uint16_t>("cache.w")[tok[i]]);
      return Status::ok();
    }
    if (first_) {
      const int32_t *tok = entry<int32_t>("tokens.stash", e);
      const float *g = entry<float>("grad.act", e);
      float *gw = get<float>("grad.w");
      for (int64_t i = 0; i < n; ++i)
        if (g[i] != 0)
          gw[tok[i]] += g[i];
      return Status::ok();
    }
    const int32_t *lab = entry<int32_t>("labels.stash", e);
    const float *mask = entry<float>("loss_mask.stash", e);
    const float *a = entry<float>("act", e);
    float b = *get<float>("b");
    double sum = 0, count = 0;
    for (int64_t i = 0; i < n; ++i)
      count += mask[i];
    float *g = forward ? nullptr : entry<float>("grad.act", e);
    for (int64_t i = 0; i < n; ++i) {
      if (g)
        g[i] = 0;
      if (mask[i] == 0)
        continue;
      float d = a[i] + b - float(lab[i]) / vocab;
      sum += double(d) * d;
      if (g) {
        g[i] = float(2.0 * d / count);
        *get<float>("grad.b") += g[i];
      }
    }
    if (forward)
      *get<float>("loss_sum") += float(sum / std::max(1.0, count));
    return Status::ok();
  }
  Status communicate(const PipeWork &w) override {
    const auto &transfers = w.instruction->transfers();
    const uint64_t bytes = uint64_t(tokens()) * 4;
    // Pipeline rank p of replica d is world rank p·D + d.
    int data = int(b_.world_size() / b_.pipeline().ranks());
    int replica = world_ % data;
    for (int k = 0; k < transfers.size(); ++k) {
      const bundle::PipeTransfer &t = transfers[k];
      int peer = int(t.peer()) * data + replica;
      uint8_t *p = entry<uint8_t>(t.gradient() ? "grad.act" : "act",
                                  w.transferEntries[size_t(k)]);
      if (t.send()) {
        wire_.send(world_, peer, t.gradient(),
                   std::vector<uint8_t>(p, p + bytes));
      } else {
        std::vector<uint8_t> got;
        OCTET_RETURN_IF_ERROR(wire_.recv(peer, world_, t.gradient(), got));
        std::memcpy(p, got.data(), bytes);
      }
    }
    return Status::ok();
  }
  Status endStep(const PipelineRankPlan &) override { return Status::ok(); }

  Status optimizerStep() {
    int32_t t = ++*get<int32_t>("step");
    float lr = float(b_.schedule().lr());
    const char *name = first_ ? "w" : "b";
    int64_t count = first_ ? b_.schedule().vocab_size() : 1;
    float *w = get<float>(name);
    float *g = get<float>(std::string("grad.") + name);
    float *m = get<float>(std::string("adam_m.") + name);
    float *v = get<float>(std::string("adam_v.") + name);
    if (grads_) {
      std::vector<double> sums(g, g + count);
      OCTET_RETURN_IF_ERROR(grads_->sum(sums));
      for (int64_t i = 0; i < count; ++i)
        g[i] = float(sums[size_t(i)]);
    }
    std::vector<double> norm = {0};
    if (shardW_ && first_) {
      // ZeRO-1: this data rank updates its part of w with its moments'
      // part, and the parts are all-gathered (a sum of zero-padded parts,
      // exact); the norm of the parts is summed over the data group too.
      int data = int(b_.world_size() / b_.pipeline().ranks());
      int64_t part = count / data, at = int64_t(world_ % data) * part;
      toyAdamStep(w + at, g + at, m, v, part, t, lr, norm[0]);
      for (int64_t i = 0; i < count; ++i)
        g[i] = 0;
      std::vector<double> whole(size_t(count), 0.0);
      for (int64_t i = 0; i < part; ++i)
        whole[size_t(at + i)] = w[at + i];
      OCTET_RETURN_IF_ERROR(grads_->sum(whole));
      OCTET_RETURN_IF_ERROR(grads_->sum(norm));
      for (int64_t i = 0; i < count; ++i)
        w[i] = float(whole[size_t(i)]);
    } else {
      toyAdamStep(w, g, m, v, count, t, lr, norm[0]);
    }
    OCTET_RETURN_IF_ERROR(norms_.sum(norm));
    *get<float>("grad_norm") = float(std::sqrt(norm[0]));
    *get<float>("lr") = lr;
    if (first_)
      refreshCache();
    return Status::ok();
  }

  Bundle b_;
  int world_;
  HostWire &wire_;
  HostRank &norms_;
  HostRank *grads_;
  bool shardW_ = false;

public:
  // The forwards this rank ran, by program: training's and evaluation's.
  int trainingForwards = 0, evalForwards = 0;

private:
  RankMemory memory_;
  std::vector<uint8_t> arena_;
  PipelineRankPlan plan_;
  bool first_ = true;
  const std::function<Status(const PipeWork &)> *feed_ = nullptr;
};

// A pipeline 2 × `data` job of the toy, each world rank in a thread.
struct PipelineJob {
  std::unique_ptr<HostWire> wire = std::make_unique<HostWire>();
  std::vector<std::unique_ptr<HostRanks>> pipelines, dataGroups, norms;
  std::vector<std::shared_ptr<HostRank>> pipelineRanks, dataRanks, normRanks;
  std::vector<std::unique_ptr<PipelineToyBackend>> backends;
  std::vector<std::unique_ptr<TrainData>> data;
  std::vector<std::unique_ptr<Trainer>> trainers;
  std::vector<std::string> printed;
  std::vector<StatusOr<TrainResult>> results;
};

std::unique_ptr<PipelineJob> runPipeline(const ToyShape &shape, int data,
                                         const TrainerOptions &options,
                                         const std::string &printDir,
                                         bool shardW = false,
                                         bool forwardWritesState = false) {
  auto job = std::make_unique<PipelineJob>();
  Bundle b = makePipelineToyBundle(shape, data, shardW, forwardWritesState);
  for (int d = 0; d < data; ++d) {
    job->pipelines.push_back(std::make_unique<HostRanks>(2));
    job->norms.push_back(std::make_unique<HostRanks>(2));
  }
  for (int p = 0; p < 2; ++p)
    job->dataGroups.push_back(std::make_unique<HostRanks>(data));
  std::vector<std::FILE *> outs;
  for (int world = 0; world < 2 * data; ++world) {
    int p = world / data, d = world % data;
    job->pipelineRanks.push_back(
        std::make_shared<HostRank>(*job->pipelines[size_t(d)], p));
    job->normRanks.push_back(
        std::make_shared<HostRank>(*job->norms[size_t(d)], p));
    job->dataRanks.push_back(
        std::make_shared<HostRank>(*job->dataGroups[size_t(p)], d));
    job->backends.push_back(std::make_unique<PipelineToyBackend>(
        b, world, *job->wire, *job->normRanks.back(),
        data > 1 ? job->dataRanks.back().get() : nullptr, shardW));
    auto batches = openToyData(shape);
    EXPECT_TRUE(batches.isOk()) << batches.status().message();
    if (!batches)
      return job;
    job->data.push_back(std::move(*batches));
    TrainerOptions o = options;
    o.pipeline = job->pipelineRanks.back();
    if (data > 1)
      o.dataParallel = job->dataRanks.back();
    std::string path = printDir + ".rank" + std::to_string(world);
    outs.push_back(std::fopen(path.c_str(), "w"));
    o.out = outs.back();
    auto t = Trainer::create(*job->backends.back(), *job->data.back(), o);
    EXPECT_TRUE(t.isOk()) << "rank " << world << ": " << t.status().message();
    if (!t)
      return job;
    job->trainers.push_back(std::move(*t));
    job->results.push_back(Status::error("not run"));
  }
  std::vector<std::thread> threads;
  for (size_t r = 0; r < job->trainers.size(); ++r)
    threads.emplace_back(
        [&job, r] { job->results[r] = job->trainers[r]->run(); });
  for (std::thread &t : threads)
    t.join();
  for (int world = 0; world < 2 * data; ++world) {
    std::fclose(outs[size_t(world)]);
    std::ifstream in(printDir + ".rank" + std::to_string(world));
    std::stringstream text;
    text << in.rdbuf();
    job->printed.push_back(text.str());
  }
  return job;
}

void expectFinished(const PipelineJob &job) {
  ASSERT_FALSE(job.results.empty());
  for (size_t r = 0; r < job.results.size(); ++r)
    ASSERT_TRUE(job.results[r].isOk())
        << "rank " << r << ": " << job.results[r].status().message();
}

std::string temp(const std::string &name) { return freshTestDir(name); }

TEST(PipelineTrainer, TwoStagesTrainAsOneRankAndSaveItsCheckpoint) {
  ToyShape shape;
  shape.accum = 4;
  shape.steps = 6;
  TrainerOptions one;
  one.checkpointDir = temp("pipe-one");
  ToyRun a = makeToyRun(shape, one);
  ASSERT_OK(a.status);
  auto want = a.trainer->run();
  ASSERT_TRUE(want.isOk()) << want.status().message();

  TrainerOptions o;
  o.checkpointDir = temp("pipe-two");
  auto job = runPipeline(shape, 1, o, temp("pipe-two-out"));
  expectFinished(*job);
  const TrainResult &r0 = *job->results[0], &r1 = *job->results[1];
  ASSERT_EQ(r0.steps.size(), want->steps.size());
  for (size_t i = 0; i < r0.steps.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i + 1));
    // The last stage's losses, summed in f32 on the stage, then over the
    // ranks: the one rank's within float rounding, the same on every rank.
    EXPECT_NEAR(r0.steps[i].loss, want->steps[i].loss,
                1e-6 * std::fabs(want->steps[i].loss));
    EXPECT_EQ(r0.steps[i].loss, r1.steps[i].loss);
    EXPECT_EQ(r0.steps[i].gradNorm, want->steps[i].gradNorm);
    EXPECT_EQ(r1.steps[i].gradNorm, want->steps[i].gradNorm);
  }
  // Each rank trained in its own arena, smaller than the plan's, which
  // places both ranks' slots; each stage's parameters are the one rank's,
  // bit for bit.
  const Bundle &pipelineBundle = job->backends[0]->bundle();
  for (const auto &backend : job->backends)
    EXPECT_LT(backend->arenaBytes(), pipelineBundle.plan().arenas(0).bytes());
  EXPECT_EQ(job->backends[0]->slotBytes("w"), a.backend->slotBytes("w"));
  EXPECT_EQ(job->backends[1]->slotBytes("b"), a.backend->slotBytes("b"));
  // Rank 0 alone prints the job's step lines and writes the checkpoint,
  // joined from the stages' own variables into the one-rank format.
  EXPECT_NE(job->printed[0].find("step 6/6"), std::string::npos)
      << job->printed[0];
  EXPECT_EQ(job->printed[1], "");
  // Without a data group, the pipeline group tells the watchdog the job
  // is alive.
  EXPECT_EQ(job->pipelineRanks[1]->lastBeat, 6);
  ASSERT_EQ(r0.checkpoints.size(), 1u);
  EXPECT_TRUE(r1.checkpoints.empty());
  auto mine = checkpoint::loadTrainCheckpoint(r0.checkpoints[0]);
  auto theirs = checkpoint::loadTrainCheckpoint(want->checkpoints.back());
  ASSERT_TRUE(mine.isOk()) << mine.status().message();
  ASSERT_TRUE(theirs.isOk()) << theirs.status().message();
  EXPECT_EQ(mine->step, theirs->step);
  EXPECT_EQ(mine->dataPosition, theirs->dataPosition);
  for (auto [m, t] : {std::make_pair(&mine->model, &theirs->model),
                      std::make_pair(&mine->state, &theirs->state)}) {
    ASSERT_EQ(m->size(), t->size());
    for (size_t i = 0; i < m->size(); ++i) {
      EXPECT_EQ((*m)[i].name, (*t)[i].name);
      EXPECT_EQ((*m)[i].shape, (*t)[i].shape);
      EXPECT_EQ((*m)[i].data, (*t)[i].data) << (*m)[i].name;
    }
  }
}

// Checkpoints of either layout resume in the other with the
// uninterrupted run's bits.
TEST(PipelineTrainer, CheckpointsMoveBetweenPipelineTwoAndOneRank) {
  ToyShape shape;
  shape.accum = 4;
  shape.steps = 6;
  ToyRun whole = makeToyRun(shape, {});
  ASSERT_OK(whole.status);
  ASSERT_TRUE(whole.trainer->run().isOk());

  // Pipeline 2 to step 3, one rank on to 6.
  TrainerOptions first;
  first.checkpointDir = temp("pipe-to-one");
  first.steps = 3;
  auto job = runPipeline(shape, 1, first, temp("pipe-to-one-out"));
  expectFinished(*job);
  TrainerOptions rest;
  rest.checkpointDir = first.checkpointDir;
  rest.resume = true;
  ToyRun one = makeToyRun(shape, rest);
  ASSERT_OK(one.status);
  auto resumed = one.trainer->run();
  ASSERT_TRUE(resumed.isOk()) << resumed.status().message();
  EXPECT_EQ(resumed->startStep, 3);
  EXPECT_EQ(one.backend->slotBytes("w"), whole.backend->slotBytes("w"));
  EXPECT_EQ(one.backend->slotBytes("b"), whole.backend->slotBytes("b"));

  // One rank to step 3, pipeline 2 on to 6.
  TrainerOptions start;
  start.checkpointDir = temp("one-to-pipe");
  start.steps = 3;
  ToyRun a = makeToyRun(shape, start);
  ASSERT_OK(a.status);
  ASSERT_TRUE(a.trainer->run().isOk());
  TrainerOptions more;
  more.checkpointDir = start.checkpointDir;
  more.resume = true;
  auto pipe = runPipeline(shape, 1, more, temp("one-to-pipe-out"));
  expectFinished(*pipe);
  EXPECT_EQ(pipe->results[0]->startStep, 3);
  EXPECT_EQ(pipe->backends[0]->slotBytes("w"), whole.backend->slotBytes("w"));
  EXPECT_EQ(pipe->backends[1]->slotBytes("b"), whole.backend->slotBytes("b"));
}

// Pipeline 2 × data 2: each replica takes its half of the global batch's
// microbatches; the loss and the parameters are one rank's at the same
// global batch, within float rounding (the data group sums gradients in
// another order).
TEST(PipelineTrainer, PipelineTimesDataTrainsAsOneRank) {
  ToyShape shape;
  shape.accum = 4;
  shape.steps = 4;
  ToyShape single = shape;
  single.accum = 8;
  ToyRun a = makeToyRun(single, {});
  ASSERT_OK(a.status);
  auto want = a.trainer->run();
  ASSERT_TRUE(want.isOk()) << want.status().message();
  auto job = runPipeline(shape, 2, {}, temp("pipe-data-out"));
  expectFinished(*job);
  for (size_t i = 0; i < want->steps.size(); ++i) {
    for (size_t r = 0; r < 4; ++r)
      EXPECT_NEAR(job->results[r]->steps[i].loss, want->steps[i].loss,
                  1e-6 * std::fabs(want->steps[i].loss))
          << "rank " << r << " step " << i + 1;
    EXPECT_NEAR(job->results[0]->steps[i].gradNorm, want->steps[i].gradNorm,
                1e-5 * want->steps[i].gradNorm);
  }
  // World rank p·2 + d: rank 0 and 1 hold the first stage, 2 and 3 the
  // last.
  for (auto [rank, name] : {std::make_pair(0, "w"), std::make_pair(1, "w"),
                            std::make_pair(2, "b"), std::make_pair(3, "b")})
    expectSameFloats(job->backends[size_t(rank)]->slotBytes(name),
                     a.backend->slotBytes(name), name);
  EXPECT_EQ(job->printed[1] + job->printed[2] + job->printed[3], "");
}

// Pipeline 2 × data 2 with ZeRO-1 on the first stage: each data rank of
// that stage holds half of w's moments. The checkpoint gathers the halves
// over the data group before the stages are joined, so it holds the
// whole moments, those of the job without ZeRO-1; and it resumes (each
// rank cutting its half again) to the uninterrupted run's parameters.
TEST(PipelineTrainer, PipelineTimesDataShardedMomentsCheckpointWhole) {
  ToyShape shape;
  shape.accum = 4;
  shape.steps = 4;
  TrainerOptions plain;
  plain.checkpointDir = temp("pipe-data-plain");
  auto want = runPipeline(shape, 2, plain, temp("pipe-data-plain-out"));
  expectFinished(*want);
  TrainerOptions o;
  o.checkpointDir = temp("pipe-data-zero1");
  auto job = runPipeline(shape, 2, o, temp("pipe-data-zero1-out"), true);
  expectFinished(*job);
  for (size_t i = 0; i < want->results[0]->steps.size(); ++i)
    EXPECT_NEAR(job->results[0]->steps[i].gradNorm,
                want->results[0]->steps[i].gradNorm,
                1e-6 * want->results[0]->steps[i].gradNorm)
        << "step " << i + 1;
  // Each first-stage rank's moment slot holds its half; the parameters are
  // the same bits (the norm only adds its parts in another order).
  EXPECT_EQ(job->backends[0]->slotBytes("adam_m.w").size() * 2,
            want->backends[0]->slotBytes("adam_m.w").size());
  for (int rank : {0, 1})
    EXPECT_EQ(job->backends[size_t(rank)]->slotBytes("w"),
              want->backends[0]->slotBytes("w"));
  ASSERT_EQ(job->results[0]->checkpoints.size(), 1u);
  for (size_t r = 1; r < 4; ++r)
    EXPECT_TRUE(job->results[r]->checkpoints.empty()) << "rank " << r;
  auto mine = checkpoint::loadTrainCheckpoint(job->results[0]->checkpoints[0]);
  auto theirs =
      checkpoint::loadTrainCheckpoint(want->results[0]->checkpoints[0]);
  ASSERT_TRUE(mine.isOk()) << mine.status().message();
  ASSERT_TRUE(theirs.isOk()) << theirs.status().message();
  for (auto [m, t] : {std::make_pair(&mine->model, &theirs->model),
                      std::make_pair(&mine->state, &theirs->state)}) {
    ASSERT_EQ(m->size(), t->size());
    for (size_t i = 0; i < m->size(); ++i) {
      EXPECT_EQ((*m)[i].name, (*t)[i].name);
      EXPECT_EQ((*m)[i].shape, (*t)[i].shape) << (*m)[i].name;
      EXPECT_EQ((*m)[i].data, (*t)[i].data) << (*m)[i].name;
    }
  }

  // Step 2's checkpoint of the sharded job resumes in it to step 4.
  TrainerOptions first;
  first.checkpointDir = temp("pipe-data-zero1-resume");
  first.steps = 2;
  auto half = runPipeline(shape, 2, first, temp("pipe-data-zero1-half"), true);
  expectFinished(*half);
  TrainerOptions rest;
  rest.checkpointDir = first.checkpointDir;
  rest.resume = true;
  auto resumed =
      runPipeline(shape, 2, rest, temp("pipe-data-zero1-rest"), true);
  expectFinished(*resumed);
  EXPECT_EQ(resumed->results[0]->startStep, 2);
  for (int rank : {0, 1}) {
    EXPECT_EQ(resumed->backends[size_t(rank)]->slotBytes("w"),
              job->backends[size_t(rank)]->slotBytes("w"));
    EXPECT_EQ(resumed->backends[size_t(rank)]->slotBytes("adam_v.w"),
              job->backends[size_t(rank)]->slotBytes("adam_v.w"));
  }
}

// Evaluation of a pipeline bundle: every rank runs its forward-only list
// over the held-out batches, accum microbatches a step on each replica;
// rank 0 prints the one-rank eval line, with the one rank's loss (each
// microbatch's loss summed in f32 on the last stage: within float
// rounding). Pipeline 2 alone and pipeline 2 × data 2.
TEST(PipelineTrainer, EvaluatesHeldOutBatchesAsOneRank) {
  for (int data : {1, 2}) {
    SCOPED_TRACE("data " + std::to_string(data));
    ToyShape shape;
    shape.accum = 4;
    shape.steps = 4;
    ToyShape single = shape;
    single.accum = shape.accum * data;
    TrainerOptions o;
    o.evalInterval = 2;
    o.evalBatches = 16;
    ToyRun a = makeToyRun(single, o);
    ASSERT_OK(a.status);
    auto want = a.trainer->run();
    ASSERT_TRUE(want.isOk()) << want.status().message();
    ASSERT_EQ(want->evals.size(), 2u);

    auto job =
        runPipeline(shape, data, o, temp("pipe-eval-" + std::to_string(data)));
    expectFinished(*job);
    for (size_t r = 0; r < job->results.size(); ++r) {
      const TrainResult &got = *job->results[r];
      ASSERT_EQ(got.evals.size(), want->evals.size()) << "rank " << r;
      for (size_t i = 0; i < got.evals.size(); ++i) {
        EXPECT_EQ(got.evals[i].step, want->evals[i].step);
        EXPECT_EQ(got.evals[i].batches, 16);
        EXPECT_NEAR(got.evals[i].loss, want->evals[i].loss,
                    1e-6 * std::fabs(want->evals[i].loss))
            << "rank " << r << " eval " << i;
        EXPECT_EQ(got.evals[i].loss, job->results[0]->evals[i].loss);
      }
      // Evaluating changed nothing: the steps after it are one rank's.
      for (size_t i = 0; i < got.steps.size(); ++i)
        EXPECT_NEAR(got.steps[i].loss, want->steps[i].loss,
                    1e-6 * std::fabs(want->steps[i].loss))
            << "rank " << r << " step " << i + 1;
    }
    EXPECT_NE(want->evals[0].loss, want->evals[1].loss);
    char line[64];
    std::snprintf(line, sizeof line, "eval at step 4: loss %.4f over 16 ",
                  job->results[0]->evals[1].loss);
    EXPECT_NE(job->printed[0].find(line), std::string::npos) << job->printed[0];
    EXPECT_EQ(job->printed[0].find("no evaluation"), std::string::npos)
        << job->printed[0];
    for (size_t r = 1; r < job->printed.size(); ++r)
      EXPECT_EQ(job->printed[r], "") << "rank " << r;
  }
}

// Where a stage's forward writes state (delayed scaling's amax histories),
// evaluation runs its CHUNK_EVAL_FORWARD: one rank's eval losses, and the
// training forward runs only for training's microbatches (it would move
// the state otherwise); without the evaluation forwards the trainer
// refuses to evaluate, naming the forward's step.
TEST(PipelineTrainer, EvaluatesThroughEvalForwardsWhereForwardsWriteState) {
  ToyShape shape;
  shape.accum = 4;
  shape.steps = 4;
  TrainerOptions o;
  o.evalInterval = 2;
  o.evalBatches = 16;
  ToyRun a = makeToyRun(shape, o);
  ASSERT_OK(a.status);
  auto want = a.trainer->run();
  ASSERT_TRUE(want.isOk()) << want.status().message();
  ASSERT_EQ(want->evals.size(), 2u);

  auto job = runPipeline(shape, 1, o, temp("pipe-eval-state"), false,
                         /*forwardWritesState=*/true);
  expectFinished(*job);
  for (size_t r = 0; r < job->results.size(); ++r) {
    const TrainResult &got = *job->results[r];
    ASSERT_EQ(got.evals.size(), 2u) << "rank " << r;
    for (size_t i = 0; i < got.evals.size(); ++i)
      EXPECT_NEAR(got.evals[i].loss, want->evals[i].loss,
                  1e-6 * std::fabs(want->evals[i].loss))
          << "rank " << r << " eval " << i;
    EXPECT_EQ(job->backends[r]->trainingForwards, 4 * 4) << "rank " << r;
    EXPECT_EQ(job->backends[r]->evalForwards, 2 * 16) << "rank " << r;
  }

  Bundle b = makePipelineToyBundle(shape, 1, false, true);
  for (RankProgram &rank : *b.mutable_ranks()) {
    auto *programs = rank.mutable_programs();
    for (int i = programs->size(); i-- > 0;)
      if (programs->Get(i).kind() == CHUNK_EVAL_FORWARD)
        programs->DeleteSubrange(i, 1);
  }
  auto plan = planPipelineEvaluation(b, 0);
  ASSERT_FALSE(plan.isOk());
  EXPECT_NE(plan.status().message().find(
                "'stage_forward' (CHUNK_FORWARD), whose step 'amax history "
                "update' addresses slot 'fp8.amax_history' (FP8_STATE)"),
            std::string::npos)
      << plan.status().message();
}

// Without --eval-batches, a pipeline evaluates whole steps: the default
// (4 batches of synthetic data) rounded to a multiple of accum × data.
TEST(PipelineTrainer, EvaluatesWholeForwardOnlySteps) {
  ToyShape shape;
  shape.accum = 4;
  shape.steps = 2;
  TrainerOptions o;
  o.evalInterval = 2;
  auto job = runPipeline(shape, 2, o, temp("pipe-eval-default"));
  expectFinished(*job);
  ASSERT_EQ(job->results[0]->evals.size(), 1u);
  EXPECT_EQ(job->results[0]->evals[0].batches, 8);
}

// A count that is not whole steps is refused before training, naming the
// flag and the multiple.
TEST(PipelineTrainer, RefusesEvalBatchesThatAreNotWholeSteps) {
  ToyShape shape;
  shape.accum = 4;
  Bundle b = makePipelineToyBundle(shape, 1);
  HostWire wire;
  HostRanks pipeline(2), norms(2);
  auto rank = std::make_shared<HostRank>(pipeline, 0);
  HostRank normRank(norms, 0);
  PipelineToyBackend backend(b, 0, wire, normRank, nullptr);
  auto data = openToyData(shape);
  ASSERT_TRUE(data.isOk());
  TrainerOptions o;
  o.evalInterval = 2;
  o.evalBatches = 6;
  o.pipeline = rank;
  auto t = Trainer::create(backend, **data, o);
  ASSERT_FALSE(t.isOk());
  EXPECT_NE(t.status().message().find("--eval-batches is 6"), std::string::npos)
      << t.status().message();
  EXPECT_NE(t.status().message().find("multiple of 4"), std::string::npos)
      << t.status().message();
}

} // namespace
} // namespace octet::test
