// `octet compile SPEC -o X.octet` end to end: the bundle is byte-identical
// across runs, parses and validates, carries the spec, parameters, state,
// plan and programs, and is refused by the runtime check while codegen does
// not cover its kernels.

#include "runtime/bundle/Bundle.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace {

std::string compileTinyLlama(const std::string &out) {
  std::string cmd = std::string(OCTET_BINARY) + " compile " +
                    OCTET_SOURCE_DIR "/examples/tiny-llama.pbtxt -o " + out +
                    " > " + out + ".log 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(out, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(EmitBundle, TinyLlamaIsDeterministicAndComplete) {
  std::string dir = ::testing::TempDir();
  std::string first = compileTinyLlama(dir + "/tiny-a.octet");
  std::string second = compileTinyLlama(dir + "/tiny-b.octet");
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first, second) << "two compiles of the same spec differ";

  auto parsed = octet::bundle::parseBundle(first, "tiny-a.octet");
  ASSERT_TRUE(parsed) << parsed.status().message();
  const octet::bundle::Bundle &b = *parsed;
  EXPECT_EQ(b.format_version(), octet::bundle::kBundleFormatVersion);
  EXPECT_EQ(b.build().spec_format(), "pbtxt");
  EXPECT_NE(b.build().spec_text().find("num_layers"), std::string::npos);
  EXPECT_EQ(b.world_size(), 1u);
  ASSERT_EQ(b.ranks_size(), 1);

  // tiny-llama: 4 layers of 6 parameters (fused QKV and gate/up count once:
  // two norms, wqkv, wo, w_gate_up, w_down) plus embedding, final norm and
  // LM head.
  ASSERT_EQ(b.parameters_size(), 4 * 6 + 3);
  int64_t elements = 0;
  for (const auto &p : b.parameters()) {
    int64_t n = 1;
    for (int64_t d : p.shape())
      n *= d;
    elements += n;
    EXPECT_EQ(b.plan().slots(int(p.slot())).name(), p.name());
    EXPECT_EQ(b.plan().slots(int(p.grad_slot())).name(), "grad." + p.name());
  }
  EXPECT_EQ(elements, 3279104);
  EXPECT_EQ(b.parameters(0).hf_name(), "model.embed_tokens.weight");

  // Schedule from the spec's train block; FLOPs per token: 6 per linear
  // weight (4 layers x 786432 + LM head 65536) plus 6·L·H·Dh·S of causal
  // attention (4 layers, 4 heads of 64, sequence 128).
  EXPECT_EQ(b.schedule().micro_batch_size(), 8);
  EXPECT_EQ(b.schedule().seq_len(), 128);
  EXPECT_EQ(b.schedule().vocab_size(), 256);
  EXPECT_DOUBLE_EQ(b.schedule().flops_per_token(),
                   6.0 * (4 * 786432 + 65536) + 6.0 * 4 * 4 * 64 * 128);

  std::vector<std::string> programs;
  for (const auto &p : b.ranks(0).programs()) {
    programs.push_back(p.name());
    EXPECT_GT(p.steps_size(), 0) << p.name();
  }
  EXPECT_EQ(programs, (std::vector<std::string>{"forward", "train_microbatch",
                                                "optimizer_step",
                                                "fp8_weight_init"}));
  EXPECT_GT(b.gemms_size(), 0);
  EXPECT_GT(b.precision_size(), 0);
  EXPECT_EQ(b.plan().arenas(0).alignment(), 256u);
  for (const auto &s : b.plan().slots())
    EXPECT_EQ(s.offset() % 256, 0u) << s.name();

  // The fused kernels have no code in the bundle yet: the runtime's check
  // refuses it and names one of them.
  octet::Status runnable = octet::bundle::checkRunnable(b);
  EXPECT_FALSE(runnable);
  EXPECT_NE(runnable.message().find("have no code"), std::string::npos)
      << runnable.message();
  EXPECT_NE(runnable.message().find("forward.embedding.0"), std::string::npos)
      << runnable.message();
}

} // namespace
