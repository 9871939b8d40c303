// The training loop on a host-memory backend: it trains, evaluates at the
// interval, saves checkpoints atomically (an injected failure leaves the
// last good one), resumes bit for bit, and refuses bad setups with
// messages that say what to do.

#include "runtime/exec/Trainer.h"
#include "bundle/InitValues.h"
#include "runtime/checkpoint/TrainState.h"
#include "runtime/data/IndexedDataset.h"
#include "runtime/exec/RunOptions.h"
#include "tests/unit/trainer/HostRanks.h"
#include "tests/unit/trainer/ToyBackend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <sys/stat.h>

namespace octet::test {
namespace {

bool exists(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

TEST(Trainer, TrainsAndTheLossFalls) {
  ToyShape shape;
  shape.steps = 40;
  ToyRun r = makeToyRun(shape, {});
  ASSERT_OK(r.status);
  auto result = r.trainer->run();
  ASSERT_TRUE(result.isOk()) << result.status().message();
  ASSERT_EQ(result->steps.size(), 40u);
  EXPECT_LT(result->steps.back().loss, 0.5f * result->steps.front().loss);
  // Every step: accum microbatches and one optimizer step; graphs from the
  // second step on.
  EXPECT_EQ(r.backend->runs(bundle::TRAIN_MICROBATCH), 40 * 2);
  EXPECT_EQ(r.backend->runs(bundle::OPTIMIZER_STEP), 40);
  EXPECT_EQ(r.backend->runs(bundle::INIT), 1);
  EXPECT_EQ(r.backend->graphRuns(), 39 * 3);
  EXPECT_GT(result->steps[0].gradNorm, 0.0f);
  EXPECT_FLOAT_EQ(result->steps[0].lr, 0.05f);
}

// --timeline: the last step alone is recorded, its microbatches and
// optimizer step run eagerly; the steps before it replay their graphs.
TEST(Trainer, RecordsTheLastStepsTimelineEagerly) {
  ToyShape shape;
  shape.steps = 5;
  TrainerOptions options;
  options.stepTimeline = true;
  ToyRun r = makeToyRun(shape, options);
  ASSERT_OK(r.status);
  auto result = r.trainer->run();
  ASSERT_TRUE(result.isOk()) << result.status().message();
  EXPECT_EQ(r.backend->timelineBegins, 1);
  EXPECT_EQ(r.backend->timelineEnds, 1);
  // INIT, then 4 steps of two microbatches and an optimizer step.
  EXPECT_EQ(r.backend->runsBeforeTimeline, 1 + 4 * 3);
  ASSERT_EQ(r.backend->timelineRuns.size(), 3u);
  EXPECT_EQ(r.backend->timelineRuns[0].kind, bundle::TRAIN_MICROBATCH);
  EXPECT_EQ(r.backend->timelineRuns[1].kind, bundle::TRAIN_MICROBATCH);
  EXPECT_EQ(r.backend->timelineRuns[2].kind, bundle::OPTIMIZER_STEP);
  for (const auto &run : r.backend->timelineRuns)
    EXPECT_FALSE(run.graph);
  // Graphs in steps 2..4: step 1 runs eagerly before capture, step 5 for
  // the timeline.
  EXPECT_EQ(r.backend->graphRuns(), 3 * 3);

  ToyRun plain = makeToyRun(shape, {});
  ASSERT_OK(plain.status);
  ASSERT_TRUE(plain.trainer->run().isOk());
  EXPECT_EQ(plain.backend->timelineBegins, 0);
  EXPECT_EQ(plain.backend->graphRuns(), 4 * 3);
}

TEST(Trainer, APipelineBundleHasNoStepTimeline) {
  TrainerOptions options;
  options.stepTimeline = true;
  ToyRun r = makeToyRun(ToyShape{}, options, [](bundle::Bundle &b) {
    b.mutable_pipeline()->set_ranks(2);
    b.set_world_size(2);
  });
  ASSERT_FALSE(r.status.isOk());
  EXPECT_NE(r.status.message().find("time it with --pipeline-timeline"),
            std::string::npos)
      << r.status.message();
}

TEST(Trainer, EvaluatesAtTheIntervalWithoutRaisingMemory) {
  ToyShape shape;
  shape.steps = 6;
  TrainerOptions o;
  o.evalInterval = 2;
  o.evalBatches = 3;
  ToyRun r = makeToyRun(shape, o);
  ASSERT_OK(r.status);
  auto result = r.trainer->run();
  ASSERT_TRUE(result.isOk()) << result.status().message();
  ASSERT_EQ(result->evals.size(), 3u);
  EXPECT_EQ(result->evals[0].step, 2);
  EXPECT_EQ(result->evals[2].step, 6);
  EXPECT_EQ(result->evals[0].batches, 3);
  EXPECT_EQ(r.backend->runs(bundle::EVAL), 9);
  for (const EvalRecord &e : result->evals) {
    EXPECT_EQ(e.bytesAfter, e.bytesBefore);
    EXPECT_TRUE(std::isfinite(e.loss));
  }
  // The same held-out batches every time: the loss moves with the model.
  EXPECT_NE(result->evals[0].loss, result->evals[2].loss);
}

TEST(Trainer, ResumeContinuesBitExactly) {
  ToyShape shape;
  shape.steps = 9;
  const int n = 5;
  // Straight through: 9 steps.
  TrainerOptions straight;
  straight.checkpointDir = freshTestDir("trainer-straight");
  ToyRun a = makeToyRun(shape, straight);
  ASSERT_OK(a.status);
  auto full = a.trainer->run();
  ASSERT_TRUE(full.isOk()) << full.status().message();

  // 5 steps, a checkpoint, then a new process resumes for 4 more.
  TrainerOptions first;
  first.checkpointDir = freshTestDir("trainer-split");
  first.steps = n;
  ToyRun b = makeToyRun(shape, first);
  ASSERT_OK(b.status);
  auto part1 = b.trainer->run();
  ASSERT_TRUE(part1.isOk()) << part1.status().message();
  ASSERT_EQ(part1->checkpoints.size(), 1u);
  EXPECT_TRUE(exists(first.checkpointDir + "/step-5/model.safetensors"));
  EXPECT_TRUE(exists(first.checkpointDir + "/step-5/train_state.safetensors"));

  TrainerOptions second = first;
  second.steps = -1;
  second.resume = true;
  ToyRun c = makeToyRun(shape, second);
  ASSERT_OK(c.status);
  auto part2 = c.trainer->run();
  ASSERT_TRUE(part2.isOk()) << part2.status().message();
  EXPECT_EQ(part2->startStep, n);
  EXPECT_EQ(c.backend->runs(bundle::INIT), 0);
  ASSERT_EQ(part2->steps.size(), size_t(shape.steps - n));
  for (size_t i = 0; i < part2->steps.size(); ++i) {
    const StepRecord &want = full->steps[size_t(n) + i];
    const StepRecord &got = part2->steps[i];
    EXPECT_EQ(got.step, want.step);
    EXPECT_EQ(std::memcmp(&got.loss, &want.loss, 4), 0)
        << "step " << got.step << ": " << got.loss << " vs " << want.loss;
    EXPECT_EQ(std::memcmp(&got.gradNorm, &want.gradNorm, 4), 0)
        << "step " << got.step;
  }
  for (const char *slot : {"w", "b", "adam_m.w", "adam_v.w", "step", "cache.w"})
    EXPECT_EQ(c.backend->slotBytes(slot), a.backend->slotBytes(slot)) << slot;
}

TEST(Trainer, ResumeWithoutTheWeightCacheWouldDiverge) {
  // The check above can fail: the cache is state that INIT alone does not
  // recreate, so a checkpoint missing it resumes differently.
  ToyShape shape;
  shape.steps = 4;
  TrainerOptions o;
  o.checkpointDir = freshTestDir("trainer-cache");
  o.steps = 2;
  ToyRun a = makeToyRun(shape, o);
  ASSERT_OK(a.status);
  ASSERT_TRUE(a.trainer->run().isOk());
  auto w = a.backend->slotBytes("w");
  auto cache = a.backend->slotBytes("cache.w");
  // The cache is the bf16 of the weights: not the weights' bytes.
  EXPECT_NE(std::vector<uint8_t>(w.begin(), w.begin() + 2),
            std::vector<uint8_t>(cache.begin(), cache.begin() + 2));
  auto saved = checkpoint::loadTrainCheckpoint(o.checkpointDir + "/step-2");
  ASSERT_TRUE(saved.isOk()) << saved.status().message();
  bool hasCache = false;
  for (const auto &t : saved->state)
    hasCache |= t.name == "cache.w" && t.data == cache;
  EXPECT_TRUE(hasCache);
  bool hfName = false;
  for (const auto &t : saved->model)
    hfName |= t.name == "model.embed_tokens.weight" && t.data == w;
  EXPECT_TRUE(hfName);
}

TEST(Trainer, FailedSaveKeepsTheLastGoodCheckpoint) {
  ToyShape shape;
  shape.steps = 4;
  TrainerOptions o;
  o.checkpointDir = freshTestDir("trainer-atomic");
  o.checkpointInterval = 2;
  o.checkpointAfterFile = [](const std::string &path) {
    if (path.find("/.step-4.partial/train_state") != std::string::npos)
      return Status::error("injected: disk full");
    return Status::ok();
  };
  ToyRun r = makeToyRun(shape, o);
  ASSERT_OK(r.status);
  auto result = r.trainer->run();
  ASSERT_FALSE(result.isOk());
  const std::string &msg = result.status().message();
  EXPECT_NE(msg.find("injected: disk full"), std::string::npos) << msg;
  EXPECT_NE(msg.find("step-2 is intact"), std::string::npos) << msg;
  EXPECT_TRUE(exists(o.checkpointDir + "/step-2/trainer.json"));
  EXPECT_FALSE(exists(o.checkpointDir + "/step-4"));
  EXPECT_FALSE(exists(o.checkpointDir + "/.step-4.partial"));
  EXPECT_EQ(checkpoint::latestTrainCheckpoint(o.checkpointDir),
            o.checkpointDir + "/step-2");

  // And the run resumes from it.
  TrainerOptions again;
  again.checkpointDir = o.checkpointDir;
  again.resume = true;
  ToyRun back = makeToyRun(shape, again);
  ASSERT_OK(back.status);
  auto resumed = back.trainer->run();
  ASSERT_TRUE(resumed.isOk()) << resumed.status().message();
  EXPECT_EQ(resumed->startStep, 2);
  EXPECT_EQ(resumed->steps.size(), 2u);
}

TEST(Trainer, KeepsTheNewestCheckpoints) {
  ToyShape shape;
  shape.steps = 6;
  TrainerOptions o;
  o.checkpointDir = freshTestDir("trainer-keep");
  o.checkpointInterval = 1;
  o.keepCheckpoints = 2;
  ToyRun r = makeToyRun(shape, o);
  ASSERT_OK(r.status);
  ASSERT_TRUE(r.trainer->run().isOk());
  EXPECT_FALSE(exists(o.checkpointDir + "/step-4"));
  EXPECT_TRUE(exists(o.checkpointDir + "/step-5"));
  EXPECT_TRUE(exists(o.checkpointDir + "/step-6"));
}

TEST(Trainer, ResumeNeedsACheckpointDirectory) {
  TrainerOptions o;
  o.resume = true;
  ToyRun r = makeToyRun(ToyShape{}, o);
  ASSERT_FALSE(r.status.isOk());
  EXPECT_NE(r.status.message().find("--checkpoint-dir"), std::string::npos);
}

// A pipeline bundle trains through the backend's pipeline step; a backend
// without one (this toy's) is told so, naming the layout.
TEST(Trainer, APipelineBundleNeedsABackendThatRunsItsStep) {
  ToyRun r = makeToyRun(ToyShape{}, {}, [](bundle::Bundle &b) {
    b.mutable_pipeline()->set_ranks(2);
    b.set_world_size(2);
  });
  ASSERT_FALSE(r.status.isOk());
  EXPECT_NE(r.status.message().find(
                "the bundle is pipeline parallel (pipeline 2 × data 1) but "
                "this backend runs no pipeline step"),
            std::string::npos)
      << r.status.message();
}

// One command line starts a job and restarts it: --resume with nothing
// saved yet (no directory, or an empty one) starts at step 0 and says so,
// and the next --resume continues from what that run saved.
TEST(Trainer, ResumeWithNoCheckpointYetStartsFresh) {
  ToyShape shape;
  shape.steps = 4;
  std::string parent = freshTestDir("trainer-resume-fresh");
  ASSERT_EQ(::mkdir(parent.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((parent + "/empty").c_str(), 0755), 0);
  for (const std::string &dir : {parent + "/new", parent + "/empty"}) {
    TrainerOptions o;
    o.checkpointDir = dir;
    o.resume = true;
    o.steps = 2;
    ToyRun r = makeToyRun(shape, o);
    ASSERT_OK(r.status);
    ::testing::internal::CaptureStderr();
    auto result = r.trainer->run();
    std::string err = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(result.isOk()) << result.status().message();
    EXPECT_EQ(result->startStep, 0);
    EXPECT_EQ(r.backend->runs(bundle::INIT), 1);
    EXPECT_NE(err.find("note: --resume: " + dir +
                       " holds no checkpoint yet; starting from step 0"),
              std::string::npos)
        << err;
    EXPECT_TRUE(exists(dir + "/step-2/trainer.json"));

    o.steps = -1;
    ToyRun again = makeToyRun(shape, o);
    ASSERT_OK(again.status);
    ::testing::internal::CaptureStderr();
    auto resumed = again.trainer->run();
    err = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(resumed.isOk()) << resumed.status().message();
    EXPECT_EQ(resumed->startStep, 2);
    EXPECT_EQ(err.find("holds no checkpoint"), std::string::npos) << err;
  }
}

// Pruning removes an old checkpoint's trainer.json before anything else:
// a process killed just after the first removal leaves a directory that
// no longer counts as complete, never one that looks complete with files
// missing; the next save removes what is left of it.
TEST(TrainCheckpoint, PruningKilledPartWayLeavesNoCompleteLookingCheckpoint) {
  std::string dir = freshTestDir("checkpoint-prune-kill");
  auto at = [](int64_t step) {
    checkpoint::TrainCheckpoint c;
    c.step = step;
    c.dataPosition = "0";
    c.bundleHash = "00";
    c.model.push_back({"w", DType::F32, {2}, std::vector<uint8_t>(8, 1)});
    c.state.push_back({"step", DType::F32, {1}, std::vector<uint8_t>(4, 0)});
    return c;
  };
  checkpoint::SaveOptions keepOne;
  keepOne.keep = 1;
  ASSERT_TRUE(checkpoint::saveTrainCheckpoint(dir, at(1), keepOne).isOk());
  ASSERT_TRUE(exists(dir + "/step-1/trainer.json"));

  // The save of step 2 prunes step 1; the process dies at the first file
  // that pruning removes.
  checkpoint::SaveOptions killed = keepOne;
  killed.afterRemove = [](const std::string &) { std::raise(SIGKILL); };
  EXPECT_EXIT(
      { (void)checkpoint::saveTrainCheckpoint(dir, at(2), killed); },
      ::testing::KilledBySignal(SIGKILL), "");
  EXPECT_TRUE(exists(dir + "/step-2/trainer.json"));
  EXPECT_TRUE(exists(dir + "/step-1"));
  EXPECT_FALSE(exists(dir + "/step-1/trainer.json"));
  EXPECT_TRUE(exists(dir + "/step-1/model.safetensors"));

  // Without DIR/latest the scan falls back to the complete step-N
  // directories: step 2, and step 1 only while it was complete.
  ASSERT_EQ(std::remove((dir + "/latest").c_str()), 0);
  EXPECT_EQ(checkpoint::latestTrainCheckpoint(dir), dir + "/step-2");
  ASSERT_EQ(std::system(("rm -rf '" + dir + "/step-2'").c_str()), 0);
  EXPECT_EQ(checkpoint::latestTrainCheckpoint(dir), "");

  // The next save's pruning clears the remains.
  ASSERT_TRUE(checkpoint::saveTrainCheckpoint(dir, at(3), keepOne).isOk());
  EXPECT_FALSE(exists(dir + "/step-1"));
  EXPECT_TRUE(exists(dir + "/step-3/trainer.json"));
}

TEST(Trainer, RefusesAnInputItCannotFill) {
  bundle::Bundle b = makeToyBundle(ToyShape{});
  auto *in = b.mutable_ranks(0)->mutable_programs(1)->add_inputs();
  in->set_name("image_patches");
  in->set_slot(0);
  ToyBackend backend(b);
  TrainDataOptions d;
  d.rows = 2, d.sequenceLength = 8, d.vocabSize = 64;
  auto data = TrainData::open(d);
  ASSERT_TRUE(data.isOk());
  TrainerOptions o;
  o.out = nullptr;
  auto t = Trainer::create(backend, **data, o);
  ASSERT_FALSE(t.isOk());
  EXPECT_NE(t.status().message().find("'image_patches'"), std::string::npos)
      << t.status().message();
}

// A tool that runs the programs itself (octet-profile) starts as training
// does and, before each run, writes the program's inputs over whatever
// later activations left in them: the batches octet-run --synthetic trains
// on, every token's loss counted, and the step's learning rate.
TEST(Trainer, WritesAProgramsInputsBeforeEachRunOfATool) {
  ToyShape shape;
  TrainerOptions o;
  o.steps = 1;
  ToyRun r = makeToyRun(shape, o, [](bundle::Bundle &b) {
    bundle::MemoryPlan *plan = b.mutable_plan();
    bundle::Slot *lr = plan->add_slots();
    lr->set_name("lr.in");
    lr->set_kind(bundle::IO);
    lr->set_dtype(bundle::F32);
    lr->set_bytes(4);
    lr->set_offset(plan->arenas(0).bytes());
    lr->set_program("optimizer");
    plan->mutable_arenas(0)->set_bytes(plan->arenas(0).bytes() + 256);
    for (bundle::Program &p : *b.mutable_ranks(0)->mutable_programs())
      if (p.kind() == bundle::OPTIMIZER_STEP) {
        bundle::NamedSlot *in = p.add_inputs();
        in->set_name("lr");
        in->set_slot(uint32_t(plan->slots_size() - 1));
      }
  });
  ASSERT_OK(r.status);
  TrainResult started;
  ASSERT_OK(r.trainer->start(started));
  EXPECT_EQ(r.backend->runs(bundle::INIT), 1);
  EXPECT_EQ(r.backend->slotBytes("grad.w"),
            std::vector<uint8_t>(size_t(shape.vocab) * 4, 0));
  const bundle::Bundle &b = r.backend->bundle();
  auto w = bundle::initialBytes(b.parameters(0).init(), bundle::F32,
                                uint64_t(shape.vocab), "w");
  ASSERT_TRUE(w.isOk()) << w.status().message();
  EXPECT_EQ(r.backend->slotBytes("w"), std::vector<uint8_t>(w->begin(), w->end()));

  auto expected = openToyData(shape);
  ASSERT_TRUE(expected.isOk()) << expected.status().message();
  auto bytesOf = [](const auto &v) {
    auto *p = reinterpret_cast<const uint8_t *>(v.data());
    return std::vector<uint8_t>(p, p + v.size() * sizeof(v[0]));
  };
  for (int run = 0; run < 2; ++run) {
    for (int i = 0; i < b.plan().slots_size(); ++i)
      if (b.plan().slots(i).program() == "train")
        ASSERT_OK(r.backend->zeroSlot(uint32_t(i)));
    ASSERT_OK(r.trainer->writeInputs(bundle::TRAIN_MICROBATCH, 1));
    data::PackedBatch batch;
    ASSERT_OK((*expected)->next(batch));
    EXPECT_EQ(r.backend->slotBytes("tokens"), bytesOf(batch.inputs));
    EXPECT_EQ(r.backend->slotBytes("labels"), bytesOf(batch.targets));
    EXPECT_EQ(r.backend->slotBytes("positions"), bytesOf(batch.positionIds));
    EXPECT_EQ(r.backend->slotBytes("loss_mask"),
              bytesOf(std::vector<float>(size_t(shape.rows * shape.seq), 1)));
  }
  ASSERT_OK(r.trainer->writeInputs(bundle::OPTIMIZER_STEP, 1));
  std::vector<uint8_t> lr = r.backend->slotBytes("lr.in");
  float rate = 0;
  std::memcpy(&rate, lr.data(), 4);
  EXPECT_FLOAT_EQ(rate, float(shape.lr));
  Status eval = r.trainer->writeInputs(bundle::EVAL, 1);
  EXPECT_FALSE(eval.isOk());
  EXPECT_NE(eval.message().find("EVAL"), std::string::npos) << eval.message();
}

TEST(Trainer, InitWeightsComeFromSafetensorsByHfName) {
  ToyShape shape;
  std::string dir = freshTestDir("trainer-weights");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  std::vector<float> w(size_t(shape.vocab));
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = float(i) / 64.0f;
  float b = 0.25f;
  std::vector<hf::NamedTensor> tensors = {
      {"model.embed_tokens.weight",
       DType::F32,
       {shape.vocab},
       std::vector<uint8_t>(reinterpret_cast<uint8_t *>(w.data()),
                            reinterpret_cast<uint8_t *>(w.data() + w.size()))},
      {"b",
       DType::F32,
       {1},
       std::vector<uint8_t>(reinterpret_cast<uint8_t *>(&b),
                            reinterpret_cast<uint8_t *>(&b + 1))}};
  ASSERT_OK(hf::writeCheckpoint(dir, tensors));
  TrainerOptions o;
  o.initWeights = dir;
  o.steps = 1;
  ToyRun r = makeToyRun(shape, o);
  ASSERT_OK(r.status);
  TrainResult result;
  ASSERT_OK(r.trainer->start(result));
  EXPECT_EQ(r.backend->slotBytes("w"), tensors[0].data);
  EXPECT_EQ(r.backend->slotBytes("b"), tensors[1].data);
  // INIT ran after the weights: the cache holds them.
  EXPECT_EQ(r.backend->runs(bundle::INIT), 1);
}

TEST(Trainer, TwoDataParallelRanksTrainAsOneAtTheSameGlobalBatch) {
  ToyShape one;
  one.steps = 6;
  one.accum = 2;
  TrainerOptions single;
  single.checkpointDir = freshTestDir("trainer-dp1");
  ToyRun a = makeToyRun(one, single);
  ASSERT_OK(a.status);
  auto want = a.trainer->run();
  ASSERT_TRUE(want.isOk()) << want.status().message();

  // Two ranks of one microbatch each: rank r takes microbatch r of every
  // global batch, as the single rank's second microbatch is microbatch 1.
  ToyShape half = one;
  half.accum = 1;
  TrainerOptions o;
  o.checkpointDir = freshTestDir("trainer-dp2");
  o.evalInterval = 3;
  o.evalBatches = 3;
  DataParallelRuns d = runDataParallel(2, half, o);
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(d.runs[size_t(r)].status);
    ASSERT_TRUE(d.results[size_t(r)].isOk())
        << "rank " << r << ": " << d.results[size_t(r)].status().message();
  }
  const TrainResult &r0 = *d.results[0], &r1 = *d.results[1];
  ASSERT_EQ(r0.steps.size(), want->steps.size());
  for (size_t i = 0; i < r0.steps.size(); ++i) {
    // The printed loss is the global batch's, the same on both ranks.
    EXPECT_NEAR(r0.steps[i].loss, want->steps[i].loss,
                1e-6f * want->steps[i].loss)
        << "step " << i + 1;
    EXPECT_EQ(r0.steps[i].loss, r1.steps[i].loss) << "step " << i + 1;
    EXPECT_NEAR(r0.steps[i].gradNorm, want->steps[i].gradNorm,
                1e-5f * want->steps[i].gradNorm)
        << "step " << i + 1;
  }
  for (const char *slot : {"w", "b", "adam_m.w", "adam_v.w"}) {
    expectSameFloats(d.runs[0].backend->slotBytes(slot),
                     a.backend->slotBytes(slot), slot);
    EXPECT_EQ(d.runs[0].backend->slotBytes(slot),
              d.runs[1].backend->slotBytes(slot))
        << slot << " differs between the ranks";
  }
  // The held-out batches are shared out (2 on rank 0, 1 on rank 1) and
  // their loss summed: both ranks report the mean of all 3.
  ASSERT_EQ(r0.evals.size(), 2u);
  EXPECT_EQ(d.runs[0].backend->runs(bundle::EVAL), 2 * 2);
  EXPECT_EQ(d.runs[1].backend->runs(bundle::EVAL), 2 * 1);
  EXPECT_EQ(r0.evals[0].loss, r1.evals[0].loss);
  EXPECT_EQ(d.groups[1]->lastBeat, 6);
  // Rank 0 alone writes checkpoints.
  EXPECT_EQ(r0.checkpoints.size(), 1u);
  EXPECT_TRUE(r1.checkpoints.empty());

  // Rank 0's checkpoint resumes on one rank, with the data position of
  // the job, and continues as the single rank would have.
  ToyShape longer = one;
  longer.steps = 9;
  TrainerOptions straight;
  ToyRun b = makeToyRun(longer, straight);
  ASSERT_OK(b.status);
  auto nine = b.trainer->run();
  ASSERT_TRUE(nine.isOk()) << nine.status().message();
  TrainerOptions resumed;
  resumed.checkpointDir = o.checkpointDir;
  resumed.resume = true;
  ToyRun c = makeToyRun(longer, resumed);
  ASSERT_OK(c.status);
  auto rest = c.trainer->run();
  ASSERT_TRUE(rest.isOk()) << rest.status().message();
  EXPECT_EQ(rest->startStep, 6);
  ASSERT_EQ(rest->steps.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(rest->steps[i].loss, nine->steps[6 + i].loss,
                1e-5f * nine->steps[6 + i].loss)
        << "step " << 7 + i;
}

// With two microbatches a rank, the gradient sums are reduced once, after
// the second: reducing after each would count the first microbatch twice.
TEST(Trainer, DataParallelRanksReduceOnlyTheMicrobatchThatCompletesAStep) {
  ToyShape one;
  one.steps = 4;
  one.accum = 4;
  TrainerOptions single;
  single.checkpointDir = freshTestDir("trainer-dp1-accum4");
  ToyRun a = makeToyRun(one, single);
  ASSERT_OK(a.status);
  auto want = a.trainer->run();
  ASSERT_TRUE(want.isOk()) << want.status().message();

  ToyShape half = one;
  half.accum = 2;
  TrainerOptions o;
  o.checkpointDir = freshTestDir("trainer-dp2-accum2");
  DataParallelRuns d = runDataParallel(2, half, o);
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(d.runs[size_t(r)].status);
    ASSERT_TRUE(d.results[size_t(r)].isOk())
        << "rank " << r << ": " << d.results[size_t(r)].status().message();
  }
  ASSERT_EQ(d.results[0]->steps.size(), want->steps.size());
  for (size_t i = 0; i < want->steps.size(); ++i)
    EXPECT_NEAR(d.results[0]->steps[i].gradNorm, want->steps[i].gradNorm,
                1e-5f * want->steps[i].gradNorm)
        << "step " << i + 1;
  for (const char *slot : {"w", "b", "adam_m.w", "adam_v.w"})
    expectSameFloats(d.runs[0].backend->slotBytes(slot),
                     a.backend->slotBytes(slot), slot);
}

TEST(Trainer, RefusesADataParallelGroupTheBundleWasNotCompiledFor) {
  ToyShape shape;
  bundle::Bundle b = makeToyBundle(shape);
  bundle::Group *g = b.add_groups();
  g->set_name("data");
  g->add_ranks(0);
  g->add_ranks(1);
  ToyBackend backend(b);
  TrainDataOptions d;
  d.rows = uint32_t(shape.rows);
  d.sequenceLength = uint32_t(shape.seq);
  d.vocabSize = shape.vocab;
  auto data = TrainData::open(d);
  ASSERT_TRUE(data.isOk()) << data.status().message();
  TrainerOptions o;
  o.out = nullptr;
  auto t = Trainer::create(backend, **data, o);
  ASSERT_FALSE(t.isOk());
  EXPECT_NE(t.status().message().find(
                "compiled for 2 data-parallel ranks (train.parallel.data) "
                "but this rank is one of 1"),
            std::string::npos)
      << t.status().message();
}

TEST(TrainData, RefusesADatasetBeyondTheVocabulary) {
  std::string prefix = freshTestDir("trainer-vocab");
  auto writer =
      data::IndexedDatasetWriter::create(prefix, data::TokenDType::Int32);
  ASSERT_TRUE(writer.isOk()) << writer.status().message();
  ASSERT_OK(writer->addSequence({1, 2, 3, 70000, 5}));
  writer->endDocument();
  ASSERT_OK(writer->finalize());
  TrainDataOptions d;
  d.kind = "indexed";
  d.path = prefix;
  d.rows = 1, d.sequenceLength = 16, d.vocabSize = 32000;
  auto data = TrainData::open(d);
  ASSERT_FALSE(data.isOk());
  const std::string &msg = data.status().message();
  EXPECT_NE(msg.find("token id 70000"), std::string::npos) << msg;
  EXPECT_NE(msg.find("32000"), std::string::npos) << msg;
  EXPECT_NE(msg.find("vocab_size of at least 70001"), std::string::npos) << msg;
}

// A Megatron dataset of `documents` documents of varied lengths, ids below
// 100.
void writeDataset(const std::string &prefix, int documents) {
  auto writer =
      data::IndexedDatasetWriter::create(prefix, data::TokenDType::UInt16);
  ASSERT_TRUE(writer.isOk()) << writer.status().message();
  for (int d = 0; d < documents; ++d) {
    std::vector<int32_t> tokens(size_t(5 + d % 7));
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = int32_t((d * 13 + int(i) * 7) % 100);
    ASSERT_OK(writer->addSequence(tokens));
    writer->endDocument();
  }
  ASSERT_OK(writer->finalize());
}

TEST(TrainData, IndexedBatchesResumeAndEvaluateTheSameHeldOutRows) {
  std::string dir = freshTestDir("trainer-indexed");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  writeDataset(dir + "/train", 40);
  writeDataset(dir + "/valid", 6);
  TrainDataOptions d;
  d.kind = "indexed";
  d.path = dir + "/train";
  d.evalPath = dir + "/valid";
  d.rows = 2, d.sequenceLength = 16, d.vocabSize = 100, d.seed = 5;
  auto a = TrainData::open(d);
  auto b = TrainData::open(d);
  ASSERT_TRUE(a.isOk()) << a.status().message();
  ASSERT_TRUE(b.isOk()) << b.status().message();
  data::PackedBatch x, y;
  for (int i = 0; i < 3; ++i)
    ASSERT_OK((*a)->next(x));
  ASSERT_OK((*b)->restore((*a)->position()));
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK((*a)->next(x));
    ASSERT_OK((*b)->next(y));
    EXPECT_EQ(x.inputs, y.inputs) << i;
    EXPECT_EQ(x.lossMask, y.lossMask) << i;
    EXPECT_EQ(x.cuSeqlens, y.cuSeqlens) << i;
  }
  ASSERT_TRUE((*a)->hasEval());
  ASSERT_OK((*a)->startEval());
  ASSERT_OK((*a)->nextEval(x));
  ASSERT_OK((*a)->nextEval(y));
  ASSERT_OK((*a)->startEval());
  data::PackedBatch again;
  ASSERT_OK((*a)->nextEval(again));
  EXPECT_EQ(again.inputs, x.inputs);
  EXPECT_FALSE((*b)->restore("synthetic:3").isOk());
}

TEST(TrainData, SyntheticBatchesResumeFromTheirPosition) {
  TrainDataOptions d;
  d.rows = 2, d.sequenceLength = 4, d.vocabSize = 50, d.seed = 3;
  auto a = TrainData::open(d);
  auto b = TrainData::open(d);
  ASSERT_TRUE(a.isOk() && b.isOk());
  data::PackedBatch x, y;
  ASSERT_OK((*a)->next(x));
  ASSERT_OK((*a)->next(x));
  ASSERT_OK((*b)->restore((*a)->position()));
  ASSERT_OK((*a)->next(x));
  ASSERT_OK((*b)->next(y));
  EXPECT_EQ(x.inputs, y.inputs);
  EXPECT_EQ(x.targets, y.targets);
  // Labels are the next token.
  EXPECT_EQ(x.targets[0], x.inputs[1]);
  EXPECT_FALSE((*b)->restore("text:3").isOk());
}

TEST(TrainData, APositionResumesWithAnotherMicroBatchSize) {
  // Two batches of 2 rows read, then a run of 4-row batches continues at
  // row 4 with the rows the 2-row run would have read next.
  TrainDataOptions two;
  two.rows = 2, two.sequenceLength = 4, two.vocabSize = 50, two.seed = 3;
  TrainDataOptions four = two;
  four.rows = 4;
  auto a = TrainData::open(two);
  auto b = TrainData::open(four);
  ASSERT_TRUE(a.isOk() && b.isOk());
  data::PackedBatch x, y, whole;
  ASSERT_OK((*a)->next(x));
  ASSERT_OK((*a)->next(x));
  EXPECT_EQ((*a)->position(), "synthetic:row=4");
  ASSERT_OK((*b)->restore((*a)->position()));
  ASSERT_OK((*a)->next(x));
  ASSERT_OK((*a)->next(y));
  ASSERT_OK((*b)->next(whole));
  x.inputs.insert(x.inputs.end(), y.inputs.begin(), y.inputs.end());
  EXPECT_EQ(whole.inputs, x.inputs);
  // Row 6 is not a whole number of 4-row batches.
  ASSERT_OK((*a)->next(x));
  Status odd = (*b)->restore((*a)->position());
  ASSERT_FALSE(odd.isOk());
  EXPECT_NE(odd.message().find("row 10, which is not a whole number of "
                               "batches of 4 rows"),
            std::string::npos)
      << odd.message();
  // A position from before rows were counted: batches of this run's rows.
  ASSERT_OK((*b)->restore("synthetic:1"));
  EXPECT_EQ((*b)->position(), "synthetic:row=4");
}

} // namespace
} // namespace octet::test

namespace octet::test {
namespace {

// A usage error as a Status carrying its one line; help and version are not
// asked for here.
StatusOr<RunArgs> parse(std::vector<std::string> args) {
  RunArgs a;
  cli::Outcome outcome = parseRunArgs(args, a);
  if (outcome.isUsageError())
    return Status::error(outcome.text());
  return a;
}

TEST(RunArgs, ParsesATrainingRun) {
  auto a = parse({"x.octet", "--steps", "20", "--data", "corpus/train",
                  "--eval-data", "corpus/valid", "--checkpoint-dir", "ck",
                  "--tensorboard", "tb", "--keep-checkpoints", "0"});
  ASSERT_TRUE(a.isOk()) << a.status().message();
  EXPECT_EQ(a->bundle, "x.octet");
  EXPECT_EQ(a->trainer.steps, 20);
  EXPECT_EQ(a->dataKind, "indexed");
  EXPECT_EQ(a->dataPath, "corpus/train");
  EXPECT_EQ(a->evalPath, "corpus/valid");
  EXPECT_EQ(a->trainer.checkpointDir, "ck");
  EXPECT_EQ(a->trainer.tensorboardDir, "tb");
  EXPECT_EQ(a->trainer.keepCheckpoints, 0);
  EXPECT_TRUE(a->trainer.graph);
}

TEST(RunArgs, UsageErrorsSayWhatIsWrong) {
  struct Case {
    std::vector<std::string> args;
    const char *message;
  } cases[] = {
      {{}, "missing BUNDLE.octet"},
      {{"x.octet", "--steps"}, "--steps needs a value"},
      {{"x.octet", "--steps", "0"},
       "--steps takes a whole number of at least 1"},
      {{"x.octet", "--steps", "ten"}, "got 'ten'"},
      {{"x.octet", "--data"}, "--data needs a value"},
      {{"x.octet", "--synthetic", "--data", "p"}, "give one of --synthetic"},
      {{"x.octet", "--resume"}, "--resume needs --checkpoint-dir"},
      {{"x.octet", "--resume", "--checkpoint-dir", "d", "--init-from", "w"},
       "give one"},
      {{"x.octet", "--eval-data", "p"}, "held-out split of --data"},
      {{"x.octet", "--frobnicate"}, "unknown option --frobnicate"},
      {{"x.octet", "y.octet"}, "one bundle at a time"},
      {{"x.octet", "--bench", "--checkpoint-dir", "d"}, "--bench does not"},
  };
  for (const Case &c : cases) {
    auto a = parse(c.args);
    ASSERT_FALSE(a.isOk()) << c.message;
    EXPECT_NE(a.status().message().find(c.message), std::string::npos)
        << a.status().message();
  }
}

} // namespace
} // namespace octet::test
