// octet compile: spec → IR, stage by stage.

#include "compiler/Codegen/Passes.h"
#include "compiler/Emit/PipelineSlots.h"
#include "compiler/Pipelines/PipelineLayout.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Plan/MemoryPlan.h"
#include "compiler/Plan/PipelinePlan.h"
#include "compiler/Registration.h"
#include "compiler/Transforms/Fusion/FusionReport.h"
#include "compiler/Transforms/Precision.h"
#include "dialects/kernel/KernelDialect.h"
#include "tools/octet/Commands.h"
#include "tools/octet/CompileSpec.h"
#include "tools/octet/MemoryFit.h"
#include "support/Bytes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

using namespace mlir;

namespace octet {
namespace {

// The stages of `octet compile`, in order: compiler/Pipelines' table, which
// every command that compiles runs. `--dump-ir=NAME` prints the IR after
// NAME.
const llvm::ArrayRef<CompileStage> kStages = compileStages();

int inputError(const Status &status) {
  std::fprintf(stderr, "%s\n", status.message().c_str());
  return 1;
}

} // namespace

std::vector<CompileStageInfo> compileStageList() {
  std::vector<CompileStageInfo> stages;
  for (const CompileStage &s : kStages)
    stages.push_back({s.name, s.summary});
  return stages;
}

namespace {

PlanSummary summarize(const plan::MemoryPlan &memory) {
  PlanSummary s;
  s.persistentBytes = memory.persistentBytes;
  s.activationBytes = memory.activationBytes;
  for (const plan::ProgramPlan &p : memory.programs)
    if (p.regionBytes == memory.activationBytes && s.regionProgram.empty()) {
      s.regionProgram = p.name;
      s.regionPeakLiveBytes = p.peakLiveBytes;
    }
  for (const plan::Slot &slot : memory.slots)
    if (slot.kind == plan::SlotKind::Activation) {
      s.activationSlotBytes += slot.bytes;
      ++s.activationSlots;
    }
  return s;
}

// The plan's two totals labelled, whether it fits --gpu-memory's GPU, and
// if not what would, from plans of the changed spec.
int reportFit(MLIRContext &context, const spec::Spec &spec,
              const CompileOptions &opts, const plan::MemoryPlan &memory) {
  PlanSummary summary = summarize(memory);
  std::ostringstream os;
  os << "  (planned before codegen: the bundle's plan, `octet inspect`, adds "
        "kernel workspaces)\n";
  printPlanSummary(summary, os);
  printFitVerdict(summary, opts.gpu, os);
  if (!fits(summary, opts.gpu)) {
    const spec::TrainSpec &t = spec.train();
    FitKnobs knobs{t.micro_batch_size(), t.global_batch_size(),
                   std::max<int64_t>(1, t.parallel().data()),
                   spec.model().num_layers()};
    Replan replan = [&](int64_t microBatch,
                        int64_t layers) -> StatusOr<PlanFootprint> {
      spec::Spec changed = spec;
      changed.mutable_train()->set_micro_batch_size(microBatch);
      changed.mutable_model()->set_num_layers(layers);
      auto module = compileSpec(context, changed, opts.spec);
      if (!module)
        return module.status();
      FailureOr<plan::MemoryPlan> p = plan::planMemory(
          **module, trainingOptionsFromSpec(changed).autodiff.microbatches);
      if (failed(p))
        return Status::error("the plan at micro batch " +
                             std::to_string(microBatch) + " and " +
                             std::to_string(layers) + " layers failed");
      return PlanFootprint{p->persistentBytes, p->activationBytes};
    };
    llvm::outs() << os.str();
    os.str("");
    llvm::outs().flush();
    if (Status st = suggestFit(summary, opts.gpu, knobs, replan, os); !st)
      return inputError(st.withContext(opts.spec + ": looking for a plan "
                                                   "that fits"));
  }
  llvm::outs() << os.str();
  return 0;
}

// Each pipeline rank's arena of a compiled module: the bundle writer's
// (emit::planPipelineArenas), before codegen, so without the kernels'
// workspaces, which `octet inspect` shows in a bundle's.
// `wholeBytes`, when given, gets the one arena that would hold every
// rank's slots.
StatusOr<std::vector<plan::PipelineRankPlan>>
planPipeline(const spec::Spec &spec, ModuleOp module,
             const plan::MemoryPlan &memory, uint64_t *wholeBytes = nullptr) {
  StatusOr<SimulatedSchedule> simulated = pipelineScheduleFromSpec(spec);
  if (!simulated)
    return simulated.status();
  plan::MemoryPlan withStash = memory;
  FailureOr<std::vector<plan::PipelineRankPlan>> ranks =
      emit::planPipelineArenas(module, simulated->schedule, withStash);
  if (failed(ranks))
    return Status::error("pipeline plan failed (see the diagnostics above)");
  if (wholeBytes)
    *wholeBytes = withStash.totalBytes();
  return std::move(*ranks);
}

PlanFootprint footprintOf(const plan::PipelineRankPlan &rank) {
  return {rank.persistentBytes, rank.activationBytes + rank.stashBytes};
}

// The rank that needs the most.
const plan::PipelineRankPlan &
largestRank(const std::vector<plan::PipelineRankPlan> &ranks) {
  return *std::max_element(ranks.begin(), ranks.end(),
                           [](const auto &a, const auto &b) {
                             return a.totalBytes() < b.totalBytes();
                           });
}

// For a pipeline whose largest rank does not fit: what it holds most of,
// then the first changed spec whose every rank fits, from plans of it:
// ZeRO-1 over the data ranks (a data-th of each rank's AdamW moments, the
// same batches), smaller micro batches at the same global batch (less
// stash and activations), then twice the pipeline ranks at the same world
// size (half the variables a rank).
Status suggestPipelineFit(MLIRContext &context, const spec::Spec &spec,
                          const CompileOptions &opts,
                          const plan::PipelineRankPlan &worst,
                          std::ostream &os) {
  os << "  rank " << worst.rank << "'s largest: stash "
     << humanBytes(worst.stashBytes) << " (" << worst.stashEntries
     << " entries of microbatches in flight), activations "
     << humanBytes(worst.activationBytes) << " (@" << worst.largestFunction
     << ")";
  for (const auto &[name, bytes] : worst.largestSlots)
    os << ", " << name << " " << humanBytes(bytes);
  os << "\n";
  auto tryLayout = [&](const spec::Spec &changed, const std::string &what,
                       bool &found) -> Status {
    auto module = compileSpec(context, changed, opts.spec);
    if (!module)
      return Status::ok(); // a layout the compiler refuses is no suggestion
    FailureOr<plan::MemoryPlan> memory = plan::planMemory(**module);
    if (failed(memory))
      return Status::error("the plan with " + what + " failed");
    StatusOr<std::vector<plan::PipelineRankPlan>> ranks =
        planPipeline(changed, **module, *memory);
    if (!ranks)
      return ranks.status();
    PlanFootprint need = footprintOf(largestRank(*ranks));
    if (!fits(need, opts.gpu))
      return Status::ok();
    os << "  every rank fits with " << what << ": the largest needs "
       << humanBytes(need.deviceBytes()) << "\n";
    found = true;
    return Status::ok();
  };
  const spec::TrainSpec &t = spec.train();
  int64_t data = std::max<int64_t>(1, t.parallel().data());
  int64_t perReplica = t.global_batch_size() / data;
  bool found = false;
  if (data > 1 && !t.parallel().shard_optimizer()) {
    spec::Spec changed = spec;
    changed.mutable_train()->mutable_parallel()->set_shard_optimizer(true);
    if (Status st = tryLayout(changed, "train.parallel.shard_optimizer: true",
                              found);
        !st)
      return st;
  }
  for (int64_t m = t.micro_batch_size() - 1; m >= 1 && !found; --m) {
    if (perReplica % m)
      continue;
    spec::Spec changed = spec;
    changed.mutable_train()->set_micro_batch_size(m);
    if (Status st = tryLayout(changed,
                              "train.micro_batch_size: " + std::to_string(m),
                              found);
        !st)
      return st;
  }
  if (!found && data % 2 == 0) {
    spec::Spec changed = spec;
    auto *parallel = changed.mutable_train()->mutable_parallel();
    parallel->set_data(data / 2);
    parallel->set_pipeline(t.parallel().pipeline() * 2);
    parallel->clear_layer_split();
    std::string what = "train.parallel { data: " + std::to_string(data / 2) +
                       " pipeline: " +
                       std::to_string(t.parallel().pipeline() * 2) + " }";
    if (Status st = tryLayout(changed, what, found); !st)
      return st;
  }
  if (!found)
    os << "  no sharded optimizer, smaller micro batch or deeper pipeline at "
          "this world size fits; the compiler does not recompute "
          "activations or shard the parameters and gradients yet\n";
  return Status::ok();
}

// Every pipeline rank's arena: the one-step plan above holds each chunk
// function but not the stashes of the microbatches a rank keeps in flight,
// and every variable where a rank holds its own chunks' only.
int printPipelinePlans(MLIRContext &context, const spec::Spec &spec,
                       const CompileOptions &opts, ModuleOp module,
                       const plan::MemoryPlan &memory) {
  uint64_t whole = 0;
  StatusOr<std::vector<plan::PipelineRankPlan>> ranks =
      planPipeline(spec, module, memory, &whole);
  if (!ranks)
    return inputError(Status::error(opts.spec + ": " + ranks.status().message()));
  StatusOr<SimulatedSchedule> simulated = pipelineScheduleFromSpec(spec);
  if (!simulated)
    return inputError(Status::error(opts.spec + ": " +
                                    simulated.status().message()));
  const PipelineSchedule &schedule = simulated->schedule;
  llvm::outs() << "pipeline ranks (" << pipelineScheduleName(schedule.kind)
               << ", " << schedule.microbatches
               << " microbatches), each allocating its own arena (one for "
                  "every rank's slots would be "
               << plan::formatBytes(whole) << "):\n";
  plan::printPipelinePlans(*ranks, llvm::outs());
  std::ostringstream os;
  for (const plan::PipelineRankPlan &rank : *ranks) {
    os << "  rank " << rank.rank << " ";
    printFitVerdict(footprintOf(rank), opts.gpu, os, "");
  }
  llvm::outs() << os.str();
  llvm::outs().flush();
  const plan::PipelineRankPlan &worst = largestRank(*ranks);
  if (fits(footprintOf(worst), opts.gpu))
    return 0;
  os.str("");
  if (Status st = suggestPipelineFit(context, spec, opts, worst, os); !st)
    return inputError(st.withContext(opts.spec + ": looking for a plan "
                                                 "that fits"));
  llvm::outs() << os.str();
  return 0;
}

} // namespace

int runCompileCommand(const CompileOptions &opts) {
  SpecSource source{opts.spec, opts.trainSpec, opts.steps};
  StatusOr<spec::Spec> spec = loadSpecSource(source);
  if (!spec)
    return inputError(spec.status());

  DialectRegistry registry;
  registerCompilerDialects(registry);
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  if (opts.printPipeline) {
    PassManager pm(&context, ModuleOp::getOperationName());
    buildTrainingPipeline(pm, trainingOptionsFromSpec(*spec));
    pm.printAsTextualPipeline(llvm::outs());
    llvm::outs() << "\n";
    llvm::outs().flush();
    if (opts.output.empty() && opts.dumps.empty() && !opts.fusionReport &&
        !opts.precisionReport && !opts.memoryPlan && opts.ptxDir.empty())
      return 0;
  }

  std::vector<fusion::KernelInfo> unfused;
  auto afterStage = [&](const CompileStage &stage, ModuleOp module) {
    llvm::StringRef name = stage.name;
    if (opts.precisionReport && name == "precision")
      printPrecisionReport(module, llvm::outs());
    if (opts.fusionReport && name == "kernel")
      unfused = fusion::collectKernels(module);
    if (opts.fusionReport && name == "fused")
      fusion::printFusionReport(unfused, fusion::collectKernels(module),
                                llvm::outs());
    for (const std::string &dump : opts.dumps) {
      if (dump != name)
        continue;
      llvm::outs() << "// -----// IR after " << name << " //----- //\n";
      module->print(llvm::outs());
      llvm::outs() << "\n";
    }
  };
  if (!opts.output.empty())
    if (Status st = checkWritable(opts.output); !st)
      return inputError(st);
  PhaseTimes phases("octet compile");
  phases.start("stages");
  auto module = compileSpec(context, *spec, opts.spec, afterStage);
  if (!module)
    return inputError(module.status());
  if (opts.memoryPlan) {
    FailureOr<plan::MemoryPlan> memory = plan::planMemory(
        **module, trainingOptionsFromSpec(*spec).autodiff.microbatches);
    if (failed(memory))
      return inputError(Status::error(
          opts.spec + ": memory plan failed (see the diagnostics above)"));
    plan::printMemoryPlan(*memory, llvm::outs());
    // A pipeline rank holds its own plan, not the one above: each is
    // checked against the GPU.
    if (spec->train().parallel().pipeline() > 1) {
      if (int rc = printPipelinePlans(context, *spec, opts, **module, *memory);
          rc)
        return rc;
    } else if (int rc = reportFit(context, *spec, opts, *memory); rc) {
      return rc;
    }
  }
  llvm::outs().flush();

  if (llvm::StringRef(opts.output).ends_with(".octet")) {
    Status st = writeBundleFile(
        **module, source, *spec, opts.output,
        [&](const std::string &phase) { phases.start(phase); });
    phases.finish();
    if (!st)
      return inputError(st);
    std::ostringstream fit;
    if (Status read = printBundleFit(opts.output, opts.gpu, "memory plan: ",
                                     fit);
        !read)
      return inputError(read);
    llvm::errs() << fit.str();
    uint64_t bytes = 0;
    llvm::sys::fs::file_size(opts.output, bytes);
    llvm::errs() << llvm::format("wrote %s (%.1f MB)\n", opts.output.c_str(),
                                 bytes / 1e6);
  } else if (!opts.output.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream out(opts.output, ec, llvm::sys::fs::OF_Text);
    if (ec)
      return inputError(
          Status::error(opts.output + ": cannot write: " + ec.message()));
    (*module)->print(out);
    out << "\n";
  }
  if (!opts.ptxDir.empty()) {
    // Codegen rewrites the module (gpu.modules, then gpu.binary ops), so it
    // runs after -o has written the fused IR. Every kernel that lowers is
    // written even when one does not, so its PTX can still be read.
    StatusOr<CodegenPipelineOptions> codegen = codegenOptionsFromSpec(*spec);
    if (!codegen)
      return inputError(codegen.status().withContext(opts.spec));
    PassManager pm(&context);
    buildCodegenPipeline(pm, *codegen);
    if (failed(pm.run(**module)) ||
        failed(codegen::emitPtx(**module, opts.ptxDir)))
      return inputError(Status::error(opts.spec + ": --emit-ptx " +
                                      opts.ptxDir +
                                      " failed (see the diagnostics above)"));
    auto binaries = (*module)->getOps<gpu::BinaryOp>();
    int64_t unlowered = 0;
    (*module)->walk([&](kernel::FusedOp fused) {
      // Cleared accumulators are memsets, not kernels.
      unlowered += !fused.hasLaunches() && !fused.isStoredZeroFill();
    });
    llvm::outs() << opts.ptxDir << ": "
                 << std::distance(binaries.begin(), binaries.end())
                 << " PTX modules and kernels.json\n";
    if (unlowered)
      return inputError(Status::error(
          opts.spec + ": " + std::to_string(unlowered) +
          " fused kernels have no GPU lowering (see the diagnostics above); "
          "the others are in " + opts.ptxDir));
    return 0;
  }
  if (opts.output.empty() && opts.dumps.empty() && !opts.fusionReport &&
      !opts.precisionReport && !opts.memoryPlan && !opts.printPipeline) {
    const spec::ModelSpec &m = spec->model();
    llvm::outs() << opts.spec << ": " << m.architecture() << ", "
                 << m.num_layers() << " layers, hidden " << m.hidden_size()
                 << ", " << countParameters(**module)
                 << " parameters; stages: " << stageNames() << "\n";
    StatusOr<std::string> pipeline = describePipelineLayout(*spec);
    if (!pipeline)
      return inputError(pipeline.status());
    llvm::outs() << *pipeline;
    if (spec->train().parallel().pipeline() > 1) {
      // A pipeline's ranks differ in what they hold: each one's plan, and
      // whether it fits, is part of what compiling a pipeline says.
      FailureOr<plan::MemoryPlan> memory = plan::planMemory(
          **module, trainingOptionsFromSpec(*spec).autodiff.microbatches);
      if (failed(memory))
        return inputError(Status::error(
            opts.spec + ": memory plan failed (see the diagnostics above)"));
      return printPipelinePlans(context, *spec, opts, **module, *memory);
    }
  }
  return 0;
}

} // namespace octet
