#include "tests/unit/interpreter/GradCheck.h"

#include "compiler/Pipelines/Pipelines.h"
#include "dialects/fp8/Fp8Dialect.h"
#include "dialects/graph/GraphDialect.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <cmath>
#include <random>
#include <sstream>

using namespace mlir;
using octet::interp::Tensor;

namespace octet::testing {

std::unique_ptr<MLIRContext> makeContext() {
  DialectRegistry registry;
  registry.insert<graph::GraphDialect, fp8::Fp8Dialect, kernel::KernelDialect,
                  func::FuncDialect>();
  auto ctx = std::make_unique<MLIRContext>(registry);
  ctx->loadAllAvailableDialects();
  return ctx;
}

OwningOpRef<ModuleOp> parseAndDifferentiate(MLIRContext &ctx,
                                            const std::string &text) {
  auto module = parseSourceString<ModuleOp>(text, &ctx);
  if (!module) {
    ADD_FAILURE() << "module does not parse:\n" << text;
    return nullptr;
  }
  PassManager pm(&ctx);
  buildTrainingPipeline(pm, TrainingPipelineOptions());
  if (failed(pm.run(*module))) {
    ADD_FAILURE() << "training pipeline failed";
    return nullptr;
  }
  return module;
}

std::string tensorType(const std::vector<int64_t> &shape,
                       const std::string &element) {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + element + ">";
}

static int64_t numel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string probeVariable(const std::vector<int64_t> &shape) {
  return "graph.variable @probe : " + tensorType({1, numel(shape)}) +
         " {kind = \"state\", init = \"normal\", init_std = 1.0 : f64}\n";
}

std::string probeLoss(const std::string &value,
                      const std::vector<int64_t> &shape) {
  std::string flat = tensorType({1, numel(shape)});
  std::ostringstream os;
  os << "  %probe_flat = graph.reshape " << value << " : ("
     << tensorType(shape) << ") -> " << flat << "\n"
     << "  %probe = graph.load @probe : " << flat << "\n"
     << "  %probe_dot = graph.linear %probe_flat, %probe : (" << flat << ", "
     << flat << ") -> tensor<1x1xf32>\n"
     << "  %loss = graph.reshape %probe_dot : (tensor<1x1xf32>) -> "
        "tensor<f32>\n"
     << "  return %loss : tensor<f32>\n";
  return os.str();
}

void checkGradients(ModuleOp module, const std::vector<Tensor> &args,
                    const GradCheckOptions &options) {
  interp::Interpreter interpreter(module);
  interp::VariableStore store;
  store.initialize(module, options.seed);
  const interp::VariableStore initial = store;

  auto trained = interpreter.run("train_microbatch", args, store);
  ASSERT_TRUE(bool(trained)) << llvm::toString(trained.takeError());
  auto lossAt = [&](const interp::VariableStore &vars) -> double {
    interp::VariableStore copy = vars;
    auto result = interpreter.run("forward", args, copy);
    if (!result) {
      ADD_FAILURE() << llvm::toString(result.takeError());
      return NAN;
    }
    return (*result)[0].item();
  };
  double loss0 = lossAt(initial);
  EXPECT_NEAR((*trained)[0].item(), loss0, 1e-5 * (1 + std::fabs(loss0)))
      << "@train_microbatch and @forward disagree on the loss";

  std::vector<std::string> params;
  for (auto var : module.getOps<graph::VariableOp>())
    if (var.isTrainable())
      params.push_back(var.getSymName().str());
  ASSERT_FALSE(params.empty());

  std::mt19937_64 rng(options.seed);
  std::normal_distribution<float> normal;
  float h = options.step;

  // Derivative along one random unit direction over all parameters.
  {
    std::map<std::string, std::vector<float>> direction;
    double norm2 = 0, gradNorm2 = 0;
    for (const std::string &name : params) {
      const Tensor &g = store.get("grad." + name);
      std::vector<float> &d = direction[name];
      d.resize(g.numel());
      for (int64_t i = 0; i < g.numel(); ++i) {
        d[i] = normal(rng);
        norm2 += double(d[i]) * d[i];
        gradNorm2 += double(g.f()[i]) * g.f()[i];
      }
    }
    double inv = 1.0 / std::sqrt(norm2);
    interp::VariableStore plus = initial, minus = initial;
    double predicted = 0;
    for (const std::string &name : params) {
      const Tensor &g = store.get("grad." + name);
      Tensor p = initial.get(name).clone(), m = initial.get(name).clone();
      for (int64_t i = 0; i < g.numel(); ++i) {
        double d = direction[name][i] * inv;
        predicted += double(g.f()[i]) * d;
        p.f()[i] += float(h * d);
        m.f()[i] -= float(h * d);
      }
      plus.set(name, p);
      minus.set(name, m);
    }
    double fd = (lossAt(plus) - lossAt(minus)) / (2 * h);
    EXPECT_NEAR(fd, predicted,
                options.directionalTol * std::sqrt(gradNorm2) +
                    1e-2 * std::fabs(predicted))
        << "derivative along a random unit direction";
  }

  // A few elements of each parameter: the largest gradients and random ones.
  for (const std::string &name : params) {
    const Tensor &g = store.get("grad." + name);
    std::vector<int64_t> order(g.numel());
    for (int64_t i = 0; i < g.numel(); ++i)
      order[i] = i;
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return std::fabs(g.f()[a]) > std::fabs(g.f()[b]);
    });
    double gmax = std::fabs(g.f()[order[0]]);
    std::vector<int64_t> picks(order.begin(),
                               order.begin() + std::min<int64_t>(
                                                   options.elementsPerParam / 2,
                                                   g.numel()));
    for (int i = 0; i < options.elementsPerParam / 2; ++i)
      picks.push_back(rng() % g.numel());
    for (int64_t index : picks) {
      interp::VariableStore plus = initial, minus = initial;
      Tensor p = initial.get(name).clone(), m = initial.get(name).clone();
      p.f()[index] += h;
      m.f()[index] -= h;
      plus.set(name, p);
      minus.set(name, m);
      double fd = (lossAt(plus) - lossAt(minus)) / (2 * h);
      double analytic = g.f()[index];
      EXPECT_NEAR(fd, analytic,
                  options.elementAbsTol * std::max(gmax, 1e-3) +
                      options.elementRelTol * std::fabs(analytic))
          << "d loss / d " << name << "[" << index << "]";
    }
  }
}

} // namespace octet::testing
