// octet-precision + octet-layout keep the train step's result, up to FP8
// rounding: a two-layer Llama, differentiated, run through the interpreter
// in float32 and under each recipe.

#include "compiler/Interpreter/Fp8Ops.h"
#include "compiler/Interpreter/Interpreter.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Transforms/Precision.h"
#include "tests/unit/interpreter/GradCheck.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mlir;
using octet::interp::Tensor;

namespace {

// A [2, seq] batch: the 12 tokens below repeated.
std::vector<Tensor> batch(int64_t seq) {
  const std::vector<int64_t> tokens = {3, 17, 9, 30, 2, 2, 11, 0, 31, 8, 8, 5};
  const std::vector<int64_t> labels = {17, 9, 30, 2, 2, 7, 0, 31, 8, 8, 5, 1};
  std::vector<int64_t> t, l;
  for (int64_t i = 0; i < 2 * seq; ++i) {
    t.push_back(tokens[i % tokens.size()]);
    l.push_back(labels[i % labels.size()]);
  }
  return octet::testing::llamaBatch(2, seq, t, l);
}

using octet::testing::relativeError;

struct TrainRun {
  double loss;
  octet::interp::VariableStore vars;
};

// Two microbatches of @train_microbatch, so delayed scaling runs with the
// scales the first one wrote.
TrainRun train(ModuleOp module, int64_t seq,
               octet::interp::Fp8StatsCollector *stats = nullptr) {
  TrainRun run;
  run.vars.initialize(module, 11);
  octet::interp::Interpreter interp(module);
  if (stats)
    interp.setOpObserver(stats->observer());
  for (int i = 0; i < 2; ++i) {
    auto result = interp.run("train_microbatch", batch(seq), run.vars);
    if (!result) {
      ADD_FAILURE() << llvm::toString(result.takeError());
      return run;
    }
    run.loss = (*result)[0].item();
  }
  return run;
}

class Precision : public ::testing::TestWithParam<const char *> {};

TEST_P(Precision, KeepsTheTrainStepUpToFp8Rounding) {
  auto ctx = octet::testing::makeContext();
  octet::testing::LlamaShape shape;
  shape.layers = 2;
  shape.stdDev = 0.3;
  shape.normStd = 0.3;
  if (std::string(GetParam()) == "blockwise") {
    // cuBLASLt's block-scaled GEMMs take multiples of 128 only (others keep
    // BF16): 128 tokens, every projection 128 or 256 wide.
    shape.seq = 64;
    shape.hidden = 128;
    shape.heads = shape.kvHeads = 4;
    shape.headDim = 32;
    shape.ffn = 256;
  }
  std::string text = octet::testing::llamaModule(shape);
  // The reference is all f32; the FP8 step is the one octet trains: BF16
  // activations (octet-bf16-activations' default), FP8 GEMMs on top.
  auto reference = octet::testing::parseAndDifferentiate(*ctx, text);
  auto fp8 = octet::testing::parseAndDifferentiate(
      *ctx, text, octet::TrainingPipelineOptions());
  ASSERT_TRUE(reference && fp8);

  PassManager pm(ctx.get());
  octet::OctetPrecisionOptions options;
  options.recipe = GetParam();
  options.amaxHistoryLen = 4;
  pm.addPass(octet::createOctetPrecision(options));
  pm.addPass(octet::createOctetLayout());
  ASSERT_TRUE(succeeded(pm.run(*fp8)));

  // Activations and gradients are quantized from BF16, weights from their
  // f32 master copy: BF16 weight copies are left only for the BF16 GEMMs.
  int fromBf16 = 0;
  fp8->walk([&](Operation *op) {
    auto tensor = op->getAttrOfType<StringAttr>("tensor");
    if (!tensor || !isa<octet::fp8::QuantizeOp, octet::fp8::BlockQuantizeOp>(op))
      return;
    Type input = cast<RankedTensorType>(op->getOperand(0).getType())
                     .getElementType();
    if (tensor.getValue().ends_with(".w"))
      EXPECT_TRUE(input.isF32()) << tensor.str();
    else
      fromBf16 += input.isBF16();
  });
  EXPECT_GT(fromBf16, 0);
  fp8->walk([&](octet::graph::CastOp cast) {
    for (Operation *user : cast->getUsers())
      EXPECT_TRUE(user->hasAttr("bf16_reason"))
          << user->getName().getStringRef().str();
  });

  int gemms = 0;
  fp8->walk([&](octet::fp8::MatmulOp mm) {
    ++gemms;
    EXPECT_FALSE(mm.getTransposeA());
    EXPECT_TRUE(mm.getTransposeB());
  });
  // 7 linears per layer (q, k, v, o, gate, up, down): fprop, dgrad and
  // wgrad in @train_microbatch, fprop in @forward (eval); the LM head stays
  // wide.
  EXPECT_EQ(gemms, 2 * 7 * 3 + 2 * 7);

  octet::interp::Fp8StatsCollector stats;
  TrainRun want = train(*reference, shape.seq);
  TrainRun got = train(*fp8, shape.seq, &stats);
  EXPECT_NEAR(got.loss, want.loss, 0.02 * want.loss);
  for (const auto &[name, value] : want.vars.all()) {
    if (!llvm::StringRef(name).starts_with("grad.layers."))
      continue;
    // E5M2 gradients carry 2 mantissa bits; the error is relative to the
    // whole tensor.
    EXPECT_LT(relativeError(got.vars.get(name), value), 0.25) << name;
  }
  // Delayed scaling may clip the odd value that outgrew last step's amax;
  // never a sizeable share.
  for (const auto &[name, s] : stats.snapshot()) {
    EXPECT_LE(s.saturations * 100, s.values) << name;
    EXPECT_GT(s.values, 0) << name;
  }
  if (std::string(GetParam()) == "delayed") {
    // The first microbatch recorded its amax and wrote the next scale.
    const Tensor &history =
        got.vars.get("fp8.layers.0.attn.wq.x.amax_history");
    EXPECT_GT(history.f()[0], 0.0f);
    EXPECT_GT(history.f()[1], 0.0f);
    EXPECT_NE(got.vars.get("fp8.layers.0.attn.wq.x.scale").item(), 1.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(Recipes, Precision,
                         ::testing::Values("delayed", "current", "blockwise"));

TEST(PrecisionReport, ListsEveryGemmWithFormatsAndRecipe) {
  auto ctx = octet::testing::makeContext();
  octet::testing::LlamaShape shape;
  shape.layers = 2;
  auto module = octet::testing::parseAndDifferentiate(
      *ctx, octet::testing::llamaModule(shape));
  ASSERT_TRUE(module);
  PassManager pm(ctx.get());
  octet::OctetPrecisionOptions options;
  options.amaxHistoryLen = 16;
  options.lastLayersBf16 = 1;
  pm.addPass(octet::createOctetPrecision(options));
  ASSERT_TRUE(succeeded(pm.run(*module)));
  std::string text;
  llvm::raw_string_ostream os(text);
  octet::printPrecisionReport(*module, os);
  EXPECT_NE(text.find("0      layers.0.attn.wq       fprop  e4m3 x e4m3    "
                      "delayed (history 16, max, margin 0)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("0      layers.0.mlp.w_down    dgrad  e5m2 x e4m3"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("0      layers.0.mlp.w_down    wgrad  e5m2 x e4m3"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("1      layers.1.mlp.w_up      fprop  f32 x f32      "
                      "none: last 1 layers"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("-      lm_head                fprop  f32 x f32      "
                      "none: outside the layers"),
            std::string::npos)
      << text;
}

} // namespace
