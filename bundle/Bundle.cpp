#include "bundle/Bundle.h"

#include "bundle/PipelineBundle.h"

#include "support/AtomicFile.h"
#include "support/Sha256.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

namespace octet::bundle {

std::string serializeDeterministic(const Bundle &bundle) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream raw(&out);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.SetSerializationDeterministic(true);
    bundle.SerializeToCodedStream(&coded);
  }
  return out;
}

std::string computeContentHash(const Bundle &bundle) {
  Bundle copy = bundle;
  copy.clear_content_hash();
  auto digest = sha256(serializeDeterministic(copy));
  return std::string(digest.begin(), digest.end());
}

std::string finalizeAndSerialize(Bundle &bundle) {
  if (bundle.format_version() == 0)
    bundle.set_format_version(kBundleFormatVersion);
  bundle.set_content_hash(computeContentHash(bundle));
  return serializeDeterministic(bundle);
}

Status writeBundle(Bundle &bundle, const std::string &path) {
  return writeFileAtomically(path, finalizeAndSerialize(bundle))
      .withContext("writing the bundle");
}

StatusOr<Bundle> parseBundle(const std::string &bytes,
                             const std::string &origin) {
  Bundle bundle;
  if (!bundle.ParseFromString(bytes))
    return Status::error(origin +
                         " is not an octet bundle (protobuf parse failed): "
                         "pass a file written by `octet compile -o`");
  if (bundle.format_version() != kBundleFormatVersion)
    return Status::error(
        origin + " has bundle format version " +
        std::to_string(bundle.format_version()) + " (compiler " +
        (bundle.compiler_version().empty() ? std::string("unknown")
                                           : bundle.compiler_version()) +
        "), but this runtime reads version " +
        std::to_string(kBundleFormatVersion) +
        ": recompile the spec with this release (octet compile SPEC -o "
        "FILE.octet) or run it with the octet-run of the release that built "
        "it");
  if (bundle.content_hash().empty())
    return Status::error(origin + " has no content hash: it was not written "
                                  "by octet compile; recompile it");
  if (bundle.content_hash() != computeContentHash(bundle))
    return Status::error(origin +
                         " is corrupt: its content hash does not match its "
                         "contents (truncated copy, or edited by hand); "
                         "copy or compile it again");
  Status st = validate(bundle);
  if (!st)
    return st.withContext(origin);
  return bundle;
}

StatusOr<Bundle> readBundle(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot open bundle '" + path +
                         "': check the path (bundles are written by `octet "
                         "compile SPEC -o FILE.octet`)");
  std::stringstream buf;
  buf << in.rdbuf();
  return parseBundle(buf.str(), "bundle '" + path + "'");
}

namespace {

// `stashEntries`: those of the rank whose program refers (0 outside a
// pipeline rank, where nothing may be stash-strided).
Status checkRef(const Bundle &b, const SlotRef &ref, const std::string &what,
                uint32_t stashEntries = 0) {
  const auto &slots = b.plan().slots();
  if (ref.slot() >= uint32_t(slots.size()))
    return Status::error(what + " refers to slot " + std::to_string(ref.slot()) +
                         " but the plan has " + std::to_string(slots.size()) +
                         " slots");
  const Slot &s = slots[int(ref.slot())];
  if (ref.byte_offset() >= s.bytes() && s.bytes() > 0)
    return Status::error(what + " reads byte " +
                         std::to_string(ref.byte_offset()) + " of slot '" +
                         s.name() + "', which has " +
                         std::to_string(s.bytes()) + " bytes");
  if (ref.rank_stride() > 0) {
    if (ref.rank_group() >= uint32_t(b.groups_size()))
      return Status::error(what + " is a rank's part over group " +
                           std::to_string(ref.rank_group()) +
                           ", but the bundle has " +
                           std::to_string(b.groups_size()) + " groups");
    uint64_t last = ref.byte_offset() +
                    ref.rank_stride() * b.groups(int(ref.rank_group()))
                                            .ranks_size();
    if (last > s.bytes())
      return Status::error(what + " is a rank's part of " +
                           std::to_string(ref.rank_stride()) +
                           " bytes of slot '" + s.name() +
                           "', whose parts would end at byte " +
                           std::to_string(last) + " of " +
                           std::to_string(s.bytes()));
  }
  if (ref.stash_stride() > 0) {
    if (s.kind() != STASH || stashEntries == 0)
      return Status::error(what + " is a stash entry of slot '" + s.name() +
                           "', which is " +
                           (s.kind() != STASH
                                ? std::string("not a stash slot")
                                : std::string("outside a pipeline rank's "
                                              "stash")));
    // A view inside the entry (byte_offset) moves with it.
    uint64_t end = stashEntries * ref.stash_stride();
    if (ref.byte_offset() >= ref.stash_stride() || end > s.bytes())
      return Status::error(what + " is a stash entry of " +
                           std::to_string(ref.stash_stride()) +
                           " bytes of slot '" + s.name() + "', whose " +
                           std::to_string(stashEntries) +
                           " entries would end at byte " +
                           std::to_string(end) + " of " +
                           std::to_string(s.bytes()));
  }
  return Status::ok();
}

// A copy or memset of `bytes` through `ref` stays inside what the ref names:
// one stash entry, the last rank's part, or the slot. A slot's size is no
// bound for a stash entry's copy: the slot holds every entry.
Status checkSpan(const Bundle &b, const SlotRef &ref, uint64_t bytes,
                 const std::string &what, uint32_t stashEntries) {
  if (Status st = checkRef(b, ref, what, stashEntries); !st)
    return st;
  const Slot &s = b.plan().slots(int(ref.slot()));
  uint64_t end = ref.byte_offset() + bytes, limit = s.bytes();
  std::string region = "slot '" + s.name() + "'";
  if (ref.stash_stride() > 0) {
    limit = ref.stash_stride();
    region = "a stash entry of slot '" + s.name() + "'";
  } else if (ref.rank_stride() > 0) {
    end += ref.rank_stride() *
           (b.groups(int(ref.rank_group())).ranks_size() - 1);
  }
  if (end > limit)
    return Status::error(what + " of " + std::to_string(bytes) +
                         " bytes from byte " +
                         std::to_string(ref.byte_offset()) + " ends at byte " +
                         std::to_string(end) + " of " + region + ", which has " +
                         std::to_string(limit));
  return Status::ok();
}

// The rules cuTensorMapEncodeTiled enforces (CUDA driver API reference,
// tiled mode), checked here so that a bad record is refused with its field
// named when the bundle is read, not with CUDA_ERROR_INVALID_VALUE at load;
// and the map stays inside its slot, whose element type it has.
Status checkTensorMap(const Bundle &b, const TensorMap &m,
                      const std::string &what) {
  if (Status st = checkRef(b, m.base(), what + " base"); !st)
    return st;
  const Slot &slot = b.plan().slots(int(m.base().slot()));
  const Arena &arena = b.plan().arenas(int(slot.arena()));
  std::string at = what + " over slot '" + slot.name() + "'";
  auto fail = [&](const std::string &why) { return Status::error(at + ": " + why); };
  uint64_t element = dtypeBytes(m.dtype());
  if (element == 0)
    return fail("has no element type (dtype " + std::to_string(int(m.dtype())) +
                "); the compiler writes the slot's");
  if (slot.dtype() != DTYPE_UNSPECIFIED && slot.dtype() != m.dtype())
    return fail(std::string("is of ") + dtypeName(m.dtype()) +
                " but the slot holds " + dtypeName(slot.dtype()));
  int rank = m.dims_size();
  if (rank < 1 || rank > 5)
    return fail("has " + std::to_string(rank) +
                " dimensions; a tensor map has 1 to 5");
  if (m.strides_size() != rank - 1 || m.box_size() != rank ||
      m.element_strides_size() != rank)
    return fail("has " + std::to_string(rank) + " dimensions but " +
                std::to_string(m.strides_size()) + " strides, " +
                std::to_string(m.box_size()) + " box sizes and " +
                std::to_string(m.element_strides_size()) +
                " element strides; it needs rank - 1, rank and rank");
  bool interleaved = m.interleave() != TENSOR_MAP_INTERLEAVE_NONE;
  if (interleaved && rank < 3)
    return fail("is interleaved with " + std::to_string(rank) +
                " dimensions; an interleaved map has at least 3");
  uint64_t alignment = m.interleave() == TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
  uint64_t address = slot.offset() + m.base().byte_offset();
  if (address % alignment != 0 || arena.alignment() % alignment != 0)
    return fail("starts at byte " + std::to_string(address) + " of arena '" +
                arena.name() + "' (aligned to " +
                std::to_string(arena.alignment()) +
                "); its address must be a multiple of " +
                std::to_string(alignment) + " bytes");
  // The last byte any index reaches, which must be inside the slot.
  uint64_t end = m.dims(0) * element;
  for (int i = 0; i < rank; ++i) {
    std::string dim = "dimension " + std::to_string(i);
    if (m.dims(i) == 0 || m.dims(i) > (uint64_t(1) << 32))
      return fail(dim + " has " + std::to_string(m.dims(i)) +
                  " elements; it must have 1 to 2^32");
    if (m.box(i) == 0 || m.box(i) > 256)
      return fail(dim + " has a box of " + std::to_string(m.box(i)) +
                  " elements; a box is 1 to 256 along each dimension");
    if (m.element_strides(i) == 0 || m.element_strides(i) > 8)
      return fail(dim + " has element stride " +
                  std::to_string(m.element_strides(i)) + "; it must be 1 to 8");
    if (i == 0)
      continue;
    uint64_t stride = m.strides(i - 1);
    if (stride % alignment != 0 || stride >= (uint64_t(1) << 40))
      return fail(dim + " has a stride of " + std::to_string(stride) +
                  " bytes; strides are multiples of " +
                  std::to_string(alignment) + " below 2^40");
    end += (m.dims(i) - 1) * stride;
  }
  if (m.base().byte_offset() + end > slot.bytes())
    return fail("reaches byte " + std::to_string(m.base().byte_offset() + end) +
                " of a slot of " + std::to_string(slot.bytes()) +
                " bytes (dims and strides must describe the slot's tensor)");
  uint64_t innerBytes = m.box(0) * element;
  if (!interleaved && innerBytes % 16 != 0)
    return fail("has an innermost box of " + std::to_string(innerBytes) +
                " bytes; without interleave it must be a multiple of 16");
  if (m.interleave() == TENSOR_MAP_INTERLEAVE_32B &&
      m.swizzle() != TENSOR_MAP_SWIZZLE_32B)
    return fail("is interleaved by 32 bytes, which needs the 32-byte swizzle");
  if (!interleaved && m.swizzle() != TENSOR_MAP_SWIZZLE_NONE) {
    uint64_t span = m.swizzle() == TENSOR_MAP_SWIZZLE_32B    ? 32
                    : m.swizzle() == TENSOR_MAP_SWIZZLE_64B  ? 64
                    : m.swizzle() == TENSOR_MAP_SWIZZLE_128B ? 128
                                                             : 0;
    if (span == 0)
      return fail("has swizzle " + std::to_string(int(m.swizzle())) +
                  ", which is none of none, 32, 64 or 128 bytes");
    if (innerBytes > span)
      return fail("has an innermost box of " + std::to_string(innerBytes) +
                  " bytes, wider than its " + std::to_string(span) +
                  "-byte swizzle span");
  }
  if (m.l2_promotion() > TENSOR_MAP_L2_PROMOTION_256B || m.l2_promotion() < 0)
    return fail("has L2 promotion " + std::to_string(int(m.l2_promotion())) +
                ", which is none of none, 64, 128 or 256 bytes");
  if (m.oob_fill() > TENSOR_MAP_OOB_FILL_NAN_REQUEST_ZERO_FMA ||
      m.oob_fill() < 0)
    return fail("has out-of-bounds fill " + std::to_string(int(m.oob_fill())) +
                ", which is neither zero nor NaN");
  if (m.interleave() > TENSOR_MAP_INTERLEAVE_32B || m.interleave() < 0)
    return fail("has interleave " + std::to_string(int(m.interleave())) +
                ", which is none of none, 16 or 32 bytes");
  return Status::ok();
}

Status checkStep(const Bundle &b, const Step &step, const std::string &where,
                 uint32_t stashEntries) {
  std::string at = where + " (" + step.label() + ")";
  switch (step.op_case()) {
  case Step::kLaunch: {
    const KernelLaunch &l = step.launch();
    if (l.kernel() >= uint32_t(b.kernels_size()))
      return Status::error(at + " launches kernel " +
                           std::to_string(l.kernel()) + " of " +
                           std::to_string(b.kernels_size()));
    for (int i = 0; i < l.args_size(); ++i) {
      std::string arg = at + " argument " + std::to_string(i);
      if (l.args(i).has_slot())
        if (Status st = checkRef(b, l.args(i).slot(), arg, stashEntries); !st)
          return st;
      for (const SlotRef &ref : l.args(i).table().slots())
        if (Status st = checkRef(b, ref, arg + " (table)", stashEntries); !st)
          return st;
      if (l.args(i).has_tensor_map())
        if (Status st = checkTensorMap(b, l.args(i).tensor_map(),
                                       arg + " (tensor map)");
            !st)
          return st;
    }
    // A kernel without code has no launch shape yet; checkRunnable() is
    // what keeps it from running.
    if (!b.kernels(int(l.kernel())).missing_code() &&
        (l.grid().x() == 0 || l.block().x() == 0))
      return Status::error(at + " has an empty grid or block");
    return Status::ok();
  }
  case Step::kGemm: {
    const GemmCall &g = step.gemm();
    if (g.gemm() >= uint32_t(b.gemms_size()))
      return Status::error(at + " calls GEMM " + std::to_string(g.gemm()) +
                           " of " + std::to_string(b.gemms_size()));
    const GemmDescriptor &d = b.gemms(int(g.gemm()));
    Status st = checkRef(b, g.a(), at + " operand A", stashEntries);
    if (st)
      st = checkRef(b, g.b(), at + " operand B", stashEntries);
    if (st)
      st = checkRef(b, g.d(), at + " output D", stashEntries);
    if (st && d.has_a_scale())
      st = checkRef(b, g.a_scale(), at + " A scale", stashEntries);
    if (st && d.has_b_scale())
      st = checkRef(b, g.b_scale(), at + " B scale", stashEntries);
    if (st && d.has_d_scale())
      st = checkRef(b, g.d_scale(), at + " D scale", stashEntries);
    if (st && d.has_amax_d())
      st = checkRef(b, g.amax_d(), at + " amax of D", stashEntries);
    if (st && d.workspace_bytes() > 0)
      st = checkRef(b, g.workspace(), at + " workspace", stashEntries);
    return st;
  }
  case Step::kMemset:
    return checkSpan(b, step.memset().dst(), step.memset().bytes(),
                     at + " memset", stashEntries);
  case Step::kCopy: {
    const Copy &c = step.copy();
    Status st = checkSpan(b, c.dst(), c.bytes(), at + " copy destination",
                          stashEntries);
    if (st)
      st = checkSpan(b, c.src(), c.bytes(), at + " copy source", stashEntries);
    return st;
  }
  case Step::kCollective: {
    const Collective &c = step.collective();
    if (c.group() >= uint32_t(b.groups_size()))
      return Status::error(at + " uses group " + std::to_string(c.group()) +
                           " of " + std::to_string(b.groups_size()));
    Status st = Status::ok();
    if (c.has_send())
      st = checkRef(b, c.send(), at + " send buffer", stashEntries);
    if (st && c.has_recv())
      st = checkRef(b, c.recv(), at + " receive buffer", stashEntries);
    return st;
  }
  case Step::OP_NOT_SET:
    return Status::error(at + " has no operation");
  }
  return Status::ok();
}

// A slot's lifetime as spans of program steps. Programs run one at a time,
// so slots local to different programs never meet; a persistent slot
// (program "") meets every slot; a step-local gradient lives from its first
// step in `program` to that program's end and from the start of
// `last_program` to its last step.
struct Span {
  const std::string *program;
  int64_t first, last;
};

std::vector<Span> spansOf(const Slot &s) {
  if (!s.last_program().empty())
    return {{&s.program(), s.first_step(), INT64_MAX},
            {&s.last_program(), INT64_MIN, s.last_step()}};
  return {{&s.program(), s.first_step(), s.last_step()}};
}

bool liveTogether(const Slot &a, const Slot &b) {
  if (a.program().empty() || b.program().empty())
    return true;
  for (const Span &x : spansOf(a))
    for (const Span &y : spansOf(b))
      if (*x.program == *y.program && x.first <= y.last && y.first <= x.last)
        return true;
  return false;
}

} // namespace

Status checkSlotsDisjointWhileLive(
    const MemoryPlan &plan,
    std::vector<std::pair<uint32_t, uint64_t>> placed,
    const std::string &arena) {
  std::sort(placed.begin(), placed.end(), [](const auto &x, const auto &y) {
    return std::make_pair(x.second, x.first) < std::make_pair(y.second, y.first);
  });
  for (size_t i = 0; i < placed.size(); ++i) {
    const Slot &a = plan.slots(int(placed[i].first));
    uint64_t aAt = placed[i].second;
    for (size_t j = i + 1; j < placed.size(); ++j) {
      const Slot &b = plan.slots(int(placed[j].first));
      uint64_t bAt = placed[j].second;
      if (bAt >= aAt + a.bytes())
        break;
      if (a.bytes() == 0 || b.bytes() == 0 || !liveTogether(a, b))
        continue;
      auto when = [](const Slot &s) {
        if (s.program().empty())
          return std::string("persistent");
        std::string w = s.program() + " steps " +
                        std::to_string(s.first_step()) + ".." +
                        (s.last_program().empty() ? "" : s.last_program() + " ") +
                        std::to_string(s.last_step());
        return w;
      };
      return Status::error(
          arena + ": slots '" + a.name() + "' (bytes " +
          std::to_string(aAt) + "+" + std::to_string(a.bytes()) +
          ", " + when(a) + ") and '" + b.name() + "' (bytes " +
          std::to_string(bAt) + "+" + std::to_string(b.bytes()) +
          ", " + when(b) + ") share memory while both are live: the "
          "compiler's memory plan is wrong; recompile, and report it if it "
          "persists");
    }
  }
  return Status::ok();
}


Status validate(const Bundle &b) {
  const MemoryPlan &plan = b.plan();
  for (int i = 0; i < plan.slots_size(); ++i) {
    const Slot &s = plan.slots(i);
    std::string at = "memory plan slot " + std::to_string(i) + " '" +
                     s.name() + "'";
    if (s.arena() >= uint32_t(plan.arenas_size()))
      return Status::error(at + " is in arena " + std::to_string(s.arena()) +
                           " but the plan has " +
                           std::to_string(plan.arenas_size()));
    const Arena &a = plan.arenas(int(s.arena()));
    if (s.offset() + s.bytes() > a.bytes())
      return Status::error(at + " ends at byte " +
                           std::to_string(s.offset() + s.bytes()) +
                           ", past the end of arena '" + a.name() + "' (" +
                           std::to_string(a.bytes()) + " bytes)");
    if (a.alignment() > 1 && s.offset() % a.alignment() != 0)
      return Status::error(at + " at offset " + std::to_string(s.offset()) +
                           " is not aligned to " +
                           std::to_string(a.alignment()) + " bytes");
  }
  for (int a = 0; a < plan.arenas_size(); ++a) {
    std::vector<std::pair<uint32_t, uint64_t>> placed;
    for (int i = 0; i < plan.slots_size(); ++i)
      if (plan.slots(i).arena() == uint32_t(a))
        placed.emplace_back(uint32_t(i), plan.slots(i).offset());
    if (Status st = checkSlotsDisjointWhileLive(
            plan, std::move(placed),
            "memory plan arena '" + plan.arenas(a).name() + "'");
        !st)
      return st;
  }
  for (int i = 0; i < b.kernels_size(); ++i)
    if (!b.kernels(i).missing_code() &&
        b.kernels(i).module() >= uint32_t(b.modules_size()))
      return Status::error("kernel '" + b.kernels(i).symbol() +
                           "' is in module " +
                           std::to_string(b.kernels(i).module()) +
                           " but the bundle has " +
                           std::to_string(b.modules_size()) + " modules");
  for (const Module &m : b.modules())
    if (m.ptx().empty() && m.cubin().empty())
      return Status::error("module '" + m.name() +
                           "' has neither PTX nor a cubin");
  for (const Parameter &p : b.parameters())
    if (p.slot() >= uint32_t(plan.slots_size()))
      return Status::error("parameter '" + p.name() + "' has slot " +
                           std::to_string(p.slot()) + " out of range");
  for (const StateTensor &s : b.state())
    if (s.slot() >= uint32_t(plan.slots_size()))
      return Status::error("state tensor '" + s.name() + "' has slot " +
                           std::to_string(s.slot()) + " out of range");
  if (b.world_size() == 0)
    return Status::error("world_size is 0: a bundle is built for at least one "
                         "rank");
  if (uint32_t(b.ranks_size()) != b.world_size())
    return Status::error("world_size is " + std::to_string(b.world_size()) +
                         " but the bundle has programs for " +
                         std::to_string(b.ranks_size()) + " ranks");
  for (int r = 0; r < b.ranks_size(); ++r) {
    const RankProgram &rp = b.ranks(r);
    if (rp.rank() != uint32_t(r))
      return Status::error("rank programs out of order: entry " +
                           std::to_string(r) + " is for rank " +
                           std::to_string(rp.rank()));
    for (const Program &p : rp.programs())
      for (const NamedSlot &in : p.inputs()) {
        std::string at = "rank " + std::to_string(r) + " program '" +
                         p.name() + "' input '" + in.name() + "'";
        SlotRef ref;
        ref.set_slot(in.slot());
        ref.set_stash_stride(in.stash_stride());
        if (Status st = checkRef(b, ref, at, rp.pipeline().stash_entries());
            !st)
          return st;
        if (b.plan().slots(int(in.slot())).kind() == STASH &&
            in.stash_stride() == 0)
          return Status::error(at + " is stash slot '" +
                               b.plan().slots(int(in.slot())).name() +
                               "' without its entry stride");
      }
    for (const Program &p : rp.programs())
      for (int s = 0; s < p.steps_size(); ++s)
        if (Status st = checkStep(b, p.steps(s),
                                  "rank " + std::to_string(r) + " program '" +
                                      p.name() + "' step " +
                                      std::to_string(s),
                                  rp.pipeline().stash_entries());
            !st)
          return st;
  }
  return validatePipeline(b);
}

Status checkRunnable(const Bundle &b) {
  std::vector<std::string> missing;
  for (const Kernel &k : b.kernels())
    if (k.missing_code())
      missing.push_back(k.symbol());
  if (!missing.empty()) {
    std::string list;
    size_t shown = std::min<size_t>(missing.size(), 8);
    for (size_t i = 0; i < shown; ++i)
      list += (i ? ", " : "") + missing[i];
    if (shown < missing.size())
      list += " and " + std::to_string(missing.size() - shown) + " more";
    return Status::error(
        "the bundle cannot run: " + std::to_string(missing.size()) +
        " kernels have no code (the compiler's codegen does not cover them "
        "yet): " + list +
        "; `octet inspect` lists them all, recompile with a compiler whose "
        "codegen covers them");
  }
  return Status::ok();
}

namespace {

// Every wire value but DTYPE_UNSPECIFIED, and its DType.
constexpr std::pair<DType, octet::DType> kWireDTypes[] = {
    {F32, octet::DType::F32},       {BF16, octet::DType::BF16},
    {F16, octet::DType::F16},       {F8E4M3FN, octet::DType::F8E4M3FN},
    {F8E5M2, octet::DType::F8E5M2}, {I32, octet::DType::I32},
    {I64, octet::DType::I64},       {U8, octet::DType::U8},
};

} // namespace

std::optional<octet::DType> dtypeFromProto(DType dtype) {
  for (const auto &[wire, known] : kWireDTypes)
    if (wire == dtype)
      return known;
  return std::nullopt;
}

DType dtypeToProto(octet::DType dtype) {
  for (const auto &[wire, known] : kWireDTypes)
    if (known == dtype)
      return wire;
  return DTYPE_UNSPECIFIED;
}

const char *dtypeName(DType dtype) {
  std::optional<octet::DType> known = dtypeFromProto(dtype);
  return known ? octet::dtypeName(*known) : "?";
}

uint64_t dtypeBytes(DType dtype) {
  std::optional<octet::DType> known = dtypeFromProto(dtype);
  return known ? octet::dtypeBytes(*known) : 0;
}

const char *slotKindName(SlotKind kind) {
  switch (kind) {
  case PARAMETER:
    return "parameter";
  case GRADIENT:
    return "gradient";
  case OPTIMIZER_STATE:
    return "optimizer";
  case FP8_STATE:
    return "fp8-state";
  case WEIGHT_CACHE:
    return "weight-cache";
  case ACTIVATION:
    return "activation";
  case IO:
    return "io";
  case WORKSPACE:
    return "workspace";
  case SCRATCH:
    return "scratch";
  case STASH:
    return "stash";
  default:
    return "?";
  }
}

const char *roleName(GemmRole role) {
  switch (role) {
  case FPROP:
    return "fprop";
  case DGRAD:
    return "dgrad";
  case WGRAD:
    return "wgrad";
  default:
    return "-";
  }
}

const char *programKindName(ProgramKind kind) {
  switch (kind) {
  case TRAIN_MICROBATCH:
    return "train-microbatch";
  case OPTIMIZER_STEP:
    return "optimizer-step";
  case EVAL:
    return "eval";
  case INIT:
    return "init";
  case CHUNK_FORWARD:
    return "chunk-forward";
  case CHUNK_BACKWARD:
    return "chunk-backward";
  case CHUNK_INPUT_GRADIENT:
    return "chunk-input-grad";
  case CHUNK_WEIGHT_GRADIENT:
    return "chunk-weight-grad";
  case CHUNK_EVAL_FORWARD:
    return "chunk-eval";
  default:
    return "?";
  }
}

const char *epilogueName(GemmEpilogue epilogue) {
  switch (epilogue) {
  case EPILOGUE_NONE:
    return "none";
  case EPILOGUE_BIAS:
    return "bias";
  case EPILOGUE_GELU:
    return "gelu";
  case EPILOGUE_BIAS_GELU:
    return "bias+gelu";
  case EPILOGUE_GELU_AUX:
    return "gelu-aux";
  case EPILOGUE_BIAS_GELU_AUX:
    return "bias+gelu-aux";
  case EPILOGUE_BIAS_GRAD:
    return "bias-grad";
  default:
    return "?";
  }
}

} // namespace octet::bundle
