// octet-bf16-activations: a train step whose activations the interpreter
// rounds to BF16 follows the f32 one. Two-layer Llama, the same seed and
// batches, a few optimizer steps of each.

#include "compiler/Interpreter/Interpreter.h"
#include "compiler/Pipelines/Pipelines.h"
#include "tests/unit/interpreter/GradCheck.h"

#include "mlir/IR/BuiltinOps.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mlir;
using octet::interp::Tensor;

namespace {

std::vector<Tensor> batch(int step) {
  std::vector<int64_t> tokens(12), labels(12);
  for (int i = 0; i < 12; ++i) {
    tokens[i] = (7 * i + 5 * step + 3) % 32;
    labels[i] = (tokens[i] * 3 + 1) % 32;
  }
  return octet::testing::llamaBatch(2, 6, tokens, labels);
}

using octet::testing::relativeError;

struct TrainRun {
  std::vector<double> losses;
  // The accumulated gradients of the first microbatch, before any update.
  std::map<std::string, Tensor> firstGrads;
  octet::interp::VariableStore vars;
};

constexpr int kSteps = 5;

TrainRun train(ModuleOp module) {
  TrainRun run;
  run.vars.initialize(module, 3);
  octet::interp::Interpreter interp(module);
  for (int step = 0; step < kSteps; ++step) {
    auto loss = interp.run("train_microbatch", batch(step), run.vars);
    if (!loss) {
      ADD_FAILURE() << llvm::toString(loss.takeError());
      return run;
    }
    run.losses.push_back((*loss)[0].item());
    if (step == 0)
      for (const auto &[name, value] : run.vars.all())
        if (llvm::StringRef(name).starts_with("grad."))
          run.firstGrads.emplace(name, value);
    auto opt = interp.run("optimizer_step", {}, run.vars);
    if (!opt) {
      ADD_FAILURE() << llvm::toString(opt.takeError());
      return run;
    }
  }
  return run;
}

TEST(Bf16Activations, TrainStepTracksF32) {
  auto ctx = octet::testing::makeContext();
  octet::testing::LlamaShape shape;
  shape.layers = 2;
  shape.stdDev = 0.3;
  shape.normStd = 0.3;
  std::string text = octet::testing::llamaModule(shape);
  octet::TrainingPipelineOptions options;
  options.autodiff.lr = 1e-2;
  options.autodiff.totalSteps = kSteps;
  options.activations.activationDtype = "f32";
  auto wide = octet::testing::parseAndDifferentiate(*ctx, text, options);
  options.activations.activationDtype = "bf16";
  auto narrow = octet::testing::parseAndDifferentiate(*ctx, text, options);
  ASSERT_TRUE(wide && narrow);

  // The BF16 step does hold BF16 activations (and the f32 one none).
  auto countBf16 = [](ModuleOp m) {
    int n = 0;
    m.walk([&](Operation *op) {
      for (Type t : op->getResultTypes())
        if (auto r = dyn_cast<RankedTensorType>(t); r && r.getElementType().isBF16())
          ++n;
    });
    return n;
  };
  EXPECT_EQ(countBf16(*wide), 0);
  EXPECT_GT(countBf16(*narrow), 50);

  TrainRun want = train(*wide), got = train(*narrow);
  ASSERT_EQ(got.losses.size(), size_t(kSteps));
  ASSERT_EQ(want.losses.size(), size_t(kSteps));
  // BF16 keeps 8 significant bits (relative rounding 2^-9 = 0.2%). The
  // loss, a mean over tokens, moves far less: 0.03% measured; 0.2% allowed.
  for (int step = 0; step < kSteps; ++step)
    EXPECT_NEAR(got.losses[step], want.losses[step], 0.002 * want.losses[step])
        << "step " << step;
  // Training moves the loss and both runs move it the same way.
  EXPECT_LT(want.losses.back(), want.losses.front());
  EXPECT_LT(got.losses.back(), got.losses.front());
  // First-microbatch gradients (f32 accumulators fed by BF16 GEMM operands)
  // within 4% of the f32 ones, relative to each whole tensor (1.8% at most
  // measured).
  ASSERT_EQ(got.firstGrads.size(), want.firstGrads.size());
  for (const auto &[name, value] : want.firstGrads)
    EXPECT_LT(relativeError(got.firstGrads.at(name), value), 0.04) << name;
  // After the optimizer steps the f32 parameters agree to 1%.
  for (const auto &[name, value] : want.vars.all())
    if (llvm::StringRef(name).starts_with("layers.") ||
        name == "embed" || name == "final_norm" || name == "lm_head")
      EXPECT_LT(relativeError(got.vars.get(name), value), 0.01) << name;
}

} // namespace
