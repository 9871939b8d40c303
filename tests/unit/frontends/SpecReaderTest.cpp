#include "spec/SpecReader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>

using namespace octet;
using namespace octet::spec;
using ::testing::HasSubstr;

namespace {

using Fields = std::map<std::string, std::string>;

// A block of text-format fields; an override with an empty value removes
// the field.
std::string block(Fields fields, const Fields &overrides) {
  for (const auto &[k, v] : overrides) {
    if (v.empty())
      fields.erase(k);
    else
      fields[k] = v;
  }
  std::string out;
  for (const auto &[k, v] : fields)
    out += k + (v[0] == '{' ? " " : ": ") + v + "\n";
  return out;
}

std::string specText(const Fields &model = {}, const Fields &train = {}) {
  Fields baseModel = {
      {"architecture", "\"llama\""}, {"vocab_size", "256"},
      {"hidden_size", "64"},         {"intermediate_size", "128"},
      {"num_layers", "2"},           {"num_heads", "4"},
      {"num_kv_heads", "2"}};
  Fields baseTrain = {{"micro_batch_size", "2"}, {"seq_len", "16"}};
  return "model {\n" + block(baseModel, model) + "}\ntrain {\n" +
         block(baseTrain, train) + "}\n";
}

StatusOr<Spec> resolveText(const std::string &text) {
  StatusOr<Spec> parsed = parseSpecText(text, "test.pbtxt");
  if (!parsed)
    return parsed;
  return resolveSpec(*parsed);
}

// The resolve error of a spec that must fail.
std::string errorOf(const Fields &model, const Fields &train = {}) {
  StatusOr<Spec> spec = resolveText(specText(model, train));
  EXPECT_FALSE(spec.isOk()) << "spec unexpectedly valid:\n"
                            << specText(model, train);
  return spec.isOk() ? "" : spec.status().message();
}

TEST(SpecReader, MinimalSpecTakesDocumentedDefaults) {
  StatusOr<Spec> spec = resolveText(specText());
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  const ModelSpec &m = spec->model();
  EXPECT_EQ(m.head_dim(), 16);
  EXPECT_EQ(m.num_kv_heads(), 2);
  EXPECT_EQ(m.norm(), "rms_norm");
  EXPECT_EQ(m.activation(), "swiglu");
  EXPECT_EQ(m.position_embedding(), "rope");
  EXPECT_EQ(m.rope_theta(), 10000.0);
  EXPECT_EQ(m.norm_eps(), 1e-5);
  EXPECT_EQ(m.init_std(), 0.02);
  EXPECT_FALSE(m.tie_word_embeddings());
  EXPECT_FALSE(m.qkv_bias());
  const TrainSpec &t = spec->train();
  EXPECT_EQ(t.global_batch_size(), 2);
  EXPECT_EQ(t.steps(), 1000);
  EXPECT_EQ(t.optimizer().warmup_steps(), 100);
  EXPECT_EQ(t.optimizer().beta2(), 0.95);
  EXPECT_EQ(t.grad_clip(), 1.0);
  EXPECT_EQ(t.precision().recipe(), "delayed");
  EXPECT_EQ(t.precision().format(), "hybrid");
  EXPECT_EQ(t.precision().amax_history_len(), 1024);
  EXPECT_EQ(t.precision().amax_algorithm(), "max");
  EXPECT_EQ(t.data().kind(), "synthetic");
  EXPECT_EQ(t.parallel().data(), 1);
}

TEST(SpecReader, ResolvingTwiceChangesNothing) {
  StatusOr<Spec> once = resolveText(specText());
  ASSERT_TRUE(once.isOk());
  StatusOr<Spec> twice = resolveSpec(*once);
  ASSERT_TRUE(twice.isOk());
  EXPECT_EQ(once->SerializeAsString(), twice->SerializeAsString());
}

TEST(SpecReader, Gpt2DefaultsFollowTheArchitecture) {
  StatusOr<Spec> spec =
      resolveText(specText({{"architecture", "\"gpt2\""},
                            {"intermediate_size", ""},
                            {"num_kv_heads", ""},
                            {"max_position_embeddings", "64"}},
                           {{"seq_len", ""}}));
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  const ModelSpec &m = spec->model();
  EXPECT_EQ(m.norm(), "layer_norm");
  EXPECT_EQ(m.activation(), "gelu_tanh");
  EXPECT_EQ(m.position_embedding(), "learned");
  EXPECT_EQ(m.intermediate_size(), 256);
  EXPECT_TRUE(m.tie_word_embeddings());
  EXPECT_TRUE(m.qkv_bias() && m.attn_out_bias() && m.mlp_bias());
  EXPECT_FALSE(m.has_rope_theta());
  EXPECT_EQ(spec->train().seq_len(), 64);
}

TEST(SpecReader, UnknownFieldNamesFieldLineAndSuggestion) {
  StatusOr<Spec> spec = parseSpecText(
      "model {\n  architecture: \"llama\"\n  hiden_size: 4\n}\n", "my.pbtxt");
  ASSERT_FALSE(spec.isOk());
  EXPECT_THAT(spec.status().message(), HasSubstr("my.pbtxt:3:"));
  EXPECT_THAT(spec.status().message(), HasSubstr("\"hiden_size\""));
  EXPECT_THAT(spec.status().message(),
              HasSubstr("did you mean \"hidden_size\""));
}

TEST(SpecReader, MalformedValueIsAParseError) {
  StatusOr<Spec> spec =
      parseSpecText("model { vocab_size: \"many\" }", "my.pbtxt");
  ASSERT_FALSE(spec.isOk());
  EXPECT_THAT(spec.status().message(), HasSubstr("my.pbtxt:1:"));
  EXPECT_THAT(spec.status().message(),
              HasSubstr("field \"vocab_size\": Expected integer"));
}

TEST(SpecReader, MissingRequiredFieldsAreEachNamed) {
  std::string msg = errorOf({{"vocab_size", ""}, {"num_layers", ""}});
  EXPECT_THAT(msg, HasSubstr("model.vocab_size: missing"));
  EXPECT_THAT(msg, HasSubstr("model.num_layers: missing"));
  EXPECT_THAT(errorOf({{"architecture", ""}}),
              HasSubstr("model.architecture: missing; set one of \"llama\""));
  EXPECT_THAT(errorOf({{"intermediate_size", ""}}),
              HasSubstr("model.intermediate_size: missing"));
  StatusOr<Spec> noModel = resolveText("train { seq_len: 8 }");
  ASSERT_FALSE(noModel.isOk());
  EXPECT_THAT(noModel.status().message(),
              HasSubstr("model.architecture: missing"));
}

TEST(SpecReader, NonPositiveSizesAreErrors) {
  EXPECT_THAT(errorOf({{"hidden_size", "0"}}),
              HasSubstr("model.hidden_size: must be positive, got 0"));
  EXPECT_THAT(errorOf({{"num_layers", "-1"}}),
              HasSubstr("model.num_layers: must be positive, got -1"));
  EXPECT_THAT(errorOf({{"head_dim", "0"}}), HasSubstr("model.head_dim"));
  EXPECT_THAT(errorOf({}, {{"micro_batch_size", "0"}}),
              HasSubstr("train.micro_batch_size: must be positive"));
  EXPECT_THAT(errorOf({}, {{"seq_len", "-8"}}),
              HasSubstr("train.seq_len: must be positive"));
  EXPECT_THAT(errorOf({}, {{"parallel", "{ tensor: 0 }"}}),
              HasSubstr("train.parallel.tensor: must be positive"));
}

TEST(SpecReader, UnknownEnumStringsNameFieldAndChoices) {
  EXPECT_THAT(errorOf({{"architecture", "\"mamba\""}}),
              HasSubstr("model.architecture: unknown value \"mamba\"; "
                        "expected one of \"llama\", \"gpt2\""));
  EXPECT_THAT(errorOf({{"norm", "\"rmsnorm\""}}),
              HasSubstr("model.norm: unknown value \"rmsnorm\""));
  EXPECT_THAT(errorOf({{"activation", "\"relu\""}}),
              HasSubstr("model.activation: unknown value \"relu\""));
  EXPECT_THAT(errorOf({{"position_embedding", "\"alibi\""}}),
              HasSubstr("model.position_embedding: unknown value"));
  EXPECT_THAT(errorOf({}, {{"precision", "{ recipe: \"mxfp8\" }"}}),
              HasSubstr("train.precision.recipe: unknown value \"mxfp8\""));
  EXPECT_THAT(errorOf({}, {{"precision", "{ format: \"e5m2\" }"}}),
              HasSubstr("train.precision.format: unknown value \"e5m2\""));
  EXPECT_THAT(errorOf({}, {{"precision", "{ amax_algorithm: \"mean\" }"}}),
              HasSubstr("train.precision.amax_algorithm: unknown value"));
  EXPECT_THAT(errorOf({}, {{"data", "{ kind: \"parquet\" }"}}),
              HasSubstr("train.data.kind: unknown value \"parquet\""));
  EXPECT_THAT(errorOf({{"rope_scaling", "{ type: \"yarn\" }"}}),
              HasSubstr("model.rope_scaling.type: unknown value \"yarn\""));
}

TEST(SpecReader, HeadsMustDivideHiddenUnlessHeadDimIsSet) {
  std::string msg = errorOf({{"num_heads", "5"}, {"num_kv_heads", "5"}});
  EXPECT_THAT(msg, HasSubstr("model.num_heads: 5 does not divide "
                             "hidden_size (64)"));
  EXPECT_THAT(msg, HasSubstr("set head_dim"));
  StatusOr<Spec> withHeadDim = resolveText(specText(
      {{"num_heads", "5"}, {"num_kv_heads", "5"}, {"head_dim", "16"}}));
  EXPECT_TRUE(withHeadDim.isOk()) << withHeadDim.status().message();
}

TEST(SpecReader, KvHeadsMustDivideHeads) {
  EXPECT_THAT(errorOf({{"num_kv_heads", "3"}}),
              HasSubstr("model.num_kv_heads: 3 does not divide num_heads (4)"));
}

TEST(SpecReader, Llama3RopeScalingNeedsAllItsFields) {
  std::string msg =
      errorOf({{"rope_scaling", "{ type: \"llama3\" low_freq_factor: 1 "
                                "high_freq_factor: 4 "
                                "original_max_position_embeddings: 8192 }"}});
  EXPECT_THAT(msg, HasSubstr("model.rope_scaling.factor: missing"));
  EXPECT_THAT(errorOf({{"rope_scaling", "{ type: \"llama3\" factor: 8 }"}}),
              HasSubstr("model.rope_scaling.original_max_position_embeddings: "
                        "missing"));
  EXPECT_THAT(errorOf({{"rope_scaling", "{ factor: 8 }"}}),
              HasSubstr("model.rope_scaling.type: missing"));
  EXPECT_THAT(
      errorOf({{"rope_scaling", "{ type: \"llama3\" factor: 8 "
                                "low_freq_factor: 4 high_freq_factor: 1 "
                                "original_max_position_embeddings: 8192 }"}}),
      HasSubstr("model.rope_scaling.high_freq_factor: must exceed "
                "low_freq_factor"));
}

TEST(SpecReader, GlobalBatchMustBeAMultipleOfMicroTimesData) {
  std::string msg =
      errorOf({}, {{"global_batch_size", "10"}, {"parallel", "{ data: 2 }"}});
  EXPECT_THAT(msg, HasSubstr("train.global_batch_size: 10 is not a multiple "
                             "of micro_batch_size × parallel.data = 2 × 2 = "
                             "4; set it to a multiple such as 8 or 12"));
}

TEST(SpecReader, ArchitectureContradictions) {
  Fields gpt2 = {{"architecture", "\"gpt2\""},
                 {"max_position_embeddings", "64"}};
  Fields rope = gpt2;
  rope["position_embedding"] = "\"rope\"";
  EXPECT_THAT(errorOf(rope),
              HasSubstr("model.position_embedding: \"rope\" contradicts "
                        "architecture \"gpt2\""));
  Fields theta = gpt2;
  theta["rope_theta"] = "10000";
  EXPECT_THAT(errorOf(theta),
              HasSubstr("model.rope_theta: is set, but position_embedding "
                        "is \"learned\""));
  EXPECT_THAT(errorOf({{"norm", "\"layer_norm\""}}),
              HasSubstr("model.norm: \"layer_norm\" contradicts architecture "
                        "\"llama\", which uses \"rms_norm\""));
  EXPECT_THAT(errorOf({{"activation", "\"gelu\""}}),
              HasSubstr("model.activation: \"gelu\" contradicts"));
  Fields noPositions = gpt2;
  noPositions["max_position_embeddings"] = "";
  EXPECT_THAT(errorOf(noPositions),
              HasSubstr("model.max_position_embeddings: missing"));
  EXPECT_THAT(errorOf(gpt2, {{"seq_len", "128"}}),
              HasSubstr("train.seq_len: 128 exceeds "
                        "model.max_position_embeddings (64)"));
  EXPECT_THAT(errorOf({{"head_dim", "15"}, {"num_heads", "4"}}),
              HasSubstr("model.head_dim: 15 is odd"));
}

TEST(SpecReader, TrainContradictions) {
  EXPECT_THAT(
      errorOf({}, {{"steps", "10"}, {"optimizer", "{ warmup_steps: 20 }"}}),
      HasSubstr("train.optimizer.warmup_steps: 20 exceeds "
                "train.steps (10)"));
  EXPECT_THAT(errorOf({}, {{"optimizer", "{ beta2: 1.5 }"}}),
              HasSubstr("train.optimizer.beta2: must lie in [0, 1)"));
  EXPECT_THAT(errorOf({}, {{"data", "{ kind: \"text\" }"}}),
              HasSubstr("train.data.path: missing"));
  EXPECT_THAT(errorOf({}, {{"data", "{ kind: \"jsonl\" path: \"a.jsonl\" }"}}),
              HasSubstr("train.data.tokenizer: missing"));
  EXPECT_THAT(errorOf({{"vocab_size", "100"}},
                      {{"data", "{ kind: \"text\" path: \"c.txt\" }"}}),
              HasSubstr("train.data.kind: \"text\" feeds byte tokens"));
  EXPECT_THAT(
      errorOf({}, {{"precision", "{ recipe: \"bf16\" format: \"e4m3\" }"}}),
      HasSubstr("train.precision.format: is set, but recipe is \"bf16\""));
  EXPECT_THAT(
      errorOf({}, {{"precision",
                    "{ first_last_layers_bf16 { first: 2 last: 1 } }"}}),
      HasSubstr("train.precision.first_last_layers_bf16.last: first "
                "+ last (3) exceeds model.num_layers (2)"));
  EXPECT_THAT(errorOf({}, {{"parallel", "{ tensor: 4 }"}}),
              HasSubstr("train.parallel.tensor: 4 does not divide "
                        "model.num_kv_heads (2)"));
  EXPECT_THAT(errorOf({{"sliding_window", "8"}}),
              HasSubstr("train.seq_len: 16 exceeds model.sliding_window (8)"));
}

TEST(SpecReader, Fp8LmHeadNeedsTheDelayedRecipe) {
  // Default: the head stays BF16.
  StatusOr<Spec> plain = resolveText(specText());
  ASSERT_TRUE(plain.isOk()) << plain.status().message();
  EXPECT_FALSE(plain->train().precision().lm_head_fp8());
  StatusOr<Spec> delayed = resolveText(
      specText({}, {{"precision", "{ recipe: \"delayed\" lm_head_fp8: true }"}}));
  ASSERT_TRUE(delayed.isOk()) << delayed.status().message();
  EXPECT_TRUE(delayed->train().precision().lm_head_fp8());
  // A tied head is the embedding table's GEMMs: they go FP8 the same way.
  StatusOr<Spec> tied = resolveText(specText(
      {{"tie_word_embeddings", "true"}},
      {{"precision", "{ lm_head_fp8: true }"}}));
  EXPECT_TRUE(tied.isOk()) << tied.status().message();
  EXPECT_THAT(
      errorOf({}, {{"precision", "{ recipe: \"bf16\" lm_head_fp8: true }"}}),
      HasSubstr("train.precision.lm_head_fp8: is true, but recipe is "
                "\"bf16\", so no GEMM is FP8; set recipe \"delayed\" or "
                "remove the field"));
  for (const char *recipe : {"current", "blockwise"}) {
    std::string error = errorOf(
        {}, {{"precision", std::string("{ recipe: \"") + recipe +
                               "\" lm_head_fp8: true }"}});
    EXPECT_THAT(error, HasSubstr(std::string("train.precision.lm_head_fp8: is "
                                             "true, but recipe is \"") +
                                 recipe + "\": an FP8 head is compiled for "
                                          "\"delayed\" only"));
    EXPECT_THAT(error, HasSubstr("set recipe \"delayed\" or remove the field"));
  }
  // false is the default spelled out: valid under any recipe.
  EXPECT_TRUE(resolveText(specText({}, {{"precision",
                                         "{ recipe: \"current\" "
                                         "lm_head_fp8: false }"}}))
                  .isOk());
}

TEST(SpecReader, Bf16WeightCastNamesTheLayoutsThatCannotHonourIt) {
  // Either value at one GPU, under the bf16 and the FP8 recipes (whose BF16
  // head it covers), and with a replicated optimizer over data ranks.
  for (const char *cast : {"step", "optimizer"})
    for (const char *recipe : {"bf16", "delayed", "current", "blockwise"}) {
      StatusOr<Spec> ok = resolveText(specText(
          {}, {{"codegen", std::string("{ bf16_weight_cast: \"") + cast +
                               "\" }"},
               {"precision", std::string("{ recipe: \"") + recipe + "\" }"},
               {"global_batch_size", "4"},
               {"parallel", "{ data: 2 }"}}));
      EXPECT_TRUE(ok.isOk()) << cast << " " << recipe << ": "
                             << ok.status().message();
    }
  EXPECT_THAT(
      errorOf({}, {{"codegen", "{ bf16_weight_cast: \"cached\" }"}}),
      HasSubstr("train.codegen.bf16_weight_cast: unknown value \"cached\"; "
                "expected one of \"step\", \"optimizer\""));
  // ZeRO-1 gathers the copies' parts: "optimizer" (its default) only.
  Fields zero1 = {{"global_batch_size", "4"},
                  {"parallel", "{ data: 2 shard_optimizer: true }"}};
  EXPECT_TRUE(resolveText(specText({}, zero1)).isOk());
  Fields zero1Optimizer = zero1;
  zero1Optimizer["codegen"] = "{ bf16_weight_cast: \"optimizer\" }";
  EXPECT_TRUE(resolveText(specText({}, zero1Optimizer)).isOk());
  Fields zero1Step = zero1;
  zero1Step["codegen"] = "{ bf16_weight_cast: \"step\" }";
  std::string error = errorOf({}, zero1Step);
  EXPECT_THAT(error, HasSubstr("train.codegen.bf16_weight_cast: \"step\" "
                               "cannot be honoured with "
                               "train.parallel.shard_optimizer"));
  EXPECT_THAT(error, HasSubstr("remove the field or set it to \"optimizer\""));
  // Pipeline stages cast in the step: "step" (their default) only.
  Fields pp2 = {{"global_batch_size", "8"}, {"parallel", "{ pipeline: 2 }"},
                {"codegen", "{ bf16_weight_cast: \"step\" }"}};
  EXPECT_TRUE(resolveText(specText({}, pp2)).isOk());
  pp2["codegen"] = "{ bf16_weight_cast: \"optimizer\" }";
  error = errorOf({}, pp2);
  EXPECT_THAT(error, HasSubstr("train.codegen.bf16_weight_cast: "
                               "\"optimizer\" cannot be honoured with "
                               "train.parallel.pipeline > 1"));
  EXPECT_THAT(error, HasSubstr("remove the field or set it to \"step\""));
  // ZeRO-1 under a pipeline keeps no BF16 copies: "step" is honoured there.
  EXPECT_TRUE(resolveText(specText(
                  {}, {{"global_batch_size", "16"},
                       {"parallel",
                        "{ data: 2 pipeline: 2 shard_optimizer: true }"},
                       {"codegen", "{ bf16_weight_cast: \"step\" }"}}))
                  .isOk());
}

TEST(SpecReader, PipelineLayoutsNameTheFieldAndTheFix) {
  // The base model has 2 layers; a global batch of 8 rows is 4 microbatches.
  Fields pp2 = {{"global_batch_size", "8"}, {"parallel", "{ pipeline: 2 }"}};
  StatusOr<Spec> ok = resolveText(specText({}, pp2));
  ASSERT_TRUE(ok.isOk()) << ok.status().message();
  EXPECT_EQ(ok->train().parallel().schedule(), "1f1b");
  EXPECT_EQ(ok->train().parallel().virtual_stages(), 1);
  StatusOr<Spec> interleaved = resolveText(specText(
      {{"num_layers", "4"}},
      {{"global_batch_size", "8"},
       {"parallel", "{ pipeline: 2 virtual_stages: 2 }"}}));
  ASSERT_TRUE(interleaved.isOk()) << interleaved.status().message();
  EXPECT_EQ(interleaved->train().parallel().schedule(), "interleaved");

  // The compiler's cost model cuts any layer count; no divisor needed.
  StatusOr<Spec> odd = resolveText(specText({{"num_layers", "3"}}, pp2));
  EXPECT_TRUE(odd.isOk()) << odd.status().message();
  EXPECT_THAT(errorOf({}, {{"global_batch_size", "8"},
                           {"parallel", "{ pipeline: 4 }"}}),
              HasSubstr("train.parallel.pipeline: pipeline × virtual_stages "
                        "= 4 × 1 = 4 chunks exceed model.num_layers (2)"));
  EXPECT_THAT(
      errorOf({{"num_layers", "4"}},
              {{"global_batch_size", "8"},
               {"parallel",
                "{ pipeline: 2 virtual_stages: 2 schedule: \"1f1b\" }"}}),
      HasSubstr("train.parallel.virtual_stages: 2 chunks a rank need "
                "schedule \"interleaved\", but schedule is \"1f1b\"; set "
                "schedule: \"interleaved\" or virtual_stages: 1"));
  EXPECT_THAT(errorOf({}, {{"global_batch_size", "8"},
                           {"parallel",
                            "{ pipeline: 2 schedule: \"interleaved\" }"}}),
              HasSubstr("train.parallel.schedule: \"interleaved\" needs "
                        "virtual_stages of at least 2"));
  EXPECT_THAT(errorOf({}, {{"global_batch_size", "8"},
                           {"parallel", "{ pipeline: 2 schedule: \"gpipe\" }"}}),
              HasSubstr("train.parallel.schedule: unknown value \"gpipe\""));
  EXPECT_THAT(errorOf({}, {{"global_batch_size", "2"},
                           {"parallel", "{ pipeline: 2 }"}}),
              HasSubstr("train.parallel.pipeline: 2 stages need at least as "
                        "many microbatches a step, but global_batch_size / "
                        "(micro_batch_size × parallel.data) = 2 / (2 × 1) = "
                        "1 microbatches a step; raise "
                        "train.global_batch_size to 4 or more"));
  EXPECT_THAT(
      errorOf({{"num_layers", "4"}},
              {{"global_batch_size", "6"},
               {"parallel", "{ pipeline: 2 virtual_stages: 2 }"}}),
      HasSubstr("train.parallel.virtual_stages: the interleaved schedule "
                "runs microbatches in groups of pipeline (2)"));
  EXPECT_THAT(
      errorOf({{"num_layers", "3"}},
              {{"global_batch_size", "8"},
               {"parallel", "{ pipeline: 2 layer_split: [1, 1] }"}}),
      HasSubstr("train.parallel.layer_split: sums to 2 layers, but "
                "model.num_layers is 3"));
  EXPECT_THAT(errorOf({{"num_layers", "3"}},
                      {{"global_batch_size", "8"},
                       {"parallel", "{ pipeline: 2 layer_split: [3] }"}}),
              HasSubstr("train.parallel.layer_split: has 1 entries, but "
                        "pipeline × virtual_stages = 2 × 1 = 2 chunks"));
  EXPECT_THAT(errorOf({{"num_layers", "3"}},
                      {{"global_batch_size", "8"},
                       {"parallel", "{ pipeline: 2 layer_split: [3, 0] }"}}),
              HasSubstr("train.parallel.layer_split: entry 1 is 0"));
  StatusOr<Spec> split = resolveText(
      specText({{"num_layers", "3"}},
               {{"global_batch_size", "8"},
                {"parallel", "{ pipeline: 2 layer_split: [2, 1] }"}}));
  EXPECT_TRUE(split.isOk()) << split.status().message();
  EXPECT_THAT(errorOf({}, {{"parallel", "{ schedule: \"zb-h1\" }"}}),
              HasSubstr("train.parallel.schedule: is set, but "
                        "train.parallel.pipeline is 1"));
}

TEST(SpecReader, RunStepsReplaceTrainSteps) {
  StatusOr<Spec> parsed = parseSpecText(specText({}, {{"steps", "500"}}),
                                        "test.pbtxt");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  RunSettings run;
  run.steps = 30;
  StatusOr<Spec> spec = resolveSpec(*parsed, run);
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  EXPECT_EQ(spec->train().steps(), 30);
  // The default warmup is a tenth of the run, not of the spec's 500 steps.
  EXPECT_EQ(spec->train().optimizer().warmup_steps(), 3);
}

TEST(SpecReader, WarmupLongerThanTheRunSaysSoInTheRunsTerms) {
  StatusOr<Spec> parsed = parseSpecText(
      specText({}, {{"steps", "500"}, {"optimizer", "{ warmup_steps: 50 }"}}),
      "test.pbtxt");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  RunSettings run;
  run.steps = 20;
  StatusOr<Spec> spec = resolveSpec(*parsed, run);
  ASSERT_FALSE(spec.isOk());
  EXPECT_EQ(spec.status().message(),
            "train.optimizer.warmup_steps: 50 exceeds the run's 20 steps "
            "(train.steps is 500 in the spec); the LR warmup must end within "
            "the run: train for 50 steps or more, or set "
            "train.optimizer.warmup_steps to 20 or fewer");
  run.steps = 50;
  EXPECT_TRUE(resolveSpec(*parsed, run).isOk());
}

TEST(SpecReader, LoadSpecFileLocatesIssues) {
  std::string path = ::testing::TempDir() + "octet-spec-locate.pbtxt";
  {
    std::ofstream out(path);
    out << specText({{"num_kv_heads", "3"}});
  }
  StatusOr<Spec> spec = loadSpecFile(path);
  std::remove(path.c_str());
  ASSERT_FALSE(spec.isOk());
  // num_kv_heads sorts onto line 6 of the generated text.
  EXPECT_THAT(spec.status().message(),
              HasSubstr(path + ":6:1: model.num_kv_heads: 3 does not divide"));
}

TEST(SpecReader, MissingFileNamesThePath) {
  StatusOr<Spec> spec = loadSpecFile("/nonexistent/spec.pbtxt");
  ASSERT_FALSE(spec.isOk());
  EXPECT_THAT(spec.status().message(),
              HasSubstr("/nonexistent/spec.pbtxt: cannot open"));
}

} // namespace
