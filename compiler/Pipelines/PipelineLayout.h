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

// Forward FLOPs of one microbatch through each part of the model, from the
// spec's model fields, sequence length and micro batch: a decoder layer's
// projections (grouped-query K and V), its causal attention (half the
// S × S scores), its MLP (three matrices gated, two otherwise); the
// embedding, a gather, as nothing; the final norm, LM head and loss: the
// head's matrix and a few operations per logit. Norms, RoPE and residual
// adds are left out (linear in the hidden size, against the matrices'
// quadratic). The backward is taken as twice the forward.
struct PipelineCostModel {
  double layer = 0;
  double embedding = 0;
  double head = 0;
};
PipelineCostModel pipelineCostModel(const spec::Spec &spec);

// Each chunk's forward FLOPs under `split` (layers a chunk): its layers,
// the embedding on the first, the head on the last.
std::vector<double> pipelineChunkCosts(const PipelineCostModel &model,
                                       const std::vector<int64_t> &split);

// The contiguous cut of `layers` into `chunks` (each at least one layer;
// chunk c on rank c mod `ranks`) whose largest chunk costs least, ties
// going to the cut whose most loaded rank costs least, then to the one of
// least summed squared chunk cost (the most even).
std::vector<int64_t> balancedLayerSplit(const PipelineCostModel &model,
                                        int64_t layers, int64_t chunks,
                                        int64_t ranks);

// Layers of each of the pipeline × virtual_stages chunks, in global chunk
// order: train.parallel.layer_split, or balancedLayerSplit under the cost
// model (the embedding rides with the first chunk and the final norm, LM
// head and loss with the last). Empty at pipeline 1.
std::vector<int64_t> pipelineLayerSplit(const spec::Spec &spec);

// The spec's schedule over its microbatches a step and the simulator's run
// of it (support/PipelineSchedule.h, unit F/B/W costs), which checked it and
// draws it; and the step the chunks' costs predict.
struct SimulatedSchedule {
  PipelineSchedule schedule;
  PipeSimulation simulation;
  std::vector<double> chunkCosts; // forward FLOPs a microbatch, per chunk
  PipePrediction prediction;
};
StatusOr<SimulatedSchedule> pipelineScheduleFromSpec(const spec::Spec &spec);

// Each chunk's rank, layers and share of the FLOPs, then the bubble and the
// step time (over one rank's) the chunks' costs predict; what `octet
// inspect` adds to a pipeline bundle from its spec. Empty at pipeline 1.
StatusOr<std::string> describePipelineCosts(const spec::Spec &spec);

// What `octet compile` prints of a pipeline layout: describePipelineCosts,
// then the schedule drawn rank × time by the simulator (unit F and B costs:
// its order, not its timing), each rank's peak stash of in-flight
// microbatches and the bubble equal chunks would have. Empty at pipeline 1.
StatusOr<std::string> describePipelineLayout(const spec::Spec &spec);

// An error naming the field and the fix for a pipeline layout the compiler
// does not make yet (FP8 scale state per stage, the ZB-H1 weight-gradient
// split, tied embeddings) or a schedule the simulator
// rejects; ok otherwise.
Status checkPipelineLayout(const spec::Spec &spec);

} // namespace octet

#endif
