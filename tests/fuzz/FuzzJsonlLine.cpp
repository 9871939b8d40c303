// Fuzz target: one line of a training jsonl file, parsed and (when valid)
// tokenized as preprocessing would, chat template included.

#include "runtime/data/ChatTemplate.h"
#include "runtime/data/Jsonl.h"
#include "tests/fuzz/FuzzDriver.h"
#include "tests/unit/data/SmallTokenizer.h"

#include <cstdlib>

using namespace octet::data;

namespace {

const Tokenizer &tokenizer() {
  static const Tokenizer instance = [] {
    octet::StatusOr<Tokenizer> t = Tokenizer::fromJson(
        octet::testutil::smallByteLevelTokenizerJson({{"a", "s"}}), "seed");
    if (!t)
      std::abort();
    return *t;
  }();
  return instance;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view line(reinterpret_cast<const char *>(data), size);
  octet::StatusOr<JsonlRecord> record = parseJsonlLine(line);
  if (!record)
    return 0;
  if (record->kind == JsonlRecord::Kind::Text) {
    (void)tokenizer().encode(record->text, true);
    return 0;
  }
  for (const ChatMessage &m : record->messages)
    if (!isKnownChatRole(m.role))
      __builtin_trap(); // the parser must refuse unknown roles
  octet::StatusOr<Llama3ChatTemplate> chat =
      Llama3ChatTemplate::create(tokenizer());
  if (!chat)
    std::abort();
  octet::StatusOr<TokenizedSample> sample = chat->tokenize(record->messages);
  if (sample && sample->tokens.size() != sample->lossMask.size())
    __builtin_trap();
  return 0;
}

namespace octet::fuzz {

std::vector<std::string> seedInputs() {
  return {
      R"({"text": "hello world, it's 12345 \u00e9\ud83d\ude42"})",
      R"({"messages": [{"role": "system", "content": "be brief"}, )"
      R"({"role": "user", "content": "hi <|eot_id|>"}, )"
      R"({"role": "assistant", "content": "  as  "}]})",
      R"({"text": ""})",
      R"({"messages": [{"role": "tool", "content": "{\"x\": 1}"}]})",
  };
}

std::vector<std::string> dictionary() {
  return {"\"text\"",    "\"messages\"",  "\"role\"",
          "\"content\"", "\"assistant\"", "\"ipython\"",
          "<|eot_id|>",  "\\ud800",       "\\n"};
}

} // namespace octet::fuzz
