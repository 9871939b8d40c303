#include "compiler/Pipelines/PipelineLayout.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <string>

namespace octet {

PipelineCostModel pipelineCostModel(const spec::Spec &spec,
                                    const GpuRates &target) {
  const spec::ModelSpec &m = spec.model();
  double tokens = double(spec.train().micro_batch_size()) *
                  double(spec.train().seq_len());
  double hidden = double(m.hidden_size());
  double headDim = double(m.head_dim() > 0 ? m.head_dim()
                                           : m.hidden_size() /
                                                 std::max<int64_t>(1, m.num_heads()));
  double queries = double(m.num_heads()) * headDim;
  double keys = double(m.has_num_kv_heads() ? m.num_kv_heads()
                                            : m.num_heads()) *
                headDim;
  double intermediate = double(m.intermediate_size());
  double vocab = double(m.vocab_size());
  bool gated = m.activation().empty() ? m.architecture() == "llama"
                                      : m.activation() == "swiglu";
  double mlpMatrices = gated ? 3 : 2;
  const std::string &recipe = spec.train().precision().recipe();
  bool fp8 = recipe == "delayed" || recipe == "current" || recipe == "blockwise";
  double gemmRate = recipe == "blockwise" ? target.fp8BlockwiseGemmFlops
                    : fp8                 ? target.fp8GemmFlops
                                          : target.bf16GemmFlops;
  double hbm = target.hbmBytesPerSecond;
  PipelineCostModel model;

  // Q and O are queries x hidden, K and V keys x hidden; a multiply-add is
  // two FLOPs; dgrad and wgrad each as many as the forward.
  double layerWeights = hidden * (2 * queries + 2 * keys) +
                        hidden * intermediate * mlpMatrices;
  double gemm = 2 * tokens * layerWeights / gemmRate;
  // Q.K^T and P.V over the causal half of the S x S scores; the backward's
  // five matmuls against two.
  double attentionFlops = 2 * tokens * double(spec.train().seq_len()) * queries;
  // BF16 elements a token read and written by the memory-bound work:
  // two RMSNorms (x in, y out; backward x and dy in, dx out), RoPE on Q and
  // K (in and out, both ways), the gated activation (gate and up in, one
  // out; backward those and dy in, two out; ungated: one in, one out, and
  // two in, one out), two residual adds (two in, one out, both ways).
  double activationIn = gated ? 3 * intermediate : 2 * intermediate;
  double activationBackward = gated ? 5 * intermediate : 3 * intermediate;
  double forwardElements = 2 * 2 * hidden + 2 * (queries + keys) +
                           activationIn + 2 * 3 * hidden;
  double backwardElements = 2 * 3 * hidden + 2 * (queries + keys) +
                            activationBackward + 2 * 3 * hidden;
  double forwardBytes = 2 * forwardElements, backwardBytes = 2 * backwardElements;
  if (fp8) {
    // Each FP8 GEMM operand is quantized from BF16 (2 bytes in, 1 out) with
    // its transposed copy for the other product (1 more): the forward's
    // inputs (two norm outputs, the attention output, the MLP's hidden),
    // the backward's output gradients (Q/K/V, O, the MLP's first and
    // second matrices).
    double mlpFirst = (mlpMatrices - 1) * intermediate;
    forwardBytes += 4 * (2 * hidden + queries + intermediate);
    backwardBytes += 4 * (queries + 2 * keys + hidden + mlpFirst + hidden);
  }
  // Each microbatch casts the f32 master weights its GEMMs read: 4 bytes
  // in, a BF16 copy or an FP8 one and its transpose (2) out.
  const double castBytesPerWeight = 6;
  model.layer.forward = gemm + attentionFlops / target.attentionForwardFlops +
                        tokens * forwardBytes / hbm +
                        layerWeights * castBytesPerWeight / hbm;
  model.layer.backward = 2 * gemm +
                         2.5 * attentionFlops / target.attentionBackwardFlops +
                         tokens * backwardBytes / hbm;
  // Its wgrad GEMMs; the dgrad GEMMs, attention and the memory-bound work
  // are the input gradient's (2 x H200, l8b4-bf16 at ZB-H1: W took 8.7 and
  // 9.7 ms a microbatch against B's 14.9 and 13.1).
  model.layer.weightGradient = gemm;
  model.layerParameters = layerWeights + 2 * hidden;

  // The gather reads an f32 row and writes BF16; its gradient reads dy and
  // adds into the f32 row (read and write), after the table's gradient is
  // initialised.
  model.embedding.forward = tokens * hidden * (4 + 2) / hbm;
  model.embedding.backward =
      tokens * hidden * (2 + 8) / hbm +
      vocab * hidden * target.embeddingGradInitBytesPerEntry / hbm;
  model.embeddingParameters = vocab * hidden;

  // The final norm (BF16 in and out; backward x, dy in, dx out), the LM
  // head's BF16 GEMMs, the loss's passes over the logits.
  double headGemm = 2 * tokens * hidden * vocab / target.lmHeadGemmFlops;
  double logits = tokens * vocab;
  model.head.forward = headGemm + tokens * 2 * 2 * hidden / hbm +
                       vocab * hidden * castBytesPerWeight / hbm +
                       logits * target.lossForwardBytesPerLogit / hbm;
  model.head.backward = 2 * headGemm + tokens * 3 * 2 * hidden / hbm +
                        logits * target.lossBackwardBytesPerLogit / hbm;
  model.head.weightGradient = headGemm;
  model.headParameters = vocab * hidden + hidden;

  model.optimizerSecondsPerParameter = target.optimizerBytesPerParameter / hbm;
  // One BF16 activation (or its gradient) a microbatch.
  model.transfer = tokens * hidden * 2 / target.linkBytesPerSecond;
  return model;
}

std::vector<PartTime> pipelineChunkTimes(const PipelineCostModel &model,
                                         const std::vector<int64_t> &split) {
  std::vector<PartTime> times;
  for (size_t c = 0; c < split.size(); ++c) {
    PartTime t{double(split[c]) * model.layer.forward,
               double(split[c]) * model.layer.backward,
               double(split[c]) * model.layer.weightGradient};
    // The embedding's gradient is a scatter, not a GEMM: the input
    // gradient's.
    if (c == 0) {
      t.forward += model.embedding.forward;
      t.backward += model.embedding.backward;
    }
    if (c + 1 == split.size()) {
      t.forward += model.head.forward;
      t.backward += model.head.backward;
      t.weightGradient += model.head.weightGradient;
    }
    times.push_back(t);
  }
  return times;
}

std::vector<double> pipelineChunkCosts(const PipelineCostModel &model,
                                       const std::vector<int64_t> &split) {
  std::vector<double> costs;
  for (const PartTime &t : pipelineChunkTimes(model, split))
    costs.push_back(t.forward + t.backward);
  return costs;
}

std::vector<double> pipelineOptimizerTimes(const PipelineCostModel &model,
                                           const std::vector<int64_t> &split,
                                           int64_t ranks) {
  ranks = std::max<int64_t>(1, ranks);
  std::vector<double> times(size_t(ranks), 0);
  for (size_t c = 0; c < split.size(); ++c) {
    double parameters = double(split[c]) * model.layerParameters +
                        (c == 0 ? model.embeddingParameters : 0) +
                        (c + 1 == split.size() ? model.headParameters : 0);
    times[c % size_t(ranks)] +=
        parameters * model.optimizerSecondsPerParameter;
  }
  return times;
}

std::vector<int64_t> balancedLayerSplit(const PipelineCostModel &model,
                                        int64_t layers, int64_t chunks,
                                        int64_t ranks) {
  if (chunks <= 1)
    return {layers};
  ranks = std::max<int64_t>(1, ranks);
  // Every layer costs the same, so a cut is its first and last chunks'
  // layers, the middle chunks sharing the rest as evenly as they can; the
  // one-layer remainders go to the middle chunks of the least loaded ranks
  // (chunk c is on rank c mod ranks).
  int64_t middle = chunks - 2;
  std::vector<int64_t> best;
  std::vector<double> bestKey;
  for (int64_t first = 1; first + middle + 1 <= layers; ++first)
    for (int64_t last = 1; first + middle + last <= layers; ++last) {
      int64_t rest = layers - first - last;
      if ((middle == 0) != (rest == 0))
        continue;
      std::vector<int64_t> split(size_t(chunks), middle ? rest / middle : 0);
      split.front() = first;
      split.back() = last;
      auto rankLoads = [&] {
        std::vector<double> loads(size_t(ranks), 0);
        std::vector<double> costs = pipelineChunkCosts(model, split);
        for (size_t c = 0; c < costs.size(); ++c)
          loads[c % size_t(ranks)] += costs[c];
        return loads;
      };
      for (int64_t extra = 0; extra < (middle ? rest % middle : 0); ++extra) {
        std::vector<double> loads = rankLoads();
        int64_t pick = -1;
        for (int64_t c = 1; c + 1 < chunks; ++c)
          if (split[size_t(c)] == rest / middle &&
              (pick < 0 || loads[size_t(c % ranks)] <
                               loads[size_t(pick % ranks)]))
            pick = c;
        ++split[size_t(pick)];
      }
      // Compared in order: the largest chunk, the largest rank, the summed
      // squared chunk costs (the most even cut).
      std::vector<double> costs = pipelineChunkCosts(model, split);
      std::vector<double> loads = rankLoads();
      double squares = 0;
      for (double cost : costs)
        squares += cost * cost;
      std::vector<double> key{*std::max_element(costs.begin(), costs.end()),
                              *std::max_element(loads.begin(), loads.end()),
                              squares};
      // Relative tolerance: equal cuts must tie despite rounding.
      auto better = [&] {
        for (size_t i = 0; i < key.size(); ++i) {
          double eps = 1e-9 * std::max(std::abs(key[i]), std::abs(bestKey[i]));
          if (key[i] < bestKey[i] - eps)
            return true;
          if (key[i] > bestKey[i] + eps)
            return false;
        }
        return false;
      };
      if (best.empty() || better()) {
        best = std::move(split);
        bestKey = std::move(key);
      }
    }
  return best;
}

std::vector<int64_t> pipelineLayerSplit(const spec::Spec &spec) {
  const spec::Parallel &parallel = spec.train().parallel();
  if (parallel.pipeline() <= 1)
    return {};
  if (parallel.layer_split_size() > 0)
    return {parallel.layer_split().begin(), parallel.layer_split().end()};
  int64_t chunks =
      parallel.pipeline() * std::max<int64_t>(1, parallel.virtual_stages());
  return balancedLayerSplit(pipelineCostModel(spec), spec.model().num_layers(),
                            chunks, parallel.pipeline());
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
  PipelineCostModel model = pipelineCostModel(spec);
  std::vector<int64_t> split = pipelineLayerSplit(spec);
  std::vector<PartTime> chunkTimes = pipelineChunkTimes(model, split);
  std::vector<double> optimizerTimes =
      pipelineOptimizerTimes(model, split, parallel.pipeline());
  std::vector<PipeStageTime> stages;
  double oneRankOptimizer = 0;
  for (const PartTime &t : chunkTimes)
    stages.push_back({t.forward, t.backward, t.weightGradient / t.backward});
  for (double t : optimizerTimes)
    oneRankOptimizer += t;
  StatusOr<PipePrediction> prediction = predictPipelineTimes(
      *schedule, stages, model.transfer, optimizerTimes, oneRankOptimizer);
  if (!prediction)
    return Status::error("train.parallel: the chunks' costs (model fields "
                         "and seq_len) give no prediction: " +
                         prediction.status().message());
  return SimulatedSchedule{std::move(*schedule), std::move(*simulated),
                           std::move(*prediction), std::move(chunkTimes),
                           std::move(optimizerTimes), model.transfer};
}

Status checkPipelineLayout(const spec::Spec &spec) {
  const spec::TrainSpec &train = spec.train();
  const spec::Parallel &parallel = train.parallel();
  int64_t pipeline = parallel.pipeline();
  if (pipeline <= 1)
    return Status::ok();
  std::string is = "train.parallel.pipeline is " + std::to_string(pipeline);
  // Delayed scaling updates an output gradient's scale in the input
  // gradient (B) that casts it, while the weight gradient (W) of an
  // earlier microbatch still reads the old one (octet-split-weight-
  // gradients refuses such state).
  if (parallel.schedule() == "zb-h1" && train.precision().recipe() == "delayed")
    return Status::error(
        "train.parallel.schedule is \"zb-h1\" and train.precision.recipe is "
        "\"delayed\": the output gradients' amax histories and scales that "
        "the input gradients update are still read by earlier microbatches' "
        "weight gradients; use recipe \"current\" or \"blockwise\", or "
        "schedule \"1f1b\"");
  if (spec.model().tie_word_embeddings())
    return Status::error(
        is + " and model.tie_word_embeddings is true: the embedding (first "
        "chunk) and the LM head (last chunk) would write one gradient on "
        "two ranks; set tie_word_embeddings false (or the pipeline to 1)");
  return pipelineScheduleFromSpec(spec).status();
}

StatusOr<std::string> describePipelineCosts(const spec::Spec &spec) {
  std::vector<int64_t> split = pipelineLayerSplit(spec);
  if (split.empty())
    return std::string();
  StatusOr<SimulatedSchedule> simulated = pipelineScheduleFromSpec(spec);
  if (!simulated)
    return simulated.status();
  const PipePrediction &prediction = simulated->prediction;
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  int64_t first = 0;
  for (size_t s = 0; s < split.size(); ++s) {
    out << "chunk " << s << " on rank " << s % simulated->schedule.ranks
        << ": "
        << (split[s] == 1 ? "layer " + std::to_string(first)
                          : "layers " + std::to_string(first) + "-" +
                                std::to_string(first + split[s] - 1));
    if (s == 0)
      out << " + embedding";
    if (s + 1 == split.size())
      out << " + final norm, LM head, loss";
    out << ", " << prediction.stageShare[s] * 100
        << std::setprecision(3) << "% of the time (forward "
        << simulated->chunkTimes[s].forward * 1e3 << " ms, backward "
        << simulated->chunkTimes[s].backward * 1e3 << " ms a microbatch)\n"
        << std::setprecision(1);
    first += split[s];
  }
  out << std::setprecision(3) << "optimizer step";
  for (size_t r = 0; r < simulated->optimizerTimes.size(); ++r)
    out << (r ? ", " : " ") << "rank " << r << " "
        << simulated->optimizerTimes[r] * 1e3 << " ms";
  out << "; activation transfer " << simulated->transfer * 1e3
      << " ms a microbatch\n";
  return out.str() +
         describePrediction(simulated->schedule, prediction,
                            "estimated H100 times, optimizer and transfers "
                            "included");
}

StatusOr<std::string> describePipelineLayout(const spec::Spec &spec) {
  StatusOr<std::string> costs = describePipelineCosts(spec);
  if (!costs || costs->empty())
    return costs;
  StatusOr<SimulatedSchedule> simulated = pipelineScheduleFromSpec(spec);
  if (!simulated)
    return simulated.status();
  return *costs + drawPipeline(simulated->schedule, simulated->simulation);
}

} // namespace octet
