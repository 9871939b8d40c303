// octet-run --timeline's host side: the interval arithmetic of its summary
// and its Chrome trace, from records made by hand (the GPU test records
// real ones).

#include "runtime/exec/StepTimeline.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace octet;

namespace {

TimelineRecord record(TimelineKind kind, int stream, double begin, double end,
                      int run, const std::string &label = "") {
  TimelineRecord r;
  r.kind = kind;
  r.stream = stream;
  r.beginMs = begin;
  r.endMs = end;
  r.run = run;
  r.label = label.empty() ? timelineKindName(kind) : label;
  r.program = run == 0 ? bundle::TRAIN_MICROBATCH : bundle::OPTIMIZER_STEP;
  return r;
}

// Two program runs. Run 0 (compute stream 0, one communication stream):
//   stream 0: launch [0,4] gemm [4,7] wait [7,8] launch [8,9.5]
//             join [9.5,10]                      program [0,10]
//   stream 1: wait [1,2] collective [2,6] (inside the compute) [6.5,9]
//             (partly beside it) [9.5,10] (beside the join alone)
// Run 1: stream 0 launch [10.5,12], its own collective [12,13], launch
// [13,16], program [10.5,16]; stream 2 a group of two collectives sharing
// [11.5,14].
std::vector<TimelineRecord> twoRuns() {
  using K = TimelineKind;
  std::vector<TimelineRecord> v = {
      record(K::Launch, 0, 0, 4, 0, "embed"),
      record(K::Gemm, 0, 4, 7, 0, "layers.0.mlp.up fprop"),
      record(K::Wait, 0, 7, 8, 0),
      record(K::Launch, 0, 8, 9.5, 0),
      record(K::Wait, 0, 9.5, 10, 0),
      record(K::Program, 0, 0, 10, 0, "train"),
      record(K::Wait, 1, 1, 2, 0),
      record(K::Collective, 1, 2, 6, 0, "bucket 0"),
      record(K::Collective, 1, 6.5, 9, 0),
      record(K::Collective, 1, 9.5, 10, 0),
      record(K::Launch, 0, 10.5, 12, 1),
      record(K::Collective, 0, 12, 13, 1),
      record(K::Launch, 0, 13, 16, 1),
      record(K::Program, 0, 10.5, 16, 1, "optimizer"),
      record(K::Collective, 2, 11.5, 14, 1, "moments a"),
      record(K::Collective, 2, 11.5, 14, 1, "moments b"),
  };
  v[1].step = 3;
  v[1].m = 512, v[1].n = 2048, v[1].k = 768;
  v[7].step = 9;
  v[7].op = "all_reduce", v[7].dtype = "bf16", v[7].count = 1000;
  v[7].group = "data";
  v[14].ncclGroup = v[15].ncclGroup = 2;
  return v;
}

} // namespace

TEST(StepTimeline, UnionAndOverlapOfIntervals) {
  // Partly overlapping, nested, touching, empty.
  EXPECT_EQ(unionMs({{0, 2}, {1, 3}, {5, 6}, {5.5, 5.75}, {7, 7}}), 4.0);
  EXPECT_EQ(unionMs({{3, 4}, {0, 1}, {1, 2}}), 3.0);
  EXPECT_EQ(unionMs({}), 0.0);
  EXPECT_EQ(overlapMs({{0, 4}, {6, 8}}, {{3, 7}}), 2.0);
  // The second list joins into [2,5].
  EXPECT_EQ(overlapMs({{0, 10}}, {{2, 3}, {4, 5}, {2.5, 4.5}}), 3.0);
  EXPECT_EQ(overlapMs({{0, 2.5}, {3, 10}}, {{2, 3}, {4, 5}}), 1.5);
  EXPECT_EQ(overlapMs({{0, 1}}, {{1, 2}}), 0.0);
  EXPECT_EQ(overlapMs({{0, 1}, {0, 1}}, {{0.5, 3}}), 0.5);
  EXPECT_EQ(overlapMs({}, {{0, 1}}), 0.0);
}

TEST(StepTimeline, SummaryPerRunAndForTheStep) {
  StepTimelineSummary s = summarizeStepTimeline(twoRuns());
  ASSERT_EQ(s.runs.size(), 2u);

  const TimelineRunSummary &train = s.runs[0];
  EXPECT_EQ(train.run, 0);
  EXPECT_EQ(train.program, bundle::TRAIN_MICROBATCH);
  EXPECT_EQ(train.spanMs, 10.0);
  // Waits and the program's own record occupy no stream.
  ASSERT_EQ(train.busyMs.size(), 2u);
  EXPECT_EQ(train.busyMs[0], 4 + 3 + 1.5);
  EXPECT_EQ(train.busyMs[1], 4 + 2.5 + 0.5);
  EXPECT_EQ(train.sideCollectiveMs, 7.0);
  // [2,6] wholly, [6.5,7] and [8,9] of the second, none of the third.
  EXPECT_EQ(train.overlappedMs, 4 + 0.5 + 1);

  const TimelineRunSummary &opt = s.runs[1];
  EXPECT_EQ(opt.program, bundle::OPTIMIZER_STEP);
  EXPECT_EQ(opt.spanMs, 5.5);
  ASSERT_EQ(opt.busyMs.size(), 3u);
  EXPECT_EQ(opt.busyMs[0], 1.5 + 1 + 3);
  EXPECT_EQ(opt.busyMs[1], 0.0);
  // The group's two records share their interval: counted once.
  EXPECT_EQ(opt.busyMs[2], 2.5);
  EXPECT_EQ(opt.sideCollectiveMs, 2.5);
  // The compute stream's own collective [12,13] hides nothing.
  EXPECT_EQ(opt.overlappedMs, 0.5 + 1);

  EXPECT_EQ(s.step.run, -1);
  EXPECT_EQ(s.step.spanMs, 16.0);
  ASSERT_EQ(s.step.busyMs.size(), 3u);
  EXPECT_EQ(s.step.busyMs[0], 8.5 + 5.5);
  EXPECT_EQ(s.step.busyMs[1], 7.0);
  EXPECT_EQ(s.step.busyMs[2], 2.5);
  EXPECT_EQ(s.step.sideCollectiveMs, 9.5);
  EXPECT_EQ(s.step.overlappedMs, 5.5 + 1.5);
}

TEST(StepTimeline, DescribesTheStepThenEachRun) {
  std::string text =
      describeStepTimeline(summarizeStepTimeline(twoRuns()), 12, 0);
  EXPECT_EQ(text,
            "timeline of step 12 (rank 0): 2 program runs, span 16.000 ms; "
            "busy: stream 0 14.000 ms, stream 1 7.000 ms, stream 2 2.500 ms; "
            "collectives on the communication streams 9.500 ms, 7.000 ms "
            "(74%) of it beside compute\n"
            "  run 0 train-microbatch: span 10.000 ms; busy: stream 0 8.500 "
            "ms, stream 1 7.000 ms; collectives on the communication streams "
            "7.000 ms, 5.500 ms (79%) of it beside compute\n"
            "  run 1 optimizer-step: span 5.500 ms; busy: stream 0 5.500 ms, "
            "stream 1 0.000 ms, stream 2 2.500 ms; collectives on the "
            "communication streams 2.500 ms, 1.500 ms (60%) of it beside "
            "compute\n");
  TimelineRecord alone =
      record(TimelineKind::Launch, 0, 0, 0.25, 0, "one kernel");
  EXPECT_EQ(describeStepTimeline(summarizeStepTimeline({alone}), 3, 0),
            "timeline of step 3 (rank 0): 1 program run, span 0.250 ms; "
            "busy: stream 0 0.250 ms; no collective on a communication "
            "stream\n"
            "  run 0 train-microbatch: span 0.250 ms; busy: stream 0 0.250 "
            "ms; no collective on a communication stream\n");
}

TEST(StepTimeline, ChromeTraceHasACompleteEventPerRecord) {
  std::vector<TimelineRecord> records = twoRuns();
  auto trace = nlohmann::json::parse(stepTimelineTrace(records, 1, 12));
  ASSERT_TRUE(trace.contains("traceEvents"));
  const auto &events = trace["traceEvents"];
  std::vector<nlohmann::json> complete, names;
  for (const auto &e : events)
    (e["ph"] == "X" ? complete : names).push_back(e);
  ASSERT_EQ(complete.size(), records.size());
  // The rank and its three streams are named.
  ASSERT_EQ(names.size(), 4u);
  EXPECT_EQ(names[0]["name"], "process_name");
  EXPECT_EQ(names[0]["args"]["name"], "rank 1");
  EXPECT_EQ(names[1]["tid"], 0);
  EXPECT_EQ(names[1]["args"]["name"], "stream 0 (compute)");
  EXPECT_EQ(names[3]["args"]["name"], "stream 2 (communication)");
  for (const auto &e : events)
    EXPECT_EQ(e["pid"], 1);

  const auto &gemm = complete[1];
  EXPECT_EQ(gemm["name"], "layers.0.mlp.up fprop");
  EXPECT_EQ(gemm["cat"], "gemm");
  EXPECT_EQ(gemm["ts"].get<double>(), 4000.0);
  EXPECT_EQ(gemm["dur"].get<double>(), 3000.0);
  EXPECT_EQ(gemm["tid"], 0);
  EXPECT_EQ(gemm["args"]["program"], "train-microbatch");
  EXPECT_EQ(gemm["args"]["run"], 0);
  EXPECT_EQ(gemm["args"]["step"], 3);
  EXPECT_EQ(gemm["args"]["m"], 512);
  EXPECT_EQ(gemm["args"]["n"], 2048);
  EXPECT_EQ(gemm["args"]["k"], 768);
  EXPECT_FALSE(gemm["args"].contains("op"));

  const auto &bucket = complete[7];
  EXPECT_EQ(bucket["name"], "bucket 0");
  EXPECT_EQ(bucket["cat"], "collective");
  EXPECT_EQ(bucket["tid"], 1);
  EXPECT_EQ(bucket["ts"].get<double>(), 2000.0);
  EXPECT_EQ(bucket["dur"].get<double>(), 4000.0);
  EXPECT_EQ(bucket["args"]["op"], "all_reduce");
  EXPECT_EQ(bucket["args"]["dtype"], "bf16");
  EXPECT_EQ(bucket["args"]["count"], 1000);
  EXPECT_EQ(bucket["args"]["group"], "data");
  EXPECT_FALSE(bucket["args"].contains("nccl_group"));
  EXPECT_EQ(complete[14]["args"]["nccl_group"], 2);
  EXPECT_EQ(complete[14]["tid"], 2);

  // A wait and a program carry no step index.
  EXPECT_EQ(complete[2]["cat"], "wait");
  EXPECT_FALSE(complete[2]["args"].contains("step"));
  EXPECT_EQ(complete[13]["cat"], "program");
  EXPECT_EQ(complete[13]["name"], "optimizer");
  EXPECT_EQ(complete[13]["ts"].get<double>(), 10500.0);
  EXPECT_EQ(complete[13]["dur"].get<double>(), 5500.0);
  EXPECT_EQ(complete[13]["args"]["run"], 1);
  EXPECT_EQ(trace["otherData"]["training_step"], 12);
  EXPECT_EQ(trace["otherData"]["rank"], 1);
}

TEST(StepTimeline, MarksPerStepCountTheTrainingStepsPrograms) {
  bundle::Bundle b;
  b.mutable_schedule()->set_grad_accum_steps(2);
  auto *rank = b.add_ranks();
  auto *train = rank->add_programs();
  train->set_kind(bundle::TRAIN_MICROBATCH);
  train->add_steps();
  train->add_steps();
  train->add_steps()->add_waits(0);
  auto *opt = rank->add_programs();
  opt->set_kind(bundle::OPTIMIZER_STEP);
  opt->add_steps();
  auto *eval = rank->add_programs();
  eval->set_kind(bundle::EVAL);
  for (int i = 0; i < 5; ++i)
    eval->add_steps();
  // Train: 4 + 2 + 2 + 4, twice; optimizer: 4 + 2; evaluation is no part
  // of a training step.
  EXPECT_EQ(timelineMarksPerStep(b, 0), 2 * 12u + 6u);
  EXPECT_EQ(timelineMarksPerStep(b, 1), 0u);
}

TEST(StepTimeline, CollectivesAreNamedAsTheBundleNamesThem) {
  bundle::Bundle b;
  b.add_groups()->set_name("data");
  bundle::Collective c;
  c.set_op(bundle::REDUCE_SCATTER);
  c.set_dtype(bundle::BF16);
  c.set_count(4096);
  c.set_group(0);
  TimelineRecord r;
  describeCollective(c, b, r);
  EXPECT_EQ(r.op, "reduce_scatter");
  EXPECT_EQ(r.dtype, "bf16");
  EXPECT_EQ(r.count, 4096u);
  EXPECT_EQ(r.group, "data");
}
