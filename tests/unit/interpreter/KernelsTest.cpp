// The blocked matmul and attention against plain reference loops.

#include "compiler/Interpreter/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace octet::interp;

namespace {

std::vector<float> randomVector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

class GemmTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(GemmTest, MatchesReference) {
  auto [ta, tb] = GetParam();
  // Sizes that are not multiples of the 4 × 128 tile.
  const int64_t m = 37, n = 291, k = 53;
  std::vector<float> a = randomVector(m * k, 1), b = randomVector(k * n, 2);
  std::vector<float> c(m * n, 0.5f);
  gemm(m, n, k, a.data(), ta, b.data(), tb, c.data(), 2.0f,
       /*accumulate=*/true);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0;
      for (int64_t p = 0; p < k; ++p)
        ref += double(ta ? a[p * m + i] : a[i * k + p]) *
               (tb ? b[j * k + p] : b[p * n + j]);
      ASSERT_NEAR(c[i * n + j], 0.5 + 2.0 * ref, 1e-4) << i << "," << j;
    }
}

INSTANTIATE_TEST_SUITE_P(Transposes, GemmTest,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Bool()));

TEST(Kernels, GemmIsDeterministic) {
  const int64_t m = 64, n = 200, k = 300;
  std::vector<float> a = randomVector(m * k, 3), b = randomVector(k * n, 4);
  std::vector<float> c1(m * n), c2(m * n);
  gemm(m, n, k, a.data(), false, b.data(), true, c1.data(), 1.0f, false);
  gemm(m, n, k, a.data(), false, b.data(), true, c2.data(), 1.0f, false,
       /*parallel=*/false);
  EXPECT_EQ(c1, c2);
}

// Reference attention with an explicit mask, one query at a time.
void referenceAttention(const AttentionShape &s, const std::vector<float> &q,
                        const std::vector<float> &k,
                        const std::vector<float> &v,
                        const std::vector<int64_t> *docs,
                        std::vector<float> &out, std::vector<float> &lse) {
  int64_t group = s.qHeads / s.kvHeads;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.qHeads; ++h)
      for (int64_t i = 0; i < s.seq; ++i) {
        std::vector<double> scores(s.seq, -INFINITY);
        double mx = -INFINITY;
        for (int64_t j = 0; j < s.seq; ++j) {
          if (s.causal && j > i)
            continue;
          if (docs && (*docs)[b * s.seq + i] != (*docs)[b * s.seq + j])
            continue;
          double dot = 0;
          for (int64_t d = 0; d < s.headDim; ++d)
            dot += double(q[((b * s.seq + i) * s.qHeads + h) * s.headDim + d]) *
                   k[((b * s.seq + j) * s.kvHeads + h / group) * s.headDim + d];
          scores[j] = dot * s.scale;
          mx = std::max(mx, scores[j]);
        }
        double sum = 0;
        for (double x : scores)
          sum += std::isinf(x) ? 0 : std::exp(x - mx);
        lse[(b * s.qHeads + h) * s.seq + i] = float(mx + std::log(sum));
        for (int64_t d = 0; d < s.headDim; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < s.seq; ++j)
            if (!std::isinf(scores[j]))
              acc += std::exp(scores[j] - mx) / sum *
                     v[((b * s.seq + j) * s.kvHeads + h / group) * s.headDim + d];
          out[((b * s.seq + i) * s.qHeads + h) * s.headDim + d] = float(acc);
        }
      }
}

TEST(Kernels, AttentionCausalGqaDocuments) {
  for (bool causal : {true, false})
    for (bool withDocs : {false, true}) {
      AttentionShape s{2, 9, 4, 2, 8, causal, 0.35f};
      int64_t qn = s.batch * s.seq * s.qHeads * s.headDim;
      int64_t kn = s.batch * s.seq * s.kvHeads * s.headDim;
      auto q = randomVector(qn, 5), k = randomVector(kn, 6),
           v = randomVector(kn, 7);
      // Documents of lengths 4, 7, 7 over the 18 flattened tokens: the
      // second one straddles the batch boundary.
      std::vector<int64_t> docs(18);
      for (int t = 0; t < 18; ++t)
        docs[t] = t < 4 ? 0 : (t < 11 ? 1 : 2);
      std::vector<float> out(qn), lse(s.batch * s.qHeads * s.seq),
          refOut(qn), refLse(lse.size());
      attentionForward(s, q.data(), k.data(), v.data(),
                       withDocs ? docs.data() : nullptr, out.data(),
                       lse.data());
      referenceAttention(s, q, k, v, withDocs ? &docs : nullptr, refOut,
                         refLse);
      for (int64_t i = 0; i < qn; ++i)
        ASSERT_NEAR(out[i], refOut[i], 1e-5) << causal << withDocs << i;
      for (size_t i = 0; i < lse.size(); ++i)
        ASSERT_NEAR(lse[i], refLse[i], 1e-5);
    }
}

TEST(Kernels, ParallelForCoversRangeOnce) {
  std::vector<int> hits(10007, 0);
  parallelFor(hits.size(), 100, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      ++hits[i];
  });
  for (int h : hits)
    ASSERT_EQ(h, 1);
}

} // namespace

// OCTET_THREADS is a thread count or an error naming the variable; it is
// never half read ("4x" as 4) or ignored.
TEST(Kernels, ThreadsFromTheEnvironmentAreCheckedWhole) {
  const char *saved = std::getenv("OCTET_THREADS");
  std::string restore = saved ? saved : "";
  ::unsetenv("OCTET_THREADS");
  auto unset = threadsFromEnvironment();
  ASSERT_TRUE(unset.isOk());
  EXPECT_EQ(*unset, 0);
  for (auto [text, want] : {std::pair<const char *, int>{"1", 1},
                            {"8", 8},
                            {"1024", 1024}}) {
    ::setenv("OCTET_THREADS", text, 1);
    auto n = threadsFromEnvironment();
    ASSERT_TRUE(n.isOk()) << text << ": " << n.status().message();
    EXPECT_EQ(*n, want);
  }
  for (const char *text : {"abc", "", "0", "-2", "4x", " 4", "1025",
                           "99999999999999999999"}) {
    ::setenv("OCTET_THREADS", text, 1);
    auto n = threadsFromEnvironment();
    ASSERT_FALSE(n.isOk()) << "'" << text << "' was accepted";
    EXPECT_NE(n.status().message().find(std::string("OCTET_THREADS='") +
                                        text + "'"),
              std::string::npos)
        << n.status().message();
    EXPECT_NE(n.status().message().find("from 1 to 1024"), std::string::npos);
  }
  if (saved)
    ::setenv("OCTET_THREADS", restore.c_str(), 1);
  else
    ::unsetenv("OCTET_THREADS");
}
