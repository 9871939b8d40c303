// A value loaded from a variable and read after a store to that variable:
// the interpreter gives the reader the loaded (old) value, but on the GPU a
// load names the variable's bytes, which hold the stored value by then. The
// memory plan refuses such a program; a load made after the store, or a copy
// taken before it, is planned.

#include "tests/unit/interpreter/GradCheck.h"

#include "compiler/Plan/MemoryPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

namespace {

// A scale read by a cast, updated, and then BODY (which reads %s or %c).
std::string module(const std::string &body) {
  return R"mlir(
graph.variable @scale : tensor<4xf32> {init = "ones", kind = "state"}
func.func @train_microbatch(%x: tensor<4xf32>) -> (tensor<4xf32>) {
  %s = graph.load @scale : tensor<4xf32>
  %c = kernel.copy %s : (tensor<4xf32>) -> tensor<4xf32>
  %y = kernel.fused "cast" kind("elementwise") ins(%x, %s : tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %t = graph.mul %a, %b : tensor<4xf32>
    kernel.yield %t : tensor<4xf32>
  } : tensor<4xf32>
  %n = kernel.fused "update" kind("elementwise") ins(%y, %s : tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %t = graph.add %a, %b : tensor<4xf32>
    kernel.yield %t : tensor<4xf32>
  } : tensor<4xf32>
  graph.store %n, @scale : tensor<4xf32>
)mlir" + body + R"mlir(
}
)mlir";
}

// The reader's message, or "" when the plan succeeds.
std::string planError(const std::string &body) {
  auto ctx = octet::testing::makeContext();
  std::string message;
  ctx->getDiagEngine().registerHandler([&](mlir::Diagnostic &d) {
    message += d.str();
    return mlir::success();
  });
  auto m = mlir::parseSourceString<mlir::ModuleOp>(module(body), ctx.get());
  if (!m)
    return "parse failed: " + message;
  if (succeeded(octet::plan::planMemory(*m, 1)))
    return "";
  return message.empty() ? "failed without a message" : message;
}

TEST(LoadAfterStore, PlanRefusesAReadOfTheOldValueAfterTheStore) {
  std::string message = planError(R"mlir(
  %late = kernel.copy %s : (tensor<4xf32>) -> tensor<4xf32>
  return %late : tensor<4xf32>)mlir");
  EXPECT_NE(message.find("reads @scale as loaded before the graph.store"),
            std::string::npos)
      << message;
}

TEST(LoadAfterStore, PlanTakesACopyMadeBeforeTheStore) {
  EXPECT_EQ(planError(R"mlir(
  return %c : tensor<4xf32>)mlir"),
            "");
}

TEST(LoadAfterStore, PlanTakesALoadMadeAfterTheStore) {
  EXPECT_EQ(planError(R"mlir(
  %again = graph.load @scale : tensor<4xf32>
  %late = kernel.copy %again : (tensor<4xf32>) -> tensor<4xf32>
  return %late : tensor<4xf32>)mlir"),
            "");
}

} // namespace
