// Every fusion pass keeps the reference interpreter's results on the tiny
// Llama: one train microbatch and one optimizer step (loss, gradient norm,
// every variable afterwards), twice so delayed FP8 scaling state is used.
//
// Tolerances: the kernel-level passes regroup the same ops in the same
// order, so results must be bit-identical (checked as relative error
// <= 1e-6 to leave room for nothing but float noise). octet-fuse-qkv turns
// three GEMMs into one, which reorders fp32 sums (dgrad adds over the
// concatenated output dimension) and gives the fused weight one FP8 scale
// where there were three: it is checked on the first step only, where every
// delayed scale is still its initial value, to relative error 1e-4.

#include "compiler/Interpreter/Interpreter.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Plan/MemoryPlan.h"
#include "compiler/Registration.h"
#include "compiler/Transforms/Fusion/GemmEpilogues.h"
#include "compiler/Transforms/Fusion/Passes.h"
#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/Precision.h"
#include "frontends/GraphImporter.h"
#include "spec/SpecReader.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

using namespace mlir;
using namespace octet;
using interp::Tensor;

namespace {

struct StepResult {
  float loss = 0, gradNorm = 0;
  std::map<std::string, Tensor> variables;
};

class FusionInterpreterTest : public ::testing::Test {
protected:
  void SetUp() override {
    registerCompilerDialects(registry);
    context = std::make_unique<MLIRContext>(registry,
                                            MLIRContext::Threading::DISABLED);
    context->loadAllAvailableDialects();
    auto loaded = spec::loadSpecFile(std::string(OCTET_SOURCE_DIR) +
                                     "/examples/tiny-llama.pbtxt");
    ASSERT_TRUE(bool(loaded)) << loaded.status().message();
    spec = *loaded;
    // Smaller batch: the same graph, a faster test.
    spec.mutable_train()->set_micro_batch_size(2);
    spec.mutable_train()->set_global_batch_size(2);
    spec.mutable_train()->set_seq_len(16);
  }

  // Import → autodiff → [qkv] → precision → layout → lower-to-kernel.
  OwningOpRef<ModuleOp> lowered(bool qkv) {
    auto module = importForwardGraph(*context, spec);
    EXPECT_TRUE(bool(module)) << module.status().message();
    PassManager pm(context.get());
    OctetAutodiffOptions autodiff;
    autodiff.lr = 1e-2; // a step large enough to move FP8 values
    pm.addPass(createOctetAutodiff(autodiff));
    pm.addPass(createCSEPass());
    if (qkv)
      pm.addPass(createOctetFuseQkv());
    OctetPrecisionOptions precision;
    precision.amaxHistoryLen = 16;
    pm.addPass(createOctetPrecision(precision));
    pm.addPass(createOctetLayout());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createOctetLowerToKernel());
    EXPECT_TRUE(succeeded(pm.run(**module)));
    return std::move(*module);
  }

  std::vector<Tensor> batch() {
    int64_t b = 2, s = 16;
    std::vector<int64_t> tokens, labels, positions;
    std::vector<float> mask;
    for (int64_t i = 0; i < b * s; ++i) {
      tokens.push_back((i * 37 + 11) % 256);
      labels.push_back((i * 53 + 7) % 256);
      positions.push_back(i % s);
      mask.push_back(i % 7 == 3 ? 0.0f : 1.0f);
    }
    return {Tensor::fromInts({b, s}, tokens), Tensor::fromInts({b, s}, labels),
            Tensor::fromFloats({b, s}, mask),
            Tensor::fromInts({b, s}, positions)};
  }

  // `microbatches` runs of the train step per optimizer step (the loss is
  // their sum); `tellFirst` false never tells the interpreter that a run
  // starts a step.
  std::vector<StepResult> run(ModuleOp module, interp::VariableStore store,
                              int steps, int microbatches = 1,
                              bool tellFirst = true) {
    std::vector<StepResult> out;
    interp::Interpreter interpreter(module);
    for (int step = 0; step < steps; ++step) {
      StepResult r;
      for (int micro = 0; micro < microbatches; ++micro) {
        interpreter.setFirstMicrobatch(tellFirst && micro == 0);
        interpreter.setLastMicrobatch(micro + 1 == microbatches);
        auto loss = interpreter.run("train_microbatch", batch(), store);
        EXPECT_TRUE(bool(loss)) << llvm::toString(loss.takeError());
        if (!loss)
          return out;
        r.loss += (*loss)[0].item();
      }
      auto opt = interpreter.run("optimizer_step", {}, store);
      EXPECT_TRUE(bool(opt)) << llvm::toString(opt.takeError());
      if (!opt)
        return out;
      r.gradNorm = (*opt)[0].item();
      r.variables = store.all();
      out.push_back(std::move(r));
    }
    return out;
  }

  static void runInitFunctions(ModuleOp module, interp::VariableStore &store) {
    auto names = module->getAttrOfType<ArrayAttr>("octet.init_functions");
    if (!names)
      return;
    interp::Interpreter interpreter(module);
    for (Attribute name : names) {
      auto out = interpreter.run(cast<StringAttr>(name).getValue(), {}, store);
      EXPECT_TRUE(bool(out)) << llvm::toString(out.takeError());
    }
  }

  static void expectClose(const Tensor &a, const Tensor &b, double rel,
                          const std::string &what) {
    ASSERT_EQ(a.shape(), b.shape()) << what;
    if (!isFloat(a.dtype()))
      return;
    double maxAbs = 0, maxDiff = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      maxAbs = std::max(maxAbs, double(std::fabs(a.f()[i])));
      maxDiff = std::max(maxDiff, double(std::fabs(a.f()[i] - b.f()[i])));
    }
    EXPECT_LE(maxDiff, rel * std::max(maxAbs, 1e-6)) << what;
  }

  // Runs `fuse` on the lowered module and compares two steps with the
  // unfused one.
  void checkKernelPass(const std::function<void(OpPassManager &)> &fuse,
                       const std::function<void(ModuleOp)> &inspect = {}) {
    OwningOpRef<ModuleOp> reference = lowered(false);
    OwningOpRef<ModuleOp> fused = lowered(false);
    PassManager pm(context.get());
    fuse(pm);
    ASSERT_TRUE(succeeded(pm.run(*fused)));
    ASSERT_TRUE(succeeded(verify(*fused)));
    if (inspect)
      inspect(*fused);
    fusion::expandGemmEpilogues(*reference);
    fusion::expandGemmEpilogues(*fused);
    interp::VariableStore store;
    store.initialize(*reference, 1234);
    auto want = run(*reference, store, 2);
    // State the fused step adds (FP8 weights the optimizer writes) starts
    // from the module's init functions.
    interp::VariableStore fusedStore = store;
    fusedStore.initialize(*fused, 1234);
    runInitFunctions(*fused, fusedStore);
    auto got = run(*fused, fusedStore, 2);
    ASSERT_EQ(want.size(), 2u);
    ASSERT_EQ(got.size(), 2u);
    for (int step = 0; step < 2; ++step) {
      EXPECT_NEAR(got[step].loss, want[step].loss,
                  1e-6 * std::fabs(want[step].loss));
      EXPECT_NEAR(got[step].gradNorm, want[step].gradNorm,
                  1e-6 * std::fabs(want[step].gradNorm));
      for (auto &[name, t] : want[step].variables) {
        auto it = got[step].variables.find(name);
        ASSERT_NE(it, got[step].variables.end()) << name;
        expectClose(it->second, t, 1e-6, name);
      }
    }
  }

  // For passes that regroup f32 sums: runs `fuse` on the lowered module
  // and compares one train microbatch (the loss and every gradient
  // accumulator, before the optimizer reads them) and the optimizer step's
  // gradient norm with the unfused module's, to `rel` of each tensor's
  // largest magnitude. The updated parameters are not compared: AdamW's
  // first step moves a weight by about lr · sign(g), so a gradient near 0
  // whose last bits the regrouping changes moves it by up to lr.
  void checkGradients(const std::function<void(OpPassManager &)> &fuse,
                      double rel) {
    OwningOpRef<ModuleOp> reference = lowered(false);
    OwningOpRef<ModuleOp> fused = lowered(false);
    PassManager pm(context.get());
    fuse(pm);
    ASSERT_TRUE(succeeded(pm.run(*fused)));
    ASSERT_TRUE(succeeded(verify(*fused)));
    fusion::expandGemmEpilogues(*reference);
    fusion::expandGemmEpilogues(*fused);
    interp::VariableStore want;
    want.initialize(*reference, 1234);
    interp::VariableStore got = want;
    got.initialize(*fused, 1234);
    runInitFunctions(*fused, got);
    float losses[2], norms[2];
    // The reference's accumulators after its train microbatch.
    std::map<std::string, Tensor> wantGrads;
    for (auto [i, m, store] :
         {std::tuple<int, ModuleOp, interp::VariableStore *>{0, *reference,
                                                             &want},
          {1, *fused, &got}}) {
      interp::Interpreter interpreter(m);
      interpreter.setFirstMicrobatch(true);
      interpreter.setLastMicrobatch(true);
      auto loss = interpreter.run("train_microbatch", batch(), *store);
      ASSERT_TRUE(bool(loss)) << llvm::toString(loss.takeError());
      losses[i] = (*loss)[0].item();
      if (i == 0)
        wantGrads = want.all();
      if (i == 1) {
        int compared = 0;
        for (auto &[name, t] : wantGrads) {
          if (!llvm::StringRef(name).starts_with("grad."))
            continue;
          auto all = got.all();
          auto it = all.find(name);
          ASSERT_NE(it, all.end()) << name;
          expectClose(it->second, t, rel, name);
          ++compared;
        }
        EXPECT_GT(compared, 0);
      }
      auto opt = interpreter.run("optimizer_step", {}, *store);
      ASSERT_TRUE(bool(opt)) << llvm::toString(opt.takeError());
      norms[i] = (*opt)[0].item();
    }
    EXPECT_NEAR(losses[1], losses[0], rel * std::fabs(losses[0]));
    EXPECT_NEAR(norms[1], norms[0], rel * std::fabs(norms[0]));
  }

  DialectRegistry registry;
  std::unique_ptr<MLIRContext> context;
  spec::Spec spec;
};

TEST_F(FusionInterpreterTest, LowerToKernelKeepsGraphResults) {
  // The lowered module against the graph-level train step.
  auto module = importForwardGraph(*context, spec);
  ASSERT_TRUE(bool(module));
  PassManager pm(context.get());
  OctetAutodiffOptions autodiff;
  autodiff.lr = 1e-2;
  pm.addPass(createOctetAutodiff(autodiff));
  pm.addPass(createCSEPass());
  OctetPrecisionOptions precision;
  precision.amaxHistoryLen = 16;
  pm.addPass(createOctetPrecision(precision));
  pm.addPass(createOctetLayout());
  pm.addPass(createCanonicalizerPass());
  ASSERT_TRUE(succeeded(pm.run(**module)));
  OwningOpRef<ModuleOp> kernels = lowered(false);
  fusion::expandGemmEpilogues(*kernels);
  interp::VariableStore store;
  store.initialize(**module, 1234);
  auto want = run(**module, store, 2);
  auto got = run(*kernels, store, 2);
  ASSERT_EQ(got.size(), 2u);
  for (int step = 0; step < 2; ++step) {
    EXPECT_EQ(got[step].loss, want[step].loss);
    for (auto &[name, t] : want[step].variables)
      expectClose(got[step].variables.at(name), t, 1e-6, name);
  }
}

TEST_F(FusionInterpreterTest, FuseLmHead) {
  checkKernelPass(
      [](OpPassManager &pm) { pm.addPass(createOctetFuseLmHead()); },
      [](ModuleOp module) {
        // The logits exist only inside the chunked kernel.
        auto train = module.lookupSymbol<func::FuncOp>("train_microbatch");
        int chunked = 0, headGemms = 0;
        train.walk([&](kernel::FusedOp f) {
          chunked += f.getName() == "lm_head_cross_entropy" &&
                     f->hasAttr("chunk_rows");
        });
        train.walk([&](kernel::GemmOp g) {
          headGemms += g.getParam() && *g.getParam() == "lm_head";
        });
        EXPECT_EQ(chunked, 1);
        EXPECT_EQ(headGemms, 0);
      });
}

// The head over 4 chunks of 8 of the 32 tokens: the loss, every gradient
// and the grad norm as the whole head gives them, up to the f32 regrouping
// of the wgrad's and the loss's sums by chunk.
TEST_F(FusionInterpreterTest, ChunkLmHeadKeepsLossAndGradients) {
  checkGradients(
      [](OpPassManager &pm) {
        pm.addPass(createOctetFuseEpilogue());
        OctetChunkLmHeadOptions options;
        options.chunkTokens = 8;
        pm.addPass(createOctetChunkLmHead(options));
      },
      1e-6);
}

TEST_F(FusionInterpreterTest, ChunkLmHeadStructure) {
  OwningOpRef<ModuleOp> module = lowered(false);
  PassManager pm(context.get());
  pm.addPass(createOctetFuseEpilogue());
  OctetChunkLmHeadOptions options;
  options.chunkTokens = 8;
  pm.addPass(createOctetChunkLmHead(options));
  ASSERT_TRUE(succeeded(pm.run(*module)));
        auto train = module->lookupSymbol<func::FuncOp>("train_microbatch");
        int fprops = 0, accumulating = 0, losses = 0, concats = 0;
        train.walk([&](kernel::GemmOp g) {
          if (g.getParam() && *g.getParam() == "lm_head") {
            fprops += g.getRole() == "fprop";
            accumulating += g.getRole() == "wgrad" && bool(g.getC());
            // fprop reads 8 rows of x, dgrad and wgrad 8 rows of dlogits.
            EXPECT_EQ(cast<RankedTensorType>(g.getA().getType()).getDimSize(0),
                      8);
          }
        });
        train.walk([&](graph::CrossEntropyOp ce) {
          losses += bool(ce.getBatchMask());
        });
        train.walk([&](graph::ConcatOp) { ++concats; });
        EXPECT_EQ(fprops, 4);
        // The head's accumulator, then each chunk's predecessor.
        EXPECT_EQ(accumulating, 4);
        EXPECT_EQ(losses, 4);
        EXPECT_GE(concats, 1);
}

TEST_F(FusionInterpreterTest, FuseEpilogue) {
  checkKernelPass([](OpPassManager &pm) { pm.addPass(createOctetFuseEpilogue()); });
}

TEST_F(FusionInterpreterTest, FuseRope) {
  checkKernelPass([](OpPassManager &pm) { pm.addPass(createOctetFuseRope()); });
}

TEST_F(FusionInterpreterTest, FuseNormQuantize) {
  checkKernelPass(
      [](OpPassManager &pm) { pm.addPass(createOctetFuseNormQuantize()); });
}

TEST_F(FusionInterpreterTest, FuseSwigluQuantize) {
  checkKernelPass(
      [](OpPassManager &pm) { pm.addPass(createOctetFuseSwigluQuantize()); });
}

TEST_F(FusionInterpreterTest, FuseAdamW) {
  checkKernelPass(
      [](OpPassManager &pm) { pm.addPass(createOctetFuseAdamW()); },
      [](ModuleOp module) {
        // The train step reads every FP8 weight the optimizer wrote: no
        // quantize of a parameter is left in it, and one multi-tensor
        // kernel updates and casts.
        auto train = module.lookupSymbol<func::FuncOp>("train_microbatch");
        int weightCasts = 0;
        train.walk([&](fp8::QuantizeOp q) {
          auto tensor = q->getAttrOfType<StringAttr>("tensor");
          weightCasts += tensor && tensor.getValue().ends_with(".w");
        });
        EXPECT_EQ(weightCasts, 0);
        EXPECT_TRUE(module->hasAttr("octet.init_functions"));
        auto optimizer = module.lookupSymbol<func::FuncOp>("optimizer_step");
        int batches = 0;
        optimizer.walk([&](kernel::FusedOp f) {
          batches += f.getKind() == "multi_tensor" &&
                     f.getName() == "optimizer.adamw";
        });
        EXPECT_EQ(batches, 1);
      });
}

TEST_F(FusionInterpreterTest, FuseElementwise) {
  checkKernelPass(
      [](OpPassManager &pm) { pm.addPass(createOctetFuseElementwise()); });
}

TEST_F(FusionInterpreterTest, AllKernelFusions) {
  checkKernelPass([](OpPassManager &pm) {
    findCompileStage("fused")->addPasses(pm, TrainingPipelineOptions());
  });
}

TEST_F(FusionInterpreterTest, AllKernelFusionsWithLmHeadOverTokenChunks) {
  auto fuse = [](OpPassManager &pm) {
    TrainingPipelineOptions options;
    options.chunkLmHead.chunkTokens = 8;
    findCompileStage("fused")->addPasses(pm, options);
  };
  checkGradients(fuse, 1e-6);
  // The memory plan takes the chunks: dx's pieces in its buffer, the wgrad
  // chain in one buffer.
  OwningOpRef<ModuleOp> module = lowered(false);
  PassManager pm(context.get());
  fuse(pm);
  ASSERT_TRUE(succeeded(pm.run(*module)));
  EXPECT_TRUE(succeeded(plan::planMemory(*module, 1)));
}

// With the chunks, the head's wgrad chain is still the only writer of its
// accumulator: its first GEMM writes it in a step's first microbatch, and
// the optimizer no longer clears it.
TEST_F(FusionInterpreterTest, OverwriteGradientsTakesTheChunkedHeadsChain) {
  OwningOpRef<ModuleOp> module = lowered(false);
  PassManager pm(context.get());
  TrainingPipelineOptions options;
  options.chunkLmHead.chunkTokens = 8;
  findCompileStage("fused")->addPasses(pm, options);
  pm.addPass(createOctetOverwriteGradients());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  int first = 0, chained = 0;
  module->walk([&](kernel::GemmOp g) {
    if (g.getParam() && *g.getParam() == "lm_head" && g.getRole() == "wgrad") {
      first += g->hasAttr("first_microbatch_overwrites");
      chained += bool(g.getC());
    }
  });
  EXPECT_EQ(first, 1);
  EXPECT_EQ(chained, 4);
  module->lookupSymbol<func::FuncOp>("optimizer_step").walk([](graph::StoreOp s) {
    EXPECT_NE(s.getVariable(), "grad.lm_head");
  });
  EXPECT_TRUE(succeeded(plan::planMemory(*module, 2)));
}

TEST_F(FusionInterpreterTest, AllKernelFusionsWithChunkedLmHead) {
  checkKernelPass([](OpPassManager &pm) {
    TrainingPipelineOptions options;
    options.chunkedLmHead = true;
    findCompileStage("fused")->addPasses(pm, options);
  });
}

// octet-overwrite-gradients, with two microbatches per step: the first
// writes the accumulators that the optimizer step no longer clears, so the
// losses, grad norms and every variable but those accumulators are the
// module's that clears them, bit for bit. Between steps the overwritten
// accumulators are step-local and gone from the store (their GPU slot holds
// other tensors); an interpreter never told which microbatch is first
// would add to what is no longer there, and must refuse, or the comparison
// would prove nothing.
TEST_F(FusionInterpreterTest, OverwriteGradientsInTheFirstMicrobatch) {
  OwningOpRef<ModuleOp> clearing = lowered(false);
  OwningOpRef<ModuleOp> overwriting = lowered(false);
  for (ModuleOp m : {*clearing, *overwriting}) {
    PassManager pm(context.get());
    findCompileStage("fused")->addPasses(pm, TrainingPipelineOptions());
    if (m == *overwriting)
      pm.addPass(createOctetOverwriteGradients());
    ASSERT_TRUE(succeeded(pm.run(m)));
    ASSERT_TRUE(succeeded(verify(m)));
  }
  auto count = [](ModuleOp m, int &overwrites, int &clears) {
    overwrites = clears = 0;
    m.walk([&](kernel::GemmOp g) {
      overwrites += g->hasAttr("first_microbatch_overwrites");
    });
    m.lookupSymbol<func::FuncOp>("optimizer_step").walk([&](graph::StoreOp s) {
      clears += s.getVariable().starts_with("grad.");
    });
  };
  int overwrites = 0, clears = 0, clearsBefore = 0, none = 0;
  count(*clearing, none, clearsBefore);
  count(*overwriting, overwrites, clears);
  EXPECT_EQ(none, 0);
  // Every linear's weight (4 layers of q, k, v, o, gate, up, down, and the
  // head) is its GEMM's alone; norms and the embedding keep their clearing
  // stores.
  EXPECT_EQ(overwrites, 4 * 7 + 1);
  EXPECT_EQ(clears, clearsBefore - overwrites);
  EXPECT_GT(clears, 0);

  auto train = [&](ModuleOp m, bool tellFirst) {
    interp::VariableStore store;
    store.initialize(m, 1234);
    runInitFunctions(m, store);
    return run(m, store, 2, /*microbatches=*/2, tellFirst);
  };
  auto want = train(*clearing, true);
  auto got = train(*overwriting, true);
  ASSERT_EQ(want.size(), 2u);
  ASSERT_EQ(got.size(), 2u);
  int gone = 0;
  for (int step = 0; step < 2; ++step) {
    EXPECT_EQ(got[step].loss, want[step].loss) << "step " << step;
    EXPECT_EQ(got[step].gradNorm, want[step].gradNorm) << "step " << step;
    for (auto &[name, t] : want[step].variables) {
      auto it = got[step].variables.find(name);
      if (llvm::StringRef(name).starts_with("grad.") &&
          it == got[step].variables.end()) {
        ++gone;
        continue;
      }
      ASSERT_NE(it, got[step].variables.end()) << name;
      expectClose(it->second, t, 0.0, name);
    }
  }
  EXPECT_EQ(gone, 2 * overwrites)
      << "the overwritten accumulators hold nothing between steps";

  interp::VariableStore store;
  store.initialize(*overwriting, 1234);
  runInitFunctions(*overwriting, store);
  interp::Interpreter untold(*overwriting);
  untold.setFirstMicrobatch(false);
  auto loss = untold.run("train_microbatch", batch(), store);
  ASSERT_FALSE(bool(loss))
      << "adding to a step-local accumulator the step has not written";
  EXPECT_NE(llvm::toString(loss.takeError()).find("step-local"),
            std::string::npos);
}

TEST_F(FusionInterpreterTest, FuseQkv) {
  OwningOpRef<ModuleOp> reference = lowered(false);
  OwningOpRef<ModuleOp> fused = lowered(true);
  interp::VariableStore store;
  store.initialize(*reference, 1234);
  // The fused module's store: the same values, parts concatenated.
  interp::VariableStore fusedStore;
  fusedStore.initialize(*fused, 1234);
  int merged = 0;
  fused->walk([&](graph::VariableOp var) {
    auto from = var->getAttrOfType<ArrayAttr>("fused_from");
    if (!from) {
      if (store.has(var.getSymName().str()))
        fusedStore.set(var.getSymName().str(),
                       store.get(var.getSymName().str()));
      return;
    }
    ++merged;
    std::vector<float> data;
    for (Attribute a : from) {
      const Tensor &part = store.get(cast<StringAttr>(a).str());
      data.insert(data.end(), part.f(), part.f() + part.numel());
    }
    fusedStore.set(var.getSymName().str(),
                   Tensor::fromFloats(
                       std::vector<int64_t>(var.getTensorType().getShape()),
                       data));
  });
  // q/k/v and gate/up of 4 layers, each with its gradient and two moments.
  EXPECT_EQ(merged, 4 * 2 * 4);
  auto want = run(*reference, store, 1);
  auto got = run(*fused, fusedStore, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_NEAR(got[0].loss, want[0].loss, 1e-4 * std::fabs(want[0].loss));
  EXPECT_NEAR(got[0].gradNorm, want[0].gradNorm,
              1e-4 * std::fabs(want[0].gradNorm));
  fused->walk([&](graph::VariableOp var) {
    auto from = var->getAttrOfType<ArrayAttr>("fused_from");
    auto split = var->getAttrOfType<DenseI64ArrayAttr>("split");
    if (!from)
      return;
    ASSERT_TRUE(split);
    const Tensor &whole = got[0].variables.at(var.getSymName().str());
    int64_t cols = whole.dim(1), row = 0;
    for (auto [a, rows] : llvm::zip(from, split.asArrayRef())) {
      std::vector<float> part(whole.f() + row * cols,
                              whole.f() + (row + rows) * cols);
      row += rows;
      expectClose(Tensor::fromFloats({rows, cols}, part),
                  want[0].variables.at(cast<StringAttr>(a).str()), 1e-4,
                  cast<StringAttr>(a).str());
    }
  });
}

} // namespace
