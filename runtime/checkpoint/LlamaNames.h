#ifndef OCTET_RUNTIME_CHECKPOINT_LLAMANAMES_H
#define OCTET_RUNTIME_CHECKPOINT_LLAMANAMES_H

#include "runtime/core/Status.h"

#include <string>

namespace octet::checkpoint {

// Parameter names of octet's Llama and those of Hugging Face's
// LlamaForCausalLM:
//   embed                  model.embed_tokens.weight
//   layers.N.attn.wq       model.layers.N.self_attn.q_proj.weight  (wk, wv, wo)
//   layers.N.mlp.w_gate    model.layers.N.mlp.gate_proj.weight     (w_up,
//   w_down) layers.N.attn_norm     model.layers.N.input_layernorm.weight
//   layers.N.mlp_norm      model.layers.N.post_attention_layernorm.weight
//   final_norm             model.norm.weight
//   lm_head                lm_head.weight
// A projection's bias is its name + "_bias" (layers.N.attn.wq_bias is
// model.layers.N.self_attn.q_proj.bias).
StatusOr<std::string> octetToHfName(const std::string &octetName);
StatusOr<std::string> hfToOctetName(const std::string &hfName);

} // namespace octet::checkpoint

#endif
