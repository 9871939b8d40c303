// octet compile: spec → IR, stage by stage.

#include "compiler/Codegen/Passes.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Plan/MemoryPlan.h"
#include "compiler/Registration.h"
#include "compiler/Transforms/Fusion/FusionReport.h"
#include "compiler/Transforms/Precision.h"
#include "dialects/kernel/KernelDialect.h"
#include "tools/octet/Commands.h"
#include "tools/octet/CommandErrors.h"
#include "tools/octet/CompileSpec.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

using namespace mlir;

namespace octet {
namespace {

// The stages of `octet compile`, in order: compiler/Pipelines' table, which
// every command that compiles runs. `--dump-ir=NAME` prints the IR after
// NAME.
const llvm::ArrayRef<CompileStage> kStages = compileStages();

std::string knownStages() { return stageNames(); }

void printHelp(std::FILE *out) {
  std::fprintf(
      out,
      "usage: octet compile SPEC [--train-spec FILE.pbtxt] [--steps N] "
      "[--dump-ir=STAGE[,STAGE...]] [-o OUT] [--emit-ptx DIR]\n\n"
      "SPEC is a model + training spec (.pbtxt, protobuf text format) or a\n"
      "Hugging Face config.json (model only). With a config.json the train\n"
      "settings come from --train-spec (its model block, if any, is\n"
      "ignored), else from the documented defaults.\n\n"
      "options:\n"
      "  --train-spec FILE   train settings for an HF config.json\n"
      "  --steps N           optimizer steps (default: train.steps); the LR\n"
      "                      schedule compiled into the step ends at N\n"
      "  --dump-ir=STAGE     print the IR after STAGE to stdout (repeatable,\n"
      "                      or a comma-separated list)\n"
      "  -o OUT              OUT.octet: the bundle octet-run executes (spec,\n"
      "                      parameters, state, memory plan, programs);\n"
      "                      any other name: the IR after the last stage\n"
      "  --fusion-report     per kernel and per layer: ops fused, bytes,\n"
      "                      FLOPs, before and after fusion\n"
      "  --precision-report  per layer and GEMM (fprop, dgrad, wgrad): input\n"
      "                      formats and FP8 recipe, or why it stays wide\n"
      "  --memory-plan       the static memory plan of the fused step: total,\n"
      "                      persistent and activation bytes, each program's\n"
      "                      peak, the largest slots\n"
      "  --print-pipeline    the passes of every stage after import as one\n"
      "                      textual pipeline with all options, for\n"
      "                      octet-opt --pass-pipeline on --dump-ir=import\n"
      "  --emit-ptx DIR      after the last stage, every fused kernel to PTX\n"
      "                      for sm_90a: DIR/<kernel>.ptx, a .cubin each\n"
      "                      where ptxas is found (PATH, CUDA_HOME), and\n"
      "                      DIR/kernels.json, the launch manifest\n"
      "  -h, --help          this text\n\n"
      "stages:\n");
  for (const CompileStage &s : kStages)
    std::fprintf(out, "  %-10s %s\n", s.name, s.summary);
  std::fprintf(out, "\nWithout --dump-ir or -o, prints a one-line summary.\n");
}

int usageError(const std::string &message) {
  return reportUsageError("compile", message);
}

int inputError(const Status &status) {
  std::fprintf(stderr, "%s\n", status.message().c_str());
  return 1;
}

struct Options {
  std::string spec, trainSpec, output, ptxDir;
  int64_t steps = 0; // 0: the spec's train.steps
  std::vector<std::string> dumps;
  bool fusionReport = false;
  bool precisionReport = false;
  bool memoryPlan = false;
  bool printPipeline = false;
};

// Returns -1 when parsing succeeded, else the exit code.
int parseOptions(int argc, char **argv, Options &opts) {
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    // 0: `flag` taken with its value; 1: not this flag; else the exit code.
    auto value = [&](llvm::StringRef flag, std::string &out) -> int {
      if (arg == flag && i + 1 < argc)
        out = argv[++i];
      else if (arg.starts_with(flag) &&
               arg.drop_front(flag.size()).starts_with("="))
        out = arg.drop_front(flag.size() + 1).str();
      else if (arg != flag)
        return 1;
      if (out.empty())
        return usageError(flag.str() + " needs a value");
      return 0;
    };
    if (arg == "-h" || arg == "--help") {
      printHelp(stdout);
      return 0;
    }
    std::string dump;
    int rc;
    if ((rc = value("--train-spec", opts.trainSpec)) != 1) {
      if (rc)
        return rc;
    } else if ((rc = value("--dump-ir", dump)) != 1) {
      if (rc)
        return rc;
      llvm::SmallVector<llvm::StringRef> names;
      llvm::StringRef(dump).split(names, ',', -1, /*KeepEmpty=*/false);
      for (llvm::StringRef name : names) {
        bool known = false;
        for (const CompileStage &s : kStages)
          known |= name == s.name;
        if (!known)
          return usageError("unknown stage '" + name.str() +
                            "' for --dump-ir; known stages: " + knownStages());
        opts.dumps.push_back(name.str());
      }
    } else if ((rc = value("--emit-ptx", opts.ptxDir)) != 1) {
      if (rc)
        return rc;
    } else if (std::string steps; (rc = value("--steps", steps)) != 1) {
      if (rc)
        return rc;
      if (llvm::StringRef(steps).getAsInteger(10, opts.steps) ||
          opts.steps < 1)
        return usageError("--steps takes a positive number of optimizer "
                          "steps, not '" + steps + "'");
    } else if (arg == "--fusion-report") {
      opts.fusionReport = true;
    } else if (arg == "--precision-report") {
      opts.precisionReport = true;
    } else if (arg == "--memory-plan") {
      opts.memoryPlan = true;
    } else if (arg == "--print-pipeline") {
      opts.printPipeline = true;
    } else if (arg == "-o") {
      if (i + 1 >= argc)
        return usageError("-o needs a file name");
      opts.output = argv[++i];
    } else if (arg.starts_with("-") && arg != "-") {
      return usageError("unknown option '" + arg.str() + "'");
    } else if (int rc = takeSpecArgument("compile", arg.str(), opts.spec);
               rc >= 0) {
      return rc;
    }
  }
  if (opts.spec.empty())
    return usageError("missing SPEC (a .pbtxt spec or an HF config.json)");
  return -1;
}

} // namespace

int runCompileCommand(int argc, char **argv) {
  Options opts;
  if (int rc = parseOptions(argc, argv, opts); rc >= 0)
    return rc;
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
  auto module = compileSpec(context, *spec, opts.spec, afterStage);
  if (!module)
    return inputError(module.status());
  if (opts.memoryPlan) {
    FailureOr<plan::MemoryPlan> memory = plan::planMemory(**module);
    if (failed(memory))
      return inputError(Status::error(
          opts.spec + ": memory plan failed (see the diagnostics above)"));
    plan::printMemoryPlan(*memory, llvm::outs());
  }
  llvm::outs().flush();

  if (llvm::StringRef(opts.output).ends_with(".octet")) {
    if (Status st = writeBundleFile(**module, source, *spec, opts.output); !st)
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
    buildCodegenPipeline(pm, keepGoingCodegenOptions());
    if (failed(pm.run(**module)) ||
        failed(codegen::emitPtx(**module, opts.ptxDir)))
      return inputError(Status::error(opts.spec + ": --emit-ptx " +
                                      opts.ptxDir +
                                      " failed (see the diagnostics above)"));
    auto binaries = (*module)->getOps<gpu::BinaryOp>();
    int64_t unlowered = 0;
    (*module)->walk([&](kernel::FusedOp fused) {
      // Cleared accumulators are memsets, not kernels.
      unlowered += !fused->hasAttr("launch") && !fused.isStoredZeroFill();
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
                 << " parameters; stages: " << knownStages() << "\n";
  }
  return 0;
}

} // namespace octet
