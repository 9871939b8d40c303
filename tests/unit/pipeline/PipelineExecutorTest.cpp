// The pipeline bundle contract and the runtime's instruction executor on the
// CPU: a toy pipeline bundle (real instruction lists from
// support/PipelineSchedule, stash-strided slots, transfers naming their
// tensors) run by planPipelineRank/runPipelineStep on ranks in threads whose
// sends and receives meet in host queues, against the same toy model run as
// one rank; and validate() refusing bundles whose ranks would not meet.

#include "runtime/exec/PipelineExecutor.h"
#include "runtime/exec/PipelineTimeline.h"
#include "bundle/Bundle.h"
#include "bundle/Describe.h"
#include "bundle/PipelineBundle.h"
#include "tests/unit/pipeline/HostWire.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <sstream>
#include <mutex>
#include <thread>
#include <tuple>

namespace octet {
namespace {

constexpr int kWidth = 4;              // floats per edge tensor
constexpr uint64_t kStride = 256;      // bytes per stash entry
constexpr uint64_t kTensorBytes = kWidth * sizeof(float);

// The toy's edge tensors of local chunk k: what its forward reads
// (act_in) and writes (act_out), what its backward reads (grad_in) and
// writes (grad_out).
const char *kEdgeNames[] = {"act_in", "act_out", "grad_in", "grad_out"};
enum Edge { ActIn, ActOut, GradIn, GradOut };

struct ToyLayout {
  PipelineScheduleKind kind = PipelineScheduleKind::OneFOneB;
  int ranks = 2, virtualStages = 1, microbatches = 4, data = 1;
  // Each chunk forward also writes its stage's FP8 state (as delayed
  // scaling's amax histories are) and has a CHUNK_EVAL_FORWARD that only
  // reads it.
  bool forwardWritesState = false;
};

std::string stateSlotName(int stage) {
  return "fp8.s" + std::to_string(stage) + ".amax_history";
}

std::string slotName(Edge e, int stage) {
  return std::string(kEdgeNames[e]) + ".s" + std::to_string(stage);
}

// The bundle's slots: every edge tensor of every stage a STASH slot of its
// rank's entries, then the loss accumulator. The plan places every rank's
// slots; each rank allocates its own arena of them (addRankArenas), which
// the chunk programs' marker steps name: the slots the C++ below uses.
bundle::Bundle makeToyPipelineBundle(const ToyLayout &layout) {
  auto schedule = makePipelineSchedule(layout.kind, layout.ranks,
                                       layout.virtualStages,
                                       layout.microbatches);
  EXPECT_TRUE(schedule.isOk()) << schedule.status().message();
  bundle::Bundle b;
  bundle::MemoryPlan *plan = b.mutable_plan();
  bundle::Arena *arena = plan->add_arenas();
  arena->set_name("main");
  arena->set_alignment(256);
  uint64_t offset = 0;
  std::map<std::string, uint32_t> slotOf;
  auto addSlot = [&](const std::string &name, bundle::SlotKind kind,
                     uint64_t bytes) {
    bundle::Slot *s = plan->add_slots();
    s->set_name(name);
    s->set_kind(kind);
    s->set_offset(offset);
    s->set_bytes(bytes);
    s->set_dtype(bundle::F32);
    if (kind == bundle::STASH)
      s->add_shape(kWidth);
    offset += (bytes + 255) / 256 * 256;
    slotOf[name] = uint32_t(plan->slots_size() - 1);
  };
  const int stages = layout.ranks * layout.virtualStages;
  for (int s = 0; s < stages; ++s) {
    int entries = bundle::assignStashEntries(*schedule, s % layout.ranks).entries;
    for (Edge e : {ActIn, ActOut, GradIn, GradOut})
      addSlot(slotName(e, s), bundle::STASH, kStride * uint64_t(entries));
  }
  addSlot("loss_sum", bundle::IO, 4);
  if (layout.forwardWritesState)
    for (int s = 0; s < stages; ++s)
      addSlot(stateSlotName(s), bundle::FP8_STATE, 16);
  arena->set_bytes(offset);

  auto entryRef = [&](Edge e, int stage) {
    bundle::SlotRef ref;
    ref.set_slot(slotOf[slotName(e, stage)]);
    ref.set_stash_stride(kStride);
    return ref;
  };
  EXPECT_TRUE(bundle::addPipelineRanks(
                  b, *schedule, layout.data,
                  [&](const bundle::TransferSite &site) {
                    const bundle::PipeTransfer &t = *site.transfer;
                    Edge e = t.gradient() ? (t.send() ? GradOut : GradIn)
                                          : (t.send() ? ActOut : ActIn);
                    return std::vector<bundle::SlotRef>{entryRef(
                        e, site.chunk * layout.ranks + site.rank)};
                  })
                  .isOk());
  b.mutable_pipeline()->set_loss_sum_slot(slotOf["loss_sum"]);
  for (bundle::RankProgram &rank : *b.mutable_ranks())
    for (int k = 0; k < layout.virtualStages; ++k) {
      int stage = k * layout.ranks + int(rank.stage());
      std::vector<bundle::ProgramKind> kinds = {
          bundle::CHUNK_FORWARD, bundle::CHUNK_BACKWARD,
          bundle::CHUNK_INPUT_GRADIENT, bundle::CHUNK_WEIGHT_GRADIENT};
      if (layout.forwardWritesState)
        kinds.push_back(bundle::CHUNK_EVAL_FORWARD);
      for (bundle::ProgramKind kind : kinds) {
        bool forward = kind == bundle::CHUNK_FORWARD ||
                       kind == bundle::CHUNK_EVAL_FORWARD;
        bundle::Program *program = rank.add_programs();
        program->set_kind(kind);
        program->set_chunk(uint32_t(k));
        program->set_name(std::string(bundle::programKindName(kind)) +
                          std::to_string(k));
        // Markers: the slots the toy's C++ reads and writes.
        for (Edge e : {ActIn, ActOut, GradIn, GradOut}) {
          if (kind == bundle::CHUNK_EVAL_FORWARD && (e == GradIn || e == GradOut))
            continue;
          bundle::Copy *c = program->add_steps()->mutable_copy();
          *c->mutable_src() = entryRef(e, stage);
          *c->mutable_dst() = entryRef(e, stage);
        }
        if (forward && layout.forwardWritesState) {
          // The training forward updates its state; the evaluation
          // forward reads it (a kernel's argument).
          bundle::Step *step = program->add_steps();
          step->set_label("stage" + std::to_string(stage) + " amax");
          if (kind == bundle::CHUNK_FORWARD) {
            step->mutable_memset()->mutable_dst()->set_slot(
                slotOf[stateSlotName(stage)]);
            step->mutable_memset()->set_bytes(16);
          } else {
            step->mutable_launch()->add_args()->mutable_slot()->set_slot(
                slotOf[stateSlotName(stage)]);
          }
        }
        if (forward && stage == stages - 1) {
          bundle::Memset *m = program->add_steps()->mutable_memset();
          m->mutable_dst()->set_slot(slotOf["loss_sum"]);
          m->set_bytes(4);
        }
      }
    }
  bundle::addRankArenas(b);
  return b;
}

// The toy model: stage s maps x to y = x·w_s + 0.5 elementwise; the loss
// of a microbatch is ½ Σ y² of the last stage. Microbatch m's input is
// x_j = 0.1(m + 1) + 0.01 j (replica d adds 0.05 d).
float weightOf(int stage, int j) { return 0.9f + 0.05f * float(stage) - 0.02f * float(j); }
float inputOf(int m, int d, int j) {
  return 0.1f * float(m + 1) + 0.01f * float(j) + 0.05f * float(d);
}

struct Reference {
  double loss = 0;
  std::vector<std::vector<float>> weightGrads; // per stage
};

Reference runAsOneRank(int stages, int microbatches, int replica) {
  Reference ref;
  ref.weightGrads.assign(size_t(stages), std::vector<float>(kWidth, 0.0f));
  float lossSum = 0;
  for (int m = 0; m < microbatches; ++m) {
    std::vector<std::vector<float>> xs(size_t(stages) + 1,
                                       std::vector<float>(kWidth));
    for (int j = 0; j < kWidth; ++j)
      xs[0][size_t(j)] = inputOf(m, replica, j);
    for (int s = 0; s < stages; ++s)
      for (int j = 0; j < kWidth; ++j)
        xs[size_t(s) + 1][size_t(j)] =
            xs[size_t(s)][size_t(j)] * weightOf(s, j) + 0.5f;
    float loss = 0;
    for (int j = 0; j < kWidth; ++j)
      loss += 0.5f * xs[size_t(stages)][size_t(j)] * xs[size_t(stages)][size_t(j)];
    lossSum += loss;
    std::vector<float> g = xs[size_t(stages)];
    for (int s = stages - 1; s >= 0; --s)
      for (int j = 0; j < kWidth; ++j) {
        ref.weightGrads[size_t(s)][size_t(j)] +=
            g[size_t(j)] * xs[size_t(s)][size_t(j)];
        g[size_t(j)] *= weightOf(s, j);
      }
  }
  ref.loss = lossSum;
  return ref;
}

// One rank's device in host memory: the plan's arena, the toy's programs
// in C++ on stash entries, transfers through the wire. Every stream is the
// host thread, so it also checks the executor's ordering statically: an
// instruction that uses an entry must have been ordered after the other
// stream's earlier uses of it (through its wait, or transitively).
class HostPipelineRank : public PipelineDevice {
public:
  HostPipelineRank(const bundle::Bundle &b, int worldRank, int replica,
                   HostWire &wire)
      : b_(b), worldRank_(worldRank), replica_(replica), wire_(wire),
        memory_(*bundle::pipelineRankMemory(b, worldRank)),
        arena_(memory_.bytes) {
    ranks_ = int(b.pipeline().ranks());
    stages_ = ranks_ * int(b.pipeline().virtual_stages());
    weightGrads_.assign(size_t(b.pipeline().virtual_stages()),
                        std::vector<float>(kWidth, 0.0f));
  }

  Status beginStep(const PipelineRankPlan &plan) override {
    if (plan.lossSumSlot >= 0)
      std::memset(&arena_[offsetOf(uint32_t(plan.lossSumSlot))], 0, 4);
    return Status::ok();
  }

  Status compute(const PipeWork &w) override {
    const bundle::PipeInstruction &ins = *w.instruction;
    int chunk = int(ins.chunk()), m = int(ins.microbatch());
    int stage = chunk * ranks_ + pipelineRank_;
    float *actIn = at(ActIn, chunk, w.entry), *actOut = at(ActOut, chunk, w.entry);
    float *gradIn = at(GradIn, chunk, w.entry), *gradOut = at(GradOut, chunk, w.entry);
    switch (ins.kind()) {
    case bundle::PIPE_FORWARD: {
      // The training forward of a bundle whose forwards write state moves
      // the state (an amax history's roll), which evaluation must not.
      if (w.program->kind() == bundle::CHUNK_FORWARD &&
          writesState(*w.program))
        ++stateUpdates;
      if (stage == 0)
        for (int j = 0; j < kWidth; ++j)
          actIn[j] = inputOf(m, replica_, j);
      for (int j = 0; j < kWidth; ++j)
        actOut[j] = actIn[j] * weightOf(stage, j) + 0.5f;
      if (stage == stages_ - 1) {
        float loss = 0;
        for (int j = 0; j < kWidth; ++j)
          loss += 0.5f * actOut[j] * actOut[j];
        float *sum = reinterpret_cast<float *>(
            &arena_[offsetOf(b_.pipeline().loss_sum_slot())]);
        *sum += loss;
      }
      return Status::ok();
    }
    case bundle::PIPE_BACKWARD:
    case bundle::PIPE_INPUT_GRADIENT:
    case bundle::PIPE_WEIGHT_GRADIENT: {
      // The last stage's output gradient is its output (d½y²/dy).
      const float *g = stage == stages_ - 1 ? actOut : gradIn;
      if (ins.kind() != bundle::PIPE_WEIGHT_GRADIENT && stage > 0)
        for (int j = 0; j < kWidth; ++j)
          gradOut[j] = g[j] * weightOf(stage, j);
      if (ins.kind() != bundle::PIPE_INPUT_GRADIENT) {
        std::vector<float> &dw = weightGrads_[size_t(chunk)];
        for (int j = 0; j < kWidth; ++j)
          dw[size_t(j)] = (w.firstMicrobatch ? 0.0f : dw[size_t(j)]) +
                          g[j] * actIn[j];
        lastRuns += w.lastMicrobatch;
      }
      return Status::ok();
    }
    default:
      return Status::error("not a compute instruction");
    }
  }

  Status communicate(const PipeWork &w) override {
    const auto &transfers = w.instruction->transfers();
    for (int k = 0; k < transfers.size(); ++k) {
      const bundle::PipeTransfer &t = transfers[k];
      if (!t.send())
        continue;
      std::vector<uint8_t> bytes;
      for (const bundle::SlotRef &ref : t.tensors()) {
        const uint8_t *p = entryBytes(ref, w.transferEntries[size_t(k)]);
        bytes.insert(bytes.end(), p, p + kTensorBytes);
      }
      wire_.send(pipelineRank_, int(t.peer()), t.gradient(), std::move(bytes));
    }
    for (int k = 0; k < transfers.size(); ++k) {
      const bundle::PipeTransfer &t = transfers[k];
      if (t.send())
        continue;
      std::vector<uint8_t> bytes;
      OCTET_RETURN_IF_ERROR(
          wire_.recv(int(t.peer()), pipelineRank_, t.gradient(), bytes));
      if (bytes.size() != kTensorBytes * size_t(t.tensors_size()))
        return Status::error("received a message of the wrong size");
      for (int i = 0; i < t.tensors_size(); ++i)
        std::memcpy(entryBytes(t.tensors(i), w.transferEntries[size_t(k)]),
                    &bytes[size_t(i) * kTensorBytes], kTensorBytes);
    }
    return Status::ok();
  }

  Status endStep(const PipelineRankPlan &) override { return Status::ok(); }

  void setPipelineRank(int p) { pipelineRank_ = p; }
  bool writesState(const bundle::Program &p) const {
    for (const bundle::Step &s : p.steps())
      if (s.has_memset() &&
          b_.plan().slots(int(s.memset().dst().slot())).kind() ==
              bundle::FP8_STATE)
        return true;
    return false;
  }
  int stateUpdates = 0;
  float lossSum() const {
    float v;
    std::memcpy(&v, &arena_[offsetOf(b_.pipeline().loss_sum_slot())], 4);
    return v;
  }
  std::vector<std::vector<float>> weightGrads_;
  int lastRuns = 0;

private:
  // Where the rank's arena holds `slot`; a slot of another rank fails.
  uint64_t offsetOf(uint32_t slot) const {
    EXPECT_TRUE(memory_.holds(slot))
        << "rank " << worldRank_ << " uses slot '"
        << b_.plan().slots(int(slot)).name() << "', not in its arena";
    return memory_.holds(slot) ? uint64_t(memory_.offsets[slot]) : 0;
  }
  uint8_t *entryBytes(const bundle::SlotRef &ref, int entry) {
    return &arena_[offsetOf(ref.slot()) + ref.byte_offset() +
                   uint64_t(entry) * ref.stash_stride()];
  }
  float *at(Edge e, int chunk, int entry) {
    uint32_t slot = 0;
    std::string name = slotName(e, chunk * ranks_ + pipelineRank_);
    for (int i = 0; i < b_.plan().slots_size(); ++i)
      if (b_.plan().slots(i).name() == name)
        slot = uint32_t(i);
    return reinterpret_cast<float *>(
        &arena_[offsetOf(slot) + uint64_t(entry) * kStride]);
  }

  const bundle::Bundle &b_;
  int worldRank_, replica_;
  HostWire &wire_;
  bundle::RankMemory memory_;
  std::vector<uint8_t> arena_;
  int ranks_ = 0, stages_ = 0, pipelineRank_ = 0;
};

// Every instruction that uses a stash entry comes after the other stream's
// earlier uses of the same entry: directly through its wait, or through an
// earlier instruction of its own stream that waited.
void expectOrdered(const PipelineRankPlan &plan) {
  // For each stream, the latest instruction of the other stream known done
  // before the stream's next instruction.
  int known[2] = {-1, -1};
  std::vector<std::pair<int, std::vector<int>>> uses; // (stream, entries)
  for (const PipeWork &w : plan.work) {
    int stream = w.communicate() ? 1 : 0;
    known[stream] = std::max(known[stream], w.waitFor);
    std::vector<int> entries =
        stream == 0 ? std::vector<int>{w.entry} : w.transferEntries;
    for (size_t j = 0; j < w.index; ++j) {
      if (uses[j].first == stream)
        continue;
      for (int e : entries)
        for (int f : uses[j].second)
          if (e == f)
            EXPECT_LE(int(j), known[stream])
                << "rank " << plan.worldRank << " instruction " << w.index
                << " uses entry " << e << " of instruction " << j
                << " on the other stream without waiting for it";
    }
    uses.push_back({stream, entries});
  }
}

struct Case {
  PipelineScheduleKind kind;
  int ranks, virtualStages, microbatches, data;
  bool forwardWritesState = false;
};

// One step of every world rank's plan, each rank in a thread.
void runOnRanks(const std::vector<PipelineRankPlan> &plans,
                const std::vector<std::unique_ptr<HostPipelineRank>> &devices) {
  std::vector<Status> results(plans.size(), Status::ok());
  std::vector<std::thread> threads;
  for (size_t w = 0; w < plans.size(); ++w)
    threads.emplace_back(
        [&, w] { results[w] = runPipelineStep(plans[w], *devices[w]); });
  for (auto &t : threads)
    t.join();
  for (size_t w = 0; w < plans.size(); ++w)
    ASSERT_TRUE(results[w].isOk())
        << "rank " << w << ": " << results[w].message();
}

void runCase(const Case &c) {
  ToyLayout layout{c.kind, c.ranks, c.virtualStages, c.microbatches, c.data};
  bundle::Bundle b = makeToyPipelineBundle(layout);
  std::string bytes = bundle::finalizeAndSerialize(b);
  auto parsed = bundle::parseBundle(bytes, "toy");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  int world = c.ranks * c.data;
  // Each rank allocates its own stages' slots only: less than the plan,
  // which places every rank's.
  for (int w = 0; w < world; ++w) {
    auto memory = bundle::pipelineRankMemory(*parsed, w);
    ASSERT_TRUE(memory.isOk()) << memory.status().message();
    EXPECT_LT(memory->bytes, parsed->plan().arenas(0).bytes()) << "rank " << w;
  }
  std::vector<PipelineRankPlan> plans;
  for (int w = 0; w < world; ++w) {
    auto plan = planPipelineRank(*parsed, w);
    ASSERT_TRUE(plan.isOk()) << plan.status().message();
    expectOrdered(*plan);
    plans.push_back(std::move(*plan));
  }
  std::vector<std::unique_ptr<HostWire>> wires;
  for (int d = 0; d < c.data; ++d)
    wires.push_back(std::make_unique<HostWire>());
  std::vector<std::unique_ptr<HostPipelineRank>> devices;
  for (int w = 0; w < world; ++w) {
    int replica = w % c.data;
    devices.push_back(std::make_unique<HostPipelineRank>(
        *parsed, w, replica, *wires[size_t(replica)]));
    devices.back()->setPipelineRank(plans[size_t(w)].pipelineRank);
  }
  // Two steps: the second must give the first's results, so the loss is
  // cleared and the first backward overwrites the accumulators.
  for (int step = 0; step < 2; ++step) {
    runOnRanks(plans, devices);
    if (::testing::Test::HasFatalFailure())
      return;
    int stages = c.ranks * c.virtualStages;
    for (int d = 0; d < c.data; ++d) {
      Reference ref = runAsOneRank(stages, c.microbatches, d);
      int last = ((stages - 1) % c.ranks) * c.data + d;
      EXPECT_EQ(devices[size_t(last)]->lossSum(), float(ref.loss))
          << "replica " << d << " step " << step;
      for (int p = 0; p < c.ranks; ++p) {
        HostPipelineRank &dev = *devices[size_t(p * c.data + d)];
        for (int k = 0; k < c.virtualStages; ++k)
          for (int j = 0; j < kWidth; ++j)
            EXPECT_EQ(dev.weightGrads_[size_t(k)][size_t(j)],
                      ref.weightGrads[size_t(k * c.ranks + p)][size_t(j)])
                << "stage " << k * c.ranks + p << " element " << j;
        // One last run per chunk and step: where the data-parallel
        // reduction of the chunk's gradients goes.
        EXPECT_EQ(dev.lastRuns, c.virtualStages * (step + 1));
      }
    }
  }
}

TEST(PipelineExecutor, OneFOneBTwoRanksTrainsAsOne) {
  runCase({PipelineScheduleKind::OneFOneB, 2, 1, 4, 1});
  runCase({PipelineScheduleKind::OneFOneB, 2, 1, 8, 1});
  runCase({PipelineScheduleKind::OneFOneB, 4, 1, 6, 1});
}

TEST(PipelineExecutor, InterleavedTwoChunksTrainsAsOne) {
  runCase({PipelineScheduleKind::Interleaved, 2, 2, 4, 1});
  runCase({PipelineScheduleKind::Interleaved, 2, 2, 8, 1});
  runCase({PipelineScheduleKind::Interleaved, 4, 2, 8, 1});
}

TEST(PipelineExecutor, ZeroBubbleSplitBackwardTrainsAsOne) {
  runCase({PipelineScheduleKind::ZeroBubbleH1, 2, 1, 4, 1});
  runCase({PipelineScheduleKind::ZeroBubbleH1, 3, 1, 6, 1});
}

TEST(PipelineExecutor, PipelineTimesDataRunsEachReplica) {
  runCase({PipelineScheduleKind::OneFOneB, 2, 1, 4, 2});
  runCase({PipelineScheduleKind::Interleaved, 2, 2, 4, 2});
}

// Stash entries are reused once free: 1F1B's first rank holds P pairs.
TEST(PipelineExecutor, StashEntriesFollowTheScheduleInFlight) {
  auto s = makePipelineSchedule(PipelineScheduleKind::OneFOneB, 4, 1, 16);
  ASSERT_TRUE(s.isOk());
  for (int r = 0; r < 4; ++r) {
    bundle::StashAssignment a = bundle::assignStashEntries(*s, r);
    EXPECT_GE(a.entries, 4 - r) << "rank " << r;
    // The receive of the next activation can come before the current
    // pair's last use: at most one more.
    EXPECT_LE(a.entries, 4 - r + 1) << "rank " << r;
  }
}

// Evaluation's forward-only list of every rank of a toy bundle (each
// schedule kind, with and without data replicas): training's forwards and
// activation transfers, in their order, every (chunk, microbatch) forward
// once, no backward and no gradient transfer, no empty group; the
// simulator proves the pipeline's lists; the stash entries assigned over
// them are at most training's. Run on the ranks, the last stage's loss is
// the one-rank forward's, twice over, and no rank computes a gradient.
void runEvaluationCase(const Case &c) {
  SCOPED_TRACE(std::string(pipelineScheduleName(c.kind)) +
               " P=" + std::to_string(c.ranks) +
               " V=" + std::to_string(c.virtualStages) + " m=" +
               std::to_string(c.microbatches) + " D=" + std::to_string(c.data));
  ToyLayout layout{c.kind,         c.ranks, c.virtualStages,
                   c.microbatches, c.data,  c.forwardWritesState};
  bundle::Bundle b = makeToyPipelineBundle(layout);
  {
    Status valid = bundle::validatePipeline(b);
    ASSERT_TRUE(valid.isOk()) << valid.message();
  }
  const int world = c.ranks * c.data;
  for (const std::vector<int> &group : bundle::pipelineGroups(b)) {
    auto training = bundle::scheduleOf(b, group);
    auto forward = bundle::forwardOnlyScheduleOf(b, group);
    ASSERT_TRUE(training.isOk() && forward.isOk());
    EXPECT_TRUE(forward->forwardOnly);
    auto sim = simulatePipeline(*forward);
    ASSERT_TRUE(sim.isOk()) << sim.status().message();
    for (int r = 0; r < c.ranks; ++r) {
      std::vector<std::tuple<bool, int, int, int>> trainingActivations, kept;
      for (const PipeOp &op : training->perRank[size_t(r)])
        for (const PipeTransfer &t : op.transfers)
          if (!t.gradient)
            trainingActivations.emplace_back(t.send, t.peer, t.producerStage,
                                             t.microbatch);
      std::map<std::pair<int, int>, int> forwards;
      for (const PipeOp &op : forward->perRank[size_t(r)]) {
        ASSERT_TRUE(op.kind == PipeOpKind::F || op.kind == PipeOpKind::Comm)
            << describePipeOp(op);
        if (op.kind == PipeOpKind::F)
          ++forwards[{op.chunk, op.microbatch}];
        if (op.kind == PipeOpKind::Comm)
          EXPECT_FALSE(op.transfers.empty()) << "rank " << r;
        for (const PipeTransfer &t : op.transfers) {
          EXPECT_FALSE(t.gradient) << "rank " << r << " " << describePipeOp(op);
          kept.emplace_back(t.send, t.peer, t.producerStage, t.microbatch);
        }
      }
      EXPECT_EQ(kept, trainingActivations) << "rank " << r;
      EXPECT_EQ(int(forwards.size()), c.virtualStages * c.microbatches);
      for (const auto &[pair, runs] : forwards)
        EXPECT_EQ(runs, 1) << "chunk " << pair.first << " microbatch "
                           << pair.second;
      EXPECT_LE(bundle::assignStashEntries(*forward, r).entries,
                bundle::assignStashEntries(*training, r).entries);
    }
  }
  std::vector<PipelineRankPlan> plans;
  for (int w = 0; w < world; ++w) {
    auto plan = planPipelineEvaluation(b, w);
    ASSERT_TRUE(plan.isOk()) << plan.status().message();
    EXPECT_EQ(plan->stashEntries, int(b.ranks(w).pipeline().stash_entries()));
    // Where a chunk's forward writes state, its evaluation forward runs.
    bundle::ProgramKind forwardKind = c.forwardWritesState
                                          ? bundle::CHUNK_EVAL_FORWARD
                                          : bundle::CHUNK_FORWARD;
    for (const PipeWork &work : plan->work)
      EXPECT_TRUE(work.communicate() || work.program->kind() == forwardKind)
          << "rank " << w << " runs " << work.program->name();
    expectOrdered(*plan);
    plans.push_back(std::move(*plan));
  }
  // A copy of a plan points at the same instructions.
  PipelineRankPlan copy = plans[0];
  EXPECT_EQ(copy.work[0].instruction, plans[0].work[0].instruction);
  std::vector<std::unique_ptr<HostWire>> wires;
  for (int d = 0; d < c.data; ++d)
    wires.push_back(std::make_unique<HostWire>());
  std::vector<std::unique_ptr<HostPipelineRank>> devices;
  for (int w = 0; w < world; ++w) {
    int replica = w % c.data;
    devices.push_back(std::make_unique<HostPipelineRank>(
        b, w, replica, *wires[size_t(replica)]));
    devices.back()->setPipelineRank(plans[size_t(w)].pipelineRank);
  }
  const int stages = c.ranks * c.virtualStages;
  for (int step = 0; step < 2; ++step) {
    runOnRanks(plans, devices);
    if (::testing::Test::HasFatalFailure())
      return;
    for (int d = 0; d < c.data; ++d) {
      int last = ((stages - 1) % c.ranks) * c.data + d;
      EXPECT_EQ(devices[size_t(last)]->lossSum(),
                float(runAsOneRank(stages, c.microbatches, d).loss))
          << "replica " << d << " step " << step;
    }
  }
  for (const auto &dev : devices) {
    EXPECT_EQ(dev->lastRuns, 0);
    EXPECT_EQ(dev->stateUpdates, 0);
    for (const auto &grads : dev->weightGrads_)
      for (float g : grads)
        EXPECT_EQ(g, 0.0f);
  }
}

TEST(PipelineEvaluation, ForwardOnlyListsRunEveryForwardOnceWithinTheStash) {
  runEvaluationCase({PipelineScheduleKind::OneFOneB, 2, 1, 4, 1});
  runEvaluationCase({PipelineScheduleKind::OneFOneB, 4, 1, 6, 1});
  runEvaluationCase({PipelineScheduleKind::Interleaved, 2, 2, 4, 1});
  runEvaluationCase({PipelineScheduleKind::Interleaved, 4, 2, 8, 1});
  runEvaluationCase({PipelineScheduleKind::ZeroBubbleH1, 3, 1, 6, 1});
  runEvaluationCase({PipelineScheduleKind::OneFOneB, 2, 1, 4, 2});
  runEvaluationCase({PipelineScheduleKind::Interleaved, 2, 2, 4, 2});
}

// Chunk forwards that write state (delayed scaling's amax histories):
// evaluation runs each chunk's CHUNK_EVAL_FORWARD, which reads the state
// and writes none, never the training forward; training still runs the
// training forward. Without the evaluation forwards the bundle is refused
// for evaluation, naming the training forward's step.
TEST(PipelineEvaluation, RunsTheEvalForwardsOfForwardsThatWriteState) {
  runEvaluationCase({PipelineScheduleKind::OneFOneB, 2, 1, 4, 1, true});
  runEvaluationCase({PipelineScheduleKind::Interleaved, 2, 2, 4, 1, true});
  runEvaluationCase({PipelineScheduleKind::ZeroBubbleH1, 3, 1, 6, 1, true});
  runEvaluationCase({PipelineScheduleKind::Interleaved, 2, 2, 4, 2, true});

  ToyLayout layout;
  layout.forwardWritesState = true;
  bundle::Bundle b = makeToyPipelineBundle(layout);
  auto training = planPipelineRank(b, 0);
  ASSERT_TRUE(training.isOk()) << training.status().message();
  for (const PipeWork &work : training->work)
    if (!work.communicate() &&
        work.instruction->kind() == bundle::PIPE_FORWARD)
      EXPECT_EQ(work.program->kind(), bundle::CHUNK_FORWARD);
  for (bundle::RankProgram &rank : *b.mutable_ranks()) {
    auto *programs = rank.mutable_programs();
    for (int i = programs->size(); i-- > 0;)
      if (programs->Get(i).kind() == bundle::CHUNK_EVAL_FORWARD)
        programs->DeleteSubrange(i, 1);
  }
  auto plan = planPipelineEvaluation(b, 0);
  ASSERT_FALSE(plan.isOk());
  EXPECT_NE(plan.status().message().find(
                "program 'chunk-forward0' (CHUNK_FORWARD), whose step "
                "'stage0 amax' addresses slot 'fp8.s0.amax_history' (FP8_STATE)"),
            std::string::npos)
      << plan.status().message();
}

// An evaluation forward stands in for its chunk's forward: without one, or
// reading its inputs elsewhere, the bundle is refused by name.
TEST(PipelineBundleValidate, RefusesAnEvalForwardThatIsNotItsForwards) {
  ToyLayout layout;
  layout.forwardWritesState = true;
  bundle::Bundle b = makeToyPipelineBundle(layout);
  for (bundle::Program &p : *b.mutable_ranks(0)->mutable_programs())
    if (p.kind() == bundle::CHUNK_FORWARD) {
      bundle::NamedSlot *in = p.add_inputs();
      in->set_name("tokens");
      in->set_slot(0);
      in->set_stash_stride(kStride);
    }
  Status st = bundle::validatePipeline(b);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("program 'chunk-eval0' (chunk-eval of chunk 0) "
                              "does not read the inputs of 'chunk-forward0'"),
            std::string::npos)
      << st.message();

  b = makeToyPipelineBundle(layout);
  for (bundle::Program &p : *b.mutable_ranks(1)->mutable_programs())
    if (p.kind() == bundle::CHUNK_EVAL_FORWARD)
      p.set_chunk(1);
  st = bundle::validatePipeline(b);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("stands in for a forward the rank does not "
                              "have"),
            std::string::npos)
      << st.message();
}

// A forward-only schedule is held to its forwards: every one once, and
// no backward op.
TEST(PipelineEvaluation, SimulatorHoldsAForwardOnlyScheduleToItsForwards) {
  auto s = makePipelineSchedule(PipelineScheduleKind::OneFOneB, 2, 1, 4);
  ASSERT_TRUE(s.isOk());
  PipelineSchedule withBackward = *s;
  withBackward.forwardOnly = true;
  auto sim = simulatePipeline(withBackward);
  ASSERT_FALSE(sim.isOk());
  EXPECT_NE(
      sim.status().message().find("forward-only schedule runs a backward"),
      std::string::npos)
      << sim.status().message();

  // The last rank's list without its last forward.
  bundle::Bundle b = makeToyPipelineBundle({});
  auto forward = bundle::forwardOnlyScheduleOf(b, {0, 1});
  ASSERT_TRUE(forward.isOk());
  std::vector<PipeOp> &last = forward->perRank[1];
  for (size_t i = last.size(); i-- > 0;)
    if (last[i].kind == PipeOpKind::F) {
      last.erase(last.begin() + long(i));
      break;
    }
  sim = simulatePipeline(*forward);
  ASSERT_FALSE(sim.isOk());
  EXPECT_NE(sim.status().message().find("never runs F(c0,m3)"),
            std::string::npos)
      << sim.status().message();
}

// A chunk forward that addresses state training's forward updates (an
// FP8 amax history), or writes a parameter, is refused by name: a
// forward-only evaluation would change the run.
TEST(PipelineEvaluation, RefusesAForwardThatUpdatesTrainingState) {
  auto withSlot = [](bundle::SlotKind kind, bool written) {
    bundle::Bundle b = makeToyPipelineBundle({});
    bundle::Slot *s = b.mutable_plan()->add_slots();
    s->set_name(kind == bundle::FP8_STATE ? "amax_history.layers.0"
                                          : "layers.0.weight");
    s->set_kind(kind);
    s->set_bytes(16);
    uint32_t slot = uint32_t(b.plan().slots_size() - 1);
    for (bundle::Program &p : *b.mutable_ranks(0)->mutable_programs())
      if (p.kind() == bundle::CHUNK_FORWARD) {
        bundle::Step *step = p.add_steps();
        step->set_label("layers.0 quantize");
        if (written) {
          step->mutable_memset()->mutable_dst()->set_slot(slot);
          step->mutable_memset()->set_bytes(16);
        } else {
          step->mutable_launch()->add_args()->mutable_slot()->set_slot(slot);
        }
      }
    return b;
  };
  for (auto [kind, written, what] :
       {std::make_tuple(bundle::FP8_STATE, false,
                        "addresses slot "
                        "'amax_history.layers.0'"),
        std::make_tuple(bundle::PARAMETER, true,
                        "writes slot 'layers.0.weight'")}) {
    bundle::Bundle b = withSlot(kind, written);
    auto plan = planPipelineEvaluation(b, 0);
    ASSERT_FALSE(plan.isOk());
    EXPECT_NE(plan.status().message().find(what), std::string::npos)
        << plan.status().message();
    EXPECT_NE(plan.status().message().find("eval_interval"), std::string::npos)
        << plan.status().message();
    // Training runs it as before.
    EXPECT_TRUE(planPipelineRank(b, 0).isOk());
  }
  // Reading a parameter, as every forward does, is evaluation's to do.
  bundle::Bundle b = withSlot(bundle::PARAMETER, false);
  auto plan = planPipelineEvaluation(b, 0);
  EXPECT_TRUE(plan.isOk()) << plan.status().message();
}

// Evaluation allocates nothing: a rank whose stash entries its
// forward-only list would outgrow is refused, naming the field.
TEST(PipelineEvaluation, RefusesAListThatNeedsMoreStashEntries) {
  bundle::Bundle b = makeToyPipelineBundle({});
  b.mutable_ranks(1)->mutable_pipeline()->set_stash_entries(0);
  auto plan = planPipelineEvaluation(b, 1);
  ASSERT_FALSE(plan.isOk());
  EXPECT_NE(plan.status().message().find(
                "0 stash entries (PipelineRank.stash_entries), its "
                "forward-only (evaluation) schedule needs 1"),
            std::string::npos)
      << plan.status().message();
  EXPECT_TRUE(planPipelineEvaluation(b, 0).isOk());
}

// The instruction times of `plan` as the simulator ran its schedule: each
// compute instruction takes the next `cost` units of the rank's timeline
// that are not idle; a communication group takes none.
std::vector<PipeOpTiming> simulatedTimings(const PipelineRankPlan &plan,
                                           const PipeSimulation &simulation,
                                           const PipeCosts &costs, int ranks,
                                           float shift) {
  const std::string &line = simulation.timeline[size_t(plan.pipelineRank)];
  std::vector<PipeOpTiming> out(plan.work.size());
  size_t t = 0;
  for (const PipeWork &w : plan.work) {
    if (w.communicate()) {
      out[w.index] = {float(t) + shift, float(t) + shift};
      continue;
    }
    const PipeStageCosts &c = costs.perStage[size_t(
        int(w.instruction->chunk()) * ranks + plan.pipelineRank)];
    int cost = c.inputGradient + c.weightGradient;
    if (w.instruction->kind() == bundle::PIPE_FORWARD)
      cost = c.forward;
    else if (w.instruction->kind() == bundle::PIPE_INPUT_GRADIENT)
      cost = c.inputGradient;
    else if (w.instruction->kind() == bundle::PIPE_WEIGHT_GRADIENT)
      cost = c.weightGradient;
    while (t < line.size() && line[t] == '.')
      ++t;
    out[w.index] = {float(t) + shift, float(t + size_t(cost)) + shift};
    t += size_t(cost);
  }
  return out;
}

// A run that loses no time measures the bubble its schedule simulates, and
// the schedule run with the measured op times predicts it again; a rank
// that starts late measures more, and the prediction does not move.
TEST(PipelineTimeline, MeasuresTheBubbleItsScheduleSimulates) {
  for (ToyLayout layout :
       {ToyLayout{PipelineScheduleKind::OneFOneB, 2, 1, 4, 1},
        ToyLayout{PipelineScheduleKind::OneFOneB, 2, 1, 8, 1},
        ToyLayout{PipelineScheduleKind::Interleaved, 2, 2, 4, 1},
        ToyLayout{PipelineScheduleKind::ZeroBubbleH1, 2, 1, 4, 1}}) {
    SCOPED_TRACE(pipelineScheduleName(layout.kind) + std::string(" m ") +
                 std::to_string(layout.microbatches));
    bundle::Bundle b = makeToyPipelineBundle(layout);
    auto parsed = bundle::parseBundle(bundle::finalizeAndSerialize(b), "toy");
    ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
    auto schedule = makePipelineSchedule(layout.kind, layout.ranks,
                                         layout.virtualStages,
                                         layout.microbatches);
    ASSERT_TRUE(schedule.isOk());
    int stages = layout.ranks * layout.virtualStages;
    PipeCosts costs;
    for (int st = 0; st < stages; ++st)
      costs.perStage.push_back({2 + st, 3, 1});
    auto simulation = simulatePipeline(*schedule, costs);
    ASSERT_TRUE(simulation.isOk()) << simulation.status().message();
    for (float lateRankOne : {0.0f, 5.0f}) {
      // Each rank adds its two steps; the group then sums the ranks'.
      PipelineTimeline job(layout.ranks, layout.virtualStages);
      for (int w = 0; w < layout.ranks; ++w) {
        auto plan = planPipelineRank(*parsed, w);
        ASSERT_TRUE(plan.isOk()) << plan.status().message();
        PipelineTimeline mine(layout.ranks, layout.virtualStages);
        auto timings = simulatedTimings(*plan, *simulation, costs,
                                        layout.ranks, w == 1 ? lateRankOne : 0);
        for (int step = 0; step < 2; ++step)
          ASSERT_TRUE(mine.add(*plan, timings).isOk());
        for (size_t i = 0; i < job.sums().size(); ++i)
          job.sums()[i] += mine.sums()[i];
      }
      auto summary = job.summarize(*schedule);
      ASSERT_TRUE(summary.isOk()) << summary.status().message();
      EXPECT_EQ(summary->steps, 2);
      EXPECT_NEAR(summary->predictedBubble, simulation->bubble, 1e-3);
      for (int st = 0; st < stages; ++st) {
        EXPECT_NEAR(summary->stageTimes[size_t(st)].forward, 2 + st, 1e-6);
        EXPECT_NEAR(summary->stageTimes[size_t(st)].inputGradient +
                        summary->stageTimes[size_t(st)].weightGradient,
                    4, 1e-6);
      }
      if (lateRankOne == 0)
        EXPECT_NEAR(summary->measuredBubble, simulation->bubble, 1e-6);
      else
        EXPECT_GT(summary->measuredBubble, simulation->bubble + 0.01);
      EXPECT_NE(describeTimeline(*summary).find("measured bubble"),
                std::string::npos);
    }
  }
}

TEST(PipelineTimeline, RefusesTimingsOfAnotherPlan) {
  ToyLayout layout;
  bundle::Bundle b = makeToyPipelineBundle(layout);
  auto parsed = bundle::parseBundle(bundle::finalizeAndSerialize(b), "toy");
  ASSERT_TRUE(parsed.isOk());
  auto plan = planPipelineRank(*parsed, 0);
  ASSERT_TRUE(plan.isOk());
  PipelineTimeline timeline(2, 1);
  Status st = timeline.add(*plan, std::vector<PipeOpTiming>(2));
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("2 timings for"), std::string::npos)
      << st.message();
  // A rank that timed nothing leaves no bubble to speak of.
  auto schedule = makePipelineSchedule(layout.kind, 2, 1, layout.microbatches);
  ASSERT_TRUE(schedule.isOk());
  auto summary = timeline.summarize(*schedule);
  ASSERT_FALSE(summary.isOk());
  EXPECT_NE(summary.status().message().find("rank 0 timed no step"),
            std::string::npos)
      << summary.status().message();
}

Status validateToy(const std::function<void(bundle::Bundle &)> &edit,
                   const ToyLayout &layout = {}) {
  bundle::Bundle b = makeToyPipelineBundle(layout);
  EXPECT_TRUE(bundle::validate(b).isOk()) << bundle::validate(b).message();
  edit(b);
  return bundle::validate(b);
}

bundle::PipeInstruction *firstCommunication(bundle::Bundle &b, int rank,
                                            bool send) {
  for (auto &ins : *b.mutable_ranks(rank)->mutable_pipeline()->mutable_instructions())
    if (ins.kind() == bundle::PIPE_COMMUNICATE && ins.transfers(0).send() == send)
      return &ins;
  return nullptr;
}

TEST(PipelineBundleValidate, RefusesASendWithoutItsReceive) {
  Status st = validateToy([](bundle::Bundle &b) {
    auto *ins = b.mutable_ranks(1)->mutable_pipeline()->mutable_instructions();
    for (int i = 0; i < ins->size(); ++i)
      if ((*ins)[i].kind() == bundle::PIPE_COMMUNICATE) {
        ins->erase(ins->begin() + i);
        break;
      }
  });
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("pipeline 0"), std::string::npos) << st.message();
}

TEST(PipelineBundleValidate, RefusesTensorsThatDifferAcrossThePair) {
  Status st = validateToy([](bundle::Bundle &b) {
    bundle::Slot *s = b.mutable_plan()->mutable_slots(
        int(firstCommunication(b, 0, true)->transfers(0).tensors(0).slot()));
    s->set_dtype(bundle::BF16);
  });
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("differ in tensor 0"), std::string::npos)
      << st.message();
}

TEST(PipelineBundleValidate, RefusesTooFewStashEntries) {
  Status st = validateToy([](bundle::Bundle &b) {
    b.mutable_ranks(0)->mutable_pipeline()->set_stash_entries(1);
  });
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("stash entries"), std::string::npos)
      << st.message();
}

TEST(PipelineBundleValidate, RefusesATransferOutsideTheStash) {
  Status st = validateToy([](bundle::Bundle &b) {
    firstCommunication(b, 0, true)
        ->mutable_transfers(0)
        ->mutable_tensors(0)
        ->set_stash_stride(0);
  });
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("not an entry of a stash slot"),
            std::string::npos)
      << st.message();
}

// A copy into a stash entry writes that entry only. Sized by its slot,
// which holds every entry, it wrote over the next entry or past the slot
// (delayed scaling's stashed scales at pipeline 2 did, corrupting rank 0's
// gradients on the GPU while the interpreter, which has no slots, agreed).
TEST(PipelineBundleValidate, RefusesACopyPastItsStashEntry) {
  auto firstCopy = [](bundle::Bundle &b) {
    for (bundle::Step &step :
         *b.mutable_ranks(0)->mutable_programs(0)->mutable_steps())
      if (step.has_copy())
        return step.mutable_copy();
    return static_cast<bundle::Copy *>(nullptr);
  };
  EXPECT_TRUE(validateToy([&](bundle::Bundle &b) {
                firstCopy(b)->set_bytes(kStride);
              }).isOk());
  Status st = validateToy([&](bundle::Bundle &b) {
    bundle::Copy *c = firstCopy(b);
    c->set_bytes(b.plan().slots(int(c->dst().slot())).bytes());
  });
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("copy destination of 512 bytes"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("a stash entry of slot"), std::string::npos)
      << st.message();
}

TEST(PipelineBundleValidate, RefusesAMissingChunkProgram) {
  Status st = validateToy([](bundle::Bundle &b) {
    b.mutable_ranks(1)->mutable_programs()->erase(
        b.mutable_ranks(1)->mutable_programs()->begin());
  });
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("no program for"), std::string::npos)
      << st.message();
}

TEST(PipelineBundleValidate, RefusesAWorldThatIsNotPipelineTimesData) {
  Status st = validateToy([](bundle::Bundle &b) {
    b.set_world_size(3);
    *b.add_ranks() = b.ranks(1);
    b.mutable_ranks(2)->set_rank(2);
  });
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("rank 2 is in 0 'pipeline' groups"),
            std::string::npos)
      << st.message();
}

// A rank's arena holds every slot it addresses, inside its bytes, with no
// two live slots sharing one.
TEST(PipelineBundleValidate, RefusesASlotTheRanksArenaDoesNotHold) {
  Status st = validateToy([](bundle::Bundle &b) {
    auto *slots = b.mutable_ranks(0)->mutable_pipeline()->mutable_slots();
    slots->erase(slots->begin());
  });
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("which its arena (PipelineRank.slots) does not "
                              "hold"),
            std::string::npos)
      << st.message();
}

TEST(PipelineBundleValidate, RefusesASlotPastTheRanksArena) {
  Status st = validateToy([](bundle::Bundle &b) {
    auto *pipe = b.mutable_ranks(1)->mutable_pipeline();
    pipe->set_arena_bytes(pipe->arena_bytes() - 256);
  });
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("past the end of its arena"), std::string::npos)
      << st.message();
}

TEST(PipelineBundleValidate, RefusesRankSlotsSharingBytesWhileLive) {
  Status st = validateToy([](bundle::Bundle &b) {
    auto *slots = b.mutable_ranks(0)->mutable_pipeline()->mutable_slots();
    (*slots)[1].set_offset((*slots)[0].offset());
  });
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("pipeline rank 0's arena: slots"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("share memory while both are live"),
            std::string::npos)
      << st.message();
}

TEST(PipelineBundleValidate, RefusesABundleWithoutRankArenas) {
  Status st = validateToy([](bundle::Bundle &b) {
    b.mutable_ranks(1)->mutable_pipeline()->clear_slots();
    b.mutable_ranks(1)->mutable_pipeline()->set_arena_bytes(0);
  });
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("has no arena of its own"), std::string::npos)
      << st.message();
}

// `octet inspect` draws the schedule the bundle's lists make.
TEST(PipelineBundle, InspectDrawsTheRanksSchedule) {
  ToyLayout layout;
  std::ostringstream os;
  bundle::describePrograms(makeToyPipelineBundle(layout), os);
  std::string text = os.str();
  EXPECT_NE(text.find("pipeline      1f1b, 2 ranks x 1 chunks, 4 microbatches, "
                      "1 'pipeline' groups"),
            std::string::npos)
      << text;
  // 1F1B over 2 ranks and 4 microbatches with unit costs: 3(M + P - 1).
  EXPECT_NE(text.find("time 15, bubble 20%"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 0 | FF"), std::string::npos) << text;
  EXPECT_NE(text.find("  pipeline: 8 compute instructions"), std::string::npos)
      << text;
  // Each rank's own arena, beside the whole plan's.
  EXPECT_NE(text.find("  arena: "), std::string::npos) << text;
  EXPECT_NE(text.find("(the whole plan's "), std::string::npos) << text;
}

// What a job that starts the wrong number of ranks is told.
TEST(PipelineBundle, SaysHowTheWorldSizeComesAbout) {
  ToyLayout layout;
  layout.data = 2;
  EXPECT_EQ(bundle::parallelLayout(makeToyPipelineBundle(layout)),
            "pipeline 2 × data 2");
  bundle::Bundle data;
  data.set_world_size(4);
  EXPECT_EQ(bundle::parallelLayout(data), "data 4");
}

// addPipelineRanks lays world rank p·D + d out as pipeline rank p of
// replica d, each replica's ranks running pipeline rank p's list, and
// asks for the tensors of every transfer once.
TEST(PipelineBundle, LaysRanksOutAsPipelineTimesData) {
  auto schedule =
      makePipelineSchedule(PipelineScheduleKind::OneFOneB, 2, 1, 4);
  ASSERT_TRUE(schedule.isOk()) << schedule.status().message();
  bundle::Bundle b;
  int asked = 0, transfers = 0;
  ASSERT_TRUE(bundle::addPipelineRanks(b, *schedule, 3,
                                       [&](const bundle::TransferSite &) {
                                         ++asked;
                                         return std::vector<bundle::SlotRef>{};
                                       })
                  .isOk());
  for (const auto &ops : schedule->perRank)
    for (const PipeOp &op : ops)
      transfers += int(op.transfers.size());
  EXPECT_EQ(asked, transfers);
  EXPECT_EQ(b.world_size(), 6u);
  ASSERT_EQ(b.ranks_size(), 6);
  EXPECT_EQ(bundle::pipelineGroups(b),
            (std::vector<std::vector<int>>{{0, 3}, {1, 4}, {2, 5}}));
  for (int w = 0; w < 6; ++w) {
    EXPECT_EQ(b.ranks(w).stage(), uint32_t(w / 3));
    EXPECT_EQ(b.ranks(w).pipeline().instructions_size(),
              int(schedule->perRank[size_t(w / 3)].size()));
    EXPECT_EQ(int(b.ranks(w).pipeline().stash_entries()),
              bundle::assignStashEntries(*schedule, w / 3).entries);
  }
  Status again = bundle::addPipelineRanks(
      b, *schedule, 3,
      [](const bundle::TransferSite &) { return std::vector<bundle::SlotRef>{}; });
  ASSERT_FALSE(again.isOk());
  EXPECT_NE(again.message().find("already has"), std::string::npos)
      << again.message();
}

} // namespace
} // namespace octet
