// Which GEMMs and collectives of a rank's programs run beside each other
// (runtime/exec/CommOverlap.h), read from hand-made bundles.

#include "runtime/exec/CommOverlap.h"

#include <gtest/gtest.h>

using namespace octet;

namespace {

void gemm(bundle::Program &p, uint32_t descriptor) {
  bundle::Step *s = p.add_steps();
  s->set_stream(0);
  s->mutable_gemm()->set_gemm(descriptor);
}

void collective(bundle::Program &p, uint32_t stream) {
  bundle::Step *s = p.add_steps();
  s->set_stream(stream);
  s->mutable_collective()->set_op(bundle::REDUCE_SCATTER);
}

void launch(bundle::Program &p) {
  p.add_steps()->mutable_launch()->set_kernel(0);
}

// A backward: fprop GEMM 0, a reduce-scatter on stream 1, then GEMMs 1 and
// 2 beside it, then a main-stream collective and a last side-stream one
// that no GEMM follows. An optimizer step: a gather on stream 1 beside a
// kernel.
bundle::Bundle twoPrograms() {
  bundle::Bundle b;
  for (int i = 0; i < 4; ++i)
    b.add_gemms();
  bundle::RankProgram *r = b.add_ranks();
  bundle::Program *train = r->add_programs();
  gemm(*train, 0);
  collective(*train, 1);
  gemm(*train, 1);
  launch(*train);
  gemm(*train, 2);
  collective(*train, 0);
  collective(*train, 1);
  bundle::Program *opt = r->add_programs();
  launch(*opt);
  collective(*opt, 1);
  launch(*opt);
  return b;
}

} // namespace

TEST(CommOverlap, GemmsAfterASideStreamCollectiveRunBesideIt) {
  bundle::Bundle b = twoPrograms();
  EXPECT_EQ(gemmsBesideCollectives(b, 0),
            (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(gemmsBesideCollectives(b, 1), std::vector<bool>(4, false))
      << "a rank the bundle does not have runs nothing";
}

TEST(CommOverlap, OnlySideStreamCollectivesThatAGemmFollowsAreBesideCompute) {
  bundle::Bundle b = twoPrograms();
  EXPECT_EQ(collectivesBesideCompute(b.ranks(0).programs(0)),
            (std::vector<bool>{false, true, false, false, false, false,
                               false}));
  EXPECT_EQ(collectivesBesideCompute(b.ranks(0).programs(1)),
            (std::vector<bool>{false, false, false}))
      << "the optimizer's gather runs beside no GEMM";
  EXPECT_TRUE(anyCollectiveBesideCompute(b));
  b.mutable_ranks(0)->mutable_programs(0)->mutable_steps(1)->set_stream(0);
  EXPECT_FALSE(anyCollectiveBesideCompute(b))
      << "a collective on the main stream runs beside nothing";
}
