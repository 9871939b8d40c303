// octet-run: the runtime alone. Loads a bundle, prints how it was built and
// its memory plan before anything runs, then runs its programs on this
// process's GPU (LOCAL_RANK / RANK as torchrun sets them).

#include "runtime/bundle/Bundle.h"
#include "runtime/bundle/Describe.h"
#include "runtime/exec/Runtime.h"

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace octet;
using namespace octet::bundle;

constexpr double kBf16PeakTflops = 989.0;
constexpr double kFp8PeakTflops = 1979.0;

struct Args {
  std::string bundle;
  bool planOnly = false;
  bool graph = true;
  bool recordAlgorithms = false;
  int steps = -1;
  int warmup = 2;
  int allSlots = 12;
  std::string json;
};

void usage() {
  std::fprintf(
      stderr,
      "usage: octet-run BUNDLE.octet [options]\n"
      "  --plan                 print the build and memory plan, run nothing\n"
      "  --steps N              training steps (default: the bundle's)\n"
      "  --warmup N             steps left out of the timing (default 2)\n"
      "  --no-graph             run steps eagerly, not as CUDA graphs\n"
      "  --all-slots            list every slot of the plan\n"
      "  --record-algorithms    write the chosen cuBLASLt algorithms back "
      "into the bundle\n"
      "  --json FILE            write throughput and memory as JSON\n"
      "  --bench                alias of the defaults, kept for bench/\n");
}

bool parse(int argc, char **argv, Args &a) {
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto next = [&](const char *what) -> const char * {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "octet-run: %s needs a value\n", what);
        return nullptr;
      }
      return argv[++i];
    };
    if (s == "--plan")
      a.planOnly = true;
    else if (s == "--no-graph")
      a.graph = false;
    else if (s == "--record-algorithms")
      a.recordAlgorithms = true;
    else if (s == "--all-slots")
      a.allSlots = 0;
    else if (s == "--bench")
      continue;
    else if (s == "--steps" || s == "--warmup" || s == "--json") {
      const char *v = next(s.c_str());
      if (!v)
        return false;
      if (s == "--json")
        a.json = v;
      else {
        char *end = nullptr;
        long n = std::strtol(v, &end, 10);
        if (*end || n < 0) {
          std::fprintf(stderr, "octet-run: %s wants a count, got '%s'\n",
                       s.c_str(), v);
          return false;
        }
        (s == "--steps" ? a.steps : a.warmup) = int(n);
      }
    } else if (s == "-h" || s == "--help") {
      usage();
      std::exit(0);
    } else if (!s.empty() && s[0] == '-') {
      std::fprintf(stderr, "octet-run: unknown option %s\n", s.c_str());
      return false;
    } else if (a.bundle.empty())
      a.bundle = s;
    else {
      std::fprintf(stderr, "octet-run: one bundle at a time (got '%s' too)\n",
                   s.c_str());
      return false;
    }
  }
  if (a.bundle.empty()) {
    usage();
    return false;
  }
  return true;
}

// Fills token inputs (i32 slots whose name says tokens or labels) with
// synthetic ids below the vocabulary; data loaders replace this.
Status feedSynthetic(Runtime &rt, const Program &p, std::mt19937_64 &rng) {
  int64_t vocab = std::max<int64_t>(1, rt.bundle().schedule().vocab_size());
  for (const NamedSlot &in : p.inputs()) {
    const Slot &s = rt.bundle().plan().slots(int(in.slot()));
    if (s.dtype() != I32)
      continue;
    std::vector<int32_t> ids(s.bytes() / 4);
    std::uniform_int_distribution<int64_t> dist(0, vocab - 1);
    for (int32_t &v : ids)
      v = int32_t(dist(rng));
    OCTET_RETURN_IF_ERROR(rt.writeSlot(in.slot(), ids.data(), s.bytes()));
  }
  return Status::ok();
}

StatusOr<float> readLoss(Runtime &rt, const Program &p) {
  for (const NamedSlot &out : p.outputs())
    if (out.name() == "loss") {
      const Slot &s = rt.bundle().plan().slots(int(out.slot()));
      if (s.dtype() != F32 || s.bytes() < 4)
        return Status::error("output 'loss' is not an f32 scalar");
      std::vector<float> v(s.bytes() / 4);
      OCTET_RETURN_IF_ERROR(rt.readSlot(out.slot(), v.data(), s.bytes()));
      return v[0];
    }
  return NAN;
}

int fail(const Status &st) {
  std::fprintf(stderr, "octet-run: error: %s\n", st.message().c_str());
  return 1;
}

int run(const Args &args) {
  auto loaded = readBundle(args.bundle);
  if (!loaded)
    return fail(loaded.status());
  Bundle &b = *loaded;
  describeBuild(b, std::cout);
  describePlan(b, std::cout, args.allSlots);
  describePrograms(b, std::cout);
  std::cout.flush();
  if (args.planOnly)
    return 0;

  auto rtOr = Runtime::load(b, RuntimeOptions{});
  if (!rtOr)
    return fail(rtOr.status());
  Runtime &rt = **rtOr;
  std::printf("%s: arenas %s, runtime fixed costs %s (CUDA context, "
              "cuBLASLt handle, modules)\n",
              rt.device().describe().c_str(), humanBytes(rt.arenaBytes()).c_str(),
              humanBytes(rt.fixedCostBytes()).c_str());
  for (const std::string &n : rt.notes())
    std::printf("note: %s\n", n.c_str());
  if (args.recordAlgorithms) {
    int changed = rt.recordAlgorithms(b);
    b.clear_content_hash();
    if (Status st = writeBundle(b, args.bundle); !st)
      return fail(st);
    std::printf("recorded %d cuBLASLt algorithm(s) into %s\n", changed,
                args.bundle.c_str());
  }

  const Schedule &sched = b.schedule();
  std::mt19937_64 rng(sched.seed());
  if (rt.program(INIT)) {
    if (Status st = rt.run(INIT); !st)
      return fail(st);
  }
  const Program *train = rt.program(TRAIN_MICROBATCH);
  const Program *eval = rt.program(EVAL);
  const Program *first = train ? train : eval;
  if (!first) {
    std::printf("the bundle has no train or eval program: nothing to run\n");
    return 0;
  }
  ProgramKind kind = train ? TRAIN_MICROBATCH : EVAL;
  int steps = args.steps >= 0 ? args.steps
                              : int(sched.steps() > 0 ? sched.steps() : 10);
  int64_t accum = std::max<int64_t>(1, sched.grad_accum_steps());
  int64_t tokensPerStep = std::max<int64_t>(1, sched.micro_batch_size()) *
                          std::max<int64_t>(1, sched.seq_len()) * accum;
  std::vector<double> stepSeconds;
  for (int step = 0; step < steps + args.warmup; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    float loss = NAN;
    for (int64_t m = 0; m < accum; ++m) {
      if (Status st = feedSynthetic(rt, *first, rng); !st)
        return fail(st);
      Status st = args.graph ? rt.runGraph(kind) : rt.run(kind);
      if (!st)
        return fail(st);
    }
    if (train && rt.program(OPTIMIZER_STEP)) {
      Status st = args.graph ? rt.runGraph(OPTIMIZER_STEP) : rt.run(OPTIMIZER_STEP);
      if (!st)
        return fail(st);
    }
    if (Status st = rt.synchronize(); !st)
      return fail(st);
    double sec = std::chrono::duration<double>(
                     std::chrono::steady_clock::now() - t0)
                     .count();
    auto l = readLoss(rt, *first);
    if (l)
      loss = *l;
    double tps = double(tokensPerStep) / sec;
    double tflops = tps * sched.flops_per_token() / 1e12;
    if (step >= args.warmup)
      stepSeconds.push_back(sec);
    std::printf("step %d  loss %.4f  tokens/s %.0f  TFLOP/s %.1f  MFU bf16 "
                "%.3f fp8 %.3f  memory %s%s\n",
                step + 1 - args.warmup, double(loss), tps, tflops,
                tflops / kBf16PeakTflops, tflops / kFp8PeakTflops,
                humanBytes(rt.arenaBytes() + rt.fixedCostBytes()).c_str(),
                step < args.warmup ? "  (warm-up)" : "");
  }
  if (!args.json.empty() && !stepSeconds.empty()) {
    std::sort(stepSeconds.begin(), stepSeconds.end());
    double median = stepSeconds[stepSeconds.size() / 2];
    double tps = double(tokensPerStep) / median;
    double tflops = tps * sched.flops_per_token() / 1e12;
    std::ofstream js(args.json);
    js << "{\n \"peer\": \"octet\",\n \"model\": \""
       << b.build().model_name() << "\",\n \"seq\": " << sched.seq_len()
       << ",\n \"batch\": " << sched.micro_batch_size()
       << ",\n \"tokens_per_step\": " << tokensPerStep
       << ",\n \"device\": \"" << rt.device().name()
       << "\",\n \"step_s_median\": " << median
       << ",\n \"tokens_per_s\": " << tps
       << ",\n \"flops_per_token\": " << sched.flops_per_token()
       << ",\n \"flop_formula\": \"6*N_matmul + 6*L*H*Dh*S (causal "
          "attention)\",\n \"model_tflops\": "
       << tflops << ",\n \"mfu_bf16_peak\": " << tflops / kBf16PeakTflops
       << ",\n \"mfu_fp8_peak\": " << tflops / kFp8PeakTflops
       << ",\n \"peak_mem_allocated_gib\": "
       << double(rt.arenaBytes() + rt.fixedCostBytes()) / double(1 << 30)
       << "\n}\n";
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Args args;
  if (!parse(argc, argv, args))
    return 2;
  return run(args);
}
