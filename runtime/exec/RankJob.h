#ifndef OCTET_RUNTIME_EXEC_RANKJOB_H
#define OCTET_RUNTIME_EXEC_RANKJOB_H

// One rank of a job of several, as octet-run runs it:
//   join     before the GPU is set up: WORLD_SIZE checked against the
//            bundle, every rank met through rank 0's store, the bundles'
//            hashes compared (runtime/comm/Bootstrap.h);
//   connect  once the runtime is loaded (its device current): NCCL's unique
//            id from rank 0, the world communicator and one per group kind
//            of the bundle (split from it), handed to the runtime for its
//            programs' collectives; the watchdog starts watching them;
//   dataParallel  the trainer's view of the "data" group: its sums go
//            through an all-reduce, its heartbeats to the watchdog;
//   pipeline the same over a pipeline bundle's pipeline group (the loss
//            to rank 0, checkpoints' parts);
//   finish   the clean end. A RankJob destroyed without finish() is a
//            failed rank, which the other ranks learn at once.

#include "bundle/bundle.pb.h"
#include "runtime/comm/NcclOptions.h"
#include "runtime/comm/RankEnv.h"
#include "runtime/exec/TrainerOptions.h"
#include "support/Status.h"

#include <chrono>
#include <memory>

namespace octet {

class Runtime;
struct DeviceAllocator;

struct RankJobOptions {
  // No progress for this long is a hang, which ends every rank.
  std::chrono::milliseconds stepTimeout{std::chrono::minutes(10)};
  // How the data group's communicator may use the plan's arenas (which
  // then come from ncclMemAlloc: ncclAllocator()). Unset: registered for
  // a data-parallel layout without pipeline stages where NCCL can, else
  // none; registered for a pipeline layout is an error.
  std::optional<comm::BufferRegistration> ncclBuffers;
};

// ncclMemAlloc and ncclMemFree as an arena allocator (the library loaded
// on first use), for RuntimeOptions::planAllocator.
StatusOr<DeviceAllocator> ncclAllocator();

class RankJob {
public:
  // Null (and ok) for a bundle of one rank started without the job's
  // variables: the process trains alone.
  static StatusOr<std::unique_ptr<RankJob>>
  join(const bundle::Bundle &bundle, const comm::RankEnv &env,
       const RankJobOptions &options = {});
  ~RankJob();
  RankJob(const RankJob &) = delete;
  RankJob &operator=(const RankJob &) = delete;

  const comm::RankEnv &env() const;
  // What RankJobOptions::ncclBuffers came to for this bundle: the plan's
  // arenas must come from ncclAllocator() where it is not None.
  comm::BufferRegistration arenaRegistration() const;
  Status connect(Runtime &runtime);
  // Null when the bundle has no "data" group.
  std::shared_ptr<DataParallelGroup> dataParallel();
  // The same over this rank's pipeline group (Pipeline.group); null
  // without a pipeline.
  std::shared_ptr<DataParallelGroup> pipeline();
  // This rank's failure, for the other ranks to name ("rank 1: ...").
  void reportFailure(const std::string &message);
  Status finish();

private:
  struct Impl;
  explicit RankJob(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace octet

#endif
