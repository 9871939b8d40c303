#include "hf/HfCheckpoint.h"

#include "hf/HfConfig.h"
#include "support/AtomicFile.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>

namespace octet::hf {
namespace {

Status makeDirectory(const std::string &path) {
  if (::mkdir(path.c_str(), 0777) == 0 || errno == EEXIST)
    return Status::ok();
  return Status::error("cannot create directory " + path + ": " +
                       std::strerror(errno));
}

// The config saying what the tensors hold, when they are all of one dtype.
std::string withDType(const std::string &config,
                      const std::vector<NamedTensor> &tensors) {
  if (tensors.empty())
    return config;
  DType dtype = tensors.front().dtype;
  for (const NamedTensor &t : tensors)
    if (t.dtype != dtype)
      return config;
  return configWithDType(config, dtype);
}

} // namespace

std::string configBeside(const std::string &hfPath) {
  if (isDirectory(hfPath))
    return hfPath + "/config.json";
  size_t slash = hfPath.find_last_of('/');
  return (slash == std::string::npos ? "." : hfPath.substr(0, slash)) +
         "/config.json";
}

Status checkConfigBeside(const spec::ModelSpec &model,
                         const std::string &modelSource,
                         const std::string &hfPath) {
  std::string config = configBeside(hfPath);
  if (!isRegularFile(config))
    return Status::ok();
  StatusOr<spec::ModelSpec> hfModel = readHfConfigFile(config);
  if (!hfModel)
    return hfModel.status();
  return checkSameModel(model, modelSource, *hfModel, config);
}

StatusOr<HfWeights>
readHfCheckpoint(const std::string &path,
                 const std::vector<HfParameterLayout> &layouts,
                 HfLoadSummary &summary) {
  StatusOr<CheckpointReader> reader = CheckpointReader::open(path);
  if (!reader)
    return reader.status();
  StatusOr<HfWeights> weights = loadHfWeights(*reader, layouts, path);
  if (!weights)
    return weights.status();
  summary = HfLoadSummary();
  summary.source = path;
  summary.parameters = weights->parameters.size();
  summary.tensors = weights->dtypes.size();
  summary.dtypes = weights->dtypes;
  summary.skipped = weights->skipped;
  for (const auto &[name, values] : weights->parameters)
    summary.elements += static_cast<int64_t>(values.size());
  return weights;
}

std::string describeLoad(const HfLoadSummary &summary) {
  std::map<std::string, int> counts;
  for (const auto &[name, dtype] : summary.dtypes)
    ++counts[safetensorsDTypeName(dtype)];
  std::string dtypes;
  for (const auto &[name, count] : counts)
    dtypes += (dtypes.empty() ? "" : ", ") + std::to_string(count) + " " + name;
  std::string line = std::to_string(summary.parameters) + " parameters (" +
                     std::to_string(summary.elements) + " values) from " +
                     std::to_string(summary.tensors) + " tensors of " +
                     summary.source + " (" + dtypes + ")";
  if (!summary.skipped.empty())
    line += "; skipped " + std::to_string(summary.skipped.size()) + " (" +
            summary.skipped.begin()->first + ": " +
            summary.skipped.begin()->second + ")";
  return line;
}

StatusOr<size_t>
writeHfCheckpoint(const std::string &directory,
                  const std::map<std::string, std::vector<float>> &parameters,
                  const std::vector<HfParameterLayout> &layouts,
                  const HfExportOptions &options) {
  std::map<std::string, DType> dtypes;
  for (const HfParameterLayout &layout : layouts)
    for (const HfPiece &piece : layout.pieces) {
      auto it = options.dtypes.find(piece.hfName);
      dtypes[piece.hfName] =
          it == options.dtypes.end() ? options.defaultDType : it->second;
    }
  StatusOr<std::vector<NamedTensor>> tensors =
      exportHfTensors(parameters, layouts, dtypes);
  if (!tensors)
    return tensors.status();
  if (Status s = makeDirectory(directory); !s)
    return s;
  if (Status s = writeCheckpoint(directory, *tensors, options.maxShardBytes);
      !s)
    return s;
  if (!options.configJson.empty())
    if (Status s = writeFileAtomically(directory + "/config.json",
                                       withDType(options.configJson, *tensors));
        !s)
      return s;
  return tensors->size();
}

StatusOr<std::string> exportConfigJson(const spec::ModelSpec &model,
                                       const std::string &configSource) {
  if (!configSource.empty() && isRegularFile(configSource))
    return readWholeFile(configSource);
  return hfConfigJson(model);
}

} // namespace octet::hf
