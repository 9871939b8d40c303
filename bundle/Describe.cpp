#include "bundle/Describe.h"

#include "bundle/Bundle.h"
#include "bundle/PipelineBundle.h"
#include "support/Sha256.h"
#include "support/ShapeString.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace octet::bundle {
namespace {

std::string pad(std::string s, size_t width) {
  if (s.size() < width)
    s.append(width - s.size(), ' ');
  return s;
}

} // namespace

void describeBuild(const Bundle &b, std::ostream &os) {
  const BuildInfo &bi = b.build();
  os << "bundle format " << b.format_version() << ", compiled by octet "
     << (b.compiler_version().empty() ? "?" : b.compiler_version()) << "\n";
  os << "content hash  " << toHex(b.content_hash()) << "\n";
  os << "model         " << (bi.model_name().empty() ? "?" : bi.model_name())
     << " (spec: " << (bi.spec_format().empty() ? "?" : bi.spec_format())
     << ", " << bi.spec_text().size() << " bytes)\n";
  os << "target        " << (bi.target().empty() ? "?" : bi.target())
     << ", world size " << b.world_size() << "\n";
  if (bi.options_size()) {
    os << "options      ";
    for (const Option &o : bi.options())
      os << " " << o.key() << "=" << o.value();
    os << "\n";
  }
  uint64_t params = 0;
  int hfNamed = 0;
  std::set<std::string> hfTensors;
  for (const Parameter &p : b.parameters()) {
    uint64_t n = 1;
    for (int64_t d : p.shape())
      n *= uint64_t(d);
    params += n;
    hfNamed += !p.hf_pieces().empty();
    for (const HfPiece &piece : p.hf_pieces())
      hfTensors.insert(piece.tensor());
  }
  os << "parameters    " << b.parameters_size() << " tensors, " << params
     << " elements; " << hfNamed << " stored as " << hfTensors.size()
     << " HF tensors\n";
  const Schedule &s = b.schedule();
  if (s.seq_len())
    os << "schedule      micro-batch " << s.micro_batch_size() << " x seq "
       << s.seq_len() << ", accumulate " << s.grad_accum_steps() << ", "
       << s.steps() << " steps, lr " << s.lr() << "\n";
}

void describePrecision(const Bundle &b, std::ostream &os) {
  os << "precision (" << b.precision_size() << " GEMMs)\n";
  if (b.precision_size() == 0)
    return;
  os << "  " << pad("parameter", 40) << pad("role", 7) << pad("A", 6)
     << pad("B", 6) << pad("D", 6) << pad("recipe", 11) << "why\n";
  for (const PrecisionEntry &e : b.precision())
    os << "  " << pad(e.param(), 40) << pad(roleName(e.role()), 7)
       << pad(dtypeName(e.a_type()), 6) << pad(dtypeName(e.b_type()), 6)
       << pad(dtypeName(e.d_type()), 6) << pad(e.recipe(), 11) << e.reason()
       << "\n";
}

void describePlan(const Bundle &b, std::ostream &os, int maxSlots) {
  const MemoryPlan &plan = b.plan();
  uint64_t total = 0;
  for (const Arena &a : plan.arenas())
    total += a.bytes();
  os << "memory plan: " << humanBytes(total) << " in " << plan.arenas_size()
     << " arena(s), " << plan.slots_size() << " slots; peak live "
     << humanBytes(plan.peak_live_bytes()) << "\n";
  for (int i = 0; i < plan.arenas_size(); ++i) {
    const Arena &a = plan.arenas(i);
    os << "  arena " << i << " '" << a.name() << "': " << humanBytes(a.bytes())
       << " (" << a.bytes() << " bytes), stream " << a.stream()
       << ", alignment " << a.alignment() << "\n";
  }
  // Persistent kinds are summed by their bytes; activations share space
  // through liveness, so their sum exceeds what they occupy.
  std::map<int, std::pair<uint64_t, int>> byKind;
  for (const Slot &s : plan.slots()) {
    auto &e = byKind[int(s.kind())];
    e.first += s.bytes();
    e.second += 1;
  }
  // ZeRO-1: the plan is every rank's, with each rank's part of the
  // sharded state and of the f32 masters it keeps sharded (their casts
  // are gathered): a line each, what a rank holds and the whole.
  auto shardedLine = [&](const auto &tensors, const char *what) {
    uint64_t bytes = 0;
    int count = 0, shards = 1;
    for (const auto &t : tensors)
      if (t.data_shards() > 1 && t.slot() < uint32_t(plan.slots_size())) {
        bytes += plan.slots(int(t.slot())).bytes();
        shards = int(t.data_shards());
        ++count;
      }
    if (count > 0)
      os << "  per rank: " << count << " " << what << " sharded over "
         << shards << " data-parallel ranks hold " << humanBytes(bytes)
         << " on each (" + humanBytes(bytes * uint64_t(shards)) + " whole)\n";
  };
  shardedLine(b.state(), "state tensors");
  shardedLine(b.parameters(), "parameters' f32 masters");
  // Activations an all-gather of the train microbatch (or of a pipeline
  // chunk's backward) writes: the embedding gradient's rows of the whole
  // data group, each the data size times its rank's part.
  std::set<uint32_t> gatheredRows;
  for (const RankProgram &rp : b.ranks())
    for (const Program &p : rp.programs())
      for (const Step &step : p.steps())
        if ((p.kind() == TRAIN_MICROBATCH || p.kind() == CHUNK_BACKWARD) &&
            step.has_collective() &&
            step.collective().op() == ALL_GATHER &&
            step.collective().recv().slot() < uint32_t(plan.slots_size()) &&
            plan.slots(int(step.collective().recv().slot())).kind() ==
                ACTIVATION)
          gatheredRows.insert(step.collective().recv().slot());
  if (!gatheredRows.empty()) {
    uint64_t gatheredBytes = 0;
    std::string listed;
    for (uint32_t slot : gatheredRows) {
      const Slot &s = plan.slots(int(slot));
      gatheredBytes += s.bytes();
      listed += std::string(listed.empty() ? "" : ", ") + dtypeName(s.dtype()) +
                " " + shapeString(s.shape()) + " " + humanBytes(s.bytes());
    }
    os << "  per rank: " << gatheredRows.size()
       << " activation slots all-gathered over the data group hold "
       << humanBytes(gatheredBytes) << " in the backward ("
       << listed << ")\n";
  }
  os << "  by kind (sum of slot sizes; activations overlap in time):\n";
  for (auto &[kind, e] : byKind)
    os << "    " << pad(slotKindName(SlotKind(kind)), 14)
       << pad(humanBytes(e.first), 12) << e.second << " slots\n";
  std::vector<int> order(size_t(plan.slots_size()));
  for (int i = 0; i < plan.slots_size(); ++i)
    order[size_t(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    return plan.slots(x).bytes() > plan.slots(y).bytes();
  });
  size_t shown = maxSlots > 0 ? std::min(order.size(), size_t(maxSlots))
                              : order.size();
  os << "  " << (shown == order.size() ? "slots" : "largest slots")
     << " (offset, bytes, kind, dtype, shape, live steps):\n";
  for (size_t i = 0; i < shown; ++i) {
    const Slot &s = plan.slots(order[i]);
    char off[32];
    std::snprintf(off, sizeof off, "%12llu", (unsigned long long)s.offset());
    os << "    " << pad(s.name(), 40) << off << "  "
       << pad(humanBytes(s.bytes()), 11) << pad(slotKindName(s.kind()), 13)
       << pad(dtypeName(s.dtype()), 5) << pad(shapeString(s.shape()), 18);
    if (!s.last_program().empty())
      // A step-local gradient: from its first write to the train program's
      // end, then from the optimizer's start to its last read.
      os << s.program() << "[" << s.first_step() << ", end] + "
         << s.last_program() << "[0, " << s.last_step() << "]";
    else if (!s.program().empty())
      os << s.program() << "[" << s.first_step() << ", " << s.last_step()
         << "]";
    else
      os << "persistent";
    os << "\n";
  }
}

namespace {

template <typename Values>
std::string joined(const Values &values, const char *separator) {
  std::string out;
  for (auto v : values)
    out += (out.empty() ? "" : separator) + std::to_string(v);
  return out;
}

// One line: which parameter, over which slot, its view and box, the
// encoding's options (as cuTensorMapEncodeTiled takes them).
void describeTensorMap(const Bundle &b, int arg, const TensorMap &m,
                       std::ostream &os) {
  static const char *const swizzles[] = {"none", "32B", "64B", "128B"};
  static const char *const interleaves[] = {"none", "16B", "32B"};
  static const char *const promotions[] = {"none", "64B", "128B", "256B"};
  auto name = [](int value, const char *const *names,
                 int count) -> std::string {
    return value >= 0 && value < count ? names[value]
                                       : "?" + std::to_string(value);
  };
  const auto &slots = b.plan().slots();
  std::string slot = m.base().slot() < uint32_t(slots.size())
                         ? slots[int(m.base().slot())].name()
                         : "slot " + std::to_string(m.base().slot());
  os << "    tensor map (argument " << arg << "): " << slot;
  if (m.base().byte_offset())
    os << " +" << m.base().byte_offset();
  os << " " << dtypeName(m.dtype()) << " dims [" << joined(m.dims(), ", ")
     << "] strides [" << joined(m.strides(), ", ") << "] box ["
     << joined(m.box(), ", ") << "] swizzle " << name(m.swizzle(), swizzles, 4)
     << " interleave " << name(m.interleave(), interleaves, 3) << " L2 "
     << name(m.l2_promotion(), promotions, 4) << " oob "
     << (m.oob_fill() == TENSOR_MAP_OOB_FILL_ZERO ? "zero" : "nan") << "\n";
}

} // namespace

void describeKernels(const Bundle &b, std::ostream &os) {
  std::vector<int> launches(size_t(b.kernels_size()), 0);
  std::vector<int> calls(size_t(b.gemms_size()), 0);
  // Each launch of a kernel passes tensor maps of the same shape over its
  // own slots: the first launch's are shown.
  std::vector<const KernelLaunch *> firstLaunch(size_t(b.kernels_size()));
  for (const RankProgram &rp : b.ranks())
    for (const Program &p : rp.programs())
      for (const Step &s : p.steps()) {
        if (s.has_launch() && s.launch().kernel() < launches.size() &&
            !firstLaunch[s.launch().kernel()])
          firstLaunch[s.launch().kernel()] = &s.launch();
        if (s.has_launch() && s.launch().kernel() < launches.size())
          ++launches[s.launch().kernel()];
        if (s.has_gemm() && s.gemm().gemm() < calls.size())
          ++calls[s.gemm().gemm()];
      }
  os << "modules (" << b.modules_size() << ")\n";
  for (const Module &m : b.modules())
    os << "  " << pad(m.name(), 32) << "PTX " << humanBytes(m.ptx().size())
       << (m.cubin().empty() ? std::string(", no cubin")
                             : ", cubin " + m.cubin_arch() + " " +
                                   humanBytes(m.cubin().size()))
       << "\n";
  os << "kernels (" << b.kernels_size() << ")\n";
  for (int i = 0; i < b.kernels_size(); ++i) {
    const Kernel &k = b.kernels(i);
    os << "  " << pad(k.symbol(), 40) << " " << pad(std::to_string(launches[size_t(i)]) +
                                                 " launches",
                                             14)
       << k.summary() << (k.missing_code() ? "  [no code]" : "") << "\n";
    if (const KernelLaunch *first = firstLaunch[size_t(i)])
      for (int a = 0; a < first->args_size(); ++a)
        if (first->args(a).has_tensor_map())
          describeTensorMap(b, a, first->args(a).tensor_map(), os);
  }
  os << "GEMMs (" << b.gemms_size() << ")\n";
  for (int i = 0; i < b.gemms_size(); ++i) {
    const GemmDescriptor &g = b.gemms(i);
    char shape[96];
    std::snprintf(shape, sizeof shape, "%lldx%lldx%lld",
                  (long long)g.m(), (long long)g.n(), (long long)g.k());
    os << "  " << pad(g.name(), 36) << " " << pad(roleName(g.role()), 7)
       << pad(shape, 20) << dtypeName(g.a_type()) << "x"
       << dtypeName(g.b_type()) << "->" << dtypeName(g.d_type())
       << " epilogue " << epilogueName(g.epilogue())
       << (g.fast_accum() ? " fast-accum" : "")
       << (g.accumulate() ? " accumulate" : "")
       << (g.algorithm().empty() ? " algo: heuristic at load"
                                 : " algo: recorded")
       << ", " << calls[size_t(i)] << " calls\n";
  }
}

namespace {

// " (ranks 2, 3)" for a group whose name other groups share (a pipeline
// × data bundle's data groups, one per pipeline rank, and its pipelines),
// so that each rank's lines say which of them it reduces over.
std::string groupRanks(const Bundle &b, uint32_t index) {
  if (index >= uint32_t(b.groups_size()))
    return "";
  const Group &g = b.groups(int(index));
  int named = 0;
  for (const Group &other : b.groups())
    named += other.name() == g.name();
  if (named < 2)
    return "";
  std::string ranks;
  for (uint32_t r : g.ranks())
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  return " (ranks " + ranks + ")";
}

// In place: a reduce-scatter sends its whole receive buffer, an all-gather
// the rank's part of it (sendbuff = recvbuff + rank × part).
bool inPlace(const Collective &c) {
  bool sameBuffer = c.send().slot() == c.recv().slot() &&
                    c.send().byte_offset() == c.recv().byte_offset();
  return sameBuffer &&
         (c.op() == REDUCE_SCATTER ||
          (c.op() == ALL_GATHER && c.send().rank_stride() > 0));
}

} // namespace

// A program's collectives, one line per kind of call: how many calls
// (a bucket's tensors go to NCCL as one call; a bucket of BF16 weight
// gradients and f32 norm gradients counts on both element types' lines),
// tensors and elements, over which group (its ranks as the program counts
// them), and when: on the communication stream beside compute, in the last
// microbatch only.
void describeCollectives(const Bundle &b, const Program &p, std::ostream &os) {
  struct Totals {
    int calls = 0, tensors = 0;
    uint64_t elements = 0;
  };
  std::map<std::string, Totals> calls;
  std::set<std::string> inCall;
  for (const Step &s : p.steps()) {
    if (!s.has_collective())
      continue;
    const Collective &c = s.collective();
    std::string group = c.group() < uint32_t(b.groups_size())
                            ? b.groups(int(c.group())).name()
                            : "group " + std::to_string(c.group());
    std::string op = CollectiveOp_Name(c.op());
    std::transform(op.begin(), op.end(), op.begin(),
                   [](unsigned char ch) { return std::tolower(ch); });
    bool reduces = c.op() == ALL_REDUCE || c.op() == REDUCE_SCATTER;
    std::string key = op + " " + (reduces ? c.reduce() + " " : "") +
                      dtypeName(c.dtype()) + " over '" + group + "'" +
                      groupRanks(b, c.group());
    if (inPlace(c))
      key += ", in place";
    if (s.stream() > 0)
      key += ", stream " + std::to_string(s.stream());
    if (c.last_microbatch())
      key += ", last microbatch";
    Totals &t = calls[key];
    t.tensors += 1;
    t.elements += c.count();
    inCall.insert(key);
    if (c.grouped_with_next())
      continue;
    for (const std::string &k : inCall)
      calls[k].calls += 1;
    inCall.clear();
  }
  for (const auto &[key, t] : calls)
    os << "    collective " << key << ": " << t.calls << " calls, "
       << t.tensors << " tensors, " << t.elements << " elements\n";
}

void listCollectives(const Bundle &b, std::ostream &os) {
  os << "rank\tprogram\top\treduce\tdtype\tgroup\tgroup_size\tstream\t"
        "last_microbatch\ttensors\tcount\tin_place\n";
  // One line per element type of a call: a bucket of BF16 weight
  // gradients and f32 norm gradients is one NCCL group of two lines, so
  // that count × the type's size is the bytes each moves.
  struct PerType {
    DType dtype;
    int tensors = 0;
    uint64_t count = 0;
  };
  for (const RankProgram &rp : b.ranks())
    for (const Program &p : rp.programs()) {
      std::vector<PerType> types;
      for (const Step &s : p.steps()) {
        if (!s.has_collective())
          continue;
        const Collective &c = s.collective();
        auto same = std::find_if(types.begin(), types.end(),
                                 [&](const PerType &t) {
                                   return t.dtype == c.dtype();
                                 });
        if (same == types.end())
          same = types.insert(types.end(), PerType{c.dtype()});
        ++same->tensors;
        same->count += c.count();
        if (c.grouped_with_next())
          continue;
        std::string op = CollectiveOp_Name(c.op());
        std::transform(op.begin(), op.end(), op.begin(),
                       [](unsigned char ch) { return std::tolower(ch); });
        bool reduces = c.op() == ALL_REDUCE || c.op() == REDUCE_SCATTER;
        bool known = c.group() < uint32_t(b.groups_size());
        for (const PerType &t : types)
          os << rp.rank() << "\t" << p.name() << "\t" << op << "\t"
             << (reduces ? c.reduce() : "-") << "\t" << dtypeName(t.dtype)
             << "\t"
             << (known ? b.groups(int(c.group())).name()
                       : "group " + std::to_string(c.group()))
             << "\t" << (known ? b.groups(int(c.group())).ranks_size() : 0)
             << "\t" << s.stream() << "\t" << (c.last_microbatch() ? 1 : 0)
             << "\t" << t.tensors << "\t" << t.count << "\t"
             << (inPlace(c) ? 1 : 0) << "\n";
        types.clear();
      }
    }
}

// The schedule the pipeline ranks' instruction lists make, as the
// simulator steps it.
void describePipeline(const Bundle &b, std::ostream &os) {
  const Pipeline &p = b.pipeline();
  std::vector<std::vector<int>> groups = pipelineGroups(b);
  os << "pipeline      " << p.schedule() << ", " << p.ranks() << " ranks x "
     << p.virtual_stages() << " chunks, " << p.microbatches()
     << " microbatches, " << groups.size() << " '" << p.group()
     << "' groups\n";
  if (groups.empty())
    return;
  auto schedule = scheduleOf(b, groups[0]);
  auto simulation = schedule ? simulatePipeline(*schedule)
                             : StatusOr<PipeSimulation>(schedule.status());
  if (!simulation) {
    os << "  the instruction lists do not run: "
       << simulation.status().message() << "\n";
    return;
  }
  os << drawPipeline(*schedule, *simulation);
}

// A pipeline rank's own arena (PipelineRank.arena_bytes and slots), all
// that it allocates, in its parts: the persistent slots (its variables and
// every rank's), the activation region its programs take turns in, and
// its Stash slots; beside the whole plan's arena, which places every
// rank's slots at once.
void describeRankPlan(const Bundle &b, const RankProgram &rp,
                      std::ostream &os) {
  if (StatusOr<RankMemory> memory = pipelineRankMemory(b, int(rp.rank()));
      !memory) {
    os << "  arena: " << memory.status().message() << "\n";
    return;
  }
  const MemoryPlan &plan = b.plan();
  RankArenaLayout parts = rankArenaParts(b, rp);
  int counts[3] = {0, 0, 0};
  uint64_t reach = 0;
  std::string farthest;
  for (const auto &[slot, offset] : parts.offsets) {
    const Slot &s = plan.slots(int(slot));
    ++counts[int(arenaRegionOf(s))];
    if (arenaRegionOf(s) == ArenaRegion::Activation &&
        offset + s.bytes() > reach) {
      reach = offset + s.bytes();
      farthest = s.program();
    }
  }
  os << "  arena: " << humanBytes(parts.bytes()) << " (the whole plan's "
     << humanBytes(plan.arenas_size() ? plan.arenas(0).bytes() : 0)
     << ") = " << humanBytes(parts.persistentBytes) << " persistent in "
     << counts[int(ArenaRegion::Persistent)]
     << " slots (its variables and every rank's) + "
     << humanBytes(parts.activationBytes) << " activations in "
     << counts[int(ArenaRegion::Activation)] << " slots"
     << (farthest.empty() ? "" : " (farthest: " + farthest + ")") << " + "
     << humanBytes(parts.stashBytes) << " stash in "
     << counts[int(ArenaRegion::Stash)] << " slots of "
     << rp.pipeline().stash_entries() << " entries\n";
}

// Each kind of transfer a pipeline rank makes once: direction, edge,
// stage, peer and the tensors (slot, dtype, shape, bytes per entry).
void describeTransfers(const Bundle &b, const RankProgram &rp,
                       std::ostream &os) {
  std::set<std::tuple<bool, bool, uint32_t>> seen;
  for (const PipeInstruction &i : rp.pipeline().instructions())
    for (const PipeTransfer &t : i.transfers()) {
      if (!seen.insert({t.send(), t.gradient(), t.producer_stage()}).second)
        continue;
      os << "  " << (t.send() ? "sends" : "receives") << " the "
         << (t.gradient() ? "gradient" : "activation") << " edge of stage "
         << t.producer_stage() << (t.send() ? " to" : " from")
         << " pipeline rank " << t.peer() << ":";
      for (const SlotRef &r : t.tensors()) {
        const Slot &s = b.plan().slots(int(r.slot()));
        os << " '" << s.name() << "' " << dtypeName(s.dtype())
           << shapeString(s.shape()) << " (entries of " << r.stash_stride()
           << " bytes)";
      }
      os << "\n";
    }
}

void describePrograms(const Bundle &b, std::ostream &os) {
  if (b.has_pipeline())
    describePipeline(b, os);
  for (const RankProgram &rp : b.ranks()) {
    os << "rank " << rp.rank() << " (stage " << rp.stage() << ")\n";
    if (b.has_pipeline()) {
      int compute = 0, groups = 0;
      for (const PipeInstruction &i : rp.pipeline().instructions())
        (i.kind() == PIPE_COMMUNICATE ? groups : compute)++;
      os << "  pipeline: " << compute << " compute instructions, " << groups
         << " communication groups, " << rp.pipeline().stash_entries()
         << " stash entries\n";
      describeRankPlan(b, rp, os);
      describeTransfers(b, rp, os);
    }
    for (const Program &p : rp.programs()) {
      int launches = 0, gemms = 0, other = 0;
      for (const Step &s : p.steps()) {
        if (s.has_launch())
          ++launches;
        else if (s.has_gemm())
          ++gemms;
        else
          ++other;
      }
      bool chunk = p.kind() == CHUNK_FORWARD || p.kind() == CHUNK_BACKWARD ||
                   p.kind() == CHUNK_INPUT_GRADIENT ||
                   p.kind() == CHUNK_WEIGHT_GRADIENT ||
                   p.kind() == CHUNK_EVAL_FORWARD;
      std::string name =
          p.name() +
          (chunk ? " (chunk " + std::to_string(p.chunk()) + ")" : "");
      size_t width = b.has_pipeline() ? 30 : 20;
      // A longer name (stage0_input_gradient's) keeps a space before the
      // counts.
      os << "  " << pad(programKindName(p.kind()), 18) << pad(name, width)
         << (name.size() >= width ? " " : "") << p.steps_size() << " steps: " << launches << " kernels, " << gemms
         << " GEMMs, " << other << " other"
         << (p.capturable() ? ", CUDA-graph capturable" : "") << "\n";
      describeCollectives(b, p, os);
    }
  }
}

} // namespace octet::bundle
