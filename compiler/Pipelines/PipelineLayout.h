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

// What the cost model takes of the GPU a bundle runs on: sustained rates
// of its kernels, not datasheet peaks. Each constant names the committed
// kernel-level measurement it comes from (H100 80GB HBM3, SXM).
struct GpuRates {
  // FLOP/s of the decoder layers' BF16 GEMMs: fprop, dgrad and wgrad of
  // four Llama 3 8B layers at 4096 tokens, 23.9 ms for 2.14e13 FLOPs
  // (`octet-profile` of bench/specs/pipeline/l8b4-bf16-pp1.pbtxt's bundle,
  // bench/results/h100/pipeline-2gpu-time/profile-l8b4-bf16-s4096.txt).
  double bf16GemmFlops = 896e12;
  // The LM head's BF16 GEMMs (8192 x 128256 x 4096): fprop, dgrad and wgrad
  // 27.6 ms for 2.58e13 FLOPs in profile-llama3-8b-8l-fp8.txt.
  double lmHeadGemmFlops = 935e12;
  // Tensor-scaled FP8 GEMMs (recipes "delayed" and "current"): fprop,
  // dgrad and wgrad of the 8 layers 54.2 ms for 8.58e13 FLOPs
  // (profile-llama3-8b-8l-fp8.txt).
  double fp8GemmFlops = 1582e12;
  // Block-scaled FP8 GEMMs (recipe "blockwise"): 64.0 ms for the same FLOPs
  // (blockwise-quantize/profile-llama3-8b-8l-fp8blockwise.txt).
  double fp8BlockwiseGemmFlops = 1341e12;
  // Causal attention, FLOPs as 4 heads x head_dim x S^2 / 2 forward, 2.5x
  // that backward: the Hopper kernels at sequence 4096
  // (attention-hopper-default/attention.json; 644 and 337 at 8192).
  double attentionForwardFlops = 578e12;
  double attentionBackwardFlops = 315.5e12;
  // HBM bytes/s of a streaming kernel: optimizer_adamw, 28 bytes a
  // parameter over 2.80e9 parameters in 28.2 ms
  // (profile-llama3-8b-8l-fp8.txt).
  double hbmBytesPerSecond = 2.78e12;
  // The loss's passes over the logits, as bytes a logit at that rate:
  // cross_entropy_0_rows 0.79 ms and cross_entropy_grad_0 2.44 ms over
  // 4096 x 128256 logits (profile-l8b4-bf16-s4096.txt; 1.55 and 3.92 ms
  // over twice the logits in profile-llama3-8b-8l-fp8.txt).
  double lossForwardBytesPerLogit = 4.2;
  double lossBackwardBytesPerLogit = 12.9;
  // The embedding gradient's initialisation each microbatch, bytes a table
  // entry: embedding_grad_0_init 1.70 ms over 128256 x 4096
  // (profile-llama3-8b-8l-fp8.txt).
  double embeddingGradInitBytesPerEntry = 9.0;
  // The optimizer step, bytes a parameter: AdamW reads the f32 parameter,
  // gradient and both moments and writes three back (28), the gradient norm
  // reads the gradient (4) and the accumulator is cleared (4); the
  // profile's optimizer_step, 38.2 ms over 2.80e9 parameters, is 38.
  double optimizerBytesPerParameter = 36;
  // Bytes/s of one activation send/recv between the two GPUs (NVLink 4):
  // not measured here; a third of the link's 450 GB/s a direction.
  double linkBytesPerSecond = 150e9;
};

// One microbatch through a part of the model on a GpuRates, in seconds.
// `weightGradient` is the part of `backward` that ZB-H1's weight-gradient
// function runs: the weight-gradient GEMMs.
struct PartTime {
  double forward = 0;
  double backward = 0;
  double weightGradient = 0;
};

// The estimated time of one microbatch through each part of the model, from
// the spec's model fields, sequence length, micro batch and recipe: a
// decoder layer's GEMMs (projections with grouped-query K and V, the MLP's
// three gated matrices or two) at the recipe's GEMM rate, backward twice
// the forward FLOPs; its causal attention (half the S x S scores) at the
// attention rates, backward 2.5x; its memory-bound work (norms, RoPE,
// SwiGLU, residual adds, and under an FP8 recipe the quantize and
// transposed copies of every GEMM input and output gradient) as bytes a
// token at HBM bandwidth. The embedding: its gather, and its gradient's
// scatter and initialisation. The last chunk's final norm, BF16 LM head and
// the loss's passes over the logits. Every GEMM weight is cast from its f32
// master each microbatch (4 bytes in; a BF16 copy, or FP8 and its
// transpose, 2 out). Besides, each part's parameters (for
// the optimizer step) and the activation a microbatch sends between ranks.
// Every layer costs the same: precision.first_last_layers_bf16 and
// bf16_patterns (BF16 layers inside an FP8 recipe) are not weighed yet.
struct PipelineCostModel {
  PartTime layer, embedding, head;
  double layerParameters = 0, embeddingParameters = 0, headParameters = 0;
  double optimizerSecondsPerParameter = 0;
  double transfer = 0;
};
PipelineCostModel pipelineCostModel(const spec::Spec &spec,
                                    const GpuRates &target = GpuRates());

// Each chunk's forward and backward of a microbatch under `split` (layers a
// chunk): its layers, the embedding on the first, the head on the last.
std::vector<PartTime> pipelineChunkTimes(const PipelineCostModel &model,
                                         const std::vector<int64_t> &split);

// Each chunk's forward plus backward a microbatch (seconds).
std::vector<double> pipelineChunkCosts(const PipelineCostModel &model,
                                       const std::vector<int64_t> &split);

// Each rank's optimizer step (seconds) under `split`, chunk c on rank
// c mod `ranks`.
std::vector<double> pipelineOptimizerTimes(const PipelineCostModel &model,
                                           const std::vector<int64_t> &split,
                                           int64_t ranks);

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
// draws it; and the step the chunks' times, the transfers and the ranks'
// optimizer steps predict (predictPipelineTimes).
struct SimulatedSchedule {
  PipelineSchedule schedule;
  PipeSimulation simulation;
  PipePrediction prediction;
  std::vector<PartTime> chunkTimes;   // seconds a microbatch, per chunk
  std::vector<double> optimizerTimes; // seconds, per rank
  double transfer = 0;                // seconds an activation a microbatch
};
StatusOr<SimulatedSchedule> pipelineScheduleFromSpec(const spec::Spec &spec);

// Each chunk's rank, layers, share of the time and estimated forward and
// backward, each rank's optimizer step and the transfer, then the bubble
// and the step time (over one rank's) they predict on an H100; what `octet
// inspect` adds to a pipeline bundle from its spec. Empty at pipeline 1.
StatusOr<std::string> describePipelineCosts(const spec::Spec &spec);

// What `octet compile` prints of a pipeline layout: describePipelineCosts,
// then the schedule drawn rank × time by the simulator (unit F and B costs:
// its order, not its timing), each rank's peak stash of in-flight
// microbatches and the bubble equal chunks would have. Empty at pipeline 1.
StatusOr<std::string> describePipelineLayout(const spec::Spec &spec);

// An error naming the field and the fix for a pipeline layout the compiler
// does not make yet (delayed scaling's amax all-reduce at pipeline × data,
// delayed scaling under ZB-H1, tied embeddings) or a schedule the
// simulator rejects; ok otherwise.
Status checkPipelineLayout(const spec::Spec &spec);

} // namespace octet

#endif
