#include "tools/octet/CpuPipeline.h"

#include "compiler/Interpreter/PipelineStep.h"

#include "llvm/ADT/StringRef.h"

namespace octet {

StatusOr<CpuPipelineStep>
runCpuPipelineStep(mlir::ModuleOp module, const PipelineSchedule &schedule,
                   std::vector<interp::Interpreter> &interpreters,
                   std::vector<interp::VariableStore> &variables,
                   const std::vector<std::vector<interp::Tensor>> &microbatches) {
  StatusOr<interp::PipelineStepResult> stepped = interp::runPipelineStep(
      module, schedule, interpreters, variables, microbatches);
  if (!stepped)
    return stepped.status();
  int ranks = schedule.ranks;
  // The gradient accumulators, summed over the ranks in rank order.
  for (const auto &[name, value] : variables[0].all()) {
    if (!llvm::StringRef(name).starts_with("grad."))
      continue;
    interp::Tensor sum = value.clone();
    for (int r = 1; r < ranks; ++r) {
      const interp::Tensor &other = variables[r].get(name);
      for (int64_t e = 0; e < sum.numel(); ++e)
        sum.f()[e] += other.f()[e];
    }
    for (int r = 0; r < ranks; ++r)
      variables[r].set(name, sum);
  }
  CpuPipelineStep step;
  step.lossSum = stepped->lossSum;
  for (int r = 0; r < ranks; ++r) {
    auto result = interpreters[r].run("optimizer_step", {}, variables[r]);
    if (!result)
      return Status::error("rank " + std::to_string(r) + ": " +
                           llvm::toString(result.takeError()));
    if (r == 0) {
      step.gradNorm = (*result)[0].item();
      step.lr = (*result)[1].item();
    }
  }
  return step;
}

} // namespace octet
