#include "runtime/data/TrainBatches.h"

#include "runtime/data/ByteCorpus.h"
#include "runtime/data/ChatTemplate.h"
#include "runtime/data/Jsonl.h"
#include "runtime/data/Preprocess.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sys/stat.h>

namespace octet::data {

namespace {

class TextBatches : public TrainBatchSource {
public:
  TextBatches(ByteCorpus corpus, std::string path, uint32_t rows, uint32_t seq)
      : corpus_(std::move(corpus)), path_(std::move(path)), rows_(rows),
        seq_(seq) {}

  Status next(uint64_t step, PackedBatch &batch) override {
    corpus_.trainBatch(step, window_);
    batch.rows = rows_;
    batch.sequenceLength = seq_;
    size_t n = size_t(rows_) * seq_;
    batch.inputs.resize(n);
    batch.targets.resize(n);
    batch.positionIds.resize(n);
    batch.lossMask.assign(n, 1.0f);
    batch.cuSeqlens.resize(rows_ + 1);
    for (uint32_t r = 0; r < rows_; ++r) {
      for (uint32_t t = 0; t < seq_; ++t) {
        batch.inputs[r * seq_ + t] = window_[r * (seq_ + 1) + t];
        batch.targets[r * seq_ + t] = window_[r * (seq_ + 1) + t + 1];
        batch.positionIds[r * seq_ + t] = int32_t(t);
      }
      batch.cuSeqlens[r] = int32_t(r * seq_);
    }
    batch.cuSeqlens[rows_] = int32_t(n);
    batch.maxSeqlen = seq_;
    return Status::ok();
  }

  std::string describe() const override {
    return path_ + " (text, " + std::to_string(corpus_.trainBytes()) +
           " training bytes)";
  }

  // Batches are a function of their number: the position is that number.
  std::string position(uint64_t nextStep) const override {
    return "batch:" + std::to_string(nextStep);
  }
  Status restore(const std::string &position, uint64_t nextStep) override {
    if (position != this->position(nextStep))
      return Status::error("the data position '" + position +
                           "' is not this run's '" +
                           this->position(nextStep) +
                           "' at that step: train.global_batch_size or "
                           "train.micro_batch_size changed");
    return Status::ok();
  }

private:
  ByteCorpus corpus_;
  std::string path_;
  uint32_t rows_, seq_;
  std::vector<int32_t> window_;
};

class PackedBatches : public TrainBatchSource {
public:
  PackedBatches(SftLoader loader, std::string what, uint32_t rows)
      : loader_(std::move(loader)), what_(std::move(what)), rows_(rows) {}

  Status next(uint64_t, PackedBatch &batch) override {
    return loader_.nextBatch(rows_, batch);
  }

  std::string describe() const override {
    std::string out = what_ + ", " + std::to_string(loader_.rowsPerEpoch()) +
                      " packed rows per epoch";
    if (loader_.truncatedSamples())
      out += ", " + std::to_string(loader_.truncatedSamples()) +
             " samples cut to the sequence length";
    return out + ")";
  }

  // The loader reads on from where it is: its state is the position.
  std::string position(uint64_t) const override {
    return loader_.state().serialize();
  }
  Status restore(const std::string &position, uint64_t) override {
    StatusOr<SftLoaderState> state = SftLoaderState::deserialize(position);
    if (!state)
      return state.status().withContext("data position");
    return loader_.restore(*state);
  }

private:
  SftLoader loader_;
  std::string what_;
  uint32_t rows_;
};

bool exists(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

// Tokenizes every record of a jsonl file; an error names the file and line.
Status tokenizeJsonl(const std::string &path, const std::string &tokenizerPath,
                     std::vector<std::vector<int32_t>> &tokens,
                     std::vector<std::vector<uint8_t>> &masks) {
  if (tokenizerPath.empty())
    return Status::error(path + ": jsonl data needs a tokenizer.json "
                                "(train.data.tokenizer)");
  StatusOr<Tokenizer> tokenizer = Tokenizer::fromFile(tokenizerPath);
  if (!tokenizer)
    return tokenizer.status();
  std::optional<Llama3ChatTemplate> chat;
  std::ifstream in(path);
  if (!in)
    return Status::error("cannot open " + path);
  std::string line;
  for (uint64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    std::string where = path + ":" + std::to_string(number);
    StatusOr<JsonlRecord> record = parseJsonlLine(line);
    if (!record)
      return record.status().withContext(where);
    if (record->kind == JsonlRecord::Kind::Text) {
      StatusOr<std::vector<int32_t>> ids =
          tokenizer->encode(record->text, true);
      if (!ids)
        return ids.status().withContext(where);
      masks.emplace_back(ids->size(), 1);
      tokens.push_back(std::move(*ids));
      continue;
    }
    if (!chat) {
      StatusOr<Llama3ChatTemplate> made =
          Llama3ChatTemplate::create(*tokenizer);
      if (!made)
        return made.status().withContext(tokenizerPath);
      chat.emplace(std::move(*made));
    }
    StatusOr<TokenizedSample> sample = chat->tokenize(record->messages);
    if (!sample)
      return sample.status().withContext(where);
    tokens.push_back(std::move(sample->tokens));
    masks.push_back(std::move(sample->lossMask));
  }
  if (tokens.empty())
    return Status::error(path + " holds no records");
  return Status::ok();
}

} // namespace

StatusOr<std::unique_ptr<TrainBatchSource>>
openTrainBatches(const TrainBatchOptions &options) {
  if (options.rows == 0 || options.sequenceLength == 0)
    return Status::error("training batches need rows and a sequence length");
  if (options.kind == "text") {
    ByteCorpus::Options o;
    o.batchSize = options.rows;
    o.sequenceLength = options.sequenceLength;
    o.evalFraction = options.evalFraction;
    o.seed = options.seed;
    // ByteCorpus always keeps an evaluation split; with none asked for,
    // the smallest it accepts (one window) is held out.
    struct stat info;
    if (o.evalFraction <= 0 && stat(options.path.c_str(), &info) == 0 &&
        info.st_size > 0)
      o.evalFraction = std::min(0.5, (double(options.sequenceLength) + 1.5) /
                                         double(info.st_size));
    StatusOr<ByteCorpus> corpus = ByteCorpus::open(options.path, o);
    if (!corpus)
      return corpus.status();
    return std::unique_ptr<TrainBatchSource>(
        new TextBatches(std::move(*corpus), options.path, options.rows,
                        options.sequenceLength));
  }
  if (options.kind == "indexed") {
    PackingOptions o;
    o.sequenceLength = options.sequenceLength;
    o.alignment = options.alignment;
    o.seed = options.seed;
    std::string mask = lossMaskPrefixFor(options.path);
    if (!exists(mask + ".idx"))
      mask.clear();
    StatusOr<SftLoader> loader = SftLoader::open(options.path, mask, o);
    if (!loader)
      return loader.status();
    std::string what =
        options.path + " (indexed, " +
        (mask.empty() ? "loss on every token" : "loss mask " + mask);
    return std::unique_ptr<TrainBatchSource>(
        new PackedBatches(std::move(*loader), what, options.rows));
  }
  if (options.kind == "jsonl") {
    std::vector<std::vector<int32_t>> tokens;
    std::vector<std::vector<uint8_t>> masks;
    if (Status st =
            tokenizeJsonl(options.path, options.tokenizer, tokens, masks);
        !st)
      return st;
    PackingOptions o;
    o.sequenceLength = options.sequenceLength;
    o.alignment = options.alignment;
    o.seed = options.seed;
    size_t records = tokens.size();
    StatusOr<SftLoader> loader =
        SftLoader::fromSamples(std::move(tokens), std::move(masks), o);
    if (!loader)
      return loader.status().withContext(options.path);
    return std::unique_ptr<TrainBatchSource>(new PackedBatches(
        std::move(*loader),
        options.path + " (jsonl, " + std::to_string(records) + " records",
        options.rows));
  }
  return Status::error("train.data.kind \"" + options.kind +
                       "\" has no batch source; use \"text\" (a UTF-8 "
                       "file), \"indexed\" (a prefix written by `octet data "
                       "preprocess`) or \"jsonl\"");
}

} // namespace octet::data
