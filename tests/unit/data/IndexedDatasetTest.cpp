#include "runtime/data/IndexedDataset.h"
#include "tests/unit/data/TestUtil.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>

using namespace octet;
using namespace octet::data;

namespace {

// A reader written from the format description alone (Megatron-LM's
// MMIDIDX v1), sharing no code with the library: it parses the little-endian
// fields one by one from a byte string.
struct IndependentIndex {
  uint64_t version = 0;
  uint8_t dtypeCode = 0;
  std::vector<int32_t> sizes;
  std::vector<int64_t> pointers;
  std::vector<int64_t> docIdx;
};

uint64_t readLe(const std::string &bytes, size_t &pos, int width) {
  uint64_t value = 0;
  for (int i = 0; i < width; ++i)
    value |= uint64_t(static_cast<uint8_t>(bytes.at(pos + i))) << (8 * i);
  pos += width;
  return value;
}

IndependentIndex parseIndependently(const std::string &idx) {
  IndependentIndex index;
  EXPECT_EQ(idx.substr(0, 9), std::string("MMIDIDX\0\0", 9));
  size_t pos = 9;
  index.version = readLe(idx, pos, 8);
  index.dtypeCode = static_cast<uint8_t>(readLe(idx, pos, 1));
  uint64_t sequences = readLe(idx, pos, 8);
  uint64_t documents = readLe(idx, pos, 8);
  for (uint64_t i = 0; i < sequences; ++i)
    index.sizes.push_back(static_cast<int32_t>(readLe(idx, pos, 4)));
  for (uint64_t i = 0; i < sequences; ++i)
    index.pointers.push_back(static_cast<int64_t>(readLe(idx, pos, 8)));
  for (uint64_t i = 0; i < documents; ++i)
    index.docIdx.push_back(static_cast<int64_t>(readLe(idx, pos, 8)));
  EXPECT_EQ(pos, idx.size()) << "trailing bytes after doc_idx";
  return index;
}

std::string buildIndexIndependently(uint8_t dtypeCode,
                                    const std::vector<int32_t> &sizes,
                                    const std::vector<int64_t> &docIdx,
                                    int itemSize) {
  std::string out("MMIDIDX\0\0", 9);
  auto put = [&](uint64_t value, int width) {
    for (int i = 0; i < width; ++i)
      out += static_cast<char>((value >> (8 * i)) & 0xFF);
  };
  put(1, 8);
  put(dtypeCode, 1);
  put(sizes.size(), 8);
  put(docIdx.size(), 8);
  for (int32_t s : sizes)
    put(static_cast<uint32_t>(s), 4);
  int64_t pointer = 0;
  for (int32_t s : sizes) {
    put(static_cast<uint64_t>(pointer), 8);
    pointer += int64_t(s) * itemSize;
  }
  for (int64_t d : docIdx)
    put(static_cast<uint64_t>(d), 8);
  return out;
}

void writeDataset(const std::string &prefix, TokenDType dtype,
                  const std::vector<std::vector<int32_t>> &sequences,
                  const std::vector<size_t> &documentEnds) {
  StatusOr<IndexedDatasetWriter> writer =
      IndexedDatasetWriter::create(prefix, dtype);
  ASSERT_TRUE(writer) << writer.status().message();
  size_t next = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    ASSERT_TRUE(writer->addSequence(sequences[i]));
    if (next < documentEnds.size() && documentEnds[next] == i + 1) {
      writer->endDocument();
      ++next;
    }
  }
  Status s = writer->finalize();
  ASSERT_TRUE(s) << s.message();
}

} // namespace

TEST(IndexedDataset, WritesBytesAnIndependentReaderUnderstands) {
  std::string dir = testutil::makeTempDir("idx");
  std::vector<std::vector<int32_t>> sequences = {
      {1, 2, 3}, {65535, 0}, {}, {7, 8, 9, 10, 11}};
  writeDataset(dir + "/d", TokenDType::UInt16, sequences, {2, 4});

  IndependentIndex index =
      parseIndependently(testutil::readFile(dir + "/d.idx"));
  EXPECT_EQ(index.version, 1u);
  EXPECT_EQ(index.dtypeCode, 8); // uint16
  EXPECT_EQ(index.sizes, (std::vector<int32_t>{3, 2, 0, 5}));
  EXPECT_EQ(index.pointers, (std::vector<int64_t>{0, 6, 10, 10}));
  EXPECT_EQ(index.docIdx, (std::vector<int64_t>{0, 2, 4}));

  std::string bin = testutil::readFile(dir + "/d.bin");
  ASSERT_EQ(bin.size(), 20u);
  size_t pos = 0;
  for (const auto &sequence : sequences)
    for (int32_t token : sequence)
      EXPECT_EQ(readLe(bin, pos, 2), static_cast<uint64_t>(token));
}

TEST(IndexedDataset, ReadsAnIndependentlyBuiltDataset) {
  std::string dir = testutil::makeTempDir("idx");
  std::vector<int32_t> sizes = {2, 1, 3};
  testutil::writeFile(dir + "/x.idx",
                      buildIndexIndependently(4, sizes, {0, 1, 3}, 4));
  std::string bin;
  for (int32_t v : {-5, 100000, 42, 1, 2, 3})
    bin.append(reinterpret_cast<const char *>(&v), 4);
  testutil::writeFile(dir + "/x.bin", bin);

  StatusOr<IndexedDataset> dataset = IndexedDataset::open(dir + "/x");
  ASSERT_TRUE(dataset) << dataset.status().message();
  EXPECT_EQ(dataset->dtype(), TokenDType::Int32);
  EXPECT_EQ(dataset->sequenceCount(), 3u);
  EXPECT_EQ(dataset->documentCount(), 2u);
  EXPECT_EQ(dataset->documentBoundary(1), 1u);
  EXPECT_EQ(dataset->totalTokens(), 6u);
  std::vector<int32_t> tokens;
  dataset->readSequence(0, tokens);
  EXPECT_EQ(tokens, (std::vector<int32_t>{-5, 100000}));
  dataset->readSequence(2, tokens);
  EXPECT_EQ(tokens, (std::vector<int32_t>{1, 2, 3}));
}

TEST(IndexedDataset, RoundTripsEachIntegerDType) {
  std::string dir = testutil::makeTempDir("idx");
  struct Case {
    TokenDType dtype;
    std::vector<int32_t> values;
  };
  std::vector<Case> cases = {
      {TokenDType::UInt8, {0, 255, 1}},
      {TokenDType::Int8, {-128, 127}},
      {TokenDType::Int16, {-32768, 32767}},
      {TokenDType::UInt16, {0, 65535}},
      {TokenDType::Int32, {INT32_MIN, INT32_MAX}},
      {TokenDType::Int64, {-1, 1 << 30}},
  };
  for (const Case &c : cases) {
    std::string prefix = dir + "/" + tokenDTypeName(c.dtype);
    writeDataset(prefix, c.dtype, {c.values}, {1});
    StatusOr<IndexedDataset> dataset = IndexedDataset::open(prefix);
    ASSERT_TRUE(dataset) << dataset.status().message();
    std::vector<int32_t> back;
    dataset->readSequence(0, back);
    EXPECT_EQ(back, c.values) << tokenDTypeName(c.dtype);
  }
  EXPECT_EQ(tokenDTypeForVocab(32000), TokenDType::UInt16);
  EXPECT_EQ(tokenDTypeForVocab(128256), TokenDType::Int32);
}

TEST(IndexedDataset, RefusesValuesThatDoNotFitTheDType) {
  std::string dir = testutil::makeTempDir("idx");
  StatusOr<IndexedDatasetWriter> writer =
      IndexedDatasetWriter::create(dir + "/d", TokenDType::UInt16);
  ASSERT_TRUE(writer);
  Status s = writer->addSequence(std::vector<int32_t>{70000});
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("70000 does not fit dtype uint16"),
            std::string::npos);
}

TEST(IndexedDataset, AnUnfinishedWriterLeavesNothingBehind) {
  std::string dir = testutil::makeTempDir("idx");
  writeDataset(dir + "/d", TokenDType::Int32, {{1, 2}}, {1});
  std::string oldIdx = testutil::readFile(dir + "/d.idx");
  {
    StatusOr<IndexedDatasetWriter> writer =
        IndexedDatasetWriter::create(dir + "/d", TokenDType::Int32);
    ASSERT_TRUE(writer);
    ASSERT_TRUE(writer->addSequence(std::vector<int32_t>{9, 9, 9}));
    // Destroyed without finalize(), as when preprocessing fails midway.
  }
  EXPECT_EQ(testutil::listDirectory(dir),
            (std::vector<std::string>{"d.bin", "d.idx"}));
  EXPECT_EQ(testutil::readFile(dir + "/d.idx"), oldIdx);
}

TEST(IndexedDataset, ReportsCorruptFilesClearly) {
  std::string dir = testutil::makeTempDir("idx");
  writeDataset(dir + "/good", TokenDType::Int32, {{1, 2, 3}, {4}}, {1, 2});
  std::string idx = testutil::readFile(dir + "/good.idx");
  std::string bin = testutil::readFile(dir + "/good.bin");

  struct Case {
    std::string name, idx, bin, expected;
  };
  auto patched = [&](size_t offset, std::string bytes) {
    std::string copy = idx;
    copy.replace(offset, bytes.size(), bytes);
    return copy;
  };
  std::vector<Case> cases = {
      {"truncated_bin", idx, bin.substr(0, 10), "the .bin is truncated"},
      {"extra_bin", idx, bin + "xxxx", "extra bytes"},
      {"magic", patched(0, "NOTMMIDX"), bin, "bad magic"},
      {"version", patched(9, std::string("\x02", 1)), bin, "version 2"},
      {"dtype", patched(17, std::string("\x09", 1)), bin,
       "unknown dtype code 9"},
      {"count", patched(18, std::string("\xFF\xFF\xFF\xFF", 4)), bin,
       "does not match its header"},
      {"short", idx.substr(0, 20), bin, "too short"},
      {"truncated_idx", idx.substr(0, idx.size() - 3), bin,
       "does not match its header"},
      {"pointer", patched(34 + 8 + 8, std::string("\x07", 1)), bin,
       "sequence 1 starts at byte 7"},
      {"negative", patched(34, std::string("\xFF\xFF\xFF\xFF", 4)), bin,
       "negative length"},
      {"docidx", patched(idx.size() - 16, std::string("\x05", 1)), bin,
       "document boundary"},
  };
  for (const Case &c : cases) {
    std::string prefix = dir + "/" + c.name;
    testutil::writeFile(prefix + ".idx", c.idx);
    testutil::writeFile(prefix + ".bin", c.bin);
    StatusOr<IndexedDataset> dataset = IndexedDataset::open(prefix);
    ASSERT_FALSE(dataset) << c.name;
    EXPECT_NE(dataset.status().message().find(c.expected), std::string::npos)
        << c.name << ": " << dataset.status().message();
    EXPECT_NE(dataset.status().message().find(prefix + ".idx"),
              std::string::npos)
        << c.name;
  }
  StatusOr<IndexedDataset> missing = IndexedDataset::open(dir + "/absent");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("absent.idx"), std::string::npos);
}
