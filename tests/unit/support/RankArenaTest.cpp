#include "support/RankArena.h"

#include <gtest/gtest.h>

namespace octet {
namespace {

// A rank holding some of a plan laid out for two ranks: its persistent
// slots close up from byte 0, its activation slots keep their distances
// from the lowest one (so slots the plan let share bytes at different
// steps still do, and no others), and its stash slots follow.
TEST(RankArena, PacksPersistentAndStashAndKeepsActivationDistances) {
  // The plan: persistent [0, 1024) with the other rank's slot at 256,
  // activations from 1024, stash from 4096.
  std::vector<HeldSlot> held = {
      {7, ArenaRegion::Stash, 5120, 1000},
      {0, ArenaRegion::Persistent, 0, 100},
      {2, ArenaRegion::Persistent, 512, 512},
      {3, ArenaRegion::Activation, 1280, 300},
      {4, ArenaRegion::Activation, 1280, 200}, // shares bytes with 3
      {5, ArenaRegion::Activation, 2048, 256},
  };
  RankArenaLayout layout = layOutRankArena(held, 256);
  EXPECT_EQ(layout.persistentBytes, 256u + 512u);
  // From the lowest activation held (1280) to the farthest end (2304).
  EXPECT_EQ(layout.activationBytes, 1024u);
  EXPECT_EQ(layout.stashBytes, 1024u);
  EXPECT_EQ(layout.bytes(), 768u + 1024u + 1024u);
  std::vector<std::pair<uint32_t, uint64_t>> want = {
      {0, 0}, {2, 256}, {3, 768}, {4, 768}, {5, 768 + 768}, {7, 1792}};
  EXPECT_EQ(layout.offsets, want);
}

TEST(RankArena, NothingHeldIsAnEmptyArena) {
  RankArenaLayout layout = layOutRankArena({}, 256);
  EXPECT_EQ(layout.bytes(), 0u);
  EXPECT_TRUE(layout.offsets.empty());
}

} // namespace
} // namespace octet
