#include "frontends/GraphImporter.h"
#include "dialects/graph/GraphDialect.h"
#include "hf/HfConfig.h"
#include "spec/SpecReader.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/resource.h>

using namespace octet;
using namespace mlir;
using ::testing::HasSubstr;

namespace {

const std::string kExamples = OCTET_SOURCE_DIR "/examples/";

class Importer : public ::testing::Test {
protected:
  Importer() {
    DialectRegistry registry;
    registerImportDialects(registry);
    context.appendDialectRegistry(registry);
    context.disableMultithreading();
  }

  OwningOpRef<ModuleOp> import(const spec::Spec &spec) {
    auto module = importForwardGraph(context, spec);
    EXPECT_TRUE(module.isOk()) << module.status().message();
    if (!module.isOk())
      return {};
    return std::move(*module);
  }

  OwningOpRef<ModuleOp> importFile(const std::string &path) {
    StatusOr<spec::Spec> spec = spec::loadSpecFile(path);
    EXPECT_TRUE(spec.isOk()) << spec.status().message();
    if (!spec.isOk())
      return {};
    return import(*spec);
  }

  spec::Spec tinySpec() {
    StatusOr<spec::Spec> spec =
        spec::loadSpecFile(kExamples + "tiny-llama.pbtxt");
    EXPECT_TRUE(spec.isOk()) << spec.status().message();
    return spec.isOk() ? *spec : spec::Spec();
  }

  static std::string print(ModuleOp module) {
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    return text;
  }

  static int64_t parameterCount(ModuleOp module) {
    int64_t total = 0;
    module.walk([&](graph::VariableOp var) {
      total += var.getTensorType().getNumElements();
    });
    return total;
  }

  static graph::VariableOp variable(ModuleOp module, StringRef name) {
    return module.lookupSymbol<graph::VariableOp>(name);
  }

  MLIRContext context;
};

struct Example {
  const char *file;
  int64_t parameters;
};

// Published parameter counts: the importer's shapes are the real models'.
const Example kExampleSpecs[] = {
    {"tiny-llama.pbtxt", 3279104},
    {"llama3.2-1b.pbtxt", 1235814400},
    {"llama3-8b.pbtxt", 8030261248},
    {"gpt2-124m.pbtxt", 124439808},
};

TEST_F(Importer, EveryExampleLoadsValidatesAndImports) {
  for (const Example &example : kExampleSpecs) {
    SCOPED_TRACE(example.file);
    OwningOpRef<ModuleOp> module = importFile(kExamples + example.file);
    ASSERT_TRUE(module);
    EXPECT_EQ(parameterCount(*module), example.parameters);
    auto forward = module->lookupSymbol<func::FuncOp>("forward");
    ASSERT_TRUE(forward);
    EXPECT_EQ(forward.getFunctionType().getNumResults(), 1u);
  }
}

TEST_F(Importer, Llama70BImportsWithoutAllocatingWeights) {
  struct rusage before, after;
  getrusage(RUSAGE_SELF, &before);
  OwningOpRef<ModuleOp> module = importFile(kExamples + "llama3-70b.pbtxt");
  ASSERT_TRUE(module);
  getrusage(RUSAGE_SELF, &after);
  EXPECT_EQ(parameterCount(*module), 70553706496);
  // 70B f32 parameters are 282 GB; the graph itself is a few MB.
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 256 * 1024)
      << "peak RSS grew by " << (after.ru_maxrss - before.ru_maxrss) << " KiB";
}

TEST_F(Importer, VariablesFollowTheContract) {
  OwningOpRef<ModuleOp> module = import(tinySpec());
  ASSERT_TRUE(module);
  auto wk = variable(*module, "layers.1.attn.wk");
  ASSERT_TRUE(wk);
  EXPECT_EQ(wk.getTensorType().getShape(), ArrayRef<int64_t>({128, 256}));
  EXPECT_EQ(wk.getKind(), "weight");
  EXPECT_EQ(wk.getInit(), "normal");
  EXPECT_EQ(wk.getInitStd()->convertToDouble(), 0.02);
  EXPECT_EQ(*wk.getHfName(), "model.layers.1.self_attn.k_proj.weight");
  auto norm = variable(*module, "layers.3.mlp_norm");
  ASSERT_TRUE(norm);
  EXPECT_EQ(norm.getKind(), "norm");
  EXPECT_EQ(norm.getInit(), "ones");
  EXPECT_EQ(*norm.getHfName(),
            "model.layers.3.post_attention_layernorm.weight");
  EXPECT_TRUE(variable(*module, "layers.0.mlp.w_gate"));
  EXPECT_TRUE(variable(*module, "lm_head"));
  EXPECT_FALSE(variable(*module, "pos_embed"));
  EXPECT_FALSE(variable(*module, "layers.0.attn.wq_bias"));

  // Each variable is loaded exactly once, and every linear names its weight.
  llvm::StringMap<int> loads;
  module->walk([&](graph::LoadOp load) { ++loads[load.getVariable()]; });
  int variables = 0;
  module->walk([&](graph::VariableOp var) {
    ++variables;
    EXPECT_EQ(loads.lookup(var.getSymName()), 1) << var.getSymName().str();
  });
  EXPECT_EQ(int(loads.size()), variables);
  module->walk([&](graph::LinearOp linear) {
    ASSERT_TRUE(linear.getParam());
    EXPECT_TRUE(variable(*module, *linear.getParam()));
  });
}

TEST_F(Importer, ForwardSignatureAndAttention) {
  OwningOpRef<ModuleOp> module = import(tinySpec());
  ASSERT_TRUE(module);
  auto forward = module->lookupSymbol<func::FuncOp>("forward");
  const char *names[] = {"tokens", "labels", "loss_mask", "positions"};
  ASSERT_EQ(forward.getNumArguments(), 4u);
  for (unsigned i = 0; i < 4; ++i) {
    auto name = forward.getArgAttrOfType<StringAttr>(i, "graph.name");
    ASSERT_TRUE(name);
    EXPECT_EQ(name.getValue(), names[i]);
    EXPECT_EQ(
        cast<RankedTensorType>(forward.getArgument(i).getType()).getShape(),
        ArrayRef<int64_t>({8, 128}));
  }
  int attentions = 0, ropes = 0;
  module->walk([&](graph::AttentionOp op) {
    ++attentions;
    EXPECT_TRUE(op.getCausal());
    EXPECT_EQ(op.getScale().convertToDouble(), 0.125);
    EXPECT_FALSE(op.getCuSeqlens());
  });
  module->walk([&](graph::RopeOp op) {
    ++ropes;
    EXPECT_EQ(op.getTheta().convertToDouble(), 10000.0);
  });
  EXPECT_EQ(attentions, 4);
  EXPECT_EQ(ropes, 8);
}

TEST_F(Importer, PackedDocumentsPassCuSeqlensToEveryAttention) {
  spec::Spec spec = tinySpec();
  spec.mutable_train()->mutable_data()->set_pack_documents(true);
  OwningOpRef<ModuleOp> module = import(spec);
  ASSERT_TRUE(module);
  auto forward = module->lookupSymbol<func::FuncOp>("forward");
  ASSERT_EQ(forward.getNumArguments(), 5u);
  Value cu = forward.getArgument(4);
  EXPECT_EQ(forward.getArgAttrOfType<StringAttr>(4, "graph.name").getValue(),
            "cu_seqlens");
  // Static, for the memory plan: room for one document per token.
  const spec::TrainSpec &train = spec.train();
  EXPECT_EQ(cast<RankedTensorType>(cu.getType()).getShape(),
            ArrayRef<int64_t>({train.micro_batch_size() * train.seq_len() + 1}));
  int attentions = 0;
  module->walk([&](graph::AttentionOp op) {
    ++attentions;
    EXPECT_EQ(op.getCuSeqlens(), cu);
  });
  EXPECT_EQ(attentions, 4);
}

TEST_F(Importer, TiedEmbeddingsShareTheEmbedTable) {
  spec::Spec spec = tinySpec();
  spec.mutable_model()->set_tie_word_embeddings(true);
  OwningOpRef<ModuleOp> module = import(spec);
  ASSERT_TRUE(module);
  EXPECT_FALSE(variable(*module, "lm_head"));
  graph::LinearOp head;
  module->walk([&](graph::LinearOp op) { head = op; });
  EXPECT_EQ(*head.getParam(), "embed");
  graph::EmbeddingOp embedding;
  module->walk([&](graph::EmbeddingOp op) { embedding = op; });
  EXPECT_EQ(head.getWeight(), embedding.getTable());
}

TEST_F(Importer, Llama3RopeScalingReachesTheRopeOps) {
  OwningOpRef<ModuleOp> module = importFile(kExamples + "llama3.2-1b.pbtxt");
  ASSERT_TRUE(module);
  graph::RopeOp rope;
  module->walk([&](graph::RopeOp op) { rope = op; });
  ASSERT_TRUE(rope);
  EXPECT_EQ(rope.getScaling(), "llama3");
  EXPECT_EQ(rope.getFactor()->convertToDouble(), 32.0);
  EXPECT_EQ(rope.getLowFreqFactor()->convertToDouble(), 1.0);
  EXPECT_EQ(rope.getHighFreqFactor()->convertToDouble(), 4.0);
  EXPECT_EQ(*rope.getOriginalMaxPosition(), 8192u);
  EXPECT_EQ(rope.getTheta().convertToDouble(), 500000.0);
}

TEST_F(Importer, QkvBiasWithoutOutputBias) {
  spec::Spec spec = tinySpec();
  spec.mutable_model()->set_qkv_bias(true);
  OwningOpRef<ModuleOp> module = import(spec);
  ASSERT_TRUE(module);
  auto bias = variable(*module, "layers.0.attn.wk_bias");
  ASSERT_TRUE(bias);
  EXPECT_EQ(bias.getKind(), "bias");
  EXPECT_EQ(bias.getInit(), "zeros");
  EXPECT_FALSE(bias.getInitStd());
  EXPECT_EQ(*bias.getHfName(), "model.layers.0.self_attn.k_proj.bias");
  EXPECT_FALSE(variable(*module, "layers.0.attn.wo_bias"));
}

TEST_F(Importer, Gpt2LayoutAndHfSlices) {
  OwningOpRef<ModuleOp> module = importFile(kExamples + "gpt2-124m.pbtxt");
  ASSERT_TRUE(module);
  EXPECT_EQ(variable(*module, "pos_embed").getTensorType().getShape(),
            ArrayRef<int64_t>({1024, 768}));
  EXPECT_FALSE(variable(*module, "layers.0.mlp.w_gate"));
  EXPECT_FALSE(variable(*module, "lm_head"));
  EXPECT_TRUE(variable(*module, "final_norm_bias"));
  auto wv = variable(*module, "layers.2.attn.wv");
  EXPECT_EQ(*wv.getHfName(), "transformer.h.2.attn.c_attn.weight");
  EXPECT_TRUE(wv->hasAttr("graph.hf_transpose"));
  auto chunk = wv->getAttrOfType<DenseI64ArrayAttr>("graph.hf_chunk");
  ASSERT_TRUE(chunk);
  EXPECT_EQ(chunk.asArrayRef(), ArrayRef<int64_t>({2, 3}));
  auto wvBias = variable(*module, "layers.2.attn.wv_bias");
  EXPECT_FALSE(wvBias->hasAttr("graph.hf_transpose"));
  EXPECT_TRUE(wvBias->hasAttr("graph.hf_chunk"));
  auto up = variable(*module, "layers.0.mlp.w_up");
  EXPECT_EQ(*up.getHfName(), "transformer.h.0.mlp.c_fc.weight");
  EXPECT_TRUE(up->hasAttr("graph.hf_transpose"));
  EXPECT_FALSE(up->hasAttr("graph.hf_chunk"));
  int gelus = 0, ropes = 0, layerNorms = 0;
  module->walk([&](graph::GeluOp op) {
    ++gelus;
    EXPECT_EQ(op.getApproximate(), "tanh");
  });
  module->walk([&](graph::RopeOp) { ++ropes; });
  module->walk([&](graph::LayerNormOp) { ++layerNorms; });
  EXPECT_EQ(gelus, 12);
  EXPECT_EQ(ropes, 0);
  EXPECT_EQ(layerNorms, 25);
}

TEST_F(Importer, InvalidSpecIsRefused) {
  spec::Spec spec = tinySpec();
  spec.mutable_model()->set_num_kv_heads(3);
  auto module = importForwardGraph(context, spec);
  ASSERT_FALSE(module.isOk());
  EXPECT_THAT(module.status().message(), HasSubstr("model.num_kv_heads"));
}

TEST_F(Importer, OutputIsDeterministic) {
  spec::Spec spec = tinySpec();
  OwningOpRef<ModuleOp> a = import(spec), b = import(spec);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(print(*a), print(*b));
  EXPECT_THAT(print(*a), ::testing::Not(HasSubstr("tiny")));
}

// The same model from config.json (+ the pbtxt's train block) and from the
// pbtxt prints byte-identical IR.
void expectIdenticalIr(MLIRContext &context, const std::string &config,
                       const std::string &pbtxt) {
  StatusOr<spec::ModelSpec> model = hf::readHfConfigFile(config);
  ASSERT_TRUE(model.isOk()) << model.status().message();
  StatusOr<spec::Spec> fromHf = spec::loadSpecFile(pbtxt, &*model);
  ASSERT_TRUE(fromHf.isOk()) << fromHf.status().message();
  StatusOr<spec::Spec> fromSpec = spec::loadSpecFile(pbtxt);
  ASSERT_TRUE(fromSpec.isOk()) << fromSpec.status().message();
  auto a = importForwardGraph(context, *fromHf);
  auto b = importForwardGraph(context, *fromSpec);
  ASSERT_TRUE(a.isOk() && b.isOk());
  std::string textA, textB;
  llvm::raw_string_ostream osA(textA), osB(textB);
  (*a)->print(osA);
  (*b)->print(osB);
  EXPECT_GT(textA.size(), 10000u);
  EXPECT_TRUE(textA == textB) << "IR differs";
}

TEST_F(Importer, Llama3EightBFromHfConfigPrintsIdenticalIr) {
  expectIdenticalIr(context, kExamples + "hf/Llama-3-8B/config.json",
                    kExamples + "llama3-8b.pbtxt");
}

TEST_F(Importer, Llama32OneBFromHfConfigPrintsIdenticalIr) {
  expectIdenticalIr(context, kExamples + "hf/Llama-3.2-1B/config.json",
                    kExamples + "llama3.2-1b.pbtxt");
}

} // namespace
