// Step-local gradient accumulators (dialects/graph/StepLocal.h): the memory
// plan gives them bytes only between the first microbatch's write and the
// optimizer step's last read, so a read outside that window would see
// another tensor on the GPU. The interpreter and the planner must both
// refuse one.

#include "tests/unit/interpreter/GradCheck.h"

#include "compiler/Interpreter/Interpreter.h"
#include "compiler/Plan/MemoryPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

using octet::interp::Tensor;

namespace {

// @train_microbatch writes grad.w by an overwriting wgrad GEMM; the
// optimizer reads it. EXTRA is spliced in to read it elsewhere.
std::string module(const std::string &extra) {
  return R"mlir(
graph.variable @grad.w : tensor<4x3xf32> {init = "zeros", kind = "state", step_local}
graph.variable @w : tensor<4x3xf32> {init = "ones", kind = "weight"}
func.func @train_microbatch(%dy: tensor<2x4xf32>, %x: tensor<2x3xf32>) -> tensor<f32> {
  %g = graph.load @grad.w : tensor<4x3xf32>
  %d = kernel.gemm %dy, %x accumulate(%g) {first_microbatch_overwrites, param = "w", role = "wgrad", transpose_a} : (tensor<2x4xf32>, tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  graph.store %d, @grad.w : tensor<4x3xf32>
  %z = graph.fill {value = 0.0 : f64} : tensor<f32>
  return %z : tensor<f32>
}
func.func @optimizer_step() -> tensor<4x3xf32> {
  %g = graph.load @grad.w : tensor<4x3xf32>
  %w = graph.load @w : tensor<4x3xf32>
  %n = graph.add %w, %g : tensor<4x3xf32>
  graph.store %n, @w : tensor<4x3xf32>
  return %n : tensor<4x3xf32>
}
)mlir" + extra;
}

const char *kEvalReads = R"mlir(
func.func @forward() -> tensor<4x3xf32> {
  %g = graph.load @grad.w : tensor<4x3xf32>
  return %g : tensor<4x3xf32>
}
)mlir";

std::vector<Tensor> batch() {
  return {Tensor::fromFloats({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}),
          Tensor::fromFloats({2, 3}, {1, 0, 1, 0, 1, 0})};
}

TEST(StepLocal, InterpreterRefusesAReadOutsideTheStep) {
  auto ctx = octet::testing::makeContext();
  auto m = mlir::parseSourceString<mlir::ModuleOp>(module(kEvalReads),
                                                   ctx.get());
  ASSERT_TRUE(m);
  octet::interp::VariableStore store;
  store.initialize(*m, 0);
  EXPECT_FALSE(store.has("grad.w")) << "nothing before the first write";
  octet::interp::Interpreter interp(*m);
  // Before any step, and after the optimizer: the slot is someone else's.
  auto before = interp.run("forward", {}, store);
  ASSERT_FALSE(before);
  EXPECT_NE(llvm::toString(before.takeError()).find("step-local"),
            std::string::npos);
  interp.setFirstMicrobatch(true);
  ASSERT_TRUE(bool(interp.run("train_microbatch", batch(), store)));
  auto step = interp.run("optimizer_step", {}, store);
  ASSERT_TRUE(bool(step));
  // w + dyᵀ·x: the gradient the step wrote, whatever the slot held before.
  EXPECT_FLOAT_EQ((*step)[0].f()[0], 1 + 1);
  EXPECT_FLOAT_EQ((*step)[0].f()[1], 1 + 5);
  EXPECT_FALSE(store.has("grad.w"));
  auto after = interp.run("forward", {}, store);
  ASSERT_FALSE(after);
  // A later microbatch (no overwrite) before the first is refused too.
  interp.setFirstMicrobatch(false);
  auto notFirst = interp.run("train_microbatch", batch(), store);
  ASSERT_FALSE(notFirst);
  EXPECT_NE(llvm::toString(notFirst.takeError()).find("step-local"),
            std::string::npos);
}

TEST(StepLocal, PlanSharesTheSlotOnlyInsideTheStep) {
  auto ctx = octet::testing::makeContext();
  auto m = mlir::parseSourceString<mlir::ModuleOp>(module(""), ctx.get());
  ASSERT_TRUE(m);
  auto plan = octet::plan::planMemory(*m, 1);
  ASSERT_TRUE(succeeded(plan));
  const octet::plan::Slot &g = plan->slots[plan->variableSlots.lookup("grad.w")];
  EXPECT_EQ(g.program, "train_microbatch");
  EXPECT_EQ(g.firstStep, 1) << "from the GEMM that writes it";
  EXPECT_EQ(g.lastProgram, "optimizer_step");
  EXPECT_EQ(g.lastStep, 2) << "to the add that reads it";
  EXPECT_GE(g.offset, plan->persistentBytes) << "in the activation region";
  // Several microbatches carry the sum over the train program: persistent.
  auto several = octet::plan::planMemory(*m, 4);
  ASSERT_TRUE(succeeded(several));
  EXPECT_TRUE(
      several->slots[several->variableSlots.lookup("grad.w")].program.empty());
}

TEST(StepLocal, PlanRefusesAReaderOutsideTheStep) {
  auto ctx = octet::testing::makeContext();
  auto m = mlir::parseSourceString<mlir::ModuleOp>(module(kEvalReads),
                                                   ctx.get());
  ASSERT_TRUE(m);
  ctx->getDiagEngine().registerHandler([](mlir::Diagnostic &) {
    return mlir::success();
  });
  EXPECT_TRUE(failed(octet::plan::planMemory(*m, 1)));
}

// An accumulator the optimizer used to clear, cleared at the start of the
// train program instead (one microbatch a step): the memset is its first
// write, and a read before it is refused.
std::string clearedModule(bool readFirst) {
  std::string early = readFirst ? R"mlir(
  %early = graph.load @grad.e : tensor<4x3xf32>
  %twice = graph.add %early, %early : tensor<4x3xf32>
)mlir"
                                : "";
  return R"mlir(
graph.variable @grad.e : tensor<4x3xf32> {init = "zeros", kind = "state", step_local}
graph.variable @e : tensor<4x3xf32> {init = "ones", kind = "weight"}
func.func @train_microbatch(%d: tensor<4x3xf32>) -> tensor<f32> {
  %one = graph.fill {value = 1.0 : f64} : tensor<f32>)mlir" +
         early + R"mlir(
  %z = graph.fill {value = 0.0 : f64} : tensor<4x3xf32>
  graph.store %z, @grad.e : tensor<4x3xf32>
  %g = graph.load @grad.e : tensor<4x3xf32>
  %s = graph.add %g, %d : tensor<4x3xf32>
  graph.store %s, @grad.e : tensor<4x3xf32>
  return %one : tensor<f32>
}
func.func @optimizer_step() -> tensor<4x3xf32> {
  %g = graph.load @grad.e : tensor<4x3xf32>
  %w = graph.load @e : tensor<4x3xf32>
  %n = graph.add %w, %g : tensor<4x3xf32>
  graph.store %n, @e : tensor<4x3xf32>
  return %n : tensor<4x3xf32>
}
)mlir";
}

TEST(StepLocal, ClearedInTheTrainProgramFromItsMemset) {
  auto ctx = octet::testing::makeContext();
  auto m = mlir::parseSourceString<mlir::ModuleOp>(clearedModule(false),
                                                   ctx.get());
  ASSERT_TRUE(m);
  auto plan = octet::plan::planMemory(*m, 1);
  ASSERT_TRUE(succeeded(plan));
  const octet::plan::Slot &g = plan->slots[plan->variableSlots.lookup("grad.e")];
  EXPECT_EQ(g.program, "train_microbatch");
  EXPECT_EQ(g.firstStep, 2) << "from the memset (the store of the zeros)";
  EXPECT_EQ(g.lastProgram, "optimizer_step");
  EXPECT_EQ(g.lastStep, 2);
  EXPECT_GE(g.offset, plan->persistentBytes) << "in the activation region";
  // The interpreter runs it with no first-microbatch flag: the train
  // program writes the accumulator before it reads it.
  octet::interp::VariableStore store;
  store.initialize(*m, 0);
  octet::interp::Interpreter interp(*m);
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(bool(interp.run(
        "train_microbatch",
        {Tensor::fromFloats({4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})},
        store)));
    auto updated = interp.run("optimizer_step", {}, store);
    ASSERT_TRUE(bool(updated));
    // e + d each step: the accumulator starts from zero every step.
    EXPECT_FLOAT_EQ((*updated)[0].f()[0], 1 + (step + 1) * 1);
    EXPECT_FLOAT_EQ((*updated)[0].f()[11], 1 + (step + 1) * 12);
  }
}

TEST(StepLocal, PlanRefusesAReadBeforeTheClear) {
  auto ctx = octet::testing::makeContext();
  auto m = mlir::parseSourceString<mlir::ModuleOp>(clearedModule(true),
                                                   ctx.get());
  ASSERT_TRUE(m);
  std::string message;
  ctx->getDiagEngine().registerHandler([&](mlir::Diagnostic &d) {
    message += d.str();
    return mlir::success();
  });
  EXPECT_TRUE(failed(octet::plan::planMemory(*m, 1)));
  EXPECT_NE(message.find("before the step has written it"), std::string::npos)
      << message;
}

} // namespace
