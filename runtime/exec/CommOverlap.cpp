#include "runtime/exec/CommOverlap.h"

namespace octet {

std::vector<bool> gemmsBesideCollectives(const bundle::Bundle &bundle,
                                         int rank) {
  std::vector<bool> beside(size_t(bundle.gemms_size()), false);
  if (rank < 0 || rank >= bundle.ranks_size())
    return beside;
  for (const bundle::Program &p : bundle.ranks(rank).programs()) {
    bool inFlight = false;
    for (const bundle::Step &s : p.steps()) {
      if (s.has_collective() && s.stream() != 0)
        inFlight = true;
      else if (s.has_gemm() && inFlight &&
               s.gemm().gemm() < uint32_t(beside.size()))
        beside[s.gemm().gemm()] = true;
    }
  }
  return beside;
}

std::vector<bool> collectivesBesideCompute(const bundle::Program &program) {
  std::vector<bool> beside(size_t(program.steps_size()), false);
  bool gemmAfter = false;
  for (int i = program.steps_size() - 1; i >= 0; --i) {
    const bundle::Step &s = program.steps(i);
    if (s.has_gemm())
      gemmAfter = true;
    else if (s.has_collective() && s.stream() != 0)
      beside[size_t(i)] = gemmAfter;
  }
  return beside;
}

bool anyCollectiveBesideCompute(const bundle::Bundle &bundle) {
  for (const bundle::RankProgram &r : bundle.ranks())
    for (const bundle::Program &p : r.programs())
      for (bool beside : collectivesBesideCompute(p))
        if (beside)
          return true;
  return false;
}

} // namespace octet
