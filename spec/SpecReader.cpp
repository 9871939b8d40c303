#include "spec/SpecReader.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <sstream>

namespace octet::spec {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::TextFormat;

std::string quoted(const std::string &s) { return "\"" + s + "\""; }

std::string formatDouble(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

std::string joinQuoted(std::initializer_list<const char *> values) {
  std::string out;
  for (const char *v : values) {
    if (!out.empty())
      out += ", ";
    out += quoted(v);
  }
  return out;
}

size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min(
          {row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// Protobuf reports an unknown field as `Message type "pkg.T" has no field
// named "x".`; rewrite it to name the block and suggest the closest field.
std::string explainUnknownField(const std::string &message, std::string &name) {
  const std::string typePrefix = "Message type \"";
  const std::string fieldPrefix = "\" has no field named \"";
  if (message.rfind(typePrefix, 0) != 0)
    return message;
  size_t typeEnd = message.find(fieldPrefix);
  if (typeEnd == std::string::npos)
    return message;
  std::string typeName =
      message.substr(typePrefix.size(), typeEnd - typePrefix.size());
  size_t nameStart = typeEnd + fieldPrefix.size();
  size_t nameEnd = message.find('"', nameStart);
  if (nameEnd == std::string::npos)
    return message;
  name = message.substr(nameStart, nameEnd - nameStart);
  const Descriptor *desc =
      google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(
          typeName);
  if (!desc)
    return message;
  std::string known, best;
  size_t bestDistance = 3;
  for (int i = 0; i < desc->field_count(); ++i) {
    const std::string &candidate = desc->field(i)->name();
    known += (i ? ", " : "") + candidate;
    size_t d = editDistance(name, candidate);
    if (d < bestDistance) {
      bestDistance = d;
      best = candidate;
    }
  }
  std::string out = "unknown field " + quoted(name) + " in " + desc->name();
  if (!best.empty())
    out += "; did you mean " + quoted(best) + "?";
  return out + " (known fields: " + known + ")";
}

// The text of `line` (0-based) up to `column`.
std::string linePrefix(const std::string &text, int line, int column) {
  size_t start = 0;
  for (int i = 0; i < line && start != std::string::npos; ++i) {
    start = text.find('\n', start);
    if (start != std::string::npos)
      ++start;
  }
  if (start == std::string::npos)
    return "";
  return text.substr(start, column);
}

// The field whose value starts at the end of `prefix`, for value errors that
// protobuf reports without the field's name.
std::string fieldBefore(const std::string &prefix) {
  size_t colon = prefix.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return "";
  size_t end = prefix.find_last_not_of(" \t", colon - 1);
  if (end == std::string::npos)
    return "";
  size_t begin = end;
  while (begin > 0 &&
         (std::isalnum(static_cast<unsigned char>(prefix[begin - 1])) ||
          prefix[begin - 1] == '_'))
    --begin;
  return prefix.substr(begin, end + 1 - begin);
}

class Collector : public google::protobuf::io::ErrorCollector {
public:
  Collector(const std::string &source, const std::string &text)
      : source_(source), text_(text) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string &message) override {
    std::string prefix = linePrefix(text_, line, column);
    std::string unknown;
    std::string explained = explainUnknownField(message, unknown);
    if (!unknown.empty()) {
      // Protobuf points past the name; point at it.
      size_t at = prefix.rfind(unknown);
      if (at != std::string::npos)
        column = static_cast<int>(at);
    } else if (message.rfind("Expected ", 0) == 0) {
      std::string field = fieldBefore(prefix);
      if (!field.empty())
        explained = "field " + quoted(field) + ": " + message;
    }
    errors_ += (errors_.empty() ? "" : "\n") + source_ + ":" +
               std::to_string(line + 1) + ":" + std::to_string(column + 1) +
               ": " + explained;
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber,
                  const std::string &) override {}
  const std::string &errors() const { return errors_; }

private:
  const std::string &source_;
  const std::string &text_;
  std::string errors_;
};

Status parseInto(const std::string &text, const std::string &source, Spec &spec,
                 TextFormat::ParseInfoTree *tree) {
  Collector collector(source, text);
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  parser.WriteLocationsTo(tree);
  if (!parser.ParseFromString(text, &spec))
    return Status::error(collector.errors().empty()
                             ? source + ": not a valid spec"
                             : collector.errors());
  return Status::ok();
}

// Collects issues under a path prefix ("train.optimizer.").
class Issues {
public:
  Issues(std::vector<SpecIssue> &list, std::string prefix)
      : list_(list), prefix_(std::move(prefix)) {}
  Issues nested(const std::string &block) const {
    return Issues(list_, prefix_ + block + ".");
  }
  void add(const std::string &field, std::string message) {
    list_.push_back({prefix_ + field, std::move(message)});
  }

  void positive(const std::string &field, bool has, int64_t value) {
    if (!has)
      add(field, "missing; set a positive integer");
    else if (value <= 0)
      add(field, "must be positive, got " + std::to_string(value));
  }
  void positiveIfSet(const std::string &field, bool has, int64_t value) {
    if (has)
      positive(field, has, value);
  }
  void nonNegative(const std::string &field, int64_t value) {
    if (value < 0)
      add(field, "must not be negative, got " + std::to_string(value));
  }
  void positive(const std::string &field, double value) {
    if (!(value > 0))
      add(field, "must be positive, got " + formatDouble(value));
  }
  void inRange(const std::string &field, double value, double lo, double hi,
               bool hiInclusive) {
    if (!(value >= lo && (hiInclusive ? value <= hi : value < hi)))
      add(field, "must lie in [" + formatDouble(lo) + ", " + formatDouble(hi) +
                     (hiInclusive ? "]" : ")") + ", got " +
                     formatDouble(value));
  }
  // An enum-like string. Returns whether it holds a known value.
  bool oneOf(const std::string &field, const std::string &value,
             std::initializer_list<const char *> allowed, bool required) {
    if (value.empty()) {
      if (required)
        add(field, "missing; set one of " + joinQuoted(allowed));
      return false;
    }
    for (const char *a : allowed)
      if (value == a)
        return true;
    add(field, "unknown value " + quoted(value) + "; expected one of " +
                   joinQuoted(allowed));
    return false;
  }
  // A field the architecture fixes.
  void fixedBy(const std::string &field, const std::string &value,
               const std::string &owner, const std::string &ownerValue,
               std::initializer_list<const char *> allowed) {
    for (const char *a : allowed)
      if (value == a)
        return;
    add(field, quoted(value) + " contradicts " + owner + " " +
                   quoted(ownerValue) + ", which uses " + joinQuoted(allowed) +
                   "; remove the field or set it to " +
                   quoted(*allowed.begin()));
  }
  void notApplicable(const std::string &field, bool has,
                     const std::string &why) {
    if (has)
      add(field, "is set, but " + why + "; remove it");
  }

private:
  std::vector<SpecIssue> &list_;
  std::string prefix_;
};

void checkModelInto(const ModelSpec &m, Issues is) {
  const std::string &arch = m.architecture();
  bool known = is.oneOf("architecture", arch, {"llama", "gpt2"}, true);
  bool llama = known && arch == "llama", gpt2 = known && arch == "gpt2";

  is.positive("vocab_size", m.has_vocab_size(), m.vocab_size());
  is.positive("hidden_size", m.has_hidden_size(), m.hidden_size());
  if (llama || m.has_intermediate_size())
    is.positive("intermediate_size", m.has_intermediate_size(),
                m.intermediate_size());
  is.positive("num_layers", m.has_num_layers(), m.num_layers());
  is.positive("num_heads", m.has_num_heads(), m.num_heads());
  is.positiveIfSet("num_kv_heads", m.has_num_kv_heads(), m.num_kv_heads());
  if (m.has_head_dim())
    is.positive("head_dim", true, m.head_dim());
  else if (m.hidden_size() > 0 && m.num_heads() > 0)
    is.add("num_heads",
           std::to_string(m.num_heads()) + " does not divide hidden_size (" +
               std::to_string(m.hidden_size()) +
               "), so head_dim cannot be derived; choose num_heads that "
               "divides hidden_size, or set head_dim");
  if (m.num_heads() > 0 && m.num_kv_heads() > 0 &&
      m.num_heads() % m.num_kv_heads() != 0)
    is.add("num_kv_heads",
           std::to_string(m.num_kv_heads()) + " does not divide num_heads (" +
               std::to_string(m.num_heads()) +
               "); grouped-query attention shares each kv head among "
               "num_heads / num_kv_heads query heads, so pick a divisor");
  if (gpt2 && !m.has_max_position_embeddings())
    is.add("max_position_embeddings",
           "missing; gpt2 learns one embedding per position, so set the "
           "longest sequence the model sees (1024 for GPT-2)");
  else
    is.positiveIfSet("max_position_embeddings", m.has_max_position_embeddings(),
                     m.max_position_embeddings());
  is.positiveIfSet("sliding_window", m.has_sliding_window(),
                   m.sliding_window());

  bool normKnown =
      is.oneOf("norm", m.norm(), {"rms_norm", "layer_norm"}, false);
  bool actKnown = is.oneOf("activation", m.activation(),
                           {"swiglu", "gelu", "gelu_tanh"}, false);
  bool posKnown = is.oneOf("position_embedding", m.position_embedding(),
                           {"rope", "learned"}, false);
  if (llama) {
    if (normKnown)
      is.fixedBy("norm", m.norm(), "architecture", arch, {"rms_norm"});
    if (actKnown)
      is.fixedBy("activation", m.activation(), "architecture", arch,
                 {"swiglu"});
    if (posKnown)
      is.fixedBy("position_embedding", m.position_embedding(), "architecture",
                 arch, {"rope"});
  } else if (gpt2) {
    if (normKnown)
      is.fixedBy("norm", m.norm(), "architecture", arch, {"layer_norm"});
    if (actKnown)
      is.fixedBy("activation", m.activation(), "architecture", arch,
                 {"gelu_tanh", "gelu"});
    if (posKnown)
      is.fixedBy("position_embedding", m.position_embedding(), "architecture",
                 arch, {"learned"});
  }
  if (m.has_norm_eps())
    is.positive("norm_eps", m.norm_eps());
  if (m.has_init_std())
    is.positive("init_std", m.init_std());

  if (!posKnown)
    return;
  if (m.position_embedding() != "rope") {
    const std::string why = "position_embedding is " +
                            quoted(m.position_embedding()) +
                            " (no rotary embedding)";
    is.notApplicable("rope_theta", m.has_rope_theta(), why);
    is.notApplicable("rope_scaling", m.has_rope_scaling(), why);
    return;
  }
  if (m.has_rope_theta())
    is.positive("rope_theta", m.rope_theta());
  if (m.head_dim() > 0 && m.head_dim() % 2 != 0)
    is.add("head_dim", std::to_string(m.head_dim()) +
                           " is odd; rotary embedding rotates pairs of "
                           "dimensions, so head_dim must be even");
  if (!m.has_rope_scaling())
    return;
  const RopeScaling &rs = m.rope_scaling();
  Issues ris = is.nested("rope_scaling");
  if (!ris.oneOf("type", rs.type(), {"llama3"}, true))
    return;
  auto need = [&](const char *field, bool has, double value) {
    if (!has)
      ris.add(field, "missing; the llama3 rope scaling needs factor, "
                     "low_freq_factor, high_freq_factor and "
                     "original_max_position_embeddings (Llama 3.1: 8, 1, 4, "
                     "8192)");
    else
      ris.positive(field, value);
  };
  need("factor", rs.has_factor(), rs.factor());
  need("low_freq_factor", rs.has_low_freq_factor(), rs.low_freq_factor());
  need("high_freq_factor", rs.has_high_freq_factor(), rs.high_freq_factor());
  need("original_max_position_embeddings",
       rs.has_original_max_position_embeddings(),
       double(rs.original_max_position_embeddings()));
  if (rs.has_low_freq_factor() && rs.has_high_freq_factor() &&
      !(rs.high_freq_factor() > rs.low_freq_factor()))
    ris.add("high_freq_factor",
            "must exceed low_freq_factor (" +
                formatDouble(rs.low_freq_factor()) + "), got " +
                formatDouble(rs.high_freq_factor()) +
                "; the scaling interpolates between the two wavelengths");
}

void checkPrecision(const Precision &p, const ModelSpec &model, Issues is) {
  is.oneOf("activation_dtype", p.activation_dtype(), {"bf16", "f32"}, false);
  if (!is.oneOf("recipe", p.recipe(),
                {"delayed", "current", "blockwise", "bf16"}, true))
    return;
  bool fp8 = p.recipe() != "bf16", delayed = p.recipe() == "delayed";
  const std::string recipe = "recipe is " + quoted(p.recipe());
  if (fp8)
    is.oneOf("format", p.format(), {"hybrid", "e4m3"}, true);
  else
    is.notApplicable("format", !p.format().empty(), recipe);
  if (delayed) {
    is.positive("amax_history_len", p.has_amax_history_len(),
                p.amax_history_len());
    is.oneOf("amax_algorithm", p.amax_algorithm(), {"max", "most_recent"},
             true);
  } else {
    const std::string why = recipe + " (amax history belongs to \"delayed\")";
    is.notApplicable("amax_history_len", p.has_amax_history_len(), why);
    is.notApplicable("amax_algorithm", !p.amax_algorithm().empty(), why);
  }
  if (fp8)
    is.nonNegative("margin", p.margin());
  else
    is.notApplicable("margin", p.has_margin(), recipe);
  is.notApplicable("power_of_two_scales",
                   p.power_of_two_scales() && p.recipe() != "blockwise",
                   recipe + " (it applies to \"blockwise\")");
  if (!fp8) {
    const std::string why = recipe + ", so every layer is BF16 already";
    is.notApplicable("first_last_layers_bf16", p.has_first_last_layers_bf16(),
                     why);
    is.notApplicable("bf16_patterns", p.bf16_patterns_size() > 0, why);
    return;
  }
  const LayerCount &fl = p.first_last_layers_bf16();
  Issues fis = is.nested("first_last_layers_bf16");
  fis.nonNegative("first", fl.first());
  fis.nonNegative("last", fl.last());
  if (model.num_layers() > 0 && fl.first() + fl.last() > model.num_layers())
    fis.add("last", "first + last (" + std::to_string(fl.first() + fl.last()) +
                        ") exceeds model.num_layers (" +
                        std::to_string(model.num_layers()) +
                        "); lower them or use recipe \"bf16\"");
  for (int i = 0; i < p.bf16_patterns_size(); ++i)
    if (p.bf16_patterns(i).empty())
      is.add("bf16_patterns", "entry " + std::to_string(i) +
                                  " is empty; remove it or write a glob "
                                  "such as \"layers.*.mlp.w_down\"");
}

// BF16 gradients are one rounding of each wgrad GEMM's f32 product only
// where the GEMM overwrites its accumulator once a step.
void checkGradDtype(const TrainSpec &t, Issues is) {
  const Precision &p = t.precision();
  if (!is.oneOf("grad_dtype", p.grad_dtype(), {"f32", "bf16"}, false) ||
      p.grad_dtype() != "bf16")
    return;
  if (p.activation_dtype() == "f32")
    is.add("grad_dtype",
           "\"bf16\" needs activation_dtype \"bf16\": with f32 "
           "activations the BF16 GEMMs read f32 operands, and cuBLASLt's f32 "
           "GEMMs write f32 only; set activation_dtype \"bf16\" or "
           "grad_dtype \"f32\"");
  const Parallel &par = t.parallel();
  if (par.pipeline() > 1) {
    is.add("grad_dtype",
           "\"bf16\" is not compiled for pipeline stages "
           "(parallel.pipeline is " + std::to_string(par.pipeline()) +
               "): each stage sums the gradients of the schedule's "
               "microbatches in its accumulators, which in BF16 would "
               "round the running sum at every microbatch; set grad_dtype "
               "\"f32\" or parallel.pipeline 1");
    return;
  }
  int64_t dp = std::max<int64_t>(1, par.data());
  if (t.micro_batch_size() <= 0 || t.global_batch_size() <= 0 ||
      t.global_batch_size() % (t.micro_batch_size() * dp) != 0)
    return; // reported with global_batch_size
  int64_t micro = t.global_batch_size() / (t.micro_batch_size() * dp);
  if (micro > 1)
    is.add("grad_dtype",
           "\"bf16\" needs one microbatch a step, but global_batch_size / "
           "(micro_batch_size × parallel.data) = " +
               std::to_string(t.global_batch_size()) + " / (" +
               std::to_string(t.micro_batch_size()) + " × " +
               std::to_string(dp) + ") = " + std::to_string(micro) +
               ": accumulating the microbatches' gradients in BF16 rounds "
               "the running sum at every microbatch and loses precision; "
               "set global_batch_size to micro_batch_size × parallel.data "
               "(" + std::to_string(t.micro_batch_size() * dp) +
               "), raise micro_batch_size to " +
               std::to_string(t.global_batch_size() / dp) +
               ", or use grad_dtype \"f32\"");
}

// An FP8 head is compiled where the cross-entropy gradient kernel that
// casts the logits gradient has GPU code; under another recipe the field
// would be dropped on the GPU, so it is an error that says so.
void checkLmHeadFp8(const Precision &p, Issues is) {
  if (!p.lm_head_fp8())
    return;
  if (p.recipe() == "bf16") {
    is.add("lm_head_fp8", "is true, but recipe is \"bf16\", so no GEMM is "
                          "FP8; set recipe \"delayed\" or remove the field");
    return;
  }
  if (p.recipe() != "delayed")
    is.add("lm_head_fp8",
           "is true, but recipe is " + quoted(p.recipe()) +
               ": an FP8 head is compiled for \"delayed\" only, whose "
               "scale for the logits gradient is known before the "
               "cross-entropy gradient kernel casts it (" +
               quoted(p.recipe()) +
               " derives the gradient's scales from the gradient itself, "
               "which that kernel does not do); set recipe \"delayed\" or "
               "remove the field");
}

void checkData(const Data &d, const ModelSpec &model, Issues is) {
  if (!is.oneOf("kind", d.kind(), {"synthetic", "text", "indexed", "jsonl"},
                true))
    return;
  if (d.kind() == "synthetic") {
    is.notApplicable("path", !d.path().empty(),
                     "kind is \"synthetic\" (no file is read)");
  } else if (d.path().empty()) {
    is.add("path",
           "missing; kind " + quoted(d.kind()) +
               " reads its tokens from a file: set the path" +
               (d.kind() == "indexed" ? " prefix of the .bin/.idx pair" : ""));
  }
  if (d.kind() == "text") {
    is.notApplicable("tokenizer", !d.tokenizer().empty(),
                     "kind \"text\" uses byte-level tokens");
    if (model.vocab_size() > 0 && model.vocab_size() < 256)
      is.add("kind", "\"text\" feeds byte tokens 0..255, but model.vocab_size "
                     "is " +
                         std::to_string(model.vocab_size()) +
                         "; raise vocab_size to at least 256");
  }
  if (d.kind() == "jsonl" && d.tokenizer().empty())
    is.add("tokenizer", "missing; kind \"jsonl\" holds text: set the path of "
                        "a tokenizer.json");
  if (d.has_eval_fraction())
    is.inRange("eval_fraction", d.eval_fraction(), 0, 1, false);
}

// train.parallel's pipeline fields: the layer cut into pipeline ×
// virtual_stages chunks, the schedule, and the microbatches a schedule
// needs to fill the pipeline.
void checkPipeline(const TrainSpec &t, const ModelSpec &m, Issues pis) {
  const Parallel &par = t.parallel();
  int64_t pp = par.pipeline(), v = par.virtual_stages();
  pis.positiveIfSet("virtual_stages", par.has_virtual_stages(), v);
  if (pp <= 0 || v <= 0)
    return;
  bool schedule = par.schedule().empty() ||
                  pis.oneOf("schedule", par.schedule(),
                            {"1f1b", "interleaved", "zb-h1"}, false);
  if (pp == 1) {
    const std::string why = "train.parallel.pipeline is 1 (no stages)";
    pis.notApplicable("virtual_stages", v > 1, why);
    pis.notApplicable("schedule", !par.schedule().empty(), why);
    pis.notApplicable("layer_split", par.layer_split_size() > 0, why);
    return;
  }
  if (schedule && v > 1 && !par.schedule().empty() &&
      par.schedule() != "interleaved")
    pis.add("virtual_stages",
            std::to_string(v) + " chunks a rank need schedule "
            "\"interleaved\", but schedule is " + quoted(par.schedule()) +
            "; set schedule: \"interleaved\" or virtual_stages: 1");
  if (schedule && v == 1 && par.schedule() == "interleaved")
    pis.add("schedule", "\"interleaved\" needs virtual_stages of at least "
                        "2 (chunks a rank); set virtual_stages: 2 or schedule "
                        "\"1f1b\"");
  int64_t chunks = pp * v;
  int64_t layers = m.num_layers();
  std::string cut = "pipeline × virtual_stages = " + std::to_string(pp) +
                    " × " + std::to_string(v) + " = " +
                    std::to_string(chunks) + " chunks";
  if (par.layer_split_size() > 0) {
    int64_t sum = 0;
    bool positive = true;
    for (int i = 0; i < par.layer_split_size(); ++i) {
      sum += par.layer_split(i);
      if (par.layer_split(i) <= 0) {
        pis.add("layer_split", "entry " + std::to_string(i) + " is " +
                                   std::to_string(par.layer_split(i)) +
                                   "; every chunk needs at least one layer");
        positive = false;
      }
    }
    if (par.layer_split_size() != chunks)
      pis.add("layer_split",
              "has " + std::to_string(par.layer_split_size()) +
                  " entries, but " + cut + "; give one layer count a chunk");
    else if (positive && layers > 0 && sum != layers)
      pis.add("layer_split", "sums to " + std::to_string(sum) +
                                 " layers, but model.num_layers is " +
                                 std::to_string(layers) +
                                 "; make the counts add up to it");
  } else if (layers > 0 && chunks > layers) {
    pis.add("pipeline", cut + " exceed model.num_layers (" +
                            std::to_string(layers) +
                            "); each chunk needs at least one layer");
  }
  int64_t dp = std::max<int64_t>(1, par.data());
  if (t.micro_batch_size() <= 0 || t.global_batch_size() <= 0 ||
      t.global_batch_size() % (t.micro_batch_size() * dp) != 0)
    return; // reported with global_batch_size
  int64_t micro = t.global_batch_size() / (t.micro_batch_size() * dp);
  std::string have = "global_batch_size / (micro_batch_size × parallel.data) "
                     "= " + std::to_string(t.global_batch_size()) + " / (" +
                     std::to_string(t.micro_batch_size()) + " × " +
                     std::to_string(dp) + ") = " + std::to_string(micro) +
                     " microbatches a step";
  if (micro < pp)
    pis.add("pipeline",
            std::to_string(pp) + " stages need at least as many microbatches "
            "a step, but " + have + "; raise train.global_batch_size to " +
            std::to_string(pp * t.micro_batch_size() * dp) +
            " or more, or lower the pipeline");
  else if (v > 1 && micro % pp != 0)
    pis.add("virtual_stages",
            "the interleaved schedule runs microbatches in groups of "
            "pipeline (" + std::to_string(pp) + "), but " + have +
            "; make global_batch_size a multiple of " +
            std::to_string(pp * t.micro_batch_size() * dp));
}

// train.codegen.fp8_weight_cast: a value, and a layout that can honour it.
void checkFp8WeightCast(const TrainSpec &t, Issues is) {
  const std::string &cast = t.codegen().fp8_weight_cast();
  is.oneOf("fp8_weight_cast", cast, {"step", "optimizer"}, false);
  const Parallel &par = t.parallel();
  if (cast == "step" && par.shard_optimizer() && par.data() > 1)
    is.add("fp8_weight_cast",
           "\"step\" cannot be honoured with train.parallel.shard_optimizer "
           "(ZeRO-1 casts each rank's shard of the f32 master in the "
           "optimizer and gathers the FP8 copy); remove the field or set "
           "it to \"optimizer\"");
  if (cast == "step" && par.pipeline() > 1)
    is.add("fp8_weight_cast",
           "\"step\" cannot be honoured with train.parallel.pipeline > 1 "
           "(each stage reads the FP8 copies its rank's optimizer step "
           "writes); remove the field or set it to \"optimizer\"");
  const std::string &recipe = t.precision().recipe();
  if (cast == "optimizer" && recipe == "blockwise")
    is.add("fp8_weight_cast",
           "\"optimizer\" cannot be honoured with train.precision.recipe "
           "\"blockwise\", which casts its weights in the step in 128x128 "
           "blocks and keeps no FP8 copy; remove the field");
  if (cast == "optimizer" && recipe == "bf16")
    is.add("fp8_weight_cast",
           "\"optimizer\" asks for FP8 weight copies, but "
           "train.precision.recipe is bf16, which has none; remove the field "
           "(train.codegen.bf16_weight_cast chooses where the BF16 weights "
           "are cast) or choose an FP8 recipe");
}

// train.codegen.bf16_weight_cast: a value, and a layout that can honour it.
void checkBf16WeightCast(const TrainSpec &t, Issues is) {
  const std::string &cast = t.codegen().bf16_weight_cast();
  is.oneOf("bf16_weight_cast", cast, {"step", "optimizer"}, false);
  const Parallel &par = t.parallel();
  if (cast == "step" && par.shard_optimizer() && par.data() > 1 &&
      par.pipeline() <= 1)
    is.add("bf16_weight_cast",
           "\"step\" cannot be honoured with train.parallel.shard_optimizer "
           "(ZeRO-1 casts each rank's shard of the f32 master to BF16 in the "
           "optimizer and gathers the BF16 copy); remove the field or set "
           "it to \"optimizer\"");
  if (cast == "optimizer" && par.pipeline() > 1)
    is.add("bf16_weight_cast",
           "\"optimizer\" cannot be honoured with train.parallel.pipeline > 1 "
           "(the stages cast their BF16 weights in the step); remove the "
           "field or set it to \"step\"");
}

void checkTrain(const Spec &spec, Issues is) {
  const TrainSpec &t = spec.train();
  const ModelSpec &m = spec.model();
  is.positive("micro_batch_size", t.has_micro_batch_size(),
              t.micro_batch_size());
  is.positive("global_batch_size", t.has_global_batch_size(),
              t.global_batch_size());
  is.positive("seq_len", t.has_seq_len(), t.seq_len());
  is.positive("steps", t.has_steps(), t.steps());

  const Parallel &par = t.parallel();
  Issues pis = is.nested("parallel");
  pis.positive("data", par.has_data(), par.data());
  pis.positive("tensor", par.has_tensor(), par.tensor());
  pis.positive("pipeline", par.has_pipeline(), par.pipeline());
  pis.positiveIfSet("bucket_elements", par.has_bucket_elements(),
                    par.bucket_elements());

  int64_t dp = par.data();
  if (t.micro_batch_size() > 0 && dp > 0 && t.global_batch_size() > 0) {
    int64_t step = t.micro_batch_size() * dp;
    if (t.global_batch_size() % step != 0) {
      int64_t lower = t.global_batch_size() / step * step;
      is.add("global_batch_size",
             std::to_string(t.global_batch_size()) +
                 " is not a multiple of micro_batch_size × parallel.data = " +
                 std::to_string(t.micro_batch_size()) + " × " +
                 std::to_string(dp) + " = " + std::to_string(step) +
                 "; set it to a multiple such as " +
                 (lower > 0 ? std::to_string(lower) + " or " : "") +
                 std::to_string(lower + step));
    }
  }
  int64_t tp = par.tensor();
  if (tp > 1) {
    auto divides = [&](const char *what, int64_t value) {
      if (value > 0 && value % tp != 0)
        pis.add("tensor", std::to_string(tp) + " does not divide model." +
                              what + " (" + std::to_string(value) +
                              "); tensor parallelism splits it evenly");
    };
    divides("num_heads", m.num_heads());
    divides("num_kv_heads", m.num_kv_heads());
    divides("intermediate_size", m.intermediate_size());
  }
  checkPipeline(t, m, pis);

  if (t.seq_len() > 0 && m.position_embedding() == "learned" &&
      m.max_position_embeddings() > 0 &&
      t.seq_len() > m.max_position_embeddings())
    is.add("seq_len", std::to_string(t.seq_len()) +
                          " exceeds model.max_position_embeddings (" +
                          std::to_string(m.max_position_embeddings()) +
                          "), the number of learned positions; lower seq_len");
  if (t.seq_len() > 0 && m.has_sliding_window() && m.sliding_window() > 0 &&
      t.seq_len() > m.sliding_window())
    is.add("seq_len", std::to_string(t.seq_len()) +
                          " exceeds model.sliding_window (" +
                          std::to_string(m.sliding_window()) +
                          "); sliding-window attention is not implemented, "
                          "so train on sequences no longer than the window");

  const AdamW &o = t.optimizer();
  Issues ois = is.nested("optimizer");
  ois.positive("lr", o.lr());
  ois.inRange("min_lr_ratio", o.min_lr_ratio(), 0, 1, true);
  ois.nonNegative("warmup_steps", o.warmup_steps());
  if (t.steps() > 0 && o.warmup_steps() > t.steps())
    ois.add("warmup_steps", std::to_string(o.warmup_steps()) +
                                " exceeds train.steps (" +
                                std::to_string(t.steps()) +
                                "); shorten the warmup or train longer");
  ois.inRange("beta1", o.beta1(), 0, 1, false);
  ois.inRange("beta2", o.beta2(), 0, 1, false);
  ois.positive("eps", o.eps());
  if (o.weight_decay() < 0)
    ois.add("weight_decay",
            "must not be negative, got " + formatDouble(o.weight_decay()));
  if (t.grad_clip() < 0)
    is.add("grad_clip", "must not be negative (0 turns clipping off), got " +
                            formatDouble(t.grad_clip()));

  checkPrecision(t.precision(), m, is.nested("precision"));
  checkGradDtype(t, is.nested("precision"));
  checkLmHeadFp8(t.precision(), is.nested("precision"));
  checkData(t.data(), m, is.nested("data"));
  is.nested("codegen").oneOf("attention_forward",
                             t.codegen().attention_forward(),
                             {"hopper", "mma_sync"}, false);
  is.nested("codegen").oneOf("attention_backward",
                             t.codegen().attention_backward(),
                             {"hopper", "mma_sync"}, false);
  is.nested("codegen").nonNegative("lm_head_chunk_tokens",
                                    t.codegen().lm_head_chunk_tokens());
  checkFp8WeightCast(t, is.nested("codegen"));
  checkBf16WeightCast(t, is.nested("codegen"));
  is.nonNegative("eval_interval", t.eval_interval());
  is.nonNegative("checkpoint_interval", t.checkpoint_interval());
  is.nonNegative("log_interval", t.log_interval());
  if (t.eval_interval() > 0 && !t.data().has_eval_fraction())
    is.add("eval_interval", "is set, but data.eval_fraction is 0, so there "
                            "is nothing to evaluate on; set "
                            "data.eval_fraction (e.g. 0.01)");
}

// The line and column where `field` (a dotted path) was written, or where the
// nearest enclosing block was.
std::string locate(const TextFormat::ParseInfoTree &root,
                   const std::string &field) {
  const TextFormat::ParseInfoTree *tree = &root;
  const Descriptor *desc = Spec::descriptor();
  TextFormat::ParseLocation best;
  std::stringstream path(field);
  std::string part;
  while (tree && desc && std::getline(path, part, '.')) {
    const FieldDescriptor *f = desc->FindFieldByName(part);
    if (!f)
      break;
    int index = f->is_repeated() ? 0 : -1;
    TextFormat::ParseLocation loc = tree->GetLocation(f, index);
    if (loc.line < 0)
      break;
    best = loc;
    if (f->type() != FieldDescriptor::TYPE_MESSAGE)
      break;
    tree = tree->GetTreeForNested(f, index);
    desc = f->message_type();
  }
  if (best.line < 0)
    return "";
  return std::to_string(best.line + 1) + ":" + std::to_string(best.column + 1) +
         ":";
}

} // namespace

StatusOr<Spec> parseSpecText(const std::string &text,
                             const std::string &source) {
  Spec spec;
  Status st = parseInto(text, source, spec, nullptr);
  if (!st)
    return st;
  return spec;
}

StatusOr<std::string> readTextFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error(path + ": cannot open the file; check the path");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad())
    return Status::error(path + ": cannot read the file");
  return text.str();
}

StatusOr<Spec> readSpecFile(const std::string &path) {
  StatusOr<std::string> text = readTextFile(path);
  if (!text)
    return text.status();
  return parseSpecText(*text, path);
}

void applyModelDefaults(ModelSpec &m) {
  bool llama = m.architecture() == "llama", gpt2 = m.architecture() == "gpt2";
  if (llama || gpt2) {
    if (m.norm().empty())
      m.set_norm(llama ? "rms_norm" : "layer_norm");
    if (m.activation().empty())
      m.set_activation(llama ? "swiglu" : "gelu_tanh");
    if (m.position_embedding().empty())
      m.set_position_embedding(llama ? "rope" : "learned");
    if (!m.has_tie_word_embeddings())
      m.set_tie_word_embeddings(gpt2);
    if (!m.has_qkv_bias())
      m.set_qkv_bias(gpt2);
    if (!m.has_attn_out_bias())
      m.set_attn_out_bias(gpt2);
    if (!m.has_mlp_bias())
      m.set_mlp_bias(gpt2);
  }
  if (gpt2 && !m.has_intermediate_size() && m.has_hidden_size())
    m.set_intermediate_size(4 * m.hidden_size());
  if (m.position_embedding() == "rope" && !m.has_rope_theta())
    m.set_rope_theta(10000.0);
  if (!m.has_num_kv_heads() && m.has_num_heads())
    m.set_num_kv_heads(m.num_heads());
  if (!m.has_head_dim() && m.hidden_size() > 0 && m.num_heads() > 0 &&
      m.hidden_size() % m.num_heads() == 0)
    m.set_head_dim(m.hidden_size() / m.num_heads());
  if (!m.has_norm_eps())
    m.set_norm_eps(1e-5);
  if (!m.has_init_std())
    m.set_init_std(0.02);
}

void applyDefaults(Spec &spec) {
  applyModelDefaults(*spec.mutable_model());
  const ModelSpec &m = spec.model();
  TrainSpec &t = *spec.mutable_train();
  if (!t.has_micro_batch_size())
    t.set_micro_batch_size(1);
  Parallel &par = *t.mutable_parallel();
  if (!par.has_data())
    par.set_data(1);
  if (!par.has_tensor())
    par.set_tensor(1);
  if (!par.has_pipeline())
    par.set_pipeline(1);
  if (!par.has_virtual_stages())
    par.set_virtual_stages(1);
  if (par.pipeline() > 1 && par.schedule().empty())
    par.set_schedule(par.virtual_stages() > 1 ? "interleaved" : "1f1b");
  if (!t.has_global_batch_size() && t.micro_batch_size() > 0 && par.data() > 0)
    t.set_global_batch_size(t.micro_batch_size() * par.data());
  if (!t.has_seq_len())
    t.set_seq_len(m.max_position_embeddings() > 0
                      ? std::min<int64_t>(2048, m.max_position_embeddings())
                      : 2048);
  if (!t.has_steps())
    t.set_steps(1000);

  AdamW &o = *t.mutable_optimizer();
  if (!o.has_lr())
    o.set_lr(3e-4);
  if (!o.has_min_lr_ratio())
    o.set_min_lr_ratio(0.1);
  if (!o.has_warmup_steps() && t.steps() > 0)
    o.set_warmup_steps(t.steps() / 10);
  if (!o.has_beta1())
    o.set_beta1(0.9);
  if (!o.has_beta2())
    o.set_beta2(0.95);
  if (!o.has_eps())
    o.set_eps(1e-8);
  if (!o.has_weight_decay())
    o.set_weight_decay(0.1);
  if (!t.has_grad_clip())
    t.set_grad_clip(1.0);
  if (!t.has_seed())
    t.set_seed(0);

  Precision &p = *t.mutable_precision();
  if (p.recipe().empty())
    p.set_recipe("delayed");
  if (p.activation_dtype().empty())
    p.set_activation_dtype("bf16");
  if (p.grad_dtype().empty())
    p.set_grad_dtype("f32");
  bool fp8 = p.recipe() == "delayed" || p.recipe() == "current" ||
             p.recipe() == "blockwise";
  if (fp8 && p.format().empty())
    p.set_format(p.recipe() == "blockwise" ? "e4m3" : "hybrid");
  if (p.recipe() == "delayed") {
    if (!p.has_amax_history_len())
      p.set_amax_history_len(1024);
    if (p.amax_algorithm().empty())
      p.set_amax_algorithm("max");
  }
  if (fp8 && !p.has_margin())
    p.set_margin(0);

  // train.codegen's choices stay unset: their default is the target's
  // (codegenOptionsFromSpec), which a spec does not name.

  Data &d = *t.mutable_data();
  if (d.kind().empty())
    d.set_kind("synthetic");
  if (!d.has_eval_fraction())
    d.set_eval_fraction(0);
  if (!t.has_eval_interval())
    t.set_eval_interval(0);
  if (!t.has_checkpoint_interval())
    t.set_checkpoint_interval(0);
  if (!t.has_log_interval())
    t.set_log_interval(10);
}

std::vector<SpecIssue> checkModel(const ModelSpec &model) {
  std::vector<SpecIssue> issues;
  checkModelInto(model, Issues(issues, ""));
  return issues;
}

std::vector<SpecIssue> checkSpec(const Spec &spec) {
  std::vector<SpecIssue> issues;
  Issues root(issues, "");
  checkModelInto(spec.model(), root.nested("model"));
  checkTrain(spec, root.nested("train"));
  return issues;
}

Status issuesToStatus(const std::vector<SpecIssue> &issues) {
  if (issues.empty())
    return Status::ok();
  std::string message;
  for (const SpecIssue &issue : issues)
    message +=
        (message.empty() ? "" : "\n") + issue.field + ": " + issue.message;
  return Status::error(message);
}

namespace {

// The run's steps replace train.steps; returns what the spec said (0: unset).
int64_t applyRunSettings(Spec &spec, const RunSettings &run) {
  TrainSpec &t = *spec.mutable_train();
  int64_t specSteps = t.has_steps() ? t.steps() : 0;
  if (run.steps > 0)
    t.set_steps(run.steps);
  return specSteps;
}

// checkSpec's issues, those that the run's steps caused said in the run's
// terms: the user asked for that many steps and may not know that they
// replace train.steps.
std::vector<SpecIssue> checkRun(const Spec &spec, const RunSettings &run,
                                int64_t specSteps) {
  std::vector<SpecIssue> issues = checkSpec(spec);
  int64_t warmup = spec.train().optimizer().warmup_steps();
  if (run.steps <= 0 || warmup <= run.steps)
    return issues;
  for (SpecIssue &issue : issues) {
    if (issue.field != "train.optimizer.warmup_steps")
      continue;
    std::string steps = std::to_string(run.steps);
    issue.message =
        std::to_string(warmup) + " exceeds the run's " + steps + " steps" +
        (specSteps ? " (train.steps is " + std::to_string(specSteps) +
                         " in the spec)"
                   : "") +
        "; the LR warmup must end within the run: train for " +
        std::to_string(warmup) + " steps or more, or set " + issue.field +
        " to " + steps + " or fewer";
  }
  return issues;
}

} // namespace

StatusOr<Spec> resolveSpec(Spec spec, const RunSettings &run) {
  int64_t specSteps = applyRunSettings(spec, run);
  applyDefaults(spec);
  Status st = issuesToStatus(checkRun(spec, run, specSteps));
  if (!st)
    return st;
  return spec;
}

StatusOr<Spec> loadSpecFile(const std::string &path, const ModelSpec *model,
                            const RunSettings &run) {
  StatusOr<std::string> text = readTextFile(path);
  if (!text)
    return text.status();
  Spec spec;
  TextFormat::ParseInfoTree tree;
  Status st = parseInto(*text, path, spec, &tree);
  if (!st)
    return st;
  if (model)
    *spec.mutable_model() = *model;
  int64_t specSteps = applyRunSettings(spec, run);
  applyDefaults(spec);
  std::vector<SpecIssue> issues = checkRun(spec, run, specSteps);
  if (issues.empty())
    return spec;
  std::string message;
  for (const SpecIssue &issue : issues)
    message += (message.empty() ? "" : "\n") + path + ":" +
               locate(tree, issue.field) + " " + issue.field + ": " +
               issue.message;
  return Status::error(message);
}

} // namespace octet::spec
