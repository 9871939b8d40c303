// The interpreter's fp8 ops against hand-computed values.

#include "compiler/Interpreter/Fp8Ops.h"
#include "compiler/Interpreter/Interpreter.h"
#include "dialects/fp8/Fp8Dialect.h"
#include "dialects/graph/GraphDialect.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;
using octet::interp::Tensor;

namespace {

class Fp8Ops : public ::testing::Test {
protected:
  Fp8Ops() {
    DialectRegistry registry;
    registry.insert<octet::graph::GraphDialect, octet::fp8::Fp8Dialect,
                    octet::kernel::KernelDialect, func::FuncDialect>();
    ctx = std::make_unique<MLIRContext>(registry);
    ctx->loadAllAvailableDialects();
  }

  // Runs @f of `text` on `args`.
  std::vector<Tensor> run(const std::string &text,
                          const std::vector<Tensor> &args) {
    module = parseSourceString<ModuleOp>(text, ctx.get());
    EXPECT_TRUE(module) << text;
    if (!module)
      return {};
    octet::interp::Interpreter interp(*module);
    if (observer)
      interp.setOpObserver(observer);
    auto result = interp.run("f", args, vars);
    if (!result) {
      ADD_FAILURE() << llvm::toString(result.takeError());
      return {};
    }
    return *result;
  }

  std::unique_ptr<MLIRContext> ctx;
  OwningOpRef<ModuleOp> module;
  octet::interp::VariableStore vars;
  octet::interp::OpObserver observer;
};

std::vector<float> randomValues(int64_t n, float scale, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

TEST_F(Fp8Ops, ComputeScaleMarginEpsilonPowerOfTwoAndNonFinite) {
  auto out = run(R"(
func.func @f(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %s, %si = fp8.compute_scale %a {dtype = f8E4M3FN} : tensor<4xf32>
  %m, %mi = fp8.compute_scale %a {dtype = f8E5M2, margin = 1} : tensor<4xf32>
  %p, %pi = fp8.compute_scale %a {dtype = f8E4M3FN, power_of_two} : tensor<4xf32>
  return %s, %m, %p, %si : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
})",
                 {Tensor::fromFloats({4}, {2.0f, 0.0f, 3.0f, NAN})});
  ASSERT_EQ(out.size(), 4u);
  // The inverse is 1 / scale rounded to f32, element by element.
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(out[3].f()[i], 1.0f / out[0].f()[i]) << i;
  EXPECT_FLOAT_EQ(out[0].f()[0], 224.0f);
  // All-zero tensor: finite, from the epsilon.
  EXPECT_FLOAT_EQ(out[0].f()[1], 448.0f / 1e-12f);
  EXPECT_TRUE(std::isfinite(out[0].f()[1]));
  EXPECT_FLOAT_EQ(out[0].f()[2], 448.0f / 3.0f);
  // A non-finite amax has no scale to keep: 1.
  EXPECT_FLOAT_EQ(out[0].f()[3], 1.0f);
  EXPECT_FLOAT_EQ(out[1].f()[0], 57344.0f / 4.0f);
  // 149.33 rounds down to 128.
  EXPECT_FLOAT_EQ(out[2].f()[2], 128.0f);
  EXPECT_FLOAT_EQ(out[2].f()[0], 128.0f);
}

const char *kScaleUpdate = R"(
func.func @f(%h: tensor<4xf32>, %a: tensor<f32>, %s: tensor<f32>) -> (tensor<4xf32>, tensor<f32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %h1, %s1, %i1 = fp8.scale_update %h, %a, %s {dtype = f8E4M3FN, recipe = #fp8.recipe<kind = delayed, amax_history_len = 4, margin = 1>} : (tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<f32>, tensor<f32>)
  %h2, %s2, %i2 = fp8.scale_update %h, %a, %s {dtype = f8E4M3FN, recipe = #fp8.recipe<kind = delayed, amax_history_len = 4, amax_algorithm = most_recent>} : (tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<f32>, tensor<f32>)
  return %h1, %s1, %h2, %s2, %i1, %i2 : tensor<4xf32>, tensor<f32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>
})";

TEST_F(Fp8Ops, ScaleUpdateRollsHistoryAndAppliesAlgorithm) {
  auto out = run(kScaleUpdate, {Tensor::fromFloats({4}, {1, 8, 2, 16}),
                                Tensor::scalar(4.0f), Tensor::scalar(5.0f)});
  ASSERT_EQ(out.size(), 6u);
  // Newest first; the oldest (16) falls off.
  EXPECT_EQ(std::vector<float>(out[0].f(), out[0].f() + 4),
            (std::vector<float>{4, 1, 8, 2}));
  // max over the new history (8), margin 1: 448 / 16.
  EXPECT_FLOAT_EQ(out[1].item(), 28.0f);
  // most_recent: this step's 4.
  EXPECT_FLOAT_EQ(out[3].item(), 112.0f);
  // The inverses beside them: 1 / 28 and 1 / 112 rounded to f32.
  EXPECT_EQ(out[4].item(), 1.0f / 28.0f);
  EXPECT_EQ(out[5].item(), 1.0f / 112.0f);
}

TEST_F(Fp8Ops, ScaleUpdateKeepsScaleOnOverflowAndSurvivesZeros) {
  auto out = run(kScaleUpdate, {Tensor::fromFloats({4}, {0, 0, 0, 0}),
                                Tensor::scalar(INFINITY), Tensor::scalar(5.0f)});
  ASSERT_EQ(out.size(), 6u);
  EXPECT_FLOAT_EQ(out[1].item(), 5.0f);
  EXPECT_FLOAT_EQ(out[3].item(), 5.0f);
  // The kept scale's inverse, so state stays consistent.
  EXPECT_EQ(out[4].item(), 1.0f / 5.0f);
  out = run(kScaleUpdate, {Tensor::fromFloats({4}, {0, 0, 0, 0}),
                           Tensor::scalar(0.0f), Tensor::scalar(5.0f)});
  ASSERT_EQ(out.size(), 6u);
  EXPECT_TRUE(std::isfinite(out[1].item()));
  EXPECT_GT(out[1].item(), 1e12f);
}

TEST_F(Fp8Ops, BlockQuantizeRoundTripsWithinE4M3Precision) {
  // 3 x 200: two column tiles of 128, the second partial; one all-zero row.
  std::vector<float> x = randomValues(600, 1.0f, 1);
  for (int c = 0; c < 200; ++c)
    x[200 + c] = 0.0f;
  x[5] = 1000.0f; // one large value only affects its own tile
  auto out = run(R"(
func.func @f(%x: tensor<3x200xf32>) -> (tensor<3x200xf8E4M3FN>, tensor<3x2xf32>, tensor<3x200xf32>) {
  %q, %s = fp8.block_quantize %x {block = array<i64: 1, 128>, dtype = f8E4M3FN} : (tensor<3x200xf32>) -> (tensor<3x200xf8E4M3FN>, tensor<3x2xf32>)
  %y = fp8.block_dequantize %q, %s {block = array<i64: 1, 128>} : (tensor<3x200xf8E4M3FN>, tensor<3x2xf32>) -> tensor<3x200xf32>
  return %q, %s, %y : tensor<3x200xf8E4M3FN>, tensor<3x2xf32>, tensor<3x200xf32>
})",
                 {Tensor::fromFloats({3, 200}, x)});
  ASSERT_EQ(out.size(), 3u);
  const Tensor &q = out[0], &s = out[1], &y = out[2];
  for (int64_t i = 0; i < 600; ++i) {
    // E4M3 keeps 3 mantissa bits: relative error at most 2^-4 for normal
    // values; tiny values near the tile's subnormal range get an absolute
    // bound from the tile scale.
    float tileScale = s.f()[(i / 200) * 2 + (i % 200) / 128];
    EXPECT_NEAR(y.f()[i], x[i],
                std::fabs(x[i]) / 16.0f + 0.002f / tileScale * 448.0f)
        << i;
    EXPECT_LE(std::fabs(q.f()[i]), 448.0f);
  }
  // Each tile's largest value maps onto 448.
  EXPECT_FLOAT_EQ(s.f()[0], 448.0f / 1000.0f);
  EXPECT_FLOAT_EQ(q.f()[5], 448.0f);
  // The zero row: finite scales, zeros back.
  EXPECT_TRUE(std::isfinite(s.f()[2]) && std::isfinite(s.f()[3]));
  for (int c = 0; c < 200; ++c)
    EXPECT_EQ(y.f()[200 + c], 0.0f);
}

TEST_F(Fp8Ops, MatmulEqualsProductOfDequantizedOperands) {
  // Tensorwise E5M2 x E4M3 with transposes and a bias, and blockwise, each
  // against float32 products of the dequantized operands.
  std::vector<float> a = randomValues(6 * 4, 1.0f, 2),
                     b = randomValues(5 * 4, 1.0f, 3),
                     bias = randomValues(5, 1.0f, 4);
  auto out = run(R"(
func.func @f(%a: tensor<4x6xf32>, %b: tensor<5x4xf32>, %bias: tensor<5xf32>) -> (tensor<6x5xf32>, tensor<6x5xf32>, tensor<4x6xf32>, tensor<5x4xf32>, tensor<6x5xf32>) {
  %one = graph.fill {value = 3.0 : f64} : tensor<f32>
  %two = graph.fill {value = 50.0 : f64} : tensor<f32>
  %qa, %aa = fp8.quantize %a, %one : (tensor<4x6xf32>, tensor<f32>) -> (tensor<4x6xf8E5M2>, tensor<f32>)
  %qb, %ab = fp8.quantize %b, %two : (tensor<5x4xf32>, tensor<f32>) -> (tensor<5x4xf8E4M3FN>, tensor<f32>)
  %y = fp8.matmul %qa, %one, %qb, %two, %bias {transpose_a, transpose_b} : (tensor<4x6xf8E5M2>, tensor<f32>, tensor<5x4xf8E4M3FN>, tensor<f32>, tensor<5xf32>) -> tensor<6x5xf32>
  %da = fp8.dequantize %qa, %one : (tensor<4x6xf8E5M2>, tensor<f32>) -> tensor<4x6xf32>
  %db = fp8.dequantize %qb, %two : (tensor<5x4xf8E4M3FN>, tensor<f32>) -> tensor<5x4xf32>
  %ba, %bsa = fp8.block_quantize %a {block = array<i64: 2, 1>, dtype = f8E4M3FN} : (tensor<4x6xf32>) -> (tensor<4x6xf8E4M3FN>, tensor<2x6xf32>)
  %bb, %bsb = fp8.block_quantize %b {block = array<i64: 1, 2>, dtype = f8E4M3FN} : (tensor<5x4xf32>) -> (tensor<5x4xf8E4M3FN>, tensor<5x2xf32>)
  %yb = fp8.matmul %ba, %bsa, %bb, %bsb {transpose_a, transpose_b, a_block = array<i64: 2, 1>, b_block = array<i64: 1, 2>} : (tensor<4x6xf8E4M3FN>, tensor<2x6xf32>, tensor<5x4xf8E4M3FN>, tensor<5x2xf32>) -> tensor<6x5xf32>
  %dba = fp8.block_dequantize %ba, %bsa {block = array<i64: 2, 1>} : (tensor<4x6xf8E4M3FN>, tensor<2x6xf32>) -> tensor<4x6xf32>
  %dbb = fp8.block_dequantize %bb, %bsb {block = array<i64: 1, 2>} : (tensor<5x4xf8E4M3FN>, tensor<5x2xf32>) -> tensor<5x4xf32>
  %yr = graph.matmul %dba, %dbb {transpose_a, transpose_b} : (tensor<4x6xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  return %y, %yb, %da, %db, %yr : tensor<6x5xf32>, tensor<6x5xf32>, tensor<4x6xf32>, tensor<5x4xf32>, tensor<6x5xf32>
})",
                 {Tensor::fromFloats({4, 6}, a), Tensor::fromFloats({5, 4}, b),
                  Tensor::fromFloats({5}, bias)});
  ASSERT_EQ(out.size(), 5u);
  const Tensor &y = out[0], &yb = out[1], &da = out[2], &db = out[3],
               &yr = out[4];
  for (int m = 0; m < 6; ++m)
    for (int n = 0; n < 5; ++n) {
      float ref = bias[n];
      for (int k = 0; k < 4; ++k)
        ref += da.f()[k * 6 + m] * db.f()[n * 4 + k];
      EXPECT_NEAR(y.f()[m * 5 + n], ref, 1e-5f * (1 + std::fabs(ref)));
      EXPECT_NEAR(yb.f()[m * 5 + n], yr.f()[m * 5 + n], 1e-5f);
    }
}

TEST_F(Fp8Ops, TransposeMovesDataAndBlockScalesTogether) {
  std::vector<float> x = randomValues(4 * 3, 1.0f, 5);
  auto out = run(R"(
func.func @f(%x: tensor<4x3xf32>) -> (tensor<3x4xf32>, tensor<4x3xf32>) {
  %q, %s = fp8.block_quantize %x {block = array<i64: 2, 1>, dtype = f8E4M3FN} : (tensor<4x3xf32>) -> (tensor<4x3xf8E4M3FN>, tensor<2x3xf32>)
  %t, %ts = fp8.transpose %q, %s {block = array<i64: 2, 1>} : (tensor<4x3xf8E4M3FN>, tensor<2x3xf32>) -> (tensor<3x4xf8E4M3FN>, tensor<3x2xf32>)
  %yt = fp8.block_dequantize %t, %ts {block = array<i64: 1, 2>} : (tensor<3x4xf8E4M3FN>, tensor<3x2xf32>) -> tensor<3x4xf32>
  %y = fp8.block_dequantize %q, %s {block = array<i64: 2, 1>} : (tensor<4x3xf8E4M3FN>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return %yt, %y : tensor<3x4xf32>, tensor<4x3xf32>
})",
                 {Tensor::fromFloats({4, 3}, x)});
  ASSERT_EQ(out.size(), 2u);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(out[0].f()[c * 4 + r], out[1].f()[r * 3 + c]);
}

// cuBLASLt's layouts: 1x128 tiles [K/128, R] (the R factors of a K tile
// contiguous), 128x128 blocks [R/128, ceil4(K/128)] with the row's padding
// 0; each factor 1 / scale.
TEST_F(Fp8Ops, BlockFactorsAreInverseScalesInCublasLtLayout) {
  std::vector<float> tiles = {1, 2, 4, 8, 16, 32}; // scales [3 rows, 2 tiles]
  std::vector<float> blocks = {1, 2, 4, 8, 16, 32}; // [2 row blocks, 3]
  auto out = run(R"(
func.func @f(%t: tensor<3x2xf32>, %b: tensor<2x3xf32>) -> (tensor<6xf32>, tensor<8xf32>) {
  %ft = fp8.block_factors %t {block = array<i64: 1, 128>} : (tensor<3x2xf32>) -> tensor<6xf32>
  %fb = fp8.block_factors %b {block = array<i64: 128, 128>} : (tensor<2x3xf32>) -> tensor<8xf32>
  return %ft, %fb : tensor<6xf32>, tensor<8xf32>
})",
                 {Tensor::fromFloats({3, 2}, tiles),
                  Tensor::fromFloats({2, 3}, blocks)});
  ASSERT_EQ(out.size(), 2u);
  std::vector<float> wantTiles = {1, 1.0f / 4, 1.0f / 16,
                                  1.0f / 2, 1.0f / 8, 1.0f / 32};
  std::vector<float> wantBlocks = {1, 1.0f / 2, 1.0f / 4, 0,
                                   1.0f / 8, 1.0f / 16, 1.0f / 32, 0};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(out[0].f()[i], wantTiles[i]) << i;
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(out[1].f()[i], wantBlocks[i]) << i;
}

// A block-scaled kernel.gemm that reads the factors gives the product of
// one that reads the quantize scales, bit for bit where the scales are
// powers of two (1 / scale exact), and to f32 rounding otherwise.
TEST_F(Fp8Ops, KernelGemmOnFactorsEqualsGemmOnScales) {
  for (bool powerOfTwo : {true, false}) {
    std::string pow2 = powerOfTwo ? ", power_of_two" : "";
    auto out = run(R"(
func.func @f(%x: tensor<256x384xf32>, %w: tensor<128x384xf32>) -> (tensor<256x128xf32>, tensor<256x128xf32>) {
  %qx, %sx = fp8.block_quantize %x {block = array<i64: 1, 128>, dtype = f8E4M3FN)" +
                       pow2 + R"(} : (tensor<256x384xf32>) -> (tensor<256x384xf8E4M3FN>, tensor<256x3xf32>)
  %qw, %sw = fp8.block_quantize %w {block = array<i64: 128, 128>, dtype = f8E4M3FN)" +
                       pow2 + R"(} : (tensor<128x384xf32>) -> (tensor<128x384xf8E4M3FN>, tensor<1x3xf32>)
  %fx = fp8.block_factors %sx {block = array<i64: 1, 128>} : (tensor<256x3xf32>) -> tensor<768xf32>
  %fw = fp8.block_factors %sw {block = array<i64: 128, 128>} : (tensor<1x3xf32>) -> tensor<4xf32>
  %ys = kernel.gemm %qx, %qw scales(%sx, %sw) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, transpose_b} : (tensor<256x384xf8E4M3FN>, tensor<128x384xf8E4M3FN>, tensor<256x3xf32>, tensor<1x3xf32>) -> tensor<256x128xf32>
  %yf = kernel.gemm %qx, %qw scales(%fx, %fw) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, transpose_b} : (tensor<256x384xf8E4M3FN>, tensor<128x384xf8E4M3FN>, tensor<768xf32>, tensor<4xf32>) -> tensor<256x128xf32>
  return %ys, %yf : tensor<256x128xf32>, tensor<256x128xf32>
})",
                   {Tensor::fromFloats({256, 384},
                                       randomValues(256 * 384, 3.0f, 11)),
                    Tensor::fromFloats({128, 384},
                                       randomValues(128 * 384, 0.05f, 12))});
    ASSERT_EQ(out.size(), 2u);
    for (int64_t i = 0; i < 256 * 128; ++i) {
      if (powerOfTwo)
        ASSERT_EQ(out[0].f()[i], out[1].f()[i]) << i;
      else
        ASSERT_NEAR(out[0].f()[i], out[1].f()[i],
                    1e-5f * (1 + std::fabs(out[0].f()[i])))
            << i;
    }
  }
}

TEST_F(Fp8Ops, StatisticsCountUnderflowAndSaturation) {
  octet::interp::Fp8StatsCollector stats;
  observer = stats.observer();
  // Scale 100: 10 saturates E4M3 (1000 > 448); 1e-6 flushes to zero (E4M3's
  // smallest subnormal is 2^-9); exact zeros are not underflows.
  run(R"(
func.func @f(%x: tensor<6xf32>, %s: tensor<f32>) -> tensor<6xf8E4M3FN> {
  %q, %a = fp8.quantize %x, %s {tensor = "w"} : (tensor<6xf32>, tensor<f32>) -> (tensor<6xf8E4M3FN>, tensor<f32>)
  return %q : tensor<6xf8E4M3FN>
})",
      {Tensor::fromFloats({6}, {10.0f, 1e-6f, 0.0f, 1.0f, -2.0f, -1e-7f}),
       Tensor::scalar(100.0f)});
  auto snapshot = stats.snapshot();
  ASSERT_EQ(snapshot.count("w"), 1u);
  const octet::interp::Fp8TensorStats &w = snapshot["w"];
  EXPECT_EQ(w.values, 6);
  EXPECT_EQ(w.saturations, 1);
  EXPECT_EQ(w.underflows, 2);
  EXPECT_FLOAT_EQ(w.amax, 10.0f);
  EXPECT_FLOAT_EQ(w.scale, 100.0f);
  std::string text;
  llvm::raw_string_ostream os(text);
  stats.print(7, os);
  EXPECT_NE(text.find("fp8 step 7 w"), std::string::npos) << text;
  EXPECT_NE(text.find("saturated 16.667%"), std::string::npos) << text;
  EXPECT_NE(text.find("underflow 33.333%"), std::string::npos) << text;
}

} // namespace
