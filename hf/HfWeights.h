#ifndef OCTET_HF_HFWEIGHTS_H
#define OCTET_HF_HFWEIGHTS_H

// Parameters in and out of Hugging Face checkpoints, without MLIR: a
// parameter's HfParameterLayout says where it lives (compiler/Checkpoint
// builds it from the graph's variables, the runtime's trainer reads it from
// the bundle's parameters), and this file moves the numbers,
// checking every shape and dtype on the way.
//
// A parameter is float32 in octet's orientation. It comes from HF tensors
// in one of three ways:
//   - one tensor, same shape (every Llama parameter);
//   - several tensors stacked along dimension 0 (a fused QKV or gate/up
//     variable: q_proj, k_proj, v_proj in that order);
//   - rows of one tensor, after an optional transpose (GPT-2's Conv1D
//     c_attn holds q, k and v side by side).
// Rotary embeddings need no permutation: HF's Llama checkpoints are in the
// rotate-half layout that graph.rope computes (pairs i and i + head_dim/2),
// which tests/unit/checkpoint/HfRoundTripTest.cpp checks against
// transformers' logits. Checkpoints in Meta's original interleaved layout
// must go through transformers' conversion script first.
//
// F32, BF16 and F16 tensors are widened to float32 exactly; the dtype each
// HF tensor had is kept, so that an export writes the same bits back.

#include "hf/Safetensors.h"
#include "support/Status.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace octet::hf {

// One slice of a parameter: rows [paramRow, paramRow + rows) of the
// parameter are rows [hfRow, hfRow + rows) of HF tensor `hfName` (after
// transposing it when `transpose`).
struct HfPiece {
  std::string hfName;
  int64_t hfRow = 0;
  int64_t paramRow = 0;
  int64_t rows = 0;
  bool transpose = false;
};

struct HfParameterLayout {
  std::string name;           // octet's
  std::vector<int64_t> shape; // octet's
  std::vector<HfPiece> pieces;
  // The rows the HF tensor has along dimension 0 (after the transpose), by
  // name, when a piece covers only part of it (GPT-2's c_attn: 3 × hidden).
  std::map<std::string, int64_t> hfRows;
};

// The layout of a parameter stored as one HF tensor of the same shape.
HfParameterLayout singleTensorLayout(const std::string &name,
                                     std::vector<int64_t> shape,
                                     const std::string &hfName);

// The layout of parameter `name` (of octet's `shape`) stored as the HF
// tensors `hfNames`: one tensor of the same shape, or several stacked along
// dimension 0, `rows[i]` rows from hfNames[i] (a fused QKV or gate/up
// weight), adding up to shape[0]. `rows` may be empty for one tensor. The
// rule for the graph's variables (hf_name, or hf_names and split); the
// compiler adds what only the graph says (transposes, parts of one tensor)
// and writes the result into the bundle (Parameter.hf_pieces), which the
// runtime reads back whole (bundle/HfLayout.h).
StatusOr<HfParameterLayout>
parameterLayout(const std::string &name, std::vector<int64_t> shape,
                const std::vector<std::string> &hfNames,
                const std::vector<int64_t> &rows);

// Whether the pieces tile the parameter's rows, each within its HF tensor:
// an error names the parameter (a layout is made by the compiler, so a bad
// one is a bug or a damaged bundle).
Status checkHfLayout(const HfParameterLayout &layout);

// Whether the parameter is one whole HF tensor as it is (no transpose, no
// part), so that its bytes can move without conversion.
bool isWholeTensor(const HfParameterLayout &layout);

// One stored tensor as a loader sees it: dtype, shape, bytes, and the file
// it lies in (for messages).
struct HfTensorView {
  DType dtype;
  std::vector<int64_t> shape;
  const uint8_t *data = nullptr;
  std::string file;
};
// The stored tensor of that HF name, or nullopt when there is none.
using HfTensorLookup =
    std::function<std::optional<HfTensorView>(const std::string &)>;

// The values of one parameter (row-major, float32, in its shape) from the HF
// tensors `lookup` finds, each checked against the shape the layout implies;
// `dtypes` (when not null) gets the dtype of each tensor read. The same
// assembly loadHfWeights does, for a caller that holds one parameter at a
// time (the GPU trainer, whose models do not fit twice in host memory).
StatusOr<std::vector<float>> loadHfParameter(const HfParameterLayout &layout,
                                             const HfTensorLookup &lookup,
                                             std::map<std::string, DType> *dtypes);

// A lookup over the tensors of `reader`.
HfTensorLookup lookupIn(const CheckpointReader &reader);
// A lookup over tensors held in memory (a checkpoint read whole); they must
// outlive it.
HfTensorLookup lookupAmong(const std::vector<NamedTensor> &tensors,
                           const std::string &origin);

// `count` elements of `src` converted from `from` to `to`: F32, BF16 or F16
// in, F32 or BF16 (what parameters are kept in) out; anything else is an
// error naming `what`.
StatusOr<std::vector<uint8_t>> convertParameterFloats(const uint8_t *src,
                                                      DType from, DType to,
                                                      uint64_t count,
                                                      const std::string &what);
// A parameter's bytes as float32 values, and back: exact for the F32 and
// BF16 that parameters are kept in.
StatusOr<std::vector<float>> widenParameter(const std::vector<uint8_t> &bytes,
                                            DType dtype,
                                            const std::string &what);
std::vector<uint8_t> narrowParameter(const std::vector<float> &values,
                                     DType dtype);

// Checks that `reader` (opened on `source`) holds every tensor `layouts`
// need and none that no parameter takes, besides those skipped for a
// reason (returned: rotary inverse frequencies, a tied lm_head equal to the
// embedding). `alsoTaken` names further tensors a caller reads by other
// names. Errors name the tensors, their files and the fix.
StatusOr<std::map<std::string, std::string>>
checkHfCoverage(const CheckpointReader &reader,
                const std::vector<HfParameterLayout> &layouts,
                const std::string &source,
                const std::vector<std::string> &alsoTaken = {});

// A HF config.json with its dtype key ("torch_dtype", or "dtype" where the
// config uses it) saying that the weights are `dtype`, so that
// from_pretrained(dtype="auto") loads them as written. Returned unchanged
// when it says so already or is not a JSON object.
std::string configWithDType(const std::string &config, DType dtype);

// Whether two HF config.json texts describe the same network: every key
// that changes the math and that both give (sizes, heads, head_dim, norm
// epsilon, activation, rotary theta and type, biases, tying) must agree.
// The error names the key, both values and both sources, and the fix.
// Text that is not a JSON object is an error naming its source.
Status checkSameHfConfig(const std::string &expected,
                         const std::string &expectedSource,
                         const std::string &actual,
                         const std::string &actualSource);

struct HfWeights {
  // Octet name → values, row-major in the parameter's shape.
  std::map<std::string, std::vector<float>> parameters;
  // HF name → the dtype it was stored in.
  std::map<std::string, DType> dtypes;
  // HF tensors that were present and deliberately not loaded (rotary
  // inverse frequencies, which are recomputed; a tied lm_head.weight that
  // equals the embedding bit for bit), with the reason.
  std::map<std::string, std::string> skipped;
};

// Loads every parameter of `layouts` from `reader`, which was opened on
// `source` (named in errors when no single file is at fault). Errors, each
// naming the tensor and its file: a parameter's tensor is missing; the
// checkpoint holds a tensor no parameter takes; a shape differs from the
// one the model's config implies; a dtype is neither F32, BF16 nor F16.
StatusOr<HfWeights> loadHfWeights(const CheckpointReader &reader,
                                  const std::vector<HfParameterLayout> &layouts,
                                  const std::string &source);

// The HF tensors the parameters make, under their HF names, in the dtype
// `dtypes` gives for each (F32 where it names none). Rounding to BF16/F16 is
// to nearest, ties to even (support/Numerics, which has no
// MLIR); values that were loaded from that dtype come back bit for bit.
// `parameters` must hold every layout's values.
StatusOr<std::vector<NamedTensor>>
exportHfTensors(const std::map<std::string, std::vector<float>> &parameters,
                const std::vector<HfParameterLayout> &layouts,
                const std::map<std::string, DType> &dtypes);

} // namespace octet::hf

#endif
