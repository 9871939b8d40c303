// Gradient checks: for every differentiable graph op, the interpreter's
// autodiff gradients against central finite differences (step 1e-2, float32
// forward). Tolerances (see GradCheckOptions): the derivative along a random
// unit direction within 0.2% of the gradient's norm plus 1% of its own
// value; single elements within 0.5% of the parameter's largest gradient
// plus 2% of their own value.

#include "tests/unit/interpreter/GradCheck.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace octet::testing;
using octet::DType;
using octet::interp::Tensor;

namespace {

std::string var(const std::string &name, const std::vector<int64_t> &shape,
                const std::string &kind = "weight", double stdDev = 1.0) {
  std::ostringstream os;
  os << "graph.variable @" << name << " : " << tensorType(shape)
     << " {kind = \"" << kind << "\", init = \"normal\", init_std = "
     << std::to_string(stdDev) << " : f64}\n";
  return os.str();
}

std::string load(const std::string &name, const std::vector<int64_t> &shape) {
  return "  %" + name + " = graph.load @" + name + " : " + tensorType(shape) +
         "\n";
}

Tensor ints(std::vector<int64_t> shape, std::vector<int64_t> values) {
  return Tensor::fromInts(std::move(shape), std::move(values), DType::I32);
}

void check(const std::string &module, const std::vector<Tensor> &args = {},
           GradCheckOptions options = {}) {
  auto ctx = makeContext();
  auto parsed = parseAndDifferentiate(*ctx, module);
  ASSERT_TRUE(parsed);
  checkGradients(*parsed, args, options);
}

// A module whose @forward applies `body` (which defines %out of `outShape`)
// to loaded variables, then reduces with the probe.
std::string unaryModule(const std::string &vars, const std::string &args,
                        const std::string &body,
                        const std::vector<int64_t> &outShape) {
  return vars + probeVariable(outShape) + "func.func @forward(" + args +
         ") -> tensor<f32> {\n" + body + probeLoss("%out", outShape) + "}\n";
}

TEST(GradCheck, LinearWithBias) {
  check(unaryModule(var("x", {2, 3, 5}) + var("w", {4, 5}) +
                        var("b", {4}, "bias"),
                    "",
                    load("x", {2, 3, 5}) + load("w", {4, 5}) + load("b", {4}) +
                        "  %out = graph.linear %x, %w, %b : (tensor<2x3x5xf32>, "
                        "tensor<4x5xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>\n",
                    {2, 3, 4}));
}

TEST(GradCheck, MatmulTransposes) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      std::vector<int64_t> a = ta ? std::vector<int64_t>{5, 3}
                                  : std::vector<int64_t>{3, 5};
      std::vector<int64_t> b = tb ? std::vector<int64_t>{4, 5}
                                  : std::vector<int64_t>{5, 4};
      std::string attrs;
      if (ta || tb)
        attrs = std::string(" {") + (ta ? "transpose_a" : "") +
                (ta && tb ? ", " : "") + (tb ? "transpose_b" : "") + "}";
      SCOPED_TRACE("transpose_a=" + std::to_string(ta) +
                   " transpose_b=" + std::to_string(tb));
      check(unaryModule(var("a", a) + var("b", b), "",
                        load("a", a) + load("b", b) + "  %out = graph.matmul %a, %b" +
                            attrs + " : (" + tensorType(a) + ", " +
                            tensorType(b) + ") -> tensor<3x4xf32>\n",
                        {3, 4}));
    }
}

TEST(GradCheck, EmbeddingWithRepeatedIds) {
  check(unaryModule(var("table", {7, 4}, "embedding"),
                    "%ids: tensor<2x3xi32>",
                    load("table", {7, 4}) +
                        "  %out = graph.embedding %table, %ids : "
                        "(tensor<7x4xf32>, tensor<2x3xi32>) -> "
                        "tensor<2x3x4xf32>\n",
                    {2, 3, 4}),
        {ints({2, 3}, {1, 5, 1, 0, 6, 5})});
}

TEST(GradCheck, RMSNorm) {
  check(unaryModule(var("x", {2, 3, 8}) + var("w", {8}, "norm"), "",
                    load("x", {2, 3, 8}) + load("w", {8}) +
                        "  %out = graph.rms_norm %x, %w {eps = 1.0e-5 : f64} : "
                        "(tensor<2x3x8xf32>, tensor<8xf32>) -> "
                        "tensor<2x3x8xf32>\n",
                    {2, 3, 8}));
}

TEST(GradCheck, LayerNorm) {
  check(unaryModule(var("x", {2, 3, 8}) + var("w", {8}, "norm") +
                        var("b", {8}, "bias"),
                    "",
                    load("x", {2, 3, 8}) + load("w", {8}) + load("b", {8}) +
                        "  %out = graph.layer_norm %x, %w, %b {eps = 1.0e-5 : "
                        "f64} : (tensor<2x3x8xf32>, tensor<8xf32>, "
                        "tensor<8xf32>) -> tensor<2x3x8xf32>\n",
                    {2, 3, 8}));
}

TEST(GradCheck, Rope) {
  for (std::string attrs :
       {std::string("{theta = 10000.0 : f64}"),
        std::string("{theta = 500000.0 : f64, scaling = \"llama3\", factor = "
                    "8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor "
                    "= 4.0 : f64, original_max_position = 16 : i64}")}) {
    SCOPED_TRACE(attrs);
    check(unaryModule(var("x", {2, 3, 2, 8}), "%pos: tensor<2x3xi32>",
                      load("x", {2, 3, 2, 8}) + "  %out = graph.rope %x, %pos " +
                          attrs +
                          " : (tensor<2x3x2x8xf32>, tensor<2x3xi32>) -> "
                          "tensor<2x3x2x8xf32>\n",
                      {2, 3, 2, 8}),
          {ints({2, 3}, {0, 1, 2, 7, 3, 40})});
  }
}

std::string attentionModule(const std::string &attrs, bool docs) {
  std::string args = docs ? "%cu: tensor<4xi32>" : "";
  std::string extra = docs ? ", %cu" : "";
  std::string extraType = docs ? ", tensor<4xi32>" : "";
  return unaryModule(
      var("q", {2, 5, 4, 4}) + var("k", {2, 5, 2, 4}) + var("v", {2, 5, 2, 4}),
      args,
      load("q", {2, 5, 4, 4}) + load("k", {2, 5, 2, 4}) +
          load("v", {2, 5, 2, 4}) + "  %out, %lse = graph.attention %q, %k, %v" +
          extra + " " + attrs +
          " : (tensor<2x5x4x4xf32>, tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>" +
          extraType + ") -> (tensor<2x5x4x4xf32>, tensor<2x4x5xf32>)\n",
      {2, 5, 4, 4});
}

TEST(GradCheck, AttentionCausalGqa) {
  check(attentionModule("{causal, scale = 0.5 : f64}", false));
}

TEST(GradCheck, AttentionBidirectional) {
  check(attentionModule("{scale = 0.5 : f64}", false));
}

TEST(GradCheck, AttentionDocumentMask) {
  // Documents [0, 3), [3, 7), [7, 10) of the 10 flattened tokens; the second
  // spans both rows of the batch.
  check(attentionModule("{causal, scale = 0.5 : f64}", true),
        {ints({4}, {0, 3, 7, 10})});
}

std::string elementwise(const std::string &op, const std::string &attrs = "") {
  return unaryModule(var("x", {3, 8}), "",
                     load("x", {3, 8}) + "  %out = graph." + op + " %x " +
                         attrs + ": tensor<3x8xf32>\n",
                     {3, 8});
}

TEST(GradCheck, Silu) { check(elementwise("silu")); }
TEST(GradCheck, GeluExact) { check(elementwise("gelu")); }
TEST(GradCheck, GeluTanh) {
  check(elementwise("gelu", "{approximate = \"tanh\"} "));
}

std::string binary(const std::string &op) {
  return unaryModule(var("a", {3, 8}) + var("b", {3, 8}), "",
                     load("a", {3, 8}) + load("b", {3, 8}) + "  %out = graph." +
                         op + " %a, %b : tensor<3x8xf32>\n",
                     {3, 8});
}

TEST(GradCheck, Swiglu) { check(binary("swiglu")); }
TEST(GradCheck, Add) { check(binary("add")); }
TEST(GradCheck, Mul) { check(binary("mul")); }

TEST(GradCheck, AddOfTheSameValue) {
  // Both operands are one value: its gradient is the sum of two paths.
  check(unaryModule(var("x", {3, 8}), "",
                    load("x", {3, 8}) +
                        "  %out = graph.add %x, %x : tensor<3x8xf32>\n",
                    {3, 8}));
}

TEST(GradCheck, Reshape) {
  check(unaryModule(var("x", {2, 12}), "",
                    load("x", {2, 12}) +
                        "  %r = graph.reshape %x : (tensor<2x12xf32>) -> "
                        "tensor<4x6xf32>\n  %out = graph.silu %r : "
                        "tensor<4x6xf32>\n",
                    {4, 6}));
}

TEST(GradCheck, CrossEntropyWithLossMask) {
  std::string module =
      var("logits", {2, 3, 7}) +
      "func.func @forward(%labels: tensor<2x3xi32>, %mask: tensor<2x3xf32>) "
      "-> tensor<f32> {\n" +
      load("logits", {2, 3, 7}) +
      "  %loss = graph.cross_entropy %logits, %labels, %mask : "
      "(tensor<2x3x7xf32>, tensor<2x3xi32>, tensor<2x3xf32>) -> tensor<f32>\n"
      "  return %loss : tensor<f32>\n}\n";
  // A masked position may carry any label (HF's -100 included).
  check(module, {ints({2, 3}, {0, 6, -100, 3, 3, 1}),
                 Tensor::fromFloats({2, 3}, {1, 1, 0, 1, 0, 1})});
}

} // namespace

namespace {

LlamaShape tinyShape(int layers, bool tied, bool docs) {
  LlamaShape s;
  s.layers = layers;
  s.tied = tied;
  s.docs = docs;
  s.stdDev = 0.3;
  s.normStd = 0.3;
  return s;
}

std::vector<Tensor> tinyBatch(bool docs) {
  std::vector<Tensor> args = {
      ints({2, 6}, {3, 17, 9, 30, 2, 2, 11, 0, 31, 8, 8, 5}),
      ints({2, 6}, {17, 9, 30, 2, 2, 7, 0, 31, 8, 8, 5, 1}),
      Tensor::fromFloats({2, 6}, {1, 1, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1}),
      docs ? ints({2, 6}, {0, 1, 2, 3, 0, 1, 2, 3, 4, 0, 1, 2})
           : ints({2, 6}, {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5})};
  if (docs)
    args.push_back(ints({4}, {0, 4, 9, 12}));
  return args;
}

TEST(GradCheck, TinyLlamaWholeModel) {
  check(llamaModule(tinyShape(2, /*tied=*/false, /*docs=*/false)),
        tinyBatch(false));
}

TEST(GradCheck, TinyLlamaTiedEmbeddingsPackedDocuments) {
  check(llamaModule(tinyShape(1, /*tied=*/true, /*docs=*/true)),
        tinyBatch(true));
}

} // namespace

namespace {

// Bad input: errors name the tensor and say what was expected.
TEST(InterpreterErrors, BatchShapeMismatchNamesTheTensor) {
  auto ctx = makeContext();
  auto module = parseAndDifferentiate(
      *ctx, var("table", {7, 4}, "embedding") + probeVariable({2, 3, 4}) +
                "func.func @forward(%ids: tensor<2x3xi32> {graph.name = "
                "\"tokens\"}) -> tensor<f32> {\n" +
                load("table", {7, 4}) +
                "  %out = graph.embedding %table, %ids : (tensor<7x4xf32>, "
                "tensor<2x3xi32>) -> tensor<2x3x4xf32>\n" +
                probeLoss("%out", {2, 3, 4}) + "}\n");
  ASSERT_TRUE(module);
  octet::interp::VariableStore store;
  store.initialize(*module, 1);
  octet::interp::Interpreter interpreter(*module);
  auto result =
      interpreter.run("train_microbatch", {ints({2, 5}, std::vector<int64_t>(10, 1))}, store);
  ASSERT_FALSE(bool(result));
  std::string message = llvm::toString(result.takeError());
  EXPECT_NE(message.find("argument 'tokens' (#0) of @train_microbatch: "
                         "expected [2, 3] i32, got [2, 5] i32"),
            std::string::npos)
      << message;

  auto outside = interpreter.run("forward", {ints({2, 3}, {0, 1, 2, 3, 9, 4})},
                                 store);
  ASSERT_FALSE(bool(outside));
  message = llvm::toString(outside.takeError());
  EXPECT_NE(message.find("token id 9 at position 4 is outside the vocabulary "
                         "[0, 7)"),
            std::string::npos)
      << message;
}

TEST(InterpreterErrors, MissingVariableNamesIt) {
  auto ctx = makeContext();
  auto module = parseAndDifferentiate(*ctx, elementwise("silu"));
  ASSERT_TRUE(module);
  octet::interp::VariableStore empty;
  octet::interp::Interpreter interpreter(*module);
  auto result = interpreter.run("forward", {}, empty);
  ASSERT_FALSE(bool(result));
  EXPECT_NE(llvm::toString(result.takeError())
                .find("variable 'x' is not in the variable store"),
            std::string::npos);
}

} // namespace
