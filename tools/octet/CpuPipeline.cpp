#include "tools/octet/CpuPipeline.h"

#include "compiler/Interpreter/PipelineStep.h"
#include "dialects/graph/GraphDialect.h"

#include "llvm/ADT/StringRef.h"

#include <thread>

namespace octet {

StatusOr<CpuPipelineStep> runCpuPipelineStep(
    mlir::ModuleOp module, const PipelineSchedule &schedule, int data,
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
  // The sum after the schedule counts on each rank holding zeros in the
  // accumulators of chunks it does not run. The step's first microbatch
  // overwrites only the rank's own, and the optimizer step no longer clears
  // them (step-local ones are not even in the store between steps), so
  // they are made zero here.
  for (auto var : module.getOps<graph::VariableOp>()) {
    if (!var.getSymName().starts_with("grad."))
      continue;
    auto type = var.getTensorType();
    auto dtype = interp::dtypeOf(type.getElementType());
    if (!dtype)
      return Status::error(llvm::toString(dtype.takeError()));
    for (int r = 0; r < world; ++r)
      variables[r].set(var.getSymName().str(),
                       interp::Tensor(*dtype, {type.getShape().begin(),
                                               type.getShape().end()}));
  }
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
      replicas[d] = interp::runPipelineStep(module, schedule,
                                            replicaInterpreters,
                                            replicaVariables, microbatches[d]);
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
  for (const auto &[name, value] : variables[0].all()) {
    if (!llvm::StringRef(name).starts_with("grad."))
      continue;
    interp::Tensor sum = value.clone();
    for (int r = 1; r < world; ++r) {
      const interp::Tensor &other = variables[r].get(name);
      for (int64_t e = 0; e < sum.numel(); ++e)
        sum.f()[e] += other.f()[e];
    }
    for (int r = 0; r < world; ++r)
      variables[r].set(name, sum);
  }
  for (int r = 0; r < world; ++r) {
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
