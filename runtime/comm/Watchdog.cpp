#include "runtime/comm/Watchdog.h"

#include "runtime/comm/Store.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace octet::comm {

namespace {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             Clock::now().time_since_epoch())
      .count();
}

std::string stepKey(int rank) { return "octet/step/" + std::to_string(rank); }

} // namespace

void exitProcessNow(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

std::unique_ptr<Watchdog> Watchdog::start(WatchdogOptions options,
                                          StoreClient *store,
                                          StoreServer *server) {
  if (!options.print)
    options.print = [](const std::string &line) {
      std::fprintf(stderr, "%s\n", line.c_str());
      std::fflush(stderr);
    };
  if (!options.exit)
    options.exit = [](int code) { exitProcessNow(code); };
  std::unique_ptr<Watchdog> w(new Watchdog(std::move(options)));
  w->store_ = store;
  w->server_ = server;
  w->lastBeatNs_ = nowNs();
  w->thread_ = std::thread([raw = w.get()] { raw->run(); });
  return w;
}

Watchdog::~Watchdog() { stop(); }

void Watchdog::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id())
    thread_.join();
}

void Watchdog::watch(Abortable *object) {
  std::lock_guard<std::mutex> lock(mutex_);
  watched_.push_back(object);
}

void Watchdog::unwatch(Abortable *object) {
  std::lock_guard<std::mutex> lock(mutex_);
  watched_.erase(std::remove(watched_.begin(), watched_.end(), object),
                 watched_.end());
}

void Watchdog::heartbeat(int64_t step) {
  lastStep_.store(step, std::memory_order_relaxed);
  lastBeatNs_.store(nowNs(), std::memory_order_relaxed);
}

std::string Watchdog::message() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return message_;
}

void Watchdog::run() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (wake_.wait_for(lock, options_.pollInterval,
                         [&] { return stopping_; }))
        return;
    }
    // The store first: when a rank dies, the others' communicators fail
    // too, and the store's notice is the one that names it.
    std::string cause = storeNotice();
    bool fromStore = !cause.empty();
    if (cause.empty()) {
      // Polled under the lock, so unwatch() returns only once its object
      // is no longer in use here.
      std::lock_guard<std::mutex> lock(mutex_);
      for (Abortable *object : watched_) {
        Status error = object->pollAsyncError();
        if (!error) {
          cause = object->describe() + ": " + error.message();
          break;
        }
      }
    }
    if (!cause.empty() && !fromStore && store_) {
      // A peer's death may reach NCCL a moment before the store.
      std::this_thread::sleep_for(options_.pollInterval);
      std::string notice = storeNotice();
      if (!notice.empty()) {
        cause = notice;
        fromStore = true;
      }
    }
    if (cause.empty() && options_.stepTimeout.count() > 0) {
      auto quiet = std::chrono::nanoseconds(
          nowNs() - lastBeatNs_.load(std::memory_order_relaxed));
      if (quiet > options_.stepTimeout)
        cause = stepTimeoutCause();
    }
    if (!cause.empty()) {
      fire(cause, fromStore);
      return;
    }
  }
}

// The job's failure notice, or why the store cannot be asked ("" while all
// is well); publishes this rank's last step on the way.
std::string Watchdog::storeNotice() {
  if (!store_)
    return "";
  int64_t step = lastStep_.load(std::memory_order_relaxed);
  if (step != publishedStep_ &&
      store_->set(stepKey(options_.rank), std::to_string(step)))
    publishedStep_ = step;
  auto notice = store_->failureNotice();
  return notice ? *notice : notice.status().message();
}

// The step timeout's message: this rank's last step and, where the store
// has them, every rank's, so the one that is behind stands out.
std::string Watchdog::stepTimeoutCause() {
  std::string text =
      "no step progress for " + describeDuration(options_.stepTimeout) +
      " (this rank's last step: " + std::to_string(lastStep_.load()) + ")";
  if (store_ && options_.worldSize > 1) {
    std::vector<std::string> keys;
    for (int r = 0; r < options_.worldSize; ++r)
      keys.push_back(stepKey(r));
    auto steps = store_->multiGet(keys);
    if (steps) {
      text += "; last steps by rank:";
      for (int r = 0; r < options_.worldSize; ++r)
        text += " " + std::to_string(r) + ":" +
                ((*steps)[r] ? *(*steps)[r] : "none");
    }
  }
  return text + ": a rank hangs or is far slower than the others";
}

void Watchdog::fire(const std::string &cause, bool fromStore) {
  std::string line = "octet: rank " + std::to_string(options_.rank) +
                     (fromStore ? ": the job failed: " : ": ") + cause +
                     "; aborting communicators and exiting";
  {
    std::lock_guard<std::mutex> lock(mutex_);
    message_ = line;
  }
  fired_ = true;

  // Tests' exit functions return; the process's own ends it.
  std::atomic<bool> exited{false};
  auto exitOnce = [&] {
    if (!exited.exchange(true))
      options_.exit(options_.exitCode);
  };
  // The hard deadline: whatever below blocks (a store that does not answer,
  // an abort that does not return), the process ends.
  std::mutex deadlineMutex;
  std::condition_variable deadlineCv;
  bool cancelled = false;
  std::thread deadline([&] {
    std::unique_lock<std::mutex> lock(deadlineMutex);
    if (!deadlineCv.wait_for(lock, options_.abortDeadline,
                             [&] { return cancelled; }))
      exitOnce();
  });

  options_.print(line);
  if (store_ && !fromStore)
    (void)store_->reportFailure("rank " + std::to_string(options_.rank) + ": " +
                                cause);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Abortable *object : watched_)
      object->abort();
  }
  if (server_)
    server_->waitForFailureDelivered(Clock::now() + options_.lingerForNotice);

  {
    std::lock_guard<std::mutex> lock(deadlineMutex);
    cancelled = true;
  }
  deadlineCv.notify_all();
  deadline.join();
  exitOnce();
}

} // namespace octet::comm
