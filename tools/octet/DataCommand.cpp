// `octet data`: preparing training data (`octet data preprocess`) and
// looking at it (`octet data inspect`). The options: CommandLine.cpp.

#include "tools/octet/Commands.h"

#include "runtime/data/IndexedDataset.h"
#include "runtime/data/Preprocess.h"
#include "runtime/data/Tokenizer.h"

#include <cstdio>
#include <string>
#include <vector>

namespace octet {

int runDataPreprocessCommand(const data::PreprocessOptions &options) {
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

int runDataInspectCommand(const DataInspectOptions &opts) {
  const std::string &prefix = opts.prefix, &tokenizerPath = opts.tokenizer;
  uint64_t show = uint64_t(opts.show);
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

} // namespace octet
