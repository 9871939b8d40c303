#include "hf/HfConfig.h"
#include "spec/SpecReader.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <vector>

using namespace octet;
using ::testing::HasSubstr;

namespace {

const std::string kExamples = OCTET_SOURCE_DIR "/examples/";

// A Llama-family config.json: the base keys less `drop`, then `extra`.
std::string llamaJson(const std::string &extra = "",
                      const std::string &drop = "") {
  std::vector<std::pair<std::string, std::string>> keys = {
      {"architectures", "[\"LlamaForCausalLM\"]"},
      {"model_type", "\"llama\""},
      {"vocab_size", "256"},
      {"hidden_size", "64"},
      {"intermediate_size", "128"},
      {"num_hidden_layers", "2"},
      {"num_attention_heads", "4"},
      {"rms_norm_eps", "1e-05"}};
  std::string out = "{\n";
  for (const auto &[key, value] : keys)
    if (key != drop)
      out += "  \"" + key + "\": " + value + ",\n";
  if (extra.empty())
    out.erase(out.size() - 2, 1);
  return out + extra + "\n}";
}

std::string errorOf(const std::string &json) {
  StatusOr<spec::ModelSpec> model = hf::importHfConfig(json, "config.json");
  EXPECT_FALSE(model.isOk()) << "config unexpectedly valid:\n" << json;
  return model.isOk() ? "" : model.status().message();
}

spec::ModelSpec modelOf(const std::string &json) {
  StatusOr<spec::ModelSpec> model = hf::importHfConfig(json, "config.json");
  EXPECT_TRUE(model.isOk()) << model.status().message();
  return model.isOk() ? *model : spec::ModelSpec();
}

void expectSameModel(const std::string &hfConfig, const std::string &pbtxt) {
  StatusOr<spec::ModelSpec> fromHf = hf::readHfConfigFile(hfConfig);
  ASSERT_TRUE(fromHf.isOk()) << fromHf.status().message();
  StatusOr<spec::Spec> fromSpec = spec::loadSpecFile(pbtxt);
  ASSERT_TRUE(fromSpec.isOk()) << fromSpec.status().message();
  std::string diff;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(*fromHf, fromSpec->model())) << diff;
}

TEST(HfConfig, Llama32OneBMatchesItsSpec) {
  expectSameModel(kExamples + "hf/Llama-3.2-1B/config.json",
                  kExamples + "llama3.2-1b.pbtxt");
}

TEST(HfConfig, Llama3EightBMatchesItsSpec) {
  expectSameModel(kExamples + "hf/Llama-3-8B/config.json",
                  kExamples + "llama3-8b.pbtxt");
}

TEST(HfConfig, TransformersDefaultsFillAbsentKeys) {
  spec::ModelSpec m = modelOf(llamaJson());
  EXPECT_EQ(m.architecture(), "llama");
  EXPECT_EQ(m.num_kv_heads(), 4);
  EXPECT_EQ(m.head_dim(), 16);
  EXPECT_EQ(m.rope_theta(), 10000.0);
  EXPECT_EQ(m.max_position_embeddings(), 2048);
  EXPECT_EQ(m.activation(), "swiglu");
  EXPECT_FALSE(m.tie_word_embeddings());
  EXPECT_FALSE(m.has_rope_scaling());
}

TEST(HfConfig, Qwen2HasQkvBiasOnly) {
  spec::ModelSpec m = modelOf(R"({"architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2", "vocab_size": 256, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2,
    "use_sliding_window": false, "sliding_window": 32,
    "tie_word_embeddings": true})");
  EXPECT_TRUE(m.qkv_bias());
  EXPECT_FALSE(m.attn_out_bias());
  EXPECT_FALSE(m.mlp_bias());
  EXPECT_TRUE(m.tie_word_embeddings());
  EXPECT_FALSE(m.has_sliding_window());
  EXPECT_EQ(m.max_position_embeddings(), 32768);
}

TEST(HfConfig, AttentionAndMlpBiasKeys) {
  spec::ModelSpec m =
      modelOf(llamaJson("\"attention_bias\": true, \"mlp_bias\": true"));
  EXPECT_TRUE(m.qkv_bias());
  EXPECT_TRUE(m.attn_out_bias());
  EXPECT_TRUE(m.mlp_bias());
}

TEST(HfConfig, MistralKeepsItsSlidingWindow) {
  std::string mistral = R"({"architectures": ["MistralForCausalLM"],
    "model_type": "mistral", "vocab_size": 256, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 1)";
  spec::ModelSpec m = modelOf(mistral + ", \"sliding_window\": 32}");
  EXPECT_EQ(m.sliding_window(), 32);
  EXPECT_EQ(modelOf(mistral + "}").sliding_window(), 4096);
  EXPECT_FALSE(
      modelOf(mistral + ", \"sliding_window\": null}").has_sliding_window());
  // A longer sequence than the window is refused, not silently mis-trained.
  spec::Spec s;
  *s.mutable_model() = m;
  s.mutable_train()->set_seq_len(64);
  StatusOr<spec::Spec> resolved = spec::resolveSpec(s);
  ASSERT_FALSE(resolved.isOk());
  EXPECT_THAT(resolved.status().message(),
              HasSubstr("train.seq_len: 64 exceeds model.sliding_window"));
}

TEST(HfConfig, Gpt2) {
  spec::ModelSpec m = modelOf(R"({"architectures": ["GPT2LMHeadModel"],
    "model_type": "gpt2", "vocab_size": 50257, "n_embd": 768, "n_layer": 12,
    "n_head": 12, "n_positions": 1024, "n_ctx": 1024, "n_inner": null,
    "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05,
    "initializer_range": 0.02, "resid_pdrop": 0.1, "attn_pdrop": 0.1,
    "embd_pdrop": 0.1, "scale_attn_weights": true})");
  EXPECT_EQ(m.architecture(), "gpt2");
  EXPECT_EQ(m.activation(), "gelu_tanh");
  EXPECT_EQ(m.intermediate_size(), 3072);
  EXPECT_EQ(m.max_position_embeddings(), 1024);
  EXPECT_TRUE(m.tie_word_embeddings());
  EXPECT_TRUE(m.qkv_bias() && m.attn_out_bias() && m.mlp_bias());
  StatusOr<spec::Spec> pbtxt =
      spec::loadSpecFile(kExamples + "gpt2-124m.pbtxt");
  ASSERT_TRUE(pbtxt.isOk()) << pbtxt.status().message();
  EXPECT_TRUE(
      google::protobuf::util::MessageDifferencer::Equals(m, pbtxt->model()));
}

TEST(HfConfig, RopeParametersBlockOfTransformers5) {
  spec::ModelSpec m = modelOf(llamaJson(
      R"("rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0,
          "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192})"));
  EXPECT_EQ(m.rope_theta(), 500000.0);
  EXPECT_EQ(m.rope_scaling().type(), "llama3");
  EXPECT_EQ(m.rope_scaling().factor(), 8.0);
  EXPECT_EQ(m.rope_scaling().original_max_position_embeddings(), 8192);
}

TEST(HfConfig, ModelTypeErrors) {
  EXPECT_THAT(errorOf(R"({"model_type": "mamba", "vocab_size": 2})"),
              HasSubstr("config.json: model_type: \"mamba\" is not "
                        "supported; octet imports llama, mistral, qwen2, "
                        "gpt2"));
  EXPECT_THAT(
      errorOf(R"({"architectures": ["LlamaForSequenceClassification"]})"),
      HasSubstr("architectures: \"LlamaForSequenceClassification\" "
                "is not supported"));
  EXPECT_THAT(errorOf(R"({"model_type": "llama",
                          "architectures": ["GPT2LMHeadModel"]})"),
              HasSubstr("architectures: \"GPT2LMHeadModel\" contradicts "
                        "model_type"));
  EXPECT_THAT(errorOf(R"({"vocab_size": 2})"),
              HasSubstr("model_type: missing"));
  EXPECT_THAT(errorOf("[1, 2]"), HasSubstr("expected a JSON object"));
}

TEST(HfConfig, InvalidJsonGivesLineAndColumn) {
  EXPECT_THAT(errorOf("{\n  \"model_type\": \"llama\",\n  oops\n}"),
              HasSubstr("config.json: parse error at line 3, column"));
}

TEST(HfConfig, MissingAndMistypedKeysAreNamed) {
  EXPECT_THAT(errorOf(llamaJson("", "hidden_size")),
              HasSubstr("config.json: hidden_size: missing"));
  EXPECT_THAT(errorOf(llamaJson("", "num_hidden_layers")),
              HasSubstr("num_hidden_layers: missing"));
  EXPECT_THAT(errorOf(llamaJson("\"num_key_value_heads\": \"2\"")),
              HasSubstr("num_key_value_heads: must be an integer, got \"2\""));
  EXPECT_THAT(errorOf(llamaJson("\"tie_word_embeddings\": 1")),
              HasSubstr("tie_word_embeddings: must be true or false"));
}

TEST(HfConfig, ContradictionsUseJsonKeys) {
  EXPECT_THAT(errorOf(llamaJson("\"num_key_value_heads\": 3")),
              HasSubstr("config.json: num_key_value_heads: 3 does not divide "
                        "num_attention_heads (4)"));
  EXPECT_THAT(errorOf(llamaJson("\"hidden_size\": 66", "hidden_size")),
              HasSubstr("num_attention_heads: 4 does not divide hidden_size "
                        "(66)"));
  EXPECT_THAT(errorOf(llamaJson("\"rms_norm_eps\": -1", "rms_norm_eps")),
              HasSubstr("rms_norm_eps: must be positive"));
}

TEST(HfConfig, RopeScalingErrors) {
  EXPECT_THAT(errorOf(llamaJson(R"("rope_scaling": {"rope_type": "llama3",
          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192})")),
              HasSubstr("config.json: rope_scaling.factor: missing"));
  EXPECT_THAT(errorOf(llamaJson(R"("rope_scaling": {"type": "yarn",
                                    "factor": 4.0})")),
              HasSubstr("rope_scaling.type: \"yarn\" is not supported"));
  EXPECT_THAT(errorOf(llamaJson(R"("rope_scaling": {"type": "linear",
                                    "rope_type": "llama3"})")),
              HasSubstr("rope_scaling.type: \"linear\" contradicts "
                        "rope_scaling.rope_type"));
  EXPECT_THAT(errorOf(llamaJson(R"("rope_scaling": {"factor": 4.0})")),
              HasSubstr("rope_scaling.type: missing"));
}

TEST(HfConfig, UnsupportedMathIsRefused) {
  EXPECT_THAT(errorOf(llamaJson("\"hidden_act\": \"gelu\"")),
              HasSubstr("hidden_act: \"gelu\" is not supported"));
  std::string gpt2 = R"({"model_type": "gpt2", "vocab_size": 256,
    "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 32)";
  EXPECT_THAT(errorOf(gpt2 + ", \"activation_function\": \"relu\"}"),
              HasSubstr("activation_function: \"relu\" is not supported"));
  EXPECT_THAT(errorOf(gpt2 + ", \"scale_attn_by_inverse_layer_idx\": true}"),
              HasSubstr("scale_attn_by_inverse_layer_idx: true is not "
                        "supported"));
  EXPECT_THAT(errorOf(R"({"model_type": "gpt2", "vocab_size": 256,
    "n_embd": 64, "n_layer": 2, "n_head": 4})"),
              HasSubstr("n_positions: missing"));
}

} // namespace
