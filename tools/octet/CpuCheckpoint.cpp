#include "tools/octet/CpuCheckpoint.h"

#include "compiler/Checkpoint/HfCheckpoint.h"
#include "runtime/checkpoint/TrainState.h"
#include "support/Sha256.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstring>
#include <set>

namespace octet {

namespace {

StatusOr<std::set<std::string>> parameterNames(mlir::ModuleOp module) {
  StatusOr<std::vector<hf::HfParameterLayout>> layouts = hfLayouts(module);
  if (!layouts)
    return layouts.status();
  std::set<std::string> names;
  for (const hf::HfParameterLayout &l : *layouts)
    names.insert(l.name);
  return names;
}

// A variable's values as the checkpoint holds them: floats as F32 (the
// interpreter keeps every float dtype's values in f32, exactly), integers
// as I64.
hf::NamedTensor toNamed(const std::string &name, const interp::Tensor &t) {
  hf::NamedTensor out{name, isFloat(t.dtype()) ? DType::F32 : DType::I64,
                      t.shape(), {}};
  size_t bytes = size_t(t.numel()) * (isFloat(t.dtype()) ? 4 : 8);
  out.data.resize(bytes);
  if (bytes)
    std::memcpy(out.data.data(),
                isFloat(t.dtype()) ? static_cast<const void *>(t.f())
                                   : static_cast<const void *>(t.i()),
                bytes);
  return out;
}

} // namespace

std::string programHash(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  os.flush();
  std::array<uint8_t, 32> digest = bundle::sha256(text);
  return bundle::toHex(std::string_view(reinterpret_cast<const char *>(digest.data()),
                                digest.size()));
}

StatusOr<std::string> saveCpuCheckpoint(const CpuCheckpointRun &run,
                                        int64_t step,
                                        const std::string &dataPosition,
                                        double loss, mlir::ModuleOp module,
                                        const interp::VariableStore &store) {
  StatusOr<std::vector<hf::HfParameterLayout>> layouts = hfLayouts(module);
  if (!layouts)
    return layouts.status();
  std::map<std::string, std::vector<float>> parameters;
  for (const hf::HfParameterLayout &l : *layouts) {
    const interp::Tensor &t = store.get(l.name);
    parameters[l.name].assign(t.f(), t.f() + t.numel());
  }
  checkpoint::TrainCheckpoint c;
  c.step = step;
  c.seed = run.seed;
  c.dataPosition = dataPosition;
  c.loss = loss;
  c.bundleHash = run.programHash;
  StatusOr<std::vector<hf::NamedTensor>> model =
      hf::exportHfTensors(parameters, *layouts, {});
  if (!model)
    return model.status();
  c.model = std::move(*model);
  for (const auto &[name, value] : store.all())
    if (!parameters.count(name))
      c.state.push_back(toNamed(name, value));
  return checkpoint::saveTrainCheckpoint(run.dir, c);
}

StatusOr<CpuResume> loadCpuCheckpoint(const CpuCheckpointRun &run,
                                    const std::string &stepDir,
                                    mlir::ModuleOp module,
                                    interp::VariableStore &store) {
  StatusOr<checkpoint::TrainCheckpoint> c =
      checkpoint::loadTrainCheckpoint(stepDir);
  if (!c)
    return c.status();
  if (c->seed != run.seed)
    return Status::error(stepDir + " was saved by a run with seed " +
                         std::to_string(c->seed) + ", the spec's is " +
                         std::to_string(run.seed) +
                         ": resuming would not continue that run");
  StatusOr<std::set<std::string>> params = parameterNames(module);
  if (!params)
    return params.status();
  // Every variable that is not a parameter comes from the state file, with
  // the shape the program declares.
  std::map<std::string, const hf::NamedTensor *> saved;
  for (const hf::NamedTensor &t : c->state)
    saved[t.name] = &t;
  std::vector<std::pair<std::string, interp::Tensor>> restored;
  for (const auto &[name, value] : store.all()) {
    if (params->count(name))
      continue;
    auto it = saved.find(name);
    if (it == saved.end())
      return Status::error(stepDir + " has no state tensor '" + name +
                           "': it was saved for another model or recipe");
    const hf::NamedTensor &t = *it->second;
    bool floats = isFloat(value.dtype());
    if (t.shape != value.shape() ||
        t.dtype != (floats ? DType::F32 : DType::I64))
      return Status::error(stepDir + ": state tensor '" + name + "' is " +
                           dtypeName(t.dtype) + " " +
                           interp::shapeString(t.shape) + "; the program's is " +
                           interp::shapeString(value.shape()) +
                           ": it was saved for another model");
    if (floats) {
      std::vector<float> v(size_t(value.numel()));
      std::memcpy(v.data(), t.data.data(), v.size() * 4);
      restored.emplace_back(name, interp::Tensor::fromFloats(
                                      value.shape(), std::move(v),
                                      value.dtype()));
    } else {
      std::vector<int64_t> v(size_t(value.numel()));
      std::memcpy(v.data(), t.data.data(), v.size() * 8);
      restored.emplace_back(name, interp::Tensor::fromInts(
                                      value.shape(), std::move(v),
                                      value.dtype()));
    }
    saved.erase(it);
  }
  if (!saved.empty())
    return Status::error(stepDir + " holds state tensor '" +
                         saved.begin()->first +
                         "', which this program has not: it was saved for "
                         "another model or recipe");
  StatusOr<hf::HfLoadSummary> loaded = loadHfCheckpoint(stepDir, module, store);
  if (!loaded)
    return loaded.status().withContext(stepDir);
  for (auto &[name, value] : restored)
    store.set(name, std::move(value));
  if (!c->bundleHash.empty() && c->bundleHash != run.programHash)
    std::printf("note: %s was saved by another compile of the program (hash "
                "%.12s, this one %.12s); its tensors match, so the run "
                "continues\n",
                stepDir.c_str(), c->bundleHash.c_str(),
                run.programHash.c_str());
  return CpuResume{c->step, c->dataPosition};
}

} // namespace octet
