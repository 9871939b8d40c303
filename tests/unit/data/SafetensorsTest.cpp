#include "hf/Safetensors.h"
#include "tests/unit/data/TestUtil.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>

using namespace octet;
using namespace octet::hf;

namespace {

std::vector<uint8_t> patternBytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i)
    bytes[i] = static_cast<uint8_t>(seed + i * 37);
  return bytes;
}

std::vector<NamedTensor> sampleTensors() {
  std::vector<NamedTensor> tensors;
  struct Spec {
    const char *name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  Spec specs[] = {
      {"model.embed_tokens.weight", DType::BF16, {16, 8}},
      {"f32", DType::F32, {3, 5}},
      {"f16", DType::F16, {7}},
      {"e4m3", DType::F8E4M3FN, {4, 4}},
      {"e5m2", DType::F8E5M2, {9}},
      {"i32", DType::I32, {2, 2}},
      {"i64", DType::I64, {3}},
      {"scalar", DType::F32, {}},
      {"empty", DType::F32, {0, 4}},
  };
  uint8_t seed = 1;
  for (const Spec &s : specs) {
    uint64_t elements = 1;
    for (int64_t d : s.shape)
      elements *= d;
    tensors.push_back({s.name, s.dtype, s.shape,
                       patternBytes(elements * dtypeBytes(s.dtype), seed++)});
  }
  return tensors;
}

void expectSameTensors(const CheckpointReader &reader,
                       const std::vector<NamedTensor> &tensors) {
  EXPECT_EQ(reader.tensorNames().size(), tensors.size());
  for (const NamedTensor &t : tensors) {
    const TensorInfo *info = reader.find(t.name);
    ASSERT_NE(info, nullptr) << t.name;
    EXPECT_EQ(info->dtype, t.dtype) << t.name;
    EXPECT_EQ(info->shape, t.shape) << t.name;
    StatusOr<std::vector<uint8_t>> data = reader.readTensor(t.name);
    ASSERT_TRUE(data) << data.status().message();
    EXPECT_EQ(*data, t.data) << t.name;
  }
}

// A file made of an 8-byte length, a header and `dataSize` bytes.
std::string fileWithHeader(const std::string &header, size_t dataSize,
                           uint64_t claimedLength = UINT64_MAX) {
  uint64_t length = claimedLength == UINT64_MAX ? header.size() : claimedLength;
  std::string file(reinterpret_cast<const char *>(&length), 8);
  file += header;
  file.append(dataSize, '\x11');
  return file;
}

} // namespace

TEST(Safetensors, RoundTripsEveryDTypeBitForBit) {
  std::string dir = testutil::makeTempDir("st");
  std::vector<NamedTensor> tensors = sampleTensors();
  Status s = writeCheckpoint(dir, tensors);
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(testutil::listDirectory(dir),
            (std::vector<std::string>{"model.safetensors"}));
  StatusOr<CheckpointReader> reader = CheckpointReader::open(dir);
  ASSERT_TRUE(reader) << reader.status().message();
  expectSameTensors(*reader, tensors);

  StatusOr<SafetensorsFile> file =
      SafetensorsFile::open(dir + "/model.safetensors");
  ASSERT_TRUE(file);
  EXPECT_EQ(file->header().metadata.at("format"), "pt");
  EXPECT_EQ(file->header().dataStart % 8, 0u) << "data must be 8-aligned";
}

TEST(Safetensors, ShardsWithAnIndexAndReadsThemBack) {
  std::string dir = testutil::makeTempDir("st");
  std::vector<NamedTensor> tensors = sampleTensors();
  ASSERT_TRUE(writeCheckpoint(dir, tensors, /*maxShardBytes=*/100));
  std::vector<std::string> files = testutil::listDirectory(dir);
  ASSERT_GT(files.size(), 2u);
  EXPECT_EQ(files.back(), "model.safetensors.index.json");
  nlohmann::json index =
      nlohmann::json::parse(testutil::readFile(dir + "/" + files.back()));
  EXPECT_EQ(index["weight_map"]["f32"], "model-00002-of-0000" +
                                            std::to_string(files.size() - 1) +
                                            ".safetensors");
  uint64_t total = 0;
  for (const NamedTensor &t : tensors)
    total += t.data.size();
  EXPECT_EQ(index["metadata"]["total_size"], total);
  for (const std::string &path : {dir, dir + "/" + files.back()}) {
    StatusOr<CheckpointReader> reader = CheckpointReader::open(path);
    ASSERT_TRUE(reader) << reader.status().message();
    expectSameTensors(*reader, tensors);
  }
  // Saving it again unsharded removes the index that would shadow it.
  ASSERT_TRUE(writeCheckpoint(dir, tensors));
  EXPECT_FALSE(testutil::fileExists(dir + "/model.safetensors.index.json"));
  StatusOr<CheckpointReader> reader = CheckpointReader::open(dir);
  ASSERT_TRUE(reader);
  expectSameTensors(*reader, tensors);
}

TEST(Safetensors, RefusesAnIndexThatLies) {
  std::string dir = testutil::makeTempDir("st");
  ASSERT_TRUE(writeCheckpoint(dir, sampleTensors(), 100));
  std::string indexPath = dir + "/model.safetensors.index.json";
  nlohmann::json index = nlohmann::json::parse(testutil::readFile(indexPath));
  struct Case {
    std::string tensor, file, expected;
  };
  std::vector<Case> cases = {
      {"f32", "model-00001-of-00003.safetensors", "does not hold it"},
      {"ghost", "model-00001-of-00003.safetensors", "does not hold it"},
      {"f32", "../escape.safetensors", "not a file beside the index"},
      {"f32", "missing.safetensors", "missing.safetensors"},
  };
  for (const Case &c : cases) {
    nlohmann::json copy = index;
    copy["weight_map"][c.tensor] = c.file;
    testutil::writeFile(indexPath, copy.dump());
    StatusOr<CheckpointReader> reader = CheckpointReader::open(dir);
    ASSERT_FALSE(reader) << c.file;
    EXPECT_NE(reader.status().message().find(c.expected), std::string::npos)
        << reader.status().message();
  }
  StatusOr<CheckpointReader> none =
      CheckpointReader::open(testutil::makeTempDir("empty"));
  ASSERT_FALSE(none);
  EXPECT_NE(none.status().message().find("neither model.safetensors"),
            std::string::npos);
}

TEST(Safetensors, RefusesEveryKindOfLyingHeader) {
  const std::string good =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]}})";
  ASSERT_TRUE(parseSafetensorsHeader(
      reinterpret_cast<const uint8_t *>(fileWithHeader(good, 12).data()),
      8 + good.size() + 12, 8 + good.size() + 12, "ok"));

  struct Case {
    std::string name, file, expected;
  };
  auto header = [](const std::string &a, const std::string &b) {
    return "{\"a\":" + a + ",\"b\":" + b + "}";
  };
  const std::string b =
      R"({"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]})";
  std::vector<Case> cases = {
      {"empty file", "", "shorter than the 8-byte header length"},
      {"short file", "abc", "shorter than the 8-byte header length"},
      {"length past end", fileWithHeader(good, 12, 1000), "claims 1000 bytes"},
      {"huge length", fileWithHeader(good, 12, UINT64_MAX - 1),
       "claims 18446744073709551614 bytes"},
      {"not json", fileWithHeader("{nope", 0), "not a JSON object"},
      {"json array", fileWithHeader("[1,2]", 0), "not a JSON object"},
      {"tensor not object", fileWithHeader(header("3", b), 12),
       "tensor \"a\" is not an object"},
      {"no dtype",
       fileWithHeader(header(R"({"shape":[2],"data_offsets":[0,8]})", b), 12),
       "no dtype"},
      {"unknown dtype",
       fileWithHeader(
           header(R"({"dtype":"F4","shape":[2],"data_offsets":[0,8]})", b), 12),
       "unknown dtype \"F4\""},
      {"negative shape",
       fileWithHeader(
           header(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})", b),
           12),
       "shape entry that is not a non-negative integer"},
      {"overflowing shape",
       fileWithHeader(
           header(
               R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})",
               b),
           12),
       "overflows"},
      {"size mismatch",
       fileWithHeader(
           header(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})", b),
           12),
       "spans 8 bytes but its shape and dtype need 12"},
      {"reversed offsets",
       fileWithHeader(
           header(R"({"dtype":"F32","shape":[0],"data_offsets":[8,0]})", b),
           12),
       "begin after end"},
      {"past the data",
       fileWithHeader(
           header(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})",
                  R"({"dtype":"BF16","shape":[1,2],"data_offsets":[12,16]})"),
           12),
       "past its end"},
      {"overlap",
       fileWithHeader(
           header(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})",
                  R"({"dtype":"BF16","shape":[1,2],"data_offsets":[6,10]})"),
           12),
       "tensors overlap"},
      {"gap",
       fileWithHeader(
           header(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})",
                  R"({"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]})"),
           12),
       "a gap in the data"},
      {"trailing data", fileWithHeader(good, 20),
       "cover 12 bytes of data but the file holds 20"},
      {"truncated data", fileWithHeader(good, 10), "past its end"},
      {"bad offsets type",
       fileWithHeader(
           header(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})", b), 12),
       "no data_offsets"},
      {"metadata not strings", fileWithHeader(R"({"__metadata__":{"k":1}})", 0),
       "__metadata__[\"k\"]"},
  };
  std::string dir = testutil::makeTempDir("st");
  for (const Case &c : cases) {
    std::string path = dir + "/bad.safetensors";
    testutil::writeFile(path, c.file);
    StatusOr<SafetensorsFile> file = SafetensorsFile::open(path);
    ASSERT_FALSE(file) << c.name;
    EXPECT_NE(file.status().message().find(c.expected), std::string::npos)
        << c.name << ": " << file.status().message();
    EXPECT_NE(file.status().message().find(path), std::string::npos) << c.name;
  }
}

TEST(Safetensors, AFailedSaveKeepsTheLastGoodCheckpoint) {
  std::string dir = testutil::makeTempDir("st");
  std::vector<NamedTensor> tensors = sampleTensors();
  ASSERT_TRUE(writeCheckpoint(dir, tensors));
  std::string good = testutil::readFile(dir + "/model.safetensors");

  // A save that fails partway (a tensor whose bytes do not match its shape)
  // must not touch the file.
  std::vector<NamedTensor> broken = tensors;
  broken.back().shape = {3};
  Status s = writeCheckpoint(dir, broken);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("tensor \"empty\""), std::string::npos);
  // A writer abandoned before commit leaves no temporary file either.
  {
    StatusOr<AtomicFileWriter> writer =
        AtomicFileWriter::create(dir + "/model.safetensors");
    ASSERT_TRUE(writer);
    ASSERT_TRUE(writer->write("partial"));
  }
  EXPECT_EQ(testutil::readFile(dir + "/model.safetensors"), good);
  EXPECT_EQ(testutil::listDirectory(dir),
            (std::vector<std::string>{"model.safetensors"}));

  Status missingDir = writeCheckpoint(dir + "/nope", tensors);
  ASSERT_FALSE(missingDir);
  EXPECT_NE(missingDir.message().find("does not exist"), std::string::npos);
}
