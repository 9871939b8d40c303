#include "hf/HfConfig.h"

#include "spec/SpecReader.h"

#include <google/protobuf/util/message_differencer.h>

#include <nlohmann/json.hpp>

#include <cctype>
#include <initializer_list>
#include <map>
#include <optional>

namespace octet::hf {
namespace {

using nlohmann::json;

enum class Family { Llama, Mistral, Qwen2, Gpt2 };

struct KnownModel {
  const char *modelType;
  const char *className;
  Family family;
};

const KnownModel kKnownModels[] = {
    {"llama", "LlamaForCausalLM", Family::Llama},
    {"mistral", "MistralForCausalLM", Family::Mistral},
    {"qwen2", "Qwen2ForCausalLM", Family::Qwen2},
    {"gpt2", "GPT2LMHeadModel", Family::Gpt2},
};

std::string knownList(bool classes) {
  std::string out;
  for (const KnownModel &m : kKnownModels)
    out += std::string(out.empty() ? "" : ", ") +
           (classes ? m.className : m.modelType);
  return out;
}

// Parses without exceptions and keeps the parser's line and column, which
// json::parse(..., allow_exceptions = false) throws away.
class LocatingParser : public nlohmann::detail::json_sax_dom_parser<json> {
public:
  explicit LocatingParser(json &root)
      : json_sax_dom_parser<json>(root, /*allow_exceptions=*/false) {}
  template <class Exception>
  bool parse_error(std::size_t, const std::string &, const Exception &ex) {
    error = ex.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " tag.
    size_t tagEnd = error.find("] ");
    if (error.rfind("[json.exception", 0) == 0 && tagEnd != std::string::npos)
      error = error.substr(tagEnd + 2);
    return false;
  }
  std::string error;
};

// Reads typed values of a JSON object and collects errors naming the keys.
class Reader {
public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  void error(const std::string &key, const std::string &message) {
    errors_ +=
        (errors_.empty() ? "" : "\n") + source_ + ": " + key + ": " + message;
  }
  const std::string &errors() const { return errors_; }

  // The value at `key`, or null where it is absent or JSON null.
  static const json *find(const json &obj, const std::string &key) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null())
      return nullptr;
    return &*it;
  }

  // The value at `key` if it has the type `is` tests for; an error naming
  // `path` (the key's full path) otherwise.
  template <typename T>
  std::optional<T> get(const json &obj, const std::string &key,
                       const std::string &path,
                       bool (json::*is)() const noexcept, const char *expected,
                       bool required = false) {
    const json *v = find(obj, key);
    if (!v) {
      if (required)
        error(path,
              std::string("missing; config.json must give it as ") + expected);
      return std::nullopt;
    }
    if ((v->*is)())
      return v->get<T>();
    error(path, std::string("must be ") + expected + ", got " + v->dump());
    return std::nullopt;
  }
  std::optional<int64_t> getInt(const json &obj, const std::string &key,
                                const std::string &path, bool required) {
    return get<int64_t>(obj, key, path, &json::is_number_integer, "an integer",
                        required);
  }
  std::optional<double> getDouble(const json &obj, const std::string &key,
                                  const std::string &path) {
    return get<double>(obj, key, path, &json::is_number, "a number");
  }
  std::optional<bool> getBool(const json &obj, const std::string &key,
                              const std::string &path) {
    return get<bool>(obj, key, path, &json::is_boolean, "true or false");
  }
  std::optional<std::string> getString(const json &obj, const std::string &key,
                                       const std::string &path) {
    return get<std::string>(obj, key, path, &json::is_string, "a string");
  }

private:
  std::string source_;
  std::string errors_;
};

std::optional<Family> resolveFamily(const json &root, Reader &r) {
  std::optional<Family> fromType;
  if (auto type = r.getString(root, "model_type", "model_type")) {
    for (const KnownModel &m : kKnownModels)
      if (*type == m.modelType)
        fromType = m.family;
    if (!fromType) {
      r.error("model_type", "\"" + *type + "\" is not supported; octet " +
                                "imports " + knownList(false));
      return std::nullopt;
    }
  }
  std::optional<Family> fromClass;
  if (const json *classes = Reader::find(root, "architectures")) {
    if (!classes->is_array()) {
      r.error("architectures",
              "must be a list of class names, got " + classes->dump());
      return std::nullopt;
    }
    for (const json &c : *classes) {
      std::string name = c.is_string() ? c.get<std::string>() : c.dump();
      std::optional<Family> family;
      for (const KnownModel &m : kKnownModels)
        if (name == m.className)
          family = m.family;
      if (!family) {
        r.error("architectures",
                "\"" + name + "\" is not supported; octet " +
                    "trains causal language models: " + knownList(true));
        return std::nullopt;
      }
      if ((fromType && *family != *fromType) ||
          (fromClass && *family != *fromClass)) {
        r.error("architectures",
                "\"" + name + "\" contradicts " +
                    (fromType ? "model_type" : "another entry") +
                    "; give one model family");
        return std::nullopt;
      }
      fromClass = family;
    }
  }
  if (fromType)
    return fromType;
  if (fromClass)
    return fromClass;
  r.error("model_type", "missing, and no architectures list either; set "
                        "model_type to one of " +
                            knownList(false));
  return std::nullopt;
}

// Spec field → config.json key, so the shared model checks speak in the
// file's terms.
using KeyMap = std::map<std::string, std::string>;

void readRope(const json &root, Reader &r, spec::ModelSpec &m, KeyMap &keys) {
  const json *params = Reader::find(root, "rope_parameters");
  if (params && !params->is_object()) {
    r.error("rope_parameters", "must be an object, got " + params->dump());
    return;
  }
  std::optional<double> theta = r.getDouble(root, "rope_theta", "rope_theta");
  if (params) {
    std::optional<double> inner =
        r.getDouble(*params, "rope_theta", "rope_parameters.rope_theta");
    if (theta && inner && *theta != *inner)
      r.error("rope_theta", "contradicts rope_parameters.rope_theta; keep one");
    if (inner) {
      theta = inner;
      keys["rope_theta"] = "rope_parameters.rope_theta";
    }
  }
  m.set_rope_theta(theta.value_or(10000.0));

  const json *scaling = params ? params : Reader::find(root, "rope_scaling");
  const std::string prefix = params ? "rope_parameters" : "rope_scaling";
  if (!scaling)
    return;
  if (!scaling->is_object()) {
    r.error(prefix, "must be an object or null, got " + scaling->dump());
    return;
  }
  std::optional<std::string> ropeType =
      r.getString(*scaling, "rope_type", prefix + ".rope_type");
  std::optional<std::string> legacyType =
      r.getString(*scaling, "type", prefix + ".type");
  if (ropeType && legacyType && *ropeType != *legacyType) {
    r.error(prefix + ".type", "\"" + *legacyType + "\" contradicts " + prefix +
                                  ".rope_type \"" + *ropeType + "\"");
    return;
  }
  std::string type = ropeType ? *ropeType : legacyType.value_or("");
  if (type == "default")
    return;
  if (type != "llama3") {
    r.error(prefix + (ropeType ? ".rope_type" : ".type"),
            type.empty() ? std::string("missing; octet supports \"llama3\" "
                                       "(or \"default\": none)")
                         : "\"" + type +
                               "\" is not supported; octet "
                               "implements \"llama3\" rope scaling");
    return;
  }
  spec::RopeScaling &rs = *m.mutable_rope_scaling();
  rs.set_type("llama3");
  keys["rope_scaling.type"] = prefix + (ropeType ? ".rope_type" : ".type");
  for (const char *f : {"factor", "low_freq_factor", "high_freq_factor",
                        "original_max_position_embeddings"})
    keys[std::string("rope_scaling.") + f] = prefix + "." + f;
  if (auto v = r.getDouble(*scaling, "factor", prefix + ".factor"))
    rs.set_factor(*v);
  if (auto v =
          r.getDouble(*scaling, "low_freq_factor", prefix + ".low_freq_factor"))
    rs.set_low_freq_factor(*v);
  if (auto v = r.getDouble(*scaling, "high_freq_factor",
                           prefix + ".high_freq_factor"))
    rs.set_high_freq_factor(*v);
  if (auto v = r.getInt(*scaling, "original_max_position_embeddings",
                        prefix + ".original_max_position_embeddings", false))
    rs.set_original_max_position_embeddings(*v);
}

// An integer key and the ModelSpec field it sets.
struct IntKey {
  const char *key;
  void (spec::ModelSpec::*set)(int64_t);
  bool required;
};

void readInts(const json &root, Reader &r, spec::ModelSpec &m,
              std::initializer_list<IntKey> keys) {
  for (const IntKey &k : keys)
    if (auto v = r.getInt(root, k.key, k.key, k.required))
      (m.*k.set)(*v);
}

void readLlamaFamily(const json &root, Family family, Reader &r,
                     spec::ModelSpec &m, KeyMap &keys) {
  keys = {{"vocab_size", "vocab_size"},
          {"hidden_size", "hidden_size"},
          {"intermediate_size", "intermediate_size"},
          {"num_layers", "num_hidden_layers"},
          {"num_heads", "num_attention_heads"},
          {"num_kv_heads", "num_key_value_heads"},
          {"head_dim", "head_dim"},
          {"max_position_embeddings", "max_position_embeddings"},
          {"norm_eps", "rms_norm_eps"},
          {"rope_theta", "rope_theta"},
          {"init_std", "initializer_range"},
          {"sliding_window", "sliding_window"}};
  m.set_architecture("llama");
  using M = spec::ModelSpec;
  readInts(root, r, m,
           {{"vocab_size", &M::set_vocab_size, true},
            {"hidden_size", &M::set_hidden_size, true},
            {"intermediate_size", &M::set_intermediate_size, true},
            {"num_hidden_layers", &M::set_num_layers, true},
            {"num_attention_heads", &M::set_num_heads, true},
            {"num_key_value_heads", &M::set_num_kv_heads, false},
            {"head_dim", &M::set_head_dim, false}});
  int64_t defaultPositions = family == Family::Llama     ? 2048
                             : family == Family::Mistral ? 4096 * 32
                                                         : 32768;
  m.set_max_position_embeddings(r.getInt(root, "max_position_embeddings",
                                         "max_position_embeddings", false)
                                    .value_or(defaultPositions));
  m.set_norm_eps(
      r.getDouble(root, "rms_norm_eps", "rms_norm_eps").value_or(1e-6));
  m.set_init_std(r.getDouble(root, "initializer_range", "initializer_range")
                     .value_or(0.02));
  m.set_tie_word_embeddings(
      r.getBool(root, "tie_word_embeddings", "tie_word_embeddings")
          .value_or(false));

  std::string act =
      r.getString(root, "hidden_act", "hidden_act").value_or("silu");
  if (act != "silu")
    r.error("hidden_act", "\"" + act +
                              "\" is not supported; the Llama "
                              "family's gated MLP is SwiGLU "
                              "(\"silu\")");
  m.set_activation("swiglu");

  bool attnBias =
      r.getBool(root, "attention_bias", "attention_bias").value_or(false);
  m.set_qkv_bias(family == Family::Qwen2 || attnBias);
  m.set_attn_out_bias(family != Family::Qwen2 && attnBias);
  m.set_mlp_bias(r.getBool(root, "mlp_bias", "mlp_bias").value_or(false));

  if (family == Family::Mistral) {
    // transformers' MistralConfig defaults the window to 4096; an explicit
    // null turns it off.
    auto it = root.find("sliding_window");
    if (it == root.end())
      m.set_sliding_window(4096);
    else if (auto v = r.getInt(root, "sliding_window", "sliding_window", false))
      m.set_sliding_window(*v);
  } else if (family == Family::Qwen2 &&
             r.getBool(root, "use_sliding_window", "use_sliding_window")
                 .value_or(false)) {
    if (auto v = r.getInt(root, "sliding_window", "sliding_window", true))
      m.set_sliding_window(*v);
  }
  readRope(root, r, m, keys);
}

void readGpt2(const json &root, Reader &r, spec::ModelSpec &m, KeyMap &keys) {
  keys = {{"vocab_size", "vocab_size"},
          {"hidden_size", "n_embd"},
          {"intermediate_size", "n_inner"},
          {"num_layers", "n_layer"},
          {"num_heads", "n_head"},
          {"max_position_embeddings", "n_positions"},
          {"norm_eps", "layer_norm_epsilon"},
          {"init_std", "initializer_range"}};
  m.set_architecture("gpt2");
  m.set_norm("layer_norm");
  m.set_position_embedding("learned");
  using M = spec::ModelSpec;
  readInts(root, r, m,
           {{"vocab_size", &M::set_vocab_size, true},
            {"n_embd", &M::set_hidden_size, true},
            {"n_layer", &M::set_num_layers, true},
            {"n_head", &M::set_num_heads, true},
            {"n_positions", &M::set_max_position_embeddings, true},
            {"n_inner", &M::set_intermediate_size, false}});
  m.set_norm_eps(r.getDouble(root, "layer_norm_epsilon", "layer_norm_epsilon")
                     .value_or(1e-5));
  m.set_init_std(r.getDouble(root, "initializer_range", "initializer_range")
                     .value_or(0.02));
  m.set_tie_word_embeddings(
      r.getBool(root, "tie_word_embeddings", "tie_word_embeddings")
          .value_or(true));
  m.set_qkv_bias(true);
  m.set_attn_out_bias(true);
  m.set_mlp_bias(true);

  std::string act =
      r.getString(root, "activation_function", "activation_function")
          .value_or("gelu_new");
  if (act == "gelu_new" || act == "gelu_pytorch_tanh")
    m.set_activation("gelu_tanh");
  else if (act == "gelu")
    m.set_activation("gelu");
  else
    r.error("activation_function",
            "\"" + act +
                "\" is not supported; use gelu_new (tanh "
                "approximation) or gelu");
  if (r.getBool(root, "scale_attn_by_inverse_layer_idx",
                "scale_attn_by_inverse_layer_idx")
          .value_or(false))
    r.error("scale_attn_by_inverse_layer_idx",
            "true is not supported; octet scales attention by "
            "1/sqrt(head_dim) only: set it to false");
  if (!r.getBool(root, "scale_attn_weights", "scale_attn_weights")
           .value_or(true))
    r.error("scale_attn_weights", "false is not supported; octet always "
                                  "scales attention scores by "
                                  "1/sqrt(head_dim): set it to true");
}

// Rewrites spec field names in a shared check's message as config.json keys.
std::string inJsonTerms(std::string message, const KeyMap &keys) {
  auto isWordChar = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  };
  for (const auto &[field, key] : keys) {
    if (field == key)
      continue;
    for (size_t pos = message.find(field); pos != std::string::npos;
         pos = message.find(field, pos)) {
      size_t end = pos + field.size();
      if ((pos > 0 && isWordChar(message[pos - 1])) ||
          (end < message.size() && isWordChar(message[end]))) {
        pos = end;
        continue;
      }
      message.replace(pos, field.size(), key);
      pos += key.size();
    }
  }
  return message;
}

} // namespace

StatusOr<spec::ModelSpec> importHfConfig(const std::string &text,
                                         const std::string &source) {
  json root;
  LocatingParser parser(root);
  if (!json::sax_parse(text, &parser))
    return Status::error(
        source + ": " +
        (parser.error.empty() ? "not valid JSON" : parser.error));
  if (!root.is_object())
    return Status::error(source + ": expected a JSON object (a Hugging Face "
                                  "config.json)");
  Reader r(source);
  std::optional<Family> family = resolveFamily(root, r);
  if (!family)
    return Status::error(r.errors());
  spec::ModelSpec model;
  KeyMap keys;
  if (*family == Family::Gpt2)
    readGpt2(root, r, model, keys);
  else
    readLlamaFamily(root, *family, r, model, keys);
  if (!r.errors().empty())
    return Status::error(r.errors());

  spec::applyModelDefaults(model);
  for (const spec::SpecIssue &issue : spec::checkModel(model)) {
    auto it = keys.find(issue.field);
    r.error(it != keys.end() ? it->second : issue.field,
            inJsonTerms(issue.message, keys));
  }
  if (!r.errors().empty())
    return Status::error(r.errors());
  return model;
}

StatusOr<spec::ModelSpec> readHfConfigFile(const std::string &path) {
  StatusOr<std::string> text = spec::readTextFile(path);
  if (!text)
    return text.status();
  return importHfConfig(*text, path);
}

StatusOr<spec::Spec> readHfConfigAsSpec(const std::string &path) {
  StatusOr<spec::ModelSpec> model = readHfConfigFile(path);
  if (!model)
    return model.status();
  spec::Spec combined;
  *combined.mutable_model() = *model;
  combined.mutable_train()->set_micro_batch_size(1);
  combined.mutable_train()->set_seq_len(1);
  StatusOr<spec::Spec> resolved = spec::resolveSpec(std::move(combined));
  if (!resolved)
    return resolved.status().withContext(path);
  return resolved;
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

} // namespace octet::hf
