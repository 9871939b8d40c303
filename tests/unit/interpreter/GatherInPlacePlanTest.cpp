// ZeRO-1's in-place all-gather of an updated parameter part: the memory
// plan places the kernel's new part in this rank's part of the parameter's
// slot (the gather's send buffer is its receive buffer plus the rank's
// offset), and refuses the mark where the kernel's write would clobber an
// old value still read, or where there is no kernel result to place.

#include "tests/unit/interpreter/GradCheck.h"

#include "compiler/Plan/MemoryPlan.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

namespace {

// The optimizer step of one [8, 4] parameter sharded over 2 ranks: the
// rank's part updated by a kernel (MID between the kernel and the gather),
// all-gathered in place of GATHERED (the kernel's result, or another value)
// and stored.
std::string module(const std::string &mid,
                   const std::string &gathered = "%n") {
  return R"mlir(
graph.variable @w : tensor<8x4xf32> {init = "normal", init_std = 2.000000e-02 : f64, kind = "weight"}
func.func @optimizer_step() {
  %p = graph.load @w : tensor<8x4xf32>
  %pp = kernel.rank_part %p {group = "data", group_size = 2 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
  %n = kernel.fused "update" kind("elementwise") ins(%pp : tensor<4x4xf32>) {
  ^bb0(%a: tensor<4x4xf32>):
    %t = graph.add %a, %a : tensor<4x4xf32>
    kernel.yield %t : tensor<4x4xf32>
  } : tensor<4x4xf32>
)mlir" + mid +
         R"mlir(
  %g = kernel.collective )mlir" +
         gathered + R"mlir( {comm_stream, group = "data", group_size = 2 : i64, in_place, kind = "all_gather"} : (tensor<4x4xf32>) -> tensor<8x4xf32>
  graph.store %g, @w : tensor<8x4xf32>
  return
}
)mlir";
}

struct Planned {
  std::string error;
  // Of the kernel's result and the gather's: slot, byte offset, rank stride.
  unsigned partSlot = 0, wholeSlot = 0, weightSlot = 0;
  uint64_t partStride = 0, wholeStride = 0;
};

Planned plan(const std::string &text) {
  Planned out;
  auto ctx = octet::testing::makeContext();
  ctx->getDiagEngine().registerHandler([&](mlir::Diagnostic &d) {
    out.error += d.str();
    return mlir::success();
  });
  auto m = mlir::parseSourceString<mlir::ModuleOp>(text, ctx.get());
  if (!m) {
    out.error = "parse failed: " + out.error;
    return out;
  }
  auto planned = octet::plan::planMemory(*m, 1);
  if (failed(planned)) {
    if (out.error.empty())
      out.error = "failed without a message";
    return out;
  }
  const octet::plan::ProgramPlan *step = planned->program("optimizer_step");
  out.weightSlot = planned->variableSlots.lookup("w");
  m->walk([&](octet::kernel::CollectiveOp gather) {
    mlir::Value part = gather.getInputs()[0], whole = gather.getResults()[0];
    out.partSlot = step->valueSlots.lookup(part).first;
    out.wholeSlot = step->valueSlots.lookup(whole).first;
    out.partStride = step->rankStrides.lookup(part);
    out.wholeStride = step->rankStrides.lookup(whole);
  });
  return out;
}

TEST(GatherInPlacePlan, KernelWritesTheRanksPartOfTheParameter) {
  Planned p = plan(module(""));
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.partSlot, p.weightSlot);
  EXPECT_EQ(p.wholeSlot, p.weightSlot);
  // 4 x 4 floats a rank.
  EXPECT_EQ(p.partStride, 64u);
  EXPECT_EQ(p.wholeStride, 0u);
}

TEST(GatherInPlacePlan, RefusesWhenTheOldValueIsReadAfterTheKernel) {
  Planned p = plan(module(R"mlir(
  %old = kernel.copy %p : (tensor<8x4xf32>) -> tensor<8x4xf32>)mlir"));
  EXPECT_NE(p.error.find("in-place all-gather writes @w while its old value "
                         "is still read"),
            std::string::npos)
      << p.error;
}

TEST(GatherInPlacePlan, RefusesAnOperandThatIsNoKernelsResult) {
  Planned p = plan(module("", "%pp"));
  EXPECT_NE(p.error.find("needs each operand to be a kernel's result"),
            std::string::npos)
      << p.error;
}

} // namespace
