// Step batches from each data kind: shapes, label alignment, loss masks and
// document boundaries as the forward graph expects them.

#include "runtime/data/TrainBatches.h"
#include "runtime/data/IndexedDataset.h"
#include "runtime/data/Preprocess.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

using namespace octet::data;

namespace {

std::string tempDir() {
  std::string pattern = ::testing::TempDir() + "octet-batches-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  EXPECT_NE(mkdtemp(buf.data()), nullptr);
  return buf.data();
}

void writeDataset(const std::string &prefix,
                  const std::vector<std::vector<int32_t>> &sequences) {
  auto writer = IndexedDatasetWriter::create(prefix, TokenDType::UInt16);
  ASSERT_TRUE(writer) << writer.status().message();
  for (const auto &s : sequences) {
    ASSERT_TRUE(writer->addSequence(s));
    writer->endDocument();
  }
  ASSERT_TRUE(writer->finalize());
}

TEST(TrainBatches, TextRowsAreDocumentsWithShiftedLabels) {
  std::string dir = tempDir();
  std::ofstream(dir + "/corpus.txt") << std::string(4000, 'x') + "hello";
  TrainBatchOptions o{"text", dir + "/corpus.txt", "", 2, 16, 7, 0.0, 16};
  auto source = openTrainBatches(o);
  ASSERT_TRUE(source) << source.status().message();
  PackedBatch b;
  ASSERT_TRUE((*source)->next(0, b));
  ASSERT_EQ(b.inputs.size(), 32u);
  EXPECT_EQ(b.cuSeqlens, (std::vector<int32_t>{0, 16, 32}));
  EXPECT_EQ(b.positionIds[16], 0);
  EXPECT_EQ(b.positionIds[31], 15);
  for (float m : b.lossMask)
    EXPECT_EQ(m, 1.0f);
  for (size_t i = 0; i + 1 < 16; ++i)
    EXPECT_EQ(b.targets[i], b.inputs[i + 1]);
}

TEST(TrainBatches, IndexedChatDataPacksWithTheLossMask) {
  std::string dir = tempDir();
  std::string prefix = dir + "/chats";
  // Three documents; the mask trains on the second half of each.
  std::vector<std::vector<int32_t>> docs = {
      {1, 2, 3, 4, 5, 6}, {7, 8, 9, 10}, {11, 12, 13, 14, 15, 16, 17, 18}};
  std::vector<std::vector<int32_t>> masks;
  for (const auto &d : docs) {
    std::vector<int32_t> m(d.size(), 0);
    for (size_t i = d.size() / 2; i < d.size(); ++i)
      m[i] = 1;
    masks.push_back(m);
  }
  writeDataset(prefix, docs);
  {
    auto writer = IndexedDatasetWriter::create(lossMaskPrefixFor(prefix),
                                               TokenDType::UInt8);
    ASSERT_TRUE(writer) << writer.status().message();
    for (const auto &m : masks) {
      ASSERT_TRUE(writer->addSequence(m));
      writer->endDocument();
    }
    ASSERT_TRUE(writer->finalize());
  }
  TrainBatchOptions o{"indexed", prefix, "", 1, 32, 3, 0.0, 16};
  auto source = openTrainBatches(o);
  ASSERT_TRUE(source) << source.status().message();
  EXPECT_NE((*source)->describe().find("loss mask"), std::string::npos);
  PackedBatch b;
  ASSERT_TRUE((*source)->next(0, b));
  ASSERT_EQ(b.inputs.size(), 32u);
  // All 18 tokens fit one row: three documents and the padding after them.
  ASSERT_EQ(b.cuSeqlens.size(), 5u);
  EXPECT_EQ(b.cuSeqlens.front(), 0);
  EXPECT_EQ(b.cuSeqlens.back(), 32);
  float trained = 0;
  for (size_t doc = 0; doc + 2 < b.cuSeqlens.size(); ++doc) {
    int32_t begin = b.cuSeqlens[doc], end = b.cuSeqlens[doc + 1];
    EXPECT_EQ(b.positionIds[begin], 0);
    // Nothing is predicted across the boundary.
    EXPECT_EQ(b.lossMask[end - 1], 0.0f);
    for (int32_t i = begin; i + 1 < end; ++i) {
      EXPECT_EQ(b.targets[i], b.inputs[i + 1]);
      trained += b.lossMask[i];
    }
  }
  // Each document trains on its masked targets: 3 + 2 + 4 tokens.
  EXPECT_EQ(trained, 9.0f);
}

TEST(TrainBatches, UnknownKindAndMissingDataAreErrors) {
  TrainBatchOptions o{"synthetic", "", "", 1, 16, 0, 0.0, 16};
  auto source = openTrainBatches(o);
  ASSERT_FALSE(source);
  EXPECT_NE(source.status().message().find("\"synthetic\""), std::string::npos);
  o.kind = "indexed";
  o.path = "/nonexistent/prefix";
  source = openTrainBatches(o);
  ASSERT_FALSE(source);
  EXPECT_NE(source.status().message().find("/nonexistent/prefix"),
            std::string::npos)
      << source.status().message();
}

TEST(TrainBatches, JsonlIsTokenizedWithTheChatTemplateAndPacked) {
  std::string dir = tempDir();
  std::string tokenizer =
      std::string(OCTET_SOURCE_DIR) + "/examples/sft/tokenizer.json";
  std::ofstream(dir + "/chats.jsonl")
      << R"({"messages": [{"role": "user", "content": "hi"}, )"
      << R"({"role": "assistant", "content": "yo"}]})"
      << "\n\n"
      << R"({"text": "plain"})"
      << "\n";
  TrainBatchOptions o{"jsonl", dir + "/chats.jsonl", tokenizer, 1, 64, 0, 0.0,
                      16};
  auto source = openTrainBatches(o);
  ASSERT_TRUE(source) << source.status().message();
  PackedBatch b;
  ASSERT_TRUE((*source)->next(0, b));
  // Trained targets: "yo" and <|eot_id|> of the chat, and the 5 bytes of
  // "plain" after <|begin_of_text|>.
  float trained = 0;
  for (float m : b.lossMask)
    trained += m;
  EXPECT_EQ(trained, 3.0f + 5.0f);
  EXPECT_EQ(b.cuSeqlens.size(), 4u); // two documents and the padding

  // A malformed line is reported with its number.
  std::ofstream(dir + "/bad.jsonl") << R"({"text": "ok"})"
                                    << "\n{\"text\": 3}\n";
  o.path = dir + "/bad.jsonl";
  source = openTrainBatches(o);
  ASSERT_FALSE(source);
  EXPECT_NE(source.status().message().find("bad.jsonl:2"), std::string::npos)
      << source.status().message();
}

} // namespace
