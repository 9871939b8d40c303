#include "hf/HfWeights.h"

#include "support/Numerics.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <set>

namespace octet::hf {

namespace {

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

int64_t rowSize(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i)
    n *= shape[i];
  return n;
}

int64_t elementCount(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

// The HF tensor's shape as the parameter sees it: its row count along
// dimension 0 and the parameter's trailing dimensions.
std::vector<int64_t> orientedShape(const HfParameterLayout &layout,
                                   const HfPiece &piece) {
  std::vector<int64_t> shape = layout.shape;
  if (shape.empty())
    return shape;
  auto rows = layout.hfRows.find(piece.hfName);
  shape[0] = rows != layout.hfRows.end() ? rows->second : piece.rows;
  return shape;
}

std::vector<int64_t> storedShape(std::vector<int64_t> oriented,
                                 bool transpose) {
  if (transpose && oriented.size() == 2)
    std::swap(oriented[0], oriented[1]);
  return oriented;
}

std::vector<float> transposed(const std::vector<float> &in, int64_t rows,
                              int64_t cols) {
  std::vector<float> out(in.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[c * rows + r] = in[r * cols + c];
  return out;
}

} // namespace

// The pieces must tile the parameter's rows, so that a bad layout is an
// error rather than garbage in a parameter.
Status checkHfLayout(const HfParameterLayout &layout) {
  int64_t rows = layout.shape.empty() ? 1 : layout.shape[0];
  std::vector<bool> covered(static_cast<size_t>(rows), false);
  for (const HfPiece &p : layout.pieces) {
    bool ok = p.rows > 0 && p.paramRow >= 0 && p.paramRow + p.rows <= rows &&
              p.hfRow >= 0 && !p.hfName.empty() &&
              (!p.transpose || layout.shape.size() == 2);
    auto hfRows = layout.hfRows.find(p.hfName);
    int64_t limit = hfRows != layout.hfRows.end() ? hfRows->second : p.rows;
    ok = ok && p.hfRow + p.rows <= limit;
    for (int64_t r = p.paramRow; ok && r < p.paramRow + p.rows; ++r) {
      ok = !covered[r];
      covered[r] = true;
    }
    if (!ok)
      return Status::error("internal error: the checkpoint layout of "
                           "parameter \"" +
                           layout.name + "\" has a bad piece (" + p.hfName +
                           ")");
  }
  for (bool c : covered)
    if (!c)
      return Status::error("internal error: the checkpoint layout of "
                           "parameter \"" +
                           layout.name + "\" leaves rows without a source");
  return Status::ok();
}

bool isWholeTensor(const HfParameterLayout &layout) {
  if (layout.pieces.size() != 1)
    return false;
  const HfPiece &p = layout.pieces[0];
  return !p.transpose && p.hfRow == 0 && p.paramRow == 0 &&
         !layout.hfRows.count(p.hfName);
}

namespace {

bool isRecomputedBuffer(const std::string &name) {
  const std::string suffix = "rotary_emb.inv_freq";
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

HfParameterLayout singleTensorLayout(const std::string &name,
                                     std::vector<int64_t> shape,
                                     const std::string &hfName) {
  HfParameterLayout layout;
  layout.name = name;
  layout.shape = std::move(shape);
  HfPiece piece;
  piece.hfName = hfName;
  piece.rows = layout.shape.empty() ? 1 : layout.shape[0];
  layout.pieces.push_back(piece);
  return layout;
}

StatusOr<HfParameterLayout>
parameterLayout(const std::string &name, std::vector<int64_t> shape,
                const std::vector<std::string> &hfNames,
                const std::vector<int64_t> &rows) {
  if (hfNames.empty())
    return Status::error("parameter \"" + name +
                         "\" has no Hugging Face name (hf_name), so it "
                         "cannot be loaded from or exported to a HF "
                         "checkpoint");
  if (hfNames.size() == 1 && rows.empty())
    return singleTensorLayout(name, std::move(shape), hfNames[0]);
  if (rows.size() != hfNames.size())
    return Status::error(
        "parameter \"" + name + "\" lists " + std::to_string(hfNames.size()) +
        " HF tensors but the rows of " + std::to_string(rows.size()) +
        ": each tensor needs its row count");
  HfParameterLayout layout;
  layout.name = name;
  layout.shape = std::move(shape);
  int64_t offset = 0;
  for (size_t i = 0; i < hfNames.size(); ++i) {
    HfPiece piece;
    piece.hfName = hfNames[i];
    piece.paramRow = offset;
    piece.rows = rows[i];
    offset += rows[i];
    layout.pieces.push_back(piece);
  }
  int64_t paramRows = layout.shape.empty() ? 1 : layout.shape[0];
  if (offset != paramRows)
    return Status::error(
        "parameter \"" + name + "\" has " + std::to_string(paramRows) +
        " rows, but its HF tensors' rows add up to " + std::to_string(offset));
  return layout;
}

HfTensorLookup lookupIn(const CheckpointReader &reader) {
  return [&reader](const std::string &name) -> std::optional<HfTensorView> {
    const TensorInfo *info = reader.find(name);
    if (!info)
      return std::nullopt;
    return HfTensorView{info->dtype, info->shape, reader.tensorData(name),
                        reader.fileOf(name)};
  };
}

StatusOr<std::map<std::string, std::string>>
checkHfCoverage(const CheckpointReader &reader,
                const std::vector<HfParameterLayout> &layouts,
                const std::string &source,
                const std::vector<std::string> &alsoTaken) {
  std::map<std::string, std::string> skipped;
  std::set<std::string> used(alsoTaken.begin(), alsoTaken.end());
  std::vector<std::string> missing;
  for (const HfParameterLayout &layout : layouts) {
    if (Status s = checkHfLayout(layout); !s)
      return s;
    for (const HfPiece &p : layout.pieces) {
      used.insert(p.hfName);
      if (!reader.find(p.hfName))
        missing.push_back("\"" + p.hfName + "\" (parameter \"" + layout.name +
                          "\")");
    }
  }
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 8; ++i)
      list += (i ? ", " : "") + missing[i];
    if (missing.size() > 8)
      list += " and " + std::to_string(missing.size() - 8) + " more";
    return Status::error(
        source + " lacks " + std::to_string(missing.size()) + " tensor" +
        (missing.size() == 1 ? "" : "s") + " the model needs: " + list +
        "; the checkpoint and the model config (config.json or the spec) "
        "describe different models");
  }

  // Every tensor of the checkpoint must go somewhere.
  for (const std::string &name : reader.tensorNames()) {
    if (used.count(name))
      continue;
    if (isRecomputedBuffer(name)) {
      skipped[name] = "recomputed from rope_theta";
      continue;
    }
    const TensorInfo *info = reader.find(name);
    const TensorInfo *embed = reader.find("model.embed_tokens.weight");
    if (name == "lm_head.weight" && used.count("model.embed_tokens.weight") &&
        embed && embed->dtype == info->dtype && embed->shape == info->shape &&
        std::memcmp(reader.tensorData(name),
                    reader.tensorData("model.embed_tokens.weight"),
                    info->end - info->begin) == 0) {
      skipped[name] = "a copy of model.embed_tokens.weight (tied)";
      continue;
    }
    std::string hint =
        name == "lm_head.weight"
            ? "; the model ties its LM head to the embedding "
              "(tie_word_embeddings) but this lm_head.weight differs from "
              "model.embed_tokens.weight: set tie_word_embeddings false"
            : "; the checkpoint and the model config (config.json or the "
              "spec) describe different models";
    return Status::error(reader.fileOf(name) + " holds tensor \"" + name +
                         "\" " + shapeText(info->shape) +
                         ", which no parameter of the model takes" + hint);
  }
  return skipped;
}

StatusOr<std::vector<float>> loadHfParameter(const HfParameterLayout &layout,
                                             const HfTensorLookup &lookup,
                                             std::map<std::string, DType> *dtypes) {
  if (Status s = checkHfLayout(layout); !s)
    return s;
  // A tensor that gives several pieces is widened once.
  std::map<std::string, std::vector<float>> widened;
  auto load = [&](const HfPiece &piece) -> StatusOr<const std::vector<float> *> {
    const std::string &name = piece.hfName;
    std::optional<HfTensorView> view = lookup(name);
    if (!view)
      return Status::error("no tensor \"" + name + "\" for parameter \"" +
                           layout.name + "\"; the checkpoint and the model "
                           "config (config.json or the spec) describe "
                           "different models");
    std::vector<int64_t> expected =
        storedShape(orientedShape(layout, piece), piece.transpose);
    if (view->shape != expected)
      return Status::error(
          view->file + ": tensor \"" + name + "\" has shape " +
          shapeText(view->shape) + ", but parameter \"" + layout.name +
          "\" needs " + shapeText(expected) +
          " from the model config (config.json or the spec); the two "
          "describe different models");
    auto cached = widened.find(name);
    if (cached != widened.end())
      return &cached->second;
    const uint8_t *data = view->data;
    size_t count = static_cast<size_t>(elementCount(view->shape));
    std::vector<float> values(count);
    switch (view->dtype) {
    case DType::F32:
      std::memcpy(values.data(), data, count * 4);
      break;
    case DType::BF16:
    case DType::F16:
      for (size_t i = 0; i < count; ++i) {
        uint16_t bits;
        std::memcpy(&bits, data + 2 * i, 2);
        values[i] = view->dtype == DType::BF16 ? numerics::decodeBF16(bits)
                                               : numerics::decodeF16(bits);
      }
      break;
    default:
      return Status::error(view->file + ": tensor \"" + name + "\" is " +
                           safetensorsDTypeName(view->dtype) +
                           "; octet loads F32, BF16 and F16 weights (convert "
                           "the checkpoint with torch first)");
    }
    if (piece.transpose)
      values = transposed(values, view->shape[0], view->shape[1]);
    if (dtypes)
      (*dtypes)[name] = view->dtype;
    return &(widened[name] = std::move(values));
  };

  std::vector<float> values(static_cast<size_t>(elementCount(layout.shape)));
  int64_t row = rowSize(layout.shape);
  for (const HfPiece &piece : layout.pieces) {
    StatusOr<const std::vector<float> *> hf = load(piece);
    if (!hf)
      return hf.status();
    std::memcpy(values.data() + piece.paramRow * row,
                (*hf)->data() + piece.hfRow * row,
                sizeof(float) * piece.rows * row);
  }
  return values;
}

StatusOr<HfWeights> loadHfWeights(const CheckpointReader &reader,
                                  const std::vector<HfParameterLayout> &layouts,
                                  const std::string &source) {
  HfWeights out;
  StatusOr<std::map<std::string, std::string>> skipped =
      checkHfCoverage(reader, layouts, source);
  if (!skipped)
    return skipped.status();
  out.skipped = std::move(*skipped);
  HfTensorLookup lookup = lookupIn(reader);
  for (const HfParameterLayout &layout : layouts) {
    StatusOr<std::vector<float>> values =
        loadHfParameter(layout, lookup, &out.dtypes);
    if (!values)
      return values.status();
    out.parameters[layout.name] = std::move(*values);
  }
  return out;
}

StatusOr<std::vector<NamedTensor>>
exportHfTensors(const std::map<std::string, std::vector<float>> &parameters,
                const std::vector<HfParameterLayout> &layouts,
                const std::map<std::string, DType> &dtypes) {
  struct Assembly {
    std::vector<int64_t> oriented;
    bool transpose = false;
    std::vector<float> values;
    std::vector<bool> rowsFilled;
  };
  std::vector<std::string> order;
  std::map<std::string, Assembly> byName;
  for (const HfParameterLayout &layout : layouts) {
    if (Status s = checkHfLayout(layout); !s)
      return s;
    auto found = parameters.find(layout.name);
    if (found == parameters.end() ||
        int64_t(found->second.size()) != elementCount(layout.shape))
      return Status::error("no values of shape " + shapeText(layout.shape) +
                           " for parameter \"" + layout.name + "\" to export");
    int64_t row = rowSize(layout.shape);
    for (const HfPiece &piece : layout.pieces) {
      std::vector<int64_t> oriented = orientedShape(layout, piece);
      auto [it, inserted] = byName.try_emplace(piece.hfName);
      Assembly &a = it->second;
      if (inserted) {
        order.push_back(piece.hfName);
        a.oriented = oriented;
        a.transpose = piece.transpose;
        a.values.resize(static_cast<size_t>(elementCount(oriented)));
        a.rowsFilled.assign(oriented.empty() ? 1 : oriented[0], false);
      } else if (a.oriented != oriented || a.transpose != piece.transpose) {
        return Status::error("internal error: parameters disagree on the "
                             "shape of HF tensor \"" +
                             piece.hfName + "\"");
      }
      for (int64_t r = piece.hfRow; r < piece.hfRow + piece.rows; ++r) {
        if (a.rowsFilled[r])
          return Status::error("internal error: two parameters write row " +
                               std::to_string(r) + " of HF tensor \"" +
                               piece.hfName + "\"");
        a.rowsFilled[r] = true;
      }
      std::memcpy(a.values.data() + piece.hfRow * row,
                  found->second.data() + piece.paramRow * row,
                  sizeof(float) * piece.rows * row);
    }
  }

  std::vector<NamedTensor> out;
  for (const std::string &name : order) {
    Assembly &a = byName[name];
    for (bool filled : a.rowsFilled)
      if (!filled)
        return Status::error("HF tensor \"" + name +
                             "\" is only partly covered by the model's "
                             "parameters; cannot export it");
    std::vector<int64_t> shape = storedShape(a.oriented, a.transpose);
    if (a.transpose)
      a.values = transposed(a.values, a.oriented[0], a.oriented[1]);
    auto dt = dtypes.find(name);
    DType dtype = dt == dtypes.end() ? DType::F32 : dt->second;
    NamedTensor t;
    t.name = name;
    t.dtype = dtype;
    t.shape = shape;
    size_t count = a.values.size();
    switch (dtype) {
    case DType::F32:
      t.data.resize(count * 4);
      std::memcpy(t.data.data(), a.values.data(), count * 4);
      break;
    case DType::BF16:
    case DType::F16:
      t.data.resize(count * 2);
      for (size_t i = 0; i < count; ++i) {
        uint16_t bits = dtype == DType::BF16 ? numerics::encodeBF16(a.values[i])
                                             : numerics::encodeF16(a.values[i]);
        std::memcpy(t.data.data() + 2 * i, &bits, 2);
      }
      break;
    default:
      return Status::error(std::string("cannot export HF tensor \"") + name +
                           "\" as " + safetensorsDTypeName(dtype) +
                           "; octet writes F32, BF16 or F16");
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::string configWithDType(const std::string &config, DType dtype) {
  const char *name = dtype == DType::BF16  ? "bfloat16"
                     : dtype == DType::F16 ? "float16"
                                           : "float32";
  auto json = nlohmann::ordered_json::parse(config, nullptr, false);
  if (json.is_discarded() || !json.is_object())
    return config;
  bool found = false, changed = false;
  for (const char *key : {"dtype", "torch_dtype"})
    if (json.contains(key)) {
      found = true;
      changed |= json[key] != name;
      json[key] = name;
    }
  if (!found)
    json["torch_dtype"] = name;
  // Unchanged, the file stays as it was, byte for byte.
  return found && !changed ? config : json.dump(2) + "\n";
}

Status checkSameHfConfig(const std::string &expected,
                         const std::string &expectedSource,
                         const std::string &actual,
                         const std::string &actualSource) {
  auto parse = [](const std::string &text, const std::string &source)
      -> StatusOr<nlohmann::json> {
    auto json = nlohmann::json::parse(text, nullptr, false);
    if (json.is_discarded() || !json.is_object())
      return Status::error(source + ": not a JSON object (a HF config.json)");
    // Rotary settings under either spelling (rope_parameters since
    // transformers 5, rope_theta and rope_scaling before).
    for (const char *group : {"rope_parameters", "rope_scaling"})
      if (json.contains(group) && json[group].is_object())
        for (const char *key : {"rope_theta", "rope_type"})
          if (json[group].contains(key) && !json.contains(key))
            json[key] = json[group][key];
    return json;
  };
  auto a = parse(expected, expectedSource);
  if (!a)
    return a.status();
  auto b = parse(actual, actualSource);
  if (!b)
    return b.status();
  for (const char *key :
       {"model_type", "vocab_size", "hidden_size", "intermediate_size",
        "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "head_dim", "rms_norm_eps", "hidden_act", "rope_theta", "rope_type",
        "attention_bias", "mlp_bias", "tie_word_embeddings"}) {
    if (!a->contains(key) || !b->contains(key))
      continue;
    const nlohmann::json &x = (*a)[key], &y = (*b)[key];
    bool same = x.is_number() && y.is_number()
                    ? std::abs(x.get<double>() - y.get<double>()) <=
                          1e-9 * std::abs(x.get<double>())
                    : x == y;
    if (!same)
      return Status::error(actualSource + " gives " + key + " " + y.dump() +
                           ", but " + expectedSource + " says " + x.dump() +
                           ": the weights are of another model; compile "
                           "the bundle from this config.json (octet compile "
                           "CONFIG.json) or pass weights of the bundle's "
                           "model");
  }
  return Status::ok();
}

HfTensorLookup lookupAmong(const std::vector<NamedTensor> &tensors,
                           const std::string &origin) {
  return [&tensors, origin](const std::string &name)
             -> std::optional<HfTensorView> {
    for (const NamedTensor &t : tensors)
      if (t.name == name)
        return HfTensorView{t.dtype, t.shape, t.data.data(), origin};
    return std::nullopt;
  };
}

StatusOr<std::vector<uint8_t>> convertParameterFloats(const uint8_t *src,
                                                      DType from, DType to,
                                                      uint64_t count,
                                                      const std::string &what) {
  bool fromOk = from == DType::F32 || from == DType::BF16 || from == DType::F16;
  bool toOk = to == DType::F32 || to == DType::BF16;
  if (!fromOk || !toOk)
    return Status::error(what + " is " + safetensorsDTypeName(from) +
                         " but the parameter is " + safetensorsDTypeName(to) +
                         ": only F32/BF16/F16 weights convert");
  size_t fromBytes = dtypeBytes(from), toBytes = dtypeBytes(to);
  std::vector<uint8_t> out(count * toBytes);
  for (uint64_t i = 0; i < count; ++i)
    numerics::encodeFloat(to, numerics::decodeFloat(from, src + fromBytes * i),
                          out.data() + toBytes * i);
  return out;
}

StatusOr<std::vector<float>> widenParameter(const std::vector<uint8_t> &bytes,
                                            DType dtype,
                                            const std::string &what) {
  if (dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F16)
    return Status::error(what + " is " + safetensorsDTypeName(dtype) +
                         ": only F32/BF16/F16 parameters map to HF tensors");
  size_t element = dtypeBytes(dtype);
  std::vector<float> values(bytes.size() / element);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = numerics::decodeFloat(dtype, bytes.data() + element * i);
  return values;
}

std::vector<uint8_t> narrowParameter(const std::vector<float> &values,
                                     DType dtype) {
  size_t element = dtypeBytes(dtype);
  std::vector<uint8_t> out(values.size() * element);
  for (size_t i = 0; i < values.size(); ++i)
    numerics::encodeFloat(dtype, values[i], out.data() + element * i);
  return out;
}

} // namespace octet::hf
