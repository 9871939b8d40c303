#ifndef OCTET_RUNTIME_COMM_COMMUNICATOR_H
#define OCTET_RUNTIME_COMM_COMMUNICATOR_H

// An NCCL communicator in non-blocking mode (ncclConfig_t.blocking = 0):
// no NCCL call blocks the host, so the watchdog can always abort a hung
// collective, and every wait here has a timeout. Calls on a communicator
// and its abort are serialized by a mutex, so an abort from the watchdog's
// thread never frees the communicator under a call in progress; calls made
// after an abort fail with a Status.
//
// Collectives go on the stream they are given (CommStream.h).

#include "bundle/bundle.pb.h"
#include "runtime/comm/NcclOptions.h"
#include "runtime/comm/NcclLibrary.h"
#include "runtime/comm/Watchdog.h"
#include "support/Status.h"

#include <cuda.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace octet::comm {

enum class ReduceOp { Sum, Avg, Max, Min };

// The bundle's Collective.reduce ("sum", "avg", "max", "min").
StatusOr<ReduceOp> parseReduceOp(const std::string &text);

// The NCCL type that carries octet's element type, for the loaded NCCL's
// version (NcclLibrary::version()). FP8 goes as FP8 where it is reduced
// (NCCL 2.24 and newer, sm_90) and as bytes (ncclUint8) where it is only
// moved (all-gather, broadcast, send/recv), which any NCCL does.
StatusOr<ncclDataType_t> ncclTypeFor(bundle::DType type, bool reduced,
                                     int ncclVersion);

// ncclCommSplit's color and key for `worldRank` given the groups of one
// kind (each a list of world ranks in group order, e.g. the bundle's DP
// groups): color = the index of its group, key = its place in it, or
// NCCL_SPLIT_NOCOLOR when it is in none. A rank in two groups of one kind
// is an error.
struct SplitKey {
  int color = NCCL_SPLIT_NOCOLOR;
  int key = 0;
};
StatusOr<SplitKey> splitKeyFor(const std::vector<std::vector<int>> &groups,
                               int worldRank);

// A new unique id (rank 0 makes it; the store carries its bytes).
StatusOr<std::string> newUniqueId(const NcclLibrary &nccl);


struct CommOptions {
  // For messages: "world", "dp", "pp".
  std::string name = "world";
  // Creating the communicator (every rank must join it).
  std::chrono::milliseconds initTimeout{std::chrono::minutes(2)};
  // One call waiting for NCCL to accept it (connection setup on first use).
  std::chrono::milliseconds callTimeout{std::chrono::minutes(5)};
};

class Communicator final : public Abortable {
public:
  // ncclCommInitRankConfig over `uniqueId` (the bytes of an ncclUniqueId).
  static StatusOr<std::unique_ptr<Communicator>>
  init(const NcclLibrary &nccl, const std::string &uniqueId, int nranks,
       int rank, const CommOptions &options);
  // Aborts a communicator that was not finalized (a failed rank).
  ~Communicator() override;
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;

  // ncclCommSplit: collective over this communicator. Null (and ok) for a
  // rank with NCCL_SPLIT_NOCOLOR.
  StatusOr<std::unique_ptr<Communicator>> split(SplitKey key,
                                                const CommOptions &options);

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string &name() const { return options_.name; }
  std::chrono::milliseconds callTimeout() const { return options_.callTimeout; }

  Status allReduce(const void *send, void *recv, size_t count,
                   ncclDataType_t type, ReduceOp op, CUstream stream);
  // recv gets recvCount elements: this rank's block of the reduced send.
  Status reduceScatter(const void *send, void *recv, size_t recvCount,
                       ncclDataType_t type, ReduceOp op, CUstream stream);
  // recv gets size() blocks of sendCount elements, in rank order.
  Status allGather(const void *send, void *recv, size_t sendCount,
                   ncclDataType_t type, CUstream stream);
  Status broadcast(const void *send, void *recv, size_t count,
                   ncclDataType_t type, int root, CUstream stream);
  Status send(const void *data, size_t count, ncclDataType_t type, int peer,
              CUstream stream);
  Status recv(void *data, size_t count, ncclDataType_t type, int peer,
              CUstream stream);

  // Abortable, for the watchdog.
  std::string describe() const override;
  Status pollAsyncError() override;
  void abort() override;

  // Registers [base, base + bytes), memory from ncclMemAlloc, for the
  // collectives that follow (nothing for None); finalize() deregisters
  // it. NCCL's rule: a collective's buffers are registered on every rank
  // of the communicator or on none (mixing is undefined), so every rank
  // registers the same arenas, whose slots sit at the same offsets.
  Status registerBuffer(void *base, size_t bytes, BufferRegistration how);

  // The clean end: ncclCommFinalize (waited for, up to the timeout), then
  // ncclCommDestroy.
  Status finalize(std::chrono::milliseconds timeout);

private:
  friend class CommGroup;
  Communicator(const NcclLibrary &nccl, const CommOptions &options)
      : nccl_(nccl), options_(options) {}
  // Waits until NCCL has finished the call that returned `result` on this
  // communicator (ncclInProgress) and turns failure into a Status.
  Status settle(ncclResult_t result, const char *call, const char *file,
                int line, std::chrono::milliseconds timeout);
  // Inside a group, a call only queues; the group's end waits.
  Status enqueued(ncclResult_t result, const char *call, const char *file,
                  int line);
  Status checkUsable() const;

  const NcclLibrary &nccl_;
  CommOptions options_;
  mutable std::mutex mutex_;
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 0;
  bool aborted_ = false, finalized_ = false;
  std::vector<void *> registered_;
};

// ncclGroupStart / ncclGroupEnd for the calls of one host thread (a
// pipeline step's send and recv go together). end() waits until NCCL has
// taken every call of the group.
class CommGroup {
public:
  static Status start(const NcclLibrary &nccl);
  static Status end(const NcclLibrary &nccl, std::chrono::milliseconds timeout);
};

} // namespace octet::comm

#endif
