#ifndef OCTET_HF_SAFETENSORS_H
#define OCTET_HF_SAFETENSORS_H

// safetensors: an 8-byte little-endian header length N, N bytes of JSON
//   {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
//    ..., "__metadata__": {"key": "value"}}
// then the tensor data; offsets are relative to the end of the header.

#include "support/AtomicFile.h"
#include "support/DType.h"
#include "support/Status.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace octet::hf {

// The header's spelling of a dtype ("BF16", "F8_E4M3", ...), which also
// names the dtypes of a file's tensors in messages; every DType has one.
const char *safetensorsDTypeName(DType dtype);
std::optional<DType> parseSafetensorsDType(std::string_view name);

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0; // byte range within the data section
  uint64_t elementCount() const;
};

// The parsed, validated header of a safetensors file. Validation refuses
// anything a reader could be led astray by: a header longer than the file,
// unknown dtypes, negative or overflowing shapes, data_offsets whose size
// is not shape x dtype, tensors that overlap, leave gaps or run past the
// file.
struct SafetensorsHeader {
  std::vector<TensorInfo> tensors; // in data order
  std::map<std::string, std::string> metadata;
  uint64_t dataStart = 0; // 8 + header length

  const TensorInfo *find(std::string_view name) const;
};

// Parses and validates a header from the first bytes of a file of
// `fileSize` bytes (`bytes` holds at least the 8-byte length and the JSON,
// or fewer when the file is shorter). `name` is used in errors.
StatusOr<SafetensorsHeader> parseSafetensorsHeader(const uint8_t *bytes,
                                                   size_t available,
                                                   uint64_t fileSize,
                                                   const std::string &name);

// A safetensors file opened read-only through a memory map.
class SafetensorsFile {
public:
  static StatusOr<SafetensorsFile> open(const std::string &path);

  const SafetensorsHeader &header() const { return header_; }
  const std::string &path() const { return path_; }
  // The bytes of a tensor, or null when there is none by that name.
  const uint8_t *tensorData(const TensorInfo &tensor) const;
  StatusOr<std::vector<uint8_t>> readTensor(std::string_view name) const;

private:
  SafetensorsFile() = default;
  std::string path_;
  std::shared_ptr<MappedFile> file_;
  SafetensorsHeader header_;
};

// Collects tensors and writes them as one safetensors file, atomically.
// Tensors are laid out in name order; the header is padded with spaces to
// a multiple of 8 bytes so the data is aligned.
class SafetensorsWriter {
public:
  Status add(const std::string &name, DType dtype, std::vector<int64_t> shape,
             const void *data, size_t bytes);
  // As add(), without copying: `data` must stay valid until write() returns
  // (checkpoints of large models would otherwise hold every tensor twice).
  Status addView(const std::string &name, DType dtype,
                 std::vector<int64_t> shape, const void *data, size_t bytes);
  void setMetadata(const std::string &key, const std::string &value) {
    metadata_[key] = value;
  }
  Status write(const std::string &path) const;
  // The header JSON and total size the file will have.
  std::string headerJson() const;
  uint64_t dataBytes() const;
  size_t size() const { return tensors_.size(); }

private:
  struct Pending {
    DType dtype;
    std::vector<int64_t> shape;
    // Copied by add(), or viewed (data) by addView().
    std::vector<uint8_t> owned;
    const uint8_t *data = nullptr;
    size_t size = 0;
    const uint8_t *bytes() const { return data ? data : owned.data(); }
  };
  Status check(const std::string &name, DType dtype,
               const std::vector<int64_t> &shape, size_t bytes) const;
  std::map<std::string, Pending> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint that may be split across files (model.safetensors, or
// model.safetensors.index.json naming model-0000i-of-0000n.safetensors).
class CheckpointReader {
public:
  // `path`: a directory holding either layout, a .safetensors file, or a
  // model.safetensors.index.json.
  static StatusOr<CheckpointReader> open(const std::string &path);

  std::vector<std::string> tensorNames() const; // sorted
  const TensorInfo *find(std::string_view name) const;
  StatusOr<std::vector<uint8_t>> readTensor(std::string_view name) const;
  // The file that holds a tensor (for messages); empty when there is none.
  std::string fileOf(std::string_view name) const;
  // The tensor's bytes inside its memory-mapped file, or null.
  const uint8_t *tensorData(std::string_view name) const;

private:
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, std::pair<size_t, const TensorInfo *>, std::less<>>
      byName_;
};

// Writes tensors as one file (when they fit in maxShardBytes) or as
// model-0000i-of-0000n.safetensors shards plus model.safetensors.index.json,
// into `directory`. Each file is replaced atomically, the index last.
struct NamedTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};
Status writeCheckpoint(const std::string &directory,
                       const std::vector<NamedTensor> &tensors,
                       uint64_t maxShardBytes = 5ull << 30);

} // namespace octet::hf

#endif
