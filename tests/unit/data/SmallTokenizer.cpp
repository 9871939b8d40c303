#include "tests/unit/data/SmallTokenizer.h"

#include <nlohmann/json.hpp>

namespace octet::testutil {

namespace {

std::string byteLevelChar(unsigned char b) {
  bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) ||
                   (b >= 0xAE && b <= 0xFF);
  unsigned codePoint = b;
  if (!printable) {
    unsigned shifted = 0;
    for (unsigned c = 0; c < b; ++c) {
      bool p = (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) ||
               (c >= 0xAE && c <= 0xFF);
      shifted += !p;
    }
    codePoint = 256 + shifted;
  }
  std::string out;
  if (codePoint < 0x80) {
    out += static_cast<char>(codePoint);
  } else {
    out += static_cast<char>(0xC0 | (codePoint >> 6));
    out += static_cast<char>(0x80 | (codePoint & 0x3F));
  }
  return out;
}

std::string toByteLevel(const std::string &text) {
  std::string out;
  for (unsigned char c : text)
    out += byteLevelChar(c);
  return out;
}

} // namespace

std::string smallByteLevelTokenizerJson(
    const std::vector<std::pair<std::string, std::string>> &merges) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b)
    vocab[byteLevelChar(static_cast<unsigned char>(b))] = b;
  nlohmann::json mergeList = nlohmann::json::array();
  int next = 256;
  for (const auto &[a, b] : merges) {
    std::string left = toByteLevel(a), right = toByteLevel(b);
    if (!vocab.contains(left + right))
      vocab[left + right] = next++;
    mergeList.push_back({left, right});
  }
  nlohmann::json added = nlohmann::json::array();
  const char *specials[] = {"<|begin_of_text|>", "<|end_of_text|>",
                            "<|start_header_id|>", "<|end_header_id|>",
                            "<|eot_id|>"};
  for (int i = 0; i < 5; ++i)
    added.push_back({{"id", 1000 + i},
                     {"content", specials[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  nlohmann::json root = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern",
            {{"Regex",
              "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
              "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
              "\\s+(?!\\S)|\\s+"}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"},
           {"add_prefix_space", false},
           {"trim_offsets", true},
           {"use_regex", false}}}}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens",
         {{"<|begin_of_text|>",
           {{"id", "<|begin_of_text|>"},
            {"ids", {1000}},
            {"tokens", {"<|begin_of_text|>"}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"ignore_merges", true},
        {"vocab", vocab},
        {"merges", mergeList}}}};
  return root.dump();
}

} // namespace octet::testutil
