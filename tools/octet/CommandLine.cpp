#include "tools/octet/CommandLine.h"

#include "support/Bytes.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <limits>

namespace octet {
namespace {

bool isFile(const std::string &path) {
  return cli::pathExists(path, cli::PathKind::File);
}

// A usage error found after parsing, in the command's name.
cli::Outcome usageError(const CLI::App &command, const std::string &message) {
  return cli::Outcome::usageError(cli::commandName(command), message);
}

// --gpu-memory: the GPU a memory plan is checked against.
void addGpuMemory(CLI::App &app, GpuTarget &gpu) {
  cli::addValue(
      app, "--gpu-memory",
      [&gpu](const std::string &text) {
        StatusOr<GpuTarget> parsed = parseGpuTarget(text);
        if (!parsed)
          throw CLI::ValidationError(parsed.status().message());
        gpu = *parsed;
      },
      "GPU",
      "the GPU the memory plan must fit: h100 (default,\n"
      "79.18 GiB), h200, or a size (141GB, 79GiB)");
}

// The train data flags: --text FILE and --data PREFIX, one of them.
void addDataSources(CLI::App &app, std::string &kind, std::string &path,
                    const std::string &textHelp,
                    const std::string &dataHelp) {
  auto source = [&kind, &path](const std::string &flag,
                               const std::string &sourceKind) {
    return [&kind, &path, flag, sourceKind](const std::string &value) {
      if (!kind.empty() && kind != sourceKind)
        throw CLI::ValidationError(flag + ": give one of --text, --data");
      kind = sourceKind;
      path = value;
    };
  };
  cli::addValue(app, "--text", source("--text", "text"), "FILE", textHelp);
  cli::addValue(app, "--data", source("--data", "indexed"), "PREFIX",
                dataHelp);
}

// `--data FILE` used to be byte-level text in `octet train`: a text file
// given as a PREFIX gets a pointer to --text rather than "FILE.idx not
// found".
std::string checkDataPrefix(const std::string &prefix) {
  if (isFile(prefix) && !isFile(prefix + ".idx"))
    return "--data takes an indexed dataset PREFIX (PREFIX.bin/.idx, from "
           "`octet data preprocess`); " +
           prefix + " is a file: for UTF-8 text read as bytes, use --text " +
           prefix;
  return "";
}

void defineCompile(CLI::App &app, CompileOptions &o,
                   std::vector<std::string> &specs,
                   std::vector<std::string> &dumps,
                   const std::vector<CompileStageInfo> &stages) {
  size_t width = 0;
  for (const CompileStageInfo &s : stages)
    width = std::max(width, s.name.size());
  std::string footer = "stages:\n";
  for (const CompileStageInfo &s : stages)
    footer += "  " + s.name + std::string(width + 2 - s.name.size(), ' ') +
              s.summary + "\n";
  footer += "\nWithout --dump-ir or -o, prints a one-line summary.";
  cli::configure(
      app,
      {"compile a model spec or HF config.json; dump IR by stage",
       "SPEC is a model + training spec (.pbtxt, protobuf text format) or a\n"
       "Hugging Face config.json (model only). With a config.json the train\n"
       "settings come from --train-spec (its model block, if any, is\n"
       "ignored), else from the documented defaults.",
       footer});
  cli::addPositionals(app, "SPEC", specs,
                      "a .pbtxt spec or a Hugging Face config.json");
  cli::addValue(app, "--train-spec", o.trainSpec, "FILE",
                "train settings for an HF config.json");
  cli::addCount(app, "--steps", o.steps, 1,
                "optimizer steps (default: train.steps); the LR\n"
                "schedule compiled into the step ends at N");
  app.add_option("--dump-ir", dumps,
                 "print the IR after STAGE to stdout (repeatable,\n"
                 "or a comma-separated list)")
      ->delimiter(',')
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("STAGE");
  cli::addValue(app, "-o,--out", o.output, "OUT",
                "OUT.octet: the bundle octet-run executes (spec,\n"
                "parameters, state, memory plan, programs);\n"
                "any other name: the IR after the last stage");
  cli::addFlag(app, "--fusion-report", o.fusionReport,
               "per kernel and per layer: ops fused, bytes,\n"
               "FLOPs, before and after fusion");
  cli::addFlag(app, "--precision-report", o.precisionReport,
               "per layer and GEMM (fprop, dgrad, wgrad): input\n"
               "formats and FP8 recipe, or why it stays wide");
  cli::addFlag(app, "--memory-plan", o.memoryPlan,
               "the static memory plan of the fused step: total,\n"
               "persistent and activation bytes, each program's\n"
               "peak, the largest slots; whether it fits the GPU\n"
               "and, if not, a micro batch that would");
  addGpuMemory(app, o.gpu);
  cli::addFlag(app, "--print-pipeline", o.printPipeline,
               "the passes of every stage after import as one\n"
               "textual pipeline with all options, for\n"
               "octet-opt --pass-pipeline on --dump-ir=import");
  cli::addValue(app, "--emit-ptx", o.ptxDir, "DIR",
                "after the last stage, every fused kernel to PTX\n"
                "for sm_90a: DIR/<kernel>.ptx, a .cubin each\n"
                "where ptxas is found (PATH, CUDA_HOME), and\n"
                "DIR/kernels.json, the launch manifest");
}

cli::Outcome finishCompile(const CLI::App &app, CompileOptions &o,
                           const std::vector<std::string> &specs,
                           const std::vector<std::string> &dumps,
                           const std::vector<CompileStageInfo> &stages) {
  std::string known;
  for (const CompileStageInfo &s : stages)
    known += (known.empty() ? "" : ", ") + s.name;
  for (const std::string &name : dumps) {
    if (name.empty())
      continue;
    bool found = false;
    for (const CompileStageInfo &s : stages)
      found |= s.name == name;
    if (!found)
      return usageError(app, "unknown stage '" + name +
                                 "' for --dump-ir; known stages: " + known);
    o.dumps.push_back(name);
  }
  std::string error = cli::onePositional(
      specs, "SPEC", "missing SPEC (a .pbtxt spec or an HF config.json)",
      o.spec);
  return error.empty() ? cli::Outcome::run() : usageError(app, error);
}

void defineTrain(CLI::App &app, TrainOptions &o,
                 std::vector<std::string> &specs) {
  cli::configure(
      app,
      {"train a spec: on a Hopper GPU with octet-run, else on the CPU",
       "On a machine with a Hopper GPU (H100/H200), compiles SPEC to a\n"
       "bundle and trains it with the GPU runtime (octet-run), printing the\n"
       "memory plan and a line per step (step, loss, grad norm, lr,\n"
       "tokens/s, model TFLOP/s, MFU, memory). Elsewhere, or while the\n"
       "bundle has kernels without GPU code, compiles SPEC through autodiff\n"
       "and trains it on the CPU with the reference interpreter (float32\n"
       "train step), printing step, loss, grad norm, lr and tokens/s.",
       "Without --text or --data the spec's train.data says what to read:\n"
       "kind \"text\" (bytes), \"indexed\" (`octet data preprocess`) or\n"
       "\"jsonl\" (with train.data.tokenizer, packed; CPU only).\n\n"
       "environment:\n"
       "  OCTET_THREADS=N         CPU worker threads (default: all cores)"});
  cli::addPositionals(app, "SPEC", specs, "a .pbtxt model + training spec");
  cli::addCount(app, "--steps", o.steps, 1,
                "optimizer steps (default: train.steps); the LR\n"
                "schedule ends at N");
  addDataSources(app, o.dataKind, o.dataPath,
                 "a UTF-8 text file, read as bytes (vocabulary 256)",
                 "an indexed dataset (PREFIX.bin/.idx, from\n"
                 "`octet data preprocess`), packed into rows");
  cli::addValue(app, "--init-from", o.initFrom, "HF_DIR",
                "start from a Hugging Face checkpoint directory\n"
                "(its config.json must describe the spec's model)");
  cli::addValue(app, "--save-hf", o.saveHf, "DIR",
                "write the trained weights there as a HF\n"
                "checkpoint (on the CPU in the dtypes they were\n"
                "loaded in; on the GPU in the bundle's parameter\n"
                "dtype)");
  cli::addCount(app, "--fp8-stats-interval", o.fp8StatsInterval, 1,
                "every N steps, per FP8 tensor: amax, scale,\n"
                "shares of values that underflow to zero or\n"
                "saturate");
  cli::addFlag(app, "--cpu", o.cpu,
               "train on the CPU interpreter even with a GPU");
  cli::addValue(app, "--checkpoint-dir", o.checkpointDir, "DIR",
                "save DIR/step-N checkpoints every\n"
                "train.checkpoint_interval steps and at the end\n"
                "(HF-named safetensors plus optimizer, FP8 and\n"
                "data state), on the GPU and on the CPU");
  cli::addFlag(app, "--resume", o.resume,
               "continue from --checkpoint-dir's latest\n"
               "checkpoint bit for bit (from step 0 while it\n"
               "holds none)");
  cli::addValue(app, "--tensorboard", o.tensorboardDir, "DIR",
                "GPU runs: write TensorBoard event files there");
}

cli::Outcome finishTrain(const CLI::App &app, TrainOptions &o,
                         const std::vector<std::string> &specs) {
  std::string error = cli::onePositional(specs, "SPEC", "missing SPEC", o.spec);
  if (error.empty() && o.resume && o.checkpointDir.empty())
    error = "--resume needs --checkpoint-dir DIR";
  if (error.empty() && o.resume && !o.initFrom.empty())
    error = "--resume and --init-from both say where the parameters come "
            "from: give one";
  if (error.empty() && o.dataKind == "indexed")
    error = checkDataPrefix(o.dataPath);
  return error.empty() ? cli::Outcome::run() : usageError(app, error);
}

void defineGolden(CLI::App &app, GoldenOptions &o,
                  std::vector<std::string> &specs) {
  cli::configure(
      app,
      {"the interpreter's first steps of a bundle for octet-run --golden",
       "Compiles SPEC as `octet compile -o` does (DIR/model.octet and the\n"
       "fused IR it is emitted from, DIR/model.mlir), initialises every\n"
       "parameter and state tensor as the bundle's Init says, runs K steps\n"
       "of the fused programs on the reference interpreter (INIT, then per\n"
       "step the train program per microbatch and the optimizer step) and\n"
       "writes what `octet-run DIR/model.octet --golden DIR` checks the GPU\n"
       "against: the batches, each step's loss and grad norm, and after\n"
       "step 1 every gradient (before the optimizer) and every parameter\n"
       "and state tensor (after it), by slot name.",
       ""});
  cli::addPositionals(app, "SPEC", specs, "a .pbtxt model + training spec");
  cli::required(cli::addValue(app, "-o,--out", o.dir, "DIR",
                              "the golden directory (created)"));
  cli::addCount(app, "--steps", o.steps, 1, "steps to run (default 3)");
  cli::addValue(app, "--text", o.text, "FILE",
                "batches from a UTF-8 text file, read as bytes\n"
                "(default: tokens drawn uniformly from the\n"
                "vocabulary with the spec's seed)");
  cli::addRetired(app, "--data",
                  "--data is now the indexed dataset PREFIX of `octet "
                  "train`; for a text file read as bytes use --text FILE");
}

cli::Outcome finishGolden(const CLI::App &app, GoldenOptions &o,
                          const std::vector<std::string> &specs) {
  std::string error = cli::onePositional(specs, "SPEC", "missing SPEC", o.spec);
  if (error.empty() && o.dir.empty())
    error = "missing -o DIR (the golden directory to write)";
  return error.empty() ? cli::Outcome::run() : usageError(app, error);
}

void defineExportHf(CLI::App &app, ExportHfOptions &o,
                    std::vector<std::string> &models) {
  cli::configure(
      app,
      {"load a HF checkpoint into a model and write it back out",
       "Loads the Hugging Face checkpoint HF_DIR (a directory with\n"
       "model.safetensors, or model.safetensors.index.json and its shards)\n"
       "into the parameters of MODEL, checking every tensor's name, shape\n"
       "and dtype against the graph, and writes them back out under their\n"
       "HF names, with a config.json.",
       ""});
  cli::addPositionals(app, "MODEL", models,
                      "a .pbtxt spec or a HF config.json (default:\n"
                      "HF_DIR/config.json)")
      ->option_text("[MODEL]");
  cli::required(cli::addValue(app, "--init-from", o.initFrom, "HF_DIR",
                              "the Hugging Face checkpoint to load"));
  cli::required(
      cli::addValue(app, "-o,--out", o.out, "DIR", "where to write the export"));
  cli::addChoice(app, "--dtype", o.dtype, {"source", "f32", "bf16", "f16"},
                 "source (default: each tensor as it came, so the\n"
                 "export equals the input bit for bit), f32, bf16\n"
                 "or f16 (round to nearest even)");
  cli::addValue(
         app, "--max-shard-size",
         [&o](const std::string &text) {
           if (!parseByteSize(text, o.maxShardBytes))
             throw CLI::ValidationError("--max-shard-size takes a size such "
                                        "as 200KB or 5GB; got '" +
                                        text + "'");
         },
         "SIZE",
         "bytes per safetensors file, e.g. 200KB, 5GB\n"
         "(default 5GB); more make shards and an index");
}

cli::Outcome finishExportHf(const CLI::App &app, ExportHfOptions &o,
                            const std::vector<std::string> &models) {
  if (models.size() > 1)
    return usageError(app, "one MODEL only; got '" + models[0] + "' and '" +
                               models[1] + "'");
  if (!models.empty())
    o.model = models[0];
  if (o.initFrom.empty())
    return usageError(app, "missing --init-from HF_DIR (the checkpoint to "
                           "load)");
  if (o.out.empty())
    return usageError(app, "missing -o DIR (where to write the export)");
  return cli::Outcome::run();
}

void defineInspect(CLI::App &app, InspectOptions &o,
                   std::vector<std::string> &bundles) {
  cli::configure(
      app,
      {"what a .octet bundle holds: build, precision, memory, kernels",
       "Prints how the bundle was built (format and compiler versions, spec,\n"
       "options, content hash), the precision table, the memory plan, the\n"
       "kernels and GEMMs, and the programs of each rank. Kernels marked\n"
       "[no code] keep octet-run from running the bundle.",
       ""});
  cli::addPositionals(app, "BUNDLE", bundles, "a .octet file from octet "
                                              "compile -o")
      ->option_text("BUNDLE.octet");
  cli::addFlag(app, "--all-slots", o.allSlots,
               "list every slot of the memory plan, not the\nlargest");
  cli::addFlag(app, "--collectives", o.collectives,
               "print only the NCCL calls, one tab-separated line\n"
               "each in issue order (bench/collectives_time.py\n"
               "times them alone)");
  addGpuMemory(app, o.gpu);
  cli::addValue(app, "--modules", o.modulesDir, "DIR",
                "write each kernel module as DIR/<module>.ptx,\n"
                "and DIR/<module>.cubin where the bundle has one");
}

void defineLaunch(CLI::App &app, LaunchCommandOptions &o) {
  cli::configure(
      app,
      {"run a command as N ranks on this host, as torchrun does",
       "Starts N processes of COMMAND, each with RANK, WORLD_SIZE,\n"
       "LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and MASTER_PORT\n"
       "set (and NCCL_NVLS_ENABLE=0), and prefixes every line a rank prints\n"
       "with \"[rank R] \". The first rank to fail decides the exit status\n"
       "and the message; the others get --grace seconds to end on their\n"
       "own, then SIGTERM, then SIGKILL.",
       "example: octet launch --gpus 2 -- octet-run model.octet --steps 10"});
  cli::required(cli::addCount(app, "--gpus", o.gpus, 1,
                              "ranks to start, one per GPU", 1024));
  cli::addCount(app, "--port", o.port, 1,
                "MASTER_PORT (default: a free port)", 65535);
  cli::addCount(app, "--grace", o.graceSeconds, 0,
                "seconds the other ranks get after a failure\n"
                "(default 30)");
  cli::addPositionals(app, "COMMAND", o.command,
                      "what each rank runs, with its arguments")
      ->option_text("-- COMMAND...");
}

void definePreprocess(CLI::App &app, data::PreprocessOptions &o) {
  cli::configure(
      app,
      {"tokenize a jsonl file into a Megatron indexed dataset",
       "Each line of the input is {\"text\": \"...\"} or {\"messages\":\n"
       "[{\"role\": ..., \"content\": ...}, ...]} (roles: system, user,\n"
       "assistant, tool, ipython; chat uses the Llama 3 template). Writes\n"
       "PREFIX.bin and PREFIX.idx (Megatron MMIDIDX format), and for chat\n"
       "data PREFIX_loss_mask.bin/.idx (1 on assistant tokens). Nothing is\n"
       "written unless the run succeeds.",
       ""});
  cli::required(cli::addValue(app, "--input", o.inputPath, "FILE",
                              "jsonl input, optionally gzip-compressed"));
  cli::required(
      cli::addValue(app, "--tokenizer", o.tokenizerPath, "FILE",
                    "Hugging Face tokenizer.json (byte-level BPE)"));
  cli::required(cli::addValue(app, "--output-prefix", o.outputPrefix,
                              "PREFIX",
                              "where to write PREFIX.bin and PREFIX.idx"));
  cli::addValue(
      app, "--on-error",
      [&o](const std::string &text) {
        if (text != "stop" && text != "skip")
          throw CLI::ValidationError("--on-error takes stop or skip; got '" +
                                     text + "'");
        o.onError = text == "stop" ? data::PreprocessOptions::OnError::Stop
                                   : data::PreprocessOptions::OnError::Skip;
      },
      "stop|skip",
      "on a malformed line: stop with its line number\n"
      "(default), or report it and leave it out");
  cli::addValue(
      app, "--threads",
      [&o](const std::string &text) {
        int64_t threads = 0;
        if (text.empty() || text.size() > 4 ||
            text.find_first_not_of("0123456789") != std::string::npos ||
            (threads = std::stoll(text)) < 1 || threads > 1024)
          throw CLI::ValidationError("--threads takes a whole number from 1 "
                                     "to 1024; got '" +
                                     text + "'");
        o.threads = unsigned(threads);
      },
      "N", "tokenizer threads (default: one per core)");
  cli::addFlag(app, "--append-eod", o.appendEod,
               "end each text record with the end-of-document\ntoken");
  cli::addValue(
      app, "--eod-token",
      [&o](const std::string &text) {
        o.eodToken = text;
        o.appendEod = true;
      },
      "TOKEN",
      "that token, and --append-eod (default\n"
      "<|end_of_text|> or <|endoftext|>)");
  cli::addFlag(app, "--add-bos", o.addBos,
               "apply the tokenizer's template (e.g.\n"
               "<|begin_of_text|>) to text records");
  cli::addValue(app, "--text-key", o.textKey, "KEY",
                "field holding the text (default \"text\")");
  app.add_flag_callback(
      "--no-progress", [&o] { o.showProgress = false; },
      "no progress display on stderr");
}

void defineDataInspect(CLI::App &app, DataInspectOptions &o,
                       std::vector<std::string> &prefixes) {
  cli::configure(app,
                 {"print the sizes (and first sequences) of a dataset",
                  "Checks PREFIX.bin/.idx and prints their counts; with\n"
                  "--tokenizer, also decodes the first N sequences.",
                  ""});
  cli::addPositionals(app, "PREFIX", prefixes,
                      "the dataset (PREFIX.bin and PREFIX.idx)");
  cli::addValue(app, "--tokenizer", o.tokenizer, "FILE",
                "Hugging Face tokenizer.json to decode with");
  cli::addCount(app, "--show", o.show, 0,
                "sequences decoded with --tokenizer (default 1)");
}

} // namespace

cli::Outcome parseOctetCommandLine(const std::vector<std::string> &args,
                                   const std::vector<CompileStageInfo> &stages,
                                   OctetCommandLine &out) {
  CLI::App app("", "octet");
  cli::configure(app, {"",
                       "octet compiles decoder-transformer training for FP8 "
                       "on Hopper GPUs.",
                       "`octet <command> --help` describes a command."});
  app.require_subcommand(1);

  std::vector<std::string> compileSpecs, dumps, trainSpecs, goldenSpecs,
      models, bundles, prefixes;
  CLI::App *compile = app.add_subcommand("compile");
  defineCompile(*compile, out.compile, compileSpecs, dumps, stages);
  CLI::App *train = app.add_subcommand("train");
  defineTrain(*train, out.train, trainSpecs);
  CLI::App *exportHf = app.add_subcommand("export-hf");
  defineExportHf(*exportHf, out.exportHf, models);
  CLI::App *inspect = app.add_subcommand("inspect");
  defineInspect(*inspect, out.inspect, bundles);
  CLI::App *golden = app.add_subcommand("golden");
  defineGolden(*golden, out.golden, goldenSpecs);
  CLI::App *launch = app.add_subcommand("launch");
  defineLaunch(*launch, out.launch);
  CLI::App *data = app.add_subcommand("data");
  cli::configure(*data, {"prepare and inspect training data", "", ""});
  data->require_subcommand(1);
  CLI::App *preprocess = data->add_subcommand("preprocess");
  definePreprocess(*preprocess, out.preprocess);
  CLI::App *dataInspect = data->add_subcommand("inspect");
  defineDataInspect(*dataInspect, out.dataInspect, prefixes);

  cli::Outcome outcome = cli::parse(app, args);
  if (!outcome.shouldRun())
    return outcome;
  if (compile->parsed()) {
    out.command = "compile";
    return finishCompile(*compile, out.compile, compileSpecs, dumps, stages);
  }
  if (train->parsed()) {
    out.command = "train";
    return finishTrain(*train, out.train, trainSpecs);
  }
  if (exportHf->parsed()) {
    out.command = "export-hf";
    return finishExportHf(*exportHf, out.exportHf, models);
  }
  if (inspect->parsed()) {
    out.command = "inspect";
    std::string error = cli::onePositional(
        bundles, "BUNDLE",
        "missing BUNDLE (a .octet file from octet compile -o)",
        out.inspect.bundle);
    return error.empty() ? outcome : usageError(*inspect, error);
  }
  if (golden->parsed()) {
    out.command = "golden";
    return finishGolden(*golden, out.golden, goldenSpecs);
  }
  if (launch->parsed()) {
    out.command = "launch";
    if (out.launch.gpus < 1)
      return usageError(*launch, "missing --gpus N (the number of ranks)");
    if (out.launch.command.empty())
      return usageError(*launch, "missing COMMAND: name what each rank runs "
                                 "after --, e.g. -- octet-run model.octet");
    return outcome;
  }
  if (preprocess->parsed()) {
    out.command = "data preprocess";
    const data::PreprocessOptions &p = out.preprocess;
    if (p.inputPath.empty() || p.tokenizerPath.empty() ||
        p.outputPrefix.empty())
      return usageError(*preprocess, "--input, --tokenizer and "
                                     "--output-prefix are required");
    return outcome;
  }
  out.command = "data inspect";
  std::string error = cli::onePositional(
      prefixes, "PREFIX",
      "name the dataset prefix (PREFIX for PREFIX.bin/.idx)",
      out.dataInspect.prefix);
  return error.empty() ? outcome : usageError(*dataInspect, error);
}

Status checkTrainInputs(const TrainOptions &opts) {
  if (opts.dataKind == "text" && !isFile(opts.dataPath))
    return Status::error("--text " + opts.dataPath + ": no such file");
  if (opts.dataKind == "indexed")
    if (std::string missing = cli::missingIndexedDataset("--data", opts.dataPath);
        !missing.empty())
      return Status::error(missing);
  if (!opts.initFrom.empty() && !cli::pathExists(opts.initFrom, cli::PathKind::Any))
    return Status::error("--init-from " + opts.initFrom +
                         ": no such file or directory");
  return Status::ok();
}

Status checkExportHfInputs(const ExportHfOptions &opts) {
  if (!cli::pathExists(opts.initFrom, cli::PathKind::Any))
    return Status::error("--init-from " + opts.initFrom +
                         ": no such file or directory");
  return Status::ok();
}

StatusOr<RunArgs> gpuRunArgs(const TrainOptions &opts,
                             const std::string &specDataKind,
                             const std::string &specDataPath,
                             const std::string &bundle) {
  RunArgs run;
  run.bundle = bundle;
  if (opts.steps > 0)
    run.trainer.steps = opts.steps;
  run.dataKind = opts.dataKind.empty() ? specDataKind : opts.dataKind;
  run.dataPath = opts.dataKind.empty() ? specDataPath : opts.dataPath;
  if (run.dataKind != "text" && run.dataKind != "indexed")
    return Status::error("train.data.kind \"" + run.dataKind +
                         "\" is read by the CPU trainer only (run `octet "
                         "data preprocess` for an indexed dataset the GPU "
                         "reads)");
  run.trainer.checkpointDir = opts.checkpointDir;
  run.trainer.resume = opts.resume;
  run.trainer.tensorboardDir = opts.tensorboardDir;
  run.trainer.initWeights = opts.initFrom;
  run.trainer.saveHf = opts.saveHf;
  if (Status st = validateRunArgs(run); !st)
    return st;
  return run;
}

} // namespace octet
