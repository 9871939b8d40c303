#ifndef OCTET_RUNTIME_DATA_INDEXEDDATASET_H
#define OCTET_RUNTIME_DATA_INDEXEDDATASET_H

// Megatron-LM's indexed dataset: PREFIX.bin holds the tokens of every
// sequence back to back; PREFIX.idx (format MMIDIDX, version 1) holds, all
// little-endian:
//   magic "MMIDIDX\0\0" (9 bytes), version u64 = 1, dtype code u8,
//   sequence count u64, document count u64,
//   sequence lengths int32[sequence count] (in tokens),
//   sequence byte offsets into .bin int64[sequence count],
//   document boundaries int64[document count] (0, then the index of the
//   sequence after each document's last one).

#include "support/Status.h"
#include "support/AtomicFile.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace octet::data {

// Megatron's dtype codes.
enum class TokenDType : uint8_t {
  UInt8 = 1,
  Int8 = 2,
  Int16 = 3,
  Int32 = 4,
  Int64 = 5,
  Float64 = 6,
  Float32 = 7,
  UInt16 = 8,
};

// Bytes per element, or 0 for a code Megatron does not define.
size_t tokenDTypeSize(uint8_t code);
const char *tokenDTypeName(TokenDType dtype);
// The dtype Megatron picks for a vocabulary: uint16 below 65500, else int32.
TokenDType tokenDTypeForVocab(int64_t vocabSize);

constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
constexpr size_t kIndexHeaderSize = 9 + 8 + 1 + 8 + 8;

class IndexedDatasetWriter {
public:
  // Only integer dtypes: the values are token ids or masks.
  static StatusOr<IndexedDatasetWriter> create(const std::string &prefix,
                                               TokenDType dtype);

  // Appends one sequence; each value must fit the dtype.
  Status addSequence(const int32_t *values, size_t count);
  Status addSequence(const std::vector<int32_t> &values) {
    return addSequence(values.data(), values.size());
  }
  // Closes the current document after the sequences added since the last.
  void endDocument();
  // Writes the index and moves both files into place; until then the
  // previous files at PREFIX (if any) are untouched.
  Status finalize();

  size_t sequenceCount() const { return lengths_.size(); }
  const std::vector<int32_t> &sequenceLengths() const { return lengths_; }

private:
  IndexedDatasetWriter(std::string prefix, TokenDType dtype,
                       AtomicFileWriter bin, AtomicFileWriter idx);

  std::string prefix_;
  TokenDType dtype_;
  std::optional<AtomicFileWriter> bin_, idx_;
  std::vector<int32_t> lengths_;
  std::vector<int64_t> documentEnds_{0};
  std::vector<char> scratch_;
};

// A read-only view of PREFIX.bin/.idx through memory maps, validated on open
// so that no later access can fall outside either file.
class IndexedDataset {
public:
  static StatusOr<IndexedDataset> open(const std::string &prefix);

  TokenDType dtype() const { return dtype_; }
  size_t sequenceCount() const { return sequenceCount_; }
  // Documents, not counting the leading 0 boundary.
  size_t documentCount() const { return documentCount_ - 1; }
  uint32_t sequenceLength(size_t index) const;
  uint64_t sequenceByteOffset(size_t index) const;
  // Index of the first sequence of document `index`; index ==
  // documentCount() gives sequenceCount().
  uint64_t documentBoundary(size_t index) const;
  // The tokens of one sequence, converted to int32 (integer dtypes only).
  void readSequence(size_t index, std::vector<int32_t> &out) const;
  uint64_t totalTokens() const { return totalTokens_; }

private:
  IndexedDataset() = default;
  std::shared_ptr<MappedFile> idx_, bin_;
  TokenDType dtype_ = TokenDType::Int32;
  size_t itemSize_ = 4;
  uint64_t sequenceCount_ = 0, documentCount_ = 0, totalTokens_ = 0;
  const uint8_t *lengths_ = nullptr, *offsets_ = nullptr,
                *boundaries_ = nullptr;
};

// Validates an index image (the contents of a .idx) against the size of its
// .bin; `name` is used in errors. Shared by the reader and the fuzz target.
Status validateIndex(const uint8_t *data, uint64_t size, uint64_t binSize,
                     const std::string &name);

} // namespace octet::data

#endif
