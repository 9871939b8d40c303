#ifndef OCTET_RUNTIME_DATA_TRAINBATCHES_H
#define OCTET_RUNTIME_DATA_TRAINBATCHES_H

// What a training step reads, whatever the data: tokens, labels (the next
// token), loss mask, positions and cu_seqlens, as the forward graph takes
// them (frontends/GraphImporter.h). One source per data kind:
//   "text"     a UTF-8 file as bytes (ByteCorpus): every row is one
//              document, positions 0..S-1, every token trained on;
//   "indexed"  a Megatron .bin/.idx prefix from `octet data preprocess`,
//              packed first-fit decreasing into rows (SftLoader), with the
//              PREFIX_loss_mask dataset when there is one (chat data: loss
//              on assistant tokens only), else loss on every token;
//   "jsonl"    {"text": ...} / {"messages": [...]} lines tokenized in
//              memory (chat: the Llama 3 template, loss on assistant
//              tokens; text: the tokenizer's template, loss everywhere),
//              then packed as "indexed" is. For small data: larger sets go
//              through `octet data preprocess` once.

#include "support/Status.h"
#include "runtime/data/SftPacking.h"

#include <cstdint>
#include <memory>
#include <string>

namespace octet::data {

struct TrainBatchOptions {
  std::string kind;      // "text", "indexed" or "jsonl"
  std::string path;      // the file, or the dataset prefix
  std::string tokenizer; // "jsonl": a tokenizer.json
  uint32_t rows = 1;
  uint32_t sequenceLength = 0;
  uint64_t seed = 0;
  // "text" only; 0 holds out the least ByteCorpus accepts (one window).
  double evalFraction = 0;
  uint32_t alignment = 16; // packed kinds: lengths are multiples of it
};

class TrainBatchSource {
public:
  virtual ~TrainBatchSource() = default;
  // Batch number `step` (0, 1, ...; asked for in order). Rows are
  // `rows` × `sequenceLength`, flattened.
  virtual Status next(uint64_t step, PackedBatch &batch) = 0;
  // One line for the run's header: the data and its size.
  virtual std::string describe() const = 0;
  // Where the source stands when batch `nextStep` is the next to read, as
  // a checkpoint saves it; restore() continues from a saved position.
  virtual std::string position(uint64_t nextStep) const = 0;
  virtual Status restore(const std::string &position, uint64_t nextStep) = 0;
};

StatusOr<std::unique_ptr<TrainBatchSource>>
openTrainBatches(const TrainBatchOptions &options);

} // namespace octet::data

#endif
