// octet inspect: what a .octet bundle holds, through the same reports
// octet-run prints, so a bundle can be read on a machine with no GPU.

#include "bundle/Bundle.h"
#include "bundle/Describe.h"
#include "bundle/PipelineBundle.h"
#include "compiler/Pipelines/PipelineLayout.h"
#include "spec/SpecReader.h"
#include "tools/octet/Commands.h"
#include "tools/octet/MemoryFit.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace octet {
namespace {

// The bundle's code as files, to read, assemble or disassemble.
// DIR itself is created when missing, with a note; its parent must exist,
// so that a mistyped path is an error rather than a new tree of
// directories.
Status writeModules(const bundle::Bundle &b, const std::string &dir) {
  namespace fs = llvm::sys::fs;
  if (!fs::is_directory(dir)) {
    if (fs::exists(dir))
      return Status::error("--modules " + dir +
                           ": not a directory; name a directory to write "
                           "the modules into");
    std::string parent = llvm::sys::path::parent_path(dir).str();
    if (!parent.empty() && !fs::is_directory(parent))
      return Status::error("--modules " + dir + ": its parent " + parent +
                           " does not exist; create it first, or name a "
                           "directory inside an existing one");
    if (std::error_code ec = fs::create_directory(dir))
      return Status::error("--modules " + dir +
                           ": cannot create it: " + ec.message());
    std::fprintf(stderr, "note: created %s for the modules\n", dir.c_str());
  }
  auto write = [&](const std::string &name, const std::string &bytes) {
    std::string path = dir + "/" + name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    return out ? Status::ok()
               : Status::error(path + ": cannot write (disk full?)");
  };
  for (const bundle::Module &m : b.modules()) {
    if (!m.ptx().empty())
      OCTET_RETURN_IF_ERROR(write(m.name() + ".ptx", m.ptx()));
    if (!m.cubin().empty())
      OCTET_RETURN_IF_ERROR(write(m.name() + ".cubin", m.cubin()));
  }
  return Status::ok();
}

// The plan's totals as `octet compile --memory-plan` prints them: the
// persistent region ends where the slots that outlive programs end; the
// activation region is the rest of the arena, set by the program whose
// slots reach furthest. A program's peak live bytes sum its slots (aligned,
// as placed) at the step where that sum is largest.
PlanSummary summarize(const bundle::MemoryPlan &plan) {
  PlanSummary s;
  uint64_t arena = 0, align = 1;
  for (const bundle::Arena &a : plan.arenas()) {
    arena += a.bytes();
    align = std::max<uint64_t>(align, a.alignment());
  }
  auto aligned = [&](uint64_t b) { return (b + align - 1) / align * align; };
  std::map<std::string, uint64_t> reach;
  std::map<std::string, std::map<int64_t, int64_t>> live; // step -> delta
  for (const bundle::Slot &slot : plan.slots()) {
    if (slot.kind() == bundle::STASH) {
      s.stashBytes += aligned(slot.bytes());
      continue;
    }
    if (slot.program().empty()) {
      s.persistentBytes =
          std::max(s.persistentBytes, slot.offset() + aligned(slot.bytes()));
      continue;
    }
    reach[slot.program()] = std::max(reach[slot.program()],
                                     slot.offset() + slot.bytes());
    auto &events = live[slot.program()];
    events[slot.first_step()] += int64_t(aligned(slot.bytes()));
    if (!slot.last_program().empty()) {
      // A step-local slot: live to the end of `program`, and in
      // `last_program` from its start to last_step.
      reach[slot.last_program()] = std::max(reach[slot.last_program()],
                                            slot.offset() + slot.bytes());
      auto &after = live[slot.last_program()];
      after[0] += int64_t(aligned(slot.bytes()));
      after[slot.last_step() + 1] -= int64_t(aligned(slot.bytes()));
      continue;
    }
    events[slot.last_step() + 1] -= int64_t(aligned(slot.bytes()));
    if (slot.kind() == bundle::ACTIVATION) {
      s.activationSlotBytes += slot.bytes();
      ++s.activationSlots;
    }
  }
  s.activationBytes = arena > s.persistentBytes + s.stashBytes
                          ? arena - s.persistentBytes - s.stashBytes
                          : 0;
  uint64_t furthest = 0;
  for (const auto &[program, end] : reach)
    if (end > furthest) {
      furthest = end;
      s.regionProgram = program;
    }
  int64_t now = 0, peak = 0;
  for (const auto &[step, delta] : live[s.regionProgram])
    peak = std::max(peak, now += delta);
  s.regionPeakLiveBytes = uint64_t(peak);
  return s;
}

// A pipeline bundle's ranks each allocate their own arena: each one's
// verdict (the first pipeline's ranks; the replicas' are the same).
// Whether every rank fits.
bool printPipelineRankFits(const bundle::Bundle &b, const GpuTarget &gpu,
                           const std::string &prefix, std::ostream &os) {
  bool all = true;
  std::vector<std::vector<int>> groups = bundle::pipelineGroups(b);
  if (groups.empty())
    return all;
  for (size_t p = 0; p < groups.front().size(); ++p) {
    int world = groups.front()[p];
    if (world < 0 || world >= b.ranks_size())
      continue;
    RankArenaLayout parts = bundle::rankArenaParts(b, b.ranks(world));
    PlanFootprint rank{parts.persistentBytes, parts.activationBytes,
                       parts.stashBytes};
    os << prefix << "pipeline rank " << p << "'s arena ";
    printFitVerdict(rank, gpu, os, "");
    all = all && fits(rank, gpu);
  }
  return all;
}

// A pipeline bundle's chunk costs and the step they predict, from the
// spec it was compiled from (the cut is the spec's, so it is the bundle's).
void printPipelineCosts(const bundle::Bundle &b) {
  const bundle::BuildInfo &build = b.build();
  std::cout << "pipeline cost model (compiler/Pipelines/PipelineLayout):\n";
  if (build.spec_format() != "pbtxt") {
    std::cout << "  not known: the bundle was compiled from a "
              << build.spec_format() << ", not a spec\n";
    return;
  }
  StatusOr<spec::Spec> parsed = spec::parseSpecText(build.spec_text(), "the bundle's spec");
  StatusOr<spec::Spec> spec =
      parsed ? spec::resolveSpec(*parsed) : parsed;
  StatusOr<std::string> costs =
      spec ? describePipelineCosts(*spec) : StatusOr<std::string>(spec.status());
  if (!costs) {
    std::cout << "  not known: " << costs.status().message() << "\n";
    return;
  }
  std::cout << *costs;
}

} // namespace

Status printBundleFit(const std::string &path, const GpuTarget &gpu,
                      const std::string &prefix, std::ostream &os) {
  StatusOr<bundle::Bundle> b = bundle::readBundle(path);
  if (!b)
    return b.status();
  PlanSummary summary = summarize(b->plan());
  bool fit = true;
  if (b->has_pipeline()) {
    fit = printPipelineRankFits(*b, gpu, prefix, os);
  } else {
    os << prefix;
    printFitVerdict(summary, gpu, os, "");
    fit = fits(summary, gpu);
  }
  if (!fit)
    os << prefix << "`octet compile SPEC --memory-plan` finds what would "
                    "fit\n";
  return Status::ok();
}

int runInspectCommand(const InspectOptions &opts) {
  const std::string &path = opts.bundle, &modulesDir = opts.modulesDir;
  bool allSlots = opts.allSlots;
  StatusOr<bundle::Bundle> b = bundle::readBundle(path);
  if (!b) {
    std::fprintf(stderr, "%s\n", b.status().message().c_str());
    return 1;
  }
  if (!modulesDir.empty())
    if (Status st = writeModules(*b, modulesDir); !st) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      return 1;
    }
  if (opts.collectives) {
    bundle::listCollectives(*b, std::cout);
    return 0;
  }
  bundle::describeBuild(*b, std::cout);
  bundle::describePrecision(*b, std::cout);
  bundle::describePlan(*b, std::cout, allSlots ? 0 : 12);
  PlanSummary summary = summarize(b->plan());
  printPlanSummary(summary, std::cout);
  bool fit = true;
  if (b->has_pipeline()) {
    // The plan places every rank's slots; no rank allocates it whole.
    std::cout << "  each pipeline rank allocates its own arena (below):\n";
    fit = printPipelineRankFits(*b, opts.gpu, "  ", std::cout);
  } else {
    printFitVerdict(summary, opts.gpu, std::cout);
    fit = fits(summary, opts.gpu);
  }
  if (!fit)
    std::cout << "  `octet compile SPEC --memory-plan --gpu-memory GPU` plans "
                 "smaller micro batches (and layer counts) to find one that "
                 "fits\n";
  bundle::describeKernels(*b, std::cout);
  bundle::describePrograms(*b, std::cout);
  if (b->has_pipeline())
    printPipelineCosts(*b);
  if (Status runnable = bundle::checkRunnable(*b); !runnable)
    std::cout << "not runnable: " << runnable.message() << "\n";
  return 0;
}

} // namespace octet
