// TensorBoard event files: the runtime's writer read back by a reader that
// checks every CRC, the CRC-32C against its published check value, and the
// scalars a training run writes.

#include "runtime/metrics/EventFile.h"
#include "runtime/exec/Trainer.h"
#include "runtime/metrics/Crc32c.h"
#include "tests/unit/trainer/ToyBackend.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <fstream>
#include <set>

namespace octet::test {
namespace {

std::vector<std::string> eventFiles(const std::string &dir) {
  std::vector<std::string> out;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d))
      if (std::string(e->d_name).rfind("events.out.tfevents.", 0) == 0)
        out.push_back(dir + "/" + e->d_name);
    closedir(d);
  }
  return out;
}

TEST(Crc32c, MatchesTheCheckValue) {
  // RFC 3720's CRC-32C check value of "123456789".
  EXPECT_EQ(metrics::crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(metrics::crc32c("", 0), 0u);
  // TFRecord's mask: rotate right by 15, add 0xa282ead8.
  EXPECT_EQ(metrics::maskCrc(0), 0xa282ead8u);
  EXPECT_EQ(metrics::maskCrc(1), (1u << 17) + 0xa282ead8u);
}

TEST(EventFile, ScalarsReadBack) {
  std::string dir = freshTestDir("events-scalars");
  auto w = metrics::EventWriter::open(dir + "/run");
  ASSERT_TRUE(w.isOk()) << w.status().message();
  ASSERT_TRUE((*w)->scalars(1, {{"loss", 2.5}, {"lr", 3e-4}}).isOk());
  ASSERT_TRUE((*w)->scalars(2, {{"loss", 2.25}}).isOk());
  ASSERT_TRUE((*w)->flush().isOk());
  auto read = metrics::readEventFile((*w)->path());
  ASSERT_TRUE(read.isOk()) << read.status().message();
  EXPECT_EQ(read->fileVersion, "brain.Event:2");
  ASSERT_EQ(read->scalars.size(), 3u);
  EXPECT_EQ(read->scalars[0].tag, "loss");
  EXPECT_EQ(read->scalars[0].step, 1);
  EXPECT_EQ(read->scalars[0].value, 2.5f);
  EXPECT_EQ(read->scalars[1].tag, "lr");
  EXPECT_EQ(read->scalars[1].value, 3e-4f);
  EXPECT_EQ(read->scalars[2].step, 2);
  EXPECT_GT(read->scalars[2].wallTime, 1.6e9);
}

TEST(EventFile, ACorruptByteFailsItsCrc) {
  std::string dir = freshTestDir("events-corrupt");
  auto w = metrics::EventWriter::open(dir);
  ASSERT_TRUE(w.isOk()) << w.status().message();
  ASSERT_TRUE((*w)->scalars(7, {{"loss", 1.0}}).isOk());
  ASSERT_TRUE((*w)->flush().isOk());
  std::string path = (*w)->path();
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  // The last record's data, one byte before its trailing CRC.
  bytes[bytes.size() - 6] ^= 0x40;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
  }
  auto read = metrics::readEventFile(path);
  ASSERT_FALSE(read.isOk());
  EXPECT_NE(read.status().message().find("record 1"), std::string::npos)
      << read.status().message();
  EXPECT_NE(read.status().message().find("CRC"), std::string::npos);
}

TEST(EventFile, TrainingWritesTheStepScalars) {
  std::string dir = freshTestDir("events-train");
  ToyShape shape;
  shape.steps = 3;
  ToyBackend backend(makeToyBundle(shape));
  TrainDataOptions d;
  d.rows = uint32_t(shape.rows), d.sequenceLength = uint32_t(shape.seq);
  d.vocabSize = shape.vocab;
  auto data = TrainData::open(d);
  ASSERT_TRUE(data.isOk());
  TrainerOptions o;
  o.out = nullptr;
  o.tensorboardDir = dir;
  o.evalInterval = 3;
  auto t = Trainer::create(backend, **data, o);
  ASSERT_TRUE(t.isOk()) << t.status().message();
  auto result = (*t)->run();
  ASSERT_TRUE(result.isOk()) << result.status().message();
  t->reset();
  auto files = eventFiles(dir);
  ASSERT_EQ(files.size(), 1u);
  auto read = metrics::readEventFile(files[0]);
  ASSERT_TRUE(read.isOk()) << read.status().message();
  std::set<std::string> tags;
  for (const auto &s : read->scalars) {
    tags.insert(s.tag);
    if (s.tag == "loss")
      EXPECT_EQ(s.value, result->steps[size_t(s.step - 1)].loss);
  }
  for (const char *tag : {"loss", "grad_norm", "lr", "tokens_per_s", "mfu",
                          "mfu_fp8", "eval_loss"})
    EXPECT_TRUE(tags.count(tag)) << tag;
}

} // namespace
} // namespace octet::test
