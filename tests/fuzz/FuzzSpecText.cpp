// Fuzz target: a model + training spec in protobuf text format, through
// everything `octet compile` does before importing: parse, defaults, checks,
// and the file reader that locates each issue at its line.

#include "spec/SpecReader.h"
#include "tests/fuzz/FuzzDriver.h"

#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/message_differencer.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace octet;

namespace {

const std::string &workFile() {
  static const std::string path = [] {
    char dir[] = "/tmp/octet-fuzz-spec-XXXXXX";
    if (!mkdtemp(dir))
      std::abort();
    return std::string(dir) + "/spec.pbtxt";
  }();
  return path;
}

std::string readExample(const char *name) {
  std::ifstream in(std::string(OCTET_SOURCE_DIR) + "/examples/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  StatusOr<spec::Spec> parsed = spec::parseSpecText(text, "fuzz.pbtxt");
  if (!parsed)
    return 0;
  // Defaults fill only unset fields, so applying them twice changes nothing.
  spec::Spec once = *parsed;
  spec::applyDefaults(once);
  spec::Spec twice = once;
  spec::applyDefaults(twice);
  // A field the text sets to nan is left as it is, and nan equals nan here.
  google::protobuf::util::DefaultFieldComparator nanEqual;
  nanEqual.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer same;
  same.set_field_comparator(&nanEqual);
  if (!same.Compare(once, twice))
    __builtin_trap();
  StatusOr<spec::Spec> resolved = spec::resolveSpec(*parsed);
  if (resolved && !spec::checkSpec(*resolved).empty())
    __builtin_trap(); // resolveSpec accepted a spec its checks refuse
  // The file path: every issue is located at a line of the text.
  {
    std::ofstream out(workFile(), std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  StatusOr<spec::Spec> loaded = spec::loadSpecFile(workFile());
  if (bool(loaded) != bool(resolved))
    __builtin_trap(); // the file reader and the text reader disagree
  return 0;
}

namespace octet::fuzz {

std::vector<std::string> seedInputs() {
  return {
      readExample("tiny-llama.pbtxt"),
      readExample("gpt2-124m.pbtxt"),
      readExample("llama3-8b.pbtxt"),
      "model { architecture: \"llama\" vocab_size: 32 hidden_size: 16 "
      "intermediate_size: 32 num_layers: 1 num_heads: 2 "
      "max_position_embeddings: 16 rope_scaling { type: \"llama3\" factor: 8 "
      "low_freq_factor: 1 high_freq_factor: 4 "
      "original_max_position_embeddings: 8 } }\n"
      "train { seq_len: 16 precision { recipe: \"blockwise\" "
      "bf16_patterns: \"layers.0.*\" first_last_layers_bf16 { first: 1 } } "
      "data { kind: \"jsonl\" path: \"x.jsonl\" pack_documents: true } }\n",
      "model: { num_heads: 0x7fffffffffffffff norm_eps: -inf }",
      // nan is not equal to itself: defaults applied twice must still be
      // the same spec.
      "train { optimizer { beta1: nan } }",
      "# comment\nmodel < architecture: 'gpt2' > train < steps: -1 >",
  };
}

std::vector<std::string> dictionary() {
  return {"model {",
          "train {",
          "}",
          "num_heads: ",
          "num_kv_heads: ",
          "head_dim: ",
          "hidden_size: ",
          "seq_len: ",
          "micro_batch_size: ",
          "parallel { ",
          "tensor: ",
          "precision { ",
          "recipe: \"",
          "\"blockwise\"",
          "\"delayed\"",
          "rope_scaling { ",
          "9223372036854775807",
          "-1",
          "nan",
          "1e308",
          "\"",
          "\\x",
          "#",
          "data { "};
}

} // namespace octet::fuzz
