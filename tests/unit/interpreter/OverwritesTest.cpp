// A kernel.fused that writes a result over an input (`overwrites`,
// octet-overwrite-logits): the memory plan gives the result the input's
// bytes, and refuses the mark when a later op reads the input, since on the
// GPU that op would read the gradient instead.

#include "tests/unit/interpreter/GradCheck.h"

#include "compiler/Interpreter/Interpreter.h"
#include "compiler/Plan/MemoryPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

using octet::interp::Tensor;

namespace {

// Logits from a GEMM, the loss, the gradient written over the logits, and
// a dgrad GEMM reading it. EXTRA is spliced in after the gradient.
std::string module(const std::string &extra) {
  return R"mlir(
func.func @train_microbatch(%x: tensor<4x3xf32>, %w: tensor<5x3xf32>, %labels: tensor<1x4xi32>, %mask: tensor<1x4xf32>) -> (tensor<f32>, tensor<4x3xf32>) {
  %logits = kernel.gemm %x, %w {param = "head", role = "fprop", transpose_b} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %l3 = graph.reshape %logits : (tensor<4x5xf32>) -> tensor<1x4x5xf32>
  %loss = kernel.fused "cross_entropy" kind("row") ins(%l3, %labels, %mask : tensor<1x4x5xf32>, tensor<1x4xi32>, tensor<1x4xf32>) {
  ^bb0(%a: tensor<1x4x5xf32>, %b: tensor<1x4xi32>, %c: tensor<1x4xf32>):
    %l = graph.cross_entropy %a, %b, %c : (tensor<1x4x5xf32>, tensor<1x4xi32>, tensor<1x4xf32>) -> tensor<f32>
    kernel.yield %l : tensor<f32>
  } : tensor<f32>
  %one = graph.fill {value = 1.0 : f64} : tensor<f32>
  %dl = kernel.fused "cross_entropy_grad" kind("row") ins(%one, %l3, %labels, %mask : tensor<f32>, tensor<1x4x5xf32>, tensor<1x4xi32>, tensor<1x4xf32>) {
  ^bb0(%s: tensor<f32>, %a: tensor<1x4x5xf32>, %b: tensor<1x4xi32>, %c: tensor<1x4xf32>):
    %g = graph.cross_entropy_grad %s, %a, %b, %c : (tensor<f32>, tensor<1x4x5xf32>, tensor<1x4xi32>, tensor<1x4xf32>) -> tensor<1x4x5xf32>
    kernel.yield %g : tensor<1x4x5xf32>
  } {overwrites = array<i64: 1>} : tensor<1x4x5xf32>
  %d2 = graph.reshape %dl : (tensor<1x4x5xf32>) -> tensor<4x5xf32>
)mlir" + extra + R"mlir(
  %dx = kernel.gemm %d2, %w {param = "head", role = "dgrad"} : (tensor<4x5xf32>, tensor<5x3xf32>) -> tensor<4x3xf32>
  return %loss, %dx : tensor<f32>, tensor<4x3xf32>
}
)mlir";
}

const char *kReadsLogitsAfter = R"mlir(
  %again = kernel.fused "twice" kind("elementwise") ins(%logits : tensor<4x5xf32>) {
  ^bb0(%a: tensor<4x5xf32>):
    %t = graph.add %a, %a : tensor<4x5xf32>
    kernel.yield %t : tensor<4x5xf32>
  } : tensor<4x5xf32>
)mlir";

template <typename OpT>
OpT find(mlir::ModuleOp m, llvm::StringRef name) {
  OpT found;
  m.walk([&](OpT op) {
    if constexpr (std::is_same_v<OpT, octet::kernel::FusedOp>) {
      if (op.getName() == name)
        found = op;
    } else if (op.getRole() == name) {
      found = op;
    }
  });
  return found;
}

TEST(Overwrites, PlanGivesTheGradientTheLogitsBytes) {
  auto ctx = octet::testing::makeContext();
  auto m = mlir::parseSourceString<mlir::ModuleOp>(module(""), ctx.get());
  ASSERT_TRUE(m);
  auto plan = octet::plan::planMemory(*m, 1);
  ASSERT_TRUE(succeeded(plan));
  const octet::plan::ProgramPlan *train = plan->program("train_microbatch");
  ASSERT_NE(train, nullptr);
  auto logits = find<octet::kernel::GemmOp>(*m, "fprop").getResult();
  auto grad = find<octet::kernel::FusedOp>(*m, "cross_entropy_grad");
  auto dgrad = find<octet::kernel::GemmOp>(*m, "dgrad");
  ASSERT_TRUE(train->valueSlots.count(logits));
  ASSERT_TRUE(train->valueSlots.count(grad.getResult(0)));
  EXPECT_EQ(train->valueSlots.lookup(grad.getResult(0)),
            train->valueSlots.lookup(logits));
  // One slot, from the fprop GEMM (step 0) to the dgrad that reads the
  // gradient (step 6).
  const octet::plan::Slot &slot =
      plan->slots[train->valueSlots.lookup(logits).first];
  EXPECT_EQ(slot.firstStep, 0);
  EXPECT_EQ(slot.lastStep, 6);
  EXPECT_NE(train->valueSlots.lookup(dgrad.getResult()).first,
            train->valueSlots.lookup(logits).first);
  // The values are the interpreter's, mark or not: loss and dx are those of
  // the module without it.
  auto unmarked = mlir::parseSourceString<mlir::ModuleOp>(module(""), ctx.get());
  ASSERT_TRUE(unmarked);
  find<octet::kernel::FusedOp>(*unmarked, "cross_entropy_grad")
      .removeOverwritesAttr();
  std::vector<Tensor> batch = {
      Tensor::fromFloats({4, 3}, {1, 0, 2, 0, 1, 1, 3, 1, 0, 1, 1, 1}),
      Tensor::fromFloats({5, 3}, {1, 2, 0, 0, 1, 1, 2, 0, 1, 1, 1, 0, 0, 0, 3})};
  std::vector<int64_t> labels = {1, 4, 0, 2};
  batch.push_back(Tensor::fromInts({1, 4}, labels));
  batch.push_back(Tensor::fromFloats({1, 4}, {1, 1, 0, 1}));
  octet::interp::VariableStore store;
  octet::interp::Interpreter a(*m), b(*unmarked);
  auto withMark = a.run("train_microbatch", batch, store);
  auto without = b.run("train_microbatch", batch, store);
  ASSERT_TRUE(bool(withMark));
  ASSERT_TRUE(bool(without));
  for (size_t r = 0; r < 2; ++r) {
    const Tensor &x = (*withMark)[r], &y = (*without)[r];
    ASSERT_EQ(x.numel(), y.numel());
    for (int64_t i = 0; i < x.numel(); ++i)
      EXPECT_EQ(x.f()[i], y.f()[i]) << "result " << r << " element " << i;
  }
}

TEST(Overwrites, PlanRefusesAReadOfTheOverwrittenLogits) {
  auto ctx = octet::testing::makeContext();
  auto m = mlir::parseSourceString<mlir::ModuleOp>(module(kReadsLogitsAfter),
                                                   ctx.get());
  ASSERT_TRUE(m);
  std::string message;
  ctx->getDiagEngine().registerHandler([&](mlir::Diagnostic &d) {
    message += d.str();
    return mlir::success();
  });
  EXPECT_TRUE(failed(octet::plan::planMemory(*m, 1)));
  EXPECT_NE(message.find("after train_microbatch:"), std::string::npos)
      << message;
  EXPECT_NE(message.find("overwrites"), std::string::npos) << message;
}

} // namespace
