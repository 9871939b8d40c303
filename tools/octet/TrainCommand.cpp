// octet train: compile a spec through autodiff and train it on the CPU with
// the reference interpreter (the fallback for machines without a GPU, and the
// tiny-model check that the whole path learns).

#include "compiler/Interpreter/Interpreter.h"
#include "compiler/Interpreter/Kernels.h"
#include "compiler/Registration.h"
#include "dialects/graph/GraphDialect.h"
#include "frontends/spec/GraphImporter.h"
#include "frontends/spec/SpecReader.h"
#include "runtime/data/ByteCorpus.h"
#include "tools/octet/Commands.h"
#include "tools/octet/TrainingOptions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace mlir;

namespace octet {
namespace {

struct Options {
  std::string spec;
  int64_t steps = 0; // 0: the spec's train.steps
  std::string data;  // overrides train.data.path
};

void printHelp(std::FILE *out) {
  std::fprintf(
      out,
      "usage: octet train SPEC [--steps N] [--data FILE]\n\n"
      "Compiles SPEC through autodiff and trains it on the CPU with the\n"
      "reference interpreter (float32 train step), printing a line per step\n"
      "(step, loss, grad norm, lr, tokens/s) and a summary.\n\n"
      "  --steps N     optimizer steps (default: train.steps); the LR\n"
      "                schedule ends at N\n"
      "  --data FILE   a UTF-8 text file, read as bytes (default:\n"
      "                train.data.path, with train.data.kind \"text\")\n"
      "  OCTET_THREADS=N   worker threads (default: all cores)\n");
}

int usageError(const std::string &message) {
  std::fprintf(stderr, "octet train: %s (see octet train --help)\n",
               message.c_str());
  return 2;
}

int inputError(const std::string &message) {
  std::fprintf(stderr, "octet train: error: %s\n", message.c_str());
  return 1;
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
    } else if (value("--data", opts.data)) {
    } else if (arg.starts_with("-")) {
      return usageError("unknown option '" + arg.str() + "'");
    } else if (opts.spec.empty()) {
      opts.spec = arg.str();
    } else {
      return usageError("one SPEC only; got '" + opts.spec + "' and '" +
                        arg.str() + "'");
    }
  }
  if (opts.spec.empty())
    return usageError("missing SPEC");
  return -1;
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
  StatusOr<spec::Spec> loaded = spec::loadSpecFile(opts.spec);
  if (!loaded)
    return inputError(loaded.status().message());
  spec::Spec &spec = *loaded;
  const spec::TrainSpec &train = spec.train();
  int64_t steps = opts.steps > 0 ? opts.steps : train.steps();
  int64_t batch = train.micro_batch_size(), seq = train.seq_len();

  std::string dataPath = opts.data;
  if (dataPath.empty()) {
    if (train.data().kind() != "text")
      return inputError(
          opts.spec + ": train.data.kind is \"" + train.data().kind() +
          "\"; `octet train` on the CPU reads byte-level text: set "
          "train.data.kind to \"text\" with train.data.path, or pass --data "
          "FILE");
    dataPath = train.data().path();
  }
  if (spec.model().vocab_size() < data::ByteCorpus::kVocabSize)
    return inputError(opts.spec + ": model.vocab_size is " +
                      std::to_string(spec.model().vocab_size()) +
                      "; byte-level text needs at least 256");
  data::ByteCorpus::Options corpusOptions;
  corpusOptions.batchSize = static_cast<uint32_t>(batch);
  corpusOptions.sequenceLength = static_cast<uint32_t>(seq);
  corpusOptions.evalFraction = train.data().eval_fraction();
  corpusOptions.seed = static_cast<uint64_t>(train.seed());
  StatusOr<data::ByteCorpus> corpus =
      data::ByteCorpus::open(dataPath, corpusOptions);
  if (!corpus)
    return inputError(corpus.status().message());

  DialectRegistry registry;
  registerCompilerDialects(registry);
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  auto module = importForwardGraph(context, spec);
  if (!module)
    return inputError(module.status().withContext(opts.spec).message());
  TrainingPipelineOptions pipeline = trainingOptionsFromSpec(spec, steps);
  PassManager pm(&context);
  buildTrainingPipeline(pm, pipeline);
  ModuleOp m = **module;
  if (failed(pm.run(m)))
    return inputError(opts.spec + ": autodiff failed (see the diagnostics "
                                  "above)");
  auto step = m.lookupSymbol<func::FuncOp>("train_microbatch");

  interp::VariableStore vars;
  vars.initialize(m, static_cast<uint64_t>(train.seed()));
  int64_t params = 0;
  for (auto var : m.getOps<graph::VariableOp>())
    if (var.isTrainable())
      params += var.getTensorType().getNumElements();
  interp::Interpreter interpreter(m);

  std::printf("octet train: %s, %lld parameters, %lld steps x %lld "
              "microbatch(es) of [%lld, %lld] tokens, %d threads, float32 "
              "on the CPU\n",
              opts.spec.c_str(), (long long)params, (long long)steps,
              (long long)pipeline.microbatches, (long long)batch,
              (long long)seq, interp::numThreads());
  std::printf("data: %s (%llu training bytes)\n", dataPath.c_str(),
              (unsigned long long)corpus->trainBytes());
  std::fflush(stdout);

  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  double firstLoss = NAN, lastLoss = NAN;
  std::vector<int32_t> window;
  int64_t tokensPerStep = batch * seq * pipeline.microbatches;
  for (int64_t s = 1; s <= steps; ++s) {
    auto stepStart = Clock::now();
    double lossSum = 0;
    for (int64_t micro = 0; micro < pipeline.microbatches; ++micro) {
      corpus->trainBatch(uint64_t((s - 1) * pipeline.microbatches + micro),
                         window);
      std::vector<int64_t> tokens(batch * seq), labels(batch * seq),
          positions(batch * seq);
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t t = 0; t < seq; ++t) {
          tokens[b * seq + t] = window[b * (seq + 1) + t];
          labels[b * seq + t] = window[b * (seq + 1) + t + 1];
          positions[b * seq + t] = t;
        }
      std::vector<interp::Tensor> args = {
          interp::Tensor::fromInts({batch, seq}, tokens),
          interp::Tensor::fromInts({batch, seq}, labels),
          interp::Tensor::fromFloats({batch, seq},
                                     std::vector<float>(batch * seq, 1.0f)),
          interp::Tensor::fromInts({batch, seq}, positions)};
      if (step.getNumArguments() == 5) {
        // Packed documents: each row is one document here.
        std::vector<int64_t> cu(batch + 1);
        for (int64_t b = 0; b <= batch; ++b)
          cu[b] = b * seq;
        args.push_back(interp::Tensor::fromInts({batch + 1}, cu));
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
    double loss = lossSum / double(pipeline.microbatches);
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
  }
  double total = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("done: %lld steps in %.1f s (%.0f tokens/s); loss %.4f at step "
              "1 -> %.4f at step %lld (%+.1f%%)\n",
              (long long)steps, total, double(tokensPerStep * steps) / total,
              firstLoss, lastLoss, (long long)steps,
              100.0 * (lastLoss - firstLoss) / firstLoss);
  return 0;
}

} // namespace octet
