#include "runtime/exec/RunOptions.h"

#include "runtime/comm/NcclOptions.h"
#include "support/AtomicFile.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <variant>

namespace octet {
namespace {

using Int64Field = int64_t &(*)(RunArgs &);
using IntField = int &(*)(RunArgs &);
using TextField = std::string &(*)(RunArgs &);
using SwitchField = bool &(*)(RunArgs &);
// One of --synthetic, --data, --text: sets RunArgs::dataKind to `kind`.
struct DataSource {
  const char *kind;
};

// One option of octet-run: its flag (the options file's key is the flag
// without its dashes), what it takes, its help and the field it sets.
struct RunOption {
  const char *flag;
  const char *valueName; // "N", "DIR"; null for a switch
  const char *help;
  std::variant<Int64Field, IntField, TextField, SwitchField, DataSource>
      field;
  int64_t least = 0; // for numbers
  bool negated = false; // a switch that clears its field (--no-graph)
};

// The order is the order of --help.
const RunOption kRunOptions[] = {
    {"--steps", "N", "optimizer steps (default: the bundle's)",
     +[](RunArgs &a) -> int64_t & { return a.trainer.steps; }, 1},
    {"--synthetic", nullptr,
     "random tokens from the schedule's seed (default)",
     DataSource{"synthetic"}},
    {"--data", "PREFIX",
     "a Megatron indexed dataset (PREFIX.bin/.idx, from\n"
     "`octet data preprocess`), packed into rows",
     DataSource{"indexed"}},
    {"--text", "FILE",
     "a UTF-8 text file read as bytes (vocabulary 256);\nits tail is held out",
     DataSource{"text"}},
    {"--eval-data", "PREFIX", "held-out indexed dataset for --data",
     +[](RunArgs &a) -> std::string & { return a.evalPath; }},
    {"--eval-batches", "N", "held-out batches per evaluation",
     +[](RunArgs &a) -> int64_t & { return a.trainer.evalBatches; }, 1},
    {"--eval-interval", "N",
     "evaluate every N steps (default: the bundle's;\n0: never)",
     +[](RunArgs &a) -> int64_t & { return a.trainer.evalInterval; }, 0},
    {"--log-interval", "N", "print every N steps (default: the bundle's)",
     +[](RunArgs &a) -> int64_t & { return a.trainer.logInterval; }, 1},
    {"--checkpoint-dir", "DIR",
     "save DIR/step-N (HF-named safetensors, optimizer,\n"
     "FP8 and data state) every --checkpoint-interval\nsteps and at the end",
     +[](RunArgs &a) -> std::string & { return a.trainer.checkpointDir; }},
    {"--checkpoint-interval", "N",
     "steps between checkpoints (default: the bundle's;\n0: only at the end)",
     +[](RunArgs &a) -> int64_t & { return a.trainer.checkpointInterval; },
     0},
    {"--keep-checkpoints", "N", "newest checkpoints kept (default 2; 0 keeps all)",
     +[](RunArgs &a) -> int & { return a.trainer.keepCheckpoints; }, 0},
    {"--resume", nullptr,
     "continue from --checkpoint-dir's latest checkpoint,\n"
     "bit for bit (from step 0 while it holds none)",
     +[](RunArgs &a) -> bool & { return a.trainer.resume; }},
    {"--init-from", "PATH",
     "parameters from a Hugging Face model directory or\n"
     "a safetensors file (by HF or octet name)",
     +[](RunArgs &a) -> std::string & { return a.trainer.initWeights; }},
    {"--save-hf", "DIR",
     "after the last step, write the parameters as a\n"
     "Hugging Face model there (safetensors under HF\n"
     "names, config.json) for transformers' from_pretrained",
     +[](RunArgs &a) -> std::string & { return a.trainer.saveHf; }},
    {"--tensorboard", "DIR", "write TensorBoard event files there",
     +[](RunArgs &a) -> std::string & { return a.trainer.tensorboardDir; }},
    {"--pipeline-timeline", nullptr,
     "a pipeline bundle: time every instruction with\n"
     "CUDA events after step 2, and print the measured\n"
     "bubble beside the one the schedule predicts from\n"
     "those op times",
     +[](RunArgs &a) -> bool & { return a.trainer.pipelineTimeline; }},
    {"--no-graph", nullptr, "run every step eagerly (no CUDA graphs)",
     +[](RunArgs &a) -> bool & { return a.trainer.graph; }, 0, true},
    {"--golden", "DIR",
     "check the first steps against the reference\n"
     "interpreter's (`octet golden SPEC -o DIR`): loss\n"
     "and grad norm per step, every persistent slot\n"
     "after step 1; exits 1 on a mismatch (the worst\n"
     "slots are listed; all with --all-slots)",
     +[](RunArgs &a) -> std::string & { return a.golden; }},
    {"--golden-save", "DIR",
     "write the GPU's snapshots there, in the golden's\nformat",
     +[](RunArgs &a) -> std::string & { return a.goldenSave; }},
    {"--plan", nullptr, "print the build and memory plan, run nothing",
     +[](RunArgs &a) -> bool & { return a.planOnly; }},
    {"--all-slots", nullptr, "list every slot of the plan",
     +[](RunArgs &a) -> bool & { return a.allSlots; }},
    {"--record-algorithms", nullptr,
     "write the chosen cuBLASLt algorithms back into\nthe bundle",
     +[](RunArgs &a) -> bool & { return a.recordAlgorithms; }},
    {"--gemm-heuristic", nullptr,
     "take cuBLASLt's first heuristic answer for every\n"
     "GEMM, untimed (default: time up to 8 candidates\n"
     "on the real shapes at load, once per descriptor)",
     +[](RunArgs &a) -> bool & { return a.gemmHeuristic; }},
    {"--gemm-configs", "N",
     "where cuBLASLt's heuristic gives fewer than 8\n"
     "candidates, also time other tiles, stage counts,\n"
     "swizzles and cluster shapes of its algorithms, up\n"
     "to N candidates in all (default 0: none)",
     +[](RunArgs &a) -> int & { return a.gemmConfigs; }, 0},
    {"--gemm-cache", "FILE",
     "the timed cuBLASLt algorithms, read and written\n"
     "there, keyed by GPU, cuBLASLt version and GEMM\n"
     "(default: $OCTET_GEMM_CACHE, else BUNDLE.gemms)",
     +[](RunArgs &a) -> std::string & { return a.gemmCache; }},
    {"--bench", nullptr,
     "synthetic data, --warmup steps untimed, no\ncheckpoints",
     +[](RunArgs &a) -> bool & { return a.bench; }},
    {"--warmup", "N", "untimed steps of --bench (default 2)",
     +[](RunArgs &a) -> int64_t & { return a.warmup; }, 0},
    {"--json", "FILE", "write throughput, memory and each program's\n"
                       "device time as JSON, with --timeline's step in\n"
                       "numbers (rank R > 0 of a job writes FILE.rankR,\n"
                       "its own step times)",
     +[](RunArgs &a) -> std::string & { return a.json; }},
    {"--timeline", "FILE",
     "record the last step (with --bench, the last\n"
     "timed one) with a CUDA event before and after\n"
     "every step of its programs, each on its stream,\n"
     "and write it as a Chrome trace (chrome://tracing,\n"
     "Perfetto; rank R > 0 of a job writes FILE.rankR);\n"
     "rank 0 prints each program's span, each stream's\n"
     "busy time and how much of the collectives ran\n"
     "beside compute. That step runs eagerly (no CUDA\n"
     "graph); the other steps record nothing",
     +[](RunArgs &a) -> std::string & { return a.timeline; }},
    {"--gpus", "N",
     "start N ranks of this command on this host, as\n"
     "`octet launch --gpus N` does (N: the bundle's\nworld size)",
     +[](RunArgs &a) -> int & { return a.gpus; }, 1},
    {"--nccl-buffers", "HOW",
     "registered: the plan's arenas come from ncclMemAlloc\n"
     "and are registered with the data group's NCCL\n"
     "communicator, which then reads and writes them\n"
     "directly (the default for data-parallel layouts\n"
     "without pipeline stages); none: NCCL copies\n"
     "through its own buffers",
     +[](RunArgs &a) -> std::string & { return a.ncclBuffers; }},
};

constexpr const char *kMissingBundle =
    "missing BUNDLE.octet (written by `octet compile SPEC -o BUNDLE.octet`)";

constexpr const char *kDataSourceConflict =
    ": give one of --synthetic, --data, --text";

std::string keyOf(const RunOption &o) { return std::string(o.flag + 2); }

const cli::HelpText kRunHelp = {
    "",
    "Trains the compiled model on this machine's GPU (LOCAL_RANK / RANK as\n"
    "torchrun sets them): prints the build and memory plan, the runtime's\n"
    "fixed costs, then a line per step. The command line is checked, and\n"
    "the files it names are looked for, before the GPU is set up.",
    "--options FILE reads the options `octet train` writes for its GPU runs\n"
    "(JSON: the flags above without their dashes, e.g. {\"bundle\":\n"
    "\"x.octet\", \"steps\": 20, \"text\": \"data/corpus.txt\"}); flags "
    "given\nbeside it override the file."};

// Declares every option of the table on `app`, bound to `out`.
// `dataSources` counts --synthetic/--data/--text on this command line.
void defineRunOptions(CLI::App &app, RunArgs &out, int &dataSources) {
  for (const RunOption &o : kRunOptions) {
    std::string flag = o.flag;
    if (auto *f = std::get_if<Int64Field>(&o.field))
      cli::addCount(app, flag, (*f)(out), o.least, o.help);
    else if (auto *f = std::get_if<IntField>(&o.field))
      cli::addCount(app, flag, (*f)(out), int(o.least), o.help);
    else if (auto *f = std::get_if<TextField>(&o.field))
      cli::addValue(app, flag, (*f)(out), o.valueName, o.help);
    else if (auto *f = std::get_if<SwitchField>(&o.field)) {
      bool &field = (*f)(out);
      bool negated = o.negated;
      app.add_flag_callback(
          flag, [&field, negated] { field = !negated; }, o.help);
    } else {
      std::string kind = std::get<DataSource>(o.field).kind;
      auto set = [&out, &dataSources, flag, kind](const std::string &path) {
        if (++dataSources > 1)
          throw CLI::ValidationError(flag + kDataSourceConflict);
        out.dataKind = kind;
        out.dataPath = path;
      };
      if (o.valueName)
        cli::addValue(app, flag, set, o.valueName, o.help);
      else
        app.add_flag_callback(
            flag, [set] { set(""); }, o.help);
    }
  }
}

Status checkPrefix(const std::string &flag, const std::string &prefix) {
  std::string missing = cli::missingIndexedDataset(flag, prefix);
  return missing.empty() ? Status::ok() : Status::error(missing);
}

} // namespace

std::string rankOutputPath(const std::string &path, int rank) {
  return rank == 0 ? path : path + ".rank" + std::to_string(rank);
}

std::string gemmCachePath(const RunArgs &args) {
  if (!args.gemmCache.empty())
    return args.gemmCache;
  if (const char *env = std::getenv("OCTET_GEMM_CACHE"); env && *env)
    return env;
  return args.bundle + ".gemms";
}

cli::Outcome parseRunArgs(const std::vector<std::string> &args,
                          RunArgs &out) {
  CLI::App app("", "octet-run");
  cli::configure(app, kRunHelp);
  std::vector<std::string> bundles;
  int dataSources = 0;
  cli::addPositionals(app, "BUNDLE", bundles,
                      "the bundle `octet compile SPEC -o X.octet` wrote")
      ->option_text("BUNDLE.octet");
  // Before the table: the file's values are read first, the flags beside
  // it override them.
  app.add_option_function<std::string>(
         "--options",
         [&out](const std::string &path) {
           StatusOr<RunArgs> read = readRunOptionsFile(path);
           if (!read)
             throw CLI::ValidationError("--options: " +
                                        read.status().message());
           out = std::move(*read);
         },
         "every option from FILE, as `octet train` writes it")
      ->type_name("FILE");
  defineRunOptions(app, out, dataSources);
  cli::addRetired(app, "--init-weights",
                  "--init-weights is now --init-from PATH, as in `octet "
                  "train` and `octet export-hf`");

  cli::Outcome outcome = cli::parse(app, args);
  if (!outcome.shouldRun())
    return outcome;
  auto usage = [](const std::string &message) {
    return cli::Outcome::usageError("octet-run", message);
  };
  if (bundles.size() > 1)
    return usage("one bundle at a time; got '" + bundles[0] + "' and '" +
                 bundles[1] + "'");
  if (!bundles.empty())
    out.bundle = bundles[0];
  if (out.bundle.empty())
    return usage(kMissingBundle);
  if (Status st = validateRunArgs(out); !st)
    return usage(st.message());
  return outcome;
}

Status validateRunArgs(const RunArgs &a) {
  if (!a.ncclBuffers.empty() && !comm::bufferRegistrationNamed(a.ncclBuffers))
    return Status::error("--nccl-buffers takes none or registered; got '" +
                         a.ncclBuffers + "'");
  bool ownData = a.dataKind != "synthetic";
  if (!a.evalPath.empty() && a.dataKind != "indexed")
    return Status::error("--eval-data is the held-out split of --data "
                         "PREFIX; synthetic data and --text hold out their "
                         "own");
  if (a.trainer.resume && a.trainer.checkpointDir.empty())
    return Status::error("--resume needs --checkpoint-dir DIR (the "
                         "directory the earlier run saved into)");
  if (a.trainer.resume && !a.trainer.initWeights.empty())
    return Status::error("--resume and --init-from both say where the "
                         "parameters come from: give one");
  if (a.bench && ownData)
    return Status::error("--bench times synthetic data; drop --data/--text");
  if (!a.golden.empty() &&
      (a.bench || ownData || a.trainer.resume ||
       !a.trainer.initWeights.empty()))
    return Status::error("--golden brings its own initial values and "
                         "batches; drop --bench, --data/--text, --resume "
                         "and --init-from");
  if (!a.timeline.empty() && !a.golden.empty())
    return Status::error("--golden checks the first steps and records no "
                         "timeline; drop --timeline");
  if (!a.trainer.saveHf.empty() && (a.bench || !a.golden.empty()))
    return Status::error("--save-hf writes a trained model; drop --bench "
                         "and --golden");
  if (a.bench && !a.trainer.checkpointDir.empty())
    return Status::error("--bench does not save checkpoints; drop "
                         "--checkpoint-dir");
  return Status::ok();
}

Status checkRunInputs(const RunArgs &a) {
  if (!cli::pathExists(a.bundle, cli::PathKind::File))
    return Status::error(a.bundle + ": no such file (the bundle `octet "
                                    "compile SPEC -o X.octet` writes)");
  if (a.dataKind == "text" && !cli::pathExists(a.dataPath, cli::PathKind::File))
    return Status::error("--text " + a.dataPath + ": no such file");
  if (a.dataKind == "indexed")
    OCTET_RETURN_IF_ERROR(checkPrefix("--data", a.dataPath));
  if (!a.evalPath.empty())
    OCTET_RETURN_IF_ERROR(checkPrefix("--eval-data", a.evalPath));
  if (!a.trainer.initWeights.empty() && !cli::pathExists(a.trainer.initWeights, cli::PathKind::Any))
    return Status::error("--init-from " + a.trainer.initWeights +
                         ": no such file or directory");
  if (!a.trainer.saveHf.empty()) {
    std::string parent = a.trainer.saveHf;
    while (parent.size() > 1 && parent.back() == '/')
      parent.pop_back();
    size_t slash = parent.find_last_of('/');
    parent = slash == std::string::npos ? "."
             : slash == 0              ? "/"
                                       : parent.substr(0, slash);
    if (!cli::pathExists(parent, cli::PathKind::Directory))
      return Status::error("--save-hf " + a.trainer.saveHf + ": no folder " +
                           parent + " to write it in");
    if (cli::pathExists(a.trainer.saveHf, cli::PathKind::File))
      return Status::error("--save-hf " + a.trainer.saveHf +
                           ": a file, not a folder");
  }
  if (!a.golden.empty() && !cli::pathExists(a.golden, cli::PathKind::Directory))
    return Status::error("--golden " + a.golden +
                         ": no such directory (`octet golden SPEC -o DIR` "
                         "writes one)");
  return Status::ok();
}

std::string runArgsToJson(const RunArgs &given) {
  RunArgs args = given, defaults;
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (!args.bundle.empty())
    j["bundle"] = args.bundle;
  for (const RunOption &o : kRunOptions) {
    std::string key = keyOf(o);
    if (auto *f = std::get_if<Int64Field>(&o.field)) {
      if ((*f)(args) != (*f)(defaults))
        j[key] = (*f)(args);
    } else if (auto *f = std::get_if<IntField>(&o.field)) {
      if ((*f)(args) != (*f)(defaults))
        j[key] = (*f)(args);
    } else if (auto *f = std::get_if<TextField>(&o.field)) {
      if ((*f)(args) != (*f)(defaults))
        j[key] = (*f)(args);
    } else if (auto *f = std::get_if<SwitchField>(&o.field)) {
      if ((*f)(args) != (*f)(defaults))
        j[key] = true;
    } else if (args.dataKind == std::get<DataSource>(o.field).kind &&
               args.dataKind != defaults.dataKind) {
      j[key] = args.dataPath;
    }
  }
  return j.dump(2) + "\n";
}

StatusOr<RunArgs> runArgsFromJson(const std::string &text,
                                  const std::string &source) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::error(source + ": not a JSON object (octet-run's options "
                                  "file, as `octet train` writes it)");
  RunArgs a;
  int dataSources = 0;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string &key = it.key();
    const nlohmann::json &v = it.value();
    auto bad = [&](const std::string &takes) {
      return Status::error(source + ": \"" + key + "\" takes " + takes +
                           "; got " + v.dump());
    };
    if (key == "bundle") {
      if (!v.is_string() || v.get<std::string>().empty())
        return bad("a file name");
      a.bundle = v.get<std::string>();
      continue;
    }
    const RunOption *option = nullptr;
    for (const RunOption &o : kRunOptions)
      if (keyOf(o) == key)
        option = &o;
    if (!option)
      return Status::error(source + ": unknown key \"" + key +
                           "\" (the keys are octet-run's flags without "
                           "their dashes, and \"bundle\")");
    if (auto *f = std::get_if<Int64Field>(&option->field)) {
      if (!v.is_number_integer() || v.get<int64_t>() < option->least)
        return bad("a whole number of at least " +
                   std::to_string(option->least));
      (*f)(a) = v.get<int64_t>();
    } else if (auto *f = std::get_if<IntField>(&option->field)) {
      if (!v.is_number_integer() || v.get<int64_t>() < option->least ||
          v.get<int64_t>() > std::numeric_limits<int>::max())
        return bad("a whole number from " + std::to_string(option->least) +
                   " to " + std::to_string(std::numeric_limits<int>::max()));
      (*f)(a) = int(v.get<int64_t>());
    } else if (auto *f = std::get_if<TextField>(&option->field)) {
      if (!v.is_string() || v.get<std::string>().empty())
        return bad("a non-empty string");
      (*f)(a) = v.get<std::string>();
    } else if (auto *f = std::get_if<SwitchField>(&option->field)) {
      if (!v.is_boolean())
        return bad("true or false");
      if (v.get<bool>())
        (*f)(a) = !option->negated;
    } else {
      bool synthetic = !option->valueName;
      if (synthetic ? !v.is_boolean()
                    : !v.is_string() || v.get<std::string>().empty())
        return bad(synthetic ? "true or false" : "a non-empty string");
      if (++dataSources > 1)
        return Status::error(source + ": \"" + key + "\"" +
                             kDataSourceConflict);
      a.dataKind = std::get<DataSource>(option->field).kind;
      a.dataPath = synthetic ? "" : v.get<std::string>();
    }
  }
  if (a.bundle.empty())
    return Status::error(source + ": no \"bundle\"; " + kMissingBundle);
  if (Status st = validateRunArgs(a); !st)
    return st.withContext(source);
  return a;
}

Status writeRunOptionsFile(const RunArgs &args, const std::string &path) {
  return writeFileAtomically(path, runArgsToJson(args));
}

StatusOr<RunArgs> readRunOptionsFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error(path + ": cannot open the options file");
  std::ostringstream text;
  text << in.rdbuf();
  return runArgsFromJson(text.str(), path);
}

cli::Outcome parseProfileArgs(const std::vector<std::string> &args,
                              ProfileArgs &out) {
  CLI::App app("", "octet-profile");
  cli::configure(
      app, {"",
            "Where a bundle's step spends its device time: runs the train\n"
            "microbatch and the optimizer step eagerly with an event pair\n"
            "around every step, after one untimed run, and prints the time\n"
            "by kind of work and by kernel or GEMM shape. A bundle of one\n"
            "rank starts as a fresh training run does (parameters and state\n"
            "from their Init, then INIT) and every run takes a synthetic\n"
            "batch, every token's loss counted (the cross-entropy kernels\n"
            "skip a masked token's vocabulary row); a data-parallel or\n"
            "pipeline bundle runs on whatever the plan's memory holds.",
            ""});
  std::vector<std::string> bundles;
  cli::addPositionals(app, "BUNDLE", bundles,
                      "the bundle `octet compile SPEC -o X.octet` wrote")
      ->option_text("BUNDLE.octet");
  cli::addCount(app, "--top", out.top, 1,
                "kernels and GEMM shapes listed (default 30)");
  cli::addCount(app, "--repeat", out.repeat, 1,
                "timed runs per program; the median is shown\n(default 3)");
  cli::Outcome outcome = cli::parse(app, args);
  if (!outcome.shouldRun())
    return outcome;
  std::string error =
      cli::onePositional(bundles, "BUNDLE", kMissingBundle, out.bundle);
  if (!error.empty())
    return cli::Outcome::usageError("octet-profile", error);
  return outcome;
}

} // namespace octet
