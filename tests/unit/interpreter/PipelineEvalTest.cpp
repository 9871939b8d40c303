// Evaluation of a delayed-FP8 pipeline on the reference interpreter, the
// oracle for the GPU's forward-only lists: tiny-llama cut into two stages
// (the compile stages `octet compile` runs), its scale state moved off its
// initial values by two training forwards, then evaluated three ways from
// the same variables: one rank's @forward, the pipeline's forward-only
// schedule (interp::runPipelineStep, each chunk's @stage<s>_eval), and,
// as the run evaluation must not be, the training forwards.

#include "compiler/Interpreter/Interpreter.h"
#include "compiler/Interpreter/PipelineStep.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Registration.h"
#include "compiler/Transforms/Pipeline/Passes.h"
#include "frontends/GraphImporter.h"
#include "spec/SpecReader.h"
#include "support/PipelineSchedule.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace mlir;
using namespace octet;
using interp::Tensor;

namespace {

constexpr int64_t kRows = 2, kSeq = 16;

std::vector<Tensor> batch(int k) {
  std::vector<int64_t> tokens, labels, positions;
  std::vector<float> mask;
  for (int64_t i = 0; i < kRows * kSeq; ++i) {
    tokens.push_back((i * 37 + 11 + 5 * k) % 256);
    labels.push_back((i * 53 + 7 + 3 * k) % 256);
    positions.push_back(i % kSeq);
    mask.push_back(i % 7 == 3 ? 0.0f : 1.0f);
  }
  return {Tensor::fromInts({kRows, kSeq}, tokens),
          Tensor::fromInts({kRows, kSeq}, labels),
          Tensor::fromFloats({kRows, kSeq}, mask),
          Tensor::fromInts({kRows, kSeq}, positions)};
}

bool sameBits(const Tensor &a, const Tensor &b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype() || a.valid() != b.valid())
    return false;
  if (!a.valid())
    return true;
  size_t n = size_t(a.numel());
  return isFloat(a.dtype())
             ? std::memcmp(a.f(), b.f(), n * sizeof(float)) == 0
             : std::memcmp(a.i(), b.i(), n * sizeof(int64_t)) == 0;
}

// The first variable whose bits differ between the stores, or "".
std::string firstChanged(const interp::VariableStore &before,
                         const interp::VariableStore &after) {
  for (const auto &[name, t] : before.all())
    if (!after.has(name) || !sameBits(t, after.get(name)))
      return name;
  return "";
}

TEST(PipelineEval, DelayedStagesEvaluateAsOneRankAndWriteNoState) {
  DialectRegistry registry;
  registerCompilerDialects(registry);
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  auto loaded = spec::loadSpecFile(std::string(OCTET_SOURCE_DIR) +
                                   "/examples/tiny-llama.pbtxt");
  ASSERT_TRUE(bool(loaded)) << loaded.status().message();
  spec::Spec spec = *loaded;
  auto &train = *spec.mutable_train();
  train.set_micro_batch_size(kRows);
  train.set_global_batch_size(2 * kRows); // two microbatches
  train.set_seq_len(kSeq);
  train.mutable_precision()->set_recipe("delayed");
  train.mutable_precision()->set_amax_history_len(16);
  train.mutable_parallel()->set_pipeline(2);
  train.mutable_parallel()->set_schedule("1f1b");

  auto module = importForwardGraph(context, spec);
  ASSERT_TRUE(bool(module)) << module.status().message();
  TrainingPipelineOptions options = trainingOptionsFromSpec(spec);
  ASSERT_EQ(options.splitStages.layerSplit.size(), 2u);
  for (const CompileStage &stage : compileStages())
    if (stage.addPasses) {
      PassManager pm(&context);
      stage.addPasses(pm, options);
      ASSERT_TRUE(succeeded(pm.run(**module))) << stage.name;
    }
  ModuleOp m = **module;
  // Delayed scaling's forwards write state: each gets its evaluation copy.
  for (int s = 0; s < 2; ++s)
    ASSERT_TRUE(m.lookupSymbol<func::FuncOp>(stageEvalName(s)))
        << "no @" << stageEvalName(s);

  interp::VariableStore vars;
  vars.initialize(m, 7);
  interp::Interpreter interpreter(m);
  if (auto inits = m->getAttrOfType<ArrayAttr>("octet.init_functions"))
    for (StringRef name : inits.getAsValueRange<StringAttr>())
      ASSERT_TRUE(bool(interpreter.run(name, {}, vars))) << name.str();
  // Two training forwards of both chunks: the amax histories and scales
  // leave their initial values, so evaluation reads scales a step made.
  for (int k = 0; k < 2; ++k) {
    auto first = interpreter.run(stageForwardName(0), batch(10 + k), vars);
    ASSERT_TRUE(bool(first)) << llvm::toString(first.takeError());
    auto edges = m.lookupSymbol<func::FuncOp>(stageForwardName(0))
                     ->getAttrOfType<IntegerAttr>("octet.edge_results")
                     .getInt();
    std::vector<Tensor> args = batch(10 + k);
    args.insert(args.end(), first->begin(), first->begin() + edges);
    auto last = interpreter.run(stageForwardName(1), std::move(args), vars);
    ASSERT_TRUE(bool(last)) << llvm::toString(last.takeError());
  }
  interp::VariableStore initial;
  initial.initialize(m, 7);
  ASSERT_NE(firstChanged(initial, vars), "");

  // One rank's evaluation of the two microbatches.
  interp::VariableStore oneRank = vars;
  double want = 0;
  for (int k = 0; k < 2; ++k) {
    auto loss = interpreter.run("forward", batch(k), oneRank);
    ASSERT_TRUE(bool(loss)) << llvm::toString(loss.takeError());
    want += (*loss)[0].item();
  }
  EXPECT_EQ(firstChanged(vars, oneRank), "");

  // The pipeline's forward-only schedule: training's forwards and
  // activation sends, as bundle::forwardOnlyInstructions derives them.
  auto training = makePipelineSchedule(PipelineScheduleKind::OneFOneB, 2, 1, 2);
  ASSERT_TRUE(training.isOk()) << training.status().message();
  PipelineSchedule evaluation = *training;
  evaluation.forwardOnly = true;
  for (std::vector<PipeOp> &ops : evaluation.perRank) {
    std::vector<PipeOp> kept;
    for (PipeOp op : ops) {
      if (op.kind != PipeOpKind::F && op.kind != PipeOpKind::Comm)
        continue;
      std::vector<PipeTransfer> activations;
      for (const PipeTransfer &t : op.transfers)
        if (!t.gradient)
          activations.push_back(t);
      op.transfers = std::move(activations);
      if (op.kind == PipeOpKind::Comm && op.transfers.empty())
        continue;
      kept.push_back(std::move(op));
    }
    ops = std::move(kept);
  }
  ASSERT_TRUE(simulatePipeline(evaluation).isOk());
  std::vector<interp::VariableStore> rankVars(2, vars);
  std::vector<interp::Interpreter> ranks(2, interp::Interpreter(m));
  auto evaluated = interp::runPipelineStep(
      m, evaluation, {&ranks[0], &ranks[1]}, {&rankVars[0], &rankVars[1]},
      {batch(0), batch(1)});
  ASSERT_TRUE(evaluated.isOk()) << evaluated.status().message();
  EXPECT_EQ(evaluated->lossSum, want);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(firstChanged(vars, rankVars[size_t(r)]), "") << "rank " << r;

  // What evaluation must not run: the training forwards move the scale
  // state (and their losses use it as it was, one update behind the next).
  interp::VariableStore trained = vars;
  auto first = interpreter.run(stageForwardName(0), batch(0), trained);
  ASSERT_TRUE(bool(first)) << llvm::toString(first.takeError());
  std::string moved = firstChanged(vars, trained);
  EXPECT_NE(moved.find("fp8."), std::string::npos) << moved;
}

} // namespace
