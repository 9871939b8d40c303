#include "compiler/Checkpoint/HfCheckpoint.h"

#include "dialects/graph/GraphDialect.h"
#include "spec/SpecReader.h"
#include "support/AtomicFile.h"

#include <google/protobuf/util/message_differencer.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <sys/stat.h>

using namespace mlir;

namespace octet {

using hf::HfParameterLayout;
using hf::HfPiece;

namespace {

std::vector<int64_t> shapeOf(graph::VariableOp var) {
  ArrayRef<int64_t> shape = var.getTensorType().getShape();
  return std::vector<int64_t>(shape.begin(), shape.end());
}

StatusOr<HfParameterLayout> layoutOf(graph::VariableOp var) {
  std::string name = var.getSymName().str();
  std::vector<int64_t> shape = shapeOf(var);
  if (!var.getTensorType().getElementType().isF32())
    return Status::error("parameter \"" + name +
                         "\" is not float32 in the graph; HF checkpoints load "
                         "into float32 parameters only");
  bool transpose = var->hasAttr("graph.hf_transpose");
  auto chunk = var->getAttrOfType<DenseI64ArrayAttr>("graph.hf_chunk");
  int64_t rows = shape.empty() ? 1 : shape[0];

  if (auto hfNames = var->getAttrOfType<ArrayAttr>("hf_names")) {
    // Stacked by octet-fuse-qkv: part i has split[i] rows.
    auto split = var->getAttrOfType<DenseI64ArrayAttr>("split");
    if (!split || split.size() != static_cast<int64_t>(hfNames.size()))
      return Status::error("fused parameter \"" + name +
                           "\" has hf_names but no split of the same length");
    HfParameterLayout layout;
    layout.name = name;
    layout.shape = shape;
    int64_t offset = 0;
    for (auto [attr, part] : llvm::zip(hfNames, split.asArrayRef())) {
      HfPiece piece;
      piece.hfName = cast<StringAttr>(attr).str();
      piece.rows = part;
      piece.paramRow = offset;
      piece.transpose = transpose;
      // Parts of one HF tensor (GPT-2's c_attn) sit side by side in it.
      if (chunk) {
        piece.hfRow = offset;
        layout.hfRows[piece.hfName] = rows;
      }
      offset += part;
      layout.pieces.push_back(piece);
    }
    return layout;
  }

  if (!var.getHfName())
    return Status::error("parameter \"" + name +
                         "\" has no Hugging Face name (hf_name), so it "
                         "cannot be loaded from or exported to a HF "
                         "checkpoint");
  HfParameterLayout layout =
      hf::singleTensorLayout(name, shape, var.getHfName()->str());
  layout.pieces[0].transpose = transpose;
  if (chunk) {
    if (chunk.size() != 2 || chunk[1] < 1 || chunk[0] < 0 ||
        chunk[0] >= chunk[1])
      return Status::error("parameter \"" + name +
                           "\" has a malformed graph.hf_chunk");
    layout.pieces[0].hfRow = chunk[0] * rows;
    layout.hfRows[layout.pieces[0].hfName] = chunk[1] * rows;
  }
  return layout;
}

Status makeDirectory(const std::string &path) {
  if (::mkdir(path.c_str(), 0777) == 0 || errno == EEXIST)
    return Status::ok();
  return Status::error("cannot create directory " + path + ": " +
                       std::strerror(errno));
}

// The config with its dtype key saying what the tensors now hold, so that
// from_pretrained(dtype="auto") loads them as written. Left as it is when
// the tensors mix dtypes or the text is not a JSON object.
std::string withDType(const std::string &config,
                      const std::vector<hf::NamedTensor> &tensors) {
  if (tensors.empty())
    return config;
  DType dtype = tensors.front().dtype;
  for (const hf::NamedTensor &t : tensors)
    if (t.dtype != dtype)
      return config;
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

} // namespace

StatusOr<std::vector<HfParameterLayout>> hfLayouts(ModuleOp module) {
  std::vector<HfParameterLayout> layouts;
  for (auto var : module.getOps<graph::VariableOp>()) {
    if (!var.isTrainable())
      continue;
    StatusOr<HfParameterLayout> layout = layoutOf(var);
    if (!layout)
      return layout.status();
    layouts.push_back(std::move(*layout));
  }
  return layouts;
}

StatusOr<HfLoadSummary> loadHfCheckpoint(const std::string &path,
                                         ModuleOp module,
                                         interp::VariableStore &store) {
  StatusOr<std::vector<HfParameterLayout>> layouts = hfLayouts(module);
  if (!layouts)
    return layouts.status();
  StatusOr<hf::CheckpointReader> reader = hf::CheckpointReader::open(path);
  if (!reader)
    return reader.status();
  StatusOr<hf::HfWeights> weights = hf::loadHfWeights(*reader, *layouts, path);
  if (!weights)
    return weights.status();

  HfLoadSummary summary;
  summary.source = path;
  summary.tensors = weights->dtypes.size();
  summary.dtypes = weights->dtypes;
  summary.skipped = weights->skipped;
  for (HfParameterLayout &layout : *layouts) {
    std::vector<float> &values = weights->parameters.at(layout.name);
    summary.elements += static_cast<int64_t>(values.size());
    store.set(layout.name, interp::Tensor::fromFloats(std::move(layout.shape),
                                                      std::move(values)));
    ++summary.parameters;
  }
  return summary;
}

StatusOr<size_t> exportHfCheckpoint(const std::string &directory,
                                    ModuleOp module,
                                    const interp::VariableStore &store,
                                    const HfExportOptions &options) {
  StatusOr<std::vector<HfParameterLayout>> layouts = hfLayouts(module);
  if (!layouts)
    return layouts.status();
  std::map<std::string, std::vector<float>> parameters;
  for (const HfParameterLayout &layout : *layouts) {
    if (!store.has(layout.name))
      return Status::error("parameter \"" + layout.name +
                           "\" has no value to export");
    const interp::Tensor &t = store.get(layout.name);
    if (t.dtype() != DType::F32 || t.shape() != layout.shape)
      return Status::error("parameter \"" + layout.name + "\" holds a " +
                           dtypeName(t.dtype()) + " " +
                           interp::shapeString(t.shape()) +
                           " tensor; the graph declares f32 " +
                           interp::shapeString(layout.shape));
    parameters[layout.name].assign(t.f(), t.f() + t.numel());
  }
  std::map<std::string, DType> dtypes;
  for (const HfParameterLayout &layout : *layouts)
    for (const HfPiece &piece : layout.pieces) {
      auto it = options.dtypes.find(piece.hfName);
      dtypes[piece.hfName] =
          it == options.dtypes.end() ? options.defaultDType : it->second;
    }
  StatusOr<std::vector<hf::NamedTensor>> tensors =
      hf::exportHfTensors(parameters, *layouts, dtypes);
  if (!tensors)
    return tensors.status();
  if (Status s = makeDirectory(directory); !s)
    return s;
  if (Status s =
          hf::writeCheckpoint(directory, *tensors, options.maxShardBytes);
      !s)
    return s;
  if (!options.configJson.empty())
    if (Status s = writeFileAtomically(directory + "/config.json",
                                       withDType(options.configJson, *tensors));
        !s)
      return s;
  return tensors->size();
}

StatusOr<std::string> hfConfigJson(const spec::ModelSpec &input) {
  spec::ModelSpec m = input;
  spec::applyModelDefaults(m);
  if (m.architecture() != "llama" || m.norm() != "rms_norm" ||
      m.activation() != "swiglu" || m.position_embedding() != "rope")
    return Status::error("config.json can be written for Llama-family "
                         "models (rms_norm, swiglu, rope) only; this model is "
                         "\"" +
                         m.architecture() + "\" with " + m.norm() + ", " +
                         m.activation() + ", " + m.position_embedding());
  // HF's Llama has one attention_bias for q, k, v and o; Qwen2 has biases
  // on q, k and v only.
  bool qwen2 = m.qkv_bias() && !m.attn_out_bias();
  if (!m.qkv_bias() && m.attn_out_bias())
    return Status::error("no Hugging Face Llama-family config has an output "
                         "projection bias without q/k/v biases");
  if (qwen2 && m.mlp_bias())
    return Status::error("Qwen2 configs have no MLP bias; this model has one");
  nlohmann::ordered_json c;
  c["architectures"] = {qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM"};
  c["model_type"] = qwen2 ? "qwen2" : "llama";
  c["vocab_size"] = m.vocab_size();
  c["hidden_size"] = m.hidden_size();
  c["intermediate_size"] = m.intermediate_size();
  c["num_hidden_layers"] = m.num_layers();
  c["num_attention_heads"] = m.num_heads();
  c["num_key_value_heads"] = m.num_kv_heads();
  c["head_dim"] = m.head_dim();
  c["max_position_embeddings"] = m.max_position_embeddings();
  c["rms_norm_eps"] = m.norm_eps();
  c["rope_theta"] = m.rope_theta();
  if (m.has_rope_scaling()) {
    const spec::RopeScaling &rs = m.rope_scaling();
    c["rope_scaling"] = {{"rope_type", rs.type()},
                         {"factor", rs.factor()},
                         {"low_freq_factor", rs.low_freq_factor()},
                         {"high_freq_factor", rs.high_freq_factor()},
                         {"original_max_position_embeddings",
                          rs.original_max_position_embeddings()}};
  }
  c["tie_word_embeddings"] = m.tie_word_embeddings();
  if (!qwen2) {
    c["attention_bias"] = m.qkv_bias();
    c["mlp_bias"] = m.mlp_bias();
  }
  c["hidden_act"] = "silu";
  c["initializer_range"] = m.init_std();
  c["torch_dtype"] = "float32";
  return c.dump(2) + "\n";
}

Status checkSameModel(const spec::ModelSpec &specModel,
                      const std::string &specSource,
                      const spec::ModelSpec &hfModel,
                      const std::string &hfSource) {
  spec::ModelSpec a = specModel, b = hfModel;
  spec::applyModelDefaults(a);
  spec::applyModelDefaults(b);
  google::protobuf::util::MessageDifferencer differ;
  const google::protobuf::Descriptor *d = spec::ModelSpec::descriptor();
  for (const char *ignored :
       {"max_position_embeddings", "init_std", "sliding_window"})
    differ.IgnoreField(d->FindFieldByName(ignored));
  std::string report;
  differ.ReportDifferencesToString(&report);
  if (differ.Compare(a, b))
    return Status::ok();
  // The report also lists the fields it was told to ignore.
  std::string differences;
  for (size_t begin = 0, end; begin < report.size(); begin = end + 1) {
    end = report.find('\n', begin);
    if (end == std::string::npos)
      end = report.size();
    if (report.compare(begin, 9, "ignored: ") != 0)
      differences += "  " + report.substr(begin, end - begin) + "\n";
  }
  return Status::error(specSource + " and " + hfSource +
                       " describe different models (first value: the spec, "
                       "second: config.json):\n" +
                       differences +
                       "make the spec's model block match the checkpoint's "
                       "config.json");
}

} // namespace octet
