#include "runtime/checkpoint/LlamaNames.h"

#include <cctype>

namespace octet::checkpoint {

namespace {

struct NameMapping {
  const char *octet; // after "layers.N." for per-layer names
  const char *hf;    // after "model.layers.N." for per-layer names
  bool hasBias;
};

constexpr NameMapping kGlobal[] = {
    {"embed", "model.embed_tokens.weight", false},
    {"final_norm", "model.norm.weight", false},
    {"lm_head", "lm_head.weight", false},
};

constexpr NameMapping kPerLayer[] = {
    {"attn.wq", "self_attn.q_proj", true},
    {"attn.wk", "self_attn.k_proj", true},
    {"attn.wv", "self_attn.v_proj", true},
    {"attn.wo", "self_attn.o_proj", true},
    {"mlp.w_gate", "mlp.gate_proj", true},
    {"mlp.w_up", "mlp.up_proj", true},
    {"mlp.w_down", "mlp.down_proj", true},
    {"attn_norm", "input_layernorm", false},
    {"mlp_norm", "post_attention_layernorm", false},
};

// Splits "PREFIXN.rest" into N and rest; false when it is not of that form.
bool splitLayer(const std::string &name, const std::string &prefix,
                std::string &layer, std::string &rest) {
  if (name.compare(0, prefix.size(), prefix) != 0)
    return false;
  size_t pos = prefix.size();
  size_t digits = pos;
  while (digits < name.size() &&
         std::isdigit(static_cast<unsigned char>(name[digits])))
    ++digits;
  if (digits == pos || digits >= name.size() || name[digits] != '.')
    return false;
  if (digits - pos > 1 && name[pos] == '0')
    return false; // "layers.01" is no layer name
  layer = name.substr(pos, digits - pos);
  rest = name.substr(digits + 1);
  return true;
}

} // namespace

StatusOr<std::string> octetToHfName(const std::string &octetName) {
  for (const NameMapping &m : kGlobal)
    if (octetName == m.octet)
      return std::string(m.hf);
  std::string layer, rest;
  if (splitLayer(octetName, "layers.", layer, rest)) {
    std::string prefix = "model.layers." + layer + ".";
    for (const NameMapping &m : kPerLayer) {
      if (rest == m.octet)
        return prefix + m.hf + ".weight";
      if (m.hasBias && rest == std::string(m.octet) + "_bias")
        return prefix + m.hf + ".bias";
    }
  }
  return Status::error("parameter \"" + octetName +
                       "\" has no Hugging Face Llama name; expected embed, "
                       "final_norm, lm_head or layers.N.{attn.wq, attn.wk, "
                       "attn.wv, attn.wo, mlp.w_gate, mlp.w_up, mlp.w_down, "
                       "attn_norm, mlp_norm} (projections also _bias)");
}

StatusOr<std::string> hfToOctetName(const std::string &hfName) {
  for (const NameMapping &m : kGlobal)
    if (hfName == m.hf)
      return std::string(m.octet);
  std::string layer, rest;
  if (splitLayer(hfName, "model.layers.", layer, rest)) {
    std::string prefix = "layers." + layer + ".";
    for (const NameMapping &m : kPerLayer) {
      std::string hf = m.hf;
      if (rest == hf + ".weight")
        return prefix + m.octet;
      if (m.hasBias && rest == hf + ".bias")
        return prefix + m.octet + "_bias";
    }
  }
  return Status::error("tensor \"" + hfName +
                       "\" is not part of a Hugging Face LlamaForCausalLM "
                       "that octet can load (e.g. rotary_emb.inv_freq is "
                       "recomputed, not loaded)");
}

} // namespace octet::checkpoint
