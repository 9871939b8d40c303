#include "support/RankArena.h"

#include <algorithm>

namespace octet {

RankArenaLayout layOutRankArena(std::vector<HeldSlot> held,
                                uint64_t alignment) {
  auto align = [&](uint64_t n) {
    return alignment > 1 ? (n + alignment - 1) / alignment * alignment : n;
  };
  std::sort(held.begin(), held.end(), [](const HeldSlot &a, const HeldSlot &b) {
    return std::make_pair(a.offset, a.slot) < std::make_pair(b.offset, b.slot);
  });
  RankArenaLayout out;
  uint64_t lowestActivation = UINT64_MAX;
  for (const HeldSlot &s : held) {
    if (s.region == ArenaRegion::Persistent) {
      out.offsets.emplace_back(s.slot, out.persistentBytes);
      out.persistentBytes += align(s.bytes);
    } else if (s.region == ArenaRegion::Activation) {
      lowestActivation = std::min(lowestActivation, s.offset);
    }
  }
  for (const HeldSlot &s : held)
    if (s.region == ArenaRegion::Activation) {
      uint64_t at = s.offset - lowestActivation;
      out.offsets.emplace_back(s.slot, out.persistentBytes + at);
      out.activationBytes = std::max(out.activationBytes, align(at + s.bytes));
    }
  uint64_t base = out.persistentBytes + out.activationBytes;
  for (const HeldSlot &s : held)
    if (s.region == ArenaRegion::Stash) {
      out.offsets.emplace_back(s.slot, base + out.stashBytes);
      out.stashBytes += align(s.bytes);
    }
  std::sort(out.offsets.begin(), out.offsets.end());
  return out;
}

} // namespace octet
