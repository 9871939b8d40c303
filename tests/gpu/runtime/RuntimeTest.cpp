// Module loading (PTX through the driver JIT, and cubin), kernel launch,
// the arena's out-of-memory message, CUDA-graph capture/replay, and a small
// hand-written bundle run end to end by the executor.

#include "runtime/exec/Runtime.h"
#include "bundle/Bundle.h"
#include "runtime/core/Arena.h"
#include "runtime/core/Graph.h"
#include "runtime/core/Launch.h"
#include "runtime/core/Module.h"
#include "tests/gpu/runtime/GpuTest.h"

#include <fstream>
#include <limits.h>
#include <sstream>
#include <unistd.h>

namespace octet::test {
namespace {

std::string ptx() { return readFile(besideBinary("test_kernels.ptx")); }

void checkAxpy(CUfunction f, int n) {
  std::vector<float> x((size_t)n), y((size_t)n);
  for (int i = 0; i < n; ++i)
    x[size_t(i)] = float(i % 97) * 0.5f, y[size_t(i)] = float(i % 13);
  DeviceBuffer dx(x.size() * 4), dy(y.size() * 4);
  dx.upload(x);
  dy.upload(y);
  LaunchConfig cfg;
  cfg.grid[0] = unsigned((n + 255) / 256);
  cfg.block[0] = 256;
  auto launch = PreparedLaunch::prepare(
      f, cfg,
      {KernelParam::ptr(dx.get()), KernelParam::ptr(dy.get()),
       KernelParam::fromF32(3.0f), KernelParam::fromU32(uint32_t(n))},
      "axpy");
  ASSERT_TRUE(launch.isOk()) << launch.status().message();
  ASSERT_OK(launch->launch(nullptr));
  auto got = dy.download<float>();
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(got[size_t(i)], 3.0f * x[size_t(i)] + y[size_t(i)]) << i;
}

TEST(Module, LoadsPtxThroughDriverJitAndLaunches) {
  std::string text = ptx();
  ASSERT_FALSE(text.empty());
  auto m = unwrap(Module::load(device(), "test", "", "", text));
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->fromCubin());
  auto f = unwrap(m->function("octet_test_axpy"));
  ASSERT_NE(f, nullptr);
  checkAxpy(f, 10000);
}

CUfunction clusterSwap() {
  static std::unique_ptr<Module> m =
      unwrap(Module::load(device(), "test", "", "", ptx()));
  return m ? unwrap(m->function("octet_test_cluster_swap")) : nullptr;
}

TEST(Launch, ClusterOfTwoBlocksSharesSharedMemory) {
  CUfunction f = clusterSwap();
  ASSERT_NE(f, nullptr);
  constexpr unsigned kBlocks = 8;
  DeviceBuffer out(kBlocks * 4);
  LaunchConfig cfg;
  cfg.grid[0] = kBlocks;
  cfg.block[0] = 32;
  cfg.cluster = 2;
  auto launch = PreparedLaunch::prepare(f, cfg, {KernelParam::ptr(out.get())},
                                        "cluster swap");
  ASSERT_TRUE(launch.isOk()) << launch.status().message();
  ASSERT_OK(launch->launch(nullptr));
  auto got = out.download<uint32_t>();
  for (unsigned b = 0; b < kBlocks; ++b)
    EXPECT_EQ(got[b], b ^ 1u) << "block " << b;
}

TEST(Launch, ClusterThatDoesNotDivideTheGridIsRefused) {
  CUfunction f = clusterSwap();
  ASSERT_NE(f, nullptr);
  DeviceBuffer out(7 * 4);
  LaunchConfig cfg;
  cfg.grid[0] = 7;
  cfg.block[0] = 32;
  cfg.cluster = 2;
  auto launch = PreparedLaunch::prepare(f, cfg, {KernelParam::ptr(out.get())},
                                        "odd grid");
  ASSERT_FALSE(launch.isOk());
  EXPECT_NE(launch.status().message().find("odd grid"), std::string::npos);
  EXPECT_NE(launch.status().message().find("divide the grid"),
            std::string::npos)
      << launch.status().message();
}

// The copy may start while the fill still spins (the fill lets it at once),
// but its griddepcontrol.wait holds it until the fill's stores are done.
TEST(Launch, ProgrammaticDependentWaitsForThePreviousKernel) {
  static std::unique_ptr<Module> m =
      unwrap(Module::load(device(), "test", "", "", ptx()));
  ASSERT_TRUE(m);
  CUfunction fill = unwrap(m->function("octet_test_late_fill"));
  CUfunction copy = unwrap(m->function("octet_test_dependent_copy"));
  ASSERT_NE(fill, nullptr);
  ASSERT_NE(copy, nullptr);
  constexpr unsigned kN = 1u << 16;
  DeviceBuffer filled(kN * 4), copied(kN * 4);
  filled.upload(std::vector<uint32_t>(kN, 0));
  copied.poison();
  LaunchConfig cfg;
  cfg.grid[0] = kN / 256;
  cfg.block[0] = 256;
  auto first = PreparedLaunch::prepare(
      fill, cfg, {KernelParam::ptr(filled.get()), KernelParam::fromU32(kN)},
      "late fill");
  cfg.programmatic = true;
  auto second = PreparedLaunch::prepare(
      copy, cfg,
      {KernelParam::ptr(filled.get()), KernelParam::ptr(copied.get()),
       KernelParam::fromU32(kN)},
      "dependent copy");
  ASSERT_TRUE(first.isOk() && second.isOk());
  ASSERT_OK(first->launch(nullptr));
  ASSERT_OK(second->launch(nullptr));
  auto got = copied.download<uint32_t>();
  for (unsigned i = 0; i < kN; ++i)
    ASSERT_EQ(got[i], i + 1) << "element " << i;
}

TEST(Module, LoadsMatchingCubin) {
  std::string cubin = readFile(besideBinary("test_kernels.cubin"));
  ASSERT_FALSE(cubin.empty());
  auto m = unwrap(Module::load(device(), "test", cubin, "sm_90a", ptx()));
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->fromCubin());
  checkAxpy(unwrap(m->function("octet_test_axpy")), 4097);
}

TEST(Module, CubinForAnotherArchFallsBackToPtx) {
  std::string cubin = readFile(besideBinary("test_kernels.cubin"));
  auto m = unwrap(Module::load(device(), "test", cubin, "sm_100a", ptx()));
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->fromCubin());
}

TEST(Module, BadPtxReportsTheJitLog) {
  auto m = Module::load(device(), "broken", "", "",
                        ".version 8.0\n.target sm_90a\n.address_size 64\n"
                        ".visible .entry k() { bogus.instruction; }\n");
  ASSERT_FALSE(m.isOk());
  EXPECT_NE(m.status().message().find("module 'broken'"), std::string::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find("bogus"), std::string::npos)
      << m.status().message();
}

TEST(Module, MissingKernelNamesIt) {
  auto m = unwrap(Module::load(device(), "test", "", "", ptx()));
  ASSERT_TRUE(m);
  auto f = m->function("no_such_kernel");
  ASSERT_FALSE(f.isOk());
  EXPECT_NE(f.status().message().find("no_such_kernel"), std::string::npos);
}

TEST(Arena, OutOfMemoryNamesTheSlotAndBytes) {
  uint64_t huge = device().totalMemory() * 2;
  auto a = Arena::create(
      device(), "main", huge,
      {{"layers.0.mlp.act", 0, huge - 4096}, {"tokens", huge - 4096, 4096}});
  ASSERT_FALSE(a.isOk());
  const std::string &msg = a.status().message();
  EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("arena 'main'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(huge) + " bytes"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("'layers.0.mlp.act'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(huge - 4096) + " bytes"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("micro_batch_size"), std::string::npos) << msg;
}

TEST(Arena, OneAllocationServesEverySlot) {
  auto a = unwrap(Arena::create(device(), "small", 3 << 20, {}));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->bytes() % (2 << 20), 0u);
  EXPECT_TRUE(a->at(1 << 20, 1024).isOk());
  EXPECT_FALSE(a->at(a->bytes() - 8, 16).isOk());
}

TEST(CudaGraph, CaptureAndReplay) {
  auto m = unwrap(Module::load(device(), "test", "", "", ptx()));
  ASSERT_TRUE(m);
  CUfunction f = unwrap(m->function("octet_test_axpy"));
  auto stream = unwrap(Stream::create());
  ASSERT_TRUE(stream);
  const int n = 1 << 16;
  std::vector<float> x(n, 1.0f), y(n, 0.0f);
  DeviceBuffer dx(n * 4), dy(n * 4);
  dx.upload(x);
  dy.upload(y);
  LaunchConfig cfg;
  cfg.grid[0] = n / 256;
  cfg.block[0] = 256;
  auto launch = PreparedLaunch::prepare(
      f, cfg,
      {KernelParam::ptr(dx.get()), KernelParam::ptr(dy.get()),
       KernelParam::fromF32(2.0f), KernelParam::fromU32(n)},
      "axpy");
  ASSERT_TRUE(launch.isOk()) << launch.status().message();
  auto graph = unwrap(CudaGraph::capture(stream->handle(), [&](CUstream s) {
    for (int i = 0; i < 3; ++i)
      OCTET_RETURN_IF_ERROR(launch->launch(s));
    return Status::ok();
  }));
  ASSERT_TRUE(graph);
  EXPECT_EQ(unwrap(graph->nodeCount()), 3u);
  // Capturing runs nothing.
  ASSERT_OK(stream->synchronize());
  EXPECT_EQ(dy.download<float>()[0], 0.0f);
  ASSERT_OK(graph->launch(stream->handle()));
  ASSERT_OK(graph->launch(stream->handle()));
  ASSERT_OK(stream->synchronize());
  auto got = dy.download<float>();
  EXPECT_EQ(got[0], 12.0f);
  EXPECT_EQ(got[n - 1], 12.0f);
}

TEST(CudaGraph, FailingBodyEndsCaptureCleanly) {
  auto stream = unwrap(Stream::create());
  ASSERT_TRUE(stream);
  auto g = CudaGraph::capture(stream->handle(), [](CUstream) {
    return Status::error("planted failure");
  });
  ASSERT_FALSE(g.isOk());
  EXPECT_NE(g.status().message().find("planted failure"), std::string::npos);
  // The stream is usable afterwards.
  ASSERT_OK(stream->synchronize());
}

// A bundle by hand: x (f32 [n]) is filled by the host, y is zeroed by a
// memset, axpy runs twice (y = 2·(3x)), then a BF16 GEMM multiplies two
// host-filled matrices. One train program, world size 1.
bundle::Bundle handBundle(int n) {
  using namespace bundle;
  Bundle b;
  b.set_compiler_version("test");
  b.mutable_build()->set_model_name("hand-written");
  b.mutable_build()->set_target("sm_90a");
  b.set_world_size(1);
  auto *mod = b.add_modules();
  mod->set_name("test_kernels");
  mod->set_ptx(ptx());
  mod->set_cubin(readFile(besideBinary("test_kernels.cubin")));
  mod->set_cubin_arch("sm_90a");
  auto *k = b.add_kernels();
  k->set_symbol("octet_test_axpy");
  k->set_module(0);
  auto *plan = b.mutable_plan();
  auto *arena = plan->add_arenas();
  arena->set_name("main");
  arena->set_alignment(256);
  uint64_t off = 0;
  auto addSlot = [&](const char *name, bundle::DType t, uint64_t bytes) {
    auto *s = plan->add_slots();
    s->set_name(name);
    s->set_dtype(t);
    s->set_offset(off);
    s->set_bytes(bytes);
    s->set_kind(ACTIVATION);
    off += (bytes + 255) / 256 * 256;
  };
  addSlot("x", F32, uint64_t(n) * 4); // 0
  addSlot("y", F32, uint64_t(n) * 4); // 1
  addSlot("a", BF16, 64 * 64 * 2);    // 2
  addSlot("w", BF16, 64 * 64 * 2);    // 3
  addSlot("d", F32, 64 * 64 * 4);     // 4
  addSlot("workspace", U8, 4 << 20);  // 5
  arena->set_bytes(off);
  plan->set_peak_live_bytes(off);
  auto *g = b.add_gemms();
  g->set_name("hand.fprop");
  g->set_role(FPROP);
  g->set_m(64), g->set_n(64), g->set_k(64);
  g->set_a_type(BF16), g->set_b_type(BF16), g->set_d_type(F32);
  g->set_transpose_b(true);
  g->set_workspace_bytes(4 << 20);
  auto *rank = b.add_ranks();
  rank->set_rank(0);
  auto *prog = rank->add_programs();
  prog->set_kind(TRAIN_MICROBATCH);
  prog->set_name("train");
  prog->set_capturable(true);
  auto *in = prog->add_inputs();
  in->set_name("x");
  in->set_slot(0);
  auto *ms = prog->add_steps();
  ms->set_label("zero y");
  ms->mutable_memset()->mutable_dst()->set_slot(1);
  ms->mutable_memset()->set_bytes(uint64_t(n) * 4);
  for (int i = 0; i < 2; ++i) {
    auto *st = prog->add_steps();
    st->set_label("axpy " + std::to_string(i));
    auto *l = st->mutable_launch();
    l->set_kernel(0);
    l->mutable_grid()->set_x(unsigned((n + 127) / 128));
    l->mutable_block()->set_x(128);
    l->add_args()->mutable_slot()->set_slot(0);
    l->add_args()->mutable_slot()->set_slot(1);
    l->add_args()->set_f32(3.0f);
    l->add_args()->set_u32(uint32_t(n));
  }
  auto *gs = prog->add_steps();
  gs->set_label("hand.fprop");
  auto *call = gs->mutable_gemm();
  call->set_gemm(0);
  call->mutable_a()->set_slot(2);
  call->mutable_b()->set_slot(3);
  call->mutable_d()->set_slot(4);
  call->mutable_workspace()->set_slot(5);
  return b;
}

TEST(Runtime, RunsAHandWrittenBundleEagerlyAndAsAGraph) {
  const int n = 5000;
  bundle::Bundle b = handBundle(n);
  std::string path = ::testing::TempDir() + "/hand.octet";
  ASSERT_OK(bundle::writeBundle(b, path));
  auto loaded = unwrap(bundle::readBundle(path));
  auto rt = unwrap(Runtime::load(loaded, RuntimeOptions{}));
  ASSERT_TRUE(rt);
  EXPECT_GE(rt->arenaBytes(), loaded.plan().arenas(0).bytes());

  std::vector<float> x(n);
  for (int i = 0; i < n; ++i)
    x[size_t(i)] = float(i % 31) - 15.0f;
  ASSERT_OK(rt->writeSlot(0, x.data(), x.size() * 4));
  std::vector<uint16_t> a(64 * 64), w(64 * 64);
  for (size_t i = 0; i < a.size(); ++i) {
    // Small integers: exact in BF16, and their products sum exactly in f32.
    a[i] = uint16_t(0x3f80 + ((i % 3) << 7)); // 1, 2, 4
    w[i] = uint16_t(i % 2 ? 0x3f80 : 0xbf80); // ±1
  }
  ASSERT_OK(rt->writeSlot(2, a.data(), a.size() * 2));
  ASSERT_OK(rt->writeSlot(3, w.data(), w.size() * 2));

  auto check = [&](const char *how) {
    ASSERT_OK(rt->synchronize());
    std::vector<float> y(n);
    ASSERT_OK(rt->readSlot(1, y.data(), y.size() * 4));
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(y[size_t(i)], 6.0f * x[size_t(i)]) << how << " " << i;
    std::vector<float> d(64 * 64);
    ASSERT_OK(rt->readSlot(4, d.data(), d.size() * 4));
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < 64; ++c) {
        float want = 0;
        for (int k = 0; k < 64; ++k) {
          float av = float(1 << ((r * 64 + k) % 3));
          float wv = (c * 64 + k) % 2 ? 1.0f : -1.0f;
          want += av * wv;
        }
        ASSERT_EQ(d[size_t(r * 64 + c)], want) << how << " " << r << "," << c;
      }
  };
  ASSERT_OK(rt->run(bundle::TRAIN_MICROBATCH));
  check("eager");
  ASSERT_OK(rt->runGraph(bundle::TRAIN_MICROBATCH));
  check("graph, first replay");
  ASSERT_OK(rt->runGraph(bundle::TRAIN_MICROBATCH));
  check("graph, second replay");

  bundle::Bundle recorded = loaded;
  EXPECT_EQ(rt->recordAlgorithms(recorded), 1);
  EXPECT_EQ(rt->recordAlgorithms(recorded), 0);
}

TEST(Runtime, TimesEachProgramRunWhenAsked) {
  const int n = 5000;
  bundle::Bundle b = handBundle(n);
  {
    auto rt = unwrap(Runtime::load(b, RuntimeOptions{}));
    ASSERT_OK(rt->run(bundle::TRAIN_MICROBATCH));
    auto none = unwrap(rt->programTimes());
    EXPECT_TRUE(none.empty()) << "timing is off by default";
  }
  RuntimeOptions opts;
  opts.programTimes = true;
  auto rt = unwrap(Runtime::load(b, opts));
  ASSERT_OK(rt->run(bundle::TRAIN_MICROBATCH));
  ASSERT_OK(rt->runGraph(bundle::TRAIN_MICROBATCH)); // captures, then runs
  ASSERT_OK(rt->runGraph(bundle::TRAIN_MICROBATCH));
  auto runs = unwrap(rt->programTimes());
  ASSERT_EQ(runs.size(), 3u) << "eager, and each graph launch";
  for (const ProgramTime &t : runs) {
    EXPECT_EQ(t.kind, bundle::TRAIN_MICROBATCH);
    EXPECT_GT(t.ms, 0.0);
    EXPECT_GE(t.joinWaitMs, 0.0);
    EXPECT_LE(t.joinWaitMs, t.ms);
    EXPECT_EQ(t.mainCollectiveMs, 0.0) << "the program has no collectives";
  }
}

// --timeline: only the programs run between beginTimeline and endTimeline
// are recorded, a graph run eagerly among them; each step's interval lies
// after the one before it on the stream, inside its program's.
TEST(Runtime, RecordsOneStepsTimelineWhenAsked) {
  const int n = 5000;
  bundle::Bundle b = handBundle(n);
  {
    auto rt = unwrap(Runtime::load(b, RuntimeOptions{}));
    Status off = rt->beginTimeline();
    ASSERT_FALSE(off.isOk());
    EXPECT_NE(off.message().find("RuntimeOptions.stepTimeline"),
              std::string::npos)
        << off.message();
    EXPECT_TRUE(rt->timeline().empty());
  }
  RuntimeOptions opts;
  opts.stepTimeline = true;
  auto rt = unwrap(Runtime::load(b, opts));
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i)
    x[size_t(i)] = float(i % 29) - 14.0f;
  ASSERT_OK(rt->writeSlot(0, x.data(), x.size() * 4));
  ASSERT_OK(rt->run(bundle::TRAIN_MICROBATCH));
  ASSERT_OK(rt->runGraph(bundle::TRAIN_MICROBATCH)); // captured, unrecorded
  ASSERT_OK(rt->synchronize());
  EXPECT_TRUE(rt->timeline().empty()) << "nothing recorded before begin";

  ASSERT_OK(rt->beginTimeline());
  ASSERT_OK(rt->runGraph(bundle::TRAIN_MICROBATCH)); // eagerly, recorded
  ASSERT_OK(rt->run(bundle::TRAIN_MICROBATCH));
  ASSERT_OK(rt->endTimeline());
  ASSERT_OK(rt->run(bundle::TRAIN_MICROBATCH)); // after the end: unrecorded
  ASSERT_OK(rt->synchronize());
  std::vector<float> y(n);
  ASSERT_OK(rt->readSlot(1, y.data(), y.size() * 4));
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(y[size_t(i)], 6.0f * x[size_t(i)]) << i;

  const std::vector<TimelineRecord> &records = rt->timeline();
  // Per run: the memset, two launches, the GEMM, then the program (one
  // stream: no join).
  const TimelineKind kinds[] = {TimelineKind::Memset, TimelineKind::Launch,
                                TimelineKind::Launch, TimelineKind::Gemm,
                                TimelineKind::Program};
  const char *labels[] = {"zero y", "axpy 0", "axpy 1", "hand.fprop",
                          "train"};
  ASSERT_EQ(records.size(), 10u);
  double before = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const TimelineRecord &r = records[i];
    size_t inRun = i % 5;
    EXPECT_EQ(r.run, int(i / 5)) << i;
    EXPECT_EQ(r.kind, kinds[inRun]) << i;
    EXPECT_EQ(r.label, labels[inRun]) << i;
    EXPECT_EQ(r.stream, 0) << i;
    EXPECT_EQ(r.program, bundle::TRAIN_MICROBATCH) << i;
    EXPECT_EQ(r.step, inRun < 4 ? int(inRun) : -1) << i;
    EXPECT_LE(r.beginMs, r.endMs) << i;
    if (inRun < 4) {
      // Stream order: each step starts after the one before has ended.
      EXPECT_GE(r.beginMs, before) << i;
      before = r.endMs;
      continue;
    }
    const TimelineRecord &first = records[i - 4], &last = records[i - 1];
    EXPECT_LE(r.beginMs, first.beginMs) << i;
    EXPECT_GE(r.endMs, last.endMs) << i;
  }
  EXPECT_EQ(records[4].beginMs, 0.0) << "time zero is the first program's";
  EXPECT_GT(records[3].endMs - records[3].beginMs, 0.0) << "the GEMM";
  EXPECT_EQ(records[3].m, 64);
  EXPECT_EQ(records[3].n, 64);
  EXPECT_EQ(records[3].k, 64);
  EXPECT_GE(records[5].beginMs, records[4].endMs) << "run 1 after run 0";

  StepTimelineSummary summary = summarizeStepTimeline(records);
  ASSERT_EQ(summary.runs.size(), 2u);
  ASSERT_EQ(summary.step.busyMs.size(), 1u);
  EXPECT_GT(summary.step.busyMs[0], 0.0);
  EXPECT_LE(summary.step.busyMs[0], summary.step.spanMs);
  EXPECT_EQ(summary.step.sideCollectiveMs, 0.0);
}

TEST(Runtime, RefusesARankOutsideTheWorld) {
  bundle::Bundle b = handBundle(256);
  RuntimeOptions opts;
  opts.rank = 1;
  auto rt = Runtime::load(b, opts);
  ASSERT_FALSE(rt.isOk());
  EXPECT_NE(rt.status().message().find("world size 1"), std::string::npos)
      << rt.status().message();
}

} // namespace
} // namespace octet::test
