#include "runtime/data/ChatTemplate.h"
#include "runtime/data/IndexedDataset.h"
#include "runtime/data/SftPacking.h"
#include "runtime/data/Tokenizer.h"
#include "tests/unit/data/TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

using namespace octet;
using namespace octet::data;

namespace {

Tokenizer smallTokenizer() {
  StatusOr<Tokenizer> t = Tokenizer::fromJson(
      testutil::smallByteLevelTokenizerJson({{"a", "s"}, {"as", "s"}}),
      "small");
  EXPECT_TRUE(t);
  return *t;
}

// Samples whose tokens identify them: sample k holds 100*k + position.
std::vector<std::vector<int32_t>>
numberedSamples(const std::vector<uint32_t> &lengths) {
  std::vector<std::vector<int32_t>> samples;
  for (size_t k = 0; k < lengths.size(); ++k) {
    samples.emplace_back();
    for (uint32_t i = 0; i < lengths[k]; ++i)
      samples.back().push_back(static_cast<int32_t>(100 * (k + 1) + i));
  }
  return samples;
}

} // namespace

TEST(ChatTemplate, RendersTheLlama3Format) {
  EXPECT_EQ(Llama3ChatTemplate::render(
                {{"system", "S"}, {"user", "  U\n"}, {"assistant", "A"}}),
            "<|begin_of_text|>"
            "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nA<|eot_id|>");
}

TEST(ChatTemplate, LossFallsOnlyOnAssistantTokens) {
  Tokenizer tokenizer = smallTokenizer();
  StatusOr<Llama3ChatTemplate> chat = Llama3ChatTemplate::create(tokenizer);
  ASSERT_TRUE(chat) << chat.status().message();
  std::vector<ChatMessage> messages = {{"user", "ask"},
                                       {"assistant", "pass sass"},
                                       {"user", "more"},
                                       {"assistant", " as\n"}};
  StatusOr<TokenizedSample> sample = chat->tokenize(messages);
  ASSERT_TRUE(sample) << sample.status().message();
  EXPECT_EQ(sample->tokens,
            *tokenizer.encode(Llama3ChatTemplate::render(messages)));
  ASSERT_EQ(sample->tokens.size(), sample->lossMask.size());
  std::string trained, untrained;
  for (size_t i = 0; i < sample->tokens.size(); ++i)
    (sample->lossMask[i] ? trained : untrained) +=
        *tokenizer.decode({sample->tokens[i]});
  EXPECT_EQ(trained, "pass sass<|eot_id|>as<|eot_id|>");
  EXPECT_EQ(untrained,
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nask"
            "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
            "<|start_header_id|>user<|end_header_id|>\n\nmore<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, NeedsTheLlama3SpecialTokens) {
  std::string json = testutil::smallByteLevelTokenizerJson({});
  json.replace(json.find("<|eot_id|>"), 10, "<|eom_id|>");
  StatusOr<Tokenizer> tokenizer = Tokenizer::fromJson(json, "t");
  ASSERT_TRUE(tokenizer);
  StatusOr<Llama3ChatTemplate> chat = Llama3ChatTemplate::create(*tokenizer);
  ASSERT_FALSE(chat);
  EXPECT_NE(chat.status().message().find("no <|eot_id|> token"),
            std::string::npos);
}

TEST(Packing, FirstFitDecreasingFillsEarlierBinsFirst) {
  // Sorted: 7(1) 6(4) 5(0) 4(3) 3(5) 2(2) 1(6); capacity 8.
  std::vector<std::vector<uint32_t>> bins =
      packFirstFitDecreasing({5, 7, 2, 4, 6, 3, 1}, 8);
  EXPECT_EQ(bins,
            (std::vector<std::vector<uint32_t>>{{1, 6}, {4, 2}, {0, 5}, {3}}));
  // Ties keep input order.
  EXPECT_EQ(packFirstFitDecreasing({3, 3, 3}, 6),
            (std::vector<std::vector<uint32_t>>{{0, 1}, {2}}));
}

TEST(Packing, BinsNeverOverflowAndHoldEverySampleOnce) {
  std::vector<uint32_t> lengths;
  for (uint32_t i = 0; i < 5000; ++i)
    lengths.push_back(1 + (i * 2654435761u) % 512);
  std::vector<std::vector<uint32_t>> bins =
      packFirstFitDecreasing(lengths, 512);
  std::vector<int> seen(lengths.size(), 0);
  uint64_t total = 0;
  for (const auto &bin : bins) {
    uint32_t used = 0;
    for (uint32_t s : bin) {
      used += lengths[s];
      ++seen[s];
    }
    EXPECT_LE(used, 512u);
    total += used;
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 5000);
  // FFD is within 11/9 OPT + 1 bins; OPT >= total / capacity.
  EXPECT_LE(bins.size(), (total / 512 + 1) * 11 / 9 + 1);
}

TEST(Packing, RowsKeepDocumentsApart) {
  PackingOptions options;
  options.sequenceLength = 16;
  options.alignment = 16;
  options.padTokenId = -7;
  std::vector<uint32_t> lengths = {5, 9, 4, 20};
  std::vector<std::vector<uint8_t>> masks;
  for (uint32_t n : lengths)
    masks.emplace_back(n, 1);
  masks[1][3] = 0; // token 3 of sample 1 is not trained on
  StatusOr<SftLoader> loader =
      SftLoader::fromSamples(numberedSamples(lengths), masks, options);
  ASSERT_TRUE(loader) << loader.status().message();
  EXPECT_EQ(loader->truncatedSamples(), 1u); // the 20-token sample
  // 16(s3) | 9(s1)+5(s0) | 4(s2)
  ASSERT_EQ(loader->rowsPerEpoch(), 3u);

  PackedBatch batch;
  ASSERT_TRUE(loader->nextBatch(3, batch));
  ASSERT_EQ(batch.inputs.size(), 48u);
  EXPECT_EQ(batch.cuSeqlens.back(), 48);
  EXPECT_TRUE(std::is_sorted(batch.cuSeqlens.begin(), batch.cuSeqlens.end()));
  EXPECT_EQ(batch.maxSeqlen, 16u);
  // Every segment holds one document (or padding): all of its tokens come
  // from the same sample, positions count from 0, and no target is taken
  // from another segment.
  for (size_t seg = 0; seg + 1 < batch.cuSeqlens.size(); ++seg) {
    int32_t begin = batch.cuSeqlens[seg], end = batch.cuSeqlens[seg + 1];
    ASSERT_LT(begin, end);
    EXPECT_EQ(begin / 16, (end - 1) / 16) << "a segment crosses rows";
    int32_t sample = batch.inputs[begin] / 100;
    for (int32_t i = begin; i < end; ++i) {
      EXPECT_EQ(batch.positionIds[i], i - begin);
      if (batch.inputs[i] == -7) {
        EXPECT_EQ(batch.lossMask[i], 0.0f);
        continue;
      }
      EXPECT_EQ(batch.inputs[i] / 100, sample);
      if (i + 1 < end) {
        EXPECT_EQ(batch.targets[i], batch.inputs[i + 1]);
      } else {
        EXPECT_EQ(batch.lossMask[i], 0.0f) << "last token predicts nothing";
      }
    }
  }
  // Find sample 1 (tokens 200..208): the target 203 has loss 0.
  for (size_t i = 0; i < batch.inputs.size(); ++i)
    if (batch.inputs[i] == 202) {
      EXPECT_EQ(batch.targets[i], 203);
      EXPECT_EQ(batch.lossMask[i], 0.0f);
      EXPECT_EQ(batch.lossMask[i + 1], 1.0f);
    }
  float trained =
      std::accumulate(batch.lossMask.begin(), batch.lossMask.end(), 0.0f);
  // (16-1) + (9-1-1) + (5-1) + (4-1)
  EXPECT_EQ(trained, 15 + 7 + 4 + 3);
}

TEST(Packing, SequenceLengthMustSuitFp8Gemms) {
  PackingOptions options;
  options.sequenceLength = 1000;
  options.alignment = 16;
  StatusOr<SftLoader> loader =
      SftLoader::fromSamples(numberedSamples({3}), {}, options);
  ASSERT_FALSE(loader);
  EXPECT_NE(loader.status().message().find("1000 is not a positive multiple "
                                           "of 16"),
            std::string::npos);
  EXPECT_NE(loader.status().message().find("use 1008"), std::string::npos);
  options.sequenceLength = 256;
  options.alignment = 128;
  EXPECT_TRUE(SftLoader::fromSamples(numberedSamples({3}), {}, options));
  options.truncate = false;
  options.sequenceLength = 128;
  loader = SftLoader::fromSamples(numberedSamples({300}), {}, options);
  ASSERT_FALSE(loader);
  EXPECT_NE(loader.status().message().find("sample 0 has 300 tokens"),
            std::string::npos);
}

TEST(Packing, ShuffleIsFixedBySeedAndChangesPerEpoch) {
  EXPECT_EQ(seededPermutation(10, 42), seededPermutation(10, 42));
  EXPECT_NE(seededPermutation(10, 42), seededPermutation(10, 43));
  // Data order must not depend on the platform or standard library: pin it.
  EXPECT_EQ(seededPermutation(6, 1), (std::vector<uint32_t>{1, 3, 0, 4, 5, 2}));
  std::vector<uint32_t> p = seededPermutation(1000, 9);
  std::vector<uint32_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < 1000; ++i)
    ASSERT_EQ(sorted[i], i);

  PackingOptions options;
  options.sequenceLength = 16;
  options.seed = 5;
  std::vector<uint32_t> lengths(40, 16); // one sample per row
  auto firstTokens = [&](SftLoader &loader, int rows) {
    std::vector<int32_t> firsts;
    PackedBatch batch;
    for (int r = 0; r < rows; ++r) {
      EXPECT_TRUE(loader.nextBatch(1, batch));
      firsts.push_back(batch.inputs[0]);
    }
    return firsts;
  };
  StatusOr<SftLoader> a =
      SftLoader::fromSamples(numberedSamples(lengths), {}, options);
  StatusOr<SftLoader> b =
      SftLoader::fromSamples(numberedSamples(lengths), {}, options);
  ASSERT_TRUE(a && b);
  std::vector<int32_t> epochs = firstTokens(*a, 80);
  EXPECT_EQ(epochs, firstTokens(*b, 80));
  std::vector<int32_t> epoch0(epochs.begin(), epochs.begin() + 40);
  std::vector<int32_t> epoch1(epochs.begin() + 40, epochs.end());
  EXPECT_NE(epoch0, epoch1);
  std::sort(epoch0.begin(), epoch0.end());
  std::sort(epoch1.begin(), epoch1.end());
  EXPECT_EQ(epoch0, epoch1) << "each epoch visits every row once";
}

TEST(Packing, ResumesExactlyFromASavedState) {
  PackingOptions options;
  options.sequenceLength = 32;
  options.seed = 11;
  std::vector<uint32_t> lengths;
  for (uint32_t i = 0; i < 50; ++i)
    lengths.push_back(1 + i * 7 % 31);
  StatusOr<SftLoader> original =
      SftLoader::fromSamples(numberedSamples(lengths), {}, options);
  ASSERT_TRUE(original);
  PackedBatch batch;
  uint64_t rows = original->rowsPerEpoch();
  // Stop partway through the second epoch.
  for (uint64_t i = 0; i < rows + 3; ++i)
    ASSERT_TRUE(original->nextBatch(1, batch));
  std::string saved = original->state().serialize();
  std::vector<PackedBatch> expected(5);
  for (PackedBatch &b : expected)
    ASSERT_TRUE(original->nextBatch(2, b));

  StatusOr<SftLoaderState> state = SftLoaderState::deserialize(saved);
  ASSERT_TRUE(state) << state.status().message();
  EXPECT_EQ(state->epoch, 1u);
  EXPECT_EQ(state->nextRow, 3u);
  StatusOr<SftLoader> resumed =
      SftLoader::fromSamples(numberedSamples(lengths), {}, options);
  ASSERT_TRUE(resumed);
  ASSERT_TRUE(resumed->restore(*state));
  for (const PackedBatch &want : expected) {
    ASSERT_TRUE(resumed->nextBatch(2, batch));
    EXPECT_EQ(batch.inputs, want.inputs);
    EXPECT_EQ(batch.cuSeqlens, want.cuSeqlens);
  }

  // A state from other data is refused, and so is garbage.
  lengths[0] += 1;
  StatusOr<SftLoader> other =
      SftLoader::fromSamples(numberedSamples(lengths), {}, options);
  ASSERT_TRUE(other);
  Status refused = other->restore(*state);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("fingerprint mismatch"), std::string::npos);
  EXPECT_FALSE(SftLoaderState::deserialize("{\"format\": 3}"));
  EXPECT_FALSE(SftLoaderState::deserialize("not json"));
}

TEST(Packing, ReadsTokensAndMasksFromIndexedDatasets) {
  std::string dir = testutil::makeTempDir("sft");
  {
    StatusOr<IndexedDatasetWriter> tokens =
        IndexedDatasetWriter::create(dir + "/t", TokenDType::Int32);
    StatusOr<IndexedDatasetWriter> masks =
        IndexedDatasetWriter::create(dir + "/t_loss_mask", TokenDType::UInt8);
    ASSERT_TRUE(tokens && masks);
    for (const auto &sample : numberedSamples({3, 4})) {
      ASSERT_TRUE(tokens->addSequence(sample));
      tokens->endDocument();
      std::vector<int32_t> mask(sample.size(), 1);
      mask[1] = 0;
      ASSERT_TRUE(masks->addSequence(mask));
      masks->endDocument();
    }
    ASSERT_TRUE(tokens->finalize());
    ASSERT_TRUE(masks->finalize());
  }
  PackingOptions options;
  options.sequenceLength = 16;
  StatusOr<SftLoader> loader =
      SftLoader::open(dir + "/t", dir + "/t_loss_mask", options);
  ASSERT_TRUE(loader) << loader.status().message();
  PackedBatch batch;
  ASSERT_TRUE(loader->nextBatch(1, batch));
  // Sample 2 (4 tokens) first, then sample 1; then 9 of padding.
  EXPECT_EQ(batch.cuSeqlens, (std::vector<int32_t>{0, 4, 7, 16}));
  EXPECT_EQ(
      std::vector<int32_t>(batch.inputs.begin(), batch.inputs.begin() + 7),
      (std::vector<int32_t>{200, 201, 202, 203, 100, 101, 102}));
  EXPECT_EQ(
      std::vector<float>(batch.lossMask.begin(), batch.lossMask.begin() + 7),
      (std::vector<float>{0, 1, 1, 0, 0, 1, 0}));
  StatusOr<SftLoader> mismatched =
      SftLoader::open(dir + "/t", dir + "/t", options);
  EXPECT_TRUE(mismatched); // same shape: accepted as a mask
}

// A compiled step's cu_seqlens holds one boundary per token and one: a
// batch's own boundaries, then empty documents at the end.
TEST(SftPacking, CuSeqlensPadToTheCompiledSizeWithEmptyDocuments) {
  auto padded = padCuSeqlens({0, 3, 8}, 5);
  ASSERT_TRUE(padded) << padded.status().message();
  EXPECT_EQ(*padded, (std::vector<int32_t>{0, 3, 8, 8, 8}));
  auto exact = padCuSeqlens({0, 3, 8}, 3);
  ASSERT_TRUE(exact);
  EXPECT_EQ(*exact, (std::vector<int32_t>{0, 3, 8}));
  auto over = padCuSeqlens({0, 1, 2, 3}, 3);
  ASSERT_FALSE(over);
  EXPECT_NE(over.status().message().find("packs 3 documents"),
            std::string::npos)
      << over.status().message();
  EXPECT_FALSE(padCuSeqlens({}, 3));
}
