#ifndef OCTET_TESTS_UNIT_PIPELINE_HOSTWIRE_H
#define OCTET_TESTS_UNIT_PIPELINE_HOSTWIRE_H

#include "support/Status.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

namespace octet {

// Sends and receives of ranks in threads: a queue per (from, to, channel),
// as NCCL pairs them (in order per pair); a group's sends are queued before
// its receives wait, as one ncclGroupStart/End lets them.
class HostWire {
public:
  void send(int from, int to, bool gradient, std::vector<uint8_t> bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    queues_[{from, to, gradient}].push_back(std::move(bytes));
    arrived_.notify_all();
  }
  Status recv(int from, int to, bool gradient, std::vector<uint8_t> &bytes) {
    std::unique_lock<std::mutex> lock(mutex_);
    auto &q = queues_[{from, to, gradient}];
    if (!arrived_.wait_for(lock, std::chrono::seconds(20),
                           [&] { return !q.empty(); }))
      return Status::error("receive from rank " + std::to_string(from) +
                           " timed out");
    bytes = std::move(q.front());
    q.pop_front();
    return Status::ok();
  }

private:
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<std::tuple<int, int, bool>, std::deque<std::vector<uint8_t>>>
      queues_;
};

} // namespace octet

#endif
