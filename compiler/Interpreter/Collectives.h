#ifndef OCTET_COMPILER_INTERPRETER_COLLECTIVES_H
#define OCTET_COMPILER_INTERPRETER_COLLECTIVES_H

// The interpreter's collectives across ranks: every rank of a parallel
// layout runs its program on a thread of one process, and a
// kernel.collective meets the other ranks of its group here. This is the
// oracle for multi-rank programs, as the interpreter is for kernels: a
// program for N data-parallel ranks must train as world size 1 does.
//
// Reductions fold the ranks' values in rank order (sum, then / N for avg;
// max), one fixed order, so that a run is repeatable; they differ from
// world size 1 only where its sums ran in another order.

#include "compiler/Interpreter/Tensor.h"
#include "support/Status.h"

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace octet::interp {

// The ranks of a parallel layout, numbered as Megatron numbers them: tensor
// fastest, then data, then pipeline.
struct RankLayout {
  int64_t data = 1, tensor = 1, pipeline = 1;

  int64_t worldSize() const { return data * tensor * pipeline; }
  // The ranks of `rank`'s group named `group` ("data", "tensor" or
  // "pipeline"), in the group's own order; empty for another name.
  std::vector<int> groupOf(const std::string &group, int rank) const;
};

// One kernel.collective as a rank calls it.
struct CollectiveCall {
  std::string kind;      // all_reduce, reduce_scatter, all_gather
  std::string group;     // data, tensor, pipeline
  int64_t groupSize = 1; // as the program says: must match the layout
  std::string reduction; // sum, avg, max
  std::string where;     // the op, for messages
  // reduce_scatter: each member's result is its own input with its part
  // of dimension 0 replaced by the reduction (NCCL's in-place call).
  bool inPlace = false;
};

class RankExchange {
public:
  explicit RankExchange(RankLayout layout) : layout_(layout) {}

  const RankLayout &layout() const { return layout_; }

  // Rank `rank`'s part of `call` with its `inputs` (the bucket's tensors).
  // Returns once every rank of the group has made the same call, with this
  // rank's results: all_reduce keeps each shape, reduce_scatter gives rank
  // i of the group the i-th part of dimension 0 of the reduced tensor,
  // all_gather joins the ranks' tensors along dimension 0 in group order
  // (reduce_scatter in place: see CollectiveCall::inPlace).
  // A group whose ranks disagree (another kind, reduction or shape) is an
  // error for every rank of it, naming both calls.
  StatusOr<std::vector<Tensor>> collective(int rank, const CollectiveCall &call,
                                           std::vector<Tensor> inputs);

  // A rank failed and will not arrive: every rank waiting now, or arriving
  // later, gets an error naming `why` instead of waiting forever.
  void abort(const std::string &why);

private:
  struct Arrival {
    CollectiveCall call;
    std::vector<Tensor> inputs;
  };
  struct Round {
    std::vector<std::vector<Tensor>> results; // per group member
    std::string error;
    int uncollected = 0;
  };
  struct Meeting {
    std::vector<Arrival> arrivals; // per group member
    int arrived = 0;
    uint64_t round = 0;
    std::map<uint64_t, Round> rounds;
  };

  Round combine(const std::vector<int> &members,
                std::vector<Arrival> &arrivals) const;

  RankLayout layout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::vector<int>, Meeting> meetings_;
  std::string aborted_;
};

// Runs `body(rank)` for every rank of `exchange`'s layout on threads of its
// own and returns the first failure (by rank), after every thread ended. A
// failing rank aborts the exchange, so the others stop at their next
// collective instead of waiting for it.
Status runRanks(RankExchange &exchange,
                const std::function<Status(int rank)> &body);

} // namespace octet::interp

#endif
