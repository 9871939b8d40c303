#include "tools/octet/CpuPipeline.h"

#include "compiler/Interpreter/PipelineStep.h"
#include "compiler/Transforms/Pipeline/Passes.h"

#include <thread>

namespace octet {

StatusOr<CpuPipelineStep> runCpuPipelineStep(
    mlir::ModuleOp module, const PipelineSchedule &schedule, int data,
    interp::RankExchange &exchange,
    std::vector<interp::Interpreter> &interpreters,
    std::vector<interp::VariableStore> &variables,
    const std::vector<std::vector<std::vector<interp::Tensor>>> &microbatches) {
  int world = schedule.ranks * data;
  if (int(interpreters.size()) != world || int(variables.size()) != world ||
      int(microbatches.size()) != data)
    return Status::error("a step of " + std::to_string(schedule.ranks) +
                         " pipeline x " + std::to_string(data) +
                         " data ranks was given " +
                         std::to_string(interpreters.size()) +
                         " interpreters and " +
                         std::to_string(microbatches.size()) + " replicas");
  if (exchange.layout().worldSize() != world)
    return Status::error("a step of " + std::to_string(world) +
                         " ranks was given an exchange of " +
                         std::to_string(exchange.layout().worldSize()));
  std::vector<StatusOr<interp::PipelineStepResult>> replicas(
      data, Status::error("not run"));
  std::vector<std::thread> threads;
  for (int d = 0; d < data; ++d)
    threads.emplace_back([&, d] {
      std::vector<interp::Interpreter *> replicaInterpreters;
      std::vector<interp::VariableStore *> replicaVariables;
      for (int p = 0; p < schedule.ranks; ++p) {
        replicaInterpreters.push_back(&interpreters[p * data + d]);
        replicaVariables.push_back(&variables[p * data + d]);
      }
      replicas[d] = interp::runPipelineStep(
          module, schedule, replicaInterpreters, replicaVariables,
          microbatches[d], data > 1 ? &exchange : nullptr);
    });
  for (std::thread &t : threads)
    t.join();
  CpuPipelineStep step;
  for (int d = 0; d < data; ++d) {
    if (!replicas[d])
      return Status::error("data-parallel replica " + std::to_string(d) +
                           ": " + replicas[d].status().message());
    step.lossSum += replicas[d]->lossSum;
  }
  std::vector<double> norms(world), lrs(world);
  Status optimized = interp::runRanks(exchange, [&](int r) -> Status {
    auto result = interpreters[r].run(rankOptimizerName(r / data), {},
                                      variables[r]);
    if (!result)
      return Status::error("rank " + std::to_string(r) + ": " +
                           llvm::toString(result.takeError()));
    norms[r] = (*result)[0].item();
    lrs[r] = (*result)[1].item();
    return Status::ok();
  });
  if (!optimized)
    return optimized;
  // The norm is joined across the pipeline group: every rank has it.
  step.gradNorm = norms[0];
  step.lr = lrs[0];
  return step;
}

} // namespace octet
