#include "compiler/Interpreter/PipeChannels.h"

namespace octet::interp {

void PipeChannels::send(int from, int to, bool gradient, PipeMessage message) {
  std::lock_guard<std::mutex> lock(mutex_);
  queues_[{from, to, gradient}].push_back(std::move(message));
  changed_.notify_all();
}

StatusOr<std::vector<Tensor>> PipeChannels::receive(int to, int from,
                                                    bool gradient,
                                                    int producerStage,
                                                    int microbatch) {
  std::unique_lock<std::mutex> lock(mutex_);
  std::deque<PipeMessage> &queue = queues_[{from, to, gradient}];
  changed_.wait(lock, [&] { return !queue.empty() || !aborted_.empty(); });
  std::string what = std::string(gradient ? "gradient" : "activation") +
                     " of stage " + std::to_string(producerStage) +
                     ", microbatch " + std::to_string(microbatch) +
                     " from rank " + std::to_string(from);
  if (queue.empty())
    return Status::error("rank " + std::to_string(to) + " waiting for the " +
                         what + ": " + aborted_);
  PipeMessage message = std::move(queue.front());
  queue.pop_front();
  if (message.producerStage != producerStage ||
      message.microbatch != microbatch)
    return Status::error(
        "rank " + std::to_string(to) + " expected the " + what +
        " but the channel delivers stage " +
        std::to_string(message.producerStage) + ", microbatch " +
        std::to_string(message.microbatch));
  return std::move(message.tensors);
}

void PipeChannels::abort(const std::string &why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_.empty())
    aborted_ = why;
  changed_.notify_all();
}

} // namespace octet::interp
