// octet-run: the runtime alone. Checks its command line and the files it
// names, loads a bundle, prints how it was built and its memory plan before
// anything runs, opens the training data, then trains on this process's GPU
// (LOCAL_RANK / RANK as torchrun sets them) through the host training loop
// (runtime/exec/Trainer.h). A bundle of several ranks runs as one rank of a
// job (runtime/exec/RankJob.h), under `octet launch` or torchrun.

#include "bundle/Bundle.h"
#include "bundle/Describe.h"
#include "runtime/comm/Launch.h"
#include "runtime/comm/RankEnv.h"
#include "runtime/exec/GoldenCheck.h"
#include "runtime/exec/RankJob.h"
#include "runtime/exec/RunOptions.h"
#include "runtime/exec/Runtime.h"
#include "runtime/exec/RuntimeBackend.h"
#include "runtime/exec/StepTimeline.h"
#include "runtime/exec/TrainData.h"
#include "runtime/exec/Trainer.h"
#include "runtime/metrics/StepMetrics.h"
#include "support/AtomicFile.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <fstream>
#include <optional>
#include <iostream>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using namespace octet;
using namespace octet::bundle;

int fail(const Status &st) {
  std::fprintf(stderr, "octet-run: error: %s\n", st.message().c_str());
  return 1;
}

// The global batch's tokens: every data replica's microbatches (a
// pipeline's ranks share theirs).
int64_t tokensPerStep(const Bundle &b, int gpus) {
  const Schedule &sched = b.schedule();
  int64_t microbatches = b.has_pipeline()
                             ? int64_t(b.pipeline().microbatches())
                             : std::max<int64_t>(1, sched.grad_accum_steps());
  int64_t replicas =
      gpus / std::max<int64_t>(1, b.has_pipeline() ? b.pipeline().ranks() : 1);
  return sched.micro_batch_size() * sched.seq_len() * microbatches * replicas;
}

void writeJson(const std::string &path, const Bundle &b, Runtime &rt,
               const TrainResult &result, int64_t warmup, int gpus,
               comm::BufferRegistration ncclBuffers) {
  const Schedule &sched = b.schedule();
  std::vector<double> seconds;
  for (const StepRecord &s : result.steps)
    if (s.step > result.startStep + warmup)
      seconds.push_back(s.seconds);
  if (seconds.empty())
    return;
  std::sort(seconds.begin(), seconds.end());
  double median = seconds[seconds.size() / 2];
  int64_t tokens = tokensPerStep(b, gpus);
  double tps = double(tokens) / median;
  double tflops = tps / gpus * sched.flops_per_token() / 1e12;
  auto peak = metrics::gpuPeak(rt.device().name());
  std::ofstream js(path);
  js << "{\n \"peer\": \"octet\",\n \"model\": \"" << b.build().model_name()
     << "\",\n \"seq\": " << sched.seq_len()
     << ",\n \"batch\": " << sched.micro_batch_size()
     << ",\n \"tokens_per_step\": " << tokens << ",\n \"device\": \""
     << rt.device().name() << "\",\n \"step_s_median\": " << median
     << ",\n \"gpus\": " << gpus << ",\n \"nccl_buffers\": \""
     << comm::bufferRegistrationName(ncclBuffers)
     << "\",\n \"tokens_per_s\": " << tps
     << ",\n \"tokens_per_s_per_gpu\": " << tps / gpus
     << ",\n \"flops_per_token\": " << sched.flops_per_token()
     << ",\n \"flop_formula\": \"6*N_matmul + 6*L*H*Dh*S (causal "
        "attention)\",\n \"model_tflops\": "
     << tflops;
  if (peak)
    js << ",\n \"mfu_bf16_peak\": " << tflops / peak->bf16Tflops
       << ",\n \"mfu_fp8_peak\": " << tflops / peak->fp8Tflops;
  // peak_mem_allocated_gib is what the step allocates (the plan's arenas),
  // as torch.cuda.max_memory_allocated is for the peers; the device's use
  // adds the context and the runtime's fixed costs.
  js << ",\n \"peak_mem_allocated_gib\": "
     << double(rt.arenaBytes()) / double(uint64_t(1) << 30)
     << ",\n \"plan_bytes\": " << rt.arenaBytes()
     << ",\n \"fixed_cost_bytes\": " << rt.fixedCostBytes()
     << ",\n \"peak_mem_used_gib\": "
     << double(result.peakDeviceBytes) / double(uint64_t(1) << 30);
  // Each program's device time over the timed steps, how much of it the
  // main stream spent at the program's end waiting for the communication
  // stream and in its own collectives (RuntimeOptions.programTimes), and
  // what of the step no program accounts for (the host's turn between
  // programs and steps).
  auto runs = rt.programTimes();
  if (runs) {
    auto summary = summarizeProgramTimes(
        *runs, int64_t(result.steps.size()), int64_t(seconds.size()));
    double inPrograms = 0;
    js << ",\n \"programs\": [";
    for (size_t i = 0; i < summary.size(); ++i) {
      const ProgramTimeSummary &p = summary[i];
      inPrograms += p.medianMs * double(p.runs) / double(seconds.size());
      js << (i ? "," : "") << "\n  {\"program\": \""
         << programKindName(p.kind) << "\", \"runs\": " << p.runs
         << ", \"median_ms\": " << p.medianMs
         << ", \"median_join_wait_ms\": " << p.medianJoinWaitMs
         << ", \"median_main_collective_ms\": " << p.medianMainCollectiveMs
         << "}";
    }
    js << "\n ]";
    if (!summary.empty())
      js << ",\n \"outside_programs_ms\": " << median * 1e3 - inPrograms;
  } else {
    std::fprintf(stderr, "octet-run: note: no program times: %s\n",
                 runs.status().message().c_str());
  }
  // --timeline's recorded step in numbers: how long the communication
  // streams ran collectives, and how much of that the compute stream hid
  // behind work of its own.
  if (!rt.timeline().empty() && !result.steps.empty()) {
    StepTimelineSummary tl = summarizeStepTimeline(rt.timeline());
    js << ",\n \"timeline\": {\"step\": " << result.steps.back().step
       << ", \"span_ms\": " << tl.step.spanMs << ", \"busy_ms_by_stream\": [";
    for (size_t i = 0; i < tl.step.busyMs.size(); ++i)
      js << (i ? ", " : "") << tl.step.busyMs[i];
    js << "], \"side_collective_ms\": " << tl.step.sideCollectiveMs
       << ", \"hidden_collective_ms\": " << tl.step.overlappedMs;
    if (tl.step.sideCollectiveMs > 0)
      js << ", \"hidden_share\": "
         << tl.step.overlappedMs / tl.step.sideCollectiveMs;
    js << "}";
  }
  js << "\n}\n";
}

// --timeline: this rank's recorded step as a Chrome trace, and rank 0's
// summary of it.
Status writeTimeline(const std::string &file, const Runtime &rt,
                     const TrainResult &result, int rank, int ranks) {
  const std::vector<TimelineRecord> &records = rt.timeline();
  if (records.empty() || result.steps.empty()) {
    if (rank == 0)
      std::printf("note: --timeline: no step ran here, nothing recorded\n");
    return Status::ok();
  }
  int64_t step = result.steps.back().step;
  std::string path = rankOutputPath(file, rank);
  OCTET_RETURN_IF_ERROR(
      writeFileAtomically(path, stepTimelineTrace(records, rank, step))
          .withContext("--timeline"));
  if (rank == 0)
    std::printf("%s  trace: %s%s\n",
                describeStepTimeline(summarizeStepTimeline(records), step,
                                     rank)
                    .c_str(),
                path.c_str(),
                ranks > 1 ? (" (rank R > 0: " + file + ".rankR)").c_str()
                          : "");
  return Status::ok();
}

int run(RunArgs &args) {
  auto loaded = readBundle(args.bundle);
  if (!loaded)
    return fail(loaded.status());
  Bundle &b = *loaded;
  auto env = comm::rankEnvFromProcess();
  if (!env)
    return fail(env.status());
  // Rank 0 speaks for the job.
  if (env->rank == 0) {
    describeBuild(b, std::cout);
    describePlan(b, std::cout, args.allSlots ? 0 : 12);
    describePrograms(b, std::cout);
    std::cout.flush();
  }
  if (args.planOnly)
    return 0;
  if (b.world_size() > 1 && !args.golden.empty())
    return fail(Status::error(
        "--golden checks a bundle of one rank; this one was compiled for " +
        std::to_string(b.world_size()) +
        " (train.parallel.data): compile the golden spec with "
        "train.parallel.data: 1"));

  // The data is opened before the GPU is set up, so that a bad corpus is
  // reported at once. The golden check brings its own batches.
  const Schedule &sched = b.schedule();
  StatusOr<std::unique_ptr<TrainData>> data = Status::error("no data");
  if (args.golden.empty()) {
    TrainDataOptions dataOptions = scheduledDataOptions(sched);
    dataOptions.kind = args.dataKind;
    dataOptions.path = args.dataPath;
    dataOptions.evalPath = args.evalPath;
    data = TrainData::open(dataOptions);
    if (!data)
      return fail(data.status());
  }

  // Every rank meets the others (and compares bundles) before the GPU is
  // set up; a failure after that is told to them, so they stop naming this
  // rank rather than wait for it.
  RankJobOptions jobOptions;
  if (!args.ncclBuffers.empty())
    jobOptions.ncclBuffers = comm::bufferRegistrationNamed(args.ncclBuffers);
  auto joined = RankJob::join(b, *env, jobOptions);
  if (!joined)
    return fail(joined.status());
  std::unique_ptr<RankJob> job = std::move(*joined);
  if (!job && jobOptions.ncclBuffers == comm::BufferRegistration::Registered)
    return fail(Status::error(
        "--nccl-buffers registered is for the ranks of a job (octet launch, "
        "or torchrun's variables); this bundle runs alone"));
  auto failJob = [&](const Status &st) {
    if (job) {
      job->reportFailure(st.message());
      // The communicators go first (an unfinished job aborts them), then
      // the runtime's arenas that they may hold registered.
      job.reset();
    }
    return fail(st);
  };
  RuntimeOptions runtimeOptions;
  runtimeOptions.gemmTuning.timed = !args.gemmHeuristic;
  runtimeOptions.gemmTuning.configurations = args.gemmConfigs;
  runtimeOptions.gemmTuning.cacheFile = gemmCachePath(args);
  runtimeOptions.pipelineTimeline = args.trainer.pipelineTimeline;
  runtimeOptions.programTimes = !args.json.empty();
  runtimeOptions.stepTimeline = !args.timeline.empty();
  args.trainer.stepTimeline = !args.timeline.empty();
  std::optional<DeviceAllocator> ncclArenas;
  if (job) {
    runtimeOptions.rank = env->rank;
    runtimeOptions.device.ordinal = env->localRank;
    if (job->arenaRegistration() != comm::BufferRegistration::None) {
      auto allocator = ncclAllocator();
      if (!allocator)
        return failJob(allocator.status());
      ncclArenas = std::move(*allocator);
      runtimeOptions.planAllocator = &*ncclArenas;
    }
  }
  auto rtOr = Runtime::load(b, runtimeOptions);
  if (!rtOr)
    return failJob(rtOr.status());
  Runtime &rt = **rtOr;
  if (job) {
    if (Status st = job->connect(rt); !st)
      return failJob(st);
    args.trainer.dataParallel = job->dataParallel();
    args.trainer.pipeline = job->pipeline();
  }
  std::printf("%s: plan arenas %s, runtime fixed costs %s (CUDA context, "
              "cuBLASLt handle and workspace, modules)\n",
              rt.device().describe().c_str(),
              humanBytes(rt.arenaBytes()).c_str(),
              humanBytes(rt.fixedCostBytes()).c_str());
  for (const std::string &n : rt.notes())
    if (env->rank == 0)
      std::printf("note: %s\n", n.c_str());
  if (env->rank == 0 && rt.gemmTuning().gemms > 0) {
    const GemmTuningReport &t = rt.gemmTuning();
    std::printf("cuBLASLt algorithms for %d GEMMs in %.2f s: %d descriptor(s) "
                "timed, %d from %s, %d GEMM(s) recorded in the bundle, %d "
                "descriptor(s) heuristic-first, %d timed beyond the "
                "heuristic's answers%s\n",
                t.gemms, t.seconds, t.timed, t.cached,
                runtimeOptions.gemmTuning.cacheFile.c_str(), t.recorded,
                t.heuristic, t.widened, t.saved ? " (cache written)" : "");
  }
  if (args.recordAlgorithms && env->rank == 0) {
    int changed = rt.recordAlgorithms(b);
    b.clear_content_hash();
    if (Status st = writeBundle(b, args.bundle); !st)
      return fail(st);
    std::printf("recorded %d cuBLASLt algorithm(s) into %s\n", changed,
                args.bundle.c_str());
  }

  if (!args.golden.empty()) {
    RuntimeBackend backend(rt);
    GoldenCheckOptions golden;
    golden.dir = args.golden;
    golden.graph = args.trainer.graph;
    golden.saveDir = args.goldenSave;
    if (args.allSlots)
      golden.worst = 1 << 30;
    auto passed = runGoldenCheck(backend, golden);
    if (!passed)
      return fail(passed.status());
    return *passed ? 0 : 1;
  }

  if (args.bench) {
    int64_t steps = args.trainer.steps > 0
                        ? args.trainer.steps
                        : std::max<int64_t>(1, sched.steps());
    args.trainer.steps = steps + args.warmup;
    args.trainer.evalInterval = 0;
    args.trainer.checkpointInterval = 0;
  }
  RuntimeBackend backend(rt);
  auto trainer = Trainer::create(backend, **data, args.trainer);
  if (!trainer)
    return failJob(trainer.status());
  auto result = (*trainer)->run();
  if (!result)
    return failJob(result.status());
  trainer->reset();
  const int gpus = job ? int(b.world_size()) : 1;
  const comm::BufferRegistration arenas =
      job ? job->arenaRegistration() : comm::BufferRegistration::None;
  if (job)
    if (Status st = job->finish(); !st)
      return fail(st);
  if (!args.timeline.empty())
    if (Status st = writeTimeline(args.timeline, rt, *result, env->rank,
                                  gpus);
        !st)
      return fail(st);
  // Each rank's own step times: a rank that waits for a slower one shows
  // it in its own JSON.
  if (env->rank != 0) {
    if (!args.json.empty())
      writeJson(rankOutputPath(args.json, env->rank), b, rt, *result,
                args.bench ? args.warmup : 1, gpus, arenas);
    return 0;
  }
  if (!result->steps.empty()) {
    double seconds = 0;
    int64_t timed = 0;
    for (const StepRecord &s : result->steps)
      if (s.step > result->startStep + 1)
        seconds += s.seconds, ++timed;
    int64_t tokens = tokensPerStep(b, gpus);
    std::printf("done: steps %lld..%lld, loss %.4f -> %.4f, %.0f tokens/s "
                "after step 1 (%d GPU%s), peak device memory %s (plan %s + "
                "fixed costs %s)\n",
                (long long)result->steps.front().step,
                (long long)result->steps.back().step,
                double(result->steps.front().loss),
                double(result->steps.back().loss),
                timed ? double(tokens * timed) / seconds : 0.0, gpus,
                gpus == 1 ? "" : "s",
                humanBytes(result->peakDeviceBytes).c_str(),
                humanBytes(rt.arenaBytes()).c_str(),
                humanBytes(rt.fixedCostBytes()).c_str());
  }
  if (!args.json.empty())
    writeJson(args.json, b, rt, *result, args.bench ? args.warmup : 1, gpus,
              arenas);
  return 0;
}

} // namespace

// --gpus N in a process that is not yet a rank: N copies of this very
// command line, each a rank (they see --gpus again and check it against
// WORLD_SIZE); the first to fail decides the exit status.
std::optional<int> launchAsRanks(const RunArgs &args, int argc, char **argv) {
  if (args.gpus == 0)
    return std::nullopt;
  auto env = comm::rankEnvFromProcess();
  if (!env)
    return fail(env.status());
  if (env->fromEnvironment) {
    if (env->worldSize != args.gpus)
      return fail(Status::error(
          "--gpus " + std::to_string(args.gpus) + " but this rank's "
          "WORLD_SIZE is " + std::to_string(env->worldSize) +
          ": drop --gpus where torchrun or `octet launch` starts the ranks"));
    return std::nullopt;
  }
  auto loaded = readBundle(args.bundle);
  if (!loaded)
    return fail(loaded.status());
  if (loaded->world_size() != uint32_t(args.gpus))
    return fail(Status::error(
        "--gpus " + std::to_string(args.gpus) + " but " + args.bundle +
        " was compiled for world size " +
        std::to_string(loaded->world_size()) + ": pass --gpus " +
        std::to_string(loaded->world_size()) +
        ", or recompile with train.parallel sizes whose product is " +
        std::to_string(args.gpus)));
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return fail(Status::error("--gpus: cannot find this program's own path "
                              "(/proc/self/exe) to start its ranks"));
  comm::LaunchOptions launch;
  launch.ranks = args.gpus;
  launch.command.push_back(std::string(self, size_t(n)));
  for (int i = 1; i < argc; ++i)
    launch.command.push_back(argv[i]);
  std::fflush(stdout);
  auto result = comm::launchRanks(launch);
  if (!result)
    return fail(result.status());
  return result->exitCode;
}

int main(int argc, char **argv) {
  // Parsed, and the named files looked for, before anything touches the GPU.
  RunArgs args;
  cli::Outcome parsed =
      parseRunArgs(std::vector<std::string>(argv + 1, argv + argc), args);
  if (!parsed.shouldRun())
    return parsed.finish();
  if (Status st = checkRunInputs(args); !st)
    return fail(st);
  if (std::optional<int> launched = launchAsRanks(args, argc, argv))
    return *launched;
  return run(args);
}
