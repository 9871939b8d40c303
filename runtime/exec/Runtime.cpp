#include "runtime/exec/Runtime.h"

#include "bundle/Bundle.h"
#include "bundle/PipelineBundle.h"
#include "runtime/comm/Communicator.h"
#include "runtime/exec/PipelineExecutor.h"
#include "runtime/exec/RuntimePrepared.h"
#include "runtime/exec/TimelineRecorder.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

namespace octet {

using namespace octet::bundle;

// The pipeline rank's device: compute instructions on the main stream,
// communication groups on a stream of their own (high priority, like the
// collectives' streams, and outside the programs' joins so that a transfer
// overlaps the compute it does not feed), each instruction recording an
// event that the instructions ordered after it wait for.
class Runtime::PipelineStream : public PipelineDevice {
public:
  static StatusOr<std::unique_ptr<PipelineStream>>
  create(Runtime &rt, const PipelineRankPlan &plan, bool timed) {
    std::unique_ptr<PipelineStream> p(new PipelineStream(rt));
    int least = 0, greatest = 0;
    OCTET_CHECK_CUDA(cuCtxGetStreamPriorityRange(&least, &greatest));
    auto s = Stream::create(greatest);
    if (!s)
      return s.status();
    p->stream_ = std::move(*s);
    p->events_.assign(plan.work.size() + 2, nullptr);
    for (CUevent &e : p->events_)
      OCTET_CHECK_CUDA(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    if (timed) {
      p->begins_.assign(plan.work.size(), nullptr);
      p->ends_.assign(plan.work.size(), nullptr);
      for (auto *events : {&p->begins_, &p->ends_})
        for (CUevent &e : *events)
          OCTET_CHECK_CUDA(cuEventCreate(&e, CU_EVENT_DEFAULT));
      OCTET_CHECK_CUDA(cuEventCreate(&p->timedStart_, CU_EVENT_DEFAULT));
    }
    // The pipeline group this rank is in.
    const bundle::Bundle &b = rt.bundle_;
    for (int g = 0; g < b.groups_size(); ++g)
      if (b.groups(g).name() == b.pipeline().group())
        for (uint32_t r : b.groups(g).ranks())
          if (int(r) == rt.rank_)
            p->group_ = uint32_t(g);
    return p;
  }
  ~PipelineStream() override {
    for (auto *events : {&events_, &begins_, &ends_})
      for (CUevent e : *events)
        if (e)
          cuEventDestroy(e);
    if (timedStart_)
      cuEventDestroy(timedStart_);
  }

  // The last step's instructions, from the timing events (the step must
  // have been enqueued with them).
  StatusOr<std::vector<PipeOpTiming>> timings() {
    if (!timedStart_)
      return Status::error("the pipeline step was not timed: load the "
                           "runtime with RuntimeOptions.pipelineTimeline");
    std::vector<PipeOpTiming> out(begins_.size());
    for (size_t i = 0; i < begins_.size(); ++i) {
      OCTET_CHECK_CUDA(cuEventSynchronize(ends_[i]));
      OCTET_CHECK_CUDA(
          cuEventElapsedTime(&out[i].beginMs, timedStart_, begins_[i]));
      OCTET_CHECK_CUDA(cuEventElapsedTime(&out[i].endMs, timedStart_, ends_[i]));
    }
    return out;
  }
  Status synchronize() { return stream_->synchronize(); }

  std::function<Status(const PipeWork &)> stage;

  Status beginStep(const PipelineRankPlan &plan) override {
    CUstream main = rt_.mainStream();
    if (plan.lossSumSlot >= 0) {
      SlotRef ref;
      ref.set_slot(uint32_t(plan.lossSumSlot));
      auto loss = rt_.slotAddress(ref);
      if (!loss)
        return loss.status();
      OCTET_CHECK_CUDA(cuMemsetD8Async(
          *loss, 0, rt_.bundle_.plan().slots(plan.lossSumSlot).bytes(), main));
    }
    // Receives of this step land in entries that the previous step's
    // programs used.
    OCTET_CHECK_CUDA(cuEventRecord(startEvent(), main));
    OCTET_CHECK_CUDA(cuStreamWaitEvent(stream_->handle(), startEvent(), 0));
    if (timedStart_)
      OCTET_CHECK_CUDA(cuEventRecord(timedStart_, main));
    return Status::ok();
  }

  Status compute(const PipeWork &w) override {
    CUstream main = rt_.mainStream();
    if (w.waitFor >= 0)
      OCTET_CHECK_CUDA(cuStreamWaitEvent(main, events_[size_t(w.waitFor)], 0));
    if (timedStart_)
      OCTET_CHECK_CUDA(cuEventRecord(begins_[w.index], main));
    if (w.program->inputs_size() > 0 && stage)
      OCTET_RETURN_IF_ERROR(stage(w));
    PreparedProgram *p = rt_.findChunk(w.program->kind(), w.program->chunk(),
                                       w.entry);
    if (!p)
      return Status::error("program '" + w.program->name() +
                           "' is not prepared for stash entry " +
                           std::to_string(w.entry));
    OCTET_RETURN_IF_ERROR(
        rt_.runPrepared(*p, w.lastMicrobatch, w.firstMicrobatch)
            .withContext("program '" + w.program->name() + "' microbatch " +
                         std::to_string(w.instruction->microbatch())));
    OCTET_CHECK_CUDA(cuEventRecord(events_[w.index], main));
    if (timedStart_)
      OCTET_CHECK_CUDA(cuEventRecord(ends_[w.index], main));
    return Status::ok();
  }

  Status communicate(const PipeWork &w) override {
    CUstream s = stream_->handle();
    if (w.waitFor >= 0)
      OCTET_CHECK_CUDA(cuStreamWaitEvent(s, events_[size_t(w.waitFor)], 0));
    if (timedStart_)
      OCTET_CHECK_CUDA(cuEventRecord(begins_[w.index], s));
    comm::Communicator *c =
        group_ < rt_.comms_.size() ? rt_.comms_[group_] : nullptr;
    if (!c || !rt_.nccl_)
      return Status::error(
          "this rank has no communicator for its pipeline group: a "
          "pipeline bundle runs under a launcher (octet launch --gpus N -- "
          "octet-run ..., or torchrun), which joins the job first");
    OCTET_RETURN_IF_ERROR(comm::CommGroup::start(*rt_.nccl_));
    Status issued = [&]() -> Status {
      const auto &transfers = w.instruction->transfers();
      for (int k = 0; k < transfers.size(); ++k) {
        const bundle::PipeTransfer &t = transfers[k];
        for (const SlotRef &ref : t.tensors()) {
          const Slot &slot = rt_.bundle_.plan().slots(int(ref.slot()));
          auto addr = rt_.slotAddress(ref, w.transferEntries[size_t(k)]);
          if (!addr)
            return addr.status();
          auto type = comm::ncclTypeFor(slot.dtype(), /*reduced=*/false,
                                        rt_.nccl_->version());
          if (!type)
            return type.status().withContext("slot '" + slot.name() + "'");
          uint64_t count = 1;
          for (int64_t d : slot.shape())
            count *= uint64_t(d);
          if (t.send())
            OCTET_RETURN_IF_ERROR(
                c->send(reinterpret_cast<const void *>(*addr), count, *type,
                        int(t.peer()), s));
          else
            OCTET_RETURN_IF_ERROR(c->recv(reinterpret_cast<void *>(*addr),
                                          count, *type, int(t.peer()), s));
        }
      }
      return Status::ok();
    }();
    Status ended = comm::CommGroup::end(*rt_.nccl_, rt_.groupTimeout_);
    OCTET_RETURN_IF_ERROR(issued);
    OCTET_RETURN_IF_ERROR(ended);
    OCTET_CHECK_CUDA(cuEventRecord(events_[w.index], s));
    if (timedStart_)
      OCTET_CHECK_CUDA(cuEventRecord(ends_[w.index], s));
    return Status::ok();
  }

  Status endStep(const PipelineRankPlan &) override {
    OCTET_CHECK_CUDA(cuEventRecord(endEvent(), stream_->handle()));
    OCTET_CHECK_CUDA(cuStreamWaitEvent(rt_.mainStream(), endEvent(), 0));
    return Status::ok();
  }

private:
  explicit PipelineStream(Runtime &rt) : rt_(rt) {}
  CUevent startEvent() const { return events_[events_.size() - 2]; }
  CUevent endEvent() const { return events_.back(); }

  Runtime &rt_;
  std::unique_ptr<Stream> stream_;
  // One per instruction, then the step's start and end.
  std::vector<CUevent> events_;
  // With a timeline: timing events around each instruction (after its
  // wait) and at the step's start.
  std::vector<CUevent> begins_, ends_;
  CUevent timedStart_ = nullptr;
  uint32_t group_ = UINT32_MAX;
};

namespace {

// Argument tables start 16-byte aligned.
uint64_t alignTable(uint64_t bytes) { return (bytes + 15) / 16 * 16; }

bool isChunkProgram(ProgramKind kind) {
  return kind == CHUNK_FORWARD || kind == CHUNK_BACKWARD ||
         kind == CHUNK_INPUT_GRADIENT || kind == CHUNK_WEIGHT_GRADIENT ||
         kind == CHUNK_EVAL_FORWARD;
}

} // namespace

StatusOr<std::unique_ptr<Runtime>>
Runtime::load(const Bundle &bundle, const RuntimeOptions &options) {
  OCTET_RETURN_IF_ERROR(checkRunnable(bundle));
  std::unique_ptr<Runtime> rt(new Runtime());
  rt->bundle_ = bundle;
  int rank = options.rank;
  if (rank < 0) {
    rank = 0;
    if (const char *r = std::getenv("RANK"))
      rank = std::atoi(r);
  }
  if (rank < 0 || uint32_t(rank) >= bundle.world_size())
    return Status::error("RANK=" + std::to_string(rank) +
                         " but the bundle was compiled for world size " +
                         std::to_string(bundle.world_size()) +
                         ": start as many ranks as the bundle's world size "
                         "(octet launch --gpus " +
                         std::to_string(bundle.world_size()) +
                         " -- octet-run ...)");
  rt->rank_ = rank;
  rt->pipelineTimeline_ = options.pipelineTimeline;
  rt->timePrograms_ = options.programTimes;
  auto dev = Device::open(options.device);
  if (!dev)
    return dev.status();
  rt->device_ = std::move(*dev);

  uint32_t streams = 1;
  for (const bundle::Arena &a : bundle.plan().arenas())
    streams = std::max(streams, a.stream() + 1);
  for (const Program &p : bundle.ranks(rank).programs())
    for (const Step &s : p.steps())
      streams = std::max(streams, s.stream() + 1);
  // Streams past the first carry collectives: NCCL's kernels start ahead
  // of queued compute, so that the communication they overlap does not
  // wait for whole kernels to drain.
  int leastPriority = 0, greatestPriority = 0;
  OCTET_CHECK_CUDA(cuCtxGetStreamPriorityRange(&leastPriority, &greatestPriority));
  for (uint32_t i = 0; i < streams; ++i) {
    auto s = Stream::create(i == 0 ? 0 : greatestPriority);
    if (!s)
      return s.status();
    rt->streams_.push_back(std::move(*s));
  }

  const MemoryPlan &plan = bundle.plan();
  if (bundle.has_pipeline()) {
    auto memory = bundle::pipelineRankMemory(bundle, rank);
    if (!memory)
      return memory.status();
    std::vector<ArenaSlot> slots;
    for (int i = 0; i < plan.slots_size(); ++i)
      if (memory->holds(uint32_t(i)))
        slots.push_back({plan.slots(i).name(),
                         uint64_t(memory->offsets[size_t(i)]),
                         plan.slots(i).bytes()});
    auto a = octet::Arena::create(
        *rt->device_, "pipeline rank " + std::to_string(rank), memory->bytes,
        std::move(slots));
    if (!a)
      return a.status();
    rt->arenas_.push_back(std::move(*a));
    rt->rankOffsets_ = std::move(memory->offsets);
  }
  for (int i = 0; i < plan.arenas_size() && !bundle.has_pipeline(); ++i) {
    std::vector<ArenaSlot> slots;
    for (const Slot &s : plan.slots())
      if (s.arena() == uint32_t(i))
        slots.push_back({s.name(), s.offset(), s.bytes()});
    auto a = octet::Arena::create(*rt->device_, plan.arenas(i).name(),
                                  plan.arenas(i).bytes(), std::move(slots),
                                  options.planAllocator);
    if (!a)
      return a.status();
    rt->arenas_.push_back(std::move(*a));
  }
  // One allocation for every argument table, so that nothing allocates
  // once the programs are prepared.
  uint64_t tableBytes = 0;
  uint64_t stashEntries =
      std::max<uint32_t>(1, bundle.ranks(rank).pipeline().stash_entries());
  for (const Program &p : bundle.ranks(rank).programs())
    for (const Step &s : p.steps())
      for (const KernelArg &a : s.launch().args())
        tableBytes += alignTable(uint64_t(a.table().slots_size()) * 8) *
                      (isChunkProgram(p.kind()) ? stashEntries : 1);
  if (tableBytes) {
    auto a = octet::Arena::create(*rt->device_, "argument tables", tableBytes,
                                  {});
    if (!a)
      return a.status();
    rt->tables_ = std::move(*a);
  }

  for (const bundle::Module &m : bundle.modules()) {
    auto mod = octet::Module::load(*rt->device_, m.name(), m.cubin(),
                                   m.cubin_arch(), m.ptx());
    if (!mod)
      return mod.status();
    if (!(*mod)->fromCubin() && !m.cubin().empty())
      rt->notes_.push_back("module '" + m.name() + "': cubin is for " +
                           m.cubin_arch() + ", JIT-compiled the PTX instead");
    rt->modules_.push_back(std::move(*mod));
  }
  for (const Kernel &k : bundle.kernels()) {
    auto f = rt->modules_[k.module()]->function(k.symbol());
    if (!f)
      return f.status();
    // With lazy module loading (CUDA's default) a kernel's code reaches the
    // device at its first launch; loading every one now keeps device memory
    // flat after load, so evaluation's first run cannot raise the peak.
    OCTET_CHECK_CUDA(cuFuncLoad(*f));
    if (k.max_dynamic_shared_bytes() > 48 * 1024)
      OCTET_CHECK_CUDA(cuFuncSetAttribute(
          *f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
          int(k.max_dynamic_shared_bytes())));
    rt->functions_.push_back(*f);
  }

  OCTET_RETURN_IF_ERROR(rt->createGemms(options.gemmTuning));

  OCTET_RETURN_IF_ERROR(rt->prepare());
  OCTET_RETURN_IF_ERROR(rt->chooseAlgorithms(options.gemmTuning));
  if (options.stepTimeline) {
    rt->timeline_ = std::make_unique<TimelineRecorder>();
    OCTET_RETURN_IF_ERROR(
        rt->timeline_->reserve(timelineMarksPerStep(bundle, rank)));
  }
  auto freeAfter = rt->device_->freeMemory();
  if (!freeAfter)
    return freeAfter.status();
  // Everything in use on the device after load but the arenas: the CUDA
  // context (most of it, created by Device::open), cuBLASLt's handle and
  // the modules; and the memory of any other process on this GPU, which
  // the driver API cannot tell apart.
  uint64_t used = rt->device_->totalMemory() - *freeAfter;
  rt->fixedCost_ = used > rt->arenaBytes() ? used - rt->arenaBytes() : 0;
  return rt;
}

Runtime::~Runtime() {
  for (TimedRun &t : timedRuns_)
    destroyTimedRun(t);
  timeline_.reset();
  pipeline_.reset();
  programs_.clear();
  gemms_.clear();
  blas_.reset();
  modules_.clear();
  arenas_.clear();
  tables_.reset();
  streams_.clear();
}

uint64_t Runtime::arenaBytes() const {
  uint64_t total = tables_ ? tables_->bytes() : 0;
  for (const auto &a : arenas_)
    total += a->bytes();
  return total;
}

CUstream Runtime::mainStream() const { return streams_[0]->handle(); }

StatusOr<CUdeviceptr> Runtime::slotAddress(const SlotRef &ref,
                                           int stashEntry) const {
  const MemoryPlan &plan = bundle_.plan();
  if (ref.slot() >= uint32_t(plan.slots_size()))
    return Status::error("slot " + std::to_string(ref.slot()) +
                         " is not in the memory plan");
  const Slot &s = plan.slots(int(ref.slot()));
  uint64_t part = 0;
  if (ref.stash_stride() > 0) {
    if (stashEntry < 0)
      return Status::error("slot '" + s.name() +
                           "' is a stash entry, used outside a pipeline "
                           "rank's chunk program");
    part += uint64_t(stashEntry) * ref.stash_stride();
  }
  if (ref.rank_stride() > 0) {
    auto index = groupIndex(ref.rank_group());
    if (!index)
      return index.status();
    part += *index * ref.rank_stride();
  }
  if (!rankOffsets_.empty()) {
    if (rankOffsets_[ref.slot()] < 0)
      return Status::error("slot '" + s.name() + "' is not in pipeline rank " +
                           std::to_string(rank_) +
                           "'s arena: another rank holds it");
    return arenas_[0]->base() + uint64_t(rankOffsets_[ref.slot()]) +
           ref.byte_offset() + part;
  }
  return arenas_[s.arena()]->base() + s.offset() + ref.byte_offset() + part;
}

StatusOr<uint64_t> Runtime::groupIndex(uint32_t group) const {
  if (group >= uint32_t(bundle_.groups_size()))
    return Status::error("group " + std::to_string(group) +
                         " is not in the bundle");
  // Groups of one name are one kind: at pipeline x data each pipeline
  // rank has its own "data" group, and a part's index is the one in the
  // group of that kind this rank belongs to.
  const std::string &kind = bundle_.groups(int(group)).name();
  for (const bundle::Group &g : bundle_.groups()) {
    if (g.name() != kind)
      continue;
    for (int i = 0; i < g.ranks_size(); ++i)
      if (int(g.ranks(i)) == rank_)
        return uint64_t(i);
  }
  return Status::error("rank " + std::to_string(rank_) +
                       " is not a member of group '" +
                       bundle_.groups(int(group)).name() + "'");
}

int Runtime::findSlot(const std::string &name) const {
  const MemoryPlan &plan = bundle_.plan();
  for (int i = 0; i < plan.slots_size(); ++i)
    if (plan.slots(i).name() == name)
      return i;
  return -1;
}

Status Runtime::writeSlot(uint32_t slot, const void *data, uint64_t bytes) {
  auto p = slotRange(slot, bytes, /*whole=*/true, "writing");
  if (!p)
    return p.status();
  // The streams are non-blocking: a plain copy would not wait for them.
  OCTET_RETURN_IF_ERROR(synchronize());
  OCTET_CHECK_CUDA(cuMemcpyHtoD(*p, data, bytes));
  return Status::ok();
}

Status Runtime::readSlot(uint32_t slot, void *data, uint64_t bytes) {
  auto p = slotRange(slot, bytes, /*whole=*/true, "reading");
  if (!p)
    return p.status();
  OCTET_RETURN_IF_ERROR(synchronize());
  OCTET_CHECK_CUDA(cuMemcpyDtoH(data, *p, bytes));
  return Status::ok();
}

StatusOr<CUdeviceptr> Runtime::slotRange(uint32_t slot, uint64_t bytes,
                                         bool whole, const char *what) const {
  SlotRef ref;
  ref.set_slot(slot);
  auto p = slotAddress(ref);
  if (!p)
    return p.status();
  const Slot &s = bundle_.plan().slots(int(slot));
  if (whole ? bytes != s.bytes() : bytes > s.bytes())
    return Status::error(std::string(what) + " " + std::to_string(bytes) +
                         " bytes of slot '" + s.name() + "', which has " +
                         std::to_string(s.bytes()));
  return *p;
}

Status Runtime::writeSlotAsync(uint32_t slot, const void *data,
                               uint64_t bytes) {
  auto p = slotRange(slot, bytes, /*whole=*/false, "writing");
  if (!p)
    return p.status();
  OCTET_CHECK_CUDA(cuMemcpyHtoDAsync(*p, data, bytes, mainStream()));
  return Status::ok();
}

Status Runtime::writeSlotAtAsync(uint32_t slot, uint64_t offset,
                                 const void *data, uint64_t bytes) {
  auto p = slotRange(slot, offset + bytes, /*whole=*/false, "writing");
  if (!p)
    return p.status();
  OCTET_CHECK_CUDA(cuMemcpyHtoDAsync(*p + offset, data, bytes, mainStream()));
  return Status::ok();
}

Status Runtime::readSlotAsync(uint32_t slot, void *data, uint64_t bytes) {
  auto p = slotRange(slot, bytes, /*whole=*/false, "reading");
  if (!p)
    return p.status();
  OCTET_CHECK_CUDA(cuMemcpyDtoHAsync(data, *p, bytes, mainStream()));
  return Status::ok();
}

namespace {

// The driver's element type of a tensor map: FP8 and bytes move as bytes.
std::optional<CUtensorMapDataType> tensorMapType(bundle::DType dtype) {
  switch (dtype) {
  case bundle::F32:
    return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  case bundle::BF16:
    return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  case bundle::F16:
    return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  case bundle::F8E4M3FN:
  case bundle::F8E5M2:
  case bundle::U8:
    return CU_TENSOR_MAP_DATA_TYPE_UINT8;
  case bundle::I32:
    return CU_TENSOR_MAP_DATA_TYPE_INT32;
  case bundle::I64:
    return CU_TENSOR_MAP_DATA_TYPE_INT64;
  default:
    return std::nullopt;
  }
}

// Encodes a record bundle::validate has checked; the driver may still
// refuse what the record cannot show (an address this process got).
StatusOr<CUtensorMap> encodeTensorMap(const TensorMap &m, CUdeviceptr base,
                                      const std::string &where) {
  std::optional<CUtensorMapDataType> type = tensorMapType(m.dtype());
  if (!type)
    return Status::error(where + ": a tensor map of " +
                         bundle::dtypeName(m.dtype()) +
                         ", which TMA does not copy");
  std::vector<cuuint64_t> dims(m.dims().begin(), m.dims().end());
  std::vector<cuuint64_t> strides(m.strides().begin(), m.strides().end());
  std::vector<cuuint32_t> box(m.box().begin(), m.box().end());
  std::vector<cuuint32_t> elementStrides(m.element_strides().begin(),
                                         m.element_strides().end());
  CUtensorMap map;
  CUresult r = cuTensorMapEncodeTiled(
      &map, *type, cuuint32_t(dims.size()), reinterpret_cast<void *>(base),
      dims.data(), strides.data(), box.data(), elementStrides.data(),
      CUtensorMapInterleave(m.interleave()), CUtensorMapSwizzle(m.swizzle()),
      CUtensorMapL2promotion(m.l2_promotion()),
      CUtensorMapFloatOOBfill(m.oob_fill()));
  if (r != CUDA_SUCCESS)
    return cudaDriverError(r, "cuTensorMapEncodeTiled", __FILE__, __LINE__)
        .withContext(where + ": encoding a tensor map");
  return map;
}

} // namespace

StatusOr<Runtime::PreparedStep> Runtime::prepareStep(const Step &step,
                                                     const std::string &where,
                                                     int stashEntry) {
  PreparedStep p;
  p.stream = step.stream();
  p.label = step.label().empty() ? where : step.label();
  p.waits.assign(step.waits().begin(), step.waits().end());
  auto addr = [&](const SlotRef &r) { return slotAddress(r, stashEntry); };
  switch (step.op_case()) {
  case Step::kLaunch: {
    const KernelLaunch &l = step.launch();
    std::vector<KernelParam> params;
    for (const KernelArg &a : l.args()) {
      switch (a.value_case()) {
      case KernelArg::kSlot: {
        auto ptr = addr(a.slot());
        if (!ptr)
          return ptr.status();
        params.push_back(KernelParam::ptr(*ptr));
        break;
      }
      case KernelArg::kTable: {
        std::vector<uint64_t> entries;
        for (const SlotRef &r : a.table().slots()) {
          auto ptr = addr(r);
          if (!ptr)
            return ptr.status();
          entries.push_back(*ptr);
        }
        uint64_t bytes = entries.size() * 8;
        if (!tables_ || tablesUsed_ + bytes > tables_->bytes())
          return Status::error(where + ": no room for an argument table");
        CUdeviceptr table = tables_->base() + tablesUsed_;
        tablesUsed_ += alignTable(bytes);
        OCTET_CHECK_CUDA(cuMemcpyHtoD(table, entries.data(), bytes));
        params.push_back(KernelParam::ptr(table));
        break;
      }
      case KernelArg::kI32:
        params.push_back(KernelParam::fromI32(a.i32()));
        break;
      case KernelArg::kI64:
        params.push_back(KernelParam::fromI64(a.i64()));
        break;
      case KernelArg::kU32:
        params.push_back(KernelParam::fromU32(a.u32()));
        break;
      case KernelArg::kU64:
        params.push_back(KernelParam::fromU64(a.u64()));
        break;
      case KernelArg::kF32:
        params.push_back(KernelParam::fromF32(a.f32()));
        break;
      case KernelArg::kTensorMap: {
        // Slot addresses never move, so neither does the map: it is built
        // once here, and a captured graph replays it.
        auto ptr = addr(a.tensor_map().base());
        if (!ptr)
          return ptr.status();
        auto map = encodeTensorMap(a.tensor_map(), *ptr, where);
        if (!map)
          return map.status();
        params.push_back(KernelParam::fromTensorMap(*map));
        break;
      }
      case KernelArg::VALUE_NOT_SET:
        return Status::error(where + ": a kernel argument has no value");
      }
    }
    LaunchConfig cfg;
    cfg.grid[0] = l.grid().x(), cfg.grid[1] = std::max(1u, l.grid().y());
    cfg.grid[2] = std::max(1u, l.grid().z());
    cfg.block[0] = l.block().x(), cfg.block[1] = std::max(1u, l.block().y());
    cfg.block[2] = std::max(1u, l.block().z());
    cfg.dynamicSharedBytes = l.dynamic_shared_bytes();
    cfg.cluster = std::max(1u, l.cluster());
    cfg.programmatic = l.programmatic();
    auto pl = PreparedLaunch::prepare(functions_[l.kernel()], cfg,
                                      std::move(params), p.label);
    if (!pl)
      return pl.status();
    p.kind = PreparedStep::Kind::Launch;
    p.launch = std::make_unique<PreparedLaunch>(std::move(*pl));
    return p;
  }
  case Step::kGemm: {
    const GemmCall &c = step.gemm();
    const GemmDescriptor &g = bundle_.gemms(int(c.gemm()));
    p.kind = PreparedStep::Kind::Gemm;
    p.gemm = gemms_[c.gemm()].get();
    p.overwriteFirst = c.first_microbatch_overwrites();
    if (p.overwriteFirst && !g.accumulate())
      return Status::error(where + ": GEMM '" + g.name() +
                           "' overwrites in the first microbatch but does "
                           "not accumulate in the others; recompile the "
                           "bundle");
    struct {
      bool use;
      const SlotRef &ref;
      CUdeviceptr &out;
    } refs[] = {
        {true, c.a(), p.gemmArgs.a},
        {true, c.b(), p.gemmArgs.b},
        {true, c.d(), p.gemmArgs.d},
        {c.has_bias(), c.bias(), p.gemmArgs.bias},
        {c.has_aux(), c.aux(), p.gemmArgs.aux},
        {g.has_a_scale(), c.a_scale(), p.gemmArgs.aScale},
        {g.has_b_scale(), c.b_scale(), p.gemmArgs.bScale},
        {g.has_d_scale(), c.d_scale(), p.gemmArgs.dScale},
        {g.has_amax_d(), c.amax_d(), p.gemmArgs.amaxD},
        {c.has_workspace(), c.workspace(), p.gemmArgs.workspace},
    };
    for (auto &r : refs) {
      if (!r.use)
        continue;
      auto ptr = addr(r.ref);
      if (!ptr)
        return ptr.status();
      r.out = *ptr;
    }
    return p;
  }
  case Step::kMemset: {
    auto ptr = addr(step.memset().dst());
    if (!ptr)
      return ptr.status();
    p.kind = PreparedStep::Kind::Memset;
    p.dst = *ptr;
    p.bytes = step.memset().bytes();
    p.value = uint8_t(step.memset().value());
    return p;
  }
  case Step::kCopy: {
    auto d = addr(step.copy().dst());
    auto s = addr(step.copy().src());
    if (!d)
      return d.status();
    if (!s)
      return s.status();
    p.kind = PreparedStep::Kind::Copy;
    p.dst = *d, p.src = *s, p.bytes = step.copy().bytes();
    return p;
  }
  case Step::kCollective: {
    const bundle::Collective &c = step.collective();
    if (c.op() != ALL_REDUCE && c.op() != REDUCE_SCATTER &&
        c.op() != ALL_GATHER)
      return Status::error(where + " is a " + p.label +
                           ": octet-run runs all-reduce, reduce-scatter and "
                           "all-gather collectives only; recompile with "
                           "this release");
    auto reduce = comm::parseReduceOp(c.reduce());
    if (!reduce)
      return reduce.status().withContext(where);
    auto d = addr(c.recv());
    auto s = addr(c.send());
    if (!d)
      return d.status();
    if (!s)
      return s.status();
    p.kind = PreparedStep::Kind::Collective;
    p.collective = &c;
    p.groupedWithNext = c.grouped_with_next();
    p.reduce = *reduce;
    p.dst = *d, p.src = *s;
    if (c.op() == REDUCE_SCATTER && *d == *s) {
      // NCCL's in-place reduce-scatter: recv is this rank's part of send.
      auto index = groupIndex(c.group());
      if (!index)
        return index.status().withContext(where);
      p.dst += *index * c.count() * bundle::dtypeBytes(c.dtype());
    }
    return p;
  }
  case Step::OP_NOT_SET:
    break;
  }
  return Status::error(where + " has no operation");
}

Status Runtime::prepare() {
  for (const Program &prog : bundle_.ranks(rank_).programs()) {
    if (!isChunkProgram(prog.kind())) {
      OCTET_RETURN_IF_ERROR(prepareProgram(prog, -1));
      continue;
    }
    uint32_t entries = bundle_.ranks(rank_).pipeline().stash_entries();
    if (entries == 0)
      return Status::error("program '" + prog.name() +
                           "' is a pipeline chunk's, but rank " +
                           std::to_string(rank_) + " has no stash entries");
    for (uint32_t e = 0; e < entries; ++e)
      OCTET_RETURN_IF_ERROR(prepareProgram(prog, int(e)));
  }
  return preparePipeline();
}

Status Runtime::prepareProgram(const Program &prog, int stashEntry) {
  {
    auto pp = std::make_unique<PreparedProgram>();
    pp->kind = prog.kind();
    pp->program = &prog;
    pp->chunk = prog.chunk();
    pp->stashEntry = stashEntry;
    for (int i = 0; i < prog.steps_size(); ++i) {
      auto st = prepareStep(prog.steps(i),
                            "program '" + prog.name() + "' step " +
                                std::to_string(i),
                            stashEntry);
      if (!st)
        return st.status();
      pp->collectives |= st->kind == PreparedStep::Kind::Collective;
      pp->overwrites |= st->overwriteFirst;
      pp->steps.push_back(std::move(*st));
    }
    pp->events.assign(pp->steps.size(), nullptr);
    for (PreparedStep &s : pp->steps)
      for (uint32_t w : s.waits) {
        if (w >= pp->steps.size())
          return Status::error("program '" + prog.name() + "' step '" +
                               s.label + "' waits for step " +
                               std::to_string(w) + " of " +
                               std::to_string(pp->steps.size()));
        pp->steps[w].waitedOn = true;
        if (!pp->events[w])
          OCTET_CHECK_CUDA(
              cuEventCreate(&pp->events[w], CU_EVENT_DISABLE_TIMING));
      }
    programs_.push_back(std::move(pp));
  }
  return Status::ok();
}

const Program *Runtime::program(ProgramKind kind) const {
  for (const auto &p : programs_)
    if (p->kind == kind)
      return p->program;
  return nullptr;
}

Runtime::PreparedProgram *Runtime::find(ProgramKind kind) {
  for (auto &p : programs_)
    if (p->kind == kind)
      return p.get();
  return nullptr;
}

Status Runtime::runStep(const PreparedStep &s, const PreparedProgram &prog,
                        size_t index, bool firstMicrobatch, bool record) {
  CUstream stream = streams_[s.stream]->handle();
  TimelineRecorder *timeline = recordingTimeline();
  int waitBegin = -1, opBegin = -1;
  if (timeline && !s.waits.empty())
    OCTET_RETURN_IF_ERROR(timeline->mark(stream, waitBegin));
  for (uint32_t w : s.waits)
    OCTET_CHECK_CUDA(cuStreamWaitEvent(stream, prog.events[w], 0));
  if (waitBegin >= 0) {
    int waitEnd = -1;
    OCTET_RETURN_IF_ERROR(timeline->mark(stream, waitEnd));
    TimelineRecord r = timelineRecord(s, prog, index);
    r.kind = TimelineKind::Wait;
    r.label = "wait for";
    for (size_t i = 0; i < s.waits.size(); ++i)
      r.label += (i ? ", " : " ") + prog.steps[s.waits[i]].label;
    timeline->add(waitBegin, waitEnd, std::move(r));
  }
  if (timeline && record)
    OCTET_RETURN_IF_ERROR(timeline->mark(stream, opBegin));
  switch (s.kind) {
  case PreparedStep::Kind::Launch:
    OCTET_RETURN_IF_ERROR(s.launch->launch(stream));
    break;
  case PreparedStep::Kind::Gemm:
    OCTET_RETURN_IF_ERROR(s.gemm->run(s.gemmArgs, stream,
                                      /*overwrite=*/s.overwriteFirst &&
                                          firstMicrobatch));
    break;
  case PreparedStep::Kind::Memset:
    OCTET_CHECK_CUDA(cuMemsetD8Async(s.dst, s.value, s.bytes, stream));
    break;
  case PreparedStep::Kind::Copy:
    OCTET_CHECK_CUDA(cuMemcpyDtoDAsync(s.dst, s.src, s.bytes, stream));
    break;
  case PreparedStep::Kind::Collective: {
    uint32_t group = s.collective->group();
    comm::Communicator *c = group < comms_.size() ? comms_[group] : nullptr;
    if (!c)
      return Status::error(
          "this rank has no communicator for group '" +
          bundle_.groups(int(group)).name() +
          "': a bundle of several ranks runs under a launcher (octet "
          "launch --gpus N -- octet-run ..., or torchrun), which joins "
          "the job before the first step");
    const void *send = reinterpret_cast<const void *>(s.src);
    void *recv = reinterpret_cast<void *>(s.dst);
    size_t count = s.collective->count();
    switch (s.collective->op()) {
    case REDUCE_SCATTER:
      OCTET_RETURN_IF_ERROR(c->reduceScatter(send, recv, count, s.ncclType,
                                             s.reduce, stream));
      break;
    case ALL_GATHER:
      OCTET_RETURN_IF_ERROR(
          c->allGather(send, recv, count, s.ncclType, stream));
      break;
    default:
      OCTET_RETURN_IF_ERROR(
          c->allReduce(send, recv, count, s.ncclType, s.reduce, stream));
      break;
    }
    break;
  }
  }
  if (opBegin >= 0) {
    int opEnd = -1;
    OCTET_RETURN_IF_ERROR(timeline->mark(stream, opEnd));
    timeline->add(opBegin, opEnd, timelineRecord(s, prog, index));
  }
  if (record && s.waitedOn)
    OCTET_CHECK_CUDA(cuEventRecord(prog.events[index], stream));
  return Status::ok();
}

Runtime::PreparedProgram *Runtime::findChunk(ProgramKind kind, uint32_t chunk,
                                             int stashEntry) {
  for (auto &p : programs_)
    if (p->kind == kind && p->chunk == chunk && p->stashEntry == stashEntry)
      return p.get();
  return nullptr;
}

Status Runtime::run(ProgramKind kind, bool lastMicrobatch,
                    bool firstMicrobatch) {
  PreparedProgram *p = find(kind);
  if (!p)
    return Status::error(std::string("the bundle has no ") +
                         programKindName(kind) + " program for rank " +
                         std::to_string(rank_));
  if (p->stashEntry >= 0)
    return Status::error(std::string("a ") + programKindName(kind) +
                         " program runs inside a pipeline step "
                         "(runPipelineStep), not alone");
  return runPrepared(*p, lastMicrobatch, firstMicrobatch);
}

Status Runtime::runPrepared(PreparedProgram &prepared, bool lastMicrobatch,
                            bool firstMicrobatch) {
  PreparedProgram *p = &prepared;
  TimedRun *timed = nullptr;
  if (timePrograms_) {
    auto t = beginTimedRun(p->kind);
    if (!t)
      return t.status();
    timed = *t;
  }
  TimelineRecorder *timeline = recordingTimeline();
  if (timeline)
    OCTET_RETURN_IF_ERROR(
        timeline->beginProgram(mainStream(), p->kind, p->program->name()));
  // Side streams start after what the main stream holds (the host's input
  // copies) and join it at the end, so the program is ordered between
  // whatever the host enqueued before and after it.
  if (streams_.size() > 1) {
    CUevent start = nullptr;
    OCTET_CHECK_CUDA(cuEventCreate(&start, CU_EVENT_DISABLE_TIMING));
    OCTET_CHECK_CUDA(cuEventRecord(start, streams_[0]->handle()));
    for (size_t s = 1; s < streams_.size(); ++s)
      OCTET_CHECK_CUDA(cuStreamWaitEvent(streams_[s]->handle(), start, 0));
    cuEventDestroy(start);
  }
  // A bucket's collectives go to NCCL as one group; what waits for the
  // bucket waits for the event recorded after the group is enqueued.
  bool inGroup = false;
  // A timed collective (or group) whose end is not recorded yet.
  bool collectiveOpen = false;
  // The recorded step's collectives of the group being issued.
  std::vector<size_t> groupSteps;
  for (size_t i = 0; i < p->steps.size(); ++i) {
    const PreparedStep &s = p->steps[i];
    bool collective = s.kind == PreparedStep::Kind::Collective;
    if (collective && !lastMicrobatch && s.collective->last_microbatch())
      continue;
    bool grouped = collective && (inGroup || s.groupedWithNext);
    // A collective on the compute stream, timed from before its waits to
    // its group's end: what it waited for is time the compute stream lost.
    bool timedCollective = timed && collective && s.stream == 0;
    if (timedCollective && !inGroup) {
      auto pair = timedPair();
      if (!pair)
        return pair.status();
      timed->mainCollectives.push_back(*pair);
      OCTET_CHECK_CUDA(cuEventRecord(pair->first, mainStream()));
      collectiveOpen = true;
    }
    if (grouped && !inGroup) {
      if (!nccl_)
        return Status::error("in " + s.label +
                             ": the runtime is not connected to NCCL");
      OCTET_RETURN_IF_ERROR(comm::CommGroup::start(*nccl_));
      inGroup = true;
    }
    OCTET_RETURN_IF_ERROR(
        runStep(s, *p, i, firstMicrobatch, /*record=*/!grouped)
            .withContext("in " + s.label));
    if (timeline && grouped)
      groupSteps.push_back(i);
    if (inGroup && !s.groupedWithNext) {
      inGroup = false;
      // NCCL enqueues the group's kernels at its end: the group's marks
      // go around that, after the waits its steps enqueued.
      CUstream groupStream = streams_[s.stream]->handle();
      int groupBegin = -1, groupEnd = -1;
      if (timeline)
        OCTET_RETURN_IF_ERROR(timeline->mark(groupStream, groupBegin));
      OCTET_RETURN_IF_ERROR(
          comm::CommGroup::end(*nccl_, groupTimeout_).withContext("in " + s.label));
      if (timeline) {
        OCTET_RETURN_IF_ERROR(timeline->mark(groupStream, groupEnd));
        for (size_t g : groupSteps) {
          TimelineRecord r = timelineRecord(p->steps[g], *p, g);
          r.ncclGroup = int(groupSteps.size());
          timeline->add(groupBegin, groupEnd, std::move(r));
        }
        groupSteps.clear();
      }
      if (s.waitedOn)
        OCTET_CHECK_CUDA(cuEventRecord(p->events[i], streams_[s.stream]->handle()));
    }
    if (collectiveOpen && !inGroup) {
      OCTET_CHECK_CUDA(
          cuEventRecord(timed->mainCollectives.back().second, mainStream()));
      collectiveOpen = false;
    }
  }
  if (inGroup)
    return Status::error("program '" + p->program->name() +
                         "' ends inside a group of collectives");
  if (timed)
    OCTET_CHECK_CUDA(cuEventRecord(timed->computed, mainStream()));
  if (timeline && streams_.size() > 1)
    OCTET_RETURN_IF_ERROR(timeline->beginJoin(mainStream()));
  for (size_t s = 1; s < streams_.size(); ++s) {
    CUevent e = nullptr;
    OCTET_CHECK_CUDA(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    OCTET_CHECK_CUDA(cuEventRecord(e, streams_[s]->handle()));
    OCTET_CHECK_CUDA(cuStreamWaitEvent(streams_[0]->handle(), e, 0));
    cuEventDestroy(e);
  }
  if (timed)
    OCTET_CHECK_CUDA(cuEventRecord(timed->end, mainStream()));
  if (timeline)
    OCTET_RETURN_IF_ERROR(timeline->endProgram(mainStream()));
  return Status::ok();
}

TimelineRecorder *Runtime::recordingTimeline() const {
  return timeline_ && timeline_->recording() ? timeline_.get() : nullptr;
}

TimelineRecord Runtime::timelineRecord(const PreparedStep &s,
                                       const PreparedProgram &p,
                                       size_t index) const {
  TimelineRecord r;
  r.stream = int(s.stream);
  r.label = s.label;
  r.program = p.kind;
  r.step = int(index);
  switch (s.kind) {
  case PreparedStep::Kind::Launch:
    r.kind = TimelineKind::Launch;
    break;
  case PreparedStep::Kind::Gemm:
    r.kind = TimelineKind::Gemm;
    r.m = s.gemm->desc().m, r.n = s.gemm->desc().n, r.k = s.gemm->desc().k;
    break;
  case PreparedStep::Kind::Memset:
    r.kind = TimelineKind::Memset;
    break;
  case PreparedStep::Kind::Copy:
    r.kind = TimelineKind::Copy;
    break;
  case PreparedStep::Kind::Collective:
    r.kind = TimelineKind::Collective;
    describeCollective(*s.collective, bundle_, r);
    break;
  }
  return r;
}

Status Runtime::beginTimeline() {
  if (!timeline_)
    return Status::error("the runtime records no step timeline: load it "
                         "with RuntimeOptions.stepTimeline");
  if (pipelinePlan_)
    return Status::error("a pipeline rank's step runs its instruction list, "
                         "which the step timeline does not record: time it "
                         "with --pipeline-timeline");
  return timeline_->begin();
}

Status Runtime::endTimeline() {
  if (!timeline_)
    return Status::error("the runtime records no step timeline");
  OCTET_RETURN_IF_ERROR(synchronize());
  return timeline_->end();
}

const std::vector<TimelineRecord> &Runtime::timeline() const {
  static const std::vector<TimelineRecord> none;
  return timeline_ ? timeline_->records() : none;
}

StatusOr<std::pair<CUevent, CUevent>> Runtime::timedPair() {
  CUevent begin = nullptr, end = nullptr;
  OCTET_CHECK_CUDA(cuEventCreate(&begin, CU_EVENT_DEFAULT));
  if (CUresult r = cuEventCreate(&end, CU_EVENT_DEFAULT); r != CUDA_SUCCESS) {
    cuEventDestroy(begin);
    OCTET_CHECK_CUDA(r);
  }
  return std::make_pair(begin, end);
}

void Runtime::destroyTimedRun(TimedRun &t) {
  for (CUevent e : {t.begin, t.computed, t.end})
    if (e)
      cuEventDestroy(e);
  for (auto [begin, end] : t.mainCollectives) {
    cuEventDestroy(begin);
    cuEventDestroy(end);
  }
  t = TimedRun{};
}

StatusOr<Runtime::TimedRun *> Runtime::beginTimedRun(ProgramKind kind) {
  // Bounded, for a long run with timing on: the oldest runs go first.
  constexpr size_t kMaxTimedRuns = 4096;
  if (timedRuns_.size() == kMaxTimedRuns) {
    // The oldest run was enqueued thousands of runs ago; its events are
    // long complete, and destroying a pending event is allowed anyway.
    destroyTimedRun(timedRuns_.front());
    timedRuns_.pop_front();
  }
  TimedRun t;
  t.kind = kind;
  for (CUevent *e : {&t.begin, &t.computed, &t.end}) {
    CUresult r = cuEventCreate(e, CU_EVENT_DEFAULT);
    if (r != CUDA_SUCCESS) {
      for (CUevent made : {t.begin, t.computed, t.end})
        if (made)
          cuEventDestroy(made);
      OCTET_CHECK_CUDA(r);
    }
  }
  timedRuns_.push_back(t);
  OCTET_CHECK_CUDA(cuEventRecord(t.begin, mainStream()));
  return &timedRuns_.back();
}

StatusOr<std::vector<ProgramTime>> Runtime::programTimes() {
  OCTET_RETURN_IF_ERROR(synchronize());
  std::vector<ProgramTime> out;
  for (const TimedRun &t : timedRuns_) {
    float ms = 0, computed = 0;
    OCTET_CHECK_CUDA(cuEventElapsedTime(&ms, t.begin, t.end));
    OCTET_CHECK_CUDA(cuEventElapsedTime(&computed, t.begin, t.computed));
    // Both from the same start; event times have a resolution of about
    // half a microsecond.
    ProgramTime time{t.kind, double(ms), std::max(0.0, double(ms - computed))};
    for (auto [begin, end] : t.mainCollectives) {
      float c = 0;
      OCTET_CHECK_CUDA(cuEventElapsedTime(&c, begin, end));
      time.mainCollectiveMs += double(c);
    }
    out.push_back(time);
  }
  return out;
}

StatusOr<std::vector<double>> Runtime::timeSteps(ProgramKind kind) {
  PreparedProgram *p = find(kind);
  if (!p)
    return Status::error(std::string("the bundle has no ") +
                         programKindName(kind) + " program for rank " +
                         std::to_string(rank_));
  std::vector<CUevent> marks(p->steps.size() * 2, nullptr);
  auto destroy = [&] {
    for (CUevent e : marks)
      if (e)
        cuEventDestroy(e);
  };
  Status status = [&]() -> Status {
    for (CUevent &e : marks)
      OCTET_CHECK_CUDA(cuEventCreate(&e, CU_EVENT_DEFAULT));
    for (size_t i = 0; i < p->steps.size(); ++i) {
      CUstream stream = streams_[p->steps[i].stream]->handle();
      OCTET_CHECK_CUDA(cuEventRecord(marks[2 * i], stream));
      OCTET_RETURN_IF_ERROR(
          runStep(p->steps[i], *p, i, /*firstMicrobatch=*/true)
              .withContext("in " + p->steps[i].label));
      OCTET_CHECK_CUDA(cuEventRecord(marks[2 * i + 1], stream));
    }
    OCTET_CHECK_CUDA(cuCtxSynchronize());
    return Status::ok();
  }();
  std::vector<double> ms(p->steps.size(), 0.0);
  for (size_t i = 0; status.ok() && i < p->steps.size(); ++i) {
    float t = 0;
    CUresult r = cuEventElapsedTime(&t, marks[2 * i], marks[2 * i + 1]);
    if (r != CUDA_SUCCESS)
      status = Status::error("cuEventElapsedTime failed for step " +
                             p->steps[i].label);
    ms[i] = t;
  }
  destroy();
  if (!status.ok())
    return status;
  return ms;
}

Status Runtime::runGraph(ProgramKind kind, bool lastMicrobatch,
                         bool firstMicrobatch) {
  PreparedProgram *p = find(kind);
  if (!p)
    return run(kind, lastMicrobatch, firstMicrobatch);
  // NCCL's calls in non-blocking mode are not captured: a program with
  // collectives runs eagerly.
  // A recorded step is marked step by step, eagerly.
  if (!p->program->capturable() || streams_.size() > 1 || p->collectives ||
      recordingTimeline())
    return run(kind, lastMicrobatch, firstMicrobatch);
  bool first = firstMicrobatch && p->overwrites;
  std::unique_ptr<CudaGraph> &graph = first ? p->firstGraph : p->graph;
  if (!graph) {
    auto g = CudaGraph::capture(mainStream(), [&](CUstream) {
      for (size_t i = 0; i < p->steps.size(); ++i)
        OCTET_RETURN_IF_ERROR(runStep(p->steps[i], *p, i, first));
      return Status::ok();
    });
    if (!g)
      return g.status().withContext(std::string("program ") +
                                    programKindName(kind));
    graph = std::move(*g);
  }
  TimedRun *timed = nullptr;
  if (timePrograms_) {
    auto t = beginTimedRun(kind);
    if (!t)
      return t.status();
    timed = *t;
  }
  OCTET_RETURN_IF_ERROR(graph->launch(mainStream()));
  if (timed) {
    OCTET_CHECK_CUDA(cuEventRecord(timed->computed, mainStream()));
    OCTET_CHECK_CUDA(cuEventRecord(timed->end, mainStream()));
  }
  return Status::ok();
}

Status Runtime::connect(const comm::NcclLibrary &nccl,
                        std::vector<comm::Communicator *> groups) {
  if (groups.size() != size_t(bundle_.groups_size()))
    return Status::error("the bundle has " +
                         std::to_string(bundle_.groups_size()) +
                         " groups, but " + std::to_string(groups.size()) +
                         " communicators were given");
  for (auto &prog : programs_)
    for (PreparedStep &s : prog->steps) {
      if (s.kind != PreparedStep::Kind::Collective)
        continue;
      auto type = comm::ncclTypeFor(s.collective->dtype(),
                                    s.collective->op() == ALL_REDUCE ||
                                        s.collective->op() == REDUCE_SCATTER,
                                    nccl.version());
      if (!type)
        return type.status().withContext(s.label);
      s.ncclType = *type;
    }
  comms_ = std::move(groups);
  nccl_ = &nccl;
  for (comm::Communicator *c : comms_)
    if (c)
      groupTimeout_ = std::max(groupTimeout_, c->callTimeout());
  return Status::ok();
}

Status Runtime::synchronize() {
  for (auto &s : streams_)
    OCTET_RETURN_IF_ERROR(s->synchronize());
  if (pipeline_)
    OCTET_RETURN_IF_ERROR(pipeline_->synchronize());
  return Status::ok();
}

Status Runtime::preparePipeline() {
  if (!bundle_.has_pipeline())
    return Status::ok();
  auto plan = planPipelineRank(bundle_, rank_);
  if (!plan)
    return plan.status();
  pipelinePlan_ = std::make_unique<PipelineRankPlan>(std::move(*plan));
  auto stream =
      PipelineStream::create(*this, *pipelinePlan_, pipelineTimeline_);
  if (!stream)
    return stream.status();
  pipeline_ = std::move(*stream);
  return Status::ok();
}

Status
Runtime::runPipelineStep(const PipelineRankPlan &plan,
                         const std::function<Status(const PipeWork &)> &stage) {
  if (!pipeline_)
    return Status::error("the bundle has no pipeline: run its "
                         "TRAIN_MICROBATCH program per microbatch instead");
  // The stream's events and the prepared programs are the training
  // plan's: one per instruction, one per stash entry.
  if (plan.worldRank != rank_ ||
      plan.work.size() > pipelinePlan_->work.size() ||
      plan.stashEntries > pipelinePlan_->stashEntries)
    return Status::error(
        "a pipeline plan of rank " + std::to_string(plan.worldRank) + " with " +
        std::to_string(plan.work.size()) + " instructions and " +
        std::to_string(plan.stashEntries) + " stash entries runs on rank " +
        std::to_string(rank_) + ", prepared for " +
        std::to_string(pipelinePlan_->work.size()) + " and " +
        std::to_string(pipelinePlan_->stashEntries));
  pipeline_->stage = stage;
  Status st = octet::runPipelineStep(plan, *pipeline_);
  pipeline_->stage = nullptr;
  return st;
}

StatusOr<std::vector<PipeOpTiming>> Runtime::pipelineTimings() {
  if (!pipeline_)
    return Status::error("the bundle has no pipeline: nothing to time");
  return pipeline_->timings();
}

int Runtime::pipelineLossSlot() const {
  return pipelinePlan_ ? pipelinePlan_->lossSumSlot : -1;
}

} // namespace octet
