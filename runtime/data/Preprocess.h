#ifndef OCTET_RUNTIME_DATA_PREPROCESS_H
#define OCTET_RUNTIME_DATA_PREPROCESS_H

#include "support/Status.h"
#include "runtime/data/IndexedDataset.h"

#include <cstdint>
#include <cstdio>
#include <string>

namespace octet::data {

struct PreprocessOptions {
  std::string inputPath; // .jsonl, or .jsonl.gz
  std::string outputPrefix;
  std::string tokenizerPath;
  enum class OnError { Stop, Skip } onError = OnError::Stop;
  unsigned threads = 0; // 0: one per core
  bool addBos = false;  // apply the tokenizer's template to text records
  bool appendEod = false;
  std::string eodToken; // empty: <|end_of_text|> or <|endoftext|>
  std::string textKey = "text";
  bool showProgress = true;
  FILE *log = stderr; // progress and skipped-line reports; null: silent
  size_t linesPerBatch = 1024;
};

struct PreprocessResult {
  uint64_t lines = 0;     // lines read, blank ones included
  uint64_t documents = 0; // records written
  uint64_t chatDocuments = 0;
  uint64_t skipped = 0; // malformed lines left out (--on-error=skip)
  uint64_t tokens = 0;
  TokenDType dtype = TokenDType::UInt16;
  // Empty when no record was a chat: text records train on every token.
  std::string lossMaskPrefix;
};

// Where the per-token loss mask of PREFIX goes: an indexed dataset of uint8
// with the same sequences as PREFIX (1 = token carries loss).
std::string lossMaskPrefixFor(const std::string &prefix);

// Tokenizes a jsonl file ({"text": ...} or {"messages": [...]} per line,
// blank lines ignored) into a Megatron indexed dataset at outputPrefix, one
// document per record; chat records use the Llama 3 template and also get
// a loss-mask dataset. Work is spread over threads, output order is input
// order. Nothing at outputPrefix changes unless the whole run succeeds.
StatusOr<PreprocessResult> preprocessJsonl(const PreprocessOptions &options);

} // namespace octet::data

#endif
