// The check against code nobody here wrote: loss and every parameter
// gradient of a tiny Llama match Hugging Face transformers'
// LlamaForCausalLM (float32), relative error <= 1e-4 per tensor
// (||ours - hf|| / ||hf||). The golden files come from
// tests/fixtures/make_hf_llama_golden.py; reading them needs no torch.

#include "tests/unit/interpreter/GradCheck.h"

#include "dialects/graph/GraphDialect.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

using octet::DType;
using octet::interp::Tensor;
using namespace octet::testing;

namespace {

const std::string kFixtures =
    std::string(OCTET_SOURCE_DIR) + "/tests/fixtures/hf_llama_tiny/";

// Just enough safetensors for the fixtures: F32 and I32 tensors.
std::map<std::string, Tensor> readSafetensors(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot open " << path
                  << "; regenerate with tests/fixtures/make_hf_llama_golden.py";
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  std::map<std::string, Tensor> out;
  if (bytes.size() < 8)
    return out;
  uint64_t headerLen;
  std::memcpy(&headerLen, bytes.data(), 8);
  auto header = nlohmann::json::parse(bytes.substr(8, headerLen));
  const char *data = bytes.data() + 8 + headerLen;
  for (auto &[name, info] : header.items()) {
    if (name == "__metadata__")
      continue;
    std::vector<int64_t> shape = info["shape"].get<std::vector<int64_t>>();
    uint64_t begin = info["data_offsets"][0], end = info["data_offsets"][1];
    size_t n = (end - begin) / 4;
    if (info["dtype"] == "F32") {
      std::vector<float> values(n);
      std::memcpy(values.data(), data + begin, end - begin);
      out[name] = Tensor::fromFloats(shape, std::move(values));
    } else {
      std::vector<int32_t> raw(n);
      std::memcpy(raw.data(), data + begin, end - begin);
      out[name] = Tensor::fromInts(
          shape, std::vector<int64_t>(raw.begin(), raw.end()), DType::I32);
    }
  }
  return out;
}

// Our parameter name for an HF Llama tensor name.
std::string ourName(const std::string &hf) {
  static const std::vector<std::pair<std::string, std::string>> suffixes = {
      {"input_layernorm.weight", "attn_norm"},
      {"self_attn.q_proj.weight", "attn.wq"},
      {"self_attn.k_proj.weight", "attn.wk"},
      {"self_attn.v_proj.weight", "attn.wv"},
      {"self_attn.o_proj.weight", "attn.wo"},
      {"post_attention_layernorm.weight", "mlp_norm"},
      {"mlp.gate_proj.weight", "mlp.w_gate"},
      {"mlp.up_proj.weight", "mlp.w_up"},
      {"mlp.down_proj.weight", "mlp.w_down"}};
  if (hf == "model.embed_tokens.weight")
    return "embed";
  if (hf == "model.norm.weight")
    return "final_norm";
  if (hf == "lm_head.weight")
    return "lm_head";
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) == 0) {
    size_t dot = hf.find('.', prefix.size());
    std::string layer = hf.substr(prefix.size(), dot - prefix.size());
    std::string rest = hf.substr(dot + 1);
    for (auto &[from, to] : suffixes)
      if (rest == from)
        return "layers." + layer + "." + to;
  }
  return "";
}

double relativeError(const Tensor &ours, const Tensor &ref) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    double d = double(ours.f()[i]) - ref.f()[i];
    diff += d * d;
    norm += double(ref.f()[i]) * ref.f()[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

TEST(HfLlama, LossAndEveryGradientMatchTransformers) {
  std::ifstream goldenFile(kFixtures + "golden.json");
  ASSERT_TRUE(goldenFile) << "missing " << kFixtures << "golden.json";
  nlohmann::json golden = nlohmann::json::parse(goldenFile);
  const auto &cfg = golden["config"];

  LlamaShape shape;
  shape.batch = golden["batch"];
  shape.seq = golden["seq_len"];
  shape.hidden = cfg["hidden_size"];
  shape.heads = cfg["num_attention_heads"];
  shape.kvHeads = cfg["num_key_value_heads"];
  shape.headDim = shape.hidden / shape.heads;
  shape.ffn = cfg["intermediate_size"];
  shape.vocab = cfg["vocab_size"];
  shape.layers = cfg["num_hidden_layers"];
  shape.tied = cfg["tie_word_embeddings"];
  shape.eps = cfg["rms_norm_eps"];
  shape.theta = cfg["rope_theta"];

  auto ctx = makeContext();
  auto module = parseAndDifferentiate(*ctx, llamaModule(shape));
  ASSERT_TRUE(module);

  auto weights = readSafetensors(kFixtures + "weights.safetensors");
  auto grads = readSafetensors(kFixtures + "grads.safetensors");
  auto batch = readSafetensors(kFixtures + "batch.safetensors");
  ASSERT_FALSE(weights.empty());

  octet::interp::VariableStore store;
  store.initialize(*module, 0);
  size_t loaded = 0;
  for (auto &[hf, tensor] : weights) {
    std::string name = ourName(hf);
    ASSERT_FALSE(name.empty()) << "no octet name for HF tensor " << hf;
    ASSERT_TRUE(store.has(name)) << name;
    ASSERT_EQ(store.get(name).shape(), tensor.shape()) << name;
    store.set(name, tensor);
    ++loaded;
  }
  // Every trainable parameter of ours came from the checkpoint.
  size_t trainable = 0;
  for (auto var : module->getOps<octet::graph::VariableOp>())
    trainable += var.isTrainable();
  ASSERT_EQ(loaded, trainable);

  octet::interp::Interpreter interpreter(*module);
  auto result = interpreter.run(
      "train_microbatch",
      {batch.at("input_ids"), batch.at("labels"), batch.at("loss_mask"),
       batch.at("position_ids")},
      store);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  double loss = (*result)[0].item(), hfLoss = golden["loss"];
  EXPECT_LE(std::fabs(loss - hfLoss) / std::fabs(hfLoss), 1e-4)
      << "loss " << loss << " vs transformers " << hfLoss;

  double worst = 0;
  std::string worstName;
  for (auto &[hf, ref] : grads) {
    std::string name = ourName(hf);
    const Tensor &ours = store.get("grad." + name);
    ASSERT_EQ(ours.shape(), ref.shape()) << name;
    double err = relativeError(ours, ref);
    EXPECT_LE(err, 1e-4) << "gradient of " << name << " (HF " << hf << ")";
    if (err > worst) {
      worst = err;
      worstName = name;
    }
  }
  std::printf("loss %.7f vs transformers %.7f; %zu gradients, worst relative "
              "error %.2e (%s)\n",
              loss, hfLoss, grads.size(), worst, worstName.c_str());
}

} // namespace
