#ifndef OCTET_SUPPORT_RANKARENA_H
#define OCTET_SUPPORT_RANKARENA_H

// A pipeline rank's own arena: the slots it holds of a plan laid out for
// every rank at once, moved closer together. The compiler's per-rank plan
// (compiler/Plan/PipelinePlan), the bundle's PipelineRank arena and the
// tests' toy bundles place slots with this one function.

#include <cstdint>
#include <utility>
#include <vector>

namespace octet {

enum class ArenaRegion {
  // Lives across programs (parameters, accumulators, moments, state).
  Persistent,
  // Lives during one program's steps; programs take turns in the region.
  Activation,
  // A stage edge, stash or microbatch input: one entry per (chunk,
  // microbatch) in flight, living across programs.
  Stash,
};

// A slot a rank holds, where the whole plan places it.
struct HeldSlot {
  uint32_t slot = 0;
  ArenaRegion region = ArenaRegion::Persistent;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

struct RankArenaLayout {
  uint64_t persistentBytes = 0, activationBytes = 0, stashBytes = 0;
  // (slot, offset in the rank's arena), in slot order.
  std::vector<std::pair<uint32_t, uint64_t>> offsets;
  uint64_t bytes() const {
    return persistentBytes + activationBytes + stashBytes;
  }
};

// The persistent slots packed from byte 0 in the plan's order, then the
// activation region: each activation slot keeps its distance from the
// lowest one held, since every program plans its slots from the region's
// start and liveness packing then carries over unchanged; it ends at the
// farthest end held. Then the stash slots, packed. Every size and offset
// is a multiple of `alignment`.
RankArenaLayout layOutRankArena(std::vector<HeldSlot> held,
                                uint64_t alignment);

} // namespace octet

#endif
