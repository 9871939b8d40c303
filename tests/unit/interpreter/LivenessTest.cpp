// The interpreter's memory follows liveness: a variable that a function
// overwrites leaves the store once the function has read it for the last
// time (so an optimizer step does not hold the old and the new state
// together), a variable it only reads stays, and the function's results
// and the stored values are what they were.

#include "tests/unit/interpreter/GradCheck.h"

#include "compiler/Interpreter/Interpreter.h"
#include "dialects/graph/GraphDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

using octet::interp::Tensor;

namespace {

const char *kModule = R"mlir(
graph.variable @w : tensor<4xf32> {kind = "weight", init = "normal", init_std = 1.0 : f64}
graph.variable @scale : tensor<4xf32> {kind = "norm", init = "normal", init_std = 1.0 : f64}
graph.variable @cache : tensor<4xbf16> {kind = "state", init = "ones"}
func.func @update(%x: tensor<4xf32>) -> tensor<4xf32> {
  %cache_reset = graph.fill {value = 0.5 : f64} : tensor<4xbf16>
  graph.store %cache_reset, @cache : tensor<4xbf16>
  %w = graph.load @w : tensor<4xf32>
  %s = graph.load @scale : tensor<4xf32>
  %ws = graph.mul %w, %s : tensor<4xf32>
  %new = graph.add %ws, %x : tensor<4xf32>
  graph.store %new, @w : tensor<4xf32>
  %again = graph.load @w : tensor<4xf32>
  %out = graph.add %again, %ws : tensor<4xf32>
  return %out : tensor<4xf32>
}
)mlir";

TEST(Liveness, OverwrittenVariablesLeaveTheStoreAfterTheirLastRead) {
  auto ctx = octet::testing::makeContext();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kModule, ctx.get());
  ASSERT_TRUE(module);
  octet::interp::VariableStore vars;
  vars.initialize(*module, 3);
  Tensor w0 = vars.get("w"), s = vars.get("scale");
  Tensor x = Tensor::fromFloats({4}, {0.5f, -1.0f, 2.0f, 0.25f});

  // Which variables the store holds after each op, by the op's name.
  std::map<std::string, std::string> held;
  octet::interp::Interpreter interpreter(*module);
  interpreter.setOpObserver(
      [&](mlir::Operation *op, octet::interp::ExecContext &c) {
        std::string key = op->getName().getStringRef().str();
        if (auto load = llvm::dyn_cast<octet::graph::LoadOp>(op))
          key += " @" + load.getVariable().str();
        if (auto store = llvm::dyn_cast<octet::graph::StoreOp>(op))
          key += " @" + store.getVariable().str();
        if (held.count(key))
          key += " (2)";
        std::string names;
        for (const char *v : {"w", "scale", "cache"})
          if (c.variables().has(v))
            names += std::string(names.empty() ? "" : " ") + v;
        held[key] = names;
      });
  auto result = interpreter.run("update", {x}, vars);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());

  // @cache is stored before any load: gone from the start until its store.
  EXPECT_EQ(held["graph.fill"], "w scale");
  EXPECT_EQ(held["graph.store @cache"], "w scale cache");
  // @w leaves after its one load ahead of the store (the observer of that
  // load still sees it) and is back with the new value; @scale is only
  // read and stays throughout.
  EXPECT_EQ(held["graph.load @w"], "w scale cache");
  EXPECT_EQ(held["graph.load @scale"], "scale cache");
  EXPECT_EQ(held["graph.mul"], "scale cache");
  EXPECT_EQ(held["graph.store @w"], "w scale cache");
  EXPECT_EQ(held["graph.load @w (2)"], "w scale cache");

  for (int i = 0; i < 4; ++i) {
    float ws = w0.f()[i] * s.f()[i], updated = ws + x.f()[i];
    EXPECT_EQ(vars.get("w").f()[i], updated) << i;
    EXPECT_EQ((*result)[0].f()[i], updated + ws) << i;
    EXPECT_EQ(vars.get("cache").f()[i], 0.5f) << i;
    EXPECT_EQ(vars.get("scale").f()[i], s.f()[i]) << i;
  }
}

} // namespace
