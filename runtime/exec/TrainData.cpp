#include "runtime/exec/TrainData.h"

#include "bundle/bundle.pb.h"

#include "runtime/data/ByteCorpus.h"
#include "runtime/data/IndexedDataset.h"
#include "runtime/data/Random.h"

#include <optional>
#include <sys/stat.h>

namespace octet {

using data::PackedBatch;

namespace {

// Rows of seq + 1 consecutive tokens as a batch: each row is one document,
// labels are the inputs shifted by one, every token counts in the loss.
void windowsToBatch(const std::vector<int32_t> &windows, uint32_t rows,
                    uint32_t seq, PackedBatch &batch) {
  size_t n = size_t(rows) * seq;
  batch.rows = rows;
  batch.sequenceLength = seq;
  batch.inputs.resize(n);
  batch.targets.resize(n);
  batch.positionIds.resize(n);
  batch.lossMask.assign(n, 1.0f);
  batch.cuSeqlens.resize(rows + 1);
  for (uint32_t r = 0; r < rows; ++r) {
    const int32_t *window = windows.data() + size_t(r) * (seq + 1);
    for (uint32_t t = 0; t < seq; ++t) {
      size_t at = size_t(r) * seq + t;
      batch.inputs[at] = window[t];
      batch.targets[at] = window[t + 1];
      batch.positionIds[at] = int32_t(t);
    }
    batch.cuSeqlens[r] = int32_t(size_t(r) * seq);
  }
  batch.cuSeqlens[rows] = int32_t(n);
  batch.maxSeqlen = seq;
}

StatusOr<uint64_t> parseCounter(const std::string &position,
                                const std::string &kind) {
  const std::string prefix = kind + ":";
  if (position.rfind(prefix, 0) != 0)
    return Status::error("the checkpoint's data position '" + position +
                         "' is not one of \"" + kind +
                         "\" data: resume with the data the run started "
                         "with");
  try {
    return uint64_t(std::stoull(position.substr(prefix.size())));
  } catch (...) {
    return Status::error("the checkpoint's data position '" + position +
                         "' has no batch number");
  }
}

// Data whose rows follow from their number alone (batch n holds rows
// n·rows onwards): the position is the number of the next training row,
// "text:row=N", so a run resumes with another micro-batch size or number of
// data-parallel ranks at the same global batch. Positions written before
// ("text:N") count batches of this run's rows.
class NumberedData : public TrainData {
public:
  NumberedData(const TrainDataOptions &o, std::string kind)
      : o_(o), kind_(std::move(kind)) {}
  std::string position() const override {
    return kind_ + ":row=" + std::to_string(next_ * o_.rows);
  }
  Status restore(const std::string &position) override {
    const std::string rowsPrefix = kind_ + ":row=";
    bool byRow = position.rfind(rowsPrefix, 0) == 0;
    auto n = byRow ? parseCounter(kind_ + ":" +
                                      position.substr(rowsPrefix.size()),
                                  kind_)
                   : parseCounter(position, kind_);
    if (!n)
      return n.status();
    if (!byRow) {
      next_ = *n;
      return Status::ok();
    }
    if (*n % o_.rows)
      return Status::error(
          "the checkpoint's data position is row " + std::to_string(*n) +
          ", which is not a whole number of batches of " +
          std::to_string(o_.rows) +
          " rows: resume with the global batch size the run trained with");
    next_ = *n / o_.rows;
    return Status::ok();
  }
  Status startEval() override {
    nextEval_ = 0;
    return Status::ok();
  }

protected:
  TrainDataOptions o_;
  std::string kind_;
  uint64_t next_ = 0, nextEval_ = 0;
  std::vector<int32_t> windows_;
};

class SyntheticData : public NumberedData {
public:
  explicit SyntheticData(const TrainDataOptions &o)
      : NumberedData(o, "synthetic") {}

  Status next(PackedBatch &batch) override {
    fill(o_.seed, next_++, batch);
    return Status::ok();
  }
  bool hasEval() const override { return true; }
  Status nextEval(PackedBatch &batch) override {
    // A stream of its own: held-out batches never repeat training ones.
    fill(o_.seed ^ 0x5eed0e7a1ull, nextEval_++, batch);
    return Status::ok();
  }
  uint64_t evalBatchCount() const override { return 0; }
  std::string describe() const override {
    return "synthetic tokens (uniform below the vocabulary of " +
           std::to_string(o_.vocabSize) + ", seed " + std::to_string(o_.seed) +
           ")";
  }

private:
  // Each row from (seed, row number) alone, as the text rows are.
  void fill(uint64_t seed, uint64_t batchNumber, PackedBatch &batch) {
    const size_t window = o_.sequenceLength + 1;
    windows_.resize(size_t(o_.rows) * window);
    for (uint32_t r = 0; r < o_.rows; ++r) {
      std::mt19937_64 rng(data::deriveSeed(seed, batchNumber * o_.rows + r));
      for (size_t i = 0; i < window; ++i)
        windows_[r * window + i] =
            int32_t(data::boundedRandom(rng, uint64_t(o_.vocabSize)));
    }
    windowsToBatch(windows_, o_.rows, o_.sequenceLength, batch);
  }
};

class TextData : public NumberedData {
public:
  TextData(const TrainDataOptions &o, data::ByteCorpus corpus)
      : NumberedData(o, "text"), corpus_(std::move(corpus)) {}

  Status next(PackedBatch &batch) override {
    corpus_.trainBatch(next_++, windows_);
    windowsToBatch(windows_, o_.rows, o_.sequenceLength, batch);
    return Status::ok();
  }
  bool hasEval() const override { return corpus_.evalBatchCount() > 0; }
  Status nextEval(PackedBatch &batch) override {
    corpus_.evalBatch(nextEval_++ % corpus_.evalBatchCount(), windows_);
    windowsToBatch(windows_, o_.rows, o_.sequenceLength, batch);
    return Status::ok();
  }
  uint64_t evalBatchCount() const override { return corpus_.evalBatchCount(); }
  std::string describe() const override {
    return o_.path +
           " (text as bytes: " + std::to_string(corpus_.trainBytes()) +
           " training, " + std::to_string(corpus_.evalBytes()) +
           " held-out bytes)";
  }

private:
  data::ByteCorpus corpus_;
};

bool exists(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

StatusOr<data::SftLoader> openLoader(const std::string &prefix,
                                     const TrainDataOptions &o) {
  data::PackingOptions packing;
  packing.sequenceLength = o.sequenceLength;
  packing.seed = o.seed;
  // `octet data preprocess` writes chat data's loss mask beside the tokens
  // (runtime/data/Preprocess.h, lossMaskPrefixFor). Spelled out here so
  // that octet-run does not link the tokenizer and its regex library.
  std::string mask = prefix + "_loss_mask";
  if (!exists(mask + ".idx"))
    mask.clear();
  return data::SftLoader::open(prefix, mask, packing);
}

Status checkVocabulary(const std::string &prefix, int64_t vocab) {
  auto range = scanTokenIds(prefix);
  if (!range)
    return range.status();
  if (range->minId < 0)
    return Status::error("dataset " + prefix + " holds a negative token id (" +
                         std::to_string(range->minId) +
                         "): it is not a token dataset");
  if (range->maxId >= vocab)
    return Status::error(
        "dataset " + prefix + " holds token id " +
        std::to_string(range->maxId) + " (sequence " +
        std::to_string(range->sequence) + "), but the model's vocabulary has " +
        std::to_string(vocab) + " tokens (ids 0.." + std::to_string(vocab - 1) +
        "): preprocess the data with the model's tokenizer, or compile "
        "the model with model.vocab_size of at least " +
        std::to_string(range->maxId + 1));
  return Status::ok();
}

class IndexedData : public TrainData {
public:
  IndexedData(const TrainDataOptions &o, data::SftLoader train,
              std::optional<data::SftLoader> eval)
      : o_(o), train_(std::move(train)), eval_(std::move(eval)) {
    if (eval_)
      evalStart_ = eval_->state();
  }

  Status next(PackedBatch &batch) override {
    return train_.nextBatch(o_.rows, batch);
  }
  std::string position() const override {
    return "indexed:" + train_.state().serialize();
  }
  Status restore(const std::string &position) override {
    const std::string prefix = "indexed:";
    if (position.rfind(prefix, 0) != 0)
      return Status::error("the checkpoint's data position '" + position +
                           "' is not one of indexed data: resume with the "
                           "data the run started with");
    auto state =
        data::SftLoaderState::deserialize(position.substr(prefix.size()));
    if (!state)
      return state.status().withContext("the checkpoint's data position");
    return train_.restore(*state).withContext("resuming " + o_.path +
                                              " at the checkpoint's position");
  }
  bool hasEval() const override { return eval_.has_value(); }
  Status startEval() override { return eval_->restore(evalStart_); }
  Status nextEval(PackedBatch &batch) override {
    return eval_->nextBatch(o_.rows, batch);
  }
  uint64_t evalBatchCount() const override {
    return eval_ ? (eval_->rowsPerEpoch() + o_.rows - 1) / o_.rows : 0;
  }
  std::string describe() const override {
    std::string out = o_.path + " (indexed, " +
                      std::to_string(train_.rowsPerEpoch()) +
                      " packed rows per epoch)";
    if (eval_)
      out += "; held out: " + o_.evalPath;
    return out;
  }

private:
  TrainDataOptions o_;
  data::SftLoader train_;
  std::optional<data::SftLoader> eval_;
  data::SftLoaderState evalStart_;
};

} // namespace

StatusOr<TokenRange> scanTokenIds(const std::string &prefix) {
  auto ds = data::IndexedDataset::open(prefix);
  if (!ds)
    return ds.status();
  TokenRange range;
  std::vector<int32_t> tokens;
  for (size_t i = 0; i < ds->sequenceCount(); ++i) {
    ds->readSequence(i, tokens);
    for (int32_t t : tokens) {
      if (t > range.maxId) {
        range.maxId = t;
        range.sequence = i;
      }
      range.minId = std::min<int64_t>(range.minId, t);
    }
  }
  return range;
}

TrainDataOptions scheduledDataOptions(const bundle::Schedule &schedule) {
  TrainDataOptions o;
  o.rows = uint32_t(schedule.micro_batch_size());
  o.sequenceLength = uint32_t(schedule.seq_len());
  o.seed = schedule.seed();
  o.vocabSize = schedule.vocab_size();
  return o;
}

StatusOr<std::unique_ptr<TrainData>>
TrainData::open(const TrainDataOptions &o) {
  if (o.rows == 0 || o.sequenceLength == 0)
    return Status::error("the bundle's schedule has micro_batch_size " +
                         std::to_string(o.rows) + " and seq_len " +
                         std::to_string(o.sequenceLength) +
                         ": both must be positive; recompile the spec");
  if (o.vocabSize <= 0)
    return Status::error("the bundle's schedule has no vocab_size: "
                         "recompile the spec with this release");
  if (o.kind == "synthetic")
    return std::unique_ptr<TrainData>(new SyntheticData(o));
  if (o.kind == "text") {
    if (o.vocabSize < data::ByteCorpus::kVocabSize)
      return Status::error(o.path +
                           ": text is read as bytes (ids 0..255), "
                           "but the model's vocabulary has " +
                           std::to_string(o.vocabSize) +
                           " tokens: compile it with model.vocab_size of at "
                           "least 256");
    data::ByteCorpus::Options co;
    co.batchSize = o.rows;
    co.sequenceLength = o.sequenceLength;
    co.evalFraction = o.evalFraction;
    co.seed = o.seed;
    auto corpus = data::ByteCorpus::open(o.path, co);
    if (!corpus)
      return corpus.status();
    return std::unique_ptr<TrainData>(new TextData(o, std::move(*corpus)));
  }
  if (o.kind == "indexed") {
    if (Status st = checkVocabulary(o.path, o.vocabSize); !st)
      return st;
    auto train = openLoader(o.path, o);
    if (!train)
      return train.status();
    std::optional<data::SftLoader> eval;
    if (!o.evalPath.empty()) {
      if (Status st = checkVocabulary(o.evalPath, o.vocabSize); !st)
        return st;
      auto e = openLoader(o.evalPath, o);
      if (!e)
        return e.status().withContext("held-out data");
      eval.emplace(std::move(*e));
    }
    return std::unique_ptr<TrainData>(
        new IndexedData(o, std::move(*train), std::move(eval)));
  }
  return Status::error("data kind \"" + o.kind +
                       "\" is not one the trainer reads: use --synthetic, "
                       "--data PREFIX (a Megatron .bin/.idx prefix) or "
                       "--text FILE");
}

} // namespace octet
