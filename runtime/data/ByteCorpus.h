#ifndef OCTET_RUNTIME_DATA_BYTECORPUS_H
#define OCTET_RUNTIME_DATA_BYTECORPUS_H

#include "support/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace octet::data {

// A plain-text corpus read as bytes (token = byte, vocabulary 256), for
// training tiny models without a tokenizer. The first part of the file is
// the training split, the rest the evaluation split, so no evaluation text
// is ever trained on.
class ByteCorpus {
public:
  static constexpr int32_t kVocabSize = 256;

  struct Options {
    uint32_t batchSize = 8;
    uint32_t sequenceLength = 128; // windows hold sequenceLength + 1 bytes
    double evalFraction = 0.05;
    uint64_t seed = 0;
  };

  static StatusOr<ByteCorpus> open(const std::string &path,
                                   const Options &options);
  static StatusOr<ByteCorpus> fromBytes(std::string bytes,
                                        const Options &options);

  // A file given as text that looks binary (a NUL byte, or more than 1% of
  // control bytes other than whitespace, in its first MiB) still trains,
  // as bytes, so nothing else would say so: this is the warning that
  // open() prints to stderr, naming the file and what looked non-text, or
  // empty for text.
  static std::string nonTextWarning(const std::string &path,
                                    std::string_view bytes);

  // Training batch number `batch`, [batchSize, sequenceLength + 1]
  // row-major: training rows batch·batchSize onwards, each window at an
  // offset drawn from (seed, row) alone. Resuming needs only the row, and
  // the rows of a global batch do not depend on how it is cut into
  // microbatches and data-parallel ranks.
  void trainBatch(uint64_t batch, std::vector<int32_t> &out) const;
  // Evaluation batches: consecutive non-overlapping windows of the eval
  // split, the same every time.
  uint64_t evalBatchCount() const;
  void evalBatch(uint64_t index, std::vector<int32_t> &out) const;

  uint64_t trainBytes() const { return trainEnd_; }
  uint64_t evalBytes() const { return bytes_.size() - trainEnd_; }
  const Options &options() const { return options_; }

private:
  ByteCorpus() = default;
  void copyWindow(uint64_t offset, int32_t *out) const;

  std::string bytes_;
  uint64_t trainEnd_ = 0;
  Options options_;
};

} // namespace octet::data

#endif
