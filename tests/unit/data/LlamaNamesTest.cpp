#include "runtime/checkpoint/LlamaNames.h"

#include <gtest/gtest.h>

using namespace octet;
using namespace octet::checkpoint;

TEST(LlamaNames, MapsEveryParameterBothWays) {
  std::vector<std::pair<std::string, std::string>> pairs = {
      {"embed", "model.embed_tokens.weight"},
      {"final_norm", "model.norm.weight"},
      {"lm_head", "lm_head.weight"},
      {"layers.0.attn.wq", "model.layers.0.self_attn.q_proj.weight"},
      {"layers.0.attn.wk", "model.layers.0.self_attn.k_proj.weight"},
      {"layers.0.attn.wv", "model.layers.0.self_attn.v_proj.weight"},
      {"layers.0.attn.wo", "model.layers.0.self_attn.o_proj.weight"},
      {"layers.12.mlp.w_gate", "model.layers.12.mlp.gate_proj.weight"},
      {"layers.12.mlp.w_up", "model.layers.12.mlp.up_proj.weight"},
      {"layers.12.mlp.w_down", "model.layers.12.mlp.down_proj.weight"},
      {"layers.3.attn_norm", "model.layers.3.input_layernorm.weight"},
      {"layers.3.mlp_norm", "model.layers.3.post_attention_layernorm.weight"},
      {"layers.1.attn.wq_bias", "model.layers.1.self_attn.q_proj.bias"},
      {"layers.1.mlp.w_down_bias", "model.layers.1.mlp.down_proj.bias"},
  };
  for (const auto &[octetName, hfName] : pairs) {
    StatusOr<std::string> hf = octetToHfName(octetName);
    ASSERT_TRUE(hf) << hf.status().message();
    EXPECT_EQ(*hf, hfName);
    StatusOr<std::string> back = hfToOctetName(hfName);
    ASSERT_TRUE(back) << back.status().message();
    EXPECT_EQ(*back, octetName);
  }
}

TEST(LlamaNames, RefusesNamesOutsideTheMap) {
  for (const char *name :
       {"layers.x.attn.wq", "layers.01.attn.wq", "layers.1.attn_norm_bias",
        "embed_bias", "layers.1.attn.wq.extra", "layers..attn.wq"}) {
    StatusOr<std::string> hf = octetToHfName(name);
    ASSERT_FALSE(hf) << name;
    EXPECT_NE(hf.status().message().find(name), std::string::npos);
  }
  StatusOr<std::string> rotary =
      hfToOctetName("model.layers.0.self_attn.rotary_emb.inv_freq");
  ASSERT_FALSE(rotary);
  EXPECT_NE(rotary.status().message().find("rotary_emb"), std::string::npos);
  EXPECT_FALSE(hfToOctetName("model.norm.bias"));
  EXPECT_FALSE(hfToOctetName("model.layers.0.input_layernorm.bias"));
}
