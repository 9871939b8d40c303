#include "compiler/Interpreter/PipelineStep.h"

#include "compiler/Interpreter/Collectives.h"
#include "compiler/Transforms/Pipeline/Passes.h"


namespace octet::interp {

namespace {

using Key = std::pair<int, int>; // (stage, microbatch)

// One rank's run of its instruction list.
class RankRun {
public:
  RankRun(const PipelineSchedule &schedule, int rank, Interpreter &interpreter,
          VariableStore &variables,
          const std::vector<std::vector<Tensor>> &microbatches,
          const std::vector<std::string> &forwardNames,
          const std::vector<int64_t> &edgeResults,
          const std::vector<int64_t> &weightStashResults,
          PipeChannels &channels)
      : schedule_(schedule), rank_(rank), interpreter_(interpreter),
        variables_(variables), microbatches_(microbatches),
        forwardNames_(forwardNames), edgeResults_(edgeResults),
        weightStashResults_(weightStashResults), channels_(channels) {
    // As the runtime's PipelineExecutor: a chunk function's first run of
    // the step makes its accumulators (first_microbatch_overwrites), its
    // last runs the collectives marked last_microbatch, the data group's
    // gradient reduction.
    const std::vector<PipeOp> &ops = schedule_.perRank[rank_];
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i].kind != PipeOpKind::Comm) {
        std::string name = functionOf(ops[i]);
        firstRun_.try_emplace(name, i);
        lastRun_[name] = i;
      }
  }

  Status run() {
    const std::vector<PipeOp> &ops = schedule_.perRank[rank_];
    for (size_t i = 0; i < ops.size(); ++i) {
      const PipeOp &op = ops[i];
      if (op.kind != PipeOpKind::Comm) {
        std::string name = functionOf(op);
        interpreter_.setFirstMicrobatch(firstRun_[name] == i);
        interpreter_.setLastMicrobatch(lastRun_[name] == i);
      }
      Status st = op.kind == PipeOpKind::Comm ? communicate(op) : compute(op);
      if (!st)
        return Status::error("rank " + std::to_string(rank_) + " at " +
                             describePipeOp(op) + ": " + st.message());
    }
    return Status::ok();
  }

  double lossSum = 0;
  int peakStash = 0;

private:
  int stages() const { return schedule_.ranks * schedule_.virtualStages; }

  std::string functionOf(const PipeOp &op) const {
    int stage = op.chunk * schedule_.ranks + rank_;
    switch (op.kind) {
    case PipeOpKind::F:
      return forwardNames_[size_t(stage)];
    case PipeOpKind::B:
      return stageInputGradientName(stage);
    case PipeOpKind::W:
      return stageWeightGradientName(stage);
    default:
      return stageBackwardName(stage);
    }
  }

  StatusOr<std::vector<Tensor>> call(const std::string &name,
                                     std::vector<Tensor> args) {
    auto result = interpreter_.run(name, std::move(args), variables_);
    if (!result)
      return Status::error(llvm::toString(result.takeError()));
    return std::move(*result);
  }

  static std::vector<Tensor> take(std::map<Key, std::vector<Tensor>> &from,
                                  Key key) {
    auto it = from.find(key);
    if (it == from.end())
      return {};
    std::vector<Tensor> tensors = std::move(it->second);
    from.erase(it);
    return tensors;
  }

  Status compute(const PipeOp &op) {
    int stage = op.chunk * schedule_.ranks + rank_;
    Key key{stage, op.microbatch};
    std::vector<Tensor> args = microbatches_[op.microbatch];
    bool last = stage + 1 == stages();
    switch (op.kind) {
    case PipeOpKind::F: {
      if (stage > 0) {
        if (!activations_.count({stage - 1, op.microbatch}))
          return Status::error("its input activation was not received");
        for (Tensor &t : take(activations_, {stage - 1, op.microbatch}))
          args.push_back(std::move(t));
      }
      StatusOr<std::vector<Tensor>> out = call(functionOf(op), std::move(args));
      if (!out)
        return out.status();
      size_t at = 0;
      if (last)
        lossSum += (*out)[at++].item();
      // The edge tensors are the leading results after the loss.
      int64_t edges = edgeResults_[stage];
      if (out->size() < at + edges)
        return Status::error(stageForwardName(stage) +
                             " returns fewer results than its edge");
      std::vector<Tensor> edge(out->begin() + at, out->begin() + at + edges);
      // No backward reads a forward-only schedule's stash.
      if (!schedule_.forwardOnly) {
        stash_[key] =
            std::vector<Tensor>(out->begin() + at + edges, out->end());
        peakStash = std::max<int>(peakStash, int(stash_.size()));
      }
      if (!last)
        outgoing_[key] = std::move(edge);
      return Status::ok();
    }
    case PipeOpKind::B:
    case PipeOpKind::BW: {
      // B leaves the stash and the received gradient to its W, which runs
      // later on the same entry.
      bool split = op.kind == PipeOpKind::B;
      if (!stash_.count(key))
        return Status::error("its forward's stash is missing");
      for (Tensor &t : split ? stash_[key] : take(stash_, key))
        args.push_back(t);
      if (!last) {
        if (!gradients_.count({stage + 1, op.microbatch}))
          return Status::error("its output gradient was not received");
        std::vector<Tensor> received = take(gradients_, {stage + 1, op.microbatch});
        args.insert(args.end(), received.begin(), received.end());
        if (split)
          receivedForW_[key] = std::move(received);
      }
      StatusOr<std::vector<Tensor>> out =
          call(functionOf(op), std::move(args));
      if (!out)
        return out.status();
      if (split) {
        // The weight stash: the trailing results, W's.
        size_t forW = size_t(weightStashResults_[stage]);
        if (out->size() < forW)
          return Status::error(functionOf(op) +
                               " returns fewer results than its weight stash");
        weightStash_[key] =
            std::vector<Tensor>(out->end() - long(forW), out->end());
        out->resize(out->size() - forW);
      }
      if (stage > 0)
        outgoingGradients_[key] = std::move(*out);
      return Status::ok();
    }
    case PipeOpKind::W: {
      if (!stash_.count(key) || !weightStash_.count(key))
        return Status::error("runs before its B");
      for (std::vector<Tensor> tensors :
           {take(stash_, key), take(receivedForW_, key),
            take(weightStash_, key)})
        for (Tensor &t : tensors)
          args.push_back(std::move(t));
      StatusOr<std::vector<Tensor>> out =
          call(functionOf(op), std::move(args));
      return out ? Status::ok() : out.status();
    }
    case PipeOpKind::Comm:
      break;
    }
    return Status::ok();
  }

  // Sends first (they never wait here), then the receives in order.
  Status communicate(const PipeOp &op) {
    for (const PipeTransfer &t : op.transfers) {
      if (!t.send)
        continue;
      auto &from = t.gradient ? outgoingGradients_ : outgoing_;
      Key key{t.producerStage, t.microbatch};
      if (!from.count(key))
        return Status::error("sends a tensor its compute has not made");
      channels_.send(rank_, t.peer, t.gradient,
                     {t.producerStage, t.microbatch, take(from, key)});
    }
    for (const PipeTransfer &t : op.transfers) {
      if (t.send)
        continue;
      StatusOr<std::vector<Tensor>> got = channels_.receive(
          rank_, t.peer, t.gradient, t.producerStage, t.microbatch);
      if (!got)
        return got.status();
      (t.gradient ? gradients_
                  : activations_)[{t.producerStage, t.microbatch}] =
          std::move(*got);
    }
    return Status::ok();
  }

  const PipelineSchedule &schedule_;
  int rank_;
  Interpreter &interpreter_;
  VariableStore &variables_;
  const std::vector<std::vector<Tensor>> &microbatches_;
  const std::vector<std::string> &forwardNames_;
  const std::vector<int64_t> &edgeResults_;
  const std::vector<int64_t> &weightStashResults_;
  PipeChannels &channels_;
  std::map<std::string, size_t> firstRun_, lastRun_;
  std::map<Key, std::vector<Tensor>> stash_, outgoing_, outgoingGradients_,
      activations_, gradients_, receivedForW_, weightStash_;
};

} // namespace

StatusOr<PipelineStepResult>
runPipelineStep(mlir::ModuleOp module, const PipelineSchedule &schedule,
                const std::vector<Interpreter *> &interpreters,
                const std::vector<VariableStore *> &variables,
                const std::vector<std::vector<Tensor>> &microbatches,
                RankExchange *collectives) {
  int ranks = schedule.ranks;
  int stages = ranks * schedule.virtualStages;
  auto chunks = module->getAttrOfType<mlir::IntegerAttr>(
      "octet.pipeline_chunks");
  if (!chunks || chunks.getInt() != stages)
    return Status::error(
        "the module is cut into " +
        (chunks ? std::to_string(chunks.getInt()) : std::string("no")) +
        " pipeline chunks, but the schedule runs " + std::to_string(stages) +
        " (pipeline x virtual_stages); compile it with the same spec");
  if (int(interpreters.size()) < ranks || int(variables.size()) < ranks ||
      int(microbatches.size()) != schedule.microbatches)
    return Status::error("a pipeline step of " + std::to_string(ranks) +
                         " ranks and " +
                         std::to_string(schedule.microbatches) +
                         " microbatches was given " +
                         std::to_string(interpreters.size()) +
                         " interpreters and " +
                         std::to_string(microbatches.size()) +
                         " microbatches");
  std::vector<int64_t> edgeResults(stages, 0);
  // A forward-only schedule (evaluation) runs each chunk's evaluation
  // forward where octet-stage-eval-functions made one (its training
  // forward writes state), as the runtime's forward-only list does.
  std::vector<std::string> forwardNames;
  for (int s = 0; s < stages; ++s)
    forwardNames.push_back(
        schedule.forwardOnly &&
                module.lookupSymbol<mlir::func::FuncOp>(stageEvalName(s))
            ? stageEvalName(s)
            : stageForwardName(s));
  for (int s = 0; s < stages; ++s) {
    auto fn = module.lookupSymbol<mlir::func::FuncOp>(stageForwardName(s));
    auto edges = fn ? fn->getAttrOfType<mlir::IntegerAttr>(
                          "octet.edge_results")
                    : mlir::IntegerAttr();
    if (!edges)
      return Status::error("the module has no @" + stageForwardName(s) +
                           " with octet.edge_results");
    edgeResults[s] = edges.getInt();
  }
  // A schedule of separate B and W runs the split backward
  // (octet-split-weight-gradients), whose B returns W's stash last.
  bool splitBackward = false;
  for (const std::vector<PipeOp> &ops : schedule.perRank)
    for (const PipeOp &op : ops)
      splitBackward |= op.kind == PipeOpKind::B || op.kind == PipeOpKind::W;
  std::vector<int64_t> weightStashResults(stages, 0);
  for (int s = 0; splitBackward && s < stages; ++s) {
    auto fn =
        module.lookupSymbol<mlir::func::FuncOp>(stageInputGradientName(s));
    auto forW = fn ? fn->getAttrOfType<mlir::IntegerAttr>(
                         "octet.weight_stash_results")
                   : mlir::IntegerAttr();
    if (!forW ||
        !module.lookupSymbol<mlir::func::FuncOp>(stageWeightGradientName(s)))
      return Status::error(
          "the " + std::string(pipelineScheduleName(schedule.kind)) +
          " schedule runs input and weight gradients apart, but the module "
          "has no @" + stageInputGradientName(s) + " (octet.weight_stash_"
          "results) and @" + stageWeightGradientName(s) +
          "; compile it with the same spec (octet-split-weight-gradients)");
    weightStashResults[s] = forW.getInt();
  }
  PipeChannels channels;
  std::vector<RankRun> runs;
  runs.reserve(ranks);
  for (int r = 0; r < ranks; ++r)
    runs.emplace_back(schedule, r, *interpreters[r], *variables[r],
                      microbatches, forwardNames, edgeResults,
                      weightStashResults, channels);
  // The ranks run as the collectives' ranks do; a failing rank releases
  // the others' receives, which then report its error.
  RankExchange exchange(RankLayout{1, 1, ranks});
  Status ran = runRanks(exchange, [&](int r) {
    Status st = runs[r].run();
    if (!st) {
      std::string why = "rank " + std::to_string(r) + " failed: " +
                        st.message();
      channels.abort(why);
      if (collectives)
        collectives->abort("pipeline " + why);
    }
    return st;
  });
  if (!ran)
    return ran;
  PipelineStepResult result;
  // The loss lives on the last stage's rank.
  result.lossSum = runs[(stages - 1) % ranks].lossSum;
  for (const RankRun &run : runs)
    result.peakStash.push_back(run.peakStash);
  return result;
}

} // namespace octet::interp
