#include "runtime/exec/ProgramTimes.h"

#include <algorithm>

namespace octet {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

std::vector<ProgramTimeSummary>
summarizeProgramTimes(const std::vector<ProgramTime> &runs, int64_t steps,
                      int64_t timedSteps) {
  std::vector<ProgramTimeSummary> out;
  if (steps <= 0 || timedSteps <= 0)
    return out;
  timedSteps = std::min(timedSteps, steps);
  std::vector<bundle::ProgramKind> kinds;
  for (const ProgramTime &r : runs)
    if (std::find(kinds.begin(), kinds.end(), r.kind) == kinds.end())
      kinds.push_back(r.kind);
  for (bundle::ProgramKind kind : kinds) {
    std::vector<const ProgramTime *> mine;
    for (const ProgramTime &r : runs)
      if (r.kind == kind)
        mine.push_back(&r);
    if (int64_t(mine.size()) % steps != 0)
      continue;
    int64_t take = timedSteps * (int64_t(mine.size()) / steps);
    std::vector<double> ms, wait, collectives;
    for (size_t i = mine.size() - size_t(take); i < mine.size(); ++i) {
      ms.push_back(mine[i]->ms);
      wait.push_back(mine[i]->joinWaitMs);
      collectives.push_back(mine[i]->mainCollectiveMs);
    }
    out.push_back(
        {kind, take, median(ms), median(wait), median(collectives)});
  }
  return out;
}

} // namespace octet
