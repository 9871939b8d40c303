// A compiled bundle on the GPU: the programs whose kernels all have code
// run through the runtime, from initial values the host computes as the
// reference interpreter does, and their results match host arithmetic.
//
// The bundle comes from OCTET_SMOKE_BUNDLE (default: the tiny-llama bundle
// the build compiles) and the accumulation test's from OCTET_ACCUMULATE_BUNDLE
// (default: tiny-llama-accumulate2's), so the binary can be carried to a GPU
// host with them.

#include "support/Numerics.h"
#include "bundle/Bundle.h"
#include "bundle/InitValues.h"
#include "runtime/exec/Runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

namespace {

using namespace octet;
using namespace octet::bundle;

#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    ::octet::Status st_ = (expr);                                              \
    ASSERT_TRUE(st_.isOk()) << st_.message();                                  \
  } while (0)

std::string bundlePath() {
  if (const char *p = std::getenv("OCTET_SMOKE_BUNDLE"))
    return p;
  return OCTET_SMOKE_BUNDLE_DEFAULT;
}

// A bundle of two microbatches a step: only there do the gradient
// accumulators outlive a microbatch (with one, they are step-local and
// share bytes with what runs before their first write).
std::string accumulateBundlePath() {
  if (const char *p = std::getenv("OCTET_ACCUMULATE_BUNDLE"))
    return p;
  return OCTET_ACCUMULATE_BUNDLE_DEFAULT;
}

// The bundle less the programs that launch a kernel without code, and less
// those kernels (launch indices renumbered), so that the runtime loads it.
Bundle runnablePart(const Bundle &full, std::vector<std::string> &kept) {
  Bundle b = full;
  std::vector<int> renumber(full.kernels_size(), -1);
  b.clear_kernels();
  for (int k = 0; k < full.kernels_size(); ++k)
    if (!full.kernels(k).missing_code()) {
      renumber[k] = b.kernels_size();
      *b.add_kernels() = full.kernels(k);
    }
  for (RankProgram &rank : *b.mutable_ranks()) {
    auto *programs = rank.mutable_programs();
    for (int p = programs->size() - 1; p >= 0; --p) {
      bool runnable = true;
      for (Step &s : *programs->Mutable(p)->mutable_steps())
        if (s.has_launch()) {
          int k = renumber[s.launch().kernel()];
          runnable &= k >= 0;
          s.mutable_launch()->set_kernel(k < 0 ? 0 : k);
        }
      if (!runnable)
        programs->DeleteSubrange(p, 1);
    }
    for (const Program &p : rank.programs())
      kept.push_back(p.name());
  }
  return b;
}

// The smoke bundle's runnable part, loaded; null (with a failure) if not.
std::unique_ptr<Runtime> loadRunnable(const std::string &path = bundlePath()) {
  auto full = readBundle(path);
  EXPECT_TRUE(full) << full.status().message();
  if (!full)
    return nullptr;
  std::vector<std::string> kept;
  auto rt = Runtime::load(runnablePart(*full, kept), RuntimeOptions{});
  EXPECT_TRUE(rt) << rt.status().message();
  if (!rt)
    return nullptr;
  return std::move(*rt);
}

// Whether the train and init programs kept all their code (runnablePart
// drops a program with a kernel that has none): tests that train skip
// otherwise.
bool canTrain(Runtime &rt) {
  return rt.program(TRAIN_MICROBATCH) && rt.program(INIT);
}

template <typename T>
std::vector<T> readSlot(Runtime &rt, const std::string &name) {
  int slot = rt.findSlot(name);
  EXPECT_GE(slot, 0) << name;
  if (slot < 0)
    return {};
  uint64_t bytes = rt.bundle().plan().slots(slot).bytes();
  std::vector<T> out(bytes / sizeof(T));
  Status st = rt.readSlot(slot, out.data(), bytes);
  EXPECT_TRUE(st) << st.message();
  return out;
}

// Every parameter and state tensor from its Init, as octet train's CPU run
// starts.
Status writeInitialValues(Runtime &rt) {
  const Bundle &b = rt.bundle();
  auto write = [&](const std::string &name, const Init &init, uint32_t slot) {
    const Slot &s = b.plan().slots(int(slot));
    uint64_t elements = s.bytes() / std::max<uint64_t>(1, dtypeBytes(s.dtype()));
    auto bytes = initialBytes(init, s.dtype(), elements, name);
    if (!bytes)
      return bytes.status();
    return rt.writeSlot(slot, bytes->data(), bytes->size());
  };
  for (const Parameter &p : b.parameters())
    OCTET_RETURN_IF_ERROR(write(p.name(), p.init(), p.slot()));
  for (const StateTensor &s : b.state())
    OCTET_RETURN_IF_ERROR(write(s.name(), s.init(), s.slot()));
  return Status::ok();
}

// What the init and optimizer programs make of each FP8 weight, bit for
// bit: its amax, and either its FP8 copy e4m3(weight · scale)
// (train.codegen.fp8_weight_cast "optimizer") or, where the step casts it
// (octet-step-local-fp8-weights, the default at one GPU), the scale the
// step casts with, the weight's own. The K-major copy is the train step's
// (octet-step-local-kmajor-weights): no state.
void expectFp8Weights(Runtime &rt, const std::string &when) {
  int checked = 0;
  for (const Parameter &p : rt.bundle().parameters()) {
    std::string cache = "fp8w." + p.name();
    if (rt.findSlot(cache + ".amax") < 0)
      continue;
    EXPECT_LT(rt.findSlot(cache + ".t"), 0)
        << "a persistent K-major copy of " << p.name();
    bool stepLocal = rt.findSlot(cache + ".cast_scale") >= 0;
    EXPECT_NE(stepLocal, rt.findSlot(cache) >= 0)
        << p.name() << ": an FP8 copy and a cast scale, or neither";
    ++checked;
    std::vector<float> w = readSlot<float>(rt, p.name());
    std::vector<float> amax = readSlot<float>(rt, cache + ".amax");
    std::vector<float> scale =
        readSlot<float>(rt, "fp8." + p.name() + ".w.scale");
    ASSERT_EQ(p.shape_size(), 2);
    ASSERT_EQ(scale.size(), 1u);
    float hostAmax = 0;
    for (float x : w)
      hostAmax = std::max(hostAmax, std::fabs(x));
    EXPECT_EQ(amax.at(0), hostAmax) << when << ": " << p.name();
    if (stepLocal) {
      EXPECT_EQ(readSlot<float>(rt, cache + ".cast_scale").at(0), scale[0])
          << when << ": " << p.name();
      continue;
    }
    std::vector<uint8_t> q = readSlot<uint8_t>(rt, cache);
    ASSERT_EQ(q.size(), w.size());
    int64_t wrong = 0;
    for (size_t i = 0; i < w.size(); ++i)
      wrong += q[i] != numerics::encodeE4M3(w[i] * scale[0]);
    EXPECT_EQ(wrong, 0) << when << ": " << p.name();
  }
  EXPECT_GT(checked, 0) << "no FP8 weights in the bundle";
}

TEST(BundleOnGpu, InitAndOptimizerStepMatchTheHost) {
  auto full = readBundle(bundlePath());
  ASSERT_TRUE(full) << full.status().message();
  std::vector<std::string> kept;
  Bundle b = runnablePart(*full, kept);
  std::string list;
  for (const std::string &k : kept)
    list += " " + k;
  std::printf("programs with code:%s\n", list.c_str());
  auto rtOr = Runtime::load(b, RuntimeOptions{});
  ASSERT_TRUE(rtOr) << rtOr.status().message();
  Runtime &rt = **rtOr;
  ASSERT_TRUE(rt.program(INIT)) << "the init program has a kernel without code";
  ASSERT_TRUE(rt.program(OPTIMIZER_STEP))
      << "the optimizer step has a kernel without code";

  ASSERT_OK(writeInitialValues(rt));
  // A parameter as the interpreter draws it: spot-check the host values.
  const Parameter &embed = b.parameters(0);
  std::vector<float> w0 = readSlot<float>(rt, embed.name());
  auto host = initialBytes(embed.init(), F32, w0.size(), embed.name());
  ASSERT_TRUE(host);
  EXPECT_EQ(std::memcmp(host->data(), w0.data(), host->size()), 0);

  ASSERT_OK(rt.run(INIT));
  ASSERT_OK(rt.synchronize());
  expectFp8Weights(rt, "after init");

  // Zero gradients: AdamW's moments stay zero and only weight decay moves
  // a weight, by one factor per tensor.
  std::map<std::string, std::vector<float>> before;
  for (const Parameter &p : b.parameters())
    before[p.name()] = readSlot<float>(rt, p.name());
  ASSERT_OK(rt.run(OPTIMIZER_STEP));
  ASSERT_OK(rt.synchronize());
  ASSERT_OK(rt.run(OPTIMIZER_STEP));
  ASSERT_OK(rt.synchronize());
  for (const NamedSlot &out : rt.program(OPTIMIZER_STEP)->outputs()) {
    float v = 0;
    ASSERT_OK(rt.readSlot(out.slot(), &v, 4));
    std::printf("optimizer step output %s = %g\n", out.name().c_str(), v);
    if (out.name() == "grad_norm")
      EXPECT_EQ(v, 0.0f);
    if (out.name() == "lr")
      EXPECT_GT(v, 0.0f);
  }
  std::vector<int64_t> step = readSlot<int64_t>(rt, "optimizer.step");
  ASSERT_EQ(step.size(), 1u);
  EXPECT_EQ(step[0], 2);
  int decayed = 0;
  for (const Parameter &p : b.parameters()) {
    for (const char *moment : {"adam_m.", "adam_v."})
      for (float m : readSlot<float>(rt, moment + p.name()))
        ASSERT_EQ(m, 0.0f) << moment << p.name();
    std::vector<float> now = readSlot<float>(rt, p.name());
    const std::vector<float> &was = before[p.name()];
    ASSERT_EQ(now.size(), was.size());
    // The factor of the largest element, then every element against it.
    size_t big = 0;
    for (size_t i = 0; i < was.size(); ++i)
      if (std::fabs(was[i]) > std::fabs(was[big]))
        big = i;
    double factor = was[big] == 0 ? 1 : double(now[big]) / was[big];
    EXPECT_LE(factor, 1.0) << p.name();
    EXPECT_GT(factor, 0.99) << p.name();
    decayed += factor < 1.0;
    for (size_t i = 0; i < was.size(); ++i)
      ASSERT_NEAR(now[i], was[i] * factor, 1e-6 * std::fabs(was[i]) + 1e-12)
          << p.name() << "[" << i << "]";
  }
  EXPECT_GT(decayed, 0) << "weight decay moved no parameter";
  expectFp8Weights(rt, "after two optimizer steps");
}

// One microbatch of made-up tokens in the train program's inputs.
Status writeBatch(Runtime &rt) {
  const Bundle &b = rt.bundle();
  const Schedule &sched = b.schedule();
  int64_t rows = sched.micro_batch_size(), seq = sched.seq_len();
  for (const NamedSlot &in : rt.program(TRAIN_MICROBATCH)->inputs()) {
    const Slot &s = b.plan().slots(int(in.slot()));
    std::vector<int32_t> ints;
    std::vector<float> floats;
    for (int64_t i = 0; i < rows * seq; ++i) {
      if (in.name() == "tokens" || in.name() == "labels")
        ints.push_back(int32_t((i * (in.name() == "tokens" ? 37 : 53) + 11) %
                               sched.vocab_size()));
      else if (in.name() == "positions")
        ints.push_back(int32_t(i % seq));
      else if (in.name() == "loss_mask")
        floats.push_back(i % 7 == 3 ? 0.0f : 1.0f);
    }
    // Rows of one sequence each; a longer slot repeats the end (empty
    // sequences).
    if (in.name() == "cu_seqlens") {
      for (int64_t r = 0; r <= rows; ++r)
        ints.push_back(int32_t(r * seq));
      ints.resize(std::max<size_t>(ints.size(), s.bytes() / 4), ints.back());
    }
    if (ints.empty() && floats.empty())
      return Status::error("no made-up values for input '" + in.name() + "'");
    if (s.dtype() == I32 && !ints.empty())
      OCTET_RETURN_IF_ERROR(
          rt.writeSlot(in.slot(), ints.data(), ints.size() * 4));
    else if (s.dtype() == F32 && !floats.empty())
      OCTET_RETURN_IF_ERROR(
          rt.writeSlot(in.slot(), floats.data(), floats.size() * 4));
    else
      return Status::error("input '" + in.name() + "' has an unexpected type");
  }
  return Status::ok();
}

// The GEMMs marked first_microbatch_overwrites write their gradient
// accumulators in a step's first microbatch whatever they held (the
// optimizer step no longer clears them), and add to them in the others;
// eagerly and in the two captured graphs alike. Everything else persistent
// (FP8 scale state the train step updates) is put back before each run, so
// that every run computes the same gradient.
TEST(BundleOnGpu, FirstMicrobatchWritesStaleGradientAccumulators) {
  std::unique_ptr<Runtime> loaded = loadRunnable(accumulateBundlePath());
  ASSERT_TRUE(loaded);
  Runtime &rt = *loaded;
  const Bundle &b = rt.bundle();
  if (!canTrain(rt))
    GTEST_SKIP() << "the train or init program has a kernel without code";
  std::set<uint32_t> overwritten;
  for (const Step &s : rt.program(TRAIN_MICROBATCH)->steps())
    if (s.has_gemm() && s.gemm().first_microbatch_overwrites())
      overwritten.insert(s.gemm().d().slot());
  ASSERT_FALSE(overwritten.empty()) << "no GEMM writes in the first microbatch";
  for (uint32_t slot : overwritten)
    ASSERT_TRUE(b.plan().slots(int(slot)).program().empty())
        << b.plan().slots(int(slot)).name()
        << " lives within one step, so no microbatch can add to it: "
           "OCTET_ACCUMULATE_BUNDLE must be compiled for several microbatches "
           "a step";
  ASSERT_OK(writeInitialValues(rt));
  ASSERT_OK(rt.run(INIT));
  ASSERT_OK(writeBatch(rt));
  ASSERT_OK(rt.synchronize());

  std::map<uint32_t, std::vector<uint8_t>> persistent;
  for (int i = 0; i < b.plan().slots_size(); ++i) {
    const Slot &s = b.plan().slots(i);
    if (!s.program().empty() || overwritten.count(uint32_t(i)) ||
        s.kind() == WORKSPACE)
      continue;
    std::vector<uint8_t> bytes(s.bytes());
    ASSERT_OK(rt.readSlot(uint32_t(i), bytes.data(), bytes.size()));
    persistent[uint32_t(i)] = std::move(bytes);
  }
  // The batch too: input slots live only within the program, so a run's
  // later activations take their bytes.
  auto restore = [&] {
    for (auto &[slot, bytes] : persistent)
      ASSERT_OK(rt.writeSlot(slot, bytes.data(), bytes.size()));
    ASSERT_OK(writeBatch(rt));
  };
  auto fill = [&](float value) {
    for (uint32_t slot : overwritten) {
      std::vector<float> v(b.plan().slots(int(slot)).bytes() / 4, value);
      ASSERT_OK(rt.writeSlot(slot, v.data(), v.size() * 4));
    }
  };
  auto grads = [&] {
    std::map<uint32_t, std::vector<float>> out;
    for (uint32_t slot : overwritten) {
      std::vector<float> v(b.plan().slots(int(slot)).bytes() / 4);
      Status st = rt.readSlot(slot, v.data(), v.size() * 4);
      EXPECT_TRUE(st) << st.message();
      out[slot] = std::move(v);
    }
    return out;
  };
  // Two runs of the same microbatch from the same state need not agree to
  // the last bit: where the backward accumulates with atomics (attention's
  // dQ), a different order can flip an FP8 rounding downstream. Each slot's
  // bound is therefore the larger of 1e-4 of its largest element and four
  // times the spread measured between two identical runs; a stale value
  // leaking in (-7 or 3e20 against gradients far below 1) or a missed
  // accumulation (off by the whole gradient) stays far outside it.
  std::map<uint32_t, float> spread;
  auto expectScaled = [&](const std::map<uint32_t, std::vector<float>> &got,
                          const std::map<uint32_t, std::vector<float>> &want,
                          float factor, const char *what) {
    for (auto &[slot, w] : want) {
      const std::vector<float> &g = got.at(slot);
      float maxAbs = 0;
      for (float x : w)
        maxAbs = std::max(maxAbs, std::fabs(x));
      ASSERT_GT(maxAbs, 0.0f) << b.plan().slots(int(slot)).name();
      float bound = std::max(1e-4f * maxAbs, 4.0f * factor * spread[slot]);
      for (size_t i = 0; i < w.size(); ++i)
        ASSERT_NEAR(g[i], factor * w[i], bound)
            << what << ": " << b.plan().slots(int(slot)).name() << "[" << i
            << "]";
    }
  };

  // A first run absorbs whatever the runtime sets up on a program's first
  // use, so the runs compared below all see the same runtime state.
  fill(0.0f);
  ASSERT_OK(rt.run(TRAIN_MICROBATCH, true, true));
  restore();
  fill(1e30f);
  ASSERT_OK(rt.run(TRAIN_MICROBATCH, /*lastMicrobatch=*/true,
                   /*firstMicrobatch=*/true));
  auto first = grads();
  for (auto &[slot, v] : first)
    for (float x : v)
      ASSERT_TRUE(std::isfinite(x)) << b.plan().slots(int(slot)).name();
  restore();
  fill(1e30f);
  ASSERT_OK(rt.run(TRAIN_MICROBATCH, true, true));
  for (auto &[slot, v] : grads()) {
    const std::vector<float> &w = first.at(slot);
    float maxAbs = 0, worst = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      maxAbs = std::max(maxAbs, std::fabs(w[i]));
      worst = std::max(worst, std::fabs(v[i] - w[i]));
    }
    spread[slot] = worst;
    // More than 1% of a slot's range between identical runs is no rounding.
    EXPECT_LE(worst, 1e-2f * maxAbs)
        << "identical runs disagree: " << b.plan().slots(int(slot)).name();
    if (worst > 1e-4f * maxAbs)
      std::printf("identical runs differ in %s by %.3g (%.2g of its largest "
                  "element)\n",
                  b.plan().slots(int(slot)).name().c_str(), worst,
                  worst / maxAbs);
  }

  restore();
  fill(-7.0f);
  ASSERT_OK(rt.run(TRAIN_MICROBATCH, true, true));
  expectScaled(grads(), first, 1.0f, "first microbatch over other stale values");
  restore();
  ASSERT_OK(rt.run(TRAIN_MICROBATCH, true, /*firstMicrobatch=*/false));
  expectScaled(grads(), first, 2.0f, "second microbatch");

  restore();
  fill(3e20f);
  ASSERT_OK(rt.runGraph(TRAIN_MICROBATCH, true, true));
  ASSERT_OK(rt.synchronize());
  expectScaled(grads(), first, 1.0f, "first microbatch's graph");
  restore();
  ASSERT_OK(rt.runGraph(TRAIN_MICROBATCH, true, false));
  ASSERT_OK(rt.synchronize());
  expectScaled(grads(), first, 2.0f, "later microbatches' graph");
}

} // namespace

// cuBLASLt reads each FP8 GEMM's two dequantization factors from the FP8
// scale state through its A and B scale pointers, with no kernel between:
// the scale update must leave every inverse scale equal, bit for bit, to
// 1 / scale in f32, as the interpreter's scale_update makes it, after the
// init program and after train steps whose amaxes moved the scales.
TEST(BundleOnGpu, InverseScalesAreOneOverTheScales) {
  std::unique_ptr<Runtime> loaded = loadRunnable();
  ASSERT_TRUE(loaded);
  if (!canTrain(*loaded))
    GTEST_SKIP() << "the train or init program has a kernel without code";
  Runtime &rt = *loaded;
  ASSERT_OK(writeInitialValues(rt));
  ASSERT_OK(rt.run(INIT));
  for (int step = 0; step < 2; ++step) {
    // Each run: the previous one's activations took the input slots' bytes.
    ASSERT_OK(writeBatch(rt));
    ASSERT_OK(rt.run(TRAIN_MICROBATCH, /*lastMicrobatch=*/true,
                     /*firstMicrobatch=*/true));
  }
  ASSERT_OK(rt.synchronize());
  int checked = 0, moved = 0;
  for (const StateTensor &st : rt.bundle().state()) {
    if (st.kind() != FP8_SCALE_INV)
      continue;
    std::string name = st.name();
    // fp8.<tensor>.scale_inv beside fp8.<tensor>.scale.
    std::string scaleName = name.substr(0, name.size() - 4);
    float inverse = readSlot<float>(rt, name).at(0);
    float scale = readSlot<float>(rt, scaleName).at(0);
    float want = 1.0f / scale;
    EXPECT_EQ(std::memcmp(&want, &inverse, 4), 0)
        << name << " = " << inverse << ", 1 / " << scaleName << " = " << want;
    ++checked;
    moved += scale != 1.0f;
  }
  EXPECT_GT(checked, 0) << "no FP8_SCALE_INV state in the bundle";
  EXPECT_GT(moved, 0) << "no scale moved from 1 in two train steps";
}
