#include "hf/Safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <unistd.h>
#include <utility>

namespace octet::hf {

using nlohmann::json;

namespace {

// The format's words for octet's element types.
// clang-format off
constexpr std::pair<DType, const char *> kDTypeNames[] = {
    {DType::F64, "F64"},   {DType::F32, "F32"}, {DType::F16, "F16"},
    {DType::BF16, "BF16"}, {DType::I64, "I64"}, {DType::I32, "I32"},
    {DType::I16, "I16"},   {DType::I8, "I8"},   {DType::U8, "U8"},
    {DType::Bool, "BOOL"}, {DType::F8E4M3FN, "F8_E4M3"},
    {DType::F8E5M2, "F8_E5M2"},
};
// clang-format on

// The reference implementation refuses larger headers too.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

bool multiplyChecked(uint64_t a, uint64_t b, uint64_t &out) {
  if (a != 0 && b > UINT64_MAX / a)
    return false;
  out = a * b;
  return true;
}

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

const char *safetensorsDTypeName(DType dtype) {
  for (const auto &[known, name] : kDTypeNames)
    if (known == dtype)
      return name;
  return "?";
}

std::optional<DType> parseSafetensorsDType(std::string_view name) {
  for (const auto &[dtype, known] : kDTypeNames)
    if (name == known)
      return dtype;
  return std::nullopt;
}

uint64_t TensorInfo::elementCount() const {
  uint64_t count = 1;
  for (int64_t d : shape)
    count *= static_cast<uint64_t>(d);
  return count;
}

const TensorInfo *SafetensorsHeader::find(std::string_view name) const {
  for (const TensorInfo &t : tensors)
    if (t.name == name)
      return &t;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Header validation
//===----------------------------------------------------------------------===//

StatusOr<SafetensorsHeader> parseSafetensorsHeader(const uint8_t *bytes,
                                                   size_t available,
                                                   uint64_t fileSize,
                                                   const std::string &name) {
  auto fail = [&](const std::string &message) {
    return Status::error(name + ": " + message +
                         "; the file is not a valid safetensors checkpoint");
  };
  if (fileSize < 8 || available < 8)
    return fail("only " + std::to_string(fileSize) +
                " bytes, shorter than the 8-byte header length");
  uint64_t headerLength;
  std::memcpy(&headerLength, bytes, 8);
  if (headerLength > fileSize - 8)
    return fail("the header claims " + std::to_string(headerLength) +
                " bytes but only " + std::to_string(fileSize - 8) +
                " follow the length field");
  if (headerLength > kMaxHeaderBytes)
    return fail("a header of " + std::to_string(headerLength) +
                " bytes is larger than the 100 MiB limit");
  if (available < 8 + headerLength)
    return fail("the header is cut short");
  const char *text = reinterpret_cast<const char *>(bytes + 8);
  json root = json::parse(text, text + headerLength, nullptr, false);
  if (root.is_discarded() || !root.is_object())
    return fail("the header is not a JSON object");

  SafetensorsHeader header;
  header.dataStart = 8 + headerLength;
  uint64_t dataSize = fileSize - header.dataStart;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string &key = it.key();
    const json &value = it.value();
    if (key == "__metadata__") {
      if (!value.is_object())
        return fail("__metadata__ is not an object");
      for (auto m = value.begin(); m != value.end(); ++m) {
        if (!m.value().is_string())
          return fail("__metadata__[\"" + m.key() + "\"] is not a string");
        header.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    std::string where = "tensor \"" + key + "\"";
    if (!value.is_object())
      return fail(where + " is not an object");
    auto dtypeIt = value.find("dtype");
    auto shapeIt = value.find("shape");
    auto offsetsIt = value.find("data_offsets");
    if (dtypeIt == value.end() || !dtypeIt->is_string())
      return fail(where + " has no dtype string");
    std::optional<DType> dtype =
        parseSafetensorsDType(dtypeIt->get<std::string>());
    if (!dtype)
      return fail(where + " has unknown dtype \"" +
                  dtypeIt->get<std::string>() + "\"");
    if (shapeIt == value.end() || !shapeIt->is_array())
      return fail(where + " has no shape array");
    if (offsetsIt == value.end() || !offsetsIt->is_array() ||
        offsetsIt->size() != 2 || !(*offsetsIt)[0].is_number_unsigned() ||
        !(*offsetsIt)[1].is_number_unsigned())
      return fail(where + " has no data_offsets [begin, end]");
    TensorInfo tensor;
    tensor.name = key;
    tensor.dtype = *dtype;
    uint64_t elements = 1;
    for (const json &d : *shapeIt) {
      if (!d.is_number_unsigned())
        return fail(where + " has a shape entry that is not a non-negative "
                            "integer");
      uint64_t extent = d.get<uint64_t>();
      if (extent > static_cast<uint64_t>(INT64_MAX) ||
          !multiplyChecked(elements, extent, elements))
        return fail(where + " has a shape whose size overflows");
      tensor.shape.push_back(static_cast<int64_t>(extent));
    }
    uint64_t bytesNeeded;
    if (!multiplyChecked(elements, dtypeBytes(*dtype), bytesNeeded))
      return fail(where + " has a shape whose size overflows");
    tensor.begin = (*offsetsIt)[0].get<uint64_t>();
    tensor.end = (*offsetsIt)[1].get<uint64_t>();
    if (tensor.begin > tensor.end)
      return fail(where + " has data_offsets with begin after end");
    if (tensor.end > dataSize)
      return fail(where + " ends at byte " + std::to_string(tensor.end) +
                  " of the data, past its end (" + std::to_string(dataSize) +
                  " bytes; the file may be truncated)");
    if (tensor.end - tensor.begin != bytesNeeded)
      return fail(
          where + " spans " + std::to_string(tensor.end - tensor.begin) +
          " bytes but its shape and dtype need " + std::to_string(bytesNeeded));
    header.tensors.push_back(std::move(tensor));
  }
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const TensorInfo &a, const TensorInfo &b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  uint64_t expected = 0;
  for (const TensorInfo &t : header.tensors) {
    if (t.begin != expected)
      return fail(
          "tensor \"" + t.name + "\" starts at byte " +
          std::to_string(t.begin) +
          " of the data but the previous "
          "tensor ends at " +
          std::to_string(expected) +
          (t.begin < expected ? " (tensors overlap)" : " (a gap in the data)"));
    expected = t.end;
  }
  if (expected != dataSize)
    return fail("the tensors cover " + std::to_string(expected) +
                " bytes of data but the file holds " +
                std::to_string(dataSize));
  return header;
}

//===----------------------------------------------------------------------===//
// One file
//===----------------------------------------------------------------------===//

StatusOr<SafetensorsFile> SafetensorsFile::open(const std::string &path) {
  StatusOr<MappedFile> mapped = MappedFile::open(path);
  if (!mapped)
    return mapped.status();
  StatusOr<SafetensorsHeader> header = parseSafetensorsHeader(
      mapped->data(), mapped->size(), mapped->size(), path);
  if (!header)
    return header.status();
  SafetensorsFile file;
  file.path_ = path;
  file.file_ = std::make_shared<MappedFile>(std::move(*mapped));
  file.header_ = std::move(*header);
  return file;
}

const uint8_t *SafetensorsFile::tensorData(const TensorInfo &tensor) const {
  return file_->data() + header_.dataStart + tensor.begin;
}

StatusOr<std::vector<uint8_t>>
SafetensorsFile::readTensor(std::string_view name) const {
  const TensorInfo *tensor = header_.find(name);
  if (!tensor)
    return Status::error(path_ + " has no tensor \"" + std::string(name) +
                         "\"");
  const uint8_t *data = tensorData(*tensor);
  return std::vector<uint8_t>(data, data + (tensor->end - tensor->begin));
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

Status SafetensorsWriter::check(const std::string &name, DType dtype,
                                const std::vector<int64_t> &shape,
                                size_t bytes) const {
  if (name == "__metadata__" || name.empty())
    return Status::error("\"" + name + "\" cannot name a tensor");
  if (tensors_.count(name))
    return Status::error("tensor \"" + name + "\" added twice");
  uint64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return Status::error("tensor \"" + name + "\" has a negative extent");
    elements *= static_cast<uint64_t>(d);
  }
  if (elements * dtypeBytes(dtype) != bytes)
    return Status::error("tensor \"" + name + "\": " + std::to_string(bytes) +
                         " bytes given, shape and dtype " +
                         safetensorsDTypeName(dtype) + " need " +
                         std::to_string(elements * dtypeBytes(dtype)));
  return Status::ok();
}

Status SafetensorsWriter::add(const std::string &name, DType dtype,
                              std::vector<int64_t> shape, const void *data,
                              size_t bytes) {
  if (Status s = check(name, dtype, shape, bytes); !s)
    return s;
  const uint8_t *p = static_cast<const uint8_t *>(data);
  tensors_[name] = Pending{dtype, std::move(shape),
                           std::vector<uint8_t>(p, p + bytes), nullptr, bytes};
  return Status::ok();
}

Status SafetensorsWriter::addView(const std::string &name, DType dtype,
                                  std::vector<int64_t> shape, const void *data,
                                  size_t bytes) {
  if (Status s = check(name, dtype, shape, bytes); !s)
    return s;
  tensors_[name] = Pending{
      dtype, std::move(shape), {}, static_cast<const uint8_t *>(data), bytes};
  return Status::ok();
}

std::string SafetensorsWriter::headerJson() const {
  json header = json::object();
  if (!metadata_.empty())
    header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const auto &[name, tensor] : tensors_) {
    uint64_t end = offset + tensor.size;
    header[name] = {{"dtype", safetensorsDTypeName(tensor.dtype)},
                    {"shape", tensor.shape},
                    {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

uint64_t SafetensorsWriter::dataBytes() const {
  uint64_t total = 0;
  for (const auto &entry : tensors_)
    total += entry.second.size;
  return total;
}

Status SafetensorsWriter::write(const std::string &path) const {
  StatusOr<AtomicFileWriter> out = AtomicFileWriter::create(path);
  if (!out)
    return out.status();
  std::string header = headerJson();
  uint64_t length = header.size();
  if (Status s = out->write(&length, 8); !s)
    return s;
  if (Status s = out->write(header); !s)
    return s;
  for (const auto &entry : tensors_)
    if (Status s = out->write(entry.second.bytes(), entry.second.size); !s)
      return s;
  return out->commit();
}

//===----------------------------------------------------------------------===//
// Sharded checkpoints
//===----------------------------------------------------------------------===//

namespace {

constexpr const char *kIndexName = "model.safetensors.index.json";
constexpr const char *kSingleName = "model.safetensors";

std::string parentDirectory(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

} // namespace

StatusOr<CheckpointReader> CheckpointReader::open(const std::string &path) {
  std::string indexPath, singlePath;
  if (isDirectory(path)) {
    if (isRegularFile(path + "/" + kIndexName))
      indexPath = path + "/" + kIndexName;
    else if (isRegularFile(path + "/" + kSingleName))
      singlePath = path + "/" + kSingleName;
    else
      return Status::error(path + " holds neither " + kSingleName + " nor " +
                           kIndexName +
                           "; point at a Hugging Face model "
                           "directory");
  } else if (endsWith(path, ".json")) {
    indexPath = path;
  } else {
    singlePath = path;
  }

  CheckpointReader reader;
  auto addShard = [&](SafetensorsFile shard) -> Status {
    size_t index = reader.shards_.size();
    reader.shards_.push_back(std::move(shard));
    for (const TensorInfo &t : reader.shards_.back().header().tensors) {
      auto [it, inserted] = reader.byName_.try_emplace(t.name, index, &t);
      if (!inserted)
        return Status::error("tensor \"" + t.name + "\" is in both " +
                             reader.shards_[it->second.first].path() + " and " +
                             reader.shards_.back().path());
    }
    return Status::ok();
  };

  if (!singlePath.empty()) {
    StatusOr<SafetensorsFile> file = SafetensorsFile::open(singlePath);
    if (!file)
      return file.status();
    reader.shards_.reserve(1);
    if (Status s = addShard(std::move(*file)); !s)
      return s;
    return reader;
  }

  StatusOr<std::string> text = readWholeFile(indexPath);
  if (!text)
    return text.status();
  json index = json::parse(*text, nullptr, false);
  if (index.is_discarded() || !index.is_object() ||
      !index.value("weight_map", json()).is_object())
    return Status::error(indexPath + ": expected a JSON object with a "
                                     "\"weight_map\" of tensor name: file");
  const json &weightMap = index["weight_map"];
  std::vector<std::string> shardNames;
  for (auto it = weightMap.begin(); it != weightMap.end(); ++it) {
    if (!it.value().is_string())
      return Status::error(indexPath + ": weight_map[\"" + it.key() +
                           "\"] is not a file name");
    std::string file = it.value().get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos || file == "." ||
        file == "..")
      return Status::error(indexPath + ": weight_map[\"" + it.key() +
                           "\"] names \"" + file +
                           "\", which is not a file beside the index");
    if (std::find(shardNames.begin(), shardNames.end(), file) ==
        shardNames.end())
      shardNames.push_back(file);
  }
  std::sort(shardNames.begin(), shardNames.end());
  // TensorInfo pointers into shards_ must stay put.
  reader.shards_.reserve(shardNames.size());
  std::string directory = parentDirectory(indexPath);
  for (const std::string &name : shardNames) {
    StatusOr<SafetensorsFile> shard =
        SafetensorsFile::open(directory + "/" + name);
    if (!shard)
      return shard.status().withContext("shard named by " + indexPath);
    if (Status s = addShard(std::move(*shard)); !s)
      return s;
  }
  for (auto it = weightMap.begin(); it != weightMap.end(); ++it) {
    auto found = reader.byName_.find(it.key());
    std::string file = it.value().get<std::string>();
    if (found == reader.byName_.end() ||
        !endsWith(reader.shards_[found->second.first].path(), "/" + file))
      return Status::error(indexPath + " maps tensor \"" + it.key() + "\" to " +
                           file + ", which does not hold it");
  }
  return reader;
}

std::vector<std::string> CheckpointReader::tensorNames() const {
  std::vector<std::string> names;
  for (const auto &entry : byName_)
    names.push_back(entry.first);
  return names;
}

const TensorInfo *CheckpointReader::find(std::string_view name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? nullptr : it->second.second;
}

StatusOr<std::vector<uint8_t>>
CheckpointReader::readTensor(std::string_view name) const {
  auto it = byName_.find(name);
  if (it == byName_.end())
    return Status::error("the checkpoint has no tensor \"" + std::string(name) +
                         "\"");
  return shards_[it->second.first].readTensor(name);
}

std::string CheckpointReader::fileOf(std::string_view name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? std::string() : shards_[it->second.first].path();
}

const uint8_t *CheckpointReader::tensorData(std::string_view name) const {
  auto it = byName_.find(name);
  if (it == byName_.end())
    return nullptr;
  return shards_[it->second.first].tensorData(*it->second.second);
}

Status writeCheckpoint(const std::string &directory,
                       const std::vector<NamedTensor> &tensors,
                       uint64_t maxShardBytes) {
  if (!isDirectory(directory))
    return Status::error("checkpoint directory " + directory +
                         " does not exist; create it first");
  // Shards fill in tensor order; a tensor larger than the limit gets one
  // of its own.
  std::vector<size_t> shardOf(tensors.size());
  size_t shardCount = 1;
  uint64_t shardBytes = 0, totalBytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    uint64_t bytes = tensors[i].data.size();
    if (shardBytes > 0 && shardBytes + bytes > maxShardBytes) {
      ++shardCount;
      shardBytes = 0;
    }
    shardOf[i] = shardCount - 1;
    shardBytes += bytes;
    totalBytes += bytes;
  }
  std::vector<SafetensorsWriter> shards(shardCount);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const NamedTensor &t = tensors[i];
    if (Status s = shards[shardOf[i]].addView(t.name, t.dtype, t.shape,
                                              t.data.data(), t.data.size());
        !s)
      return s;
  }
  // transformers refuses safetensors files without a known format tag.
  for (SafetensorsWriter &shard : shards)
    shard.setMetadata("format", "pt");

  std::string indexPath = directory + "/" + kIndexName;
  if (shardCount == 1) {
    if (Status s = shards[0].write(directory + "/" + kSingleName); !s)
      return s;
    // A leftover index would take precedence over the new file.
    ::unlink(indexPath.c_str());
    return Status::ok();
  }
  auto shardName = [&](size_t shard) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors",
                  shard + 1, shardCount);
    return std::string(name);
  };
  for (size_t shard = 0; shard < shardCount; ++shard)
    if (Status s = shards[shard].write(directory + "/" + shardName(shard)); !s)
      return s;
  json weightMap = json::object();
  for (size_t i = 0; i < tensors.size(); ++i)
    weightMap[tensors[i].name] = shardName(shardOf[i]);
  json index = {{"metadata", {{"total_size", totalBytes}}},
                {"weight_map", weightMap}};
  return writeFileAtomically(indexPath, index.dump(2) + "\n");
}

} // namespace octet::hf
