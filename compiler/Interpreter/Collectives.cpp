#include "compiler/Interpreter/Collectives.h"

#include <algorithm>
#include <thread>

namespace octet::interp {

std::vector<int> RankLayout::groupOf(const std::string &group,
                                     int rank) const {
  int64_t tp = rank % tensor, dp = rank / tensor % data,
          pp = rank / (tensor * data);
  auto rankOf = [&](int64_t t, int64_t d, int64_t p) {
    return int((p * data + d) * tensor + t);
  };
  std::vector<int> members;
  if (group == "tensor")
    for (int64_t t = 0; t < tensor; ++t)
      members.push_back(rankOf(t, dp, pp));
  else if (group == "data")
    for (int64_t d = 0; d < data; ++d)
      members.push_back(rankOf(tp, d, pp));
  else if (group == "pipeline")
    for (int64_t p = 0; p < pipeline; ++p)
      members.push_back(rankOf(tp, dp, p));
  return members;
}

namespace {

std::string describe(const CollectiveCall &call,
                     const std::vector<Tensor> &inputs) {
  std::string out = call.kind + (call.inPlace ? " in place " : " ") +
                    call.reduction + " over '" + call.group + "' of";
  for (const Tensor &t : inputs)
    out += " " + shapeString(t.shape());
  return out + " (" + call.where + ")";
}

bool sameCall(const CollectiveCall &a, const std::vector<Tensor> &x,
              const CollectiveCall &b, const std::vector<Tensor> &y) {
  if (a.kind != b.kind || a.group != b.group || a.reduction != b.reduction ||
      a.inPlace != b.inPlace || x.size() != y.size())
    return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].shape() != y[i].shape() || x[i].dtype() != y[i].dtype())
      return false;
  return true;
}

// The ranks' values folded in group order. A sum of a narrower float type
// (BF16 gradients, train.precision.grad_dtype) is rounded to that type after
// every addition, as NCCL's reduction kernels store each partial sum in the
// buffer's type: for two ranks, one rounding of the f32 sum, to nearest
// even.
Tensor reduce(const std::vector<const Tensor *> &values,
              const std::string &reduction) {
  const Tensor &first = *values.front();
  Tensor out(first.dtype(), first.shape());
  int64_t n = first.numel();
  bool floating = isFloat(first.dtype());
  bool narrow = floating && first.dtype() != DType::F32;
  auto rounded = [&](float x) {
    return narrow ? numerics::roundTo(first.dtype(), x) : x;
  };
  for (int64_t e = 0; e < n; ++e) {
    if (floating) {
      float acc = values[0]->f()[e];
      for (size_t r = 1; r < values.size(); ++r)
        acc = reduction == "max" ? std::max(acc, values[r]->f()[e])
                                 : rounded(acc + values[r]->f()[e]);
      out.f()[e] =
          reduction == "avg" ? rounded(acc / float(values.size())) : acc;
    } else {
      int64_t acc = values[0]->i()[e];
      for (size_t r = 1; r < values.size(); ++r)
        acc = reduction == "max" ? std::max(acc, values[r]->i()[e])
                                 : acc + values[r]->i()[e];
      out.i()[e] = reduction == "avg" ? acc / int64_t(values.size()) : acc;
    }
  }
  return out;
}

// Part `part` of `parts` along dimension 0.
Tensor slice0(const Tensor &t, int64_t part, int64_t parts) {
  std::vector<int64_t> shape = t.shape();
  shape[0] /= parts;
  Tensor out(t.dtype(), shape);
  int64_t n = out.numel(), offset = part * n;
  if (isFloat(t.dtype()))
    std::copy(t.f() + offset, t.f() + offset + n, out.f());
  else
    std::copy(t.i() + offset, t.i() + offset + n, out.i());
  return out;
}

Tensor concat0(const std::vector<const Tensor *> &values) {
  std::vector<int64_t> shape = values.front()->shape();
  shape[0] *= int64_t(values.size());
  Tensor out(values.front()->dtype(), shape);
  int64_t offset = 0;
  for (const Tensor *t : values) {
    int64_t n = t->numel();
    if (isFloat(t->dtype()))
      std::copy(t->f(), t->f() + n, out.f() + offset);
    else
      std::copy(t->i(), t->i() + n, out.i() + offset);
    offset += n;
  }
  return out;
}

} // namespace

RankExchange::Round
RankExchange::combine(const std::vector<int> &members,
                      std::vector<Arrival> &arrivals) const {
  Round round;
  round.uncollected = int(members.size());
  const Arrival &first = arrivals.front();
  for (size_t m = 1; m < arrivals.size(); ++m)
    if (!sameCall(first.call, first.inputs, arrivals[m].call,
                  arrivals[m].inputs)) {
      round.error = "the ranks of a '" + first.call.group +
                    "' group made different collectives: rank " +
                    std::to_string(members[0]) + " " +
                    describe(first.call, first.inputs) + ", rank " +
                    std::to_string(members[m]) + " " +
                    describe(arrivals[m].call, arrivals[m].inputs);
      return round;
    }
  int64_t n = int64_t(members.size());
  const std::string &kind = first.call.kind;
  if (kind != "all_reduce" && kind != "reduce_scatter" &&
      kind != "all_gather") {
    round.error = "unknown collective kind '" + kind + "' (" +
                  first.call.where + ")";
    return round;
  }
  round.results.resize(members.size());
  for (size_t j = 0; j < first.inputs.size(); ++j) {
    std::vector<const Tensor *> values;
    for (const Arrival &a : arrivals)
      values.push_back(&a.inputs[j]);
    const Tensor &t = first.inputs[j];
    if (kind != "all_reduce" &&
        (t.rank() == 0 || (kind == "reduce_scatter" && t.dim(0) % n != 0))) {
      round.error = kind + " of " + shapeString(t.shape()) + " over " +
                    std::to_string(n) + " ranks: dimension 0 must " +
                    (kind == "reduce_scatter" ? "divide evenly" : "exist") +
                    " (" + first.call.where + ")";
      return round;
    }
    if (kind == "all_gather") {
      Tensor joined = concat0(values);
      for (auto &r : round.results)
        r.push_back(joined);
      continue;
    }
    Tensor reduced = reduce(values, first.call.reduction);
    for (int64_t m = 0; m < n; ++m) {
      if (kind == "all_reduce") {
        round.results[m].push_back(reduced);
      } else if (first.call.inPlace) {
        // NCCL's in-place reduce-scatter: the member's own part of the
        // buffer gets the sum, the rest keeps what the member sent.
        Tensor mine = arrivals[m].inputs[j];
        int64_t part = mine.numel() / n;
        Tensor sum = slice0(reduced, m, n);
        if (isFloat(mine.dtype()))
          std::copy(sum.f(), sum.f() + part, mine.f() + m * part);
        else
          std::copy(sum.i(), sum.i() + part, mine.i() + m * part);
        round.results[m].push_back(std::move(mine));
      } else {
        round.results[m].push_back(slice0(reduced, m, n));
      }
    }
  }
  return round;
}

StatusOr<std::vector<Tensor>>
RankExchange::collective(int rank, const CollectiveCall &call,
                         std::vector<Tensor> inputs) {
  std::vector<int> members = layout_.groupOf(call.group, rank);
  if (members.empty())
    return Status::error("collective over unknown group '" + call.group +
                         "' (" + call.where + "); groups are data, tensor "
                         "and pipeline");
  if (int64_t(members.size()) != call.groupSize)
    return Status::error(
        call.where + ": the program's '" + call.group + "' group has " +
        std::to_string(call.groupSize) + " ranks, the layout's " +
        std::to_string(members.size()) + " (data " +
        std::to_string(layout_.data) + ", tensor " +
        std::to_string(layout_.tensor) + ", pipeline " +
        std::to_string(layout_.pipeline) + ")");
  size_t index = std::find(members.begin(), members.end(), rank) -
                 members.begin();
  std::unique_lock<std::mutex> lock(mutex_);
  if (!aborted_.empty())
    return Status::error("rank " + std::to_string(rank) + " at " + call.where +
                         ": " + aborted_);
  Meeting &meeting = meetings_[members];
  if (meeting.arrivals.empty())
    meeting.arrivals.resize(members.size());
  uint64_t round = meeting.round;
  meeting.arrivals[index] = {call, std::move(inputs)};
  if (++meeting.arrived == int(members.size())) {
    meeting.rounds[round] = combine(members, meeting.arrivals);
    meeting.arrivals.assign(members.size(), Arrival());
    meeting.arrived = 0;
    ++meeting.round;
    changed_.notify_all();
  } else {
    changed_.wait(lock, [&] {
      return meeting.round != round || !aborted_.empty();
    });
    if (meeting.round == round)
      return Status::error("rank " + std::to_string(rank) + " at " +
                           call.where + ": " + aborted_);
  }
  Round &done = meeting.rounds[round];
  StatusOr<std::vector<Tensor>> result =
      done.error.empty()
          ? StatusOr<std::vector<Tensor>>(std::move(done.results[index]))
          : StatusOr<std::vector<Tensor>>(Status::error(done.error));
  if (--done.uncollected == 0)
    meeting.rounds.erase(round);
  return result;
}

void RankExchange::abort(const std::string &why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_.empty())
    aborted_ = why;
  changed_.notify_all();
}

Status runRanks(RankExchange &exchange,
                const std::function<Status(int rank)> &body) {
  int ranks = int(exchange.layout().worldSize());
  std::vector<Status> results(ranks);
  std::mutex mutex;
  int firstFailure = -1; // the cause, not the ranks its abort stopped
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      Status st = body(r);
      if (!st) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (firstFailure < 0)
            firstFailure = r;
        }
        exchange.abort("rank " + std::to_string(r) + " failed: " +
                       st.message());
      }
      results[r] = std::move(st);
    });
  for (std::thread &t : threads)
    t.join();
  return firstFailure < 0 ? Status::ok() : results[firstFailure];
}

} // namespace octet::interp
