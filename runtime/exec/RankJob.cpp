#include "runtime/exec/RankJob.h"

#include "bundle/PipelineBundle.h"
#include "runtime/comm/Bootstrap.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/Watchdog.h"
#include "runtime/core/CudaCheck.h"
#include "runtime/core/Device.h"
#include "runtime/exec/Runtime.h"
#include "support/Sha256.h"

#include <map>

namespace octet {

using namespace std::chrono_literals;

namespace {

// The trainer's sums as one f64 all-reduce over a group's communicator
// (the "data" group's, or a pipeline's).
// They come once per step, after the step has finished on the device, so
// the copies wait for the stream.
class NcclDataGroup : public DataParallelGroup {
public:
  NcclDataGroup(comm::Communicator &comm, comm::Watchdog &watchdog)
      : comm_(comm), watchdog_(watchdog) {}
  ~NcclDataGroup() override {
    if (buffer_)
      cuMemFree(buffer_);
  }
  Status init() {
    auto s = Stream::create();
    if (!s)
      return s.status();
    stream_ = std::move(*s);
    return Status::ok();
  }
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  Status sum(std::vector<double> &values) override {
    if (values.empty())
      return Status::ok();
    uint64_t bytes = values.size() * sizeof(double);
    if (bytes > capacity_) {
      if (buffer_)
        cuMemFree(buffer_);
      buffer_ = 0;
      OCTET_CHECK_CUDA(cuMemAlloc(&buffer_, bytes));
      capacity_ = bytes;
    }
    CUstream s = stream_->handle();
    OCTET_CHECK_CUDA(cuMemcpyHtoDAsync(buffer_, values.data(), bytes, s));
    OCTET_RETURN_IF_ERROR(comm_.allReduce(
        reinterpret_cast<const void *>(buffer_),
        reinterpret_cast<void *>(buffer_), values.size(), ncclFloat64,
        comm::ReduceOp::Sum, s));
    OCTET_CHECK_CUDA(cuMemcpyDtoHAsync(values.data(), buffer_, bytes, s));
    return stream_->synchronize();
  }
  // Through a device buffer of the whole size, freed at once: checkpoints
  // only, outside any step, so the plan's arena is untouched.
  Status gather(const std::vector<uint8_t> &mine,
                std::vector<uint8_t> &all) override {
    uint64_t bytes = mine.size();
    all.assign(bytes * uint64_t(size()), 0);
    if (bytes == 0)
      return Status::ok();
    CUdeviceptr whole = 0;
    OCTET_CHECK_CUDA(cuMemAlloc(&whole, all.size()));
    CUstream s = stream_->handle();
    CUdeviceptr own = whole + bytes * uint64_t(rank());
    Status done = [&]() -> Status {
      OCTET_CHECK_CUDA(cuMemcpyHtoDAsync(own, mine.data(), bytes, s));
      OCTET_RETURN_IF_ERROR(comm_.allGather(
          reinterpret_cast<const void *>(own), reinterpret_cast<void *>(whole),
          bytes, ncclUint8, s));
      OCTET_CHECK_CUDA(cuMemcpyDtoHAsync(all.data(), whole, all.size(), s));
      return stream_->synchronize();
    }();
    cuMemFree(whole);
    return done;
  }
  void heartbeat(int64_t step) override { watchdog_.heartbeat(step); }

private:
  comm::Communicator &comm_;
  comm::Watchdog &watchdog_;
  std::unique_ptr<Stream> stream_;
  CUdeviceptr buffer_ = 0;
  uint64_t capacity_ = 0;
};

} // namespace

struct RankJob::Impl {
  RankJobOptions options;
  const bundle::Bundle *bundle = nullptr;
  std::unique_ptr<comm::Bootstrap> boot;
  const comm::NcclLibrary *nccl = nullptr;
  std::unique_ptr<comm::Communicator> world;
  // One per group kind that is not the whole world, in the bundle's order.
  std::vector<std::unique_ptr<comm::Communicator>> splits;
  std::unique_ptr<comm::Watchdog> watchdog;
  std::shared_ptr<NcclDataGroup> data, pipeline;
  comm::BufferRegistration arenas = comm::BufferRegistration::None;
  bool finished = false;
};

RankJob::RankJob(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RankJob::~RankJob() {
  if (!impl_->finished && impl_->watchdog)
    impl_->watchdog->stop();
}

StatusOr<std::unique_ptr<RankJob>> RankJob::join(const bundle::Bundle &bundle,
                                                 const comm::RankEnv &env,
                                                 const RankJobOptions &options) {
  if (!env.fromEnvironment && bundle.world_size() <= 1)
    return std::unique_ptr<RankJob>();
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->bundle = &bundle;
  comm::BootstrapOptions bo;
  bo.env = env;
  bo.bundleHash = bundle::toHex(bundle.content_hash());
  bo.bundleWorldSize = bundle.world_size();
  bo.bundleLayout = bundle::parallelLayout(bundle);
  bool dataGroup = false;
  for (const bundle::Group &g : bundle.groups())
    dataGroup |= g.name() == "data";
  using comm::BufferRegistration;
  if (options.ncclBuffers == BufferRegistration::Registered &&
      (bundle.has_pipeline() || !dataGroup))
    return Status::error(
        "--nccl-buffers registered registers the plan's arenas with the "
        "data-parallel group's communicator, which this bundle's ranks do "
        "not share (" +
        std::string(bundle.has_pipeline() ? "pipeline stages"
                                          : "no data group") +
        "): leave it out");
  if (options.ncclBuffers) {
    impl->arenas = *options.ncclBuffers;
  } else if (dataGroup && !bundle.has_pipeline()) {
    // The default only where the library has it (NCCL 2.19 and newer).
    auto nccl = comm::NcclLibrary::get();
    if (nccl && (*nccl)->api().memAlloc && (*nccl)->api().commRegister)
      impl->arenas = BufferRegistration::Registered;
  }
  auto boot = comm::Bootstrap::join(bo);
  if (!boot)
    return boot.status();
  impl->boot = std::move(*boot);
  return std::unique_ptr<RankJob>(new RankJob(std::move(impl)));
}

const comm::RankEnv &RankJob::env() const { return impl_->boot->env(); }

comm::BufferRegistration RankJob::arenaRegistration() const {
  return impl_->arenas;
}

Status RankJob::connect(Runtime &runtime) {
  Impl &j = *impl_;
  comm::Bootstrap &b = *j.boot;
  auto nccl = comm::NcclLibrary::get();
  auto id = b.shareFromRank0(
      "octet/nccl-id/world",
      [&]() -> StatusOr<std::string> {
        if (!nccl)
          return nccl.status();
        return comm::newUniqueId(**nccl);
      },
      2min);
  if (!id)
    return id.status();
  if (!nccl)
    return nccl.status();
  j.nccl = *nccl;
  comm::CommOptions worldOptions;
  worldOptions.name = "world";
  auto world = comm::Communicator::init(*j.nccl, *id, b.worldSize(), b.rank(),
                                        worldOptions);
  if (!world)
    return world.status();
  j.world = std::move(*world);

  // Groups of one name are one kind ("data", later "pipeline"): a kind
  // that spans the world in rank order is the world communicator, any
  // other is split from it, every rank splitting in the same order.
  const bundle::Bundle &bundle = *j.bundle;
  std::vector<std::string> kinds;
  std::map<std::string, std::vector<std::vector<int>>> groupsOf;
  for (const bundle::Group &g : bundle.groups()) {
    if (!groupsOf.count(g.name()))
      kinds.push_back(g.name());
    groupsOf[g.name()].push_back({g.ranks().begin(), g.ranks().end()});
  }
  std::map<std::string, comm::Communicator *> commOf;
  for (const std::string &kind : kinds) {
    const auto &groups = groupsOf[kind];
    bool whole = groups.size() == 1 &&
                 groups[0].size() == size_t(b.worldSize());
    for (size_t r = 0; whole && r < groups[0].size(); ++r)
      whole = groups[0][r] == int(r);
    if (whole) {
      commOf[kind] = j.world.get();
      continue;
    }
    auto key = comm::splitKeyFor(groups, b.rank());
    if (!key)
      return key.status().withContext("bundle group '" + kind + "'");
    comm::CommOptions o;
    o.name = kind;
    auto split = j.world->split(*key, o);
    if (!split)
      return split.status();
    commOf[kind] = split->get();
    j.splits.push_back(std::move(*split));
  }
  std::vector<comm::Communicator *> byGroup;
  for (const bundle::Group &g : bundle.groups()) {
    bool member = false;
    for (uint32_t r : g.ranks())
      member |= int(r) == b.rank();
    byGroup.push_back(member ? commOf[g.name()] : nullptr);
  }
  OCTET_RETURN_IF_ERROR(runtime.connect(*j.nccl, byGroup));
  if (j.arenas != comm::BufferRegistration::None) {
    comm::Communicator *data = commOf.count("data") ? commOf["data"] : nullptr;
    if (!data)
      return Status::error("this rank is in no data group: recompile the "
                           "bundle");
    for (const auto &arena : runtime.planArenas())
      OCTET_RETURN_IF_ERROR(data->registerBuffer(
          reinterpret_cast<void *>(arena->base()), arena->bytes(), j.arenas));
  }

  comm::WatchdogOptions wo;
  wo.rank = b.rank();
  wo.worldSize = b.worldSize();
  wo.stepTimeout = j.options.stepTimeout;
  j.watchdog = comm::Watchdog::start(wo, &b.store(), b.server());
  j.watchdog->watch(j.world.get());
  for (auto &s : j.splits)
    if (s)
      j.watchdog->watch(s.get());

  auto data = commOf.find("data");
  if (data != commOf.end() && data->second) {
    j.data = std::make_shared<NcclDataGroup>(*data->second, *j.watchdog);
    OCTET_RETURN_IF_ERROR(j.data->init());
  }
  if (bundle.has_pipeline()) {
    auto pipe = commOf.find(bundle.pipeline().group());
    if (pipe == commOf.end() || !pipe->second)
      return Status::error("the bundle has no '" + bundle.pipeline().group() +
                           "' groups for its pipeline: recompile it");
    j.pipeline = std::make_shared<NcclDataGroup>(*pipe->second, *j.watchdog);
    OCTET_RETURN_IF_ERROR(j.pipeline->init());
  }
  return Status::ok();
}

StatusOr<DeviceAllocator> ncclAllocator() {
  auto nccl = comm::NcclLibrary::get();
  if (!nccl)
    return nccl.status();
  const comm::NcclLibrary *lib = *nccl;
  if (!lib->api().memAlloc || !lib->api().memFree)
    return Status::error(lib->path() + " (NCCL " + lib->versionString() +
                         ") has no ncclMemAlloc (NCCL 2.19 and newer): use "
                         "--nccl-buffers none, or a newer NCCL (OCTET_NCCL)");
  DeviceAllocator a;
  a.name = "ncclMemAlloc";
  a.allocate = [lib](uint64_t bytes) -> StatusOr<CUdeviceptr> {
    void *p = nullptr;
    ncclResult_t r = lib->api().memAlloc(&p, bytes);
    if (r == ncclSuccess)
      return reinterpret_cast<CUdeviceptr>(p);
    // NCCL reports an exhausted device as a CUDA error; Arena explains
    // what to shrink when it sees no memory.
    size_t freeBytes = 0, total = 0;
    if (cuMemGetInfo(&freeBytes, &total) == CUDA_SUCCESS && freeBytes < bytes)
      return CUdeviceptr(0);
    return comm::ncclError(r, "ncclMemAlloc", __FILE__, __LINE__);
  };
  a.release = [lib](CUdeviceptr p) {
    (void)lib->api().memFree(reinterpret_cast<void *>(p));
  };
  return a;
}

std::shared_ptr<DataParallelGroup> RankJob::dataParallel() {
  return impl_->data;
}

std::shared_ptr<DataParallelGroup> RankJob::pipeline() {
  return impl_->pipeline;
}

void RankJob::reportFailure(const std::string &message) {
  (void)impl_->boot->reportFailure(message);
}

Status RankJob::finish() {
  Impl &j = *impl_;
  if (j.watchdog) {
    j.watchdog->unwatch(j.world.get());
    for (auto &s : j.splits)
      if (s)
        j.watchdog->unwatch(s.get());
    j.watchdog->stop();
  }
  j.data.reset();
  j.pipeline.reset();
  for (auto &s : j.splits)
    if (s)
      OCTET_RETURN_IF_ERROR(s->finalize(1min));
  if (j.world)
    OCTET_RETURN_IF_ERROR(j.world->finalize(1min));
  j.finished = true;
  return j.boot->finish(1min);
}

} // namespace octet
