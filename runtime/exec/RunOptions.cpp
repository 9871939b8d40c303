#include "runtime/exec/RunOptions.h"

#include <cstdlib>

namespace octet {

const char *runUsage() {
  return "usage: octet-run BUNDLE.octet [options]\n"
         "Trains the compiled model on this machine's GPU (LOCAL_RANK / RANK "
         "as torchrun sets them).\n"
         "  --steps N              optimizer steps (default: the bundle's)\n"
         "  --synthetic            random tokens from the schedule's seed "
         "(default)\n"
         "  --data PREFIX          a Megatron indexed dataset (.bin/.idx), "
         "packed into rows\n"
         "  --text FILE            a UTF-8 file read as bytes (vocabulary "
         "256); its tail is held out\n"
         "  --eval-data PREFIX     held-out indexed dataset for --data\n"
         "  --eval-batches N       held-out batches per evaluation\n"
         "  --eval-interval N      evaluate every N steps (default: the "
         "bundle's)\n"
         "  --log-interval N       print every N steps (default: the "
         "bundle's)\n"
         "  --checkpoint-dir DIR   save DIR/step-N (default interval: the "
         "bundle's; always at the end)\n"
         "  --checkpoint-interval N\n"
         "  --keep-checkpoints N   newest checkpoints kept (default 2; 0 "
         "keeps all)\n"
         "  --resume               continue from DIR's latest checkpoint, "
         "bit for bit\n"
         "  --init-weights PATH    parameters from a safetensors file or HF "
         "model directory\n"
         "  --tensorboard DIR      write TensorBoard event files there\n"
         "  --no-graph             run every step eagerly (no CUDA graphs)\n"
         "  --golden DIR           check the first steps against the\n"
         "                         reference interpreter's (`octet golden\n"
         "                         SPEC -o DIR`): loss and grad norm per\n"
         "                         step, every persistent slot after step\n"
         "                         1; exits 1 on a mismatch (the worst\n"
         "                         slots are listed; all with --all-slots)\n"
         "  --golden-save DIR      write the GPU's snapshots there, in the\n"
         "                         golden's format\n"
         "  --plan                 print the build and memory plan, run "
         "nothing\n"
         "  --all-slots            list every slot of the plan\n"
         "  --record-algorithms    write the chosen cuBLASLt algorithms back "
         "into the bundle\n"
         "  --bench                synthetic data, --warmup steps untimed, "
         "no checkpoints\n"
         "  --warmup N             untimed steps of --bench (default 2)\n"
         "  --json FILE            write throughput and memory as JSON\n";
}

StatusOr<RunArgs> parseRunArgs(const std::vector<std::string> &args) {
  RunArgs a;
  bool dataGiven = false;
  auto setData = [&](const std::string &flag, const std::string &kind,
                     const std::string &path) -> Status {
    if (dataGiven)
      return Status::error(flag + ": give one of --synthetic, --data, --text");
    dataGiven = true;
    a.dataKind = kind;
    a.dataPath = path;
    return Status::ok();
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &s = args[i];
    auto value = [&](std::string &out) -> Status {
      if (i + 1 >= args.size())
        return Status::error(s + " needs a value");
      out = args[++i];
      return Status::ok();
    };
    auto count = [&](int64_t &out, int64_t least) -> Status {
      std::string v;
      OCTET_RETURN_IF_ERROR(value(v));
      char *end = nullptr;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || n < least)
        return Status::error(s + " takes a whole number of at least " +
                             std::to_string(least) + "; got '" + v + "'");
      out = n;
      return Status::ok();
    };
    Status st = Status::ok();
    std::string text;
    int64_t n = 0;
    if (s == "-h" || s == "--help")
      a.help = true;
    else if (s == "--plan")
      a.planOnly = true;
    else if (s == "--all-slots")
      a.planSlots = 0;
    else if (s == "--record-algorithms")
      a.recordAlgorithms = true;
    else if (s == "--no-graph")
      a.trainer.graph = false;
    else if (s == "--resume")
      a.trainer.resume = true;
    else if (s == "--bench")
      a.bench = true;
    else if (s == "--synthetic")
      st = setData(s, "synthetic", "");
    else if (s == "--data" || s == "--text") {
      st = value(text);
      if (st)
        st = setData(s, s == "--data" ? "indexed" : "text", text);
    } else if (s == "--eval-data")
      st = value(a.evalPath);
    else if (s == "--checkpoint-dir")
      st = value(a.trainer.checkpointDir);
    else if (s == "--tensorboard")
      st = value(a.trainer.tensorboardDir);
    else if (s == "--init-weights")
      st = value(a.trainer.initWeights);
    else if (s == "--json")
      st = value(a.json);
    else if (s == "--golden")
      st = value(a.golden);
    else if (s == "--golden-save")
      st = value(a.goldenSave);
    else if (s == "--steps")
      st = count(a.trainer.steps, 1);
    else if (s == "--warmup")
      st = count(a.warmup, 0);
    else if (s == "--eval-batches")
      st = count(a.trainer.evalBatches, 1);
    else if (s == "--eval-interval")
      st = count(a.trainer.evalInterval, 0);
    else if (s == "--log-interval")
      st = count(a.trainer.logInterval, 1);
    else if (s == "--checkpoint-interval")
      st = count(a.trainer.checkpointInterval, 0);
    else if (s == "--keep-checkpoints") {
      st = count(n, 0);
      a.trainer.keepCheckpoints = int(n);
    } else if (!s.empty() && s[0] == '-')
      st = Status::error("unknown option " + s +
                         " (octet-run --help lists "
                         "them)");
    else if (a.bundle.empty())
      a.bundle = s;
    else
      st = Status::error("one bundle at a time; got '" + a.bundle + "' and '" +
                         s + "'");
    if (!st)
      return st;
  }
  if (a.help)
    return a;
  if (a.bundle.empty())
    return Status::error("missing BUNDLE.octet (written by `octet compile "
                         "SPEC -o BUNDLE.octet`)");
  if (!a.evalPath.empty() && a.dataKind != "indexed")
    return Status::error("--eval-data is the held-out split of --data "
                         "PREFIX; synthetic data and --text hold out their "
                         "own");
  if (a.trainer.resume && a.trainer.checkpointDir.empty())
    return Status::error("--resume needs --checkpoint-dir DIR (the "
                         "directory the earlier run saved into)");
  if (a.trainer.resume && !a.trainer.initWeights.empty())
    return Status::error("--resume and --init-weights both say where the "
                         "parameters come from: give one");
  if (a.bench && (dataGiven && a.dataKind != "synthetic"))
    return Status::error("--bench times synthetic data; drop --data/--text");
  if (!a.golden.empty() && (a.bench || dataGiven || a.trainer.resume ||
                            !a.trainer.initWeights.empty()))
    return Status::error("--golden brings its own initial values and "
                         "batches; drop --bench, --data/--text/--synthetic, "
                         "--resume and --init-weights");
  if (a.bench && !a.trainer.checkpointDir.empty())
    return Status::error("--bench does not save checkpoints; drop "
                         "--checkpoint-dir");
  return a;
}

} // namespace octet
