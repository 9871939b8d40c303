#include "support/PipelineSchedule.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

namespace octet {

namespace {

struct Shape {
  int ranks, virtualStages, microbatches;
  int stages() const { return ranks * virtualStages; }
  int stageOf(int rank, int chunk) const { return chunk * ranks + rank; }
  int rankOf(int stage) const { return stage % ranks; }
};

PipeOp compute(PipeOpKind kind, int chunk, int microbatch) {
  PipeOp op;
  op.kind = kind;
  op.chunk = chunk;
  op.microbatch = microbatch;
  return op;
}

bool isBackward(PipeOpKind kind) {
  return kind == PipeOpKind::B || kind == PipeOpKind::BW;
}

// The receive a compute op needs before it can run, if its input comes from
// another rank.
bool inputTransfer(const Shape &shape, int rank, const PipeOp &op,
                   PipeTransfer &out) {
  int stage = shape.stageOf(rank, op.chunk);
  int from;
  if (op.kind == PipeOpKind::F && stage > 0)
    from = stage - 1;
  else if (isBackward(op.kind) && stage + 1 < shape.stages())
    from = stage + 1;
  else
    return false;
  if (shape.rankOf(from) == rank)
    return false;
  out = {false, op.kind != PipeOpKind::F, shape.rankOf(from), from,
         op.microbatch};
  return true;
}

// The send of a compute op's output to the rank that consumes it.
bool outputTransfer(const Shape &shape, int rank, const PipeOp &op,
                    PipeTransfer &out) {
  int stage = shape.stageOf(rank, op.chunk);
  int to;
  if (op.kind == PipeOpKind::F && stage + 1 < shape.stages())
    to = stage + 1;
  else if (isBackward(op.kind) && stage > 0)
    to = stage - 1;
  else
    return false;
  if (shape.rankOf(to) == rank)
    return false;
  out = {true, op.kind != PipeOpKind::F, shape.rankOf(to), stage,
         op.microbatch};
  return true;
}

// After each step (one compute op, or with interleaving a forward and a
// backward), one group: the sends of what the step produced and the receives
// the next step needs. Issuing them together is what keeps neighbours that
// both send before they receive out of a deadlock; with interleaving the
// wrap-around from the last rank to the first makes a cycle that only
// receiving the next backward's gradient together with the next forward's
// activation breaks (Megatron's send_forward_backward_recv_forward_backward).
using Steps = std::vector<std::vector<PipeOp>>;

std::vector<PipeOp> withCommunication(const Shape &shape, int rank,
                                      const Steps &steps) {
  std::vector<PipeOp> ops;
  auto receivesOf = [&](const std::vector<PipeOp> &step, PipeOp &group) {
    PipeTransfer transfer;
    for (const PipeOp &op : step)
      if (inputTransfer(shape, rank, op, transfer))
        group.transfers.push_back(transfer);
  };
  PipeOp first = compute(PipeOpKind::Comm, 0, 0);
  if (!steps.empty())
    receivesOf(steps.front(), first);
  if (!first.transfers.empty())
    ops.push_back(first);
  for (size_t i = 0; i < steps.size(); ++i) {
    PipeOp group = compute(PipeOpKind::Comm, 0, 0);
    PipeTransfer transfer;
    for (const PipeOp &op : steps[i]) {
      ops.push_back(op);
      if (outputTransfer(shape, rank, op, transfer))
        group.transfers.push_back(transfer);
    }
    if (i + 1 < steps.size())
      receivesOf(steps[i + 1], group);
    if (!group.transfers.empty())
      ops.push_back(group);
  }
  return ops;
}

// Megatron's order: forward k runs chunk (k / P) % V of microbatch
// (k / PV)·P + k % P; backward k the same with the chunks reversed. Warmup
// 2(P − rank − 1) + (V − 1)·P forwards, then one forward and one backward
// in turn, then the remaining backwards. With V = 1 this is plain 1F1B.
Steps interleavedOrder(const Shape &shape, int rank) {
  int p = shape.ranks, v = shape.virtualStages;
  int total = shape.microbatches * v;
  auto forward = [&](int k) {
    return compute(PipeOpKind::F, (k / p) % v, (k / (p * v)) * p + k % p);
  };
  auto backward = [&](int k) {
    return compute(PipeOpKind::BW, v - 1 - (k / p) % v,
                   (k / (p * v)) * p + k % p);
  };
  int warmup = v == 1 ? p - rank - 1 : 2 * (p - rank - 1) + (v - 1) * p;
  warmup = std::min(warmup, total);
  Steps steps;
  for (int k = 0; k < warmup; ++k)
    steps.push_back({forward(k)});
  for (int k = 0; k < total - warmup; ++k) {
    if (v == 1) {
      steps.push_back({forward(warmup + k)});
      steps.push_back({backward(k)});
    } else {
      steps.push_back({forward(warmup + k), backward(k)});
    }
  }
  for (int k = total - warmup; k < total; ++k)
    steps.push_back({backward(k)});
  return steps;
}

// ZB-H1 by list scheduling with unit costs: each rank, whenever free, runs a
// B whose gradient has arrived; else the next F while fewer than P − rank
// microbatches await their B (1F1B's activation bound); else its oldest
// deferred W. B, on the critical path, so never waits behind a W, and the
// deferred W's fill what 1F1B leaves idle. A rank holding P − 1 deferred W's
// runs one before its next F, which bounds the weight-gradient inputs held.
// Every transfer is then placed in the groups both ranks issue at the unit
// step its producer ends (with unit costs every rank is between two ops at
// every step), so no send waits for its receiver.
std::vector<std::vector<PipeOp>> zeroBubbleSchedule(const Shape &shape) {
  int p = shape.ranks, m = shape.microbatches;
  const int never = 1 << 30;
  std::vector<std::vector<int>> fEnd(p, std::vector<int>(m, never));
  std::vector<std::vector<int>> bEnd(p, std::vector<int>(m, never));
  std::vector<int> nextF(p, 0), nextB(p, 0), nextW(p, 0), freeAt(p, 0);
  std::vector<std::vector<std::pair<int, PipeOp>>> timed(p); // (start, op)
  int end = 0;
  for (int t = 0; std::any_of(nextW.begin(), nextW.end(),
                              [&](int w) { return w < m; });
       ++t) {
    for (int r = 0; r < p; ++r) {
      if (freeAt[r] > t)
        continue;
      int b = nextB[r], f = nextF[r];
      bool wDue = b - nextW[r] > p - 1 && bEnd[r][nextW[r]] <= t;
      if (b < m && fEnd[r][b] <= t && (r == p - 1 || bEnd[r + 1][b] <= t)) {
        timed[r].push_back({t, compute(PipeOpKind::B, 0, b)});
        bEnd[r][b] = t + 1;
        ++nextB[r];
      } else if (!wDue && f < m && f - b < p - r &&
                 (r == 0 || fEnd[r - 1][f] <= t)) {
        timed[r].push_back({t, compute(PipeOpKind::F, 0, f)});
        fEnd[r][f] = t + 1;
        ++nextF[r];
      } else if (nextW[r] < b && bEnd[r][nextW[r]] <= t) {
        timed[r].push_back({t, compute(PipeOpKind::W, 0, nextW[r])});
        ++nextW[r];
      } else {
        continue;
      }
      freeAt[r] = t + 1;
      end = t + 1;
    }
  }
  // groups[t][r]: the transfers rank r issues at step t.
  std::vector<std::vector<PipeOp>> groups(
      end + 1, std::vector<PipeOp>(p, compute(PipeOpKind::Comm, 0, 0)));
  for (int r = 0; r < p; ++r)
    for (const auto &[start, op] : timed[r]) {
      PipeTransfer send;
      if (!outputTransfer(shape, r, op, send))
        continue;
      groups[start + 1][r].transfers.push_back(send);
      PipeTransfer recv = send;
      recv.send = false;
      recv.peer = r;
      groups[start + 1][send.peer].transfers.push_back(recv);
    }
  std::vector<std::vector<PipeOp>> ops(p);
  for (int r = 0; r < p; ++r) {
    size_t next = 0;
    for (int t = 0; t <= end; ++t) {
      if (!groups[t][r].transfers.empty())
        ops[r].push_back(groups[t][r]);
      if (next < timed[r].size() && timed[r][next].first == t)
        ops[r].push_back(timed[r][next++].second);
    }
  }
  return ops;
}

const char *opLetter(PipeOpKind kind) {
  switch (kind) {
  case PipeOpKind::F:
    return "F";
  case PipeOpKind::B:
    return "B";
  case PipeOpKind::W:
    return "W";
  case PipeOpKind::BW:
    return "BW";
  case PipeOpKind::Comm:
    return "COMM";
  }
  return "?";
}

std::string describeTransfer(const PipeTransfer &t) {
  std::ostringstream out;
  out << (t.send ? "send " : "recv ") << (t.gradient ? "grad" : "act")
      << " s" << t.producerStage << " m" << t.microbatch
      << (t.send ? " ->r" : " <-r") << t.peer;
  return out.str();
}

} // namespace

const char *pipelineScheduleName(PipelineScheduleKind kind) {
  switch (kind) {
  case PipelineScheduleKind::OneFOneB:
    return "1f1b";
  case PipelineScheduleKind::Interleaved:
    return "interleaved";
  case PipelineScheduleKind::ZeroBubbleH1:
    return "zb-h1";
  }
  return "?";
}

std::string describePipeOp(const PipeOp &op) {
  std::ostringstream out;
  out << opLetter(op.kind);
  if (op.kind != PipeOpKind::Comm) {
    out << "(c" << op.chunk << ",m" << op.microbatch << ")";
    return out.str();
  }
  out << "{";
  for (size_t i = 0; i < op.transfers.size(); ++i)
    out << (i ? ", " : "") << describeTransfer(op.transfers[i]);
  out << "}";
  return out.str();
}

StatusOr<PipelineSchedule> makePipelineSchedule(PipelineScheduleKind kind,
                                                int ranks, int virtualStages,
                                                int microbatches) {
  std::string name = pipelineScheduleName(kind);
  if (ranks < 1)
    return Status::error("pipeline: ranks must be at least 1, got " +
                         std::to_string(ranks));
  if (microbatches < 1)
    return Status::error("pipeline: microbatches must be at least 1, got " +
                         std::to_string(microbatches));
  if (kind == PipelineScheduleKind::Interleaved) {
    if (virtualStages < 2)
      return Status::error("pipeline: the interleaved schedule needs "
                           "virtual_stages of at least 2, got " +
                           std::to_string(virtualStages) +
                           "; use 1f1b for one chunk per rank");
    if (microbatches % ranks != 0)
      return Status::error(
          "pipeline: the interleaved schedule needs microbatches (" +
          std::to_string(microbatches) + ") to be a multiple of the ranks (" +
          std::to_string(ranks) + ")");
  } else if (virtualStages != 1) {
    return Status::error("pipeline: the " + name +
                         " schedule takes virtual_stages 1, got " +
                         std::to_string(virtualStages) +
                         "; use interleaved for several chunks per rank");
  }
  Shape shape{ranks, virtualStages, microbatches};
  PipelineSchedule schedule;
  schedule.kind = kind;
  schedule.ranks = ranks;
  schedule.virtualStages = virtualStages;
  schedule.microbatches = microbatches;
  if (kind == PipelineScheduleKind::ZeroBubbleH1) {
    schedule.perRank = zeroBubbleSchedule(shape);
    return schedule;
  }
  for (int r = 0; r < ranks; ++r)
    schedule.perRank.push_back(
        withCommunication(shape, r, interleavedOrder(shape, r)));
  return schedule;
}

namespace {

// The state of one simulation: per rank the instruction it is at, per
// (stage, microbatch) which of F, B and W have run, and per rank which
// transfers of its current group have met their peer.
class Simulator {
public:
  Simulator(const PipelineSchedule &schedule, const PipeCosts &costs)
      : schedule_(schedule), costs_(costs),
        shape_{schedule.ranks, schedule.virtualStages, schedule.microbatches},
        ranks_(schedule.ranks) {
    int cells = shape_.stages() * shape_.microbatches;
    fDone_.assign(cells, false);
    bDone_.assign(cells, false);
    wDone_.assign(cells, false);
    arrived_.assign(2 * cells, false);
    for (int r = 0; r < schedule.ranks; ++r)
      resetGroup(r);
  }

  StatusOr<PipeSimulation> run() {
    PipeSimulation result;
    result.perRank.resize(ranks_.size());
    result.timeline.resize(ranks_.size());
    if (!costs_.perStage.empty() &&
        int(costs_.perStage.size()) != shape_.stages())
      return Status::error("pipeline simulation: the costs list " +
                           std::to_string(costs_.perStage.size()) +
                           " stages, the schedule has " +
                           std::to_string(shape_.stages()));
    std::vector<PipeStageCosts> all = costs_.perStage;
    all.push_back({costs_.forward, costs_.inputGradient,
                   costs_.weightGradient});
    for (const PipeStageCosts &c : all)
      if (c.forward < 1 || c.inputGradient < 1 || c.weightGradient < 1)
        return Status::error("pipeline simulation: every op cost must be at "
                             "least 1 time unit");
    if (int(schedule_.perRank.size()) != schedule_.ranks)
      return Status::error("pipeline simulation: the schedule lists " +
                           std::to_string(schedule_.perRank.size()) +
                           " ranks, expected " +
                           std::to_string(schedule_.ranks));
    // Nothing changes between the ends of compute ops: time jumps from one
    // to the next.
    for (int t = 0;;) {
      bool progressed = false;
      for (int r = 0; r < schedule_.ranks; ++r) {
        Rank &rank = ranks_[r];
        if (rank.running && rank.endsAt == t) {
          finishCompute(r);
          progressed = true;
        }
      }
      for (bool moved = true; moved;) {
        moved = false;
        for (int r = 0; r < schedule_.ranks; ++r) {
          auto step = advanceCommunication(r);
          if (!step)
            return step.status();
          moved |= *step;
        }
        progressed |= moved;
      }
      bool anyRunning = false, allDone = true;
      int next = 0;
      for (int r = 0; r < schedule_.ranks; ++r) {
        Rank &rank = ranks_[r];
        const auto &ops = schedule_.perRank[r];
        if (!rank.running && rank.pc < ops.size() &&
            ops[rank.pc].kind != PipeOpKind::Comm) {
          OCTET_RETURN_IF_ERROR(startCompute(r, t));
          progressed = true;
        }
        if (rank.running)
          next = anyRunning ? std::min(next, rank.endsAt) : rank.endsAt;
        anyRunning |= rank.running;
        allDone &= rank.pc >= ops.size();
      }
      if (allDone) {
        result.totalTime = t;
        break;
      }
      if (!anyRunning && !progressed)
        return Status::error(deadlockMessage(t));
      t = anyRunning ? next : t + 1;
    }
    OCTET_RETURN_IF_ERROR(checkComplete());
    long idle = 0;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      result.timeline[r] = timelineOf(int(r), result.totalTime);
      result.perRank[r].busy = ranks_[r].busy;
      result.perRank[r].peakStash = ranks_[r].peakStash;
      result.perRank[r].peakAwaitingB = ranks_[r].peakAwaitingB;
      idle += result.totalTime - ranks_[r].busy;
    }
    result.bubble = result.totalTime == 0
                        ? 0
                        : double(idle) / (double(result.totalTime) *
                                          double(ranks_.size()));
    return result;
  }

private:
  struct Rank {
    size_t pc = 0;
    bool running = false;
    int startedAt = 0, endsAt = 0;
    int busy = 0, stash = 0, peakStash = 0;
    int awaitingB = 0, peakAwaitingB = 0;
    // Compute ops run: start, end, the op.
    struct Run {
      int start, end;
      const PipeOp *op;
    };
    std::vector<Run> runs;
    std::vector<bool> matched; // per transfer of the current group
  };

  int cell(int stage, int microbatch) const {
    return stage * shape_.microbatches + microbatch;
  }

  std::string where(int r) const {
    const auto &ops = schedule_.perRank[r];
    std::string op = ranks_[r].pc < ops.size()
                         ? describePipeOp(ops[ranks_[r].pc])
                         : std::string("<end>");
    return "rank " + std::to_string(r) + " op " +
           std::to_string(ranks_[r].pc) + " " + op;
  }

  Status fail(int r, const std::string &what) const {
    return Status::error("pipeline schedule " +
                         std::string(pipelineScheduleName(schedule_.kind)) +
                         ": " + where(r) + ": " + what);
  }

  void resetGroup(int r) {
    const auto &ops = schedule_.perRank[r];
    size_t n = ranks_[r].pc < ops.size() ? ops[ranks_[r].pc].transfers.size()
                                         : 0;
    ranks_[r].matched.assign(n, false);
  }

  PipeStageCosts stageCosts(int stage) const {
    if (costs_.perStage.empty())
      return {costs_.forward, costs_.inputGradient, costs_.weightGradient};
    return costs_.perStage[size_t(stage)];
  }

  int cost(PipeOpKind kind, int stage) const {
    PipeStageCosts c = stageCosts(stage);
    switch (kind) {
    case PipeOpKind::F:
      return c.forward;
    case PipeOpKind::B:
      return c.inputGradient;
    case PipeOpKind::W:
      return c.weightGradient;
    case PipeOpKind::BW:
      return c.inputGradient + c.weightGradient;
    case PipeOpKind::Comm:
      return 0;
    }
    return 0;
  }

  // Whether the input a transfer carries exists where it is needed.
  bool available(int r, bool gradient, int producer, int microbatch) const {
    if (shape_.rankOf(producer) == r)
      return gradient ? bDone_[cell(producer, microbatch)]
                      : fDone_[cell(producer, microbatch)];
    return arrived_[2 * cell(producer, microbatch) + gradient];
  }

  Status startCompute(int r, int t) {
    Rank &rank = ranks_[r];
    const PipeOp &op = schedule_.perRank[r][rank.pc];
    if (op.chunk < 0 || op.chunk >= shape_.virtualStages || op.microbatch < 0 ||
        op.microbatch >= shape_.microbatches)
      return fail(r, "chunk or microbatch out of range");
    int stage = shape_.stageOf(r, op.chunk), c = cell(stage, op.microbatch);
    bool last = stage + 1 == shape_.stages();
    if (schedule_.forwardOnly && op.kind != PipeOpKind::F)
      return fail(r, "a forward-only schedule runs a backward op");
    switch (op.kind) {
    case PipeOpKind::F:
      if (fDone_[c])
        return fail(r, "F runs a second time");
      if (stage > 0 && !available(r, false, stage - 1, op.microbatch))
        return fail(r, "F runs before its input activation was received");
      break;
    case PipeOpKind::B:
    case PipeOpKind::BW:
      if (bDone_[c])
        return fail(r, "B runs a second time");
      if (!fDone_[c])
        return fail(r, "B runs before its F");
      if (!last && !available(r, true, stage + 1, op.microbatch))
        return fail(r, "B runs before its output gradient was received");
      if (op.kind == PipeOpKind::BW && wDone_[c])
        return fail(r, "W runs a second time");
      break;
    case PipeOpKind::W:
      if (wDone_[c])
        return fail(r, "W runs a second time");
      if (!bDone_[c])
        return fail(r, "W runs before its B");
      break;
    case PipeOpKind::Comm:
      break;
    }
    rank.running = true;
    rank.startedAt = t;
    rank.endsAt = t + cost(op.kind, stage);
    rank.runs.push_back({t, rank.endsAt, &op});
    return Status::ok();
  }

  void finishCompute(int r) {
    Rank &rank = ranks_[r];
    const PipeOp &op = schedule_.perRank[r][rank.pc];
    int c = cell(shape_.stageOf(r, op.chunk), op.microbatch);
    if (op.kind == PipeOpKind::F) {
      fDone_[c] = true;
      rank.peakStash = std::max(rank.peakStash, ++rank.stash);
      rank.peakAwaitingB = std::max(rank.peakAwaitingB, ++rank.awaitingB);
    }
    if (isBackward(op.kind)) {
      bDone_[c] = true;
      --rank.awaitingB;
    }
    if (op.kind == PipeOpKind::W || op.kind == PipeOpKind::BW) {
      wDone_[c] = true;
      --rank.stash;
    }
    rank.busy += rank.endsAt - rank.startedAt;
    rank.running = false;
    ++rank.pc;
    resetGroup(r);
  }

  // Matches rank r's sends against the peers' receives, FIFO per channel:
  // the first unmatched send of a channel in r's group meets the first
  // unmatched receive of that channel in the peer's group. Returns whether
  // anything moved.
  StatusOr<bool> advanceCommunication(int r) {
    Rank &rank = ranks_[r];
    const auto &ops = schedule_.perRank[r];
    if (rank.running || rank.pc >= ops.size() ||
        ops[rank.pc].kind != PipeOpKind::Comm)
      return false;
    const PipeOp &group = ops[rank.pc];
    bool moved = false;
    std::vector<bool> channelSeen(2 * schedule_.ranks, false);
    for (size_t i = 0; i < group.transfers.size(); ++i) {
      const PipeTransfer &send = group.transfers[i];
      if (!send.send || rank.matched[i])
        continue;
      if (send.peer < 0 || send.peer >= schedule_.ranks || send.peer == r)
        return fail(r, "send to an invalid peer");
      int channel = 2 * send.peer + send.gradient;
      if (channelSeen[channel])
        continue;
      channelSeen[channel] = true;
      if (shape_.rankOf(send.producerStage) != r ||
          !available(r, send.gradient, send.producerStage, send.microbatch))
        return fail(r, "sends " + describeTransfer(send) +
                           " before computing it");
      int q = send.peer;
      Rank &peer = ranks_[q];
      const auto &peerOps = schedule_.perRank[q];
      if (peer.running || peer.pc >= peerOps.size() ||
          peerOps[peer.pc].kind != PipeOpKind::Comm)
        continue;
      const auto &peerTransfers = peerOps[peer.pc].transfers;
      for (size_t j = 0; j < peerTransfers.size(); ++j) {
        const PipeTransfer &recv = peerTransfers[j];
        if (recv.send || peer.matched[j] || recv.peer != r ||
            recv.gradient != send.gradient)
          continue;
        if (recv.producerStage != send.producerStage ||
            recv.microbatch != send.microbatch)
          return fail(q, describeTransfer(recv) + " met " + where(r) +
                             "'s " + describeTransfer(send) +
                             ": sends and receives are out of order");
        rank.matched[i] = peer.matched[j] = true;
        arrived_[2 * cell(send.producerStage, send.microbatch) +
                 send.gradient] = true;
        moved = true;
        break;
      }
    }
    // A group whose transfers all met completes; the transfers a peer
    // matched on its own turn count too.
    if (std::all_of(rank.matched.begin(), rank.matched.end(),
                    [](bool m) { return m; })) {
      ++rank.pc;
      resetGroup(r);
      moved = true;
    }
    return moved;
  }

  std::string timelineOf(int r, int totalTime) const {
    std::string line(size_t(totalTime), '.');
    for (const Rank::Run &run : ranks_[r].runs) {
      PipeOpKind kind = run.op->kind;
      int inputGradientEnds =
          run.start +
          stageCosts(shape_.stageOf(r, run.op->chunk)).inputGradient;
      for (int t = run.start; t < run.end; ++t)
        line[size_t(t)] = kind == PipeOpKind::BW
                              ? (t < inputGradientEnds ? 'B' : 'W')
                              : opLetter(kind)[0];
    }
    return line;
  }

  std::string deadlockMessage(int t) const {
    std::string message =
        "pipeline schedule " +
        std::string(pipelineScheduleName(schedule_.kind)) +
        ": deadlock at time " + std::to_string(t) + ", no rank can proceed:";
    for (int r = 0; r < schedule_.ranks; ++r)
      if (ranks_[r].pc < schedule_.perRank[r].size())
        message += " " + where(r) + " waits;";
    return message;
  }

  Status checkComplete() const {
    for (int s = 0; s < shape_.stages(); ++s)
      for (int m = 0; m < shape_.microbatches; ++m) {
        int c = cell(s, m);
        const char *missing = !fDone_[c]              ? "F"
                              : schedule_.forwardOnly ? nullptr
                              : !bDone_[c]            ? "B"
                              : !wDone_[c]            ? "W"
                                                      : nullptr;
        if (missing)
          return Status::error(
              "pipeline schedule " +
              std::string(pipelineScheduleName(schedule_.kind)) + ": rank " +
              std::to_string(shape_.rankOf(s)) + " never runs " + missing +
              "(c" + std::to_string(s / shape_.ranks) + ",m" +
              std::to_string(m) + ")");
      }
    return Status::ok();
  }

  const PipelineSchedule &schedule_;
  PipeCosts costs_;
  Shape shape_;
  std::vector<Rank> ranks_;
  std::vector<bool> fDone_, bDone_, wDone_;
  std::vector<bool> arrived_; // per (producer stage, microbatch, gradient)
};

} // namespace

StatusOr<PipeSimulation> simulatePipeline(const PipelineSchedule &schedule,
                                          const PipeCosts &costs) {
  return Simulator(schedule, costs).run();
}

StatusOr<PipePrediction> predictPipeline(const PipelineSchedule &schedule,
                                         const std::vector<double> &stageForward) {
  std::vector<PipeStageTime> stages;
  for (double f : stageForward)
    stages.push_back({f, 2 * f});
  return predictPipelineTimes(schedule, stages, 0,
                              std::vector<double>(size_t(schedule.ranks), 0),
                              0);
}

StatusOr<PipeTimedRun> simulatePipelineTimes(const PipelineSchedule &schedule,
                                             const std::vector<PipeOpTimes> &stages,
                                             double transfer) {
  int stageCount = schedule.ranks * schedule.virtualStages;
  if (int(stages.size()) != stageCount)
    return Status::error("pipeline prediction: " +
                         std::to_string(stages.size()) + " stage costs for " +
                         std::to_string(stageCount) + " stages");
  if (!(transfer >= 0))
    return Status::error("pipeline prediction: the transfer time must not be "
                         "negative");
  // With one rank every neighbour is local and nothing travels.
  double in = schedule.ranks > 1 ? transfer : 0;
  double largest = 0;
  for (int s = 0; s < stageCount; ++s) {
    const PipeOpTimes &t = stages[size_t(s)];
    if (!(t.forward > 0) || !(t.inputGradient > 0) || !(t.weightGradient >= 0))
      return Status::error("pipeline prediction: stage " + std::to_string(s) +
                           "'s forward and input-gradient times must be "
                           "positive, its weight-gradient time not negative");
    largest = std::max({largest, t.forward,
                        t.inputGradient + t.weightGradient});
  }
  // 2000 units for the largest forward or whole backward: the rounding
  // moves no op's cost by more than 0.025% of it.
  const double unitsOfLargest = 2000;
  double unit = largest / unitsOfLargest;
  auto units = [&](double t) {
    return std::max(1, int(std::lround(t / unit)));
  };
  PipeCosts costs;
  for (int s = 0; s < stageCount; ++s) {
    const PipeOpTimes &t = stages[size_t(s)];
    double forward = t.forward + (s > 0 ? in : 0);
    double gradientIn = s + 1 < stageCount ? in : 0;
    costs.perStage.push_back({units(forward), units(t.inputGradient + gradientIn),
                              units(t.weightGradient)});
  }
  StatusOr<PipeSimulation> simulated = simulatePipeline(schedule, costs);
  if (!simulated)
    return simulated.status();
  return PipeTimedRun{double(simulated->totalTime) * unit, simulated->bubble};
}

StatusOr<PipePrediction> predictPipelineTimes(
    const PipelineSchedule &schedule, const std::vector<PipeStageTime> &stages,
    double transfer, const std::vector<double> &rankTail, double oneRankTail) {
  if (int(rankTail.size()) != schedule.ranks)
    return Status::error("pipeline prediction: " +
                         std::to_string(rankTail.size()) +
                         " optimizer times for " +
                         std::to_string(schedule.ranks) + " ranks");
  if (!(oneRankTail >= 0) ||
      std::any_of(rankTail.begin(), rankTail.end(),
                  [](double t) { return !(t >= 0); }))
    return Status::error("pipeline prediction: optimizer times must not be "
                         "negative");
  double total = 0;
  std::vector<PipeOpTimes> ops;
  for (const PipeStageTime &s : stages) {
    if (!(s.forward > 0) || !(s.backward > 0))
      return Status::error("pipeline prediction: every stage's forward and "
                           "backward cost must be positive");
    if (!(s.weightGradientShare >= 0 && s.weightGradientShare < 1))
      return Status::error("pipeline prediction: a stage's weight-gradient "
                           "share of its backward must be in [0, 1)");
    total += s.forward + s.backward;
    double w = s.backward * s.weightGradientShare;
    ops.push_back({s.forward, s.backward - w, w});
  }
  StatusOr<PipeTimedRun> run = simulatePipelineTimes(schedule, ops, transfer);
  if (!run)
    return run.status();
  double pipelineStep =
      run->length + *std::max_element(rankTail.begin(), rankTail.end());
  double oneRankStep = double(schedule.microbatches) * total + oneRankTail;
  PipePrediction prediction;
  prediction.stepOverOneRank = pipelineStep / oneRankStep;
  prediction.bubble =
      1 - oneRankStep / (double(schedule.ranks) * pipelineStep);
  for (const PipeStageTime &s : stages)
    prediction.stageShare.push_back((s.forward + s.backward) / total);
  return prediction;
}

std::string describePrediction(const PipelineSchedule &schedule,
                               const PipePrediction &prediction,
                               const std::string &basis) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << "predicted bubble "
      << prediction.bubble * 100
      << "% (" << basis << ")\n"
      << std::setprecision(3) << "predicted step " << prediction.stepOverOneRank
      << " of one rank's: " << 1 / prediction.stepOverOneRank
      << "x its tokens/s, "
      << 1 / (prediction.stepOverOneRank * schedule.ranks) << " per rank\n";
  return out.str();
}

std::string drawPipeline(const PipelineSchedule &schedule,
                         const PipeSimulation &simulation) {
  std::ostringstream out;
  out << pipelineScheduleName(schedule.kind) << ": " << schedule.ranks
      << " ranks, " << schedule.virtualStages << " chunks each, "
      << schedule.microbatches << " microbatches\n";
  for (size_t r = 0; r < simulation.timeline.size(); ++r)
    out << "rank " << r << " | " << simulation.timeline[r] << " | stash "
        << simulation.perRank[r].peakStash << " (awaiting B "
        << simulation.perRank[r].peakAwaitingB << ")\n";
  out << "time " << simulation.totalTime << ", bubble "
      << simulation.bubble * 100 << "%\n";
  return out.str();
}

} // namespace octet
