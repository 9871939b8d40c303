#ifndef OCTET_HF_HFCHECKPOINT_H
#define OCTET_HF_HFCHECKPOINT_H

// Hugging Face checkpoint directories in and out, given each parameter's
// layout (hf/HfWeights.h): the weights, the config.json beside them, and the
// line that says what was loaded. The compiler's variable store
// (compiler/Checkpoint) and the octet commands share these.

#include "hf/HfWeights.h"
#include "spec/spec.pb.h"
#include "support/DType.h"
#include "support/Status.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace octet::hf {

// config.json beside a checkpoint given as a directory or as one of its
// files.
std::string configBeside(const std::string &hfPath);

// When a config.json lies beside the checkpoint at `hfPath`, it must
// describe `model` (read from `modelSource`; see checkSameModel).
Status checkConfigBeside(const spec::ModelSpec &model,
                         const std::string &modelSource,
                         const std::string &hfPath);

struct HfLoadSummary {
  std::string source; // the file or directory read
  size_t parameters = 0;
  size_t tensors = 0;
  int64_t elements = 0;
  // HF tensor → the dtype it was stored in, for an export in kind.
  std::map<std::string, DType> dtypes;
  std::map<std::string, std::string> skipped; // see HfWeights::skipped
};

// Reads the parameters `layouts` describe from a HF checkpoint: a directory
// with model.safetensors or model.safetensors.index.json and its shards, or
// one of those files. `summary` says what was read.
StatusOr<HfWeights>
readHfCheckpoint(const std::string &path,
                 const std::vector<HfParameterLayout> &layouts,
                 HfLoadSummary &summary);

// "N parameters (V values) from T tensors of SOURCE (D)", D counting the
// tensors by dtype, and the first skipped tensor when there is one.
std::string describeLoad(const HfLoadSummary &summary);

struct HfExportOptions {
  // HF tensor → dtype; tensors it does not name are written as
  // `defaultDType`. Pass HfLoadSummary::dtypes to write each tensor back in
  // the dtype it came in.
  std::map<std::string, DType> dtypes;
  DType defaultDType = DType::F32;
  uint64_t maxShardBytes = 5ull << 30;
  // Written beside the weights as config.json when not empty, with its
  // dtype key saying what the tensors hold.
  std::string configJson;
};

// Writes `parameters` (octet name → values in the layout's shape, one for
// every layout) under their HF names into `directory` (created if
// missing): model.safetensors, or shards and model.safetensors.index.json.
// Returns the number of tensors written.
StatusOr<size_t>
writeHfCheckpoint(const std::string &directory,
                  const std::map<std::string, std::vector<float>> &parameters,
                  const std::vector<HfParameterLayout> &layouts,
                  const HfExportOptions &options);

// The config.json to export with weights: a copy of `configSource` when
// that file exists (the one the weights came with), else one made from
// `model` (hfConfigJson).
StatusOr<std::string> exportConfigJson(const spec::ModelSpec &model,
                                       const std::string &configSource);

} // namespace octet::hf

#endif
