// octet train: the spec compiled once through every stage (the compile of
// `octet compile`, tools/octet/CompileSpec.h); on a machine with a Hopper
// GPU its bundle trains with the GPU runtime (tools/octet/GpuTrain.h);
// elsewhere, or while the bundle cannot run on the GPU yet, the reference
// interpreter trains the same fused IR on the CPU (the fallback for machines
// without a GPU, and the tiny-model check that the whole path learns).

#include "compiler/Interpreter/Fp8Ops.h"
#include "compiler/Interpreter/Interpreter.h"
#include "compiler/Interpreter/Kernels.h"
#include "compiler/Registration.h"
#include "runtime/data/ByteCorpus.h"
#include "runtime/data/TrainBatches.h"
#include "tools/octet/Commands.h"
#include "tools/octet/CommandErrors.h"
#include "tools/octet/CompileSpec.h"
#include "tools/octet/GpuTrain.h"
#include "tools/octet/HfInit.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

using namespace mlir;

namespace octet {
namespace {

struct Options {
  std::string spec;
  int64_t steps = 0;            // 0: the spec's train.steps
  std::string data;             // overrides train.data.path
  std::string initFrom, saveHf; // Hugging Face checkpoint directories
  int64_t fp8StatsInterval = 0; // 0: no FP8 statistics
  bool cpu = false;             // the interpreter even with a GPU
  // GPU runs only: octet-run's checkpoint and TensorBoard options.
  std::string checkpointDir, tensorboardDir;
  bool resume = false;
};

void printHelp(std::FILE *out) {
  std::fprintf(
      out,
      "usage: octet train SPEC [--steps N] [--data FILE] [--init-from HF]\n"
      "                   [--save-hf DIR] [--cpu] [--checkpoint-dir DIR]\n"
      "                   [--resume] [--tensorboard DIR]\n\n"
      "On a machine with a Hopper GPU (H100/H200), compiles SPEC to a\n"
      "bundle and trains it with the GPU runtime (octet-run), printing the\n"
      "memory plan and a line per step (step, loss, grad norm, lr,\n"
      "tokens/s, model TFLOP/s, MFU, memory). Elsewhere, or while the\n"
      "bundle has kernels without GPU code, trains the same compiled step\n"
      "(`octet compile SPEC --dump-ir=fused`) on the CPU with the reference\n"
      "interpreter, printing step, loss, grad norm, lr and tokens/s.\n\n"
      "  --steps N     optimizer steps (default: train.steps); the LR\n"
      "                schedule ends at N\n"
      "  --data FILE   a UTF-8 text file, read as bytes (default:\n"
      "                train.data.path, with train.data.kind \"text\")\n"
      "                train.data.kind \"indexed\" reads the prefix that\n"
      "                `octet data preprocess` wrote, and \"jsonl\" a\n"
      "                jsonl file (with train.data.tokenizer), packed (SFT)\n"
      "  --init-from HF   start from a Hugging Face checkpoint directory\n"
      "                (its config.json must describe the spec's model)\n"
      "  --save-hf DIR    write the trained weights there as a HF\n"
      "                checkpoint, in the dtypes they were loaded in\n"
      "  --fp8-stats-interval N   every N steps, per FP8 tensor: amax,\n"
      "                scale, shares of values that underflow to zero or\n"
      "                saturate\n"
      "  --cpu         train on the CPU interpreter even with a GPU\n"
      "  --checkpoint-dir DIR, --resume, --tensorboard DIR   GPU runs:\n"
      "                checkpoints (HF-named safetensors plus optimizer,\n"
      "                FP8 and data state) and TensorBoard event files\n"
      "  OCTET_THREADS=N   worker threads (default: all cores)\n");
}

int usageError(const std::string &message) {
  return reportUsageError("train", message);
}

int inputError(const std::string &message) {
  return reportInputError("train", message);
}

int parseOptions(int argc, char **argv, Options &opts) {
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    auto value = [&](llvm::StringRef flag, std::string &out) -> bool {
      if (arg == flag) {
        if (i + 1 >= argc)
          return false;
        out = argv[++i];
        return true;
      }
      if (arg.starts_with((flag + "=").str())) {
        out = arg.drop_front(flag.size() + 1).str();
        return true;
      }
      return false;
    };
    std::string text;
    if (arg == "--help" || arg == "-h") {
      printHelp(stdout);
      return 0;
    } else if (value("--steps", text)) {
      char *end = nullptr;
      long long n = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end || n < 1)
        return usageError("--steps takes a positive integer; got '" + text +
                          "'");
      opts.steps = n;
    } else if (value("--fp8-stats-interval", text)) {
      if (llvm::StringRef(text).getAsInteger(10, opts.fp8StatsInterval) ||
          opts.fp8StatsInterval < 1)
        return usageError("--fp8-stats-interval takes a positive integer; "
                          "got '" + text + "'");
    } else if (arg == "--cpu") {
      opts.cpu = true;
    } else if (arg == "--resume") {
      opts.resume = true;
    } else if (value("--data", opts.data) ||
               value("--init-from", opts.initFrom) ||
               value("--save-hf", opts.saveHf) ||
               value("--checkpoint-dir", opts.checkpointDir) ||
               value("--tensorboard", opts.tensorboardDir)) {
    } else if (arg.starts_with("-")) {
      return usageError("unknown option '" + arg.str() + "'");
    } else if (int rc = takeSpecArgument("train", arg.str(), opts.spec);
               rc >= 0) {
      return rc;
    }
  }
  if (opts.spec.empty())
    return usageError("missing SPEC");
  if (opts.resume && opts.checkpointDir.empty())
    return usageError("--resume needs --checkpoint-dir DIR");
  return -1;
}

// Whether to train on the GPU: a Hopper GPU is found and the data is a kind
// octet-run reads. The line printed otherwise says why the CPU trains.
bool gpuPath(const Options &opts, const spec::Spec &spec, std::string &found) {
  if (opts.cpu)
    return false;
  if (!findHopperGpu(found)) {
    std::printf("octet train: %s: training on the CPU interpreter\n",
                found.c_str());
    return false;
  }
  std::string kind = opts.data.empty() ? spec.train().data().kind() : "text";
  if (kind != "text" && kind != "indexed") {
    std::printf("octet train: %s: train.data.kind \"%s\" is read by the CPU "
                "trainer only (run `octet data preprocess` for an indexed "
                "dataset the GPU reads): training on the CPU interpreter\n",
                found.c_str(), kind.c_str());
    return false;
  }
  return true;
}

// Trains the compiled module's bundle on the GPU: returns the exit code, or
// -1 to train on the CPU instead (the line printed says why).
int trainBundleOnGpu(const Options &opts, const SpecSource &source,
                     const spec::Spec &spec, mlir::ModuleOp module,
                     const std::string &found) {
  GpuTrainRequest request;
  request.writeBundle = [&](const std::string &path) {
    return writeBundleFile(module, source, spec, path);
  };
  request.steps = opts.steps;
  std::string kind = opts.data.empty() ? spec.train().data().kind() : "text";
  std::string path = opts.data.empty() ? spec.train().data().path() : opts.data;
  if (kind == "text")
    request.dataArgs = {"--text", path};
  else
    request.dataArgs = {"--data", path};
  if (!opts.checkpointDir.empty())
    request.extraArgs.insert(request.extraArgs.end(),
                             {"--checkpoint-dir", opts.checkpointDir});
  if (opts.resume)
    request.extraArgs.push_back("--resume");
  if (!opts.tensorboardDir.empty())
    request.extraArgs.insert(request.extraArgs.end(),
                             {"--tensorboard", opts.tensorboardDir});
  if (!opts.initFrom.empty())
    request.extraArgs.insert(request.extraArgs.end(),
                             {"--init-weights", opts.initFrom});
  if (!opts.saveHf.empty())
    std::printf("octet train: --save-hf: GPU checkpoints (--checkpoint-dir) "
                "hold the parameters under their HF names\n");
  std::string why;
  int rc = trainOnGpu(request, why);
  if (rc == -1)
    std::printf("octet train: the bundle cannot run on %s yet (%s): training "
                "on the CPU interpreter\n",
                found.c_str(), why.c_str());
  return rc;
}

// The CPU trainer's batches, as train.data (or --data) says.
StatusOr<std::unique_ptr<data::TrainBatchSource>>
openCpuBatches(const Options &opts, const spec::Spec &spec) {
  const spec::TrainSpec &train = spec.train();
  std::string dataPath = opts.data;
  std::string kind = opts.data.empty() ? train.data().kind() : "text";
  if (dataPath.empty()) {
    if (kind != "text" && kind != "indexed" && kind != "jsonl")
      return Status::error(
          opts.spec + ": train.data.kind is \"" + kind +
          "\"; `octet train` on the CPU reads byte-level text (\"text\"), "
          "a dataset from `octet data preprocess` (\"indexed\") or a jsonl "
          "file (\"jsonl\"): set train.data.kind and train.data.path, or "
          "pass --data FILE");
    dataPath = train.data().path();
  }
  if (kind == "text" &&
      spec.model().vocab_size() < data::ByteCorpus::kVocabSize)
    return Status::error(opts.spec + ": model.vocab_size is " +
                         std::to_string(spec.model().vocab_size()) +
                         "; byte-level text needs at least 256");
  if (kind != "text" && !train.data().pack_documents())
    return Status::error(opts.spec + ": train.data.kind \"" + kind +
                         "\" packs several documents into a row; set "
                         "train.data.pack_documents: true so that they do "
                         "not attend to each other");
  data::TrainBatchOptions batchOptions;
  batchOptions.kind = kind;
  batchOptions.path = dataPath;
  batchOptions.tokenizer = train.data().tokenizer();
  batchOptions.rows = static_cast<uint32_t>(train.micro_batch_size());
  batchOptions.sequenceLength = static_cast<uint32_t>(train.seq_len());
  batchOptions.evalFraction = train.data().eval_fraction();
  batchOptions.seed = static_cast<uint64_t>(train.seed());
  return data::openTrainBatches(batchOptions);
}

// The name the importer gave argument `i` (graph.name), for messages.
std::string argName(func::FuncOp fn, unsigned i) {
  if (auto name = fn.getArgAttrOfType<StringAttr>(i, "graph.name"))
    return name.str();
  return "#" + std::to_string(i);
}

// Checks a host batch tensor against what the compiled step takes; the error
// names the tensor and the spec fields that fix its shape.
bool checkBatchTensor(func::FuncOp fn, unsigned i, const interp::Tensor &t,
                      std::string &error) {
  auto type = cast<RankedTensorType>(fn.getArgumentTypes()[i]);
  bool ok = t.rank() == type.getRank();
  for (int64_t d = 0; ok && d < type.getRank(); ++d)
    ok = type.isDynamicDim(d) || type.getDimSize(d) == t.dim(d);
  if (ok)
    return true;
  std::vector<int64_t> expected(type.getShape().begin(),
                                type.getShape().end());
  error = "batch tensor '" + argName(fn, i) + "' has shape " +
          interp::shapeString(t.shape()) + ", but the compiled step takes " +
          interp::shapeString(expected) +
          " ([train.micro_batch_size, train.seq_len]); make the data loader "
          "and the spec agree";
  return false;
}

} // namespace

int runTrainCommand(int argc, char **argv) {
  Options opts;
  if (int rc = parseOptions(argc, argv, opts); rc >= 0)
    return rc;
  // One validation and one compile, whichever path trains.
  SpecSource specSource{opts.spec, "", opts.steps};
  StatusOr<spec::Spec> loaded = loadSpecSource(specSource);
  if (!loaded)
    return inputError(loaded.status().message());
  spec::Spec &spec = *loaded;
  const spec::TrainSpec &train = spec.train();
  int64_t steps = train.steps();
  int64_t batch = train.micro_batch_size(), seq = train.seq_len();
  std::string found;
  bool gpu = gpuPath(opts, spec, found);
  if (gpu)
    std::printf("octet train: %s: compiling %s for the GPU\n", found.c_str(),
                opts.spec.c_str());
  std::fflush(stdout);
  // The CPU run's options and data are checked before the compile, which
  // takes longer.
  std::unique_ptr<data::TrainBatchSource> batches;
  auto prepareCpu = [&]() -> int {
    if (!opts.checkpointDir.empty() || !opts.tensorboardDir.empty())
      return usageError("--checkpoint-dir, --resume and --tensorboard are "
                        "options of GPU training; the CPU interpreter run "
                        "has neither");
    auto opened = openCpuBatches(opts, spec);
    if (!opened)
      return inputError(opened.status().message());
    batches = std::move(*opened);
    return -1;
  };
  if (!gpu)
    if (int rc = prepareCpu(); rc >= 0)
      return rc;

  DialectRegistry registry;
  registerCompilerDialects(registry);
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  auto module = compileSpec(context, spec, opts.spec);
  if (!module)
    return inputError(module.status().message());
  ModuleOp m = **module;
  if (gpu) {
    if (int rc = trainBundleOnGpu(opts, specSource, spec, m, found); rc >= 0)
      return rc;
    if (int rc = prepareCpu(); rc >= 0)
      return rc;
  }
  data::TrainBatchSource &source = *batches;

  TrainingPipelineOptions pipeline = trainingOptionsFromSpec(spec);
  int64_t microbatches = pipeline.autodiff.microbatches;
  auto step = m.lookupSymbol<func::FuncOp>("train_microbatch");

  interp::VariableStore vars;
  std::optional<HfLoadSummary> hfInit;
  if (!opts.initFrom.empty()) {
    StatusOr<HfLoadSummary> loaded =
        initFromHf(spec, opts.spec, opts.initFrom, m, vars);
    if (!loaded)
      return inputError(loaded.status().message());
    hfInit = *loaded;
  }
  vars.initialize(m, static_cast<uint64_t>(train.seed()));
  int64_t params = countParameters(m);
  interp::Interpreter interpreter(m);
  // What the step needs run once first, after the parameters hold their
  // initial (or loaded) values: the FP8 weight casts of @fp8_weight_init.
  if (auto inits = m->getAttrOfType<ArrayAttr>("octet.init_functions"))
    for (StringRef name : inits.getAsValueRange<StringAttr>())
      if (auto result = interpreter.run(name, {}, vars); !result)
        return inputError(llvm::toString(result.takeError()));

  // What the interpreter rounds to: variables are f32 either way.
  std::string activations = pipeline.activations.activationDtype == "bf16"
                                ? "bf16 activations, f32 state"
                                : "float32";
  std::string numerics =
      pipeline.precision ? "FP8 GEMMs (" + train.precision().recipe() +
                               " recipe) emulated exactly, " + activations +
                               " elsewhere"
                         : activations;
  std::printf("octet train: %s, %lld parameters, %lld steps x %lld "
              "microbatch(es) of [%lld, %lld] tokens, %d threads, %s on the "
              "CPU\n",
              opts.spec.c_str(), (long long)params, (long long)steps,
              (long long)microbatches, (long long)batch,
              (long long)seq, interp::numThreads(), numerics.c_str());
  std::printf("data: %s\n", source.describe().c_str());
  std::fflush(stdout);

  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  double firstLoss = NAN, lastLoss = NAN;
  int64_t tokensPerStep = batch * seq * microbatches;
  interp::Fp8StatsCollector fp8Stats;
  for (int64_t s = 1; s <= steps; ++s) {
    auto stepStart = Clock::now();
    // Statistics cost a pass over every quantized tensor: only on the steps
    // that print them.
    bool statsStep =
        opts.fp8StatsInterval > 0 && s % opts.fp8StatsInterval == 0;
    interpreter.setOpObserver(statsStep ? fp8Stats.observer()
                                        : interp::OpObserver());
    double lossSum = 0;
    for (int64_t micro = 0; micro < microbatches; ++micro) {
      data::PackedBatch packed;
      if (Status st = source.next(
              uint64_t((s - 1) * microbatches + micro), packed);
          !st)
        return inputError(st.message());
      auto ints = [&](const std::vector<int32_t> &v) {
        return std::vector<int64_t>(v.begin(), v.end());
      };
      std::vector<interp::Tensor> args = {
          interp::Tensor::fromInts({batch, seq}, ints(packed.inputs)),
          interp::Tensor::fromInts({batch, seq}, ints(packed.targets)),
          interp::Tensor::fromFloats({batch, seq}, packed.lossMask),
          interp::Tensor::fromInts({batch, seq}, ints(packed.positionIds))};
      if (step.getNumArguments() == 5)
        args.push_back(interp::Tensor::fromInts(
            {int64_t(packed.cuSeqlens.size())}, ints(packed.cuSeqlens)));
      if (args.size() != step.getNumArguments())
        return inputError("the compiled step takes " +
                          std::to_string(step.getNumArguments()) +
                          " arguments; the trainer supplies tokens, labels, "
                          "loss_mask, positions and cu_seqlens");
      std::string error;
      for (unsigned i = 0; i < args.size(); ++i)
        if (!checkBatchTensor(step, i, args[i], error))
          return inputError(error);
      auto result = interpreter.run("train_microbatch", args, vars);
      if (!result)
        return inputError(llvm::toString(result.takeError()));
      double loss = (*result)[0].item();
      if (!std::isfinite(loss)) {
        std::fprintf(stderr,
                     "octet train: stopped: the loss (tensor 'loss' of "
                     "@train_microbatch) is %f at step %lld, microbatch "
                     "%lld; the parameters are those after step %lld. Lower "
                     "train.optimizer.lr or train.grad_clip, or check the "
                     "data.\n",
                     loss, (long long)s, (long long)micro, (long long)(s - 1));
        return 1;
      }
      lossSum += loss;
    }
    auto result = interpreter.run("optimizer_step", {}, vars);
    if (!result)
      return inputError(llvm::toString(result.takeError()));
    double gradNorm = (*result)[0].item(), lr = (*result)[1].item();
    if (!std::isfinite(gradNorm)) {
      std::fprintf(stderr,
                   "octet train: stopped: the gradient norm (grad_norm of "
                   "@optimizer_step) is %f at step %lld. Lower "
                   "train.optimizer.lr or check the data.\n",
                   gradNorm, (long long)s);
      return 1;
    }
    double loss = lossSum / double(microbatches);
    if (s == 1)
      firstLoss = loss;
    lastLoss = loss;
    double seconds =
        std::chrono::duration<double>(Clock::now() - stepStart).count();
    std::printf("step %5lld/%lld  loss %.4f  grad_norm %.4f  lr %.3e  "
                "tokens/s %.0f\n",
                (long long)s, (long long)steps, loss, gradNorm, lr,
                double(tokensPerStep) / seconds);
    std::fflush(stdout);
    if (statsStep) {
      fp8Stats.print(s, llvm::outs());
      llvm::outs().flush();
      fp8Stats.reset();
    }
  }
  double total = std::chrono::duration<double>(Clock::now() - start).count();
  if (!opts.saveHf.empty()) {
    HfExportOptions exportOptions;
    if (hfInit)
      exportOptions.dtypes = hfInit->dtypes;
    StatusOr<size_t> written = saveHf(
        spec, opts.initFrom.empty() ? "" : opts.initFrom + "/config.json",
        opts.saveHf, m, vars, exportOptions);
    if (!written)
      return inputError(written.status().message());
    std::printf("saved %zu tensors as a HF checkpoint in %s\n", *written,
                opts.saveHf.c_str());
  }
  std::printf("done: %lld steps in %.1f s (%.0f tokens/s); loss %.4f at step "
              "1 -> %.4f at step %lld (%+.1f%%)\n",
              (long long)steps, total, double(tokensPerStep * steps) / total,
              firstLoss, lastLoss, (long long)steps,
              100.0 * (lastLoss - firstLoss) / firstLoss);
  return 0;
}

} // namespace octet
