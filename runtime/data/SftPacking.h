#ifndef OCTET_RUNTIME_DATA_SFTPACKING_H
#define OCTET_RUNTIME_DATA_SFTPACKING_H

#include "support/Status.h"
#include "runtime/data/IndexedDataset.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace octet::data {

// First-fit decreasing: samples, longest first (ties by index), each go to
// the first bin with room. Returns the sample indices of each bin, in bin
// order; every length must be in [1, capacity].
std::vector<std::vector<uint32_t>>
packFirstFitDecreasing(const std::vector<uint32_t> &lengths, uint32_t capacity);

// A permutation of [0, count) from a seed; the same on every platform (no
// std::shuffle, whose algorithm the standard leaves open).
std::vector<uint32_t> seededPermutation(uint32_t count, uint64_t seed);

struct PackingOptions {
  uint32_t sequenceLength = 0; // tokens per packed row
  // Row lengths must be multiples of this: 16 for FP8 GEMMs, 128 for
  // blockwise-scaled FP8.
  uint32_t alignment = 16;
  int32_t padTokenId = 0;
  uint64_t seed = 0;
  // Longer samples are cut to sequenceLength; otherwise they are an error.
  bool truncate = true;
};

// Batches of packed rows, flattened [rows * sequenceLength]. Inputs and
// targets are aligned: targets[i] is the token after inputs[i] in the same
// document, and lossMask[i] says whether it is trained on. Each document's
// last position, and padding, has loss 0, so nothing is ever predicted
// across a document boundary.
struct PackedBatch {
  uint32_t rows = 0, sequenceLength = 0;
  std::vector<int32_t> inputs, targets;
  std::vector<float> lossMask;
  std::vector<int32_t> positionIds; // restart at 0 in every document
  // Document boundaries over the flattened batch, for varlen attention;
  // padding at a row's end is a segment of its own, so the last entry is
  // rows * sequenceLength.
  std::vector<int32_t> cuSeqlens;
  uint32_t maxSeqlen = 0;
};

// `cuSeqlens` as a compiled step's fixed-size input of `capacity`
// boundaries: the batch's own, then its last one repeated (empty documents
// at the end, which mask nothing). An error when the batch has more
// documents than the input holds.
StatusOr<std::vector<int32_t>>
padCuSeqlens(const std::vector<int32_t> &cuSeqlens, size_t capacity);

// Where an SFT loader is in its data: enough to resume exactly. The
// fingerprint ties it to the dataset and options it came from.
struct SftLoaderState {
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t nextRow = 0; // within the epoch's shuffled order
  uint64_t fingerprint = 0;

  std::string serialize() const; // a small JSON object
  static StatusOr<SftLoaderState> deserialize(std::string_view text);
  bool operator==(const SftLoaderState &o) const {
    return seed == o.seed && epoch == o.epoch && nextRow == o.nextRow &&
           fingerprint == o.fingerprint;
  }
};

// Packs the sequences of an indexed dataset (tokens, and optionally the
// loss mask dataset that `octet data preprocess` writes for chat data) into
// rows, shuffles the rows per epoch from the seed, and hands out batches.
class SftLoader {
public:
  static StatusOr<SftLoader> open(const std::string &tokensPrefix,
                                  const std::string &lossMaskPrefix,
                                  const PackingOptions &options);
  // Same, over samples held in memory (tokens and 0/1 masks).
  static StatusOr<SftLoader>
  fromSamples(std::vector<std::vector<int32_t>> tokens,
              std::vector<std::vector<uint8_t>> lossMasks,
              const PackingOptions &options);

  uint64_t rowsPerEpoch() const { return bins_.size(); }
  uint64_t truncatedSamples() const { return truncated_; }
  const std::vector<std::vector<uint32_t>> &bins() const { return bins_; }

  // The next `rows` rows; crosses into the next epoch (reshuffled) as
  // needed.
  Status nextBatch(uint32_t rows, PackedBatch &batch);

  SftLoaderState state() const;
  // Continues from a state taken from a loader over the same data and
  // options; a state from other data is refused.
  Status restore(const SftLoaderState &state);

private:
  SftLoader() = default;
  Status initialize(const PackingOptions &options);
  void fetch(uint32_t sample, std::vector<int32_t> &tokens,
             std::vector<int32_t> &mask) const;
  void startEpoch(uint64_t epoch);

  PackingOptions options_;
  std::optional<IndexedDataset> tokensData_, maskData_;
  std::vector<std::vector<int32_t>> memoryTokens_;
  std::vector<std::vector<uint8_t>> memoryMasks_;
  std::vector<uint32_t> sampleIds_; // non-empty samples
  std::vector<uint32_t> lengths_;   // after truncation
  std::vector<std::vector<uint32_t>> bins_;
  std::vector<uint32_t> order_;
  uint64_t epoch_ = 0, nextRow_ = 0, fingerprint_ = 0, truncated_ = 0;
};

} // namespace octet::data

#endif
