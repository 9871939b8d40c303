#ifndef OCTET_COMPILER_INTERPRETER_PIPECHANNELS_H
#define OCTET_COMPILER_INTERPRETER_PIPECHANNELS_H

// The interpreter's pipeline sends and receives: FIFO per channel
// (activations, gradients) and ordered pair of ranks, as NCCL's
// point-to-point calls are. A send never waits; a receive waits for the
// next message and fails unless it is the tensor the schedule expects.

#include "compiler/Interpreter/Tensor.h"
#include "support/Status.h"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace octet::interp {

// What one send carries: a stage's edge tensors for a microbatch.
struct PipeMessage {
  int producerStage = 0;
  int microbatch = 0;
  std::vector<Tensor> tensors;
};

class PipeChannels {
public:
  void send(int from, int to, bool gradient, PipeMessage message);
  // The next message from `from` on the channel; an error if it is not the
  // (producerStage, microbatch) expected, or once the channels are aborted.
  StatusOr<std::vector<Tensor>> receive(int to, int from, bool gradient,
                                        int producerStage, int microbatch);
  void abort(const std::string &why);

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::tuple<int, int, bool>, std::deque<PipeMessage>> queues_;
  std::string aborted_;
};

} // namespace octet::interp

#endif
