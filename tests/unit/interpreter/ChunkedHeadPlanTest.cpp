// The memory plan of the LM head over token chunks (octet-chunk-lm-head):
// a wgrad GEMM that accumulates into the previous chunk's result writes
// over it, so the chain needs one buffer, and each chunk's dgrad writes its
// rows of dx in the concatenation's buffer. A concatenation whose pieces
// the plan cannot place so is refused (the bundle has no kernel for it).

#include "tests/unit/interpreter/GradCheck.h"

#include "compiler/Plan/MemoryPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

namespace {

// Two chunks of 2 tokens: dgrad pieces and a wgrad chain. EXTRA is spliced
// in before the return.
std::string module(const std::string &extra) {
  return R"mlir(
func.func @train_microbatch(%g: tensor<4x5xf32>, %x: tensor<4x3xf32>, %w: tensor<5x3xf32>) -> (tensor<4x3xf32>, tensor<5x3xf32>) {
  %g0 = graph.slice %g {dim = 0 : i64, offset = 0 : i64} : (tensor<4x5xf32>) -> tensor<2x5xf32>
  %x0 = graph.slice %x {dim = 0 : i64, offset = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
  %dx0 = kernel.gemm %g0, %w {param = "head", role = "dgrad"} : (tensor<2x5xf32>, tensor<5x3xf32>) -> tensor<2x3xf32>
  %dw0 = kernel.gemm %g0, %x0 {param = "head", role = "wgrad", transpose_a} : (tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<5x3xf32>
  %g1 = graph.slice %g {dim = 0 : i64, offset = 2 : i64} : (tensor<4x5xf32>) -> tensor<2x5xf32>
  %x1 = graph.slice %x {dim = 0 : i64, offset = 2 : i64} : (tensor<4x3xf32>) -> tensor<2x3xf32>
  %dx1 = kernel.gemm %g1, %w {param = "head", role = "dgrad"} : (tensor<2x5xf32>, tensor<5x3xf32>) -> tensor<2x3xf32>
  %dw1 = kernel.gemm %g1, %x1 accumulate(%dw0) {param = "head", role = "wgrad", transpose_a} : (tensor<2x5xf32>, tensor<2x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
  %dx = graph.concat %dx0, %dx1 {dim = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
)mlir" + extra + R"mlir(
  return %dx, %dw1 : tensor<4x3xf32>, tensor<5x3xf32>
}
)mlir";
}

struct Chunks {
  llvm::SmallVector<octet::kernel::GemmOp> dgrads, wgrads;
  octet::graph::ConcatOp concat;
};

Chunks chunksOf(mlir::ModuleOp m) {
  Chunks c;
  m.walk([&](octet::kernel::GemmOp g) {
    (g.getRole() == "dgrad" ? c.dgrads : c.wgrads).push_back(g);
  });
  m.walk([&](octet::graph::ConcatOp op) { c.concat = op; });
  return c;
}

std::string planError(const std::string &text) {
  auto ctx = octet::testing::makeContext();
  auto m = mlir::parseSourceString<mlir::ModuleOp>(text, ctx.get());
  if (!m)
    return "parse failed";
  std::string message;
  ctx->getDiagEngine().registerHandler([&](mlir::Diagnostic &d) {
    message += d.str();
    return mlir::success();
  });
  if (succeeded(octet::plan::planMemory(*m, 1)))
    return "";
  return message.empty() ? "failed without a message" : message;
}

TEST(ChunkedHeadPlan, WgradChainAndDgradPiecesShareTheirBuffers) {
  auto ctx = octet::testing::makeContext();
  auto m = mlir::parseSourceString<mlir::ModuleOp>(module(""), ctx.get());
  ASSERT_TRUE(m);
  auto plan = octet::plan::planMemory(*m, 1);
  ASSERT_TRUE(succeeded(plan));
  const octet::plan::ProgramPlan *train = plan->program("train_microbatch");
  ASSERT_NE(train, nullptr);
  Chunks c = chunksOf(*m);
  ASSERT_EQ(c.dgrads.size(), 2u);
  ASSERT_EQ(c.wgrads.size(), 2u);
  ASSERT_TRUE(c.concat);
  auto at = [&](mlir::Value v) { return train->valueSlots.lookup(v); };
  // The second wgrad writes over the first's result: one slot, offset 0.
  EXPECT_EQ(at(c.wgrads[1].getResult()), at(c.wgrads[0].getResult()));
  // dx's pieces are its rows: the concatenation's slot at 0 and 2·3·4 B.
  auto whole = at(c.concat.getResult());
  EXPECT_EQ(at(c.dgrads[0].getResult()), std::make_pair(whole.first, 0ul));
  EXPECT_EQ(at(c.dgrads[1].getResult()), std::make_pair(whole.first, 24ul));
  EXPECT_EQ(plan->slots[whole.first].bytes, 48u);
  EXPECT_NE(whole.first, at(c.wgrads[0].getResult()).first);
}

TEST(ChunkedHeadPlan, AnAccumulatorReadLaterKeepsItsBuffer) {
  auto ctx = octet::testing::makeContext();
  const char *readsFirstChunk = R"mlir(
  %again = kernel.fused "twice" kind("elementwise") ins(%dw0 : tensor<5x3xf32>) {
  ^bb0(%a: tensor<5x3xf32>):
    %t = graph.add %a, %a : tensor<5x3xf32>
    kernel.yield %t : tensor<5x3xf32>
  } : tensor<5x3xf32>
)mlir";
  auto m = mlir::parseSourceString<mlir::ModuleOp>(module(readsFirstChunk),
                                                   ctx.get());
  ASSERT_TRUE(m);
  auto plan = octet::plan::planMemory(*m, 1);
  ASSERT_TRUE(succeeded(plan));
  const octet::plan::ProgramPlan *train = plan->program("train_microbatch");
  Chunks c = chunksOf(*m);
  EXPECT_NE(train->valueSlots.lookup(c.wgrads[1].getResult()).first,
            train->valueSlots.lookup(c.wgrads[0].getResult()).first);
}

TEST(ChunkedHeadPlan, AConcatenationOfPiecesReadElsewhereIsRefused) {
  const char *readsPiece = R"mlir(
  %again = kernel.fused "twice" kind("elementwise") ins(%dx0 : tensor<2x3xf32>) {
  ^bb0(%a: tensor<2x3xf32>):
    %t = graph.add %a, %a : tensor<2x3xf32>
    kernel.yield %t : tensor<2x3xf32>
  } : tensor<2x3xf32>
)mlir";
  std::string message = planError(module(readsPiece));
  EXPECT_NE(message.find("a concatenation is no kernel"), std::string::npos)
      << message;
  EXPECT_EQ(planError(module("")), "");
}

} // namespace
