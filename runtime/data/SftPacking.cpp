#include "runtime/data/SftPacking.h"

#include "runtime/data/Random.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>

namespace octet::data {

namespace {

struct Fnv1a {
  uint64_t hash = 0xCBF29CE484222325ull;
  void add(uint64_t value) {
    for (int i = 0; i < 8; ++i) {
      hash ^= (value >> (8 * i)) & 0xFF;
      hash *= 0x100000001B3ull;
    }
  }
};

// Max-segment tree over bins' free space, to find the first bin with room
// in O(log n) instead of scanning every open bin.
class FreeSpaceTree {
public:
  explicit FreeSpaceTree(size_t leaves) {
    size_ = 1;
    while (size_ < leaves)
      size_ <<= 1;
    tree_.assign(2 * size_, 0);
  }
  // Leftmost leaf holding at least `need`, or npos.
  size_t firstWithRoom(uint32_t need) const {
    if (tree_[1] < need)
      return static_cast<size_t>(-1);
    size_t node = 1;
    while (node < size_)
      node = tree_[2 * node] >= need ? 2 * node : 2 * node + 1;
    return node - size_;
  }
  uint32_t get(size_t leaf) const { return tree_[size_ + leaf]; }
  void set(size_t leaf, uint32_t value) {
    size_t node = size_ + leaf;
    tree_[node] = value;
    for (node /= 2; node >= 1; node /= 2)
      tree_[node] = std::max(tree_[2 * node], tree_[2 * node + 1]);
  }

private:
  size_t size_;
  std::vector<uint32_t> tree_;
};

} // namespace

std::vector<std::vector<uint32_t>>
packFirstFitDecreasing(const std::vector<uint32_t> &lengths,
                       uint32_t capacity) {
  std::vector<uint32_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return lengths[a] > lengths[b];
  });
  std::vector<std::vector<uint32_t>> bins;
  FreeSpaceTree freeSpace(std::max<size_t>(1, lengths.size()));
  for (uint32_t sample : order) {
    uint32_t length = lengths[sample];
    size_t bin = freeSpace.firstWithRoom(length);
    if (bin == static_cast<size_t>(-1)) {
      bin = bins.size();
      bins.emplace_back();
      freeSpace.set(bin, capacity);
    }
    bins[bin].push_back(sample);
    freeSpace.set(bin, freeSpace.get(bin) - length);
  }
  return bins;
}

std::vector<uint32_t> seededPermutation(uint32_t count, uint64_t seed) {
  std::vector<uint32_t> permutation(count);
  std::iota(permutation.begin(), permutation.end(), 0);
  std::mt19937_64 rng(seed);
  for (uint32_t i = count; i > 1; --i)
    std::swap(permutation[i - 1], permutation[boundedRandom(rng, i)]);
  return permutation;
}

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

std::string SftLoaderState::serialize() const {
  nlohmann::json j = {{"format", "octet.sft_loader_state"},
                      {"version", 1},
                      {"seed", seed},
                      {"epoch", epoch},
                      {"next_row", nextRow},
                      {"fingerprint", fingerprint}};
  return j.dump();
}

StatusOr<std::vector<int32_t>>
padCuSeqlens(const std::vector<int32_t> &cuSeqlens, size_t capacity) {
  if (cuSeqlens.empty())
    return Status::error("a packed batch has no cu_seqlens (not even 0)");
  if (cuSeqlens.size() > capacity)
    return Status::error(
        "the batch packs " + std::to_string(cuSeqlens.size() - 1) +
        " documents, but the compiled input 'cu_seqlens' holds " +
        std::to_string(capacity == 0 ? 0 : capacity - 1) +
        ": recompile the spec with this release (it sizes cu_seqlens for "
        "one document per token)");
  std::vector<int32_t> padded(capacity, cuSeqlens.back());
  std::copy(cuSeqlens.begin(), cuSeqlens.end(), padded.begin());
  return padded;
}

StatusOr<SftLoaderState> SftLoaderState::deserialize(std::string_view text) {
  nlohmann::json j =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  auto format = j.is_object() ? j.find("format") : j.end();
  if (j.is_discarded() || !j.is_object() || format == j.end() ||
      *format != "octet.sft_loader_state")
    return Status::error("not an SFT loader state (expected the JSON that "
                         "SftLoaderState::serialize writes)");
  auto version = j.find("version");
  if (version == j.end() || *version != 1)
    return Status::error("SFT loader state version " +
                         (version == j.end() ? "(none)" : version->dump()) +
                         " is not supported (only 1)");
  SftLoaderState state;
  std::pair<const char *, uint64_t *> fields[] = {
      {"seed", &state.seed},
      {"epoch", &state.epoch},
      {"next_row", &state.nextRow},
      {"fingerprint", &state.fingerprint}};
  for (auto &[key, slot] : fields) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_unsigned())
      return Status::error(std::string("SFT loader state: \"") + key +
                           "\" is missing or not a non-negative integer");
    *slot = it->get<uint64_t>();
  }
  return state;
}

//===----------------------------------------------------------------------===//
// Loader
//===----------------------------------------------------------------------===//

StatusOr<SftLoader> SftLoader::open(const std::string &tokensPrefix,
                                    const std::string &lossMaskPrefix,
                                    const PackingOptions &options) {
  SftLoader loader;
  StatusOr<IndexedDataset> tokens = IndexedDataset::open(tokensPrefix);
  if (!tokens)
    return tokens.status();
  loader.tokensData_.emplace(std::move(*tokens));
  if (!lossMaskPrefix.empty()) {
    StatusOr<IndexedDataset> mask = IndexedDataset::open(lossMaskPrefix);
    if (!mask)
      return mask.status();
    if (mask->sequenceCount() != loader.tokensData_->sequenceCount())
      return Status::error("loss mask " + lossMaskPrefix + " has " +
                           std::to_string(mask->sequenceCount()) +
                           " sequences but " + tokensPrefix + " has " +
                           std::to_string(loader.tokensData_->sequenceCount()) +
                           "; preprocess them together");
    for (size_t i = 0; i < mask->sequenceCount(); ++i)
      if (mask->sequenceLength(i) != loader.tokensData_->sequenceLength(i))
        return Status::error("loss mask " + lossMaskPrefix + ": sequence " +
                             std::to_string(i) +
                             " differs in length from its tokens");
    loader.maskData_.emplace(std::move(*mask));
  }
  if (Status s = loader.initialize(options); !s)
    return s;
  return loader;
}

StatusOr<SftLoader>
SftLoader::fromSamples(std::vector<std::vector<int32_t>> tokens,
                       std::vector<std::vector<uint8_t>> lossMasks,
                       const PackingOptions &options) {
  if (!lossMasks.empty() && lossMasks.size() != tokens.size())
    return Status::error("SFT samples: " + std::to_string(lossMasks.size()) +
                         " loss masks for " + std::to_string(tokens.size()) +
                         " samples");
  for (size_t i = 0; i < lossMasks.size(); ++i)
    if (lossMasks[i].size() != tokens[i].size())
      return Status::error("SFT sample " + std::to_string(i) +
                           ": loss mask and tokens differ in length");
  SftLoader loader;
  loader.memoryTokens_ = std::move(tokens);
  loader.memoryMasks_ = std::move(lossMasks);
  if (Status s = loader.initialize(options); !s)
    return s;
  return loader;
}

Status SftLoader::initialize(const PackingOptions &options) {
  options_ = options;
  if (options.alignment == 0 || options.sequenceLength == 0 ||
      options.sequenceLength % options.alignment != 0) {
    uint32_t a = std::max<uint32_t>(1, options.alignment);
    uint32_t up =
        (std::max<uint32_t>(1, options.sequenceLength) + a - 1) / a * a;
    return Status::error(
        "sequence length " + std::to_string(options.sequenceLength) +
        " is not a positive multiple of " + std::to_string(options.alignment) +
        ", which the FP8 GEMMs need; use " + std::to_string(up));
  }
  size_t count =
      tokensData_ ? tokensData_->sequenceCount() : memoryTokens_.size();
  Fnv1a fingerprint;
  fingerprint.add(options.sequenceLength);
  fingerprint.add(options.alignment);
  fingerprint.add(static_cast<uint32_t>(options.padTokenId));
  fingerprint.add(options.truncate);
  for (size_t i = 0; i < count; ++i) {
    uint64_t length =
        tokensData_ ? tokensData_->sequenceLength(i) : memoryTokens_[i].size();
    fingerprint.add(length);
    if (length == 0)
      continue;
    if (length > options.sequenceLength) {
      if (!options.truncate)
        return Status::error("sample " + std::to_string(i) + " has " +
                             std::to_string(length) +
                             " tokens, more than the sequence length " +
                             std::to_string(options.sequenceLength) +
                             "; raise it or allow truncation");
      length = options.sequenceLength;
      ++truncated_;
    }
    sampleIds_.push_back(static_cast<uint32_t>(i));
    lengths_.push_back(static_cast<uint32_t>(length));
  }
  if (sampleIds_.empty())
    return Status::error("the SFT dataset has no non-empty sample");
  fingerprint_ = fingerprint.hash;
  bins_ = packFirstFitDecreasing(lengths_, options.sequenceLength);
  startEpoch(0);
  return Status::ok();
}

void SftLoader::startEpoch(uint64_t epoch) {
  epoch_ = epoch;
  nextRow_ = 0;
  order_ = seededPermutation(static_cast<uint32_t>(bins_.size()),
                             deriveSeed(options_.seed, epoch));
}

void SftLoader::fetch(uint32_t sample, std::vector<int32_t> &tokens,
                      std::vector<int32_t> &mask) const {
  uint32_t id = sampleIds_[sample];
  if (tokensData_) {
    tokensData_->readSequence(id, tokens);
    if (maskData_)
      maskData_->readSequence(id, mask);
    else
      mask.assign(tokens.size(), 1);
  } else {
    tokens = memoryTokens_[id];
    if (memoryMasks_.empty())
      mask.assign(tokens.size(), 1);
    else
      mask.assign(memoryMasks_[id].begin(), memoryMasks_[id].end());
  }
}

Status SftLoader::nextBatch(uint32_t rows, PackedBatch &batch) {
  const uint32_t s = options_.sequenceLength;
  const int32_t pad = options_.padTokenId;
  batch.rows = rows;
  batch.sequenceLength = s;
  size_t total = static_cast<size_t>(rows) * s;
  batch.inputs.assign(total, pad);
  batch.targets.assign(total, pad);
  batch.lossMask.assign(total, 0.0f);
  batch.positionIds.assign(total, 0);
  batch.cuSeqlens.assign(1, 0);
  batch.maxSeqlen = 0;
  std::vector<int32_t> tokens, mask;
  for (uint32_t row = 0; row < rows; ++row) {
    if (nextRow_ == bins_.size())
      startEpoch(epoch_ + 1);
    const std::vector<uint32_t> &bin = bins_[order_[nextRow_++]];
    size_t base = static_cast<size_t>(row) * s;
    uint32_t used = 0;
    for (uint32_t sample : bin) {
      fetch(sample, tokens, mask);
      uint32_t length = lengths_[sample];
      for (uint32_t i = 0; i < length; ++i) {
        size_t at = base + used + i;
        batch.inputs[at] = tokens[i];
        batch.positionIds[at] = static_cast<int32_t>(i);
        if (i + 1 < length) {
          batch.targets[at] = tokens[i + 1];
          batch.lossMask[at] = mask[i + 1] ? 1.0f : 0.0f;
        }
      }
      used += length;
      batch.cuSeqlens.push_back(static_cast<int32_t>(base + used));
      batch.maxSeqlen = std::max(batch.maxSeqlen, length);
    }
    if (used < s) {
      for (uint32_t i = used; i < s; ++i)
        batch.positionIds[base + i] = static_cast<int32_t>(i - used);
      batch.cuSeqlens.push_back(static_cast<int32_t>(base + s));
      batch.maxSeqlen = std::max(batch.maxSeqlen, s - used);
    }
  }
  return Status::ok();
}

SftLoaderState SftLoader::state() const {
  return {options_.seed, epoch_, nextRow_, fingerprint_};
}

Status SftLoader::restore(const SftLoaderState &state) {
  if (state.fingerprint != fingerprint_)
    return Status::error("the saved data position belongs to another dataset "
                         "or other packing options (fingerprint mismatch); "
                         "resume with the data and --seq-len it was saved "
                         "with");
  if (state.seed != options_.seed)
    return Status::error("the saved data position was taken with seed " +
                         std::to_string(state.seed) + ", this loader uses " +
                         std::to_string(options_.seed));
  if (state.nextRow > bins_.size())
    return Status::error("the saved data position (row " +
                         std::to_string(state.nextRow) +
                         ") is past the end of an epoch (" +
                         std::to_string(bins_.size()) + " rows)");
  startEpoch(state.epoch);
  nextRow_ = state.nextRow;
  return Status::ok();
}

} // namespace octet::data
