#include "frontends/GraphImporter.h"

#include "dialects/graph/GraphDialect.h"
#include "spec/SpecReader.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>

using namespace mlir;

namespace octet {
namespace {

// Where a parameter lives in a Hugging Face checkpoint.
struct HfTensor {
  std::string name;
  bool transpose = false;
  int64_t chunk = -1, chunks = 0;
};

class ForwardBuilder {
public:
  ForwardBuilder(MLIRContext &context, const spec::Spec &spec)
      : b(&context), m(spec.model()), t(spec.train()),
        gpt2(m.architecture() == "gpt2"), batch(t.micro_batch_size()),
        seq(t.seq_len()), hidden(m.hidden_size()), vocab(m.vocab_size()),
        ffn(m.intermediate_size()), heads(m.num_heads()),
        kvHeads(m.num_kv_heads()), headDim(m.head_dim()), f32(b.getF32Type()),
        i32(b.getI32Type()) {}

  OwningOpRef<ModuleOp> build() {
    OwningOpRef<ModuleOp> module = ModuleOp::create(b.getUnknownLoc());
    b.setInsertionPointToEnd(module->getBody());
    declareParameters();
    buildForward();
    return module;
  }

private:
  // --- Parameters ---------------------------------------------------------

  void declare(const std::string &name, ArrayRef<int64_t> shape, StringRef kind,
               const HfTensor &hf) {
    auto type = RankedTensorType::get(shape, f32);
    bool normal = kind == "weight" || kind == "embedding";
    StringRef init = normal ? "normal" : kind == "norm" ? "ones" : "zeros";
    auto op = graph::VariableOp::create(
        b, NameLoc::get(b.getStringAttr(name)), name, type, kind, init,
        normal ? b.getF64FloatAttr(m.init_std()) : FloatAttr(),
        b.getStringAttr(hf.name));
    if (hf.transpose)
      op->setAttr("graph.hf_transpose", b.getUnitAttr());
    if (hf.chunks > 0)
      op->setAttr("graph.hf_chunk",
                  b.getDenseI64ArrayAttr({hf.chunk, hf.chunks}));
    types[name] = type;
  }

  // `hfBase` is the HF module path ("model.layers.0.self_attn.q_proj").
  void declareLinear(const std::string &name, int64_t out, int64_t in,
                     bool bias, HfTensor hfBase) {
    HfTensor weight = hfBase, biasTensor = hfBase;
    weight.name += ".weight";
    weight.transpose = gpt2; // Conv1D stores [in, out].
    declare(name, {out, in}, "weight", weight);
    if (bias) {
      biasTensor.name += ".bias";
      declare(name + "_bias", {out}, "bias", biasTensor);
    }
  }

  void declareNorm(const std::string &name, const std::string &hfBase) {
    declare(name, {hidden}, "norm", {hfBase + ".weight"});
    if (layerNorm())
      declare(name + "_bias", {hidden}, "bias", {hfBase + ".bias"});
  }

  void declareParameters() {
    declare("embed", {vocab, hidden}, "embedding",
            {gpt2 ? "transformer.wte.weight" : "model.embed_tokens.weight"});
    if (learnedPositions())
      declare("pos_embed", {m.max_position_embeddings(), hidden}, "embedding",
              {"transformer.wpe.weight"});
    for (int64_t layer = 0; layer < m.num_layers(); ++layer) {
      std::string ours = "layers." + std::to_string(layer) + ".";
      std::string hf = (gpt2 ? "transformer.h." : "model.layers.") +
                       std::to_string(layer) + ".";
      declareNorm(ours + "attn_norm", hf + (gpt2 ? "ln_1" : "input_layernorm"));
      auto attnHf = [&](const char *llamaName, int64_t chunk) -> HfTensor {
        if (gpt2)
          return {hf + (chunk < 0 ? "attn.c_proj" : "attn.c_attn"), false,
                  chunk, chunk < 0 ? 0 : 3};
        return {hf + "self_attn." + llamaName};
      };
      declareLinear(ours + "attn.wq", heads * headDim, hidden, m.qkv_bias(),
                    attnHf("q_proj", 0));
      declareLinear(ours + "attn.wk", kvHeads * headDim, hidden, m.qkv_bias(),
                    attnHf("k_proj", 1));
      declareLinear(ours + "attn.wv", kvHeads * headDim, hidden, m.qkv_bias(),
                    attnHf("v_proj", 2));
      declareLinear(ours + "attn.wo", hidden, heads * headDim,
                    m.attn_out_bias(), attnHf("o_proj", -1));
      declareNorm(ours + "mlp_norm",
                  hf + (gpt2 ? "ln_2" : "post_attention_layernorm"));
      if (gated())
        declareLinear(ours + "mlp.w_gate", ffn, hidden, m.mlp_bias(),
                      {hf + "mlp.gate_proj"});
      declareLinear(ours + "mlp.w_up", ffn, hidden, m.mlp_bias(),
                    {hf + (gpt2 ? "mlp.c_fc" : "mlp.up_proj")});
      declareLinear(ours + "mlp.w_down", hidden, ffn, m.mlp_bias(),
                    {hf + (gpt2 ? "mlp.c_proj" : "mlp.down_proj")});
    }
    declareNorm("final_norm", gpt2 ? "transformer.ln_f" : "model.norm");
    if (!m.tie_word_embeddings())
      declare("lm_head", {vocab, hidden}, "weight", {"lm_head.weight"});
  }

  // --- Forward ------------------------------------------------------------

  RankedTensorType activation(ArrayRef<int64_t> tail) {
    SmallVector<int64_t> shape = {batch, seq};
    shape.append(tail.begin(), tail.end());
    return RankedTensorType::get(shape, f32);
  }

  Value load(const std::string &name) {
    auto it = loaded.find(name);
    if (it != loaded.end())
      return it->second;
    Value value = graph::LoadOp::create(b, loc, types.lookup(name), name);
    loaded[name] = value;
    return value;
  }

  Value linear(Value x, const std::string &weight, bool bias, int64_t out) {
    Value w = load(weight);
    Value bv = bias ? load(weight + "_bias") : Value();
    return graph::LinearOp::create(b, loc, activation({out}), x, w, bv,
                                   b.getStringAttr(weight));
  }

  Value norm(Value x, const std::string &name) {
    FloatAttr eps = b.getF64FloatAttr(m.norm_eps());
    // Loads are sequenced here, not in an argument list, so that the order
    // of ops does not depend on the compiler.
    Value weight = load(name);
    if (!layerNorm())
      return graph::RMSNormOp::create(b, loc, x.getType(), x, weight, eps);
    Value bias = load(name + "_bias");
    return graph::LayerNormOp::create(b, loc, x.getType(), x, weight, bias,
                                      eps);
  }

  Value rope(Value x) {
    FloatAttr factor, low, high;
    IntegerAttr original;
    StringRef scaling = "none";
    if (m.has_rope_scaling()) {
      const spec::RopeScaling &rs = m.rope_scaling();
      scaling = rs.type();
      factor = b.getF64FloatAttr(rs.factor());
      low = b.getF64FloatAttr(rs.low_freq_factor());
      high = b.getF64FloatAttr(rs.high_freq_factor());
      original = b.getI64IntegerAttr(rs.original_max_position_embeddings());
    }
    return graph::RopeOp::create(
        b, loc, x.getType(), x, positions, b.getF64FloatAttr(m.rope_theta()),
        b.getStringAttr(scaling), factor, low, high, original);
  }

  Value attentionBlock(Value h, const std::string &prefix) {
    Value x = norm(h, prefix + "attn_norm");
    std::string attn = prefix + "attn.";
    Value q = linear(x, attn + "wq", m.qkv_bias(), heads * headDim);
    Value k = linear(x, attn + "wk", m.qkv_bias(), kvHeads * headDim);
    Value v = linear(x, attn + "wv", m.qkv_bias(), kvHeads * headDim);
    auto qType = activation({heads, headDim});
    auto kvType = activation({kvHeads, headDim});
    q = graph::ReshapeOp::create(b, loc, qType, q);
    k = graph::ReshapeOp::create(b, loc, kvType, k);
    v = graph::ReshapeOp::create(b, loc, kvType, v);
    if (!learnedPositions()) {
      q = rope(q);
      k = rope(k);
    }
    auto lseType = RankedTensorType::get({batch, heads, seq}, f32);
    auto attention = graph::AttentionOp::create(
        b, loc, qType, lseType, q, k, v, cuSeqlens, b.getUnitAttr(),
        b.getF64FloatAttr(1.0 / std::sqrt(double(headDim))));
    Value merged = graph::ReshapeOp::create(
        b, loc, activation({heads * headDim}), attention.getResult());
    Value out = linear(merged, attn + "wo", m.attn_out_bias(), hidden);
    return graph::AddOp::create(b, loc, h, out);
  }

  Value mlpBlock(Value h, const std::string &prefix) {
    Value x = norm(h, prefix + "mlp_norm");
    std::string mlp = prefix + "mlp.";
    Value gate =
        gated() ? linear(x, mlp + "w_gate", m.mlp_bias(), ffn) : Value();
    Value up = linear(x, mlp + "w_up", m.mlp_bias(), ffn);
    Value act =
        gated()
            ? Value(graph::SwigluOp::create(b, loc, gate, up))
            : Value(graph::GeluOp::create(
                  b, loc, up, m.activation() == "gelu_tanh" ? "tanh" : "none"));
    Value down = linear(act, mlp + "w_down", m.mlp_bias(), hidden);
    return graph::AddOp::create(b, loc, h, down);
  }

  void buildForward() {
    auto ids = RankedTensorType::get({batch, seq}, i32);
    auto mask = RankedTensorType::get({batch, seq}, f32);
    SmallVector<Type> inputs = {ids, ids, mask, ids};
    SmallVector<StringRef> names = {"tokens", "labels", "loss_mask",
                                    "positions"};
    if (t.data().pack_documents()) {
      // Every document holds at least one token, so B·S tokens have at most
      // B·S documents: B·S + 1 boundaries. The loaders pass fewer and repeat
      // the last one (empty documents) up to this size, which gives the
      // memory plan and the attention kernels a static shape.
      inputs.push_back(RankedTensorType::get({batch * seq + 1}, i32));
      names.push_back("cu_seqlens");
    }
    auto lossType = RankedTensorType::get({}, f32);
    auto func = func::FuncOp::create(b, b.getUnknownLoc(), "forward",
                                     b.getFunctionType(inputs, {lossType}));
    for (auto [i, name] : llvm::enumerate(names))
      func.setArgAttr(i, "graph.name", b.getStringAttr(name));
    func.setResultAttr(0, "graph.name", b.getStringAttr("loss"));
    Block *entry = func.addEntryBlock();
    b.setInsertionPointToEnd(entry);
    Value tokens = entry->getArgument(0), labels = entry->getArgument(1),
          lossMask = entry->getArgument(2);
    positions = entry->getArgument(3);
    if (t.data().pack_documents())
      cuSeqlens = entry->getArgument(4);

    loc = NameLoc::get(b.getStringAttr("embed"));
    Value h = graph::EmbeddingOp::create(b, loc, activation({hidden}),
                                         load("embed"), tokens);
    if (learnedPositions()) {
      Value pos = graph::EmbeddingOp::create(b, loc, activation({hidden}),
                                             load("pos_embed"), positions);
      h = graph::AddOp::create(b, loc, h, pos);
    }
    for (int64_t layer = 0; layer < m.num_layers(); ++layer) {
      std::string prefix = "layers." + std::to_string(layer) + ".";
      loc = NameLoc::get(b.getStringAttr(prefix + "attn"));
      h = attentionBlock(h, prefix);
      loc = NameLoc::get(b.getStringAttr(prefix + "mlp"));
      h = mlpBlock(h, prefix);
    }
    loc = NameLoc::get(b.getStringAttr("head"));
    h = norm(h, "final_norm");
    std::string head = m.tie_word_embeddings() ? "embed" : "lm_head";
    Value logits = linear(h, head, /*bias=*/false, vocab);
    Value loss = graph::CrossEntropyOp::create(b, loc, lossType, logits, labels,
                                               lossMask, /*batch_mask=*/Value());
    func::ReturnOp::create(b, loc, loss);
  }

  bool layerNorm() const { return m.norm() == "layer_norm"; }
  bool gated() const { return m.activation() == "swiglu"; }
  bool learnedPositions() const { return m.position_embedding() == "learned"; }

  OpBuilder b;
  const spec::ModelSpec &m;
  const spec::TrainSpec &t;
  bool gpt2;
  int64_t batch, seq, hidden, vocab, ffn, heads, kvHeads, headDim;
  Type f32, i32;
  Location loc = b.getUnknownLoc();
  Value positions, cuSeqlens;
  llvm::StringMap<RankedTensorType> types;
  llvm::StringMap<Value> loaded;
};

} // namespace

void registerImportDialects(DialectRegistry &registry) {
  registry.insert<graph::GraphDialect, func::FuncDialect>();
}

StatusOr<OwningOpRef<ModuleOp>> importForwardGraph(MLIRContext &context,
                                                   const spec::Spec &spec) {
  Status valid = spec::issuesToStatus(spec::checkSpec(spec));
  if (!valid)
    return valid.withContext("cannot import an invalid spec");
  context.loadDialect<graph::GraphDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = ForwardBuilder(context, spec).build();

  std::string diagnostics;
  {
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      diagnostics += (diagnostics.empty() ? "" : "\n") + diag.str();
      return success();
    });
    if (failed(verify(*module)))
      return Status::error("internal error: the imported graph does not "
                           "verify: " +
                           diagnostics);
  }
  return std::move(module);
}

} // namespace octet
