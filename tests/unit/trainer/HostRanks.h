#ifndef OCTET_TESTS_UNIT_TRAINER_HOSTRANKS_H
#define OCTET_TESTS_UNIT_TRAINER_HOSTRANKS_H

#include "runtime/exec/TrainerOptions.h"

#include <condition_variable>
#include <mutex>
#include <vector>

namespace octet::test {

// Ranks in threads of one process, their sums met on the host: the
// stand-in for NCCL that lets the loop's data-parallel logic run here.
class HostRanks {
public:
  explicit HostRanks(int n) : n_(n), pending_(size_t(n)) {}
  int size() const { return n_; }
  // Every rank's values summed, for every rank; returns once all have come.
  void sum(int rank, std::vector<double> &values) {
    std::unique_lock<std::mutex> lock(mutex_);
    int64_t round = round_;
    pending_[size_t(rank)] = values;
    if (++arrived_ == n_) {
      std::vector<double> total(values.size(), 0.0);
      for (const auto &v : pending_)
        for (size_t i = 0; i < v.size(); ++i)
          total[i] += v[i];
      result_ = total;
      arrived_ = 0;
      ++round_;
      done_.notify_all();
    } else {
      done_.wait(lock, [&] { return round_ != round; });
    }
    values = result_;
  }
  // Every rank's bytes side by side, in rank order, for every rank.
  void gather(int rank, const std::vector<uint8_t> &mine,
              std::vector<uint8_t> &all) {
    std::unique_lock<std::mutex> lock(mutex_);
    int64_t round = round_;
    pendingBytes_[size_t(rank)] = mine;
    if (++arrived_ == n_) {
      gathered_.clear();
      for (const auto &part : pendingBytes_)
        gathered_.insert(gathered_.end(), part.begin(), part.end());
      arrived_ = 0;
      ++round_;
      done_.notify_all();
    } else {
      done_.wait(lock, [&] { return round_ != round; });
    }
    all = gathered_;
  }

private:
  int n_;
  std::mutex mutex_;
  std::condition_variable done_;
  std::vector<std::vector<double>> pending_;
  std::vector<double> result_;
  std::vector<std::vector<uint8_t>> pendingBytes_ =
      std::vector<std::vector<uint8_t>>(size_t(n_));
  std::vector<uint8_t> gathered_;
  int arrived_ = 0;
  int64_t round_ = 0;
};

class HostRank : public DataParallelGroup {
public:
  HostRank(HostRanks &ranks, int rank) : ranks_(ranks), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return ranks_.size(); }
  Status sum(std::vector<double> &values) override {
    ranks_.sum(rank_, values);
    return Status::ok();
  }
  Status gather(const std::vector<uint8_t> &mine,
                std::vector<uint8_t> &all) override {
    ranks_.gather(rank_, mine, all);
    return Status::ok();
  }
  void heartbeat(int64_t step) override { lastBeat = step; }
  int64_t lastBeat = -1;

private:
  HostRanks &ranks_;
  int rank_;
};

} // namespace octet::test

#endif
