#ifndef OCTET_RUNTIME_COMM_WATCHDOG_H
#define OCTET_RUNTIME_COMM_WATCHDOG_H

// One thread per rank that turns every way a multi-rank job can get stuck
// into an exit with a message: a communicator's asynchronous error, a rank
// the store has lost (its connection closed: kill -9, a crash), the store
// itself gone (rank 0 lost), or no step progress for the step timeout (a
// hang anywhere). On any of them it prints one line naming the cause, tells
// the store, aborts every communicator and exits non-zero; a hard deadline
// bounds the abort, so the process ends even if NCCL does not return.
//
// Exiting the process from a library is the watchdog's whole point (its
// thread has nobody to return an error to); the exit function is injected,
// so tests observe it instead.

#include "runtime/comm/Socket.h"
#include "support/Status.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace octet::comm {

class StoreClient;
class StoreServer;

// What the watchdog can poll and abort: a communicator (runtime/comm/
// Communicator.h), or a stand-in in tests.
class Abortable {
public:
  virtual ~Abortable() = default;
  // "communicator 'dp' (rank 1 of 2)".
  virtual std::string describe() const = 0;
  // An asynchronous error (ok while there is none). Called from the
  // watchdog's thread.
  virtual Status pollAsyncError() = 0;
  // Stops in-flight work so that nothing waits on it; called once, from the
  // watchdog's thread, while other threads may be inside calls on it.
  virtual void abort() = 0;
};

// The exit status of a rank the watchdog ended (EX_UNAVAILABLE: a peer or
// the service is gone).
constexpr int kWatchdogExitCode = 69;

// Ends the process at once (std::_Exit, after flushing stdout and stderr):
// no static destructors run while another thread may still be inside NCCL.
[[noreturn]] void exitProcessNow(int code);

struct WatchdogOptions {
  int rank = 0;
  int worldSize = 1;
  std::chrono::milliseconds pollInterval{100};
  // No heartbeat for this long is a hang; 0 turns the check off.
  std::chrono::milliseconds stepTimeout{std::chrono::minutes(10)};
  // Time the abort may take before the process exits regardless.
  std::chrono::milliseconds abortDeadline{std::chrono::seconds(15)};
  // Rank 0 (which runs the store) waits up to this long for the others to
  // read the failure notice before it exits and takes the store with it.
  std::chrono::milliseconds lingerForNotice{std::chrono::seconds(2)};
  int exitCode = kWatchdogExitCode;
  // The one line (without newline); default: stderr.
  std::function<void(const std::string &line)> print;
  // Default: exitProcessNow. Tests pass one that records the call and
  // returns; the watchdog then stops.
  std::function<void(int code)> exit;
};

class Watchdog {
public:
  // Starts the thread. `store` (may be null) is polled for the job's failure
  // notice and is told this rank's failure; `server` is the store this rank
  // runs, if any. Both must outlive the watchdog.
  static std::unique_ptr<Watchdog> start(WatchdogOptions options,
                                         StoreClient *store,
                                         StoreServer *server = nullptr);
  // Stops the thread (a clean end); no exit.
  ~Watchdog();
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;

  // Adds or removes an object to poll and abort; it must stay alive while
  // watched.
  void watch(Abortable *object);
  void unwatch(Abortable *object);

  // The trainer's progress: call at least once per step (and during long
  // phases such as checkpoints) with the step number.
  void heartbeat(int64_t step);

  // Stops the thread without acting (before Bootstrap::finish).
  void stop();

  // Whether the watchdog has fired, and its message.
  bool fired() const { return fired_.load(); }
  std::string message() const;

private:
  explicit Watchdog(WatchdogOptions options) : options_(std::move(options)) {}
  void run();
  std::string storeNotice();
  std::string stepTimeoutCause();
  void fire(const std::string &cause, bool fromStore);

  WatchdogOptions options_;
  StoreClient *store_ = nullptr;
  StoreServer *server_ = nullptr;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<Abortable *> watched_;
  std::string message_;
  std::atomic<bool> fired_{false};

  std::atomic<int64_t> lastStep_{-1};
  std::atomic<int64_t> lastBeatNs_{0};
  // The step last written to the store (the watchdog's thread writes it, so
  // heartbeat() never waits on the network).
  int64_t publishedStep_ = -1;
  std::thread thread_;
};

} // namespace octet::comm

#endif
