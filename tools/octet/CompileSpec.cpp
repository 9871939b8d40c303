#include "tools/octet/CompileSpec.h"

#include "bundle/Bundle.h"
#include "compiler/Emit/EmitBundle.h"
#include "compiler/Pipelines/PipelineLayout.h"
#include "dialects/graph/GraphDialect.h"
#include "frontends/GraphImporter.h"
#include "hf/HfConfig.h"
#include "spec/SpecReader.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;

namespace octet {
namespace {

// What the host loop needs. Model FLOPs per token count 6 per weight
// element of every linear (forward and both backward GEMMs) plus causal
// attention's 6·L·H·Dh·S (half of the full QKᵀ and PV products, times
// three passes).
bundle::Schedule scheduleOf(ModuleOp module, const spec::Spec &spec) {
  const spec::ModelSpec &m = spec.model();
  const spec::TrainSpec &t = spec.train();
  bundle::Schedule s;
  s.set_micro_batch_size(t.micro_batch_size());
  s.set_seq_len(t.seq_len());
  // Each rank's microbatches a step: the pipeline's own count, which the
  // autodiff seed divides by.
  s.set_grad_accum_steps(trainingOptionsFromSpec(spec).autodiff.microbatches);
  s.set_steps(t.steps());
  s.set_vocab_size(m.vocab_size());
  s.set_eval_interval(t.eval_interval());
  s.set_log_interval(t.log_interval());
  s.set_checkpoint_interval(t.checkpoint_interval());
  s.set_seed(static_cast<uint64_t>(t.seed()));
  s.set_lr(t.optimizer().lr());
  s.set_min_lr_ratio(t.optimizer().min_lr_ratio());
  s.set_warmup_steps(t.optimizer().warmup_steps());
  double weights = 0;
  module.walk([&](graph::VariableOp var) {
    // A tied embedding table is also the LM head's weight: its lookup is
    // no matmul, but the head's GEMM is.
    if (var.getKind() == "weight" ||
        (var.getKind() == "embedding" && m.tie_word_embeddings()))
      weights += static_cast<double>(var.getTensorType().getNumElements());
  });
  int64_t headDim = m.has_head_dim() ? m.head_dim()
                                     : m.hidden_size() / std::max<int64_t>(
                                                             1, m.num_heads());
  s.set_flops_per_token(6 * weights + 6.0 * m.num_layers() * m.num_heads() *
                                          headDim * t.seq_len());
  return s;
}

StatusOr<std::string> readText(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return Status::error(path + ": cannot read: " +
                         buffer.getError().message());
  return (*buffer)->getBuffer().str();
}

} // namespace

StatusOr<spec::Spec> loadSpecSource(const SpecSource &source) {
  spec::RunSettings run;
  run.steps = source.steps;
  if (!llvm::StringRef(source.spec).ends_with(".json")) {
    if (!source.trainSpec.empty())
      return Status::error(source.spec + ": --train-spec applies to an HF "
                                         "config.json; a .pbtxt spec carries "
                                         "its own train block");
    return spec::loadSpecFile(source.spec, nullptr, run);
  }
  StatusOr<spec::ModelSpec> model = hf::readHfConfigFile(source.spec);
  if (!model)
    return model.status();
  if (!source.trainSpec.empty())
    return spec::loadSpecFile(source.trainSpec, &*model, run);
  spec::Spec combined;
  *combined.mutable_model() = *model;
  StatusOr<spec::Spec> resolved = spec::resolveSpec(std::move(combined), run);
  if (!resolved)
    return resolved.status().withContext(source.spec +
                                         " (default train settings)");
  return resolved;
}

StatusOr<OwningOpRef<ModuleOp>> compileSpec(
    MLIRContext &context, const spec::Spec &spec, const std::string &specName,
    llvm::function_ref<void(const CompileStage &, ModuleOp)> afterStage) {
  if (Status layout = checkParallelLayout(spec); !layout)
    return layout.withContext(specName);
  auto module = importForwardGraph(context, spec);
  if (!module)
    return module.status().withContext(specName);
  TrainingPipelineOptions options = trainingOptionsFromSpec(spec);
  for (const CompileStage &stage : compileStages()) {
    if (stage.addPasses) {
      PassManager pm(&context);
      stage.addPasses(pm, options);
      if (failed(pm.run(**module)))
        return Status::error(specName + ": stage " + stage.name +
                             " failed (see the diagnostics above)");
    }
    if (afterStage)
      afterStage(stage, **module);
  }
  return std::move(*module);
}

void PhaseTimes::start(const std::string &phase) {
  auto now = std::chrono::steady_clock::now();
  double seconds = std::chrono::duration<double>(now - began_).count();
  if (!phase_.empty() && seconds > 2)
    llvm::errs() << llvm::format("%s: %s took %.1f s\n", command_.c_str(),
                                 phase_.c_str(), seconds);
  phase_ = phase;
  began_ = now;
}

Status checkWritable(const std::string &path) {
  llvm::SmallString<256> folder(path);
  llvm::sys::path::remove_filename(folder);
  if (folder.empty())
    folder = ".";
  if (llvm::sys::fs::exists(path)
          ? llvm::sys::fs::is_directory(path) ||
                llvm::sys::fs::access(path, llvm::sys::fs::AccessMode::Write)
          : !llvm::sys::fs::is_directory(folder) ||
                llvm::sys::fs::access(folder,
                                      llvm::sys::fs::AccessMode::Write))
    return Status::error(path + ": cannot write there (" +
                         (llvm::sys::fs::is_directory(folder)
                              ? "no write permission"
                              : std::string("no folder ") + folder.c_str()) +
                         ")");
  return Status::ok();
}

Status writeBundleFile(ModuleOp module, const SpecSource &source,
                       const spec::Spec &spec, const std::string &output,
                       std::function<void(const std::string &)> phase) {
  const spec::Parallel &parallel = spec.train().parallel();
  emit::BuildSource build;
  if (parallel.pipeline() > 1) {
    StatusOr<SimulatedSchedule> schedule = pipelineScheduleFromSpec(spec);
    if (!schedule)
      return schedule.status().withContext(source.spec);
    build.pipeline = std::move(schedule->schedule);
  }
  build.phase = std::move(phase);
  StatusOr<std::string> specText = readText(source.spec);
  if (!specText)
    return specText.status();
  build.specText = *specText;
  bool hf = llvm::StringRef(source.spec).ends_with(".json");
  build.specFormat = hf ? "hf-config" : "pbtxt";
  if (!source.trainSpec.empty()) {
    StatusOr<std::string> train = readText(source.trainSpec);
    if (!train)
      return train.status();
    build.trainSpecText = *train;
  }
  build.modelName = spec.model().architecture();
  if (hf) {
    build.hfConfig = *specText;
  } else if (StatusOr<std::string> config = hf::hfConfigJson(spec.model());
             config) {
    build.hfConfig = *config;
  }
  build.options.push_back({"stages", stageNames()});
  StatusOr<CodegenPipelineOptions> codegen = codegenOptionsFromSpec(spec);
  if (!codegen)
    return codegen.status().withContext(source.spec);
  build.codegen = *codegen;
  build.schedule = scheduleOf(module, spec);
  build.dataParallel =
      uint32_t(std::max<int64_t>(1, spec.train().parallel().data()));
  // Codegen rewrites what it compiles; the kernel IR stays as it is for
  // --emit-ptx, the summary and the interpreter.
  OwningOpRef<ModuleOp> copy = module.clone();
  FailureOr<bundle::Bundle> b = emit::compileBundle(*copy, build);
  if (failed(b))
    return Status::error(source.spec +
                         ": bundle emission failed (see the diagnostics above)");
  int missing = 0;
  std::string named;
  for (const bundle::Kernel &k : b->kernels())
    if (k.missing_code() && missing++ < 4)
      named += (named.empty() ? "" : ", ") + k.symbol();
  if (missing)
    llvm::errs() << output << ": " << missing
                 << " kernels have no GPU code yet (" << named
                 << (missing > 4 ? ", ..." : "")
                 << "); `octet inspect` lists them with the reason, and "
                    "octet-run refuses the bundle until they have\n";
  if (Status st = bundle::validate(*b); !st)
    return st.withContext(output + " (the bundle the compiler built)");
  return bundle::writeBundle(*b, output);
}

int64_t countParameters(ModuleOp module) {
  int64_t total = 0;
  module.walk([&](graph::VariableOp var) {
    if (var.isTrainable())
      total += var.getTensorType().getNumElements();
  });
  return total;
}

std::string stageNames() {
  std::string out;
  for (const CompileStage &s : compileStages())
    out += std::string(out.empty() ? "" : ", ") + s.name;
  return out;
}

} // namespace octet
