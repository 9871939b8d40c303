#ifndef OCTET_RUNTIME_COMM_STORE_H
#define OCTET_RUNTIME_COMM_STORE_H

// The rendezvous store: a small key-value server that rank 0 runs on
// MASTER_ADDR:MASTER_PORT, and one client connection per rank, held open for
// the whole job. Ranks publish and wait for keys through it (the NCCL unique
// id, the bundle hashes, barriers), and it is how a job learns that a rank
// died: a rank whose connection closes before it said goodbye is lost, and
// the server publishes that as the job's failure notice, which every answer
// carries from then on.
//
// Wire format (loopback or one host's network, both ends this code): each
// message is a little-endian u32 length and a body; a request body starts
// with an op byte; an answer is a status byte, the op's payload or an error
// text, then the failure notice ("" while there is none).

#include "runtime/comm/Socket.h"
#include "support/Status.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace octet::comm {

class StoreServer {
public:
  // Listens on host:port (port 0: the kernel picks one; see port()) for
  // ranks 0..worldSize-1. `portSetting` names where the port came from, for
  // the message when it is in use.
  static StatusOr<std::unique_ptr<StoreServer>>
  start(const std::string &host, int port, int worldSize,
        const std::string &portSetting = "MASTER_PORT");
  ~StoreServer();
  StoreServer(const StoreServer &) = delete;
  StoreServer &operator=(const StoreServer &) = delete;

  int port() const { return port_; }
  // The first failure reported or detected ("" while there is none).
  std::string failure() const;
  // Until every rank that joined has left (goodbye or a closed connection),
  // or the deadline. True when all left.
  bool waitForRanksToLeave(Deadline deadline) const;
  // Until every rank still connected has been sent the failure notice in an
  // answer, or the deadline: rank 0 lingers on this before it exits so that
  // the others learn the cause rather than only that rank 0 is gone.
  bool waitForFailureDelivered(Deadline deadline) const;

  struct State;

private:
  StoreServer() = default;
  void serve();
  int port_ = 0;
  std::unique_ptr<State> state_;
};

class StoreClient {
public:
  struct Options {
    // How long connect() retries while nobody listens yet (rank 0 starts
    // late, or not at all).
    std::chrono::milliseconds connectTimeout{std::chrono::seconds(120)};
    // How long one request may wait for its answer.
    std::chrono::milliseconds requestTimeout{std::chrono::seconds(30)};
  };
  // Connects (retrying until the deadline) and joins as `rank` of
  // `worldSize`; the server refuses a duplicate rank, a rank out of range
  // and a world size that differs from rank 0's.
  static StatusOr<std::unique_ptr<StoreClient>> connect(const std::string &host,
                                                        int port, int rank,
                                                        int worldSize,
                                                        const Options &options);
  static StatusOr<std::unique_ptr<StoreClient>>
  connect(const std::string &host, int port, int rank, int worldSize) {
    return connect(host, port, rank, worldSize, Options());
  }
  // Closing without leave() is what a dying rank does: the server marks it
  // lost.
  ~StoreClient();

  int rank() const { return rank_; }
  Status set(const std::string &key, const std::string &value);
  StatusOr<std::optional<std::string>> get(const std::string &key);
  // Adds `delta` to the integer at `key` (0 when absent); the new value.
  StatusOr<int64_t> add(const std::string &key, int64_t delta);
  // The values of `keys` that exist (nullopt for those that don't), in one
  // round trip.
  StatusOr<std::vector<std::optional<std::string>>>
  multiGet(const std::vector<std::string> &keys);

  // Waits until every key exists and returns their values. Fails at the
  // deadline (with onTimeout's message for the indices still missing, if
  // given) or as soon as the job has a failure notice.
  using MissingMessage =
      std::function<std::string(const std::vector<size_t> &missing)>;
  StatusOr<std::vector<std::string>>
  waitFor(const std::vector<std::string> &keys, Deadline deadline,
          const MissingMessage &onTimeout = nullptr);

  // Publishes `message` as the job's failure notice unless one is there (the
  // first failure is the cause; later ones are its consequences).
  Status reportFailure(const std::string &message);
  // The job's failure notice, "" while there is none; an error when the
  // store cannot be reached (rank 0 is gone). A notice any earlier answer
  // carried counts: rank 0 may be gone by the time anyone asks again.
  StatusOr<std::string> failureNotice();
  // Says goodbye: closing the connection after this is a clean exit.
  Status leave();

  // host:port, for messages.
  const std::string &address() const { return address_; }

private:
  StoreClient() = default;
  // An answer's payload and the failure notice it carried.
  struct Answer {
    std::string notice;
    std::string payload;
  };
  StatusOr<Answer> request(const std::string &body);
  StatusOr<std::vector<std::optional<std::string>>>
  multiGet(const std::vector<std::string> &keys, std::string *notice);
  Fd fd_;
  int rank_ = 0;
  std::string address_;
  Options options_;
  std::mutex mutex_;
  std::string brokenBecause_;
  // The first failure notice an answer carried.
  std::string notice_;
};

} // namespace octet::comm

#endif
