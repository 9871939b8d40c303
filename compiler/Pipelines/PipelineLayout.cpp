#include "compiler/Pipelines/PipelineLayout.h"

#include <algorithm>
#include <string>

namespace octet {

std::vector<int64_t> pipelineLayerSplit(const spec::Spec &spec) {
  const spec::Parallel &parallel = spec.train().parallel();
  if (parallel.pipeline() <= 1)
    return {};
  if (parallel.layer_split_size() > 0)
    return {parallel.layer_split().begin(), parallel.layer_split().end()};
  int64_t chunks =
      parallel.pipeline() * std::max<int64_t>(1, parallel.virtual_stages());
  return std::vector<int64_t>(chunks, spec.model().num_layers() / chunks);
}

StatusOr<SimulatedSchedule> pipelineScheduleFromSpec(const spec::Spec &spec) {
  const spec::TrainSpec &train = spec.train();
  const spec::Parallel &parallel = train.parallel();
  PipelineScheduleKind kind = PipelineScheduleKind::OneFOneB;
  if (parallel.schedule() == "interleaved")
    kind = PipelineScheduleKind::Interleaved;
  else if (parallel.schedule() == "zb-h1")
    kind = PipelineScheduleKind::ZeroBubbleH1;
  int64_t data = std::max<int64_t>(1, parallel.data());
  int64_t microbatches =
      train.global_batch_size() / (train.micro_batch_size() * data);
  StatusOr<PipelineSchedule> schedule = makePipelineSchedule(
      kind, static_cast<int>(parallel.pipeline()),
      static_cast<int>(std::max<int64_t>(1, parallel.virtual_stages())),
      static_cast<int>(microbatches));
  if (!schedule)
    return Status::error("train.parallel: " + schedule.status().message());
  // A schedule that deadlocks or runs an op twice never reaches a bundle.
  StatusOr<PipeSimulation> simulated = simulatePipeline(*schedule);
  if (!simulated)
    return Status::error("train.parallel.schedule \"" + parallel.schedule() +
                         "\" fails the schedule simulator: " +
                         simulated.status().message());
  return SimulatedSchedule{std::move(*schedule), std::move(*simulated)};
}

Status checkPipelineLayout(const spec::Spec &spec) {
  const spec::TrainSpec &train = spec.train();
  const spec::Parallel &parallel = train.parallel();
  int64_t pipeline = parallel.pipeline();
  if (pipeline <= 1)
    return Status::ok();
  std::string is = "train.parallel.pipeline is " + std::to_string(pipeline);
  // Delayed scaling's amaxes agree over the data group through an
  // all-reduce in the microbatch, a collective the stage cut does not
  // take yet (as the gradient reduction).
  if (train.precision().recipe() == "delayed" && parallel.data() > 1)
    return Status::error(
        is + ", train.parallel.data is " + std::to_string(parallel.data()) +
        " and train.precision.recipe is \"delayed\": its amax all-reduce over "
        "the data group is not cut into pipeline stages yet; use recipe "
        "\"current\" or \"blockwise\" (no amax collective), or data 1");
  if (parallel.schedule() == "zb-h1")
    return Status::error(
        "train.parallel.schedule is \"zb-h1\": the compiler does not split "
        "the backward into input- and weight-gradient functions yet; set "
        "schedule \"1f1b\" (or \"interleaved\" with virtual_stages 2)");
  if (spec.model().tie_word_embeddings())
    return Status::error(
        is + " and model.tie_word_embeddings is true: the embedding (first "
        "chunk) and the LM head (last chunk) would write one gradient on "
        "two ranks; set tie_word_embeddings false (or the pipeline to 1)");
  return pipelineScheduleFromSpec(spec).status();
}

StatusOr<std::string> describePipelineLayout(const spec::Spec &spec) {
  std::vector<int64_t> split = pipelineLayerSplit(spec);
  if (split.empty())
    return std::string();
  StatusOr<SimulatedSchedule> simulated = pipelineScheduleFromSpec(spec);
  if (!simulated)
    return simulated.status();
  const PipelineSchedule &schedule = simulated->schedule;
  std::string out;
  int64_t first = 0;
  for (size_t s = 0; s < split.size(); ++s) {
    out += "chunk " + std::to_string(s) + " on rank " +
           std::to_string(s % schedule.ranks) + ": " +
           (split[s] == 1 ? "layer " + std::to_string(first)
                          : "layers " + std::to_string(first) + "-" +
                                std::to_string(first + split[s] - 1));
    if (s == 0)
      out += " + embedding";
    if (s + 1 == split.size())
      out += " + final norm, LM head, loss";
    out += "\n";
    first += split[s];
  }
  return out + drawPipeline(schedule, simulated->simulation);
}

} // namespace octet
