// The interpreter's emulated collectives: ranks on threads meet at each
// collective of their group and get what NCCL would give them.

#include "compiler/Interpreter/Collectives.h"

#include <gtest/gtest.h>

#include <atomic>

namespace octet::interp {
namespace {

CollectiveCall call(const std::string &kind, const std::string &reduction,
                    int64_t groupSize, const std::string &group = "data") {
  return {kind, group, groupSize, reduction, "test"};
}

// Rank r's tensor: [r + 1, 10 (r + 1), ...] of `n` elements.
Tensor valuesOf(int rank, int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = float((rank + 1) * (i == 0 ? 1 : 10 * i));
  return Tensor::fromFloats({n}, v);
}

TEST(Collectives, GroupsFollowMegatronsRankOrder) {
  RankLayout layout{/*data=*/2, /*tensor=*/2, /*pipeline=*/2};
  EXPECT_EQ(layout.worldSize(), 8);
  // Tensor fastest, then data, then pipeline.
  EXPECT_EQ(layout.groupOf("tensor", 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(layout.groupOf("data", 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(layout.groupOf("pipeline", 5), (std::vector<int>{1, 5}));
  EXPECT_TRUE(layout.groupOf("expert", 5).empty());
}

TEST(Collectives, ReduceScatterAndGatherAsNcclDoes) {
  RankExchange exchange(RankLayout{3, 1, 1});
  std::vector<std::vector<float>> sums(3), avgs(3), maxima(3), scattered(3),
      gathered(3);
  Status st = runRanks(exchange, [&](int r) -> Status {
    auto take = [&](const std::string &kind, const std::string &reduction,
                    std::vector<float> &out) -> Status {
      auto result = exchange.collective(r, call(kind, reduction, 3),
                                        {valuesOf(r, 6)});
      if (!result)
        return result.status();
      const Tensor &t = (*result)[0];
      out.assign(t.f(), t.f() + t.numel());
      return Status::ok();
    };
    for (auto [kind, reduction, out] :
         {std::tuple{"all_reduce", "sum", &sums},
          std::tuple{"all_reduce", "avg", &avgs},
          std::tuple{"all_reduce", "max", &maxima},
          std::tuple{"reduce_scatter", "sum", &scattered},
          std::tuple{"all_gather", "sum", &gathered}})
      if (Status s = take(kind, reduction, (*out)[r]); !s)
        return s;
    return Status::ok();
  });
  ASSERT_TRUE(st.isOk()) << st.message();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(sums[r], (std::vector<float>{6, 60, 120, 180, 240, 300}));
    EXPECT_EQ(avgs[r], (std::vector<float>{2, 20, 40, 60, 80, 100}));
    EXPECT_EQ(maxima[r], (std::vector<float>{3, 30, 60, 90, 120, 150}));
    // Rank r holds part r of the sum, two elements each.
    EXPECT_EQ(scattered[r], (std::vector<float>(sums[0].begin() + 2 * r,
                                                sums[0].begin() + 2 * r + 2)));
    ASSERT_EQ(gathered[r].size(), 18u);
    EXPECT_EQ(gathered[r][6], 2.0f); // rank 1's first element
  }
}

// In place, as NCCL's reduce-scatter with recv inside send: each rank's
// own part of its buffer holds the sum, and the rest what it sent.
TEST(Collectives, InPlaceReduceScatterKeepsTheRestOfTheRanksBuffer) {
  RankExchange exchange(RankLayout{3, 1, 1});
  std::vector<std::vector<float>> held(3);
  Status st = runRanks(exchange, [&](int r) -> Status {
    CollectiveCall inPlace = call("reduce_scatter", "sum", 3);
    inPlace.inPlace = true;
    auto result = exchange.collective(r, inPlace, {valuesOf(r, 6)});
    if (!result)
      return result.status();
    const Tensor &t = (*result)[0];
    held[r].assign(t.f(), t.f() + t.numel());
    return Status::ok();
  });
  ASSERT_TRUE(st.isOk()) << st.message();
  const std::vector<float> sum{6, 60, 120, 180, 240, 300};
  for (int r = 0; r < 3; ++r) {
    Tensor mine = valuesOf(r, 6);
    std::vector<float> expected(mine.f(), mine.f() + 6);
    std::copy(sum.begin() + 2 * r, sum.begin() + 2 * r + 2,
              expected.begin() + 2 * r);
    EXPECT_EQ(held[r], expected) << "rank " << r;
  }
}

// A BF16 sum is rounded to BF16, as NCCL stores it (BF16 gradients,
// train.precision.grad_dtype): 1 + 3·2^-9 lies between BF16's 1 and
// 1 + 2^-7 and rounds to the nearer, 1 + 2^-7; in f32 it stays exact. In
// place too (ZeRO-1's reduce-scatter of the accumulators).
TEST(Collectives, Bf16SumsAreRoundedToBf16) {
  RankExchange exchange(RankLayout{2, 1, 1});
  const float one = 1.0f, small = 3.0f / 512.0f;
  std::vector<std::vector<float>> bf16(2), f32(2), inPlace(2);
  Status st = runRanks(exchange, [&](int r) -> Status {
    auto take = [&](DType dtype, bool inPlaceCall,
                    std::vector<float> &out) -> Status {
      CollectiveCall c =
          call(inPlaceCall ? "reduce_scatter" : "all_reduce", "sum", 2);
      c.inPlace = inPlaceCall;
      float mine = r == 0 ? one : small;
      auto result = exchange.collective(
          r, c, {Tensor::fromFloats({2}, {mine, mine}, dtype)});
      if (!result)
        return result.status();
      const Tensor &t = (*result)[0];
      out.assign(t.f(), t.f() + t.numel());
      return Status::ok();
    };
    if (Status s = take(DType::BF16, false, bf16[r]); !s)
      return s;
    if (Status s = take(DType::F32, false, f32[r]); !s)
      return s;
    return take(DType::BF16, true, inPlace[r]);
  });
  ASSERT_TRUE(st.isOk()) << st.message();
  const float rounded = 1.0f + 1.0f / 128.0f;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(bf16[r], (std::vector<float>{rounded, rounded}));
    EXPECT_EQ(f32[r], (std::vector<float>{one + small, one + small}));
    // Rank r's own element holds the sum, the other what it sent.
    float sent = r == 0 ? one : small;
    EXPECT_EQ(inPlace[r][r], rounded) << "rank " << r;
    EXPECT_EQ(inPlace[r][1 - r], sent) << "rank " << r;
  }
}

TEST(Collectives, RanksThatDisagreeAllFailNamingBothCalls) {
  RankExchange exchange(RankLayout{2, 1, 1});
  std::atomic<int> failed{0};
  std::string message;
  Status st = runRanks(exchange, [&](int r) -> Status {
    auto result = exchange.collective(
        r, call("all_reduce", r == 0 ? "sum" : "max", 2), {valuesOf(r, 4)});
    if (result)
      return Status::ok();
    ++failed;
    if (r == 0)
      message = result.status().message();
    return Status::ok();
  });
  EXPECT_TRUE(st.isOk());
  EXPECT_EQ(failed, 2);
  EXPECT_NE(message.find("rank 0 all_reduce sum"), std::string::npos)
      << message;
  EXPECT_NE(message.find("rank 1 all_reduce max"), std::string::npos)
      << message;
}

// A rank that fails before a collective ends the others' wait with its
// error, and runRanks reports that rank, not the ones it stopped.
TEST(Collectives, AFailedRankReleasesTheOthers) {
  RankExchange exchange(RankLayout{4, 1, 1});
  Status st = runRanks(exchange, [&](int r) -> Status {
    if (r == 2)
      return Status::error("rank 2 ran out of data");
    auto result = exchange.collective(r, call("all_reduce", "sum", 4),
                                      {valuesOf(r, 4)});
    return result ? Status::ok() : result.status();
  });
  ASSERT_FALSE(st.isOk());
  EXPECT_EQ(st.message(), "rank 2 ran out of data");
}

TEST(Collectives, AProgramForAnotherLayoutIsAnError) {
  RankExchange exchange(RankLayout{2, 1, 1});
  auto result = exchange.collective(0, call("all_reduce", "sum", 4),
                                    {valuesOf(0, 4)});
  ASSERT_FALSE(result);
  EXPECT_NE(result.status().message().find("group has 4 ranks, the "
                                           "layout's 2"),
            std::string::npos)
      << result.status().message();
}

// Consecutive collectives of one group keep their order even when a rank
// runs ahead into the next one before the others have read the first.
TEST(Collectives, RoundsDoNotMix) {
  RankExchange exchange(RankLayout{2, 1, 1});
  std::vector<std::vector<float>> seen(2);
  Status st = runRanks(exchange, [&](int r) -> Status {
    for (int round = 0; round < 50; ++round) {
      auto result = exchange.collective(
          r, call("all_reduce", "sum", 2),
          {Tensor::fromFloats({1}, {float(round * (r + 1))})});
      if (!result)
        return result.status();
      seen[r].push_back((*result)[0].f()[0]);
    }
    return Status::ok();
  });
  ASSERT_TRUE(st.isOk()) << st.message();
  for (int r = 0; r < 2; ++r)
    for (int round = 0; round < 50; ++round)
      EXPECT_EQ(seen[r][round], float(3 * round));
}

} // namespace
} // namespace octet::interp
