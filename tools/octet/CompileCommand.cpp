// octet compile: spec → IR, stage by stage.

#include "compiler/Codegen/Pipeline.h"
#include "compiler/Emit/EmitBundle.h"
#include "compiler/Plan/MemoryPlan.h"
#include "compiler/Registration.h"
#include "compiler/Transforms/Fusion/FusionReport.h"
#include "compiler/Transforms/Precision.h"
#include "dialects/graph/GraphDialect.h"
#include "dialects/kernel/KernelDialect.h"
#include "hf/HfConfig.h"
#include "frontends/GraphImporter.h"
#include "spec/SpecReader.h"
#include "bundle/Bundle.h"
#include "tools/octet/Commands.h"
#include "tools/octet/FusionStages.h"
#include "tools/octet/TrainingOptions.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

using namespace mlir;

namespace octet {
namespace {

// The stages of `octet compile`, in order. `--dump-ir=NAME` prints the IR
// after NAME; a later pass adds its line here.
struct CompileStage {
  const char *name;
  const char *summary;
  // Rewrites the module the earlier stages made. Null for import, which
  // creates it.
  LogicalResult (*run)(ModuleOp module, const spec::Spec &spec);
};

const CompileStage kStages[] = {
    {"import", "the forward graph built from the spec (graph dialect)",
     nullptr},
    {"autodiff", "the train step: forward, backward, optimizer",
     runAutodiffStage},
    {"fuse-qkv", "q/k/v and gate/up projections as one GEMM each",
     runFuseQkvStage},
    {"activations", "BF16 activations and activation gradients, f32 state",
     runActivationsStage},
    {"precision", "FP8 GEMMs per the recipe and policy, K-major layout",
     runPrecisionStage},
    {"kernel", "kernel dialect: GEMMs, attention, one-op fused kernels",
     runKernelStage},
    {"fused", "after the kernel fusion passes", runFusedStage},
};

std::string knownStages() {
  std::string out;
  for (const CompileStage &s : kStages)
    out += std::string(out.empty() ? "" : ", ") + s.name;
  return out;
}

int inputError(const Status &status) {
  std::fprintf(stderr, "%s\n", status.message().c_str());
  return 1;
}

StatusOr<spec::Spec> loadInput(const CompileOptions &opts) {
  if (!llvm::StringRef(opts.spec).ends_with(".json")) {
    if (!opts.trainSpec.empty())
      return Status::error(opts.spec + ": --train-spec applies to an HF "
                                       "config.json; a .pbtxt spec carries "
                                       "its own train block");
    return spec::loadSpecFile(opts.spec);
  }
  StatusOr<spec::ModelSpec> model = hf::readHfConfigFile(opts.spec);
  if (!model)
    return model.status();
  if (!opts.trainSpec.empty())
    return spec::loadSpecFile(opts.trainSpec, &*model);
  spec::Spec combined;
  *combined.mutable_model() = *model;
  StatusOr<spec::Spec> resolved = spec::resolveSpec(std::move(combined));
  if (!resolved)
    return resolved.status().withContext(opts.spec + " (default train "
                                                     "settings)");
  return resolved;
}

// Trainable parameter count, for the summary line.
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
  s.set_grad_accum_steps(
      t.has_global_batch_size() && t.micro_batch_size() > 0
          ? std::max<int64_t>(1, t.global_batch_size() / t.micro_batch_size())
          : 1);
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

// The bundle of a compiled module: the plan, then every program bound to its
// slots. The spec is stored as text so `octet inspect` can say how it was
// built; nothing machine-specific (paths, times) goes in.
Status writeBundleFile(ModuleOp module, const CompileOptions &opts,
                       const spec::Spec &spec) {
  auto readText = [](const std::string &path) -> StatusOr<std::string> {
    auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
    if (!buffer)
      return Status::error(path + ": cannot read: " +
                           buffer.getError().message());
    return (*buffer)->getBuffer().str();
  };
  emit::BuildSource source;
  StatusOr<std::string> specText = readText(opts.spec);
  if (!specText)
    return specText.status();
  source.specText = *specText;
  bool hf = llvm::StringRef(opts.spec).ends_with(".json");
  source.specFormat = hf ? "hf-config" : "pbtxt";
  if (!opts.trainSpec.empty()) {
    StatusOr<std::string> train = readText(opts.trainSpec);
    if (!train)
      return train.status();
    source.trainSpecText = *train;
  }
  source.modelName = spec.model().architecture();
  source.options.push_back({"stages", knownStages()});
  source.schedule = scheduleOf(module, spec);
  // Codegen rewrites what it compiles; the kernel IR stays as it is for
  // --emit-ptx and the summary.
  OwningOpRef<ModuleOp> copy = module.clone();
  FailureOr<bundle::Bundle> b = emit::compileBundle(*copy, source);
  if (failed(b))
    return Status::error(opts.spec +
                         ": bundle emission failed (see the diagnostics above)");
  int missing = 0;
  std::string named;
  for (const bundle::Kernel &k : b->kernels())
    if (k.missing_code() && missing++ < 4)
      named += (named.empty() ? "" : ", ") + k.symbol();
  if (missing)
    llvm::errs() << opts.output << ": " << missing
                 << " kernels have no GPU code yet (" << named
                 << (missing > 4 ? ", ..." : "")
                 << "); `octet inspect` lists them with the reason, and "
                    "octet-run refuses the bundle until they have\n";
  if (Status st = bundle::validate(*b); !st)
    return st.withContext(opts.output + " (the bundle the compiler built)");
  return bundle::writeBundle(*b, opts.output);
}

int64_t countParameters(ModuleOp module) {
  int64_t total = 0;
  module.walk([&](graph::VariableOp var) {
    if (var.isTrainable())
      total += var.getTensorType().getNumElements();
  });
  return total;
}

} // namespace

std::vector<CompileStageInfo> compileStages() {
  std::vector<CompileStageInfo> stages;
  for (const CompileStage &s : kStages)
    stages.push_back({s.name, s.summary});
  return stages;
}

int runCompileCommand(const CompileOptions &opts) {
  StatusOr<spec::Spec> spec = loadInput(opts);
  if (!spec)
    return inputError(spec.status());
  // The LR schedule (compiled into the step) ends at the run's last step.
  if (opts.steps > 0)
    spec->mutable_train()->set_steps(opts.steps);

  DialectRegistry registry;
  registerCompilerDialects(registry);
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  auto module = importForwardGraph(context, *spec);
  if (!module)
    return inputError(module.status().withContext(opts.spec));

  std::vector<fusion::KernelInfo> unfused;
  for (const CompileStage &stage : kStages) {
    if (stage.run && failed(stage.run(**module, *spec)))
      return inputError(Status::error(opts.spec + ": stage " + stage.name +
                                      " failed (see the diagnostics above)"));
    if (opts.precisionReport && llvm::StringRef(stage.name) == "precision")
      printPrecisionReport(**module, llvm::outs());
    if (opts.fusionReport && llvm::StringRef(stage.name) == "kernel")
      unfused = fusion::collectKernels(**module);
    if (opts.fusionReport && llvm::StringRef(stage.name) == "fused")
      fusion::printFusionReport(unfused, fusion::collectKernels(**module),
                                llvm::outs());
    for (const std::string &dump : opts.dumps) {
      if (dump != stage.name)
        continue;
      llvm::outs() << "// -----// IR after " << stage.name << " //----- //\n";
      (*module)->print(llvm::outs());
      llvm::outs() << "\n";
    }
  }
  if (opts.memoryPlan) {
    FailureOr<plan::MemoryPlan> memory = plan::planMemory(**module);
    if (failed(memory))
      return inputError(Status::error(
          opts.spec + ": memory plan failed (see the diagnostics above)"));
    plan::printMemoryPlan(*memory, llvm::outs());
  }
  llvm::outs().flush();

  if (llvm::StringRef(opts.output).ends_with(".octet")) {
    if (Status st = writeBundleFile(**module, opts, *spec); !st)
      return inputError(st);
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
    PassManager pm(&context);
    codegen::CodegenOptions codegenOptions;
    codegenOptions.keepGoing = true;
    codegen::buildFusedCodegenPipeline(pm, codegenOptions);
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
      !opts.precisionReport && !opts.memoryPlan) {
    const spec::ModelSpec &m = spec->model();
    llvm::outs() << opts.spec << ": " << m.architecture() << ", "
                 << m.num_layers() << " layers, hidden " << m.hidden_size()
                 << ", " << countParameters(**module)
                 << " parameters; stages: " << knownStages() << "\n";
  }
  return 0;
}

} // namespace octet
