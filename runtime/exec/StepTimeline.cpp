#include "runtime/exec/StepTimeline.h"

#include "bundle/Bundle.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

namespace octet {
namespace {

using Intervals = std::vector<std::pair<double, double>>;

// Sorted, disjoint, empty intervals dropped.
Intervals merged(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (auto [b, e] : v) {
    if (e <= b)
      continue;
    if (!out.empty() && b <= out.back().second)
      out.back().second = std::max(out.back().second, e);
    else
      out.push_back({b, e});
  }
  return out;
}

bool occupies(TimelineKind kind) {
  return kind != TimelineKind::Wait && kind != TimelineKind::Program;
}

TimelineRunSummary summarize(const std::vector<const TimelineRecord *> &mine,
                             int run) {
  TimelineRunSummary s;
  s.run = run;
  if (mine.empty())
    return s;
  s.program = mine.front()->program;
  double first = mine.front()->beginMs, last = mine.front()->endMs;
  int streams = 0;
  for (const TimelineRecord *r : mine) {
    first = std::min(first, r->beginMs);
    last = std::max(last, r->endMs);
    streams = std::max(streams, r->stream + 1);
  }
  s.spanMs = last - first;
  std::vector<Intervals> busy(static_cast<size_t>(streams));
  Intervals compute, sideCollectives;
  for (const TimelineRecord *r : mine) {
    if (!occupies(r->kind))
      continue;
    busy[size_t(r->stream)].push_back({r->beginMs, r->endMs});
    bool collective = r->kind == TimelineKind::Collective;
    if (r->stream == 0 && !collective)
      compute.push_back({r->beginMs, r->endMs});
    if (r->stream > 0 && collective)
      sideCollectives.push_back({r->beginMs, r->endMs});
  }
  for (Intervals &b : busy)
    s.busyMs.push_back(unionMs(std::move(b)));
  s.sideCollectiveMs = unionMs(sideCollectives);
  s.overlappedMs = overlapMs(std::move(compute), std::move(sideCollectives));
  return s;
}

std::string ms(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f ms", v);
  return buffer;
}

std::string describeRun(const TimelineRunSummary &s) {
  std::string line = "span " + ms(s.spanMs) + "; busy:";
  for (size_t i = 0; i < s.busyMs.size(); ++i)
    line += std::string(i ? "," : "") + " stream " + std::to_string(i) +
            " " + ms(s.busyMs[i]);
  if (s.sideCollectiveMs <= 0)
    return line + "; no collective on a communication stream";
  char percent[32];
  std::snprintf(percent, sizeof percent, "%.0f%%",
                100 * s.overlappedMs / s.sideCollectiveMs);
  return line + "; collectives on the communication streams " +
         ms(s.sideCollectiveMs) + ", " + ms(s.overlappedMs) + " (" + percent +
         ") of it beside compute";
}

} // namespace

const char *timelineKindName(TimelineKind kind) {
  switch (kind) {
  case TimelineKind::Launch:
    return "launch";
  case TimelineKind::Gemm:
    return "gemm";
  case TimelineKind::Memset:
    return "memset";
  case TimelineKind::Copy:
    return "copy";
  case TimelineKind::Collective:
    return "collective";
  case TimelineKind::Wait:
    return "wait";
  case TimelineKind::Program:
    return "program";
  }
  return "?";
}

double unionMs(Intervals intervals) {
  double total = 0;
  for (auto [b, e] : merged(std::move(intervals)))
    total += e - b;
  return total;
}

double overlapMs(Intervals a, Intervals b) {
  Intervals x = merged(std::move(a)), y = merged(std::move(b));
  double total = 0;
  size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    double begin = std::max(x[i].first, y[j].first);
    double end = std::min(x[i].second, y[j].second);
    if (end > begin)
      total += end - begin;
    // The interval that ends first overlaps nothing further.
    if (x[i].second < y[j].second)
      ++i;
    else
      ++j;
  }
  return total;
}

void describeCollective(const bundle::Collective &c, const bundle::Bundle &b,
                        TimelineRecord &r) {
  r.op = bundle::CollectiveOp_Name(c.op());
  std::transform(r.op.begin(), r.op.end(), r.op.begin(),
                 [](unsigned char ch) { return char(std::tolower(ch)); });
  r.dtype = bundle::dtypeName(c.dtype());
  r.count = c.count();
  r.group = c.group() < uint32_t(b.groups_size())
                ? b.groups(int(c.group())).name()
                : std::to_string(c.group());
}

size_t timelineMarksPerStep(const bundle::Bundle &b, int rank) {
  if (rank < 0 || rank >= b.ranks_size())
    return 0;
  int64_t microbatches = std::max<int64_t>(1, b.schedule().grad_accum_steps());
  size_t marks = 0;
  for (const bundle::Program &p : b.ranks(rank).programs()) {
    if (p.kind() != bundle::TRAIN_MICROBATCH &&
        p.kind() != bundle::OPTIMIZER_STEP)
      continue;
    size_t perRun = 4;
    for (const bundle::Step &s : p.steps())
      perRun += s.waits().empty() ? 2 : 4;
    marks += perRun * size_t(p.kind() == bundle::TRAIN_MICROBATCH
                                 ? microbatches
                                 : 1);
  }
  return marks;
}

StepTimelineSummary
summarizeStepTimeline(const std::vector<TimelineRecord> &records) {
  StepTimelineSummary out;
  std::map<int, std::vector<const TimelineRecord *>> byRun;
  std::vector<const TimelineRecord *> all;
  for (const TimelineRecord &r : records) {
    byRun[r.run].push_back(&r);
    all.push_back(&r);
  }
  for (const auto &[run, mine] : byRun)
    out.runs.push_back(summarize(mine, run));
  out.step = summarize(all, -1);
  out.step.program = bundle::ProgramKind();
  return out;
}

std::string describeStepTimeline(const StepTimelineSummary &s,
                                 int64_t trainingStep, int rank) {
  std::string text = "timeline of step " + std::to_string(trainingStep) +
                     " (rank " + std::to_string(rank) + "): " +
                     std::to_string(s.runs.size()) + " program run" +
                     (s.runs.size() == 1 ? "" : "s") + ", " +
                     describeRun(s.step) + "\n";
  for (const TimelineRunSummary &r : s.runs)
    text += "  run " + std::to_string(r.run) + " " +
            programKindName(r.program) + ": " + describeRun(r) + "\n";
  return text;
}

std::string stepTimelineTrace(const std::vector<TimelineRecord> &records,
                              int rank, int64_t trainingStep) {
  using json = nlohmann::ordered_json;
  json events = json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", rank},
                    {"args", {{"name", "rank " + std::to_string(rank)}}}});
  int streams = 0;
  for (const TimelineRecord &r : records)
    streams = std::max(streams, r.stream + 1);
  for (int s = 0; s < streams; ++s)
    events.push_back(
        {{"name", "thread_name"},
         {"ph", "M"},
         {"pid", rank},
         {"tid", s},
         {"args",
          {{"name", "stream " + std::to_string(s) +
                        (s == 0 ? " (compute)" : " (communication)")}}}});
  for (const TimelineRecord &r : records) {
    json args = {{"program", programKindName(r.program)}, {"run", r.run}};
    if (r.step >= 0)
      args["step"] = r.step;
    if (r.kind == TimelineKind::Gemm) {
      args["m"] = r.m;
      args["n"] = r.n;
      args["k"] = r.k;
    }
    if (r.kind == TimelineKind::Collective) {
      args["op"] = r.op;
      args["dtype"] = r.dtype;
      args["count"] = r.count;
      args["group"] = r.group;
      if (r.ncclGroup > 1)
        args["nccl_group"] = r.ncclGroup;
    }
    events.push_back({{"name", r.label},
                      {"cat", timelineKindName(r.kind)},
                      {"ph", "X"},
                      {"ts", r.beginMs * 1e3},
                      {"dur", (r.endMs - r.beginMs) * 1e3},
                      {"pid", rank},
                      {"tid", r.stream},
                      {"args", std::move(args)}});
  }
  json trace = {{"traceEvents", std::move(events)},
                {"displayTimeUnit", "ms"},
                {"otherData",
                 {{"rank", rank},
                  {"training_step", trainingStep},
                  {"time_zero",
                   "the start of the step's first program on this rank"}}}};
  return trace.dump(1) + "\n";
}

} // namespace octet
