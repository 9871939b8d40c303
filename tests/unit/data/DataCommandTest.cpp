#include "tools/octet/Commands.h"

#include "runtime/data/IndexedDataset.h"
#include "tests/unit/data/TestUtil.h"

#include <gtest/gtest.h>

using namespace octet;

namespace {

// `octet ARGS...` for the data commands: parsed as octet parses it, then
// run; returns the exit code.
int run(std::vector<std::string> args) {
  OctetCommandLine commandLine;
  cli::Outcome parsed = parseOctetCommandLine(args, {}, commandLine);
  if (!parsed.shouldRun())
    return parsed.finish();
  if (commandLine.command == "data preprocess")
    return runDataPreprocessCommand(commandLine.preprocess);
  EXPECT_EQ(commandLine.command, "data inspect");
  return runDataInspectCommand(commandLine.dataInspect);
}

} // namespace

TEST(DataCommand, PrintsHelpAndRefusesBadUsage) {
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run({"data", "--help"}), 0);
  EXPECT_EQ(run({"data", "preprocess", "--help"}), 0);
  std::string help = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(help.find("preprocess"), std::string::npos);
  EXPECT_NE(help.find("--on-error stop|skip"), std::string::npos);

  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run({"data"}), 2);
  EXPECT_EQ(run({"data", "frobnicate"}), 2);
  EXPECT_EQ(run({"data", "preprocess", "--input", "x"}), 2);
  EXPECT_EQ(run({"data", "preprocess", "--on-error=maybe"}), 2);
  EXPECT_EQ(run({"data", "preprocess", "--threads", "0"}), 2);
  EXPECT_EQ(run({"data", "preprocess", "--tokenizer"}), 2);
  std::string errors = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(errors.find("--on-error takes stop or skip"), std::string::npos);
  EXPECT_NE(errors.find("--tokenizer needs a value"), std::string::npos);
}

TEST(DataCommand, PreprocessesThenInspects) {
  std::string dir = testutil::makeTempDir("cmd");
  testutil::writeFile(dir + "/tokenizer.json",
                      testutil::smallByteLevelTokenizerJson({{"a", "b"}}));
  testutil::writeFile(dir + "/in.jsonl",
                      "{\"text\": \"abab\"}\n{\"text\": \"ba\"}\nbroken\n");
  ::testing::internal::CaptureStderr();
  std::vector<std::string> args = {"data",
                                   "preprocess",
                                   "--input",
                                   dir + "/in.jsonl",
                                   "--tokenizer",
                                   dir + "/tokenizer.json",
                                   "--output-prefix=" + dir + "/out",
                                   "--no-progress"};
  EXPECT_EQ(run(args), 1); // stops at line 3
  args.push_back("--on-error=skip");
  EXPECT_EQ(run(args), 0);
  std::string errors = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(errors.find("in.jsonl:3: not valid JSON"), std::string::npos)
      << errors;
  EXPECT_NE(errors.find("2 documents"), std::string::npos) << errors;

  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run({"data", "inspect", dir + "/out", "--tokenizer",
                 dir + "/tokenizer.json", "--show", "2"}),
            0);
  std::string shown = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(shown.find("2 sequences, 2 documents, 4 tokens"), std::string::npos)
      << shown;
  EXPECT_NE(shown.find("abab"), std::string::npos) << shown;

  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run({"data", "inspect", dir + "/absent"}), 1);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("absent.idx"),
            std::string::npos);
}
