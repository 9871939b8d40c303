#include "runtime/data/ByteCorpus.h"

#include "support/AtomicFile.h"
#include "runtime/data/Random.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace octet::data {

StatusOr<ByteCorpus> ByteCorpus::open(const std::string &path,
                                      const Options &options) {
  StatusOr<std::string> bytes = readWholeFile(path);
  if (!bytes)
    return bytes.status().withContext(
        "byte corpus (write one with scripts/make-corpus.sh)");
  std::string warning = nonTextWarning(path, *bytes);
  StatusOr<ByteCorpus> corpus = fromBytes(std::move(*bytes), options);
  if (!corpus)
    return corpus.status().withContext("byte corpus " + path);
  if (!warning.empty())
    std::fprintf(stderr, "warning: %s\n", warning.c_str());
  return corpus;
}

std::string ByteCorpus::nonTextWarning(const std::string &path,
                                       std::string_view bytes) {
  std::string_view head = bytes.substr(0, 1 << 20);
  uint64_t nul = 0, control = 0;
  for (char c : head) {
    auto byte = static_cast<unsigned char>(c);
    if (byte == 0)
      ++nul;
    else if ((byte < 0x20 && !std::strchr("\t\n\v\f\r", c)) || byte == 0x7f)
      ++control;
  }
  if (head.empty() || (nul == 0 && control * 100 <= head.size()))
    return "";
  char share[32];
  std::snprintf(share, sizeof(share), "%.1f%%",
                100.0 * double(nul + control) / double(head.size()));
  return path + " does not look like text: " + share + " of its first " +
         std::to_string(head.size()) + " bytes are NUL (" +
         std::to_string(nul) + ") or other control bytes (" +
         std::to_string(control) +
         "); it is trained on as bytes all the same (--text takes a UTF-8 "
         "text file; a tokenized dataset is --data PREFIX)";
}

StatusOr<ByteCorpus> ByteCorpus::fromBytes(std::string bytes,
                                           const Options &options) {
  if (options.batchSize == 0 || options.sequenceLength == 0)
    return Status::error("batch size and sequence length must be positive");
  if (!(options.evalFraction > 0.0 && options.evalFraction < 1.0))
    return Status::error("eval fraction must be between 0 and 1 (exclusive)");
  ByteCorpus corpus;
  corpus.options_ = options;
  uint64_t window = uint64_t(options.sequenceLength) + 1;
  corpus.trainEnd_ =
      bytes.size() -
      static_cast<uint64_t>(std::llround(static_cast<double>(bytes.size()) *
                                         options.evalFraction));
  if (corpus.trainEnd_ < window || bytes.size() - corpus.trainEnd_ < window)
    return Status::error(
        std::to_string(bytes.size()) + " bytes are too few for windows of " +
        std::to_string(window) +
        " bytes in both the training and the evaluation split; use a larger "
        "corpus or a shorter sequence length");
  corpus.bytes_ = std::move(bytes);
  return corpus;
}

void ByteCorpus::copyWindow(uint64_t offset, int32_t *out) const {
  for (uint32_t i = 0; i <= options_.sequenceLength; ++i)
    out[i] = static_cast<uint8_t>(bytes_[offset + i]);
}

void ByteCorpus::trainBatch(uint64_t batch, std::vector<int32_t> &out) const {
  uint64_t window = uint64_t(options_.sequenceLength) + 1;
  out.resize(options_.batchSize * window);
  uint64_t starts = trainEnd_ - window + 1;
  uint64_t first = batch * options_.batchSize;
  for (uint32_t row = 0; row < options_.batchSize; ++row) {
    std::mt19937_64 rng(deriveSeed(options_.seed, first + row));
    copyWindow(boundedRandom(rng, starts), out.data() + row * window);
  }
}

uint64_t ByteCorpus::evalBatchCount() const {
  uint64_t window = uint64_t(options_.sequenceLength) + 1;
  uint64_t windows = evalBytes() / window;
  return std::max<uint64_t>(1, windows / options_.batchSize);
}

void ByteCorpus::evalBatch(uint64_t index, std::vector<int32_t> &out) const {
  uint64_t window = uint64_t(options_.sequenceLength) + 1;
  uint64_t windows = std::max<uint64_t>(1, evalBytes() / window);
  out.resize(options_.batchSize * window);
  for (uint32_t row = 0; row < options_.batchSize; ++row) {
    // Wraps when the split holds fewer windows than one batch.
    uint64_t w = (index * options_.batchSize + row) % windows;
    copyWindow(trainEnd_ + w * window, out.data() + row * window);
  }
}

} // namespace octet::data
