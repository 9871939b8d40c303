#include "runtime/data/Preprocess.h"
#include "runtime/data/ChatTemplate.h"
#include "runtime/data/IndexedDataset.h"
#include "runtime/data/Jsonl.h"
#include "runtime/data/Tokenizer.h"
#include "tests/unit/data/TestUtil.h"

#include <gtest/gtest.h>
#include <zlib.h>

using namespace octet;
using namespace octet::data;

namespace {

struct Fixture {
  std::string dir, tokenizerPath;
  Tokenizer tokenizer;
};

Fixture makeFixture() {
  std::string dir = testutil::makeTempDir("preprocess");
  std::string path = dir + "/tokenizer.json";
  testutil::writeFile(path, testutil::smallByteLevelTokenizerJson(
                                {{"h", "e"}, {"l", "l"}, {"he", "ll"}}));
  StatusOr<Tokenizer> tokenizer = Tokenizer::fromFile(path);
  EXPECT_TRUE(tokenizer);
  return {dir, path, *tokenizer};
}

PreprocessOptions optionsFor(const Fixture &f, const std::string &input) {
  PreprocessOptions options;
  options.inputPath = f.dir + "/" + input;
  options.outputPrefix = f.dir + "/out";
  options.tokenizerPath = f.tokenizerPath;
  options.showProgress = false;
  options.log = nullptr;
  options.threads = 2;
  options.linesPerBatch = 3; // several batches even for small inputs
  return options;
}

std::vector<std::vector<int32_t>> readAll(const std::string &prefix) {
  StatusOr<IndexedDataset> dataset = IndexedDataset::open(prefix);
  EXPECT_TRUE(dataset) << dataset.status().message();
  std::vector<std::vector<int32_t>> all;
  if (!dataset)
    return all;
  for (size_t i = 0; i < dataset->sequenceCount(); ++i) {
    all.emplace_back();
    dataset->readSequence(i, all.back());
  }
  return all;
}

} // namespace

TEST(Jsonl, ParsesTextAndChatRecords) {
  StatusOr<JsonlRecord> text = parseJsonlLine(R"({"text": "hi", "id": 3})");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->kind, JsonlRecord::Kind::Text);
  EXPECT_EQ(text->text, "hi");
  StatusOr<JsonlRecord> chat =
      parseJsonlLine(R"({"messages": [{"role": "user", "content": "q"},)"
                     R"( {"role": "assistant", "content": "a"}]})");
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->kind, JsonlRecord::Kind::Chat);
  ASSERT_EQ(chat->messages.size(), 2u);
  EXPECT_EQ(chat->messages[1].role, "assistant");
  StatusOr<JsonlRecord> custom = parseJsonlLine(R"({"body": "x"})", "body");
  ASSERT_TRUE(custom);
  EXPECT_EQ(custom->text, "x");
}

TEST(Jsonl, ExplainsWhatIsWrongWithALine) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"text": "unterminated)", "not valid JSON"},
      {R"(["text"])", "expected a JSON object, found array"},
      {R"({"txt": "x"})", "neither \"text\" nor \"messages\""},
      {R"({"text": 5})", "\"text\" is number, expected a string"},
      {R"({"text": "a", "messages": []})", "has both"},
      {R"({"messages": {}})", "\"messages\" is object"},
      {R"({"messages": []})", "\"messages\" is empty"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"messages": [{"role": "bot", "content": "x"}]})",
       "messages[0].role \"bot\" is not a chat role; use system, user, "
       "assistant"},
  };
  for (const auto &[line, expected] : cases) {
    StatusOr<JsonlRecord> record = parseJsonlLine(line);
    ASSERT_FALSE(record) << line;
    EXPECT_NE(record.status().message().find(expected), std::string::npos)
        << line << " -> " << record.status().message();
  }
}

TEST(Preprocess, TokenizesTextRecordsInOrder) {
  Fixture f = makeFixture();
  std::vector<std::string> texts;
  std::string jsonl;
  for (int i = 0; i < 20; ++i) {
    texts.push_back("hello " + std::to_string(i) + std::string(i, 'l'));
    jsonl += "{\"text\": \"" + texts.back() + "\"}\n";
    if (i == 4)
      jsonl += "\n   \n"; // blank lines are not records
  }
  testutil::writeFile(f.dir + "/in.jsonl", jsonl);
  PreprocessOptions options = optionsFor(f, "in.jsonl");
  options.appendEod = true;
  StatusOr<PreprocessResult> result = preprocessJsonl(options);
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->documents, 20u);
  EXPECT_EQ(result->lines, 22u);
  EXPECT_TRUE(result->lossMaskPrefix.empty());
  EXPECT_EQ(result->dtype, TokenDType::UInt16);
  std::vector<std::vector<int32_t>> sequences = readAll(f.dir + "/out");
  ASSERT_EQ(sequences.size(), texts.size());
  uint64_t tokens = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int32_t> expected = *f.tokenizer.encode(texts[i]);
    expected.push_back(1001); // <|end_of_text|>
    EXPECT_EQ(sequences[i], expected) << i;
    tokens += expected.size();
  }
  EXPECT_EQ(result->tokens, tokens);
  EXPECT_FALSE(testutil::fileExists(f.dir + "/out_loss_mask.idx"));
}

TEST(Preprocess, ThreadCountDoesNotChangeTheOutput) {
  Fixture f = makeFixture();
  std::string jsonl;
  for (int i = 0; i < 200; ++i)
    jsonl +=
        "{\"text\": \"line " + std::to_string(i * 7919 % 1000) + " hello\"}\n";
  testutil::writeFile(f.dir + "/in.jsonl", jsonl);
  PreprocessOptions options = optionsFor(f, "in.jsonl");
  options.threads = 1;
  options.outputPrefix = f.dir + "/one";
  ASSERT_TRUE(preprocessJsonl(options));
  options.threads = 3;
  options.linesPerBatch = 17;
  options.outputPrefix = f.dir + "/three";
  ASSERT_TRUE(preprocessJsonl(options));
  EXPECT_EQ(testutil::readFile(f.dir + "/one.bin"),
            testutil::readFile(f.dir + "/three.bin"));
  EXPECT_EQ(testutil::readFile(f.dir + "/one.idx"),
            testutil::readFile(f.dir + "/three.idx"));
}

TEST(Preprocess, StopsAtAMalformedLineNamingItAndWritesNothing) {
  Fixture f = makeFixture();
  testutil::writeFile(f.dir + "/in.jsonl", "{\"text\": \"a\"}\n"
                                           "{\"text\": \"b\"}\n"
                                           "{\"text\": \"b\"\n"
                                           "{\"text\": \"c\"}\n");
  StatusOr<PreprocessResult> result =
      preprocessJsonl(optionsFor(f, "in.jsonl"));
  ASSERT_FALSE(result);
  EXPECT_NE(result.status().message().find(f.dir + "/in.jsonl:3: not valid "
                                                   "JSON"),
            std::string::npos)
      << result.status().message();
  EXPECT_NE(result.status().message().find("--on-error=skip"),
            std::string::npos);
  EXPECT_EQ(testutil::listDirectory(f.dir),
            (std::vector<std::string>{"in.jsonl", "tokenizer.json"}));
}

TEST(Preprocess, SkipsMalformedLinesWhenAskedAndReportsThem) {
  Fixture f = makeFixture();
  testutil::writeFile(f.dir + "/in.jsonl",
                      "{\"text\": \"a\"}\n"
                      "oops\n"
                      "{\"messages\": [{\"role\": \"robot\", \"content\": "
                      "\"x\"}]}\n"
                      "{\"text\": \"c\"}");
  PreprocessOptions options = optionsFor(f, "in.jsonl");
  options.onError = PreprocessOptions::OnError::Skip;
  char *logText = nullptr;
  size_t logSize = 0;
  FILE *log = open_memstream(&logText, &logSize);
  options.log = log;
  StatusOr<PreprocessResult> result = preprocessJsonl(options);
  std::fclose(log);
  std::string logged(logText, logSize);
  std::free(logText);
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->documents, 2u);
  EXPECT_EQ(result->skipped, 2u);
  EXPECT_NE(logged.find("in.jsonl:2: not valid JSON"), std::string::npos)
      << logged;
  EXPECT_NE(logged.find("in.jsonl:3: messages[0].role \"robot\""),
            std::string::npos)
      << logged;
  EXPECT_EQ(readAll(f.dir + "/out"),
            (std::vector<std::vector<int32_t>>{{'a'}, {'c'}}));
}

TEST(Preprocess, UnknownChatRoleStopsByDefault) {
  Fixture f = makeFixture();
  testutil::writeFile(f.dir + "/in.jsonl",
                      "{\"messages\": [{\"role\": \"narrator\", \"content\": "
                      "\"x\"}]}\n");
  StatusOr<PreprocessResult> result =
      preprocessJsonl(optionsFor(f, "in.jsonl"));
  ASSERT_FALSE(result);
  EXPECT_NE(result.status().message().find(
                "in.jsonl:1: messages[0].role \"narrator\" is not a chat role"),
            std::string::npos)
      << result.status().message();
}

TEST(Preprocess, ChatRecordsGetTheTemplateAndALossMask) {
  Fixture f = makeFixture();
  testutil::writeFile(
      f.dir + "/in.jsonl",
      "{\"text\": \"plain\"}\n"
      "{\"messages\": [{\"role\": \"system\", \"content\": \"be kind\"}, "
      "{\"role\": \"user\", \"content\": \" hi \"}, {\"role\": "
      "\"assistant\", \"content\": \"hello\"}]}\n");
  StatusOr<PreprocessResult> result =
      preprocessJsonl(optionsFor(f, "in.jsonl"));
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->chatDocuments, 1u);
  ASSERT_EQ(result->lossMaskPrefix, f.dir + "/out_loss_mask");
  std::vector<std::vector<int32_t>> tokens = readAll(f.dir + "/out");
  std::vector<std::vector<int32_t>> masks = readAll(result->lossMaskPrefix);
  ASSERT_EQ(tokens.size(), 2u);
  ASSERT_EQ(masks.size(), 2u);
  EXPECT_EQ(masks[0], std::vector<int32_t>(5, 1)); // text: all tokens train
  std::string rendered = Llama3ChatTemplate::render(
      {{"system", "be kind"}, {"user", " hi "}, {"assistant", "hello"}});
  EXPECT_EQ(tokens[1], *f.tokenizer.encode(rendered));
  // Loss only on the assistant's "hello" and its <|eot_id|>.
  std::string trained;
  for (size_t i = 0; i < tokens[1].size(); ++i)
    if (masks[1][i])
      trained += *f.tokenizer.decode({tokens[1][i]});
  EXPECT_EQ(trained, "hello<|eot_id|>");
}

TEST(Preprocess, ReadsGzipInput) {
  Fixture f = makeFixture();
  gzFile out = gzopen((f.dir + "/in.jsonl.gz").c_str(), "wb");
  std::string jsonl = "{\"text\": \"hello\"}\n{\"text\": \"hell\"}\n";
  gzwrite(out, jsonl.data(), static_cast<unsigned>(jsonl.size()));
  gzclose(out);
  StatusOr<PreprocessResult> result =
      preprocessJsonl(optionsFor(f, "in.jsonl.gz"));
  ASSERT_TRUE(result) << result.status().message();
  std::vector<std::vector<int32_t>> tokens = readAll(f.dir + "/out");
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_EQ(tokens[0], *f.tokenizer.encode("hello"));
}

TEST(Preprocess, ReportsMissingInputsByName) {
  Fixture f = makeFixture();
  PreprocessOptions options = optionsFor(f, "absent.jsonl");
  StatusOr<PreprocessResult> result = preprocessJsonl(options);
  ASSERT_FALSE(result);
  EXPECT_NE(result.status().message().find("absent.jsonl"), std::string::npos);
  testutil::writeFile(f.dir + "/in.jsonl", "{\"text\": \"x\"}\n");
  options = optionsFor(f, "in.jsonl");
  options.eodToken = "<|nope|>";
  options.appendEod = true;
  result = preprocessJsonl(options);
  ASSERT_FALSE(result);
  EXPECT_NE(result.status().message().find("--eod-token: \"<|nope|>\""),
            std::string::npos);
}
