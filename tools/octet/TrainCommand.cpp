// octet train: the spec compiled once through every stage (the compile of
// `octet compile`, tools/octet/CompileSpec.h); on a machine with a Hopper
// GPU its bundle trains with the GPU runtime (tools/octet/GpuTrain.h);
// elsewhere, or while the bundle cannot run on the GPU yet, the reference
// interpreter trains the same fused IR on the CPU (the fallback for machines
// without a GPU, and the tiny-model check that the whole path learns).

#include "compiler/Interpreter/Collectives.h"
#include "compiler/Interpreter/Fp8Ops.h"
#include "compiler/Interpreter/Interpreter.h"
#include "compiler/Interpreter/Kernels.h"
#include "compiler/Pipelines/PipelineLayout.h"
#include "compiler/Registration.h"
#include "compiler/Transforms/Pipeline/Passes.h"
#include "dialects/graph/GraphDialect.h"
#include "dialects/graph/WeightCache.h"
#include "runtime/checkpoint/TrainState.h"
#include "runtime/data/ByteCorpus.h"
#include "runtime/data/TrainBatches.h"
#include "tools/octet/Commands.h"
#include "tools/octet/CommandErrors.h"
#include "tools/octet/CompileSpec.h"
#include "tools/octet/CpuCheckpoint.h"
#include "tools/octet/CpuPipeline.h"
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

int usageError(const std::string &message) {
  return reportUsageError("train", message);
}

int inputError(const std::string &message) {
  return reportInputError("train", message);
}

// Whether to train on the GPU, and octet-run's options for it: a Hopper GPU
// is found and the data is a kind octet-run reads. The line printed
// otherwise says why the CPU trains.
std::optional<RunArgs> gpuRun(const TrainOptions &opts, const spec::Spec &spec,
                              std::string &found) {
  if (opts.cpu)
    return std::nullopt;
  if (spec.train().parallel().pipeline() > 1) {
    std::printf("octet train: a pipeline trains on GPUs as `octet compile "
                "SPEC -o X.octet` then `octet launch --gpus N -- octet-run "
                "X.octet`, which octet train does not start yet: training "
                "on the CPU interpreter\n");
    return std::nullopt;
  }
  if (!findHopperGpu(found)) {
    std::printf("octet train: %s: training on the CPU interpreter\n",
                found.c_str());
    return std::nullopt;
  }
  StatusOr<RunArgs> run = gpuRunArgs(opts, spec.train().data().kind(),
                                     spec.train().data().path(), "");
  if (!run) {
    std::printf("octet train: %s: %s: training on the CPU interpreter\n",
                found.c_str(), run.status().message().c_str());
    return std::nullopt;
  }
  return std::move(*run);
}

// Trains the compiled module's bundle on the GPU: returns the exit code, or
// -1 to train on the CPU instead (the line printed says why).
int trainBundleOnGpu(const TrainOptions &opts, RunArgs run,
                     const SpecSource &source, const spec::Spec &spec,
                     mlir::ModuleOp module, const std::string &found) {
  GpuTrainRequest request;
  request.writeBundle = [&](const std::string &path) {
    return writeBundleFile(module, source, spec, path);
  };
  request.steps = opts.steps;
  request.run = std::move(run);
  std::string why;
  int rc = trainOnGpu(request, why);
  if (rc == -1)
    std::printf("octet train: the bundle cannot run on %s yet (%s): training "
                "on the CPU interpreter\n",
                found.c_str(), why.c_str());
  return rc;
}

// The CPU trainer's batches, as train.data (or --text / --data) says.
StatusOr<std::unique_ptr<data::TrainBatchSource>>
openCpuBatches(const TrainOptions &opts, const spec::Spec &spec) {
  const spec::TrainSpec &train = spec.train();
  std::string dataPath = opts.dataPath;
  std::string kind = opts.dataKind.empty() ? train.data().kind() : opts.dataKind;
  if (dataPath.empty()) {
    if (kind != "text" && kind != "indexed" && kind != "jsonl")
      return Status::error(
          opts.spec + ": train.data.kind is \"" + kind +
          "\"; `octet train` on the CPU reads byte-level text (\"text\"), "
          "a dataset from `octet data preprocess` (\"indexed\") or a jsonl "
          "file (\"jsonl\"): set train.data.kind and train.data.path, or "
          "pass --text FILE or --data PREFIX");
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

// Data-parallel ranks apply the same averaged gradients to the same
// values, so after every step they must hold the same variables (but the
// parts of a sharded optimizer state and the accumulators a reduce-scatter
// leaves rank-local, `skipped`): the first that differs (by name), else
// empty.
std::string firstDivergence(const std::vector<interp::VariableStore> &vars,
                            const std::map<std::string, int64_t> &skipped) {
  for (size_t r = 1; r < vars.size(); ++r)
    for (const auto &[name, value] : vars[0].all()) {
      if (skipped.count(name))
        continue;
      auto other = vars[r].all().find(name);
      if (other == vars[r].all().end())
        return name + " (rank " + std::to_string(r) + " lacks it)";
      const interp::Tensor &t = other->second;
      bool same = t.shape() == value.shape() && t.dtype() == value.dtype();
      for (int64_t e = 0; same && e < t.numel(); ++e)
        same = isFloat(t.dtype()) ? t.f()[e] == value.f()[e]
                                  : t.i()[e] == value.i()[e];
      if (!same)
        return name + " (rank " + std::to_string(r) + " against rank 0)";
    }
  return "";
}

} // namespace

int runTrainCommand(const TrainOptions &opts) {
  if (Status st = checkTrainInputs(opts); !st)
    return inputError(st.message());
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
  std::optional<RunArgs> gpuRunOptions = gpuRun(opts, spec, found);
  bool gpu = gpuRunOptions.has_value();
  if (gpu)
    std::printf("octet train: %s: compiling %s for the GPU\n", found.c_str(),
                opts.spec.c_str());
  std::fflush(stdout);
  // The CPU run's options and data are checked before the compile, which
  // takes longer.
  std::unique_ptr<data::TrainBatchSource> batches;
  auto prepareCpu = [&]() -> int {
    if (!opts.tensorboardDir.empty())
      return usageError("--tensorboard is an option of GPU training; the "
                        "CPU interpreter run prints its step lines only");
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
    if (int rc = trainBundleOnGpu(opts, std::move(*gpuRunOptions),
                                  specSource, spec, m, found); rc >= 0)
      return rc;
    if (int rc = prepareCpu(); rc >= 0)
      return rc;
  }
  data::TrainBatchSource &source = *batches;

  TrainingPipelineOptions pipeline = trainingOptionsFromSpec(spec);
  int64_t microbatches = pipeline.autodiff.microbatches;
  // Pipeline ranks run the stage chunks; the first chunk's forward takes
  // the batch as the one-rank step does.
  int64_t pipelineRanks = std::max<int64_t>(1, train.parallel().pipeline());
  std::optional<PipelineSchedule> schedule;
  if (pipelineRanks > 1) {
    StatusOr<SimulatedSchedule> made = pipelineScheduleFromSpec(spec);
    if (!made)
      return inputError(opts.spec + ": " + made.status().message());
    schedule = std::move(made->schedule);
  }
  auto step = m.lookupSymbol<func::FuncOp>(
      schedule ? stageForwardName(0) : "train_microbatch");

  // train.parallel.data ranks, each an interpreter with its own variables,
  // their collectives emulated (compiler/Interpreter/Collectives.h): the
  // program each rank runs on a GPU, checked on the CPU.
  int64_t ranks = std::max<int64_t>(1, train.parallel().data());
  interp::RankExchange exchange(interp::RankLayout{ranks, 1, pipelineRanks});
  std::vector<interp::VariableStore> vars(1);
  std::optional<hf::HfLoadSummary> hfInit;
  if (!opts.initFrom.empty()) {
    StatusOr<hf::HfLoadSummary> loaded =
        initFromHf(spec, opts.spec, opts.initFrom, m, vars[0]);
    if (!loaded)
      return inputError(loaded.status().message());
    hfInit = *loaded;
  }
  vars[0].initialize(m, static_cast<uint64_t>(train.seed()));
  int64_t params = countParameters(m);
  std::vector<interp::Interpreter> interpreters(ranks * pipelineRanks,
                                                interp::Interpreter(m));
  // Checkpoints as the GPU trainer writes them (every checkpoint_interval
  // steps and at the end); --resume continues from the latest, whose
  // variables replace every initial value.
  CpuCheckpointRun checkpoints{opts.checkpointDir,
                               static_cast<uint64_t>(train.seed()), ""};
  if (!checkpoints.dir.empty())
    checkpoints.programHash = programHash(m);
  int64_t startStep = 0;
  bool remakeWeightCopies = false;
  std::string resumeFrom =
      opts.resume ? checkpoint::latestTrainCheckpoint(opts.checkpointDir) : "";
  if (opts.resume && resumeFrom.empty())
    std::fprintf(stderr,
                 "note: --resume: %s holds no checkpoint yet; starting from "
                 "step 0\n",
                 opts.checkpointDir.c_str());
  if (!resumeFrom.empty()) {
    StatusOr<CpuResume> resumed =
        loadCpuCheckpoint(checkpoints, resumeFrom, m, vars[0]);
    if (!resumed)
      return inputError(resumed.status().message());
    startStep = resumed->step;
    remakeWeightCopies = resumed->remakeWeightCopies;
    if (Status st = source.restore(resumed->dataPosition,
                                   uint64_t(startStep * ranks * microbatches));
        !st)
      return inputError(resumeFrom + ": " + st.message());
  }
  // What the step needs run once first, after the parameters hold their
  // initial (or loaded) values: the weight casts of @cache_weights.
  // A checkpoint holds their results already, but for derived caches
  // (graph::isDerivedCache), which it leaves out, and FP8 weight copies it
  // was saved without (where the step cast them): then they run after the
  // resume too (what they make from the parameters, the step made too).
  // Casts of sharded masters gather their parts: those run on every rank,
  // below.
  bool derivedCaches = false;
  for (auto var : m.getOps<graph::VariableOp>())
    derivedCaches |= graph::isDerivedCache(var.getSymName());
  std::vector<StringRef> initFunctions;
  if (auto inits = m->getAttrOfType<ArrayAttr>("octet.init_functions");
      inits && (resumeFrom.empty() || derivedCaches || remakeWeightCopies))
    for (StringRef name : inits.getAsValueRange<StringAttr>())
      initFunctions.push_back(name);
  bool initsOnRanks = llvm::any_of(initFunctions, [&](StringRef name) {
    bool collective = false;
    if (auto f = m.lookupSymbol<func::FuncOp>(name))
      f.walk([&](Operation *op) {
        collective |= op->getName().getStringRef() == "kernel.collective";
      });
    return collective;
  });
  if (!initsOnRanks)
    for (StringRef name : initFunctions)
      if (auto result = interpreters[0].run(name, {}, vars[0]); !result)
        return inputError(llvm::toString(result.takeError()));
  // Every rank starts from the same values (their storage is shared until
  // a rank writes a variable).
  vars.resize(ranks * pipelineRanks, vars[0]);
  // Sharded variables start whole, drawn or read as at one rank (or from a
  // checkpoint, which holds them whole at any layout).
  std::map<std::string, int64_t> sharded = shardedVariables(m);
  std::map<std::string, int64_t> notInStep = sharded;
  for (const std::string &name : rankLocalVariables(m))
    notInStep[name] = 0;
  keepRankParts(m, vars);
  // A pipeline rank holds its own chunks' variables only.
  keepPipelineRankVariables(m, ranks, vars);
  if (ranks * pipelineRanks > 1)
    for (int r = 0; r < ranks * pipelineRanks; ++r)
      interpreters[r].setRank(exchange, r);
  if (initsOnRanks)
    if (Status st = interp::runRanks(exchange, [&](int r) -> Status {
          for (StringRef name : initFunctions)
            if (auto result = interpreters[r].run(name, {}, vars[r]); !result)
              return Status::error(llvm::toString(result.takeError()));
          return Status::ok();
        });
        !st)
      return inputError(st.message());

  // What the interpreter rounds to: variables are f32 either way.
  std::string activations = pipeline.activations.activationDtype == "bf16"
                                ? "bf16 activations, f32 state"
                                : "float32";
  std::string numerics =
      pipeline.precision ? "FP8 GEMMs (" + train.precision().recipe() +
                               " recipe) emulated exactly, " + activations +
                               " elsewhere"
                         : activations;
  std::string layout =
      ranks > 1 ? std::to_string(ranks) + " data-parallel ranks x " : "";
  if (schedule)
    layout += std::to_string(pipelineRanks) + " pipeline ranks (" +
              pipelineScheduleName(schedule->kind) + ", " +
              std::to_string(schedule->ranks * schedule->virtualStages) +
              " chunks) x ";
  std::printf("octet train: %s, %lld parameters, %lld steps x %s%lld "
              "microbatch(es) of [%lld, %lld] tokens, %d threads, %s on the "
              "CPU\n",
              opts.spec.c_str(), (long long)params, (long long)steps,
              layout.c_str(), (long long)microbatches, (long long)batch,
              (long long)seq, interp::numThreads(), numerics.c_str());
  std::printf("data: %s\n", source.describe().c_str());
  if (!resumeFrom.empty())
    std::printf("resumed from %s at step %lld\n", resumeFrom.c_str(),
                (long long)startStep);
  std::fflush(stdout);
  if (startStep >= steps) {
    std::printf("nothing to do: the checkpoint is at step %lld of %lld\n",
                (long long)startStep, (long long)steps);
    return 0;
  }

  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  double firstLoss = NAN, lastLoss = NAN;
  int64_t perStep = ranks * microbatches; // microbatches of the global batch
  int64_t tokensPerStep = batch * seq * perStep;
  interp::Fp8StatsCollector fp8Stats;
  auto ints = [](const std::vector<int32_t> &v) {
    return std::vector<int64_t>(v.begin(), v.end());
  };
  for (int64_t s = startStep + 1; s <= steps; ++s) {
    auto stepStart = Clock::now();
    // Statistics cost a pass over every quantized tensor: only on the steps
    // that print them, and of rank 0's tensors.
    bool statsStep =
        opts.fp8StatsInterval > 0 && s % opts.fp8StatsInterval == 0;
    interpreters[0].setOpObserver(statsStep ? fp8Stats.observer()
                                            : interp::OpObserver());
    // The batches are read here, in order: rank r's microbatch j is
    // microbatch r·M + j of the global batch, so the ranks together train
    // on what one rank would.
    std::vector<std::vector<std::vector<interp::Tensor>>> stepArgs(ranks);
    for (int64_t k = 0; k < perStep; ++k) {
      data::PackedBatch packed;
      if (Status st = source.next(uint64_t((s - 1) * perStep + k), packed); !st)
        return inputError(st.message());
      std::vector<interp::Tensor> args = {
          interp::Tensor::fromInts({batch, seq}, ints(packed.inputs)),
          interp::Tensor::fromInts({batch, seq}, ints(packed.targets)),
          interp::Tensor::fromFloats({batch, seq}, packed.lossMask),
          interp::Tensor::fromInts({batch, seq}, ints(packed.positionIds))};
      if (step.getNumArguments() == 5) {
        auto cuType = cast<RankedTensorType>(step.getArgumentTypes()[4]);
        auto padded = data::padCuSeqlens(packed.cuSeqlens,
                                         size_t(cuType.getNumElements()));
        if (!padded)
          return inputError(padded.status().message());
        args.push_back(interp::Tensor::fromInts(
            {int64_t(padded->size())}, ints(*padded)));
      }
      if (args.size() != step.getNumArguments())
        return inputError("the compiled step takes " +
                          std::to_string(step.getNumArguments()) +
                          " arguments; the trainer supplies tokens, labels, "
                          "loss_mask, positions and cu_seqlens");
      std::string error;
      for (unsigned i = 0; i < args.size(); ++i)
        if (!checkBatchTensor(step, i, args[i], error))
          return inputError(error);
      stepArgs[k / microbatches].push_back(std::move(args));
    }
    std::vector<double> lossSums(ranks, 0.0);
    std::vector<double> gradNorms(ranks, 0.0), lrs(ranks, 0.0);
    Status ran = Status::ok();
    if (schedule) {
      StatusOr<CpuPipelineStep> stepped =
          runCpuPipelineStep(m, *schedule, int(ranks), exchange, interpreters,
                             vars, stepArgs);
      if (stepped) {
        lossSums[0] = stepped->lossSum;
        gradNorms[0] = stepped->gradNorm;
        lrs[0] = stepped->lr;
      } else {
        ran = stepped.status();
      }
    } else ran = interp::runRanks(exchange, [&](int r) -> Status {
      for (int64_t micro = 0; micro < microbatches; ++micro) {
        interpreters[r].setFirstMicrobatch(micro == 0);
        interpreters[r].setLastMicrobatch(micro + 1 == microbatches);
        auto result = interpreters[r].run(
            "train_microbatch", std::move(stepArgs[r][micro]), vars[r]);
        if (!result)
          return Status::error(llvm::toString(result.takeError()));
        double loss = (*result)[0].item();
        if (!std::isfinite(loss))
          return Status::error(
              "the loss (tensor 'loss' of @train_microbatch) is " +
              std::to_string(loss) + " at step " + std::to_string(s) +
              ", microbatch " + std::to_string(r * microbatches + micro) +
              "; the parameters are those after step " +
              std::to_string(s - 1) +
              ". Lower train.optimizer.lr or train.grad_clip, or check the "
              "data.");
        lossSums[r] += loss;
      }
      auto result = interpreters[r].run("optimizer_step", {}, vars[r]);
      if (!result)
        return Status::error(llvm::toString(result.takeError()));
      gradNorms[r] = (*result)[0].item();
      lrs[r] = (*result)[1].item();
      return Status::ok();
    });
    if (!ran) {
      std::fprintf(stderr, "octet train: stopped: %s\n",
                   ran.message().c_str());
      return 1;
    }
    // Each pipeline rank's data group holds the same variables.
    std::string diverged;
    for (int64_t p = 0; p < pipelineRanks && diverged.empty(); ++p)
      diverged = firstDivergence(
          std::vector<interp::VariableStore>(vars.begin() + p * ranks,
                                             vars.begin() + (p + 1) * ranks),
          notInStep);
    if (!diverged.empty()) {
      std::fprintf(stderr,
                   "octet train: stopped: the data-parallel ranks hold "
                   "different values after step %lld: %s. Their program "
                   "must keep every variable in step across the ranks (a "
                   "value computed from one rank's data needs a collective "
                   "first)\n",
                   (long long)s, diverged.c_str());
      return 1;
    }
    // The gradients were averaged over the ranks before the norm: every
    // rank holds the same one.
    double gradNorm = gradNorms[0], lr = lrs[0];
    if (!std::isfinite(gradNorm)) {
      std::fprintf(stderr,
                   "octet train: stopped: the gradient norm (grad_norm of "
                   "@optimizer_step) is %f at step %lld. Lower "
                   "train.optimizer.lr or check the data.\n",
                   gradNorm, (long long)s);
      return 1;
    }
    double lossSum = 0;
    for (double l : lossSums)
      lossSum += l;
    double loss = lossSum / double(perStep);
    if (s == startStep + 1)
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
    // The ranks hold the same variables (checked above): rank 0's are the
    // run's, with the parts of a sharded state joined.
    if (!checkpoints.dir.empty() &&
        ((train.checkpoint_interval() > 0 &&
          s % train.checkpoint_interval() == 0) ||
         s == steps)) {
      StatusOr<std::string> path = saveCpuCheckpoint(
          checkpoints, s, source.position(uint64_t(s * perStep)), loss, m,
          schedule          ? joinPipelineRanks(m, ranks, vars)
          : sharded.empty() ? vars[0]
                            : wholeVariables(m, vars));
      if (!path) {
        std::fprintf(stderr, "octet train: stopped: checkpoint at step %lld: "
                             "%s\n",
                     (long long)s, path.status().message().c_str());
        return 1;
      }
      std::printf("checkpoint: %s\n", path->c_str());
      std::fflush(stdout);
    }
  }
  double total = std::chrono::duration<double>(Clock::now() - start).count();
  if (!opts.saveHf.empty()) {
    hf::HfExportOptions exportOptions;
    if (hfInit)
      exportOptions.dtypes = hfInit->dtypes;
    StatusOr<size_t> written = saveHf(
        spec, opts.initFrom.empty() ? "" : opts.initFrom + "/config.json",
        opts.saveHf, m, schedule ? joinPipelineRanks(m, ranks, vars) : vars[0],
        exportOptions);
    if (!written)
      return inputError(written.status().message());
    std::printf("saved %zu tensors as a HF checkpoint in %s\n", *written,
                opts.saveHf.c_str());
  }
  int64_t ran = steps - startStep;
  std::printf("done: %lld steps in %.1f s (%.0f tokens/s); loss %.4f at step "
              "%lld -> %.4f at step %lld (%+.1f%%)\n",
              (long long)ran, total, double(tokensPerStep * ran) / total,
              firstLoss, (long long)(startStep + 1), lastLoss, (long long)steps,
              100.0 * (lastLoss - firstLoss) / firstLoss);
  return 0;
}

} // namespace octet
