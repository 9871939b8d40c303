#include "runtime/comm/Communicator.h"

#include "runtime/comm/Socket.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

namespace octet::comm {

namespace {

// The calls of this thread's open group (CommGroup), and how deep it is.
thread_local int groupDepth = 0;
thread_local std::vector<Communicator *> groupMembers;

// The bundle's reductions (Collective.reduce), octet's and NCCL's names.
struct ReduceName {
  const char *text;
  ReduceOp op;
  ncclRedOp_t nccl;
};
constexpr ReduceName kReductions[] = {{"sum", ReduceOp::Sum, ncclSum},
                                      {"avg", ReduceOp::Avg, ncclAvg},
                                      {"max", ReduceOp::Max, ncclMax},
                                      {"min", ReduceOp::Min, ncclMin}};

ncclRedOp_t toNccl(ReduceOp op) {
  for (const ReduceName &r : kReductions)
    if (r.op == op)
      return r.nccl;
  return ncclSum;
}

// Element types that NCCL reduces and moves as themselves.
constexpr std::pair<bundle::DType, ncclDataType_t> kPlainTypes[] = {
    {bundle::F32, ncclFloat32}, {bundle::BF16, ncclBfloat16},
    {bundle::F16, ncclFloat16}, {bundle::I32, ncclInt32},
    {bundle::I64, ncclInt64},   {bundle::U8, ncclUint8}};

// Polls `ready` (true when done, or a failure) until the deadline, first
// spinning briefly: an enqueue usually completes in microseconds.
template <typename Poll>
Status pollUntil(Poll &&ready, Deadline deadline,
                 const std::string &whatTimedOut) {
  for (int spins = 0;; ++spins) {
    bool done = false;
    Status status = ready(done);
    if (!status || done)
      return status;
    if (Clock::now() >= deadline)
      return Status::error(whatTimedOut);
    if (spins < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

} // namespace

StatusOr<ReduceOp> parseReduceOp(const std::string &text) {
  for (const ReduceName &r : kReductions)
    if (text == r.text)
      return r.op;
  return Status::error("collective reduction '" + text +
                       "' is not one of sum, avg, max, min (a bundle from "
                       "another compiler version?)");
}

StatusOr<ncclDataType_t> ncclTypeFor(bundle::DType type, bool reduced,
                                     int ncclVersion) {
  for (const auto &[dtype, nccl] : kPlainTypes)
    if (dtype == type)
      return nccl;
  if (type != bundle::F8E4M3FN && type != bundle::F8E5M2)
    return Status::error("element type " + bundle::DType_Name(type) +
                         " has no NCCL type");
  if (!reduced)
    return ncclUint8;
  if (ncclVersion < kNcclFp8Version)
    return Status::error("an FP8 reduction needs NCCL 2.24 or newer, but the "
                         "loaded NCCL is " +
                         ncclVersionString(ncclVersion) +
                         ": install a newer NCCL, or set OCTET_NCCL to one");
  return type == bundle::F8E4M3FN ? ncclFloat8e4m3 : ncclFloat8e5m2;
}

StatusOr<SplitKey> splitKeyFor(const std::vector<std::vector<int>> &groups,
                               int worldRank) {
  SplitKey found;
  for (size_t g = 0; g < groups.size(); ++g) {
    auto at = std::find(groups[g].begin(), groups[g].end(), worldRank);
    if (at == groups[g].end())
      continue;
    if (found.color != NCCL_SPLIT_NOCOLOR)
      return Status::error("rank " + std::to_string(worldRank) +
                           " is in groups " + std::to_string(found.color) +
                           " and " + std::to_string(g) +
                           " of one kind: the bundle's groups overlap");
    found.color = int(g);
    found.key = int(at - groups[g].begin());
  }
  return found;
}

StatusOr<std::string> newUniqueId(const NcclLibrary &nccl) {
  ncclUniqueId id;
  OCTET_CHECK_NCCL(nccl.api().getUniqueId(&id));
  return std::string(id.internal, sizeof(id.internal));
}

//===----------------------------------------------------------------------===//
// Communicator
//===----------------------------------------------------------------------===//

StatusOr<std::unique_ptr<Communicator>>
Communicator::init(const NcclLibrary &nccl, const std::string &uniqueId,
                   int nranks, int rank, const CommOptions &options) {
  ncclUniqueId id;
  if (uniqueId.size() != sizeof(id.internal))
    return Status::error(
        "an NCCL unique id of " + std::to_string(uniqueId.size()) +
        " bytes (NCCL's has " + std::to_string(sizeof(id.internal)) + ")");
  std::memcpy(id.internal, uniqueId.data(), sizeof(id.internal));
  std::unique_ptr<Communicator> c(new Communicator(nccl, options));
  c->rank_ = rank;
  c->size_ = nranks;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = c->options_.name.c_str();
  ncclResult_t result;
  {
    std::lock_guard<std::mutex> lock(c->mutex_);
    result =
        nccl.api().commInitRankConfig(&c->comm_, nranks, id, rank, &config);
  }
  OCTET_RETURN_IF_ERROR(c->settle(result, "ncclCommInitRankConfig", __FILE__,
                                  __LINE__, options.initTimeout));
  return c;
}

Communicator::~Communicator() {
  if (!finalized_)
    abort();
}

std::string Communicator::describe() const {
  return "communicator '" + options_.name + "' (rank " + std::to_string(rank_) +
         " of " + std::to_string(size_) + ")";
}

Status Communicator::checkUsable() const {
  if (aborted_)
    return Status::error(describe() +
                         " was aborted (the watchdog is ending the job)");
  if (!comm_)
    return Status::error(describe() + " is closed");
  return Status::ok();
}

Status Communicator::settle(ncclResult_t result, const char *call,
                            const char *file, int line,
                            std::chrono::milliseconds timeout) {
  if (result == ncclSuccess)
    return Status::ok();
  if (result != ncclInProgress)
    return ncclError(result, call, file, line).withContext(describe());
  auto ready = [&](bool &done) -> Status {
    std::lock_guard<std::mutex> lock(mutex_);
    OCTET_RETURN_IF_ERROR(checkUsable());
    ncclResult_t state = ncclSuccess;
    OCTET_CHECK_NCCL(nccl_.api().commGetAsyncError(comm_, &state));
    if (state != ncclSuccess && state != ncclInProgress)
      return ncclError(state, call, file, line).withContext(describe());
    done = state == ncclSuccess;
    return Status::ok();
  };
  return pollUntil(ready, Clock::now() + timeout,
                   std::string(call) + " on " + describe() +
                       " did not finish within " + describeDuration(timeout) +
                       ": a rank did not make the same call (see the other "
                       "ranks' output)");
}

Status Communicator::enqueued(ncclResult_t result, const char *call,
                              const char *file, int line) {
  if (groupDepth > 0 && (result == ncclSuccess || result == ncclInProgress)) {
    if (std::find(groupMembers.begin(), groupMembers.end(), this) ==
        groupMembers.end())
      groupMembers.push_back(this);
    return Status::ok();
  }
  return settle(result, call, file, line, options_.callTimeout);
}

// Every collective: call NCCL under the lock (never while an abort runs),
// then wait, with the lock released, for NCCL to take the call.
#define OCTET_COMM_ENQUEUE(name, ...)                                          \
  do {                                                                         \
    ncclResult_t octetResult_;                                                 \
    {                                                                          \
      std::lock_guard<std::mutex> lock(mutex_);                                \
      OCTET_RETURN_IF_ERROR(checkUsable());                                    \
      octetResult_ = nccl_.api().__VA_ARGS__;                                  \
    }                                                                          \
    return enqueued(octetResult_, name, __FILE__, __LINE__);                   \
  } while (0)

Status Communicator::allReduce(const void *send, void *recv, size_t count,
                               ncclDataType_t type, ReduceOp op,
                               CUstream stream) {
  OCTET_COMM_ENQUEUE("ncclAllReduce", allReduce(send, recv, count, type,
                                                toNccl(op), comm_, stream));
}

Status Communicator::reduceScatter(const void *send, void *recv,
                                   size_t recvCount, ncclDataType_t type,
                                   ReduceOp op, CUstream stream) {
  OCTET_COMM_ENQUEUE(
      "ncclReduceScatter",
      reduceScatter(send, recv, recvCount, type, toNccl(op), comm_, stream));
}

Status Communicator::allGather(const void *send, void *recv, size_t sendCount,
                               ncclDataType_t type, CUstream stream) {
  OCTET_COMM_ENQUEUE("ncclAllGather",
                     allGather(send, recv, sendCount, type, comm_, stream));
}

Status Communicator::broadcast(const void *send, void *recv, size_t count,
                               ncclDataType_t type, int root, CUstream stream) {
  OCTET_COMM_ENQUEUE("ncclBroadcast",
                     broadcast(send, recv, count, type, root, comm_, stream));
}

Status Communicator::send(const void *data, size_t count, ncclDataType_t type,
                          int peer, CUstream stream) {
  OCTET_COMM_ENQUEUE("ncclSend", send(data, count, type, peer, comm_, stream));
}

Status Communicator::recv(void *data, size_t count, ncclDataType_t type,
                          int peer, CUstream stream) {
  OCTET_COMM_ENQUEUE("ncclRecv", recv(data, count, type, peer, comm_, stream));
}

#undef OCTET_COMM_ENQUEUE

StatusOr<std::unique_ptr<Communicator>>
Communicator::split(SplitKey key, const CommOptions &options) {
  std::unique_ptr<Communicator> child(new Communicator(nccl_, options));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = child->options_.name.c_str();
  ncclResult_t result;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    OCTET_RETURN_IF_ERROR(checkUsable());
    result = nccl_.api().commSplit(comm_, key.color, key.key, &child->comm_,
                                   &config);
  }
  // The split is collective over this communicator, which may not be used
  // again before it completes; and NCCL writes the child's handle only then
  // (since 2.23: *newcomm stays null while the parent is ncclInProgress).
  // The call's ncclSuccess means taken, not done: the parent's own state
  // says when it is done.
  OCTET_RETURN_IF_ERROR(settle(result == ncclSuccess ? ncclInProgress : result,
                               "ncclCommSplit", __FILE__, __LINE__,
                               options.initTimeout));
  if (key.color == NCCL_SPLIT_NOCOLOR)
    return std::unique_ptr<Communicator>(); // in no group of this kind
  if (!child->comm_)
    return ncclError(ncclInternalError, "ncclCommSplit", __FILE__, __LINE__)
        .withContext(describe() + " gave no communicator '" + options.name +
                     "' although the split completed");
  child->rank_ = key.key;
  child->size_ = 0;
  // The child may still be setting up its connections.
  OCTET_RETURN_IF_ERROR(child->settle(ncclInProgress, "ncclCommSplit",
                                      __FILE__, __LINE__,
                                      options.initTimeout));
  std::lock_guard<std::mutex> lock(child->mutex_);
  OCTET_CHECK_NCCL(nccl_.api().commCount(child->comm_, &child->size_));
  OCTET_CHECK_NCCL(nccl_.api().commUserRank(child->comm_, &child->rank_));
  return child;
}

Status Communicator::pollAsyncError() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_ || !comm_)
    return Status::ok();
  ncclResult_t state = ncclSuccess;
  OCTET_CHECK_NCCL(nccl_.api().commGetAsyncError(comm_, &state));
  if (state == ncclSuccess || state == ncclInProgress)
    return Status::ok();
  return ncclError(state, "ncclCommGetAsyncError", __FILE__, __LINE__);
}

void Communicator::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_ || !comm_)
    return;
  aborted_ = true;
  // Its result says nothing useful: the communicator is gone either way.
  (void)nccl_.api().commAbort(comm_);
  comm_ = nullptr;
}

Status Communicator::registerBuffer(void *base, size_t bytes,
                                    BufferRegistration how) {
  const NcclApi &api = nccl_.api();
  if (how == BufferRegistration::None)
    return Status::ok();
  if (!api.commRegister || !api.commDeregister)
    return Status::error(nccl_.path() + " (NCCL " + nccl_.versionString() +
                         ") has no ncclCommRegister (NCCL 2.19 and newer): "
                         "use --nccl-buffers none, or a newer NCCL "
                         "(OCTET_NCCL)");
  ncclResult_t result;
  void *handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    OCTET_RETURN_IF_ERROR(checkUsable());
    result = api.commRegister(comm_, base, bytes, &handle);
  }
  OCTET_RETURN_IF_ERROR(settle(result, "ncclCommRegister", __FILE__, __LINE__,
                               options_.callTimeout));
  std::lock_guard<std::mutex> lock(mutex_);
  registered_.push_back(handle);
  return Status::ok();
}

Status Communicator::finalize(std::chrono::milliseconds timeout) {
  ncclResult_t result;
  for (void *h : registered_) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      OCTET_RETURN_IF_ERROR(checkUsable());
      result = nccl_.api().commDeregister(comm_, h);
    }
    OCTET_RETURN_IF_ERROR(
        settle(result, "ncclCommDeregister", __FILE__, __LINE__, timeout));
  }
  registered_.clear();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    OCTET_RETURN_IF_ERROR(checkUsable());
    result = nccl_.api().commFinalize(comm_);
  }
  OCTET_RETURN_IF_ERROR(
      settle(result, "ncclCommFinalize", __FILE__, __LINE__, timeout));
  std::lock_guard<std::mutex> lock(mutex_);
  OCTET_RETURN_IF_ERROR(checkUsable());
  result = nccl_.api().commDestroy(comm_);
  comm_ = nullptr;
  finalized_ = true;
  // The handle is gone either way: a non-blocking communicator may still be
  // releasing resources (ncclInProgress), which nothing here waits on.
  if (result != ncclSuccess && result != ncclInProgress)
    return ncclError(result, "ncclCommDestroy", __FILE__, __LINE__);
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Groups
//===----------------------------------------------------------------------===//

Status CommGroup::start(const NcclLibrary &nccl) {
  OCTET_CHECK_NCCL(nccl.api().groupStart());
  if (groupDepth++ == 0)
    groupMembers.clear();
  return Status::ok();
}

Status CommGroup::end(const NcclLibrary &nccl,
                      std::chrono::milliseconds timeout) {
  if (groupDepth == 0)
    return Status::error("CommGroup::end without CommGroup::start");
  if (--groupDepth > 0) {
    ncclResult_t inner = nccl.api().groupEnd();
    return inner == ncclSuccess || inner == ncclInProgress
               ? Status::ok()
               : ncclError(inner, "ncclGroupEnd", __FILE__, __LINE__);
  }
  std::vector<Communicator *> members;
  members.swap(groupMembers);
  ncclResult_t result;
  {
    // The group's communicators stay alive (no abort) while NCCL launches
    // it; locked in one order, as the watchdog only ever holds one.
    std::sort(members.begin(), members.end());
    std::vector<std::unique_lock<std::mutex>> locks;
    for (Communicator *c : members) {
      locks.emplace_back(c->mutex_);
      OCTET_RETURN_IF_ERROR(c->checkUsable());
    }
    result = nccl.api().groupEnd();
  }
  if (result != ncclSuccess && result != ncclInProgress)
    return ncclError(result, "ncclGroupEnd", __FILE__, __LINE__);
  // The group's calls are done once each communicator in it is ready.
  for (Communicator *c : members)
    OCTET_RETURN_IF_ERROR(
        c->settle(ncclInProgress, "ncclGroupEnd", __FILE__, __LINE__, timeout));
  return Status::ok();
}

} // namespace octet::comm
