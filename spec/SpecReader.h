#ifndef OCTET_SPEC_SPECREADER_H
#define OCTET_SPEC_SPECREADER_H

// Reading, defaulting and validating a model + training spec.
//
// The reader depends on protobuf only (no LLVM), so the runtime can use it.
// A spec goes through three steps: parse (protobuf text format; unknown fields
// are errors), applyDefaults, then the checks. Every problem names the field
// by its path ("model.num_kv_heads") and says how to fix it; loadSpecFile adds
// the file, line and column where the field was written.
//
// Defaults (applied only where the field is unset):
//
//   model (architecture "llama"; also Mistral and Qwen2):
//     norm "rms_norm", activation "swiglu", position_embedding "rope",
//     rope_theta 10000, tie_word_embeddings false, qkv_bias / attn_out_bias /
//     mlp_bias false.
//   model (architecture "gpt2"):
//     norm "layer_norm", activation "gelu_tanh", position_embedding "learned",
//     intermediate_size 4 × hidden_size, tie_word_embeddings true, all biases
//     true.
//   model (both):
//     num_kv_heads = num_heads; head_dim = hidden_size / num_heads (left unset,
//     and reported, when num_heads does not divide hidden_size); norm_eps 1e-5;
//     init_std 0.02. No rope_scaling, no sliding_window.
//   train:
//     micro_batch_size 1; parallel data / tensor / pipeline 1;
//     global_batch_size = micro_batch_size × parallel.data;
//     seq_len min(2048, model.max_position_embeddings); steps 1000;
//     optimizer: lr 3e-4, min_lr_ratio 0.1, warmup_steps steps / 10,
//     beta1 0.9, beta2 0.95, eps 1e-8, weight_decay 0.1;
//     grad_clip 1.0 (0 turns clipping off); seed 0;
//     precision: recipe "delayed"; format "hybrid" ("e4m3" for the blockwise
//     recipe; none for "bf16"); the delayed recipe also gets amax_history_len
//     1024 and amax_algorithm "max"; every FP8 recipe gets margin 0;
//     activation_dtype "bf16", grad_dtype "f32";
//     data: kind "synthetic", eval_fraction 0;
//     eval_interval 0 and checkpoint_interval 0 (never), log_interval 10.

#include "spec/spec.pb.h"
#include "support/Status.h"

#include <string>
#include <vector>

namespace octet::spec {

// One problem with a spec: the field's path from the Spec root (or from the
// ModelSpec root for checkModel) and what to do about it.
struct SpecIssue {
  std::string field;
  std::string message;
};

// Parses protobuf text format. `source` names the text in error messages
// ("source:line:column: ...").
StatusOr<Spec> parseSpecText(const std::string &text,
                             const std::string &source);
StatusOr<Spec> readSpecFile(const std::string &path);

void applyModelDefaults(ModelSpec &model);
void applyDefaults(Spec &spec);

// Checks a spec after applyDefaults. Model issues name fields without the
// "model." prefix, so that importers of other formats can translate them.
std::vector<SpecIssue> checkModel(const ModelSpec &model);
std::vector<SpecIssue> checkSpec(const Spec &spec);

// Joins issues into one failed Status, a line each ("field: message"); ok
// when there are none.
Status issuesToStatus(const std::vector<SpecIssue> &issues);

// What a command line sets for one run over what the spec says.
struct RunSettings {
  // Optimizer steps of the run (0: train.steps). It replaces train.steps
  // before the defaults, so the LR schedule ends at the run's last step and
  // a warmup left to its default is a tenth of the run; a warmup the spec
  // sets must fit in the run, as it must fit in train.steps.
  int64_t steps = 0;
};

// The run's settings, then applyDefaults, then checkSpec.
StatusOr<Spec> resolveSpec(Spec spec, const RunSettings &run = {});

// readSpecFile + resolveSpec; each issue is located at the line where its
// field (or the nearest enclosing block) was written. A non-null `model`
// replaces the file's model block (a model imported from elsewhere, trained
// with this file's train settings).
StatusOr<Spec> loadSpecFile(const std::string &path,
                            const ModelSpec *model = nullptr,
                            const RunSettings &run = {});

// Reads the whole file; the error names it.
StatusOr<std::string> readTextFile(const std::string &path);

} // namespace octet::spec

#endif
