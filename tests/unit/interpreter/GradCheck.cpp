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

TrainingPipelineOptions f32Training() {
  TrainingPipelineOptions options;
  options.activations.activationDtype = "f32";
  return options;
}

OwningOpRef<ModuleOp> parseAndDifferentiate(MLIRContext &ctx,
                                            const std::string &text,
                                            const TrainingPipelineOptions &options) {
  auto module = parseSourceString<ModuleOp>(text, &ctx);
  if (!module) {
    ADD_FAILURE() << "module does not parse:\n" << text;
    return nullptr;
  }
  // The train step at the graph level: the stages after it (fusions,
  // kernels) are checked against it in tests of their own.
  PassManager pm(&ctx);
  for (const char *stage : {"autodiff", "activations"})
    findCompileStage(stage)->addPasses(pm, options);
  if (failed(pm.run(*module))) {
    ADD_FAILURE() << "autodiff and activations stages failed";
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

std::string llamaModule(const LlamaShape &c) {
  const int64_t B = c.batch, S = c.seq, D = c.hidden, Hq = c.heads,
                Hkv = c.kvHeads, Dh = c.headDim, F = c.ffn, V = c.vocab;
  auto T = [](std::vector<int64_t> s, const std::string &e = "f32") {
    return tensorType(s, e);
  };
  std::ostringstream m;
  m.precision(17);
  auto w = [&](const std::string &name, std::vector<int64_t> shape,
               const std::string &kind = "weight") {
    bool norm = kind == "norm";
    m << "graph.variable @" << name << " : " << T(shape) << " {kind = \""
      << kind << "\", init = \"normal\", init_std = "
      << std::to_string(norm ? c.normStd : c.stdDev) << " : f64}\n";
  };
  w("embed", {V, D}, "embedding");
  for (int l = 0; l < c.layers; ++l) {
    std::string p = "layers." + std::to_string(l) + ".";
    w(p + "attn_norm", {D}, "norm");
    w(p + "attn.wq", {Hq * Dh, D});
    w(p + "attn.wk", {Hkv * Dh, D});
    w(p + "attn.wv", {Hkv * Dh, D});
    w(p + "attn.wo", {D, Hq * Dh});
    w(p + "mlp_norm", {D}, "norm");
    w(p + "mlp.w_gate", {F, D});
    w(p + "mlp.w_up", {F, D});
    w(p + "mlp.w_down", {D, F});
  }
  w("final_norm", {D}, "norm");
  if (!c.tied)
    w("lm_head", {V, D});
  std::string h3 = T({B, S, D}), bsI = T({B, S}, "i32");
  m << "func.func @forward(%tokens: " << bsI << ", %labels: " << bsI
    << ", %mask: " << T({B, S}) << ", %pos: " << bsI
    << (c.docs ? ", %cu: tensor<?xi32>" : "") << ") -> tensor<f32> {\n";
  m << "  %embed = graph.load @embed : " << T({V, D}) << "\n";
  m << "  %h0 = graph.embedding %embed, %tokens : (" << T({V, D}) << ", "
    << bsI << ") -> " << h3 << "\n";
  std::string eps = std::to_string(c.eps), theta = std::to_string(c.theta);
  {
    std::ostringstream e;
    e.precision(17);
    e << std::scientific << c.eps;
    eps = e.str();
  }
  std::string h = "%h0";
  auto linear = [&](const std::string &out, const std::string &in,
                    const std::string &param, int64_t n, int64_t k) {
    std::string wv = "%w_" + out.substr(1);
    m << "  " << wv << " = graph.load @" << param << " : " << T({n, k})
      << "\n  " << out << " = graph.linear " << in << ", " << wv
      << " {param = \"" << param << "\"} : (" << T({B, S, k}) << ", "
      << T({n, k}) << ") -> " << T({B, S, n}) << "\n";
  };
  auto norm = [&](const std::string &out, const std::string &in,
                  const std::string &param) {
    m << "  %nw_" << out.substr(1) << " = graph.load @" << param << " : "
      << T({D}) << "\n  " << out << " = graph.rms_norm " << in << ", %nw_"
      << out.substr(1) << " {eps = " << eps << " : f64} : (" << h3 << ", "
      << T({D}) << ") -> " << h3 << "\n";
  };
  std::ostringstream sc;
  sc.precision(17);
  sc << std::scientific << 1.0 / std::sqrt(double(Dh));
  for (int l = 0; l < c.layers; ++l) {
    std::string p = "layers." + std::to_string(l) + ".";
    std::string s = "_" + std::to_string(l);
    norm("%n1" + s, h, p + "attn_norm");
    linear("%q" + s, "%n1" + s, p + "attn.wq", Hq * Dh, D);
    linear("%k" + s, "%n1" + s, p + "attn.wk", Hkv * Dh, D);
    linear("%v" + s, "%n1" + s, p + "attn.wv", Hkv * Dh, D);
    m << "  %q4" << s << " = graph.reshape %q" << s << " : ("
      << T({B, S, Hq * Dh}) << ") -> " << T({B, S, Hq, Dh}) << "\n";
    m << "  %k4" << s << " = graph.reshape %k" << s << " : ("
      << T({B, S, Hkv * Dh}) << ") -> " << T({B, S, Hkv, Dh}) << "\n";
    m << "  %v4" << s << " = graph.reshape %v" << s << " : ("
      << T({B, S, Hkv * Dh}) << ") -> " << T({B, S, Hkv, Dh}) << "\n";
    m << "  %qr" << s << " = graph.rope %q4" << s << ", %pos {theta = "
      << theta << " : f64} : (" << T({B, S, Hq, Dh}) << ", " << bsI
      << ") -> " << T({B, S, Hq, Dh}) << "\n";
    m << "  %kr" << s << " = graph.rope %k4" << s << ", %pos {theta = "
      << theta << " : f64} : (" << T({B, S, Hkv, Dh}) << ", " << bsI
      << ") -> " << T({B, S, Hkv, Dh}) << "\n";
    m << "  %o" << s << ", %lse" << s << " = graph.attention %qr" << s
      << ", %kr" << s << ", %v4" << s << (c.docs ? ", %cu" : "")
      << " {causal, scale = " << sc.str() << " : f64} : ("
      << T({B, S, Hq, Dh}) << ", " << T({B, S, Hkv, Dh}) << ", "
      << T({B, S, Hkv, Dh}) << (c.docs ? ", tensor<?xi32>" : "") << ") -> ("
      << T({B, S, Hq, Dh}) << ", " << T({B, Hq, S}) << ")\n";
    m << "  %o3" << s << " = graph.reshape %o" << s << " : ("
      << T({B, S, Hq, Dh}) << ") -> " << T({B, S, Hq * Dh}) << "\n";
    linear("%a" + s, "%o3" + s, p + "attn.wo", D, Hq * Dh);
    m << "  %h1" << s << " = graph.add " << h << ", %a" << s << " : " << h3
      << "\n";
    norm("%n2" + s, "%h1" + s, p + "mlp_norm");
    linear("%g" + s, "%n2" + s, p + "mlp.w_gate", F, D);
    linear("%u" + s, "%n2" + s, p + "mlp.w_up", F, D);
    m << "  %sw" << s << " = graph.swiglu %g" << s << ", %u" << s << " : "
      << T({B, S, F}) << "\n";
    linear("%d" + s, "%sw" + s, p + "mlp.w_down", D, F);
    m << "  %h2" << s << " = graph.add %h1" << s << ", %d" << s << " : " << h3
      << "\n";
    h = "%h2" + s;
  }
  norm("%fn", h, "final_norm");
  if (c.tied)
    m << "  %logits = graph.linear %fn, %embed {param = \"embed\"} : (" << h3
      << ", " << T({V, D}) << ") -> " << T({B, S, V}) << "\n";
  else
    linear("%logits", "%fn", "lm_head", V, D);
  m << "  %loss = graph.cross_entropy %logits, %labels, %mask : ("
    << T({B, S, V}) << ", " << bsI << ", " << T({B, S})
    << ") -> tensor<f32>\n  return %loss : tensor<f32>\n}\n";
  return m.str();
}

double relativeError(const Tensor &got, const Tensor &want) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    diff += double(got.f()[i] - want.f()[i]) * (got.f()[i] - want.f()[i]);
    norm += double(want.f()[i]) * want.f()[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

std::vector<Tensor> llamaBatch(int64_t batch, int64_t seq,
                               const std::vector<int64_t> &tokens,
                               const std::vector<int64_t> &labels) {
  std::vector<int64_t> positions(batch * seq);
  for (int64_t i = 0; i < batch * seq; ++i)
    positions[i] = i % seq;
  return {Tensor::fromInts({batch, seq}, tokens),
          Tensor::fromInts({batch, seq}, labels),
          Tensor::fromFloats({batch, seq},
                             std::vector<float>(batch * seq, 1.0f)),
          Tensor::fromInts({batch, seq}, positions)};
}

} // namespace octet::testing
