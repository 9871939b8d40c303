#ifndef OCTET_RUNTIME_EXEC_TRAINDATA_H
#define OCTET_RUNTIME_EXEC_TRAINDATA_H

// The batches a training run feeds its TRAIN_MICROBATCH and EVAL programs,
// with a position that a checkpoint records and a resumed run restores:
//   "synthetic"  random tokens below the model's vocabulary, drawn from
//                (seed, batch number) alone;
//   "indexed"    a Megatron .bin/.idx prefix, packed into rows
//                (runtime/data SftLoader; its loss mask dataset when there
//                is one); held-out batches from another prefix (evalPath);
//   "text"       a UTF-8 file as bytes (ByteCorpus), whose tail is the
//                held-out split.
// Every token id is checked against the model's vocabulary when the data
// is opened, so a dataset made with another tokenizer is refused before
// step 1 rather than read out of bounds on the GPU.

#include "support/Status.h"
#include "runtime/data/SftPacking.h"

#include <cstdint>
#include <memory>
#include <string>

namespace octet::bundle {
class Schedule;
} // namespace octet::bundle

namespace octet {

struct TrainDataOptions {
  std::string kind = "synthetic";
  std::string path;
  // "indexed": the held-out prefix; empty for no evaluation.
  std::string evalPath;
  uint32_t rows = 1;
  uint32_t sequenceLength = 0;
  uint64_t seed = 0;
  // The model's vocabulary: ids must be below it.
  int64_t vocabSize = 0;
  // "text": share of the file held out for evaluation.
  double evalFraction = 0.05;
};

// Synthetic batches in the shape of the bundle's schedule (its micro
// batch size, sequence length, seed and vocabulary): what octet-run
// --synthetic trains on. Another kind of data sets kind and path.
TrainDataOptions scheduledDataOptions(const bundle::Schedule &schedule);

class TrainData {
public:
  static StatusOr<std::unique_ptr<TrainData>>
  open(const TrainDataOptions &options);
  virtual ~TrainData() = default;

  virtual Status next(data::PackedBatch &batch) = 0;
  // Where next() continues from, as text (a checkpoint stores it).
  virtual std::string position() const = 0;
  virtual Status restore(const std::string &position) = 0;

  virtual bool hasEval() const = 0;
  // Starts the held-out batches over from the first one, so every
  // evaluation reads the same batches.
  virtual Status startEval() = 0;
  virtual Status nextEval(data::PackedBatch &batch) = 0;
  // How many distinct held-out batches there are (0: unbounded).
  virtual uint64_t evalBatchCount() const = 0;

  virtual std::string describe() const = 0;
};

// The largest token id of an indexed dataset, and the sequence holding it.
struct TokenRange {
  int64_t maxId = -1;
  uint64_t sequence = 0;
  int64_t minId = 0;
};
StatusOr<TokenRange> scanTokenIds(const std::string &prefix);

} // namespace octet

#endif
