// Every tool's command line: octet's commands, octet-run and octet-profile,
// and the options file `octet train` hands octet-run.

#include "runtime/exec/RunOptions.h"
#include "tools/octet/CommandLine.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <unistd.h>

namespace octet::test {
namespace {

const std::vector<CompileStageInfo> kStages = {
    {"import", "the forward graph"}, {"autodiff", "the train step"}};

cli::Outcome parseOctet(std::vector<std::string> args, OctetCommandLine &out) {
  return parseOctetCommandLine(args, kStages, out);
}

// Parses with a fresh struct and returns only the outcome.
cli::Outcome octet(std::vector<std::string> args) {
  OctetCommandLine out;
  return parseOctet(std::move(args), out);
}

cli::Outcome octetRun(std::vector<std::string> args) {
  RunArgs out;
  return parseRunArgs(args, out);
}

cli::Outcome octetProfile(std::vector<std::string> args) {
  ProfileArgs out;
  return parseProfileArgs(args, out);
}

// A usage error: one line, saying `what`, pointing at `command --help`.
void expectUsageError(const cli::Outcome &outcome, const std::string &command,
                      const std::string &what) {
  ASSERT_TRUE(outcome.isUsageError()) << what;
  const std::string &line = outcome.text();
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_EQ(line.rfind(command + ": ", 0), 0u) << line;
  EXPECT_NE(line.find(what), std::string::npos) << line;
  EXPECT_NE(line.find("(see " + command + " --help)"), std::string::npos)
      << line;
}

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/cli-" + std::to_string(::getpid()) + "-" +
         name;
}

void writeText(const std::string &path, const std::string &text) {
  std::ofstream(path) << text;
}

// Each tool, as a function from arguments to outcome, and how it is named.
struct Tool {
  const char *command;
  std::vector<std::string> before; // the command's name and positionals
  std::function<cli::Outcome(std::vector<std::string>)> parse;
};

std::vector<Tool> toolsWithSteps() {
  return {{"octet compile", {"compile", "s.pbtxt"}, octet},
          {"octet train", {"train", "s.pbtxt"}, octet},
          {"octet golden", {"golden", "s.pbtxt", "-o", "g"}, octet},
          {"octet-run", {"x.octet"}, octetRun}};
}

std::vector<std::string> plus(std::vector<std::string> a,
                              const std::vector<std::string> &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(CommandLine, StepsTakeBothSpellingsInEveryTool) {
  for (const Tool &tool : toolsWithSteps()) {
    for (auto args : {std::vector<std::string>{"--steps", "5"},
                      std::vector<std::string>{"--steps=5"}}) {
      cli::Outcome outcome = tool.parse(plus(tool.before, args));
      EXPECT_TRUE(outcome.shouldRun()) << tool.command << ": "
                                       << outcome.text();
    }
  }
  OctetCommandLine c;
  ASSERT_TRUE(parseOctet({"compile", "s.pbtxt", "--steps=7"}, c).shouldRun());
  EXPECT_EQ(c.compile.steps, 7);
  OctetCommandLine t;
  ASSERT_TRUE(parseOctet({"train", "s.pbtxt", "--steps", "7"}, t).shouldRun());
  EXPECT_EQ(t.train.steps, 7);
  RunArgs r;
  ASSERT_TRUE(parseRunArgs({"x.octet", "--steps=7"}, r).shouldRun());
  EXPECT_EQ(r.trainer.steps, 7);
}

TEST(CommandLine, BadNumbersAreOneLineNamingTheOption) {
  for (const Tool &tool : toolsWithSteps()) {
    expectUsageError(tool.parse(plus(tool.before,
                                     {"--steps", "99999999999999999999"})),
                     tool.command,
                     "--steps takes a whole number from 1 to "
                     "9223372036854775807; got '99999999999999999999'");
    expectUsageError(tool.parse(plus(tool.before, {"--steps", "abc"})),
                     tool.command,
                     "--steps takes a whole number of at least 1; got 'abc'");
    expectUsageError(tool.parse(plus(tool.before, {"--steps=0"})),
                     tool.command,
                     "--steps takes a whole number of at least 1; got '0'");
    expectUsageError(tool.parse(plus(tool.before, {"--steps", "-3"})),
                     tool.command, "got '-3'");
    expectUsageError(tool.parse(plus(tool.before, {"--steps", "5x"})),
                     tool.command, "got '5x'");
    expectUsageError(tool.parse(plus(tool.before, {"--steps"})),
                     tool.command, "--steps needs a value (N)");
  }
  expectUsageError(octetProfile({"x.octet", "--top", "0"}), "octet-profile",
                   "--top takes a whole number of at least 1; got '0'");
  expectUsageError(octetProfile({"x.octet", "--repeat=many"}),
                   "octet-profile", "--repeat takes a whole number");
  expectUsageError(octetProfile({"x.octet", "--top", "3000000000"}),
                   "octet-profile", "from 1 to 2147483647");
  expectUsageError(octet({"data", "preprocess", "--threads", "2000"}),
                   "octet data preprocess",
                   "--threads takes a whole number from 1 to 1024");
  expectUsageError(octet({"data", "inspect", "p", "--show", "x"}),
                   "octet data inspect", "--show takes a whole number");
  expectUsageError(octet({"train", "s.pbtxt", "--fp8-stats-interval=0"}),
                   "octet train", "--fp8-stats-interval takes");
  expectUsageError(octetRun({"x.octet", "--keep-checkpoints", "-1"}),
                   "octet-run", "--keep-checkpoints takes a whole number of "
                                "at least 0");
}

TEST(CommandLine, UnknownOptionsAndArguments) {
  expectUsageError(octet({"compile", "s.pbtxt", "--frobnicate"}),
                   "octet compile", "unknown option --frobnicate");
  expectUsageError(octet({"train", "s.pbtxt", "--frobnicate=3"}),
                   "octet train", "unknown option --frobnicate");
  expectUsageError(octet({"inspect", "x.octet", "--frobnicate"}),
                   "octet inspect", "unknown option --frobnicate");
  expectUsageError(octet({"data", "inspect", "p", "--frobnicate"}),
                   "octet data inspect", "unknown option --frobnicate");
  expectUsageError(octetRun({"x.octet", "--frobnicate"}), "octet-run",
                   "unknown option --frobnicate");
  expectUsageError(octetProfile({"x.octet", "--frobnicate"}),
                   "octet-profile", "unknown option --frobnicate");
  expectUsageError(octet({"frobnicate"}), "octet",
                   "unknown command 'frobnicate'");
  expectUsageError(octet({}), "octet", "name a command: compile, train");
  expectUsageError(octet({"data"}), "octet data",
                   "name a command: preprocess, inspect");
  expectUsageError(octet({"compile", "a.pbtxt", "b.pbtxt"}), "octet compile",
                   "one SPEC only; got 'a.pbtxt' and 'b.pbtxt'");
  expectUsageError(octet({"compile"}), "octet compile", "missing SPEC");
  expectUsageError(octet({"golden", "s.pbtxt"}), "octet golden",
                   "missing -o DIR");
  expectUsageError(octet({"export-hf", "-o", "out"}), "octet export-hf",
                   "missing --init-from HF_DIR");
  expectUsageError(octetProfile({}), "octet-profile",
                   "missing BUNDLE.octet");
  expectUsageError(octet({"compile", "s.pbtxt", "--dump-ir=lowered"}),
                   "octet compile",
                   "unknown stage 'lowered' for --dump-ir; known stages: "
                   "import, autodiff");
  expectUsageError(octet({"export-hf", "--init-from", "h", "-o", "o",
                          "--dtype", "f64"}),
                   "octet export-hf",
                   "--dtype takes source, f32, bf16 or f16; got 'f64'");
  expectUsageError(octet({"export-hf", "--init-from", "h", "-o", "o",
                          "--max-shard-size=5XB"}),
                   "octet export-hf", "--max-shard-size takes a size");
}

TEST(CommandLine, VersionAndHelpInEveryTool) {
  std::string version = std::string("octet ") + cli::version();
  for (const cli::Outcome &outcome :
       {octet({"--version"}), octet({"compile", "--version"}),
        octet({"data", "preprocess", "--version"}), octetRun({"--version"}),
        octetProfile({"--version"})}) {
    ASSERT_FALSE(outcome.shouldRun());
    EXPECT_FALSE(outcome.isUsageError());
    EXPECT_EQ(outcome.text(), version + "\n");
  }
  struct Help {
    cli::Outcome outcome;
    const char *usage;
  } helps[] = {
      {octet({"--help"}), "usage: octet <command> [options]"},
      {octet({"compile", "-h"}), "usage: octet compile SPEC"},
      {octet({"train", "--help"}), "usage: octet train SPEC"},
      {octet({"golden", "--help"}), "usage: octet golden SPEC -o DIR"},
      {octet({"export-hf", "--help"}),
       "usage: octet export-hf [MODEL] --init-from HF_DIR -o DIR"},
      {octet({"inspect", "--help"}), "usage: octet inspect BUNDLE.octet"},
      {octet({"data", "--help"}), "usage: octet data <command> [options]"},
      {octet({"data", "inspect", "--help"}), "usage: octet data inspect PREFIX"},
      {octetRun({"--help"}), "usage: octet-run BUNDLE.octet"},
      {octetProfile({"--help"}), "usage: octet-profile BUNDLE.octet"},
  };
  for (const Help &h : helps) {
    ASSERT_FALSE(h.outcome.shouldRun()) << h.usage;
    EXPECT_FALSE(h.outcome.isUsageError()) << h.usage;
    EXPECT_EQ(h.outcome.text().rfind(h.usage, 0), 0u) << h.outcome.text();
    EXPECT_NE(h.outcome.text().find("--version"), std::string::npos);
  }
  // The stages octet compile is given are the ones its help lists.
  EXPECT_NE(helps[1].outcome.text().find("autodiff  the train step"),
            std::string::npos)
      << helps[1].outcome.text();
}

TEST(CommandLine, OneSpellingPerIdea) {
  std::string corpus = tempPath("corpus.txt");
  writeText(corpus, "hello");
  OctetCommandLine t;
  ASSERT_TRUE(parseOctet({"train", "s.pbtxt", "--text", corpus,
                          "--init-from=hf", "--checkpoint-dir", "ck"},
                         t)
                  .shouldRun());
  EXPECT_EQ(t.train.dataKind, "text");
  EXPECT_EQ(t.train.dataPath, corpus);
  EXPECT_EQ(t.train.initFrom, "hf");
  OctetCommandLine d;
  ASSERT_TRUE(
      parseOctet({"train", "s.pbtxt", "--data=corpus/train"}, d).shouldRun());
  EXPECT_EQ(d.train.dataKind, "indexed");
  EXPECT_EQ(d.train.dataPath, "corpus/train");
  // `octet train --data FILE` used to read FILE as bytes: a text file given
  // as a PREFIX points at --text.
  expectUsageError(octet({"train", "s.pbtxt", "--data", corpus}),
                   "octet train", "use --text " + corpus);
  expectUsageError(octet({"train", "s.pbtxt", "--text", corpus, "--data",
                          "p"}),
                   "octet train", "give one of --text, --data");
  expectUsageError(octet({"golden", "s.pbtxt", "-o", "g", "--data", corpus}),
                   "octet golden", "use --text FILE");
  expectUsageError(octetRun({"x.octet", "--init-weights", "hf"}),
                   "octet-run", "--init-weights is now --init-from");
  OctetCommandLine g;
  ASSERT_TRUE(parseOctet({"golden", "s.pbtxt", "--out=g", "--text", corpus},
                         g)
                  .shouldRun());
  EXPECT_EQ(g.golden.dir, "g");
  EXPECT_EQ(g.golden.text, corpus);
  OctetCommandLine c;
  ASSERT_TRUE(parseOctet({"compile", "s.pbtxt", "-o", "x.octet",
                          "--dump-ir=import,autodiff", "--dump-ir", "import"},
                         c)
                  .shouldRun());
  EXPECT_EQ(c.compile.output, "x.octet");
  EXPECT_EQ(c.compile.dumps,
            (std::vector<std::string>{"import", "autodiff", "import"}));
  OctetCommandLine e;
  ASSERT_TRUE(parseOctet({"export-hf", "m.pbtxt", "--init-from", "hf",
                          "--out", "o", "--max-shard-size=2KiB"},
                         e)
                  .shouldRun());
  EXPECT_EQ(e.exportHf.model, "m.pbtxt");
  EXPECT_EQ(e.exportHf.out, "o");
  EXPECT_EQ(e.exportHf.maxShardBytes, 2048u);
  OctetCommandLine i;
  ASSERT_TRUE(parseOctet({"inspect", "x.octet", "--all-slots", "--modules=m"},
                         i)
                  .shouldRun());
  EXPECT_TRUE(i.inspect.allSlots);
  EXPECT_EQ(i.inspect.modulesDir, "m");
  RunArgs r;
  ASSERT_TRUE(parseRunArgs({"x.octet", "--all-slots", "--text=t.txt",
                            "--init-from", "hf"},
                           r)
                  .shouldRun());
  EXPECT_TRUE(r.allSlots);
  EXPECT_EQ(r.dataKind, "text");
  EXPECT_EQ(r.trainer.initWeights, "hf");
  std::remove(corpus.c_str());
}

// `octet train` on the GPU path: the options it fills are the options
// octet-run reads, through one file, with nothing re-spelled as flags.
TEST(CommandLine, OctetRunTakesHowNcclUsesTheArenas) {
  RunArgs plain;
  ASSERT_TRUE(parseRunArgs({"x.octet"}, plain).shouldRun());
  EXPECT_EQ(plain.ncclBuffers, "");
  RunArgs none;
  ASSERT_TRUE(parseRunArgs({"x.octet", "--nccl-buffers", "none"}, none)
                  .shouldRun());
  EXPECT_EQ(none.ncclBuffers, "none");
  expectUsageError(octetRun({"x.octet", "--nccl-buffers", "symmetric"}),
                   "octet-run",
                   "--nccl-buffers takes none or registered; got 'symmetric'");
}

TEST(CommandLine, TrainHandsOctetRunItsOptionsAsAStruct) {
  TrainOptions train;
  train.spec = "s.pbtxt";
  train.steps = 20;
  train.dataKind = "text";
  train.dataPath = "data/corpus.txt";
  train.checkpointDir = "ck";
  train.resume = true;
  train.tensorboardDir = "tb";
  train.saveHf = "hf-out";
  StatusOr<RunArgs> run = gpuRunArgs(train, "indexed", "spec/prefix", "");
  ASSERT_TRUE(run.isOk()) << run.status().message();
  run->bundle = "/tmp/octet-train-x/train.octet";

  std::string file = tempPath("octet-run.json");
  ASSERT_TRUE(writeRunOptionsFile(*run, file).isOk());
  RunArgs read;
  cli::Outcome outcome = parseRunArgs({"--options", file}, read);
  ASSERT_TRUE(outcome.shouldRun()) << outcome.text();
  EXPECT_EQ(runArgsToJson(read), runArgsToJson(*run));
  EXPECT_EQ(read.bundle, "/tmp/octet-train-x/train.octet");
  EXPECT_EQ(read.trainer.steps, 20);
  EXPECT_EQ(read.dataKind, "text");
  EXPECT_EQ(read.dataPath, "data/corpus.txt");
  EXPECT_EQ(read.trainer.checkpointDir, "ck");
  EXPECT_TRUE(read.trainer.resume);
  EXPECT_EQ(read.trainer.tensorboardDir, "tb");
  EXPECT_EQ(read.trainer.saveHf, "hf-out");
  EXPECT_TRUE(read.trainer.graph);

  // Flags beside the file override it.
  RunArgs overridden;
  ASSERT_TRUE(parseRunArgs({"--options", file, "--steps", "3", "--data", "p",
                            "--no-graph"},
                           overridden)
                  .shouldRun());
  EXPECT_EQ(overridden.trainer.steps, 3);
  EXPECT_EQ(overridden.dataKind, "indexed");
  EXPECT_EQ(overridden.dataPath, "p");
  EXPECT_FALSE(overridden.trainer.graph);
  EXPECT_EQ(overridden.trainer.checkpointDir, "ck");

  // Without --text/--data, the spec's train.data; a kind octet-run does not
  // read is an error (the CPU trains it).
  TrainOptions plain;
  StatusOr<RunArgs> fromSpec = gpuRunArgs(plain, "indexed", "spec/prefix", "");
  ASSERT_TRUE(fromSpec.isOk());
  EXPECT_EQ(fromSpec->dataKind, "indexed");
  EXPECT_EQ(fromSpec->dataPath, "spec/prefix");
  EXPECT_EQ(fromSpec->trainer.steps, -1);
  EXPECT_FALSE(gpuRunArgs(plain, "jsonl", "x.jsonl", "").isOk());
  std::remove(file.c_str());
}

TEST(CommandLine, OptionsFileIsCheckedLikeTheCommandLine) {
  struct Case {
    const char *json;
    const char *message;
  } cases[] = {
      {"[1]", "not a JSON object"},
      {"{\"bundle\": \"x.octet\", \"stepz\": 3}", "unknown key \"stepz\""},
      {"{\"bundle\": \"x.octet\", \"steps\": 0}",
       "\"steps\" takes a whole number of at least 1; got 0"},
      {"{\"bundle\": \"x.octet\", \"steps\": \"5\"}", "\"steps\" takes"},
      {"{\"bundle\": \"x.octet\", \"resume\": 1}",
       "\"resume\" takes true or false"},
      {"{\"bundle\": \"x.octet\", \"text\": \"a\", \"data\": \"b\"}",
       "give one of --synthetic, --data, --text"},
      {"{\"bundle\": \"x.octet\", \"resume\": true}",
       "--resume needs --checkpoint-dir"},
      {"{\"steps\": 3}", "missing BUNDLE.octet"},
  };
  for (const Case &c : cases) {
    StatusOr<RunArgs> read = runArgsFromJson(c.json, "o.json");
    ASSERT_FALSE(read.isOk()) << c.json;
    EXPECT_EQ(read.status().message().rfind("o.json: ", 0), 0u)
        << read.status().message();
    EXPECT_NE(read.status().message().find(c.message), std::string::npos)
        << read.status().message();
  }
  expectUsageError(octetRun({"--options", tempPath("absent.json")}),
                   "octet-run", "cannot open the options file");
  // Every option survives the trip through the file.
  RunArgs all;
  ASSERT_TRUE(parseRunArgs({"x.octet", "--steps", "9", "--data", "d",
                            "--eval-data", "e", "--eval-batches", "4",
                            "--eval-interval", "0", "--log-interval", "2",
                            "--checkpoint-dir", "ck", "--checkpoint-interval",
                            "5", "--keep-checkpoints", "0", "--tensorboard",
                            "tb", "--no-graph", "--plan", "--all-slots",
                            "--record-algorithms", "--json", "j.json",
                            "--timeline", "t.json"},
                           all)
                  .shouldRun());
  StatusOr<RunArgs> back = runArgsFromJson(runArgsToJson(all), "all.json");
  ASSERT_TRUE(back.isOk()) << back.status().message();
  EXPECT_EQ(runArgsToJson(*back), runArgsToJson(all));
  EXPECT_EQ(back->evalPath, "e");
  EXPECT_EQ(back->trainer.keepCheckpoints, 0);
  EXPECT_EQ(back->trainer.evalInterval, 0);
  EXPECT_FALSE(back->trainer.graph);
  EXPECT_TRUE(back->planOnly && back->allSlots && back->recordAlgorithms);
  EXPECT_EQ(back->timeline, "t.json");
}

// --json and --timeline write one file a rank: rank 0 the file named,
// rank R > 0 FILE.rankR beside it.
TEST(CommandLine, EachRankWritesItsOwnOutputFile) {
  EXPECT_EQ(rankOutputPath("out/t.json", 0), "out/t.json");
  EXPECT_EQ(rankOutputPath("out/t.json", 1), "out/t.json.rank1");
  EXPECT_EQ(rankOutputPath("t", 12), "t.rank12");
  RunArgs a;
  ASSERT_TRUE(
      parseRunArgs({"x.octet", "--bench", "--timeline", "t.json"}, a)
          .shouldRun());
  EXPECT_EQ(a.timeline, "t.json");
  expectUsageError(octetRun({"x.octet", "--golden", "g", "--timeline", "t"}),
                   "octet-run", "drop --timeline");
}

TEST(CommandLine, OctetRunLooksForItsFilesBeforeTheGpu) {
  std::string bundle = tempPath("x.octet");
  writeText(bundle, "not read here");
  RunArgs a;
  ASSERT_TRUE(parseRunArgs({bundle, "--text", tempPath("absent.txt")}, a)
                  .shouldRun());
  Status st = checkRunInputs(a);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("--text " + tempPath("absent.txt") +
                              ": no such file"),
            std::string::npos)
      << st.message();
  RunArgs b;
  ASSERT_TRUE(parseRunArgs({bundle, "--data", tempPath("absent")}, b)
                  .shouldRun());
  st = checkRunInputs(b);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("absent.bin not found"), std::string::npos)
      << st.message();
  RunArgs c;
  ASSERT_TRUE(parseRunArgs({tempPath("absent.octet")}, c).shouldRun());
  EXPECT_FALSE(checkRunInputs(c).isOk());
  RunArgs d;
  ASSERT_TRUE(parseRunArgs({bundle}, d).shouldRun());
  EXPECT_TRUE(checkRunInputs(d).isOk());
  // --save-hf needs a folder to write in, and is not a file.
  RunArgs e;
  ASSERT_TRUE(
      parseRunArgs({bundle, "--save-hf", tempPath("absent") + "/out"}, e)
          .shouldRun());
  st = checkRunInputs(e);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("--save-hf " + tempPath("absent") +
                              "/out: no folder " + tempPath("absent")),
            std::string::npos)
      << st.message();
  RunArgs f;
  ASSERT_TRUE(parseRunArgs({bundle, "--save-hf", bundle}, f).shouldRun());
  st = checkRunInputs(f);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("a file, not a folder"), std::string::npos)
      << st.message();
  RunArgs g;
  ASSERT_TRUE(
      parseRunArgs({bundle, "--save-hf", tempPath("hf-out")}, g).shouldRun());
  EXPECT_TRUE(checkRunInputs(g).isOk());
  RunArgs h;
  cli::Outcome bench = parseRunArgs({bundle, "--bench", "--save-hf", "x"}, h);
  EXPECT_FALSE(bench.shouldRun());
  std::remove(bundle.c_str());

  TrainOptions train;
  train.dataKind = "text";
  train.dataPath = tempPath("absent.txt");
  EXPECT_FALSE(checkTrainInputs(train).isOk());
  ExportHfOptions hf;
  hf.initFrom = "/nonexistent";
  Status missing = checkExportHfInputs(hf);
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.message(),
            "--init-from /nonexistent: no such file or directory");
}

// Everything after -- is the ranks' command, its own flags included; the
// launcher's options come before it.
TEST(CommandLine, LaunchTakesTheRanksCommandAfterDashDash) {
  OctetCommandLine out;
  ASSERT_TRUE(parseOctet({"launch", "--gpus=2", "--grace", "5", "--",
                          "octet-run", "m.octet", "--steps", "5"},
                         out)
                  .shouldRun());
  EXPECT_EQ(out.command, "launch");
  EXPECT_EQ(out.launch.gpus, 2);
  EXPECT_EQ(out.launch.graceSeconds, 5);
  EXPECT_EQ(out.launch.port, 0);
  EXPECT_EQ(out.launch.command,
            (std::vector<std::string>{"octet-run", "m.octet", "--steps", "5"}));
  expectUsageError(octet({"launch", "--", "true"}), "octet launch",
                   "--gpus");
  expectUsageError(octet({"launch", "--gpus", "0", "--", "true"}),
                   "octet launch", "--gpus");
  expectUsageError(octet({"launch", "--gpus", "2"}), "octet launch",
                   "missing COMMAND");
}

// README.md's "Command line" section shows each tool's usage lines as the
// tool prints them (the first paragraph of --help).
TEST(CommandLine, ReadmeShowsEveryToolsUsage) {
  std::ifstream in(std::string(OCTET_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in) << "README.md";
  std::string readme((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
  size_t section = readme.find("## Command line\n");
  ASSERT_NE(section, std::string::npos);
  readme = readme.substr(section, readme.find("\n## ", section + 1) - section);
  for (const cli::Outcome &help :
       {octet({"compile", "--help"}), octet({"train", "--help"}),
        octet({"export-hf", "--help"}), octet({"data", "preprocess", "--help"}),
        octet({"data", "inspect", "--help"}), octet({"inspect", "--help"}),
        octet({"golden", "--help"}), octet({"launch", "--help"}),
        octetRun({"--help"}),
        octetProfile({"--help"})}) {
    std::string usage = help.text().substr(0, help.text().find("\n\n") + 1);
    EXPECT_NE(readme.find("\n" + usage), std::string::npos)
        << "README.md's Command line section lacks, or has an old version "
           "of:\n"
        << usage;
  }
}

} // namespace
} // namespace octet::test
