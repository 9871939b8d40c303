#ifndef OCTET_COMPILER_PIPELINES_PIPELINELAYOUT_H
#define OCTET_COMPILER_PIPELINES_PIPELINELAYOUT_H

// train.parallel's pipeline layout as the compiler reads it: the layers of
// each chunk, the schedule's instruction lists, and what the compiler can
// not make yet.

#include "spec/spec.pb.h"
#include "support/PipelineSchedule.h"
#include "support/Status.h"

#include <cstdint>
#include <vector>

namespace octet {

// Layers of each of the pipeline × virtual_stages chunks, in global chunk
// order: train.parallel.layer_split, or equal chunks (the cost model: every
// layer costs the same; the embedding rides with the first chunk and the
// final norm, LM head and loss with the last). Empty at pipeline 1.
std::vector<int64_t> pipelineLayerSplit(const spec::Spec &spec);

// The spec's schedule over its microbatches a step and the simulator's run
// of it (support/PipelineSchedule.h, unit F/B/W costs), which checked it.
struct SimulatedSchedule {
  PipelineSchedule schedule;
  PipeSimulation simulation;
};
StatusOr<SimulatedSchedule> pipelineScheduleFromSpec(const spec::Spec &spec);

// What `octet compile` prints of a pipeline layout: each chunk's rank and
// layers, the schedule drawn rank × time by the simulator (unit F and B
// costs), each rank's peak stash of in-flight microbatches and the
// predicted bubble. Empty at pipeline 1.
StatusOr<std::string> describePipelineLayout(const spec::Spec &spec);

// An error naming the field and the fix for a pipeline layout the compiler
// does not make yet (FP8 scale state per stage, the ZB-H1 weight-gradient
// split, tied embeddings) or a schedule the simulator
// rejects; ok otherwise.
Status checkPipelineLayout(const spec::Spec &spec);

} // namespace octet

#endif
