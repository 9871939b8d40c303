// `octet data`: preparing training data.
//   octet data preprocess --input X.jsonl --tokenizer tokenizer.json
//                         --output-prefix OUT [options]
//   octet data inspect PREFIX [--tokenizer tokenizer.json] [--show N]

#include "tools/octet/Commands.h"

#include "runtime/data/IndexedDataset.h"
#include "runtime/data/Preprocess.h"
#include "runtime/data/Tokenizer.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace octet {

namespace {

constexpr const char *kDataUsage =
    "usage: octet data <command> [options]\n"
    "\n"
    "commands:\n"
    "  preprocess   tokenize a jsonl file into a Megatron indexed dataset\n"
    "  inspect      print the sizes (and first sequences) of a dataset\n"
    "\n"
    "Run `octet data <command> --help` for its options.\n";

constexpr const char *kPreprocessUsage =
    "usage: octet data preprocess --input FILE.jsonl[.gz] --tokenizer "
    "tokenizer.json --output-prefix PREFIX [options]\n"
    "\n"
    "Each line of the input is {\"text\": \"...\"} or {\"messages\": "
    "[{\"role\": ..., \"content\": ...}, ...]}\n"
    "(roles: system, user, assistant, tool, ipython; chat uses the Llama 3 "
    "template).\n"
    "Writes PREFIX.bin and PREFIX.idx (Megatron MMIDIDX format), and for chat "
    "data\n"
    "PREFIX_loss_mask.bin/.idx (1 on assistant tokens). Nothing is written "
    "unless the run succeeds.\n"
    "\n"
    "options:\n"
    "  --input FILE           jsonl input, optionally gzip-compressed\n"
    "  --tokenizer FILE       Hugging Face tokenizer.json (byte-level BPE)\n"
    "  --output-prefix PATH   where to write PATH.bin and PATH.idx\n"
    "  --on-error=stop|skip   on a malformed line: stop with its line number "
    "(default),\n"
    "                         or report it and leave it out\n"
    "  --threads N            tokenizer threads (default: one per core)\n"
    "  --append-eod           end each text record with the end-of-document "
    "token\n"
    "  --eod-token TOKEN      that token (default <|end_of_text|> or "
    "<|endoftext|>)\n"
    "  --add-bos              apply the tokenizer's template (e.g. "
    "<|begin_of_text|>) to text records\n"
    "  --text-key KEY         field holding the text (default \"text\")\n"
    "  --no-progress          no progress display on stderr\n";

constexpr const char *kInspectUsage =
    "usage: octet data inspect PREFIX [--tokenizer tokenizer.json] [--show "
    "N]\n"
    "\n"
    "Checks PREFIX.bin/.idx and prints their counts; with --tokenizer, also "
    "decodes\n"
    "the first N sequences (default 1).\n";

// Reads "--name value" or "--name=value"; advances i past what it consumed.
bool takeValue(int argc, char **argv, int &i, const std::string &name,
               std::string &value, bool &missing) {
  std::string arg = argv[i];
  if (arg == name) {
    if (i + 1 >= argc) {
      missing = true;
      return true;
    }
    value = argv[++i];
    return true;
  }
  if (arg.compare(0, name.size() + 1, name + "=") == 0) {
    value = arg.substr(name.size() + 1);
    return true;
  }
  return false;
}

int usageError(const std::string &message, const char *usage) {
  std::fprintf(stderr, "octet data: %s\n\n%s", message.c_str(), usage);
  return 2;
}

bool parseCount(const std::string &text, unsigned long &out) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  out = std::strtoul(text.c_str(), nullptr, 10);
  return true;
}

int runPreprocess(int argc, char **argv) {
  data::PreprocessOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool missing = false;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kPreprocessUsage, stdout);
      return 0;
    }
    if (arg == "--append-eod") {
      options.appendEod = true;
    } else if (arg == "--add-bos") {
      options.addBos = true;
    } else if (arg == "--no-progress") {
      options.showProgress = false;
    } else if (takeValue(argc, argv, i, "--input", value, missing)) {
      options.inputPath = value;
    } else if (takeValue(argc, argv, i, "--tokenizer", value, missing)) {
      options.tokenizerPath = value;
    } else if (takeValue(argc, argv, i, "--output-prefix", value, missing)) {
      options.outputPrefix = value;
    } else if (takeValue(argc, argv, i, "--eod-token", value, missing)) {
      options.eodToken = value;
      options.appendEod = true;
    } else if (takeValue(argc, argv, i, "--text-key", value, missing)) {
      options.textKey = value;
    } else if (takeValue(argc, argv, i, "--on-error", value, missing)) {
      if (value == "stop")
        options.onError = data::PreprocessOptions::OnError::Stop;
      else if (value == "skip")
        options.onError = data::PreprocessOptions::OnError::Skip;
      else if (!missing)
        return usageError("--on-error takes stop or skip, not \"" + value +
                              "\"",
                          kPreprocessUsage);
    } else if (takeValue(argc, argv, i, "--threads", value, missing)) {
      unsigned long threads = 0;
      if (!missing &&
          (!parseCount(value, threads) || threads == 0 || threads > 1024))
        return usageError("--threads takes a count from 1 to 1024, not \"" +
                              value + "\"",
                          kPreprocessUsage);
      options.threads = static_cast<unsigned>(threads);
    } else {
      return usageError("unknown option " + arg, kPreprocessUsage);
    }
    if (missing)
      return usageError(arg + " needs a value", kPreprocessUsage);
  }
  if (options.inputPath.empty() || options.tokenizerPath.empty() ||
      options.outputPrefix.empty())
    return usageError("--input, --tokenizer and --output-prefix are required",
                      kPreprocessUsage);

  StatusOr<data::PreprocessResult> result = data::preprocessJsonl(options);
  if (!result) {
    std::fprintf(stderr, "octet data preprocess: error: %s\n",
                 result.status().message().c_str());
    return 1;
  }
  std::fprintf(stderr,
               "wrote %s.bin/.idx: %llu documents (%llu chat), %llu tokens, "
               "dtype %s",
               options.outputPrefix.c_str(),
               static_cast<unsigned long long>(result->documents),
               static_cast<unsigned long long>(result->chatDocuments),
               static_cast<unsigned long long>(result->tokens),
               data::tokenDTypeName(result->dtype));
  if (!result->lossMaskPrefix.empty())
    std::fprintf(stderr, "; loss mask in %s.bin/.idx",
                 result->lossMaskPrefix.c_str());
  if (result->skipped)
    std::fprintf(stderr, "; %llu malformed lines skipped",
                 static_cast<unsigned long long>(result->skipped));
  std::fprintf(stderr, "\n");
  return 0;
}

int runInspect(int argc, char **argv) {
  std::string prefix, tokenizerPath;
  unsigned long show = 1;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool missing = false;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kInspectUsage, stdout);
      return 0;
    }
    if (takeValue(argc, argv, i, "--tokenizer", value, missing)) {
      tokenizerPath = value;
    } else if (takeValue(argc, argv, i, "--show", value, missing)) {
      if (!missing && !parseCount(value, show))
        return usageError("--show takes a count", kInspectUsage);
    } else if (!arg.empty() && arg[0] == '-') {
      return usageError("unknown option " + arg, kInspectUsage);
    } else if (prefix.empty()) {
      prefix = arg;
    } else {
      return usageError("one dataset prefix at a time", kInspectUsage);
    }
    if (missing)
      return usageError(arg + " needs a value", kInspectUsage);
  }
  if (prefix.empty())
    return usageError("name the dataset prefix (PREFIX for PREFIX.bin/.idx)",
                      kInspectUsage);
  StatusOr<data::IndexedDataset> dataset = data::IndexedDataset::open(prefix);
  if (!dataset) {
    std::fprintf(stderr, "octet data inspect: error: %s\n",
                 dataset.status().message().c_str());
    return 1;
  }
  std::printf("%s: %zu sequences, %zu documents, %llu tokens, dtype %s\n",
              prefix.c_str(), dataset->sequenceCount(),
              dataset->documentCount(),
              static_cast<unsigned long long>(dataset->totalTokens()),
              data::tokenDTypeName(dataset->dtype()));
  if (tokenizerPath.empty())
    return 0;
  StatusOr<data::Tokenizer> tokenizer =
      data::Tokenizer::fromFile(tokenizerPath);
  if (!tokenizer) {
    std::fprintf(stderr, "octet data inspect: error: %s\n",
                 tokenizer.status().message().c_str());
    return 1;
  }
  std::vector<int32_t> ids;
  for (size_t i = 0; i < dataset->sequenceCount() && i < show; ++i) {
    dataset->readSequence(i, ids);
    StatusOr<std::string> text = tokenizer->decode(ids);
    if (!text) {
      std::fprintf(stderr, "octet data inspect: sequence %zu: %s\n", i,
                   text.status().message().c_str());
      return 1;
    }
    std::printf("--- sequence %zu (%zu tokens)\n%s\n", i, ids.size(),
                text->c_str());
  }
  return 0;
}

} // namespace

int runDataCommand(int argc, char **argv) {
  if (argc < 2)
    return usageError("name a command", kDataUsage);
  std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(kDataUsage, stdout);
    return 0;
  }
  if (command == "preprocess")
    return runPreprocess(argc - 1, argv + 1);
  if (command == "inspect")
    return runInspect(argc - 1, argv + 1);
  return usageError("unknown command \"" + command + "\"", kDataUsage);
}

} // namespace octet
