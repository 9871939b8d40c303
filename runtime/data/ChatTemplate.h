#ifndef OCTET_RUNTIME_DATA_CHATTEMPLATE_H
#define OCTET_RUNTIME_DATA_CHATTEMPLATE_H

#include "runtime/data/Jsonl.h"
#include "runtime/data/Tokenizer.h"

#include <cstdint>
#include <vector>

namespace octet::data {

// Tokens of one training sample with a per-token loss mask (1: the model is
// trained to predict this token).
struct TokenizedSample {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> lossMask;
};

// The Llama 3 chat format:
//   <|begin_of_text|>
//   <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>  (each)
// CONTENT is trimmed of surrounding whitespace, as Meta's template does.
// Only assistant content and its <|eot_id|> carry loss.
class Llama3ChatTemplate {
public:
  // Fails when the tokenizer lacks one of the template's special tokens.
  static StatusOr<Llama3ChatTemplate> create(const Tokenizer &tokenizer);

  // The text form; encoding it gives the same tokens as tokenize().
  static std::string render(const std::vector<ChatMessage> &messages);
  StatusOr<TokenizedSample>
  tokenize(const std::vector<ChatMessage> &messages) const;

private:
  explicit Llama3ChatTemplate(Tokenizer tokenizer)
      : tokenizer_(std::move(tokenizer)) {}
  Tokenizer tokenizer_;
  int32_t beginOfText_ = 0, startHeader_ = 0, endHeader_ = 0, endOfTurn_ = 0;
};

} // namespace octet::data

#endif
