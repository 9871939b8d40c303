#include "runtime/data/IndexedDataset.h"

#include <cstring>

namespace octet::data {

namespace {

template <typename T> T loadLittleEndian(const uint8_t *p) {
  T value;
  std::memcpy(&value, p, sizeof(T)); // unaligned-safe; the host is LE
  return value;
}

template <typename T> void appendLittleEndian(std::vector<char> &out, T value) {
  const char *p = reinterpret_cast<const char *>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

bool isIntegerDType(TokenDType dtype) {
  return dtype != TokenDType::Float32 && dtype != TokenDType::Float64;
}

bool fitsDType(int32_t value, TokenDType dtype) {
  switch (dtype) {
  case TokenDType::UInt8:
    return value >= 0 && value <= 255;
  case TokenDType::Int8:
    return value >= -128 && value <= 127;
  case TokenDType::Int16:
    return value >= -32768 && value <= 32767;
  case TokenDType::UInt16:
    return value >= 0 && value <= 65535;
  default:
    return true;
  }
}

} // namespace

size_t tokenDTypeSize(uint8_t code) {
  switch (static_cast<TokenDType>(code)) {
  case TokenDType::UInt8:
  case TokenDType::Int8:
    return 1;
  case TokenDType::Int16:
  case TokenDType::UInt16:
    return 2;
  case TokenDType::Int32:
  case TokenDType::Float32:
    return 4;
  case TokenDType::Int64:
  case TokenDType::Float64:
    return 8;
  }
  return 0;
}

const char *tokenDTypeName(TokenDType dtype) {
  switch (dtype) {
  case TokenDType::UInt8:
    return "uint8";
  case TokenDType::Int8:
    return "int8";
  case TokenDType::Int16:
    return "int16";
  case TokenDType::Int32:
    return "int32";
  case TokenDType::Int64:
    return "int64";
  case TokenDType::Float64:
    return "float64";
  case TokenDType::Float32:
    return "float32";
  case TokenDType::UInt16:
    return "uint16";
  }
  return "unknown";
}

TokenDType tokenDTypeForVocab(int64_t vocabSize) {
  return vocabSize < 65500 ? TokenDType::UInt16 : TokenDType::Int32;
}

//===----------------------------------------------------------------------===//
// Writer
//===----------------------------------------------------------------------===//

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, TokenDType dtype,
                                           AtomicFileWriter bin,
                                           AtomicFileWriter idx)
    : prefix_(std::move(prefix)), dtype_(dtype) {
  bin_.emplace(std::move(bin));
  idx_.emplace(std::move(idx));
}

StatusOr<IndexedDatasetWriter>
IndexedDatasetWriter::create(const std::string &prefix, TokenDType dtype) {
  if (tokenDTypeSize(static_cast<uint8_t>(dtype)) == 0 ||
      !isIntegerDType(dtype))
    return Status::error("indexed dataset " + prefix +
                         ": tokens need an integer dtype");
  StatusOr<AtomicFileWriter> bin = AtomicFileWriter::create(prefix + ".bin");
  if (!bin)
    return bin.status();
  StatusOr<AtomicFileWriter> idx = AtomicFileWriter::create(prefix + ".idx");
  if (!idx)
    return idx.status();
  return IndexedDatasetWriter(prefix, dtype, std::move(*bin), std::move(*idx));
}

Status IndexedDatasetWriter::addSequence(const int32_t *values, size_t count) {
  if (count > static_cast<size_t>(INT32_MAX))
    return Status::error("indexed dataset " + prefix_ +
                         ": a sequence longer than 2^31 tokens does not fit "
                         "the int32 length field");
  size_t itemSize = tokenDTypeSize(static_cast<uint8_t>(dtype_));
  scratch_.resize(count * itemSize);
  char *out = scratch_.data();
  for (size_t i = 0; i < count; ++i) {
    int32_t v = values[i];
    if (!fitsDType(v, dtype_))
      return Status::error("indexed dataset " + prefix_ + ": value " +
                           std::to_string(v) + " does not fit dtype " +
                           tokenDTypeName(dtype_) +
                           "; write it with a wider dtype (int32)");
    switch (itemSize) {
    case 1: {
      int8_t x = static_cast<int8_t>(v);
      std::memcpy(out + i, &x, 1);
      break;
    }
    case 2: {
      uint16_t x = static_cast<uint16_t>(v);
      std::memcpy(out + 2 * i, &x, 2);
      break;
    }
    case 4:
      std::memcpy(out + 4 * i, &v, 4);
      break;
    default: {
      int64_t x = v;
      std::memcpy(out + 8 * i, &x, 8);
    }
    }
  }
  lengths_.push_back(static_cast<int32_t>(count));
  return bin_->write(scratch_.data(), scratch_.size());
}

void IndexedDatasetWriter::endDocument() {
  documentEnds_.push_back(static_cast<int64_t>(lengths_.size()));
}

Status IndexedDatasetWriter::finalize() {
  if (!bin_ || !idx_)
    return Status::error("indexed dataset " + prefix_ + " finalized twice");
  std::vector<char> header;
  header.insert(header.end(), kIndexMagic, kIndexMagic + 9);
  appendLittleEndian<uint64_t>(header, 1);
  header.push_back(static_cast<char>(dtype_));
  appendLittleEndian<uint64_t>(header, lengths_.size());
  appendLittleEndian<uint64_t>(header, documentEnds_.size());
  if (Status s = idx_->write(header.data(), header.size()); !s)
    return s;
  if (Status s = idx_->write(lengths_.data(), lengths_.size() * 4); !s)
    return s;
  std::vector<int64_t> offsets(lengths_.size());
  int64_t offset = 0;
  size_t itemSize = tokenDTypeSize(static_cast<uint8_t>(dtype_));
  for (size_t i = 0; i < lengths_.size(); ++i) {
    offsets[i] = offset;
    offset += static_cast<int64_t>(lengths_[i]) * itemSize;
  }
  if (Status s = idx_->write(offsets.data(), offsets.size() * 8); !s)
    return s;
  if (Status s = idx_->write(documentEnds_.data(), documentEnds_.size() * 8);
      !s)
    return s;
  // .bin first: a reader that sees the new .idx also sees its .bin.
  if (Status s = bin_->commit(); !s)
    return s;
  if (Status s = idx_->commit(); !s)
    return s;
  bin_.reset();
  idx_.reset();
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Reader
//===----------------------------------------------------------------------===//

Status validateIndex(const uint8_t *data, uint64_t size, uint64_t binSize,
                     const std::string &name) {
  auto fail = [&](const std::string &message) {
    return Status::error(name + ": " + message);
  };
  if (size < kIndexHeaderSize)
    return fail("too short for an MMIDIDX index (" + std::to_string(size) +
                " bytes; the header alone is 34)");
  if (std::memcmp(data, kIndexMagic, 9) != 0)
    return fail("not a Megatron MMIDIDX index (bad magic); preprocess the "
                "data with `octet data preprocess`");
  uint64_t version = loadLittleEndian<uint64_t>(data + 9);
  if (version != 1)
    return fail("index format version " + std::to_string(version) +
                " is not supported (only version 1)");
  uint8_t code = data[17];
  size_t itemSize = tokenDTypeSize(code);
  if (itemSize == 0)
    return fail("unknown dtype code " + std::to_string(code));
  uint64_t sequences = loadLittleEndian<uint64_t>(data + 18);
  uint64_t documents = loadLittleEndian<uint64_t>(data + 26);
  uint64_t body = size - kIndexHeaderSize;
  // Compare by division so that lying counts cannot overflow.
  if (sequences > body / 12 || documents > (body - sequences * 12) / 8 ||
      body != sequences * 12 + documents * 8)
    return fail("its size (" + std::to_string(size) +
                " bytes) does not match its header (" +
                std::to_string(sequences) + " sequences, " +
                std::to_string(documents) +
                " document boundaries); the file is truncated or corrupt");
  if (documents < 1)
    return fail("no document boundaries (at least the leading 0 is needed)");
  const uint8_t *lengths = data + kIndexHeaderSize;
  const uint8_t *offsets = lengths + sequences * 4;
  const uint8_t *boundaries = offsets + sequences * 8;
  uint64_t expectedOffset = 0;
  for (uint64_t i = 0; i < sequences; ++i) {
    int32_t length = loadLittleEndian<int32_t>(lengths + 4 * i);
    int64_t offset = loadLittleEndian<int64_t>(offsets + 8 * i);
    if (length < 0)
      return fail("sequence " + std::to_string(i) + " has negative length");
    if (offset < 0 || static_cast<uint64_t>(offset) != expectedOffset)
      return fail("sequence " + std::to_string(i) + " starts at byte " +
                  std::to_string(offset) +
                  " but the lengths before it end "
                  "at byte " +
                  std::to_string(expectedOffset));
    expectedOffset += static_cast<uint64_t>(length) * itemSize;
  }
  if (binSize != expectedOffset)
    return fail("the .bin holds " + std::to_string(binSize) +
                " bytes but the index describes " +
                std::to_string(expectedOffset) +
                (binSize < expectedOffset ? " (the .bin is truncated)"
                                          : " (the .bin has extra bytes)") +
                "; re-run the preprocessing that wrote it");
  int64_t previous = 0;
  for (uint64_t i = 0; i < documents; ++i) {
    int64_t boundary = loadLittleEndian<int64_t>(boundaries + 8 * i);
    if ((i == 0 && boundary != 0) || boundary < previous ||
        static_cast<uint64_t>(boundary) > sequences)
      return fail("document boundary " + std::to_string(i) + " (" +
                  std::to_string(boundary) +
                  ") is out of order or past the last sequence");
    previous = boundary;
  }
  if (static_cast<uint64_t>(previous) != sequences)
    return fail("the last document boundary (" + std::to_string(previous) +
                ") is not the sequence count (" + std::to_string(sequences) +
                ")");
  return Status::ok();
}

StatusOr<IndexedDataset> IndexedDataset::open(const std::string &prefix) {
  StatusOr<MappedFile> idx = MappedFile::open(prefix + ".idx");
  if (!idx)
    return idx.status().withContext("indexed dataset " + prefix);
  StatusOr<MappedFile> bin = MappedFile::open(prefix + ".bin");
  if (!bin)
    return bin.status().withContext("indexed dataset " + prefix);
  if (Status s =
          validateIndex(idx->data(), idx->size(), bin->size(), prefix + ".idx");
      !s)
    return s;
  IndexedDataset dataset;
  dataset.idx_ = std::make_shared<MappedFile>(std::move(*idx));
  dataset.bin_ = std::make_shared<MappedFile>(std::move(*bin));
  const uint8_t *data = dataset.idx_->data();
  dataset.dtype_ = static_cast<TokenDType>(data[17]);
  dataset.itemSize_ = tokenDTypeSize(data[17]);
  dataset.sequenceCount_ = loadLittleEndian<uint64_t>(data + 18);
  dataset.documentCount_ = loadLittleEndian<uint64_t>(data + 26);
  dataset.lengths_ = data + kIndexHeaderSize;
  dataset.offsets_ = dataset.lengths_ + dataset.sequenceCount_ * 4;
  dataset.boundaries_ = dataset.offsets_ + dataset.sequenceCount_ * 8;
  dataset.totalTokens_ = dataset.bin_->size() / dataset.itemSize_;
  return dataset;
}

uint32_t IndexedDataset::sequenceLength(size_t index) const {
  return static_cast<uint32_t>(loadLittleEndian<int32_t>(lengths_ + 4 * index));
}

uint64_t IndexedDataset::sequenceByteOffset(size_t index) const {
  return static_cast<uint64_t>(loadLittleEndian<int64_t>(offsets_ + 8 * index));
}

uint64_t IndexedDataset::documentBoundary(size_t index) const {
  return static_cast<uint64_t>(
      loadLittleEndian<int64_t>(boundaries_ + 8 * index));
}

void IndexedDataset::readSequence(size_t index,
                                  std::vector<int32_t> &out) const {
  uint32_t length = sequenceLength(index);
  const uint8_t *p = bin_->data() + sequenceByteOffset(index);
  out.resize(length);
  for (uint32_t i = 0; i < length; ++i) {
    switch (dtype_) {
    case TokenDType::UInt8:
      out[i] = p[i];
      break;
    case TokenDType::Int8:
      out[i] = static_cast<int8_t>(p[i]);
      break;
    case TokenDType::Int16:
      out[i] = loadLittleEndian<int16_t>(p + 2 * i);
      break;
    case TokenDType::UInt16:
      out[i] = loadLittleEndian<uint16_t>(p + 2 * i);
      break;
    case TokenDType::Int64:
      out[i] = static_cast<int32_t>(loadLittleEndian<int64_t>(p + 8 * i));
      break;
    case TokenDType::Float32:
      out[i] = static_cast<int32_t>(loadLittleEndian<float>(p + 4 * i));
      break;
    case TokenDType::Float64:
      out[i] = static_cast<int32_t>(loadLittleEndian<double>(p + 8 * i));
      break;
    default:
      out[i] = loadLittleEndian<int32_t>(p + 4 * i);
    }
  }
}

} // namespace octet::data
