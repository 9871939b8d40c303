// kernel.gemm's epilogues in the interpreter: the golden path (octet golden)
// interprets the step as compiled, where gradient accumulation rides on
// `accumulate` and bias/GELU on the cuBLASLt epilogue. Each result is
// checked against loops written here in double.

#include "tests/unit/interpreter/GradCheck.h"

#include "compiler/Interpreter/Interpreter.h"
#include "support/Numerics.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using octet::interp::Tensor;

namespace {

// T tokens, K inputs, N outputs.
constexpr int64_t T = 4, K = 3, N = 5;

const char *kModule = R"mlir(
func.func @epilogues(%x: tensor<4x3xf32>, %w: tensor<5x3xf32>,
                     %bias: tensor<5xf32>, %acc: tensor<4x5xf32>,
                     %dy: tensor<4x5xf32>)
    -> (tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>,
        tensor<5x3xf32>, tensor<5xf32>) {
  %accumulated = kernel.gemm %x, %w accumulate(%acc) {transpose_b} : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %biased = kernel.gemm %x, %w bias(%bias) {transpose_b, epilogue = "bias"} : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %gelu, %pre = kernel.gemm %x, %w bias(%bias) {transpose_b, epilogue = "gelu_aux"} : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> (tensor<4x5xf32>, tensor<4x5xf32>)
  %dw, %dbias = kernel.gemm %dy, %x {transpose_a, epilogue = "bias_grad"} : (tensor<4x5xf32>, tensor<4x3xf32>) -> (tensor<5x3xf32>, tensor<5xf32>)
  return %accumulated, %biased, %gelu, %pre, %dw, %dbias : tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>, tensor<5x3xf32>, tensor<5xf32>
}
)mlir";

Tensor random(std::vector<int64_t> shape, std::mt19937 &gen) {
  std::normal_distribution<float> normal;
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<float> v(n);
  for (float &x : v)
    x = normal(gen);
  return Tensor::fromFloats(shape, v);
}

double geluTanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

void expectNear(const Tensor &got, const std::vector<double> &want,
                const char *what) {
  ASSERT_EQ(got.numel(), int64_t(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got.f()[i], want[i], 1e-5 * (1 + std::abs(want[i])))
        << what << " element " << i;
}

TEST(GemmEpilogue, AccumulateBiasGeluAndBiasGradAreApplied) {
  auto ctx = octet::testing::makeContext();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kModule, ctx.get());
  ASSERT_TRUE(module);
  std::mt19937 gen(7);
  Tensor x = random({T, K}, gen), w = random({N, K}, gen),
         bias = random({N}, gen), acc = random({T, N}, gen),
         dy = random({T, N}, gen);
  octet::interp::VariableStore vars;
  octet::interp::Interpreter interpreter(*module);
  auto results = interpreter.run("epilogues", {x, w, bias, acc, dy}, vars);
  ASSERT_TRUE(bool(results)) << llvm::toString(results.takeError());
  ASSERT_EQ(results->size(), 6u);

  std::vector<double> product(T * N), accumulated(T * N), biased(T * N),
      gelu(T * N), dw(N * K, 0.0), dbias(N, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double p = 0;
      for (int64_t k = 0; k < K; ++k)
        p += double(x.f()[t * K + k]) * w.f()[n * K + k];
      accumulated[t * N + n] = p + acc.f()[t * N + n];
      biased[t * N + n] = p + bias.f()[n];
      gelu[t * N + n] = geluTanh(biased[t * N + n]);
      dbias[n] += dy.f()[t * N + n];
      for (int64_t k = 0; k < K; ++k)
        dw[n * K + k] += double(dy.f()[t * N + n]) * x.f()[t * K + k];
    }
  expectNear((*results)[0], accumulated, "accumulate");
  expectNear((*results)[1], biased, "bias");
  expectNear((*results)[2], gelu, "gelu_aux result");
  expectNear((*results)[3], biased, "gelu_aux pre-activation");
  expectNear((*results)[4], dw, "bias_grad product");
  expectNear((*results)[5], dbias, "bias_grad bias gradient");
}

// A wgrad GEMM that writes BF16 (train.precision.grad_dtype "bf16") rounds
// once, to nearest even, what cuBLASLt computes in f32: the product plus
// the accumulator. Operands of the form 1 + m/128 make every product and
// sum exact in f32, so the expected value is exact too.
const char *kBf16Wgrad = R"mlir(
func.func @wgrad(%dy: tensor<4x5xbf16>, %x: tensor<4x3xbf16>, %acc: tensor<5x3xbf16>) -> tensor<5x3xbf16> {
  %dw = kernel.gemm %dy, %x accumulate(%acc) {transpose_a, role = "wgrad"} : (tensor<4x5xbf16>, tensor<4x3xbf16>, tensor<5x3xbf16>) -> tensor<5x3xbf16>
  return %dw : tensor<5x3xbf16>
}
)mlir";

TEST(GemmEpilogue, Bf16WgradRoundsTheF32ResultOnceToNearestEven) {
  auto ctx = octet::testing::makeContext();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kBf16Wgrad, ctx.get());
  ASSERT_TRUE(module);
  auto steps = [](std::vector<int64_t> shape, int seed) {
    std::vector<float> v(shape[0] * shape[1]);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = 1.0f + float((i * 37 + seed) % 128) / 128.0f;
    return Tensor::fromFloats(shape, v, octet::DType::BF16);
  };
  Tensor dy = steps({T, N}, 1), x = steps({T, K}, 5), acc = steps({N, K}, 9);
  octet::interp::VariableStore vars;
  octet::interp::Interpreter interpreter(*module);
  auto results = interpreter.run("wgrad", {dy, x, acc}, vars);
  ASSERT_TRUE(bool(results)) << llvm::toString(results.takeError());
  const Tensor &dw = (*results)[0];
  int notTruncations = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      double exact = acc.f()[n * K + k];
      for (int64_t t = 0; t < T; ++t)
        exact += double(dy.f()[t * N + n]) * x.f()[t * K + k];
      ASSERT_EQ(double(float(exact)), exact) << "the sum must be exact in f32";
      float want = octet::numerics::roundToBF16(float(exact));
      EXPECT_EQ(dw.f()[n * K + k], want) << "element " << n << ", " << k;
      // Truncating the f32 bits would give another value here.
      uint32_t bits;
      float f = float(exact);
      std::memcpy(&bits, &f, 4);
      bits &= 0xffff0000u;
      float truncated;
      std::memcpy(&truncated, &bits, 4);
      notTruncations += truncated != want;
    }
  EXPECT_GT(notTruncations, 0) << "no element tells rounding from truncation";
}

} // namespace
