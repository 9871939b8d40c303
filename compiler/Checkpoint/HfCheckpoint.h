#ifndef OCTET_COMPILER_CHECKPOINT_HFCHECKPOINT_H
#define OCTET_COMPILER_CHECKPOINT_HFCHECKPOINT_H

// Hugging Face checkpoints in and out of a compiled model's parameters (the
// interpreter's VariableStore). The graph says where each parameter lives:
// graph.variable's hf_name (plus graph.hf_transpose / graph.hf_chunk, see
// frontends/GraphImporter.h), or, for a variable that octet-fuse-qkv
// made by stacking several, hf_names with the rows of each in `split`.
// hf/HfWeights does the loading and checking.

#include "compiler/Interpreter/Interpreter.h"
#include "spec/spec.pb.h"
#include "hf/HfWeights.h"
#include "support/Status.h"

#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <string>
#include <vector>

namespace octet {

// The layout of every trainable variable of `module`; a trainable variable
// with no HF name is an error naming it.
StatusOr<std::vector<hf::HfParameterLayout>> hfLayouts(mlir::ModuleOp module);

struct HfLoadSummary {
  std::string source; // the file or directory read
  size_t parameters = 0;
  size_t tensors = 0;
  int64_t elements = 0;
  // HF tensor → the dtype it was stored in, for an export in kind.
  std::map<std::string, DType> dtypes;
  std::map<std::string, std::string> skipped; // see HfWeights::skipped
};

// Reads a HF checkpoint (a directory with model.safetensors or
// model.safetensors.index.json and its shards, or one of those files) into
// `store`, for every trainable variable of `module`. Nothing in the store
// changes unless every tensor loads.
StatusOr<HfLoadSummary> loadHfCheckpoint(const std::string &path,
                                         mlir::ModuleOp module,
                                         interp::VariableStore &store);

struct HfExportOptions {
  // HF tensor → dtype; tensors it does not name are written as
  // `defaultDType`. Pass HfLoadSummary::dtypes to write each tensor back in
  // the dtype it came in.
  std::map<std::string, DType> dtypes;
  DType defaultDType = DType::F32;
  uint64_t maxShardBytes = 5ull << 30;
  // Written beside the weights as config.json when not empty.
  std::string configJson;
};

// Writes the trainable variables of `module` from `store` into `directory`
// (created if missing) as a HF checkpoint: model.safetensors, or shards and
// model.safetensors.index.json. Returns the number of tensors written.
StatusOr<size_t> exportHfCheckpoint(const std::string &directory,
                                    mlir::ModuleOp module,
                                    const interp::VariableStore &store,
                                    const HfExportOptions &options);

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

} // namespace octet

#endif
