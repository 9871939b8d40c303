// kernel.gemm's epilogues in the interpreter: the golden path (octet golden)
// interprets the step as compiled, where gradient accumulation rides on
// `accumulate` and bias/GELU on the cuBLASLt epilogue. Each result is
// checked against loops written here in double.

#include "tests/unit/interpreter/GradCheck.h"

#include "compiler/Interpreter/Interpreter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
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

} // namespace
