#include "runtime/data/Tokenizer.h"
#include "runtime/data/Regex.h"
#include "runtime/data/Utf8.h"
#include "tests/unit/data/TestUtil.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace octet;
using namespace octet::data;

namespace {

Tokenizer loadOrDie(const std::string &json) {
  StatusOr<Tokenizer> tokenizer = Tokenizer::fromJson(json, "test.json");
  if (!tokenizer)
    ADD_FAILURE() << tokenizer.status().message();
  return *tokenizer;
}

std::string describe(const Tokenizer &tokenizer,
                     const std::vector<int32_t> &ids, size_t from) {
  std::string out;
  for (size_t i = from; i < ids.size() && i < from + 8; ++i)
    out += " " + std::to_string(ids[i]) + "(" +
           tokenizer.idToToken(ids[i]).value_or("?") + ")";
  return out;
}

// Every encoding and decoding that HF `tokenizers` recorded must come out
// the same, id for id and byte for byte.
void compareWithHf(const std::string &style) {
  std::string why;
  std::string dir = testutil::tokenizerGoldenDir(why);
  if (dir.empty()) {
    if (why.rfind("FAILED", 0) == 0)
      FAIL() << why;
    GTEST_SKIP() << why;
  }
  StatusOr<Tokenizer> tokenizer =
      Tokenizer::fromFile(dir + "/" + style + "/tokenizer.json");
  ASSERT_TRUE(tokenizer) << tokenizer.status().message();
  nlohmann::json expected = nlohmann::json::parse(
      testutil::readFile(dir + "/" + style + "/expected.json"));
  size_t bytes = 0, mismatches = 0;
  const nlohmann::json &encodings = expected["encodings"];
  ASSERT_GT(encodings.size(), 100u);
  for (size_t doc = 0; doc < encodings.size(); ++doc) {
    const nlohmann::json &e = encodings[doc];
    std::string text = e["text"].get<std::string>();
    bytes += text.size();
    std::vector<int32_t> want = e["ids"].get<std::vector<int32_t>>();
    StatusOr<std::vector<int32_t>> got =
        tokenizer->encode(text, e["add_special"].get<bool>());
    ASSERT_TRUE(got) << got.status().message();
    if (*got != want && mismatches++ < 3) {
      size_t k = 0;
      while (k < got->size() && k < want.size() && (*got)[k] == want[k])
        ++k;
      ADD_FAILURE() << style << " document " << doc << " differs at token " << k
                    << ":\n  octet:" << describe(*tokenizer, *got, k)
                    << "\n  HF:   " << describe(*tokenizer, want, k);
    }
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_GE(bytes, 1u << 20) << "the oracle corpus must be at least 1 MB";

  size_t decodeMismatches = 0;
  for (const nlohmann::json &d : expected["decodes"]) {
    StatusOr<std::string> text = tokenizer->decode(
        d["ids"].get<std::vector<int32_t>>(), d["skip_special"].get<bool>());
    ASSERT_TRUE(text) << text.status().message();
    if (*text != d["text"].get<std::string>() && decodeMismatches++ < 3)
      ADD_FAILURE() << style << " decode of " << d["ids"].dump() << " gave \""
                    << *text << "\", HF gave " << d["text"];
  }
  EXPECT_EQ(decodeMismatches, 0u);
}

} // namespace

TEST(TokenizerHf, Llama3StyleMatchesHfTokenizers) { compareWithHf("llama3"); }
TEST(TokenizerHf, Gpt2StyleMatchesHfTokenizers) { compareWithHf("gpt2"); }

TEST(Tokenizer, AppliesMergesByRank) {
  // "ab" outranks "bc": "abc" merges a+b first, then finds no "ab"+"c".
  Tokenizer t = loadOrDie(testutil::smallByteLevelTokenizerJson(
      {{"a", "b"}, {"b", "c"}, {"ab", "c"}}));
  StatusOr<std::vector<int32_t>> ids = t.encode("abc");
  ASSERT_TRUE(ids);
  EXPECT_EQ(*ids, (std::vector<int32_t>{258})); // "abc"
  ids = t.encode("bcb");
  ASSERT_TRUE(ids);
  EXPECT_EQ(*ids, (std::vector<int32_t>{257, 'b'}));
  EXPECT_EQ(*t.decode(*ids), "bcb");
}

TEST(Tokenizer, RecognizesSpecialTokensAndTemplate) {
  Tokenizer t = loadOrDie(testutil::smallByteLevelTokenizerJson({}));
  StatusOr<std::vector<int32_t>> ids = t.encode("a<|eot_id|>b", true);
  ASSERT_TRUE(ids);
  EXPECT_EQ(*ids, (std::vector<int32_t>{1000, 'a', 1004, 'b'}));
  EXPECT_EQ(*t.decode(*ids), "<|begin_of_text|>a<|eot_id|>b");
  EXPECT_EQ(*t.decode(*ids, /*skipSpecialTokens=*/true), "ab");
  EXPECT_TRUE(t.isSpecial(1004));
  EXPECT_FALSE(t.isSpecial('a'));
  EXPECT_EQ(t.tokenToId("<|eot_id|>"), 1004);
  EXPECT_EQ(t.vocabSize(), 1005);
}

TEST(Tokenizer, TokenStartsPointIntoTheInput) {
  Tokenizer t = loadOrDie(testutil::smallByteLevelTokenizerJson({{"h", "i"}}));
  std::vector<int32_t> ids;
  std::vector<uint32_t> starts;
  ASSERT_TRUE(t.encodeInto("hi <|eot_id|>x", false, ids, &starts));
  EXPECT_EQ(starts, (std::vector<uint32_t>{0, 2, 3, 13}));
}

TEST(Tokenizer, MapsEveryByteThroughTheByteLevelAlphabet) {
  Tokenizer t = loadOrDie(testutil::smallByteLevelTokenizerJson({}));
  std::string text = "\t\n \xC3\xA9\xF0\x9F\x99\x82\x7F";
  StatusOr<std::vector<int32_t>> ids = t.encode(text);
  ASSERT_TRUE(ids);
  EXPECT_EQ(ids->size(), text.size());
  EXPECT_EQ(*t.decode(*ids), text);
}

TEST(Tokenizer, RejectsInvalidUtf8Input) {
  Tokenizer t = loadOrDie(testutil::smallByteLevelTokenizerJson({}));
  StatusOr<std::vector<int32_t>> ids = t.encode("ok\xFFno");
  ASSERT_FALSE(ids);
  EXPECT_NE(ids.status().message().find("not valid UTF-8 (byte 2)"),
            std::string::npos);
}

TEST(Tokenizer, DecodeRejectsUnknownIdsAndReplacesBrokenUtf8) {
  Tokenizer t = loadOrDie(testutil::smallByteLevelTokenizerJson({}));
  StatusOr<std::string> bad = t.decode({5000});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("token id 5000"), std::string::npos);
  // The first byte of "é" alone is not UTF-8.
  EXPECT_EQ(*t.decode({0xC3, 'a'}), "\xEF\xBF\xBD"
                                    "a");
}

TEST(Tokenizer, RefusesOtherModelTypesByName) {
  for (const char *type : {"WordPiece", "Unigram", "WordLevel"}) {
    nlohmann::json json =
        nlohmann::json::parse(testutil::smallByteLevelTokenizerJson({}));
    json["model"]["type"] = type;
    StatusOr<Tokenizer> t = Tokenizer::fromJson(json.dump(), "tok.json");
    ASSERT_FALSE(t) << type;
    const std::string &message = t.status().message();
    EXPECT_NE(message.find("tok.json: model.type"), std::string::npos)
        << message;
    EXPECT_NE(message.find(type), std::string::npos) << message;
    EXPECT_NE(message.find("byte-level BPE"), std::string::npos) << message;
  }
}

// Found by the tokenizer.json fuzz target: a template naming an id that no
// token has made encode emit ids that decode then refused.
TEST(Tokenizer, RefusesTemplateIdsOutsideTheVocabulary) {
  nlohmann::json json =
      nlohmann::json::parse(testutil::smallByteLevelTokenizerJson({}));
  ASSERT_TRUE(json.contains("post_processor"));
  json.erase("added_tokens");
  StatusOr<Tokenizer> t = Tokenizer::fromJson(json.dump(), "tok.json");
  ASSERT_FALSE(t);
  const std::string &message = t.status().message();
  EXPECT_NE(message.find("tok.json: post_processor.special_tokens"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("is neither in model.vocab nor in added_tokens"),
            std::string::npos)
      << message;
}

TEST(Tokenizer, RefusesUnsupportedPiecesWithTheirField) {
  struct Case {
    const char *pointer;
    nlohmann::json value;
    const char *field;
  };
  std::vector<Case> cases = {
      {"/normalizer", {{"type", "NFKC"}}, "normalizer"},
      {"/decoder", {{"type", "WordPiece"}}, "decoder.type"},
      {"/pre_tokenizer", {{"type", "Whitespace"}}, "pre_tokenizer.type"},
      {"/model/byte_fallback", true, "model.byte_fallback"},
      {"/model/merges/0", "nospace", "model.merges[0]"},
      {"/model/merges/0", {"a", "zz"}, "model.merges[0]"},
      {"/model/vocab/a", -3, "model.vocab[\"a\"]"},
      {"/added_tokens/0/content", 7, "added_tokens[0]"},
  };
  for (const Case &c : cases) {
    nlohmann::json json = nlohmann::json::parse(
        testutil::smallByteLevelTokenizerJson({{"a", "b"}}));
    json[nlohmann::json::json_pointer(c.pointer)] = c.value;
    StatusOr<Tokenizer> t = Tokenizer::fromJson(json.dump(), "tok.json");
    ASSERT_FALSE(t) << c.pointer;
    EXPECT_NE(t.status().message().find(std::string("tok.json: ") + c.field),
              std::string::npos)
        << t.status().message();
  }
  StatusOr<Tokenizer> notJson = Tokenizer::fromJson("{\"model\": ", "x.json");
  ASSERT_FALSE(notJson);
  EXPECT_NE(notJson.status().message().find("x.json: not valid JSON"),
            std::string::npos);
  StatusOr<Tokenizer> missing = Tokenizer::fromFile("/nonexistent/t.json");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("/nonexistent/t.json"),
            std::string::npos);
}

TEST(Utf8, LossyConversionReplacesMaximalInvalidSubparts) {
  EXPECT_EQ(utf8Lossy("ok"), "ok");
  EXPECT_EQ(utf8Lossy("\xE2\x82"), "\xEF\xBF\xBD");             // truncated
  EXPECT_EQ(utf8Lossy("\xE2\x82x"), "\xEF\xBF\xBDx");           // cut by ASCII
  EXPECT_EQ(utf8Lossy("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD"); // overlong
  EXPECT_EQ(utf8Lossy("\xED\xA0\x80"),                          // a surrogate
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(findInvalidUtf8("caf\xC3\xA9"), std::string::npos);
  EXPECT_EQ(findInvalidUtf8("caf\xC3"), 3u);
}

TEST(Regex, RewritesOnigurumaOnlyEscapes) {
  EXPECT_EQ(onigurumaToPcre2(R"(\s+(?!\S))"), R"([\s\x{85}]+(?![^\s\x{85}]))");
  EXPECT_EQ(onigurumaToPcre2(R"([^\s\p{L}])"), R"([^\s\x{85}\p{L}])");
  EXPECT_EQ(onigurumaToPcre2(R"([]\s])"), R"([]\s\x{85}])");
  EXPECT_EQ(onigurumaToPcre2(R"(\\s)"), R"(\\s)");
  StatusOr<Regex> regex = Regex::compileOniguruma(R"(\s+)");
  ASSERT_TRUE(regex);
  std::vector<Regex::Span> matches;
  ASSERT_TRUE(regex->findAll("a\xC2\x85 b", matches));
  ASSERT_EQ(matches.size(), 1u);
  EXPECT_EQ(matches[0], Regex::Span(1, 4)); // NEL and the space
  EXPECT_FALSE(Regex::compileOniguruma("(unclosed"));
}
