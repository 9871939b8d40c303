// The Trainer's checkpoints and weights: saving and resuming a run, the
// parameters from --init-from and to --save-hf.

#include "runtime/exec/Trainer.h"

#include "bundle/HfLayout.h"
#include "hf/HfWeights.h"
#include "hf/Safetensors.h"
#include "runtime/exec/TrainerImpl.h"
#include "support/AtomicFile.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <sys/stat.h>

namespace octet {

using namespace octet::bundle;
using namespace octet::trainer;
namespace ckpt = octet::checkpoint;

namespace {

std::vector<int64_t> wholeShape(const Entry &e) {
  std::vector<int64_t> shape = e.shape;
  if (e.dataShards > 1 && !shape.empty())
    shape[0] *= e.dataShards;
  return shape;
}

std::string hexOf(const std::string &bytes) {
  static const char *digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

} // namespace

// `entries` as a job of one rank holds them, for rank 0: every rank reads
// its part of each sharded tensor and the ranks join the parts (so every
// rank calls this); the rest is the same on every rank, and rank 0 alone
// reads it.
Status Trainer::Impl::readWhole(const std::vector<Entry> &entries,
                                std::vector<hf::NamedTensor> &out) {
  for (const Entry &e : entries) {
    if (e.dataShards <= 1 && dpRank != 0)
      continue;
    hf::NamedTensor t{e.name, e.dtype, e.shape, std::vector<uint8_t>(e.bytes)};
    OCTET_RETURN_IF_ERROR(backend.readSlot(e.slot, t.data.data(), e.bytes));
    if (e.dataShards > 1) {
      OCTET_RETURN_IF_ERROR(backend.synchronize());
      std::vector<uint8_t> whole;
      OCTET_RETURN_IF_ERROR(options.dataParallel->gather(t.data, whole));
      t.data = std::move(whole);
      t.shape = wholeShape(e);
    }
    out.push_back(std::move(t));
  }
  return Status::ok();
}

StatusOr<ckpt::TrainCheckpoint> Trainer::Impl::gather(int64_t step) {
  ckpt::TrainCheckpoint c;
  c.step = step;
  c.seed = schedule.seed();
  c.dataPosition = checkpointPosition;
  c.loss = checkpointLoss;
  c.bundleHash = hexOf(bundle.content_hash());
  if (pipe)
    return gatherPipeline(std::move(c));
  OCTET_RETURN_IF_ERROR(readWhole(modelEntries, c.model));
  OCTET_RETURN_IF_ERROR(readWhole(stateEntries, c.state));
  OCTET_RETURN_IF_ERROR(backend.synchronize());
  if (dpRank != 0)
    return c;
  auto split = hfTensors(std::move(c.model));
  if (!split)
    return split.status();
  c.model = std::move(*split);
  return c;
}

// Each stage's own variables, sent to pipeline rank 0 and joined there
// into what a job of one rank would save; the data replicas' are the
// same but for the parts of a sharded state (ZeRO-1), which every rank
// of a stage's data group hands its replica 0 first, so replica 0's
// pipeline alone joins the stages.
StatusOr<ckpt::TrainCheckpoint>
Trainer::Impl::gatherPipeline(ckpt::TrainCheckpoint c) {
  auto join = [&](const std::vector<Entry> &entries)
      -> StatusOr<std::vector<hf::NamedTensor>> {
    std::vector<hf::NamedTensor> mine;
    std::vector<std::string> order;
    for (const Entry &e : entries) {
      order.push_back(e.name);
      if (!ownsPipelineVariable(slotUsers, e.slot, pipeRank))
        continue;
      if (e.dataShards <= 1 && dpRank != 0)
        continue;
      mine.push_back({e.name, e.dtype, e.shape, std::vector<uint8_t>(e.bytes)});
      OCTET_RETURN_IF_ERROR(
          backend.readSlot(e.slot, mine.back().data.data(), e.bytes));
      if (e.dataShards > 1) {
        OCTET_RETURN_IF_ERROR(backend.synchronize());
        std::vector<uint8_t> whole;
        OCTET_RETURN_IF_ERROR(
            options.dataParallel->gather(mine.back().data, whole));
        mine.back().data = std::move(whole);
        mine.back().shape = wholeShape(e);
      }
    }
    OCTET_RETURN_IF_ERROR(backend.synchronize());
    if (dpRank != 0)
      return std::vector<hf::NamedTensor>();
    std::vector<std::vector<hf::NamedTensor>> parts;
    if (!options.pipeline) {
      parts.push_back(std::move(mine));
    } else {
      // Parts differ in size: their sizes first, then each padded to
      // the largest.
      std::vector<uint8_t> packed = packTensors(mine);
      mine.clear();
      std::vector<uint8_t> size(8), sizes;
      for (int i = 0; i < 8; ++i)
        size[size_t(i)] = uint8_t(uint64_t(packed.size()) >> (8 * i));
      OCTET_RETURN_IF_ERROR(options.pipeline->gather(size, sizes));
      std::vector<uint64_t> bytes(size_t(pipeSize), 0);
      uint64_t largest = 0;
      for (size_t p = 0; p < bytes.size(); ++p) {
        for (int i = 0; i < 8; ++i)
          bytes[p] |= uint64_t(sizes[p * 8 + size_t(i)]) << (8 * i);
        largest = std::max(largest, bytes[p]);
      }
      packed.resize(largest);
      std::vector<uint8_t> all;
      OCTET_RETURN_IF_ERROR(options.pipeline->gather(packed, all));
      if (pipeRank != 0)
        return std::vector<hf::NamedTensor>();
      for (size_t p = 0; p < bytes.size(); ++p) {
        auto first = all.begin() + ptrdiff_t(p * largest);
        auto part = unpackTensors(
            std::vector<uint8_t>(first, first + ptrdiff_t(bytes[p])));
        if (!part)
          return part.status().withContext("pipeline rank " +
                                           std::to_string(p));
        parts.push_back(std::move(*part));
      }
    }
    return joinPipelineParts(order, std::move(parts));
  };
  auto model = join(modelEntries);
  if (!model)
    return model.status();
  auto state = join(stateEntries);
  if (!state)
    return state.status();
  if (pipeRank != 0 || dpRank != 0)
    return c;
  auto split = hfTensors(std::move(*model));
  if (!split)
    return split.status();
  c.model = std::move(*split);
  c.state = std::move(*state);
  return c;
}

// The parameters `model` holds (modelEntries' bytes, in order) as HF
// tensors: a parameter of one HF tensor as it is, a fused one through
// its layout. Parameters that share a HF tensor (parts of one) are
// assembled together.
StatusOr<std::vector<hf::NamedTensor>>
Trainer::Impl::hfTensors(std::vector<hf::NamedTensor> model) {
  std::vector<hf::NamedTensor> out;
  std::map<std::string, std::vector<float>> shared;
  std::vector<hf::HfParameterLayout> sharedLayouts;
  std::map<std::string, octet::DType> sharedDTypes;
  for (size_t i = 0; i < modelEntries.size(); ++i) {
    const Entry &e = modelEntries[i];
    if (!e.layout) {
      out.push_back(std::move(model[i]));
      continue;
    }
    const hf::HfParameterLayout &layout = *e.layout;
    auto values = hf::widenParameter(model[i].data, e.dtype,
                                     "parameter '" + e.name + "'");
    if (!values)
      return values.status();
    model[i].data = {};
    std::map<std::string, octet::DType> dtypes;
    for (const hf::HfPiece &piece : layout.pieces)
      dtypes[piece.hfName] = e.dtype;
    if (!layout.hfRows.empty()) {
      shared[layout.name] = std::move(*values);
      sharedLayouts.push_back(layout);
      sharedDTypes.insert(dtypes.begin(), dtypes.end());
      continue;
    }
    auto tensors = hf::exportHfTensors({{layout.name, std::move(*values)}},
                                       {layout}, dtypes);
    if (!tensors)
      return tensors.status();
    for (hf::NamedTensor &t : *tensors)
      out.push_back(std::move(t));
  }
  if (!sharedLayouts.empty()) {
    auto tensors = hf::exportHfTensors(shared, sharedLayouts, sharedDTypes);
    if (!tensors)
      return tensors.status();
    for (hf::NamedTensor &t : *tensors)
      out.push_back(std::move(t));
  }
  return out;
}

// Writes `entries` from the tensors `lookup` finds in `origin`: an entry
// with a layout from its HF tensors, any other by its name. Tensors of
// another dtype are converted when `convert`, else refused (a checkpoint
// holds this bundle's dtypes). Host copies are released as they are
// written, about a gigabyte at a time.
Status Trainer::Impl::restoreEntries(const std::vector<Entry> &entries,
                                     const std::string &origin,
                                     const hf::HfTensorLookup &lookup,
                                     bool convert) {
  std::vector<std::vector<uint8_t>> keep;
  uint64_t kept = 0;
  for (const Entry &e : entries) {
    // Another pipeline rank's variable, which that rank restores.
    if (!holdsSlot(e.slot))
      continue;
    std::vector<uint8_t> bytes;
    auto refuse = [&](const std::string &name, octet::DType dtype) {
      return Status::error(origin + ": tensor '" + name + "' is " +
                           hf::safetensorsDTypeName(dtype) +
                           " but the bundle keeps it as " +
                           hf::safetensorsDTypeName(e.dtype) +
                           ": it was saved by another bundle");
    };
    if (e.layout) {
      std::map<std::string, octet::DType> dtypes;
      auto values = hf::loadHfParameter(*e.layout, lookup, &dtypes);
      if (!values)
        return values.status().withContext(origin);
      for (const auto &[name, dtype] : dtypes)
        if (dtype != e.dtype && !convert)
          return refuse(name, dtype);
      if (e.dtype != octet::DType::F32 && e.dtype != octet::DType::BF16)
        return Status::error("parameter '" + e.name + "' is " +
                             hf::safetensorsDTypeName(e.dtype) +
                             ": only F32/BF16 parameters load from HF "
                             "tensors");
      bytes = hf::narrowParameter(*values, e.dtype);
    } else {
      std::optional<hf::HfTensorView> found = lookup(e.name);
      if (!found && e.remadeByInit) {
        remakeByInit = true;
        continue;
      }
      if (!found)
        return Status::error(origin + " has no tensor '" + e.name +
                             "': it was saved for another model");
      // A sharded tensor is saved whole, at any number of ranks.
      if (found->shape != wholeShape(e))
        return Status::error(
            found->file + ": tensor '" + e.name + "' has shape " +
            shapeText(found->shape) + ", but the bundle's is " +
            shapeText(wholeShape(e)) +
            ": it belongs to another model (for HF weights, one whose "
            "config.json differs from the spec the bundle was compiled "
            "from)");
      uint64_t count = 1;
      for (int64_t d : found->shape)
        count *= uint64_t(d);
      uint64_t stored = count * octet::dtypeBytes(found->dtype);
      if (found->dtype != e.dtype) {
        if (!convert)
          return refuse(e.name, found->dtype);
        auto converted = hf::convertParameterFloats(
            found->data, found->dtype, e.dtype, count,
            origin + ": tensor '" + e.name + "'");
        if (!converted)
          return converted.status();
        bytes = std::move(*converted);
      } else {
        bytes.assign(found->data, found->data + stored);
      }
    }
    if (e.dataShards > 1)
      bytes = rankPart(bytes, e.dataShards);
    if (bytes.size() != e.bytes)
      return Status::error(
          origin + ": tensor '" + e.name + "' has " +
          std::to_string(bytes.size()) + " bytes, but the bundle's is " +
          shapeText(e.shape) + " " + hf::safetensorsDTypeName(e.dtype) + " (" +
          std::to_string(e.bytes) + " bytes): it belongs to another model");
    kept += bytes.size();
    keep.push_back(std::move(bytes));
    OCTET_RETURN_IF_ERROR(
        backend.writeSlot(e.slot, keep.back().data(), e.bytes));
    if (kept > (uint64_t(1) << 30)) {
      OCTET_RETURN_IF_ERROR(backend.synchronize());
      keep.clear();
      kept = 0;
    }
  }
  return backend.synchronize();
}

// Parameters from a HF model directory (model.safetensors, or shards
// and model.safetensors.index.json) or a safetensors file: each by its
// HF tensors, or by its octet name where the file holds that name (a
// file of octet names, or a parameter HF has no name for). Every tensor
// a parameter needs must be there, and every tensor there must be taken.
Status Trainer::Impl::loadWeights(const std::string &path) {
  // The config.json beside the weights must be the bundle's model: same
  // shapes could still differ in heads, rotary theta or norm epsilon.
  std::string config = path + "/config.json";
  if (isDirectory(path) && isRegularFile(config) &&
      !bundle.build().hf_config().empty()) {
    auto text = readWholeFile(config);
    if (!text)
      return text.status();
    OCTET_RETURN_IF_ERROR(hf::checkSameHfConfig(
        bundle.build().hf_config(), "the bundle (its spec's HF config)", *text,
        config));
  }
  auto reader = hf::CheckpointReader::open(path);
  if (!reader)
    return reader.status().withContext("--init-from");
  std::vector<Entry> entries = modelEntries;
  std::vector<hf::HfParameterLayout> layouts;
  std::vector<std::string> byOctetName;
  for (size_t i = 0; i < entries.size(); ++i) {
    Entry &e = entries[i];
    const Parameter &p = bundle.parameters(int(i));
    auto layout = hfLayoutOf(p);
    if (!layout)
      return layout.status();
    if (*layout && !reader->find(p.name())) {
      layouts.push_back(**layout);
      continue;
    }
    if (!reader->find(p.name())) {
      auto names = reader->tensorNames();
      std::string some;
      for (size_t j = 0; j < std::min<size_t>(3, names.size()); ++j)
        some += (j ? ", " : "") + names[j];
      return Status::error(
          path + " has no tensor '" + p.name() +
          "' (the parameter has no HF name in this bundle); it holds " +
          std::to_string(names.size()) + " tensors (" + some +
          ", ...): pass weights of this model, saved under octet's names");
    }
    e.name = p.name();
    e.layout.reset();
    byOctetName.push_back(p.name());
  }
  auto skipped = hf::checkHfCoverage(*reader, layouts, path, byOctetName);
  if (!skipped)
    return skipped.status();
  OCTET_RETURN_IF_ERROR(
      restoreEntries(entries, path, hf::lookupIn(*reader), /*convert=*/true));
  std::string line = "parameters from " + path + " (" +
                     std::to_string(layouts.size()) + " by HF name, " +
                     std::to_string(byOctetName.size()) + " by octet name";
  if (!skipped->empty())
    line += "; skipped " + std::to_string(skipped->size()) + ": " +
            skipped->begin()->first + ", " + skipped->begin()->second;
  print(line + ")");
  return Status::ok();
}

// The parameters as a HF model: safetensors under HF names, in the
// dtype the bundle keeps them in, and config.json (the one beside
// --init-from when there is one, else the bundle's).
Status Trainer::Impl::saveHf(const std::string &dir) {
  auto configText = bundle::hfConfigForExport(bundle, options.initWeights);
  if (!configText)
    return configText.status();
  std::string config = *configText;
  // Every rank joins the parts of the sharded masters; rank 0 writes.
  std::vector<hf::NamedTensor> model;
  OCTET_RETURN_IF_ERROR(readWhole(modelEntries, model));
  OCTET_RETURN_IF_ERROR(backend.synchronize());
  if (dpRank != 0)
    return Status::ok();
  auto tensors = hfTensors(std::move(model));
  if (!tensors)
    return tensors.status();
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST)
    return Status::error("--save-hf " + dir +
                         ": cannot create it: " + std::strerror(errno));
  OCTET_RETURN_IF_ERROR(hf::writeCheckpoint(dir, *tensors));
  // The config names the weights' dtype when they have one.
  bool oneDType = !tensors->empty();
  for (const hf::NamedTensor &t : *tensors)
    oneDType &= t.dtype == tensors->front().dtype;
  if (oneDType)
    config = hf::configWithDType(config, tensors->front().dtype);
  OCTET_RETURN_IF_ERROR(writeFileAtomically(dir + "/config.json", config));
  print("saved the model in HF format: " + dir + " (" +
        std::to_string(tensors->size()) + " tensors" +
        (oneDType ? std::string(", ") +
                        hf::safetensorsDTypeName(tensors->front().dtype)
                  : std::string()) +
        ")");
  return Status::ok();
}

StatusOr<std::string> Trainer::saveCheckpoint(int64_t step) {
  Impl &t = *impl_;
  // The ranks hold the same parameters and state but for the parts of a
  // sharded state, which every rank hands rank 0; rank 0 writes them.
  // A pipeline's stages each hold their own variables, which they hand
  // pipeline rank 0.
  bool sharded = t.pipe != nullptr;
  for (const Entry &e : t.stateEntries)
    sharded |= e.dataShards > 1;
  bool dataShards = false;
  for (const Entry &e : t.stateEntries)
    dataShards |= e.dataShards > 1;
  if (t.dpRank != 0 && (t.pipe ? !dataShards : !sharded))
    return std::string();
  auto c = t.gather(step);
  if (!c)
    return c.status();
  if (t.dpRank != 0 || t.pipeRank != 0)
    return std::string();
  ckpt::SaveOptions so;
  so.keep = t.options.keepCheckpoints;
  so.afterFile = t.options.checkpointAfterFile;
  auto path = ckpt::saveTrainCheckpoint(t.options.checkpointDir, *c, so);
  if (path)
    t.print("checkpoint: " + *path);
  return path;
}

Status Trainer::loadCheckpoint(const std::string &stepDir, int64_t &step) {
  Impl &t = *impl_;
  auto c = ckpt::loadTrainCheckpoint(stepDir);
  if (!c)
    return c.status();
  std::string hash = hexOf(t.bundle.content_hash());
  if (!c->bundleHash.empty() && c->bundleHash != hash)
    t.print("note: " + stepDir + " was saved by another bundle (hash " +
            c->bundleHash.substr(0, 12) + ", this one " + hash.substr(0, 12) +
            "); its tensors match this bundle's, so the run continues");
  if (c->seed != t.schedule.seed())
    return Status::error(stepDir + " was saved by a run with seed " +
                         std::to_string(c->seed) + ", this bundle's is " +
                         std::to_string(t.schedule.seed()) +
                         ": resuming would not continue that run");
  OCTET_RETURN_IF_ERROR(t.restoreEntries(
      t.modelEntries, stepDir, hf::lookupAmong(c->model, stepDir), false));
  OCTET_RETURN_IF_ERROR(t.restoreEntries(
      t.stateEntries, stepDir, hf::lookupAmong(c->state, stepDir), false));
  OCTET_RETURN_IF_ERROR(t.data.restore(c->dataPosition));
  step = c->step;
  return Status::ok();
}

} // namespace octet
