// The optimizer step against AdamW written out by hand in double: gradient
// accumulation over microbatches and averaging, global-norm clipping, bias
// correction, decoupled weight decay only on weight matrices, the LR
// schedule (linear warmup, cosine to a floor), the step counter and the
// zeroing of the accumulators.

#include "tests/unit/interpreter/GradCheck.h"

#include <gtest/gtest.h>

#include <cmath>

using octet::interp::Tensor;
using namespace octet::testing;

namespace {

const char *kModule = R"mlir(
graph.variable @w : tensor<2x3xf32> {kind = "weight", init = "normal", init_std = 1.0 : f64}
graph.variable @n : tensor<3xf32> {kind = "norm", init = "normal", init_std = 1.0 : f64}
graph.variable @probe : tensor<1x6xf32> {kind = "state", init = "normal", init_std = 1.0 : f64}
func.func @forward(%x: tensor<2x3xf32>) -> tensor<f32> {
  %w = graph.load @w : tensor<2x3xf32>
  %n = graph.load @n : tensor<3xf32>
  %h = graph.rms_norm %x, %n {eps = 1.0e-5 : f64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %y = graph.mul %h, %w : tensor<2x3xf32>
  %flat = graph.reshape %y : (tensor<2x3xf32>) -> tensor<1x6xf32>
  %probe = graph.load @probe : tensor<1x6xf32>
  %dot = graph.linear %flat, %probe : (tensor<1x6xf32>, tensor<1x6xf32>) -> tensor<1x1xf32>
  %loss = graph.reshape %dot : (tensor<1x1xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
)mlir";

double scheduledLr(const octet::TrainingPipelineOptions &o, int64_t step) {
  if (o.autodiff.warmupSteps > 0 && step <= o.autodiff.warmupSteps)
    return o.autodiff.lr * double(step) / double(o.autodiff.warmupSteps);
  double progress = std::min(
      1.0, double(step - o.autodiff.warmupSteps) /
               std::max<double>(1, double(o.autodiff.totalSteps - o.autodiff.warmupSteps)));
  return o.autodiff.lr * (o.autodiff.minLrRatio + (1 - o.autodiff.minLrRatio) * 0.5 *
                                    (1 + std::cos(M_PI * progress)));
}

TEST(Optimizer, AdamWStepMatchesHandWrittenReference) {
  octet::TrainingPipelineOptions o;
  o.autodiff.lr = 0.1;
  o.autodiff.minLrRatio = 0.2;
  o.autodiff.warmupSteps = 2;
  o.autodiff.totalSteps = 6;
  o.autodiff.beta1 = 0.8;
  o.autodiff.beta2 = 0.9;
  o.autodiff.eps = 1e-6;
  o.autodiff.weightDecay = 0.5;
  o.autodiff.gradClip = 0.05; // small enough to clip
  o.autodiff.microbatches = 2;

  auto ctx = makeContext();
  auto module = parseAndDifferentiate(*ctx, kModule, o);
  ASSERT_TRUE(module);
  octet::interp::VariableStore vars;
  vars.initialize(*module, 5);
  octet::interp::Interpreter interpreter(*module);

  // Two microbatches with different inputs.
  Tensor x1 = Tensor::fromFloats({2, 3}, {0.5f, -1.0f, 2.0f, 1.5f, 0.25f, -0.75f});
  Tensor x2 = Tensor::fromFloats({2, 3}, {-0.3f, 0.8f, 1.1f, 0.2f, -1.4f, 0.6f});
  // What each microbatch adds to the accumulators alone, from a fresh copy
  // of the store: its gradient times the backward's seed, 1 / 2.
  auto gradsOf = [&](const Tensor &x) {
    octet::interp::VariableStore copy = vars;
    auto r = interpreter.run("train_microbatch", {x}, copy);
    EXPECT_TRUE(bool(r));
    if (!r)
      llvm::consumeError(r.takeError());
    return std::make_pair(copy.get("grad.w"), copy.get("grad.n"));
  };
  auto [gw1, gn1] = gradsOf(x1);
  auto [gw2, gn2] = gradsOf(x2);

  std::vector<double> mw(6, 0), vw(6, 0), mn(3, 0), vn(3, 0);
  std::vector<double> pw(vars.get("w").f(), vars.get("w").f() + 6);
  std::vector<double> pn(vars.get("n").f(), vars.get("n").f() + 3);
  for (int64_t step = 1; step <= 3; ++step) {
    // The same two microbatches every step, so the gradients above are the
    // step's only while the parameters have not moved: recompute them.
    std::tie(gw1, gn1) = gradsOf(x1);
    std::tie(gw2, gn2) = gradsOf(x2);
    for (const Tensor &x : {x1, x2}) {
      auto r = interpreter.run("train_microbatch", {x}, vars);
      ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
    }
    auto result = interpreter.run("optimizer_step", {}, vars);
    ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());

    std::vector<double> gw(6), gn(3);
    double norm2 = 0;
    for (int i = 0; i < 6; ++i) {
      gw[i] = double(gw1.f()[i]) + gw2.f()[i];
      norm2 += gw[i] * gw[i];
    }
    for (int i = 0; i < 3; ++i) {
      gn[i] = double(gn1.f()[i]) + gn2.f()[i];
      norm2 += gn[i] * gn[i];
    }
    double norm = std::sqrt(norm2);
    double clip = std::min(1.0, o.autodiff.gradClip / (norm + 1e-6));
    double lr = scheduledLr(o, step);
    EXPECT_NEAR((*result)[0].item(), norm, 1e-5 * norm) << "grad norm, step " << step;
    EXPECT_NEAR((*result)[1].item(), lr, 1e-6 * lr) << "lr, step " << step;
    ASSERT_LT(clip, 1.0) << "the test means to exercise clipping";

    auto adam = [&](std::vector<double> &p, std::vector<double> &m,
                    std::vector<double> &v, const std::vector<double> &g,
                    double decay) {
      for (size_t i = 0; i < p.size(); ++i) {
        double gi = g[i] * clip;
        m[i] = o.autodiff.beta1 * m[i] + (1 - o.autodiff.beta1) * gi;
        v[i] = o.autodiff.beta2 * v[i] + (1 - o.autodiff.beta2) * gi * gi;
        double mhat = m[i] / (1 - std::pow(o.autodiff.beta1, step));
        double vhat = v[i] / (1 - std::pow(o.autodiff.beta2, step));
        p[i] = p[i] * (1 - lr * decay) - lr * mhat / (std::sqrt(vhat) + o.autodiff.eps);
      }
    };
    adam(pw, mw, vw, gw, o.autodiff.weightDecay); // weight matrix: decays
    adam(pn, mn, vn, gn, 0.0);           // norm: no decay
    for (int i = 0; i < 6; ++i)
      EXPECT_NEAR(vars.get("w").f()[i], pw[i], 1e-5) << "w[" << i << "], step " << step;
    for (int i = 0; i < 3; ++i)
      EXPECT_NEAR(vars.get("n").f()[i], pn[i], 1e-5) << "n[" << i << "], step " << step;
    EXPECT_EQ(vars.get("optimizer.step").intItem(), step);
    for (int i = 0; i < 6; ++i)
      ASSERT_EQ(vars.get("grad.w").f()[i], 0.0f) << "accumulator not zeroed";
  }
}

TEST(Optimizer, LrScheduleWarmupThenCosineToFloor) {
  octet::TrainingPipelineOptions o;
  o.autodiff.lr = 1.0;
  o.autodiff.minLrRatio = 0.1;
  o.autodiff.warmupSteps = 4;
  o.autodiff.totalSteps = 12;
  auto ctx = makeContext();
  auto module = parseAndDifferentiate(*ctx, kModule, o);
  ASSERT_TRUE(module);
  octet::interp::VariableStore vars;
  vars.initialize(*module, 5);
  octet::interp::Interpreter interpreter(*module);
  std::vector<double> seen;
  for (int step = 1; step <= 14; ++step) {
    auto r = interpreter.run("optimizer_step", {}, vars);
    ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
    seen.push_back((*r)[1].item());
  }
  EXPECT_NEAR(seen[0], 0.25, 1e-7);  // warmup 1/4
  EXPECT_NEAR(seen[3], 1.0, 1e-7);   // peak at the end of warmup
  EXPECT_NEAR(seen[7], 0.55, 1e-6);  // halfway down the cosine
  EXPECT_NEAR(seen[11], 0.1, 1e-7);  // the floor at total_steps
  EXPECT_NEAR(seen[13], 0.1, 1e-7);  // and after it
  for (int i = 4; i < 12; ++i)
    EXPECT_LT(seen[i], seen[i - 1]);
}

} // namespace
