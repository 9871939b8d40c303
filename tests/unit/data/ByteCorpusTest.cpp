#include "runtime/data/ByteCorpus.h"
#include "tests/unit/data/TestUtil.h"

#include <gtest/gtest.h>

using namespace octet;
using namespace octet::data;

namespace {

std::string sampleText(size_t size) {
  std::string text;
  for (size_t i = 0; text.size() < size; ++i)
    text += "line " + std::to_string(i * 31 % 997) + " of the corpus.\n";
  text.resize(size);
  return text;
}

} // namespace

TEST(ByteCorpus, TrainBatchesAreWindowsOfTheTrainSplitFixedBySeedAndStep) {
  ByteCorpus::Options options;
  options.batchSize = 4;
  options.sequenceLength = 32;
  options.evalFraction = 0.1;
  options.seed = 3;
  std::string text = sampleText(10000);
  StatusOr<ByteCorpus> corpus = ByteCorpus::fromBytes(text, options);
  ASSERT_TRUE(corpus) << corpus.status().message();
  EXPECT_EQ(corpus->trainBytes(), 9000u);
  std::vector<int32_t> batch, again, other;
  corpus->trainBatch(7, batch);
  corpus->trainBatch(7, again);
  corpus->trainBatch(8, other);
  ASSERT_EQ(batch.size(), 4u * 33);
  EXPECT_EQ(batch, again);
  EXPECT_NE(batch, other);
  for (uint32_t row = 0; row < 4; ++row) {
    std::string window;
    for (uint32_t i = 0; i < 33; ++i) {
      int32_t token = batch[row * 33 + i];
      ASSERT_GE(token, 0);
      ASSERT_LT(token, ByteCorpus::kVocabSize);
      window += static_cast<char>(token);
    }
    size_t at = text.find(window);
    ASSERT_NE(at, std::string::npos);
    EXPECT_LE(at + 33, 9000u) << "a training window reaches eval text";
  }
  options.seed = 4;
  StatusOr<ByteCorpus> reseeded = ByteCorpus::fromBytes(text, options);
  ASSERT_TRUE(reseeded);
  reseeded->trainBatch(7, other);
  EXPECT_NE(batch, other);
}

TEST(ByteCorpus, TrainRowsDoNotDependOnTheBatchSize) {
  // A global batch of 4 rows is the same data as two microbatches of 2:
  // data parallelism and accumulation cut it without changing it.
  std::string text = sampleText(10000);
  ByteCorpus::Options four;
  four.batchSize = 4;
  four.sequenceLength = 16;
  ByteCorpus::Options two = four;
  two.batchSize = 2;
  StatusOr<ByteCorpus> a = ByteCorpus::fromBytes(text, four);
  StatusOr<ByteCorpus> b = ByteCorpus::fromBytes(text, two);
  ASSERT_TRUE(a && b);
  std::vector<int32_t> whole, first, second;
  a->trainBatch(3, whole);
  b->trainBatch(6, first);
  b->trainBatch(7, second);
  first.insert(first.end(), second.begin(), second.end());
  EXPECT_EQ(whole, first);
  EXPECT_NE(std::vector<int32_t>(whole.begin(), whole.begin() + 17),
            std::vector<int32_t>(whole.begin() + 17, whole.begin() + 34))
      << "two rows of a batch are the same window";
}

TEST(ByteCorpus, EvalBatchesCoverTheEvalSplitInOrder) {
  ByteCorpus::Options options;
  options.batchSize = 2;
  options.sequenceLength = 9;
  options.evalFraction = 0.2;
  std::string text = sampleText(1000);
  StatusOr<ByteCorpus> corpus = ByteCorpus::fromBytes(text, options);
  ASSERT_TRUE(corpus);
  EXPECT_EQ(corpus->evalBatchCount(), 10u); // 200 bytes / 10 / 2
  std::vector<int32_t> batch;
  corpus->evalBatch(1, batch);
  std::string expected = text.substr(800 + 20, 20);
  std::string got;
  for (int32_t t : batch)
    got += static_cast<char>(t);
  EXPECT_EQ(got, expected);
}

TEST(ByteCorpus, RefusesCorporaTooSmallForTheWindows) {
  ByteCorpus::Options options;
  options.sequenceLength = 512;
  StatusOr<ByteCorpus> corpus =
      ByteCorpus::fromBytes(sampleText(4000), options);
  ASSERT_FALSE(corpus);
  EXPECT_NE(corpus.status().message().find("too few"), std::string::npos);
  StatusOr<ByteCorpus> missing = ByteCorpus::open("/nonexistent/c.txt", {});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("scripts/make-corpus.sh"),
            std::string::npos);
}

TEST(ByteCorpus, LoadsTheShippedCorpusWhenBuilt) {
  std::string path = std::string(OCTET_SOURCE_DIR) + "/data/corpus.txt";
  if (!testutil::fileExists(path))
    GTEST_SKIP() << path << " is not built; run scripts/make-corpus.sh";
  ByteCorpus::Options options;
  options.sequenceLength = 256;
  StatusOr<ByteCorpus> corpus = ByteCorpus::open(path, options);
  ASSERT_TRUE(corpus) << corpus.status().message();
  EXPECT_GT(corpus->trainBytes(), 1000000u);
  std::vector<int32_t> batch;
  corpus->trainBatch(0, batch);
  EXPECT_EQ(batch.size(), options.batchSize * 257u);
}

// A binary file given as a text corpus trains as bytes, so the one sign of
// the mistake is a warning on stderr naming the file and what looked
// non-text; text (tabs, newlines, UTF-8) gets none.
TEST(ByteCorpus, WarnsWhenTheFileDoesNotLookLikeText) {
  std::string text = sampleText(8000) + "\tcaf\xc3\xa9 \xe2\x80\x94 done\r\n";
  EXPECT_EQ(ByteCorpus::nonTextWarning("t.txt", text), "");

  std::string binary = sampleText(8000);
  for (size_t i = 0; i < binary.size(); i += 4)
    binary[i] = '\0';
  std::string warning = ByteCorpus::nonTextWarning("m.bin", binary);
  EXPECT_NE(warning.find("m.bin does not look like text: 25.0% of its "
                         "first 8000 bytes are NUL (2000)"),
            std::string::npos)
      << warning;
  // One NUL is enough; a few stray control bytes are not.
  std::string oneNul = sampleText(8000);
  oneNul[100] = '\0';
  EXPECT_NE(ByteCorpus::nonTextWarning("n.txt", oneNul), "");
  std::string fewControls = sampleText(8000);
  fewControls[10] = '\x1b';
  fewControls[20] = '\x07';
  EXPECT_EQ(ByteCorpus::nonTextWarning("c.txt", fewControls), "");

  // open() prints it, and trains all the same.
  std::string dir = testutil::makeTempDir("bytecorpus-binary");
  testutil::writeFile(dir + "/model.bin", binary);
  ByteCorpus::Options options;
  options.sequenceLength = 64;
  ::testing::internal::CaptureStderr();
  StatusOr<ByteCorpus> corpus = ByteCorpus::open(dir + "/model.bin", options);
  std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(corpus) << corpus.status().message();
  EXPECT_NE(err.find("warning: " + dir + "/model.bin does not look like text"),
            std::string::npos)
      << err;
  testutil::writeFile(dir + "/text.txt", text);
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(ByteCorpus::open(dir + "/text.txt", options));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}
