#include "tools/octet/CpuCheckpoint.h"

#include "dialects/graph/GraphDialect.h"
#include "dialects/graph/WeightCache.h"

#include "compiler/Checkpoint/HfCheckpoint.h"
#include "runtime/checkpoint/TrainState.h"
#include "support/Sha256.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstring>
#include <set>

namespace octet {

namespace {

// A gradient accumulator holds nothing between steps: the step's first
// microbatch overwrites it or the optimizer step has cleared it, and a
// step-local one is not even kept. Checkpoints leave them out, so one saved
// with one microbatch a step (step-local gradients) resumes where they are
// persistent (a pipeline's several microbatches) and the reverse.
bool isGradientAccumulator(llvm::StringRef name) {
  return name.starts_with("grad.");
}

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
    if (!parameters.count(name) && !isGradientAccumulator(name) &&
        !graph::isDerivedCache(name))
      c.state.push_back(toNamed(name, value));
  return checkpoint::saveTrainCheckpoint(run.dir, c);
}

std::map<std::string, int64_t> shardedVariables(mlir::ModuleOp module) {
  std::map<std::string, int64_t> out;
  for (auto var : module.getOps<graph::VariableOp>())
    if (auto parts = var->getAttrOfType<mlir::IntegerAttr>("data_shards");
        parts && parts.getInt() > 1)
      out[var.getSymName().str()] = parts.getInt();
  return out;
}

std::set<std::string> rankLocalVariables(mlir::ModuleOp module) {
  std::set<std::string> out;
  module.walk([&](graph::StoreOp store) {
    mlir::Operation *def = store.getValue().getDefiningOp();
    if (!def || def->getName().getStringRef() != "kernel.collective" ||
        !def->hasAttr("in_place"))
      return;
    auto kind = def->getAttrOfType<mlir::StringAttr>("kind");
    if (kind && kind.getValue() == "reduce_scatter")
      out.insert(store.getVariable().str());
  });
  return out;
}

interp::VariableStore
wholeVariables(mlir::ModuleOp module,
               const std::vector<interp::VariableStore> &ranks) {
  interp::VariableStore whole = ranks.front();
  for (const auto &[name, parts] : shardedVariables(module)) {
    // Another pipeline rank's (joinPipelineRanks joins each group's own).
    if (!ranks.front().has(name))
      continue;
    const interp::Tensor &first = ranks.front().get(name);
    std::vector<int64_t> shape = first.shape();
    shape[0] *= int64_t(ranks.size());
    interp::Tensor joined(first.dtype(), shape);
    int64_t n = first.numel();
    for (size_t r = 0; r < ranks.size(); ++r) {
      const interp::Tensor &part = ranks[r].get(name);
      if (isFloat(part.dtype()))
        std::copy(part.f(), part.f() + n, joined.f() + int64_t(r) * n);
      else
        std::copy(part.i(), part.i() + n, joined.i() + int64_t(r) * n);
    }
    whole.set(name, std::move(joined));
  }
  // An accumulator reduce-scattered in place holds the sum in each rank's
  // own part of dimension 0: the whole sum is those parts side by side.
  // (A step-local one is gone once the optimizer step has read it.)
  for (const std::string &name : rankLocalVariables(module)) {
    if (!ranks.front().has(name))
      continue;
    interp::Tensor joined = ranks.front().get(name).clone();
    int64_t n = joined.numel() / int64_t(ranks.size());
    for (size_t r = 1; r < ranks.size(); ++r) {
      const interp::Tensor &local = ranks[r].get(name);
      std::copy(local.f() + int64_t(r) * n, local.f() + int64_t(r + 1) * n,
                joined.f() + int64_t(r) * n);
    }
    whole.set(name, std::move(joined));
  }
  return whole;
}

void keepRankParts(mlir::ModuleOp module,
                   std::vector<interp::VariableStore> &ranks) {
  for (const auto &[name, parts] : shardedVariables(module)) {
    interp::Tensor whole = ranks.front().get(name);
    std::vector<int64_t> shape = whole.shape();
    shape[0] /= parts;
    // Rank p·data + d holds part d (data before pipeline).
    for (size_t r = 0; r < ranks.size(); ++r) {
      interp::Tensor part(whole.dtype(), shape);
      int64_t n = part.numel(), at = (int64_t(r) % parts) * n;
      if (isFloat(whole.dtype()))
        std::copy(whole.f() + at, whole.f() + at + n, part.f());
      else
        std::copy(whole.i() + at, whole.i() + at + n, part.i());
      ranks[r].set(name, std::move(part));
    }
  }
}

std::map<std::string, int64_t> pipelineRankVariables(mlir::ModuleOp module) {
  std::map<std::string, int64_t> out;
  for (auto var : module.getOps<graph::VariableOp>())
    if (auto rank = var->getAttrOfType<mlir::IntegerAttr>("pipeline_rank"))
      out[var.getSymName().str()] = rank.getInt();
  return out;
}

void keepPipelineRankVariables(mlir::ModuleOp module, int64_t data,
                               std::vector<interp::VariableStore> &ranks) {
  for (const auto &[name, owner] : pipelineRankVariables(module))
    for (size_t r = 0; r < ranks.size(); ++r)
      if (int64_t(r) / data != owner)
        ranks[r].release(name);
}

interp::VariableStore
joinPipelineRanks(mlir::ModuleOp module, int64_t data,
                  const std::vector<interp::VariableStore> &ranks) {
  interp::VariableStore whole = ranks.front();
  std::map<std::string, int64_t> owners = pipelineRankVariables(module);
  int64_t pipeline = int64_t(ranks.size()) / data;
  for (int64_t p = 0; p < pipeline; ++p) {
    // ZeRO-1 shards a pipeline rank's state over its data group: the
    // group's parts joined.
    std::vector<interp::VariableStore> group(ranks.begin() + p * data,
                                             ranks.begin() + (p + 1) * data);
    interp::VariableStore joined =
        data > 1 ? wholeVariables(module, group) : group.front();
    for (const auto &[name, owner] : owners)
      if (owner == p)
        whole.set(name, joined.get(name));
  }
  return whole;
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
  // the shape the store holds (whole, for a sharded one: the trainer keeps
  // each rank's part afterwards).
  std::map<std::string, const hf::NamedTensor *> saved;
  for (const hf::NamedTensor &t : c->state)
    saved[t.name] = &t;
  std::vector<std::pair<std::string, interp::Tensor>> restored;
  bool remakeWeightCopies = false;
  auto isWeightCopy = [&](llvm::StringRef name) {
    return llvm::any_of(*params, [&](const std::string &param) {
      return graph::isFp8WeightCopyOf(name, param);
    });
  };
  for (const auto &[name, value] : store.all()) {
    if (params->count(name) || isGradientAccumulator(name) ||
        graph::isDerivedCache(name))
      continue;
    auto it = saved.find(name);
    if (it == saved.end() && isWeightCopy(name)) {
      remakeWeightCopies = true;
      continue;
    }
    if (it == saved.end())
      return Status::error(stepDir + " has no state tensor '" + name +
                           "': it was saved for another model or recipe");
    const hf::NamedTensor &t = *it->second;
    bool floats = isFloat(value.dtype());
    std::vector<int64_t> shape = value.shape();
    if (t.shape != shape ||
        t.dtype != (floats ? DType::F32 : DType::I64))
      return Status::error(stepDir + ": state tensor '" + name + "' is " +
                           dtypeName(t.dtype) + " " +
                           interp::shapeString(t.shape) + "; the program's is " +
                           interp::shapeString(shape) +
                           ": it was saved for another model");
    size_t elements = 1;
    for (int64_t d : shape)
      elements *= size_t(d);
    if (floats) {
      std::vector<float> v(elements);
      std::memcpy(v.data(), t.data.data(), v.size() * 4);
      restored.emplace_back(name, interp::Tensor::fromFloats(
                                      shape, std::move(v), value.dtype()));
    } else {
      std::vector<int64_t> v(elements);
      std::memcpy(v.data(), t.data.data(), v.size() * 8);
      restored.emplace_back(name, interp::Tensor::fromInts(
                                      shape, std::move(v), value.dtype()));
    }
    saved.erase(it);
  }
  // A checkpoint saved while the FP8 weights or their K-major copies were
  // state holds them too: each cast from the parameter restored beside it
  // (the K-major copy transposed), which the step now makes itself
  // (octet-step-local-fp8-weights, octet-step-local-kmajor-weights).
  for (auto it = saved.begin(); it != saved.end();) {
    llvm::StringRef name = it->first;
    llvm::StringRef param = name;
    if (graph::isKMajorCache(param))
      param = param.drop_back(graph::kKMajorCacheSuffix.size());
    bool stepLocal = !store.has(it->first) &&
                     param.consume_front(graph::kFp8WeightCachePrefix) &&
                     params->count(param.str());
    it = stepLocal ? saved.erase(it) : std::next(it);
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
  return CpuResume{c->step, c->dataPosition, remakeWeightCopies};
}

} // namespace octet
