#include "tools/octet/MemoryFit.h"

#include <gtest/gtest.h>

#include <sstream>
#include <vector>

using namespace octet;

namespace {

constexpr uint64_t MiB = 1ull << 20;

std::string contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos ? "" : "no '" + part + "' in:\n" + text;
}

} // namespace

TEST(MemoryFit, GpuTargetsByNameAndSize) {
  auto h100 = parseGpuTarget("H100");
  ASSERT_TRUE(h100);
  EXPECT_EQ(h100->bytes, 81080ull * MiB);
  EXPECT_EQ(h100->bytes, defaultGpuTarget().bytes);
  auto h200 = parseGpuTarget("h200");
  ASSERT_TRUE(h200);
  EXPECT_GT(h200->bytes, h100->bytes);
  auto gb = parseGpuTarget("141GB");
  ASSERT_TRUE(gb);
  EXPECT_EQ(gb->bytes, 141000000000ull);
  EXPECT_EQ(gb->name, "GPU of 141GB");
  auto gib = parseGpuTarget("79GiB");
  ASSERT_TRUE(gib);
  EXPECT_EQ(gib->bytes, 79ull << 30);
  for (const char *bad : {"", "a100", "0GB", "80 GB", "-1GB", "1.5GB"}) {
    auto parsed = parseGpuTarget(bad);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(contains(parsed.status().message(), "--gpu-memory takes"), "");
  }
}

TEST(MemoryFit, VerdictCountsTheRuntimesFixedCosts) {
  GpuTarget gpu{"test GPU", 1000 * MiB};
  PlanFootprint fitsExactly{400 * MiB, 1000 * MiB - 400 * MiB - kRuntimeFixedBytes};
  EXPECT_TRUE(fits(fitsExactly, gpu));
  PlanFootprint over = fitsExactly;
  over.activationBytes += 1;
  EXPECT_FALSE(fits(over, gpu));
  std::ostringstream os;
  printFitVerdict(over, gpu, os);
  EXPECT_EQ(contains(os.str(), "does not fit one test GPU"), "");
  EXPECT_EQ(contains(os.str(), "1 B more than it has"), "");
}

// Activations of 100 MiB per sequence of the micro batch, persistent
// 200 MiB: on 1000 MiB, micro batch 8 needs 1531 MiB; 6 does not divide
// the 16 sequences per rank; 4 needs 1131 MiB; 2 fits.
TEST(MemoryFit, SuggestsTheLargestMicroBatchThatDividesTheBatchAndFits) {
  GpuTarget gpu{"test GPU", 1000 * MiB};
  std::vector<int64_t> planned;
  Replan replan = [&](int64_t micro, int64_t layers) -> StatusOr<PlanFootprint> {
    planned.push_back(micro);
    EXPECT_EQ(layers, 4);
    return PlanFootprint{200 * MiB, uint64_t(micro) * 100 * MiB};
  };
  FitKnobs knobs{8, 32, 2, 4};
  std::ostringstream os;
  ASSERT_TRUE(suggestFit(replan(8, 4).value(), gpu, knobs, replan, os));
  EXPECT_EQ(planned, (std::vector<int64_t>{8, 4, 2}));
  EXPECT_EQ(contains(os.str(), "fits with train.micro_batch_size: 2 (8 "
                               "microbatch(es) of gradient accumulation"),
            "");
}

// Persistent state beyond the GPU: no micro batch is tried; layers are
// bisected at micro batch 1 (40 MiB of state and 10 MiB of activations per
// layer: 9 layers need 981 MiB with the fixed costs, 10 need 1031).
TEST(MemoryFit, PersistentOverflowFindsTheLayersThatFit) {
  GpuTarget gpu{"test GPU", 1000 * MiB};
  Replan replan = [&](int64_t micro, int64_t layers) -> StatusOr<PlanFootprint> {
    EXPECT_EQ(micro, 1);
    return PlanFootprint{uint64_t(layers) * 40 * MiB,
                         uint64_t(layers) * 10 * MiB};
  };
  FitKnobs knobs{4, 4, 1, 32};
  PlanFootprint plan{32 * 40 * MiB, 32 * 40 * MiB};
  std::ostringstream os;
  ASSERT_TRUE(suggestFit(plan, gpu, knobs, replan, os));
  EXPECT_EQ(contains(os.str(), "the persistent region alone"), "");
  EXPECT_EQ(contains(os.str(), "model.num_layers: 9 (of 32)"), "");
}
