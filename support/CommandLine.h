#ifndef OCTET_SUPPORT_COMMANDLINE_H
#define OCTET_SUPPORT_COMMANDLINE_H

// Every octet tool's command line (octet and its commands, octet-run,
// octet-profile) is declared on CLI11, with the conventions set here so
// that the tools read alike: -h/--help, --version, `--flag=value` and
// `--flag value`, the last of a repeated option wins, one help layout, and
// a usage error that is one line naming the option and what it takes, with
// a pointer to --help. CLI11 is header-only standard C++, so the MLIR-free
// runtime and the compiler tools share it (octet-opt alone keeps llvm::cl,
// through MlirOptMain). Only CommandLine.cpp and the files that declare
// options include CLI11; this header forward-declares it.

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
} // namespace CLI

namespace octet::cli {

// octet's version (OCTET_VERSION in the top-level CMakeLists.txt).
const char *version();

// What parsing a command line decided: run with the options it filled, or
// stop and print text: help or version (exit 0, stdout), or a usage error
// (exit 2, stderr, one line).
class Outcome {
public:
  static Outcome run() { return Outcome(Kind::Run, ""); }
  static Outcome exit(std::string text) {
    return Outcome(Kind::Exit, std::move(text));
  }
  // `command` is how the user typed the tool ("octet compile", "octet-run").
  static Outcome usageError(const std::string &command,
                            const std::string &message);

  bool shouldRun() const { return kind_ == Kind::Run; }
  bool isUsageError() const { return kind_ == Kind::UsageError; }
  // The help text or version, or the one line of a usage error.
  const std::string &text() const { return text_; }
  // Prints the text where it belongs; returns the exit code (0 or 2).
  int finish() const;

private:
  enum class Kind { Run, Exit, UsageError };
  Outcome(Kind kind, std::string text)
      : kind_(kind), text_(std::move(text)) {}
  Kind kind_;
  std::string text_;
};

// What --help says besides the options, which it lists itself. The usage
// line is made from the options, so it cannot drift from them.
struct HelpText {
  // One line, for the list of commands in the parent's help.
  std::string summary;
  // Paragraphs after the usage line (wrapped by hand, ~76 columns).
  std::string description;
  // After the options: stages, environment variables, examples.
  std::string footer;
};

// Gives `app` octet's conventions (see the top of this file).
void configure(CLI::App &app, HelpText help);

// The command as typed: "octet compile" for octet's compile command.
std::string commandName(const CLI::App &app);

// Parses `args` (without the program name). CLI11's errors become one line
// naming the option, prefixed by the command that was being parsed.
Outcome parse(CLI::App &app, std::vector<std::string> args);

// Options that say what they take when given something else.
// A whole number in [least, most]: "--steps takes a whole number of at
// least 1; got 'abc'".
CLI::Option *addCount(CLI::App &app, const std::string &name, int64_t &out,
                      int64_t least, const std::string &help,
                      int64_t most = std::numeric_limits<int64_t>::max());
CLI::Option *addCount(CLI::App &app, const std::string &name, int &out,
                      int least, const std::string &help,
                      int most = std::numeric_limits<int>::max());
// A non-empty string; `valueName` is what help shows (FILE, DIR, PREFIX).
CLI::Option *addValue(CLI::App &app, const std::string &name,
                      std::string &out, const std::string &valueName,
                      const std::string &help);
// The same, handing the value to `set` (which may throw
// CLI::ValidationError with its own one-line message).
CLI::Option *addValue(CLI::App &app, const std::string &name,
                      std::function<void(const std::string &)> set,
                      const std::string &valueName, const std::string &help);
// One of `choices`: "--dtype takes source, f32, bf16 or f16; got 'x'".
CLI::Option *addChoice(CLI::App &app, const std::string &name,
                       std::string &out,
                       const std::vector<std::string> &choices,
                       const std::string &help);
CLI::Option *addFlag(CLI::App &app, const std::string &name, bool &out,
                     const std::string &help);
// Positional arguments, collected so that the command can say what is
// missing or extra in its own words (see onePositional).
CLI::Option *addPositionals(CLI::App &app, const std::string &name,
                            std::vector<std::string> &out,
                            const std::string &help);
// Marks an option the command cannot do without: the usage line shows it
// without brackets. The command checks that it was given, in its own words.
CLI::Option *required(CLI::Option *option);

// A spelling that was retired: using it is a usage error naming the one to
// use instead (`why` says what changed, e.g. "--data is now the indexed
// dataset PREFIX"). Hidden from help.
void addRetired(CLI::App &app, const std::string &name,
                const std::string &why);

// The one positional a command takes. Empty when `values` holds exactly
// one (then it is in `out`), else the message: `missing` when none, "one
// SPEC only; got 'a' and 'b'" when more.
std::string onePositional(const std::vector<std::string> &values,
                          const std::string &name, const std::string &missing,
                          std::string &out);

// The files a command line names, looked for before the work starts.
enum class PathKind { File, Directory, Any };
bool pathExists(const std::string &path, PathKind kind);
// "--data corpus/train: corpus/train.idx not found (...)", or empty when
// PREFIX.bin and PREFIX.idx are there.
std::string missingIndexedDataset(const std::string &flag,
                                  const std::string &prefix);

} // namespace octet::cli

#endif
