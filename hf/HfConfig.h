#ifndef OCTET_HF_HFCONFIG_H
#define OCTET_HF_HFCONFIG_H

// Hugging Face config.json → ModelSpec, and back for the Llama family;
// whether a spec and a config.json describe the same network.
//
// Supported: the Llama family (model_type llama / mistral / qwen2, classes
// LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM) and GPT-2
// (gpt2, GPT2LMHeadModel). The sizes are required: vocab_size, hidden_size,
// intermediate_size, num_hidden_layers, num_attention_heads (GPT-2: vocab_size,
// n_embd, n_layer, n_head, n_positions). Other keys default as transformers'
// config classes do (num_key_value_heads = num_attention_heads, rms_norm_eps
// 1e-6, rope_theta 10000, initializer_range 0.02, hidden_act "silu",
// tie_word_embeddings false; max_position_embeddings 2048 / 131072 / 32768
// for llama / mistral / qwen2; Mistral's sliding_window 4096; GPT-2's n_inner
// 4 × n_embd, layer_norm_epsilon 1e-5, activation_function "gelu_new",
// tie_word_embeddings true). A null value counts as absent.
//
// Mapping: hidden_act "silu" → activation "swiglu"; GPT-2's gelu_new and
// gelu_pytorch_tanh → "gelu_tanh", gelu → "gelu". attention_bias → qkv_bias
// and attn_out_bias; Qwen2 always has qkv_bias. rope_scaling (or the
// transformers 5 rope_parameters block) of rope_type / type "llama3" keeps
// its four parameters; "default" means none. Dropout keys are ignored: octet
// trains without dropout. Keys that change the math in ways octet does not
// implement (other rope scalings, GPT-2's scale_attn_by_inverse_layer_idx,
// other activations) are errors naming the key.

#include "spec/spec.pb.h"
#include "support/Status.h"

#include <string>

namespace octet::hf {

// `source` names the text in error messages (a file path).
StatusOr<spec::ModelSpec> importHfConfig(const std::string &json,
                                         const std::string &source);
StatusOr<spec::ModelSpec> readHfConfigFile(const std::string &path);

// A whole spec for a config.json's model, for commands that only load and
// export weights and run no step (the smallest batch).
StatusOr<spec::Spec> readHfConfigAsSpec(const std::string &path);

// config.json for a Llama-family model (llama, mistral, qwen2) that
// transformers reads back as the same model.
StatusOr<std::string> hfConfigJson(const spec::ModelSpec &model);

// Whether a spec's model and the one a HF config.json describes are the
// same network: sizes, norm, activation, biases, rope and tying. Fields that
// do not change the weights or the math (max_position_embeddings, init_std)
// may differ. The error lists each differing field with both values.
Status checkSameModel(const spec::ModelSpec &spec,
                      const std::string &specSource, const spec::ModelSpec &hf,
                      const std::string &hfSource);

} // namespace octet::hf

#endif
