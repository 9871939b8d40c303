#ifndef OCTET_RUNTIME_COMM_BOOTSTRAP_H
#define OCTET_RUNTIME_COMM_BOOTSTRAP_H

// The start of a multi-rank job: rank 0 runs the store, every rank joins it,
// all ranks wait for each other (naming those that never arrive) and compare
// their bundles' hashes, then share what rank 0 makes (NCCL's unique id).
// World size 1 is the same code with a store on a loopback port.
//
// Shutdown is explicit: finish() says goodbye. A Bootstrap destroyed without
// finish() is a failed rank: its store connection closes unannounced and the
// others learn it has been lost.

#include "runtime/comm/RankEnv.h"
#include "runtime/comm/Store.h"
#include "support/Status.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace octet::comm {

struct BootstrapOptions {
  RankEnv env;
  // The bundle's content hash (hex): every rank must run the same bundle.
  std::string bundleHash;
  // The world size the bundle was compiled for; 0 skips the check.
  uint32_t bundleWorldSize = 0;
  // Its parallel layout, for the message when the sizes differ
  // ("pipeline 2 × data 1"); empty for none.
  std::string bundleLayout;
  // Finding rank 0's store and every rank arriving.
  std::chrono::milliseconds joinTimeout{std::chrono::seconds(120)};
  std::chrono::milliseconds requestTimeout{std::chrono::seconds(30)};
  // How long rank 0, failing, waits for the others to read the cause.
  std::chrono::milliseconds lingerOnFailure{std::chrono::seconds(2)};
};

class Bootstrap {
public:
  static StatusOr<std::unique_ptr<Bootstrap>>
  join(const BootstrapOptions &options);
  ~Bootstrap();
  Bootstrap(const Bootstrap &) = delete;
  Bootstrap &operator=(const Bootstrap &) = delete;

  const RankEnv &env() const { return options_.env; }
  int rank() const { return options_.env.rank; }
  int worldSize() const { return options_.env.worldSize; }
  StoreClient &store() { return *client_; }
  // The store this rank runs (rank 0), else null.
  StoreServer *server() { return server_.get(); }
  // "127.0.0.1:29500".
  const std::string &storeAddress() const { return client_->address(); }

  // Returns once every rank has reached the barrier called `name` (the n-th
  // call with one name is its n-th barrier); at the timeout, an error naming
  // the ranks that did not arrive.
  Status barrier(const std::string &name, std::chrono::milliseconds timeout);

  // Rank 0 makes a value (make() runs there only) and every rank returns it.
  // A failure of make() on rank 0 becomes the job's failure notice, so the
  // other ranks fail with rank 0's message at once rather than at the
  // timeout.
  StatusOr<std::string>
  shareFromRank0(const std::string &key,
                 const std::function<StatusOr<std::string>()> &make,
                 std::chrono::milliseconds timeout);

  // Publishes "rank R: message" as the job's failure (the first one wins).
  Status reportFailure(const std::string &message);

  // The clean end of a job: a barrier, then goodbye; rank 0 keeps its store
  // up until the others have left (or the timeout). Stop the watchdog first:
  // a rank that has left no longer answers its questions.
  Status finish(std::chrono::milliseconds timeout);

private:
  Bootstrap() = default;
  Status compareBundles();
  Status published(const Status &failure);
  std::string ranksNamed(const std::vector<size_t> &missing) const;
  BootstrapOptions options_;
  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<StoreClient> client_;
  std::map<std::string, int> barrierCalls_;
  bool finished_ = false;
};

} // namespace octet::comm

#endif
