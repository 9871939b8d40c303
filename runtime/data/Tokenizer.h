#ifndef OCTET_RUNTIME_DATA_TOKENIZER_H
#define OCTET_RUNTIME_DATA_TOKENIZER_H

#include "support/Status.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace octet::data {

// A byte-level BPE tokenizer read from a Hugging Face tokenizer.json, giving
// the ids HF `tokenizers` gives. Supported: model BPE (merges as "a b"
// strings or ["a", "b"] pairs, ignore_merges, unk_token); pre-tokenizers
// Split (regex or string, every split behavior), ByteLevel (with or without
// its GPT-2 regex, add_prefix_space) and Sequence of those, ByteLevel last;
// added and special tokens (lstrip, rstrip, single_word); post-processors
// TemplateProcessing (single sequence), ByteLevel and Sequence; decoder
// ByteLevel. Anything else is refused with an error naming the field.
//
// Copies share one immutable state; encode and decode are thread-safe.
class Tokenizer {
public:
  static StatusOr<Tokenizer> fromFile(const std::string &path);
  // `sourceName` names the input in error messages.
  static StatusOr<Tokenizer> fromJson(std::string_view json,
                                      const std::string &sourceName);

  // Encodes UTF-8 text. Added and special tokens written in the text are
  // recognized, as HF does. `addSpecialTokens` applies the post-processor
  // template (e.g. a leading <|begin_of_text|>).
  StatusOr<std::vector<int32_t>> encode(std::string_view text,
                                        bool addSpecialTokens = false) const;
  // Same, appending to `ids`; when `tokenStarts` is given, also appends for
  // each token the byte offset in `text` where it starts (a token made only
  // of bytes the tokenizer inserted gets the offset of the text after them).
  Status encodeInto(std::string_view text, bool addSpecialTokens,
                    std::vector<int32_t> &ids,
                    std::vector<uint32_t> *tokenStarts = nullptr) const;

  // Decodes ids to text; byte sequences that are not valid UTF-8 become
  // U+FFFD, as in HF. An id outside the vocabulary is an error.
  StatusOr<std::string> decode(const std::vector<int32_t> &ids,
                               bool skipSpecialTokens = false) const;

  std::optional<int32_t> tokenToId(std::string_view token) const;
  std::optional<std::string> idToToken(int32_t id) const;
  // One past the largest id, added tokens included.
  int32_t vocabSize() const;
  bool isSpecial(int32_t id) const;

  struct Impl;

private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl)
      : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// The 256 printable characters GPT-2's byte-level scheme maps bytes to.
const std::string &byteLevelCharFor(uint8_t byte);

} // namespace octet::data

#endif
