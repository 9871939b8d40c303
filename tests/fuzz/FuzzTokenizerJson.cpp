// Fuzz target: tokenizer.json text; accepted tokenizers also encode and
// decode a few strings.

#include "runtime/data/Tokenizer.h"
#include "tests/fuzz/FuzzDriver.h"
#include "tests/unit/data/SmallTokenizer.h"

#include <nlohmann/json.hpp>

using namespace octet::data;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  octet::StatusOr<Tokenizer> tokenizer = Tokenizer::fromJson(text, "fuzz");
  if (!tokenizer)
    return 0;
  for (std::string_view sample :
       {std::string_view("Hello, world! It's 2024."),
        std::string_view(
            "  \n\n\t<|eot_id|>x<mask> y \xC3\xA9\xF0\x9F\x99\x82"),
        std::string_view("")}) {
    octet::StatusOr<std::vector<int32_t>> ids = tokenizer->encode(sample, true);
    if (!ids)
      continue;
    for (int32_t id : *ids)
      if (id < 0 || id >= tokenizer->vocabSize())
        __builtin_trap(); // encode produced an id decode cannot know
    octet::StatusOr<std::string> back = tokenizer->decode(*ids, true);
    if (!back)
      __builtin_trap();
  }
  return 0;
}

namespace octet::fuzz {

std::vector<std::string> seedInputs() {
  std::string llama = testutil::smallByteLevelTokenizerJson(
      {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {" ", "w"}});
  nlohmann::json gpt2 = nlohmann::json::parse(llama);
  gpt2["pre_tokenizer"] = {
      {"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  gpt2["model"]["ignore_merges"] = false;
  gpt2["added_tokens"].push_back({{"id", 2000},
                                  {"content", "<mask>"},
                                  {"lstrip", true},
                                  {"rstrip", true},
                                  {"single_word", true},
                                  {"normalized", true},
                                  {"special", false}});
  std::vector<std::string> seeds = {llama, gpt2.dump()};
  // Merges in the "a b" form and a Split with a literal pattern.
  nlohmann::json legacy = nlohmann::json::parse(llama);
  for (auto &merge : legacy["model"]["merges"])
    merge = merge[0].get<std::string>() + " " + merge[1].get<std::string>();
  legacy["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"String", " "}};
  legacy["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "MergedWithNext";
  seeds.push_back(legacy.dump());
  return seeds;
}

std::vector<std::string> dictionary() {
  return {"\"type\"",
          "\"BPE\"",
          "\"WordPiece\"",
          "\"Split\"",
          "\"Sequence\"",
          "\"ByteLevel\"",
          "\"Regex\"",
          "\"(?i:a)\"",
          "\"\\\\p{L}+\"",
          "\"ignore_merges\"",
          "\"merges\"",
          "\"vocab\"",
          "\"added_tokens\"",
          "\"lstrip\"",
          "\"single_word\"",
          "\"Contiguous\"",
          "\"invert\"",
          "\"unk_token\"",
          "\"TemplateProcessing\"",
          "\"SpecialToken\""};
}

} // namespace octet::fuzz
