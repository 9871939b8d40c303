// octet-profile: where a bundle's step spends its device time. Runs the
// train microbatch and the optimizer step eagerly with an event pair around
// every step, after one untimed run (module loading, cuBLASLt's first calls),
// and prints the time by kind of work and by kernel or GEMM shape.
// Kernel times depend on the values: the cross-entropy kernels skip the
// vocabulary row of a token whose loss is masked. So a bundle of one rank
// starts as a fresh training run does (runtime/exec/Trainer.h, start):
// parameters and state from their Init, INIT, gradient accumulators zeroed;
// and before every run the program's inputs are written again (a program's
// input slots are its own only while it runs): TRAIN_MICROBATCH takes the
// next batch of octet-run --synthetic's data (random tokens below the
// vocabulary, every token's loss counted), OPTIMIZER_STEP step 1's learning
// rate. A data-parallel or pipeline bundle runs on whatever the plan's
// memory holds (no INIT, no data).
//
//   octet-profile X.octet [--top N] [--repeat R]

#include "bundle/Bundle.h"
#include "runtime/exec/RunOptions.h"
#include "runtime/exec/Runtime.h"
#include "runtime/exec/RuntimeBackend.h"
#include "runtime/exec/TrainData.h"
#include "runtime/exec/Trainer.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace octet;
using namespace octet::bundle;

namespace {

struct Key {
  std::string category; // "gemm fp8 fprop", "kernel", "memset", ...
  std::string detail;   // kernel symbol, or the GEMM's shape and types
};

Key keyOf(const Bundle &b, const Step &s) {
  if (s.has_launch()) {
    const Kernel &k = b.kernels(s.launch().kernel());
    std::string sym = k.symbol();
    bool attention = sym.find("attention") != std::string::npos ||
                     k.summary().find("attention") != std::string::npos;
    return {attention ? "attention" : "generated kernel", sym};
  }
  if (s.has_gemm()) {
    const GemmDescriptor &g = b.gemms(s.gemm().gemm());
    bool fp8 = g.a_type() == F8E4M3FN || g.a_type() == F8E5M2;
    char shape[160];
    std::snprintf(shape, sizeof shape, "%s %lldx%lldx%lld %sx%s->%s%s",
                  roleName(g.role()), (long long)g.m(), (long long)g.n(),
                  (long long)g.k(), dtypeName(g.a_type()),
                  dtypeName(g.b_type()), dtypeName(g.d_type()),
                  g.accumulate() ? " +=" : "");
    return {std::string("gemm ") + (fp8 ? "fp8 " : "bf16 ") +
                roleName(g.role()),
            shape};
  }
  if (s.has_memset())
    return {"memset", "memset"};
  if (s.has_copy())
    return {"copy", "copy"};
  return {"other", s.label()};
}

} // namespace

int main(int argc, char **argv) {
  ProfileArgs args;
  cli::Outcome parsed =
      parseProfileArgs(std::vector<std::string>(argv + 1, argv + argc), args);
  if (!parsed.shouldRun())
    return parsed.finish();
  const std::string &path = args.bundle;
  int top = args.top, repeat = args.repeat;
  auto loaded = readBundle(path);
  if (!loaded) {
    std::fprintf(stderr, "octet-profile: %s\n",
                 loaded.status().message().c_str());
    return 1;
  }
  // The algorithms octet-run timed (or times now and keeps for it).
  RuntimeOptions options;
  RunArgs runArgs;
  runArgs.bundle = path;
  options.gemmTuning.cacheFile = gemmCachePath(runArgs);
  auto rtOr = Runtime::load(*loaded, options);
  if (!rtOr) {
    std::fprintf(stderr, "octet-profile: %s\n",
                 rtOr.status().message().c_str());
    return 1;
  }
  Runtime &rt = **rtOr;
  const Bundle &b = rt.bundle();
  std::printf("%s\n", rt.device().describe().c_str());
  std::printf("cuBLASLt algorithms for %d GEMMs in %.2f s (%d descriptor(s) "
              "timed, %d of them beyond the heuristic's answers, %d from "
              "%s)\n",
              rt.gemmTuning().gemms, rt.gemmTuning().seconds,
              rt.gemmTuning().timed, rt.gemmTuning().widened,
              rt.gemmTuning().cached,
              options.gemmTuning.cacheFile.c_str());

  RuntimeBackend backend(rt);
  std::unique_ptr<TrainData> data;
  std::unique_ptr<Trainer> trainer;
  auto fail = [](const Status &st) {
    std::fprintf(stderr, "octet-profile: %s\n", st.message().c_str());
    return 1;
  };
  if (b.world_size() <= 1 && !b.has_pipeline()) {
    auto opened = TrainData::open(scheduledDataOptions(b.schedule()));
    if (!opened)
      return fail(opened.status());
    data = std::move(*opened);
    TrainerOptions trainerOptions;
    trainerOptions.out = nullptr;
    trainerOptions.steps = 1;
    trainerOptions.evalInterval = 0;
    trainerOptions.checkpointInterval = 0;
    auto created = Trainer::create(backend, *data, trainerOptions);
    if (!created)
      return fail(created.status());
    trainer = std::move(*created);
    TrainResult started;
    if (Status st = trainer->start(started); !st)
      return fail(st);
    std::printf("inputs: %s, every token's loss counted (loss_mask 1), "
                "written before every run; parameters and state from their "
                "Init, then INIT\n",
                data->describe().c_str());
  } else {
    std::printf("inputs: whatever the plan's memory holds (a data-parallel "
                "or pipeline bundle: no INIT, no data)\n");
  }

  for (ProgramKind kind : {TRAIN_MICROBATCH, OPTIMIZER_STEP}) {
    const Program *program = rt.program(kind);
    if (!program)
      continue;
    // The first run loads lazily initialised library state; then the
    // median of `repeat` runs per step.
    std::vector<std::vector<double>> runs;
    for (int r = 0; r <= repeat; ++r) {
      if (trainer)
        if (Status st = trainer->writeInputs(kind, 1); !st)
          return fail(st);
      auto ms = rt.timeSteps(kind);
      if (!ms) {
        std::fprintf(stderr, "octet-profile: %s: %s\n",
                     program->name().c_str(),
                     ms.status().message().c_str());
        return 1;
      }
      if (r > 0)
        runs.push_back(std::move(*ms));
    }
    std::vector<double> median(program->steps_size());
    for (int i = 0; i < program->steps_size(); ++i) {
      std::vector<double> v;
      for (auto &run : runs)
        v.push_back(run[i]);
      std::sort(v.begin(), v.end());
      median[i] = v[v.size() / 2];
    }
    double total = 0;
    std::map<std::string, std::pair<double, int>> byCategory;
    std::map<std::pair<std::string, std::string>, std::pair<double, int>>
        byDetail;
    for (int i = 0; i < program->steps_size(); ++i) {
      Key k = keyOf(b, program->steps(i));
      total += median[i];
      auto &c = byCategory[k.category];
      c.first += median[i];
      c.second += 1;
      auto &d = byDetail[{k.category, k.detail}];
      d.first += median[i];
      d.second += 1;
    }
    std::printf("\n%s: %d steps, %.3f ms summed over steps (eager, median of "
                "%d)\n",
                program->name().c_str(), program->steps_size(), total,
                repeat);
    std::vector<std::pair<double, std::string>> cats;
    for (auto &[name, v] : byCategory)
      cats.push_back({v.first, name});
    std::sort(cats.rbegin(), cats.rend());
    for (auto &[ms, name] : cats)
      std::printf("  %-20s %9.3f ms  %5.1f%%  %4d steps\n", name.c_str(), ms,
                  100.0 * ms / total, byCategory[name].second);
    std::vector<std::pair<double, std::pair<std::string, std::string>>> rows;
    for (auto &[key, v] : byDetail)
      rows.push_back({v.first, key});
    std::sort(rows.rbegin(), rows.rend());
    std::printf("  top %d:\n", top);
    for (int i = 0; i < (int)rows.size() && i < top; ++i) {
      auto &[ms, key] = rows[i];
      std::printf("  %9.3f ms %5.1f%% x%-4d %-18s %s\n", ms, 100.0 * ms / total,
                  byDetail[key].second, key.first.c_str(),
                  key.second.c_str());
    }
  }
  return 0;
}
