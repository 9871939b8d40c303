#include "runtime/exec/PipelineTraining.h"

#include "bundle/Bundle.h"
#include "bundle/PipelineBundle.h"

#include <algorithm>
#include <cstring>
#include <functional>

namespace octet {

namespace {

// The stride the program's steps address `slot` with: one, non-zero.
StatusOr<uint64_t> stashStride(const bundle::Program &program, uint32_t slot,
                               const std::string &where) {
  std::set<uint64_t> strides;
  for (const bundle::Step &step : program.steps())
    bundle::visitSlotRefs(step, [&](uint32_t s, uint64_t stride) {
      if (s == slot)
        strides.insert(stride);
    });
  if (strides.size() == 1 && *strides.begin() > 0)
    return *strides.begin();
  if (strides.empty())
    return Status::error(where + ": no step of the program reads it, so its "
                                 "stash stride is unknown");
  std::string list;
  for (uint64_t s : strides)
    list += (list.empty() ? "" : ", ") + std::to_string(s);
  return Status::error(where +
                       ": the program's steps address it with stash "
                       "strides " +
                       list +
                       "; a per-microbatch input takes one entry per "
                       "(chunk, microbatch), addressed with one stride");
}

void putU64(std::vector<uint8_t> &out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(uint8_t(v >> (8 * i)));
}

} // namespace

StatusOr<PipelineFeedPlan> planPipelineFeeds(const bundle::Bundle &b,
                                             const PipelineRankPlan &plan) {
  PipelineFeedPlan out;
  out.feeds.resize(plan.work.size());
  const bundle::MemoryPlan &memory = b.plan();
  // Per program, its inputs' slots and strides, worked out once.
  std::map<const bundle::Program *, std::vector<PipelineFeed>> perProgram;
  for (const PipeWork &w : plan.work) {
    if (w.communicate() || !w.program || w.program->inputs().empty())
      continue;
    auto known = perProgram.find(w.program);
    if (known == perProgram.end()) {
      std::vector<PipelineFeed> feeds;
      for (const bundle::NamedSlot &in : w.program->inputs()) {
        std::string where =
            "rank " + std::to_string(plan.worldRank) + " " +
            std::string(bundle::programKindName(w.program->kind())) +
            " program '" + w.program->name() + "' input '" + in.name() + "'";
        if (int(in.slot()) >= memory.slots_size())
          return Status::error(where + " names slot " +
                               std::to_string(in.slot()) + " of " +
                               std::to_string(memory.slots_size()));
        const bundle::Slot &slot = memory.slots(int(in.slot()));
        if (slot.kind() != bundle::STASH)
          return Status::error(
              where + " is slot '" + slot.name() + "' of kind " +
              bundle::SlotKind_Name(slot.kind()) +
              ": a chunk program's per-microbatch inputs are STASH slots, "
              "one entry per (chunk, microbatch), which the runtime fills "
              "before the chunk's forward; recompile the bundle");
        // The bundle declares an input's entry size (NamedSlot.stash_stride):
        // a chunk program may take an input it does not read (a later
        // stage's forward takes the tokens), which is still fed, so its
        // entry holds them for whichever program of the pair reads them.
        StatusOr<uint64_t> stride = stashStride(*w.program, in.slot(), where);
        if (in.stash_stride() > 0) {
          if (stride && *stride != in.stash_stride())
            return Status::error(
                where + ": the program's steps address it with stash stride " +
                std::to_string(*stride) + ", the bundle declares " +
                std::to_string(in.stash_stride()));
          stride = in.stash_stride();
        }
        if (!stride)
          return stride.status();
        uint64_t bytes = *stride;
        if (slot.shape_size() > 0) {
          bytes = bundle::dtypeBytes(slot.dtype());
          for (int64_t d : slot.shape())
            bytes *= uint64_t(d);
        }
        if (bytes > *stride)
          return Status::error(where + " holds " + std::to_string(bytes) +
                               " bytes a microbatch, more than its stash "
                               "stride of " +
                               std::to_string(*stride));
        auto [it, fresh] = out.inputs.emplace(in.name(), bytes);
        if (!fresh && it->second != bytes)
          return Status::error(where + " holds " + std::to_string(bytes) +
                               " bytes a microbatch, another program's '" +
                               in.name() + "' " + std::to_string(it->second));
        // The entry's offset is added per instruction; the stride stands
        // in for it here.
        feeds.push_back({in.name(), in.slot(), *stride, bytes});
      }
      known = perProgram.emplace(w.program, std::move(feeds)).first;
    }
    std::vector<PipelineFeed> &feeds = out.feeds[w.index];
    for (PipelineFeed f : known->second) {
      f.offset *= uint64_t(w.entry);
      feeds.push_back(std::move(f));
    }
  }
  return out;
}

std::map<uint32_t, std::set<int>> pipelineSlotUsers(const bundle::Bundle &b) {
  std::map<uint32_t, std::set<int>> users;
  std::vector<std::vector<int>> groups = bundle::pipelineGroups(b);
  if (groups.empty())
    return users;
  const std::vector<int> &first = groups.front();
  for (size_t p = 0; p < first.size(); ++p) {
    if (first[p] < 0 || first[p] >= b.ranks_size())
      continue;
    for (uint32_t slot : bundle::pipelineRankSlots(b, b.ranks(first[p])))
      users[slot].insert(int(p));
  }
  return users;
}

bool ownsPipelineVariable(const std::map<uint32_t, std::set<int>> &users,
                          uint32_t slot, int pipelineRank) {
  auto it = users.find(slot);
  if (it == users.end() || it->second.empty())
    return pipelineRank == 0;
  return *it->second.begin() == pipelineRank;
}

std::vector<uint8_t> packTensors(const std::vector<hf::NamedTensor> &tensors) {
  std::vector<uint8_t> out;
  putU64(out, tensors.size());
  for (const hf::NamedTensor &t : tensors) {
    putU64(out, t.name.size());
    out.insert(out.end(), t.name.begin(), t.name.end());
    putU64(out, uint64_t(t.dtype));
    putU64(out, t.shape.size());
    for (int64_t d : t.shape)
      putU64(out, uint64_t(d));
    putU64(out, t.data.size());
    out.insert(out.end(), t.data.begin(), t.data.end());
  }
  return out;
}

StatusOr<std::vector<hf::NamedTensor>>
unpackTensors(const std::vector<uint8_t> &bytes) {
  size_t at = 0;
  bool ok = true;
  auto u64 = [&]() -> uint64_t {
    if (bytes.size() - at < 8) {
      ok = false;
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= uint64_t(bytes[at + size_t(i)]) << (8 * i);
    at += 8;
    return v;
  };
  auto take = [&](uint64_t n) -> const uint8_t * {
    if (!ok || bytes.size() - at < n) {
      ok = false;
      return nullptr;
    }
    const uint8_t *p = bytes.data() + at;
    at += n;
    return p;
  };
  std::vector<hf::NamedTensor> out;
  uint64_t count = u64();
  for (uint64_t i = 0; ok && i < count; ++i) {
    hf::NamedTensor t;
    uint64_t nameBytes = u64();
    const uint8_t *name = take(nameBytes);
    if (!ok)
      break;
    t.name.assign(reinterpret_cast<const char *>(name), nameBytes);
    uint64_t dtype = u64();
    if (dtype > uint64_t(octet::DType::Bool))
      ok = false;
    t.dtype = octet::DType(dtype);
    uint64_t rank = u64();
    for (uint64_t d = 0; ok && d < rank; ++d)
      t.shape.push_back(int64_t(u64()));
    uint64_t dataBytes = u64();
    const uint8_t *data = take(dataBytes);
    if (!ok)
      break;
    t.data.assign(data, data + dataBytes);
    out.push_back(std::move(t));
  }
  if (!ok || at != bytes.size())
    return Status::error(
        "a pipeline rank's checkpoint part is " + std::to_string(bytes.size()) +
        " bytes that do not read as tensors (stopped at byte " +
        std::to_string(at) + ")");
  return out;
}

StatusOr<std::vector<hf::NamedTensor>>
joinPipelineParts(const std::vector<std::string> &order,
                  std::vector<std::vector<hf::NamedTensor>> parts) {
  std::map<std::string, std::pair<size_t, hf::NamedTensor *>> found;
  for (size_t p = 0; p < parts.size(); ++p)
    for (hf::NamedTensor &t : parts[p]) {
      auto [it, fresh] = found.emplace(t.name, std::make_pair(p, &t));
      if (!fresh)
        return Status::error("pipeline ranks " +
                             std::to_string(it->second.first) + " and " +
                             std::to_string(p) + " both hold '" + t.name +
                             "' for the checkpoint");
    }
  if (found.size() != order.size())
    for (const auto &[name, where] : found)
      if (std::find(order.begin(), order.end(), name) == order.end())
        return Status::error("pipeline rank " + std::to_string(where.first) +
                             " holds '" + name +
                             "', which the checkpoint has no place for");
  std::vector<hf::NamedTensor> out;
  for (const std::string &name : order) {
    auto it = found.find(name);
    if (it == found.end())
      return Status::error("no pipeline rank holds '" + name +
                           "' for the checkpoint");
    out.push_back(std::move(*it->second.second));
  }
  return out;
}

StatusOr<int64_t> evaluationBatches(int64_t requested, uint64_t heldOut,
                                    int64_t pipelineMicrobatches,
                                    int64_t replicas) {
  const int64_t unit =
      pipelineMicrobatches > 0 ? pipelineMicrobatches * replicas : 1;
  if (requested > 0 && requested % unit != 0)
    return Status::error(
        "--eval-batches is " + std::to_string(requested) +
        ", but this pipeline bundle evaluates whole forward-only steps of " +
        std::to_string(pipelineMicrobatches) + " microbatches on each of its " +
        std::to_string(replicas) + " data replicas: pass a multiple of " +
        std::to_string(unit));
  if (requested > 0)
    return requested;
  int64_t batches =
      heldOut > 0 ? int64_t(std::min<uint64_t>(16, heldOut)) : 4;
  return std::max(unit, batches / unit * unit);
}

} // namespace octet
