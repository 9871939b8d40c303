// The training loop on the GPU: the toy model of
// tests/unit/trainer/ToyBackend.h as a bundle of real kernels (built here
// from trainer_kernels.cu), run by the runtime with CUDA graphs after the
// first step. Checks that it follows the host reference, that a resumed
// run is bit-identical to a straight one, and that evaluation leaves
// device memory where it was.

#include "bundle/Bundle.h"
#include "runtime/exec/Runtime.h"
#include "runtime/exec/RuntimeBackend.h"
#include "runtime/exec/Trainer.h"
#include "runtime/metrics/EventFile.h"
#include "tests/gpu/runtime/GpuTest.h"
#include "tests/unit/trainer/ToyBackend.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits.h>
#include <sstream>
#include <unistd.h>

namespace octet::test {
namespace {

using namespace octet::bundle;

uint32_t slotOf(const Bundle &b, const std::string &name) {
  for (int i = 0; i < b.plan().slots_size(); ++i)
    if (b.plan().slots(i).name() == name)
      return uint32_t(i);
  ADD_FAILURE() << "no slot " << name;
  return 0;
}

Program *programOf(Bundle &b, ProgramKind kind) {
  for (Program &p : *b.mutable_ranks(0)->mutable_programs())
    if (p.kind() == kind)
      return &p;
  return nullptr;
}

void launch(Bundle &b, Program *p, uint32_t kernel, const std::string &label,
            const std::vector<std::string> &slots,
            const std::vector<KernelArg> &scalars) {
  Step *s = p->add_steps();
  s->set_label(label);
  KernelLaunch *l = s->mutable_launch();
  l->set_kernel(kernel);
  l->mutable_grid()->set_x(1);
  l->mutable_block()->set_x(32);
  for (const std::string &name : slots)
    l->add_args()->mutable_slot()->set_slot(slotOf(b, name));
  for (const KernelArg &a : scalars)
    *l->add_args() = a;
}

KernelArg u32(uint32_t v) {
  KernelArg a;
  a.set_u32(v);
  return a;
}

KernelArg f32(float v) {
  KernelArg a;
  a.set_f32(v);
  return a;
}

Bundle gpuToyBundle(const ToyShape &shape) {
  Bundle b = makeToyBundle(shape);
  b.set_format_version(kBundleFormatVersion);
  bundle::Module *m = b.add_modules();
  m->set_name("trainer_kernels");
  m->set_ptx(readFile(besideBinary("trainer_kernels.ptx")));
  for (const char *symbol : {"toy_refresh_cache", "toy_forward", "toy_adam"}) {
    Kernel *k = b.add_kernels();
    k->set_symbol(symbol);
    k->set_module(0);
  }
  const uint32_t vocab = uint32_t(shape.vocab);
  const uint32_t n = uint32_t(shape.rows * shape.seq);
  launch(b, programOf(b, INIT), 0, "cache", {"w", "cache.w"}, {u32(vocab)});
  launch(b, programOf(b, TRAIN_MICROBATCH), 1, "forward+backward",
         {"cache.w", "b", "tokens", "labels", "loss_mask", "grad.w", "grad.b",
          "loss"},
         {u32(vocab), u32(n), u32(1)});
  launch(b, programOf(b, EVAL), 1, "forward",
         {"cache.w", "b", "tokens", "labels", "loss_mask", "grad.w", "grad.b",
          "eval.loss"},
         {u32(vocab), u32(n), u32(0)});
  launch(b, programOf(b, OPTIMIZER_STEP), 2, "adam",
         {"w", "b", "grad.w", "grad.b", "adam_m.w", "adam_v.w", "adam_m.b",
          "adam_v.b", "step", "cache.w", "grad_norm", "lr"},
         {f32(float(shape.lr)), u32(vocab)});
  b.clear_content_hash();
  b.set_content_hash(computeContentHash(b));
  return b;
}

struct GpuRun {
  std::unique_ptr<Runtime> rt;
  std::unique_ptr<RuntimeBackend> backend;
  std::unique_ptr<TrainData> data;
  std::unique_ptr<Trainer> trainer;
};

GpuRun makeGpuRun(const Bundle &b, const ToyShape &shape, TrainerOptions o) {
  GpuRun r;
  auto rt = Runtime::load(b, RuntimeOptions{});
  if (!rt) {
    ADD_FAILURE() << rt.status().message();
    return r;
  }
  r.rt = std::move(*rt);
  r.backend = std::make_unique<RuntimeBackend>(*r.rt);
  TrainDataOptions d;
  d.rows = uint32_t(shape.rows);
  d.sequenceLength = uint32_t(shape.seq);
  d.seed = shape.seed;
  d.vocabSize = shape.vocab;
  r.data = unwrap(TrainData::open(d));
  o.out = stdout;
  auto t = Trainer::create(*r.backend, *r.data, o);
  if (!t) {
    ADD_FAILURE() << t.status().message();
    return r;
  }
  r.trainer = std::move(*t);
  return r;
}

std::vector<uint8_t> slotBytes(Runtime &rt, const std::string &name) {
  uint32_t slot = slotOf(rt.bundle(), name);
  std::vector<uint8_t> out(rt.bundle().plan().slots(int(slot)).bytes());
  EXPECT_TRUE(rt.readSlot(slot, out.data(), out.size()).isOk());
  return out;
}

TEST(GpuTrainer, FollowsTheHostReference) {
  ToyShape shape;
  shape.steps = 12;
  Bundle b = gpuToyBundle(shape);
  GpuRun gpu = makeGpuRun(b, shape, {});
  ASSERT_TRUE(gpu.trainer);
  auto result = gpu.trainer->run();
  ASSERT_TRUE(result.isOk()) << result.status().message();

  ToyBackend host(makeToyBundle(shape));
  TrainDataOptions d;
  d.rows = uint32_t(shape.rows), d.sequenceLength = uint32_t(shape.seq);
  d.seed = shape.seed, d.vocabSize = shape.vocab;
  auto data = unwrap(TrainData::open(d));
  TrainerOptions o;
  o.out = nullptr;
  auto hostTrainer = unwrap(Trainer::create(host, *data, o));
  auto want = hostTrainer->run();
  ASSERT_TRUE(want.isOk()) << want.status().message();
  ASSERT_EQ(result->steps.size(), want->steps.size());
  for (size_t i = 0; i < want->steps.size(); ++i) {
    EXPECT_NEAR(result->steps[i].loss, want->steps[i].loss,
                2e-6 * std::abs(want->steps[i].loss))
        << "step " << i + 1;
    EXPECT_NEAR(result->steps[i].gradNorm, want->steps[i].gradNorm,
                2e-6 * std::abs(want->steps[i].gradNorm))
        << "step " << i + 1;
  }
  EXPECT_LT(result->steps.back().loss, result->steps.front().loss);
}

TEST(GpuTrainer, ResumeIsBitExactAndEvalKeepsMemory) {
  ToyShape shape;
  shape.steps = 8;
  const int64_t n = 5;
  Bundle b = gpuToyBundle(shape);

  TrainerOptions straight;
  straight.checkpointDir = freshTestDir("gpu-trainer-straight");
  straight.evalInterval = 4;
  straight.evalBatches = 3;
  std::vector<StepRecord> full;
  std::vector<uint8_t> wantW, wantM, wantCache;
  {
    GpuRun a = makeGpuRun(b, shape, straight);
    ASSERT_TRUE(a.trainer);
    auto r = a.trainer->run();
    ASSERT_TRUE(r.isOk()) << r.status().message();
    full = r->steps;
    ASSERT_EQ(r->evals.size(), 2u);
    for (const EvalRecord &e : r->evals)
      EXPECT_EQ(e.bytesAfter, e.bytesBefore)
          << "evaluation at step " << e.step << " changed device memory use";
    wantW = slotBytes(*a.rt, "w");
    wantM = slotBytes(*a.rt, "adam_v.w");
    wantCache = slotBytes(*a.rt, "cache.w");
  }

  TrainerOptions first;
  first.checkpointDir = freshTestDir("gpu-trainer-split");
  first.steps = n;
  {
    GpuRun a = makeGpuRun(b, shape, first);
    ASSERT_TRUE(a.trainer);
    auto r = a.trainer->run();
    ASSERT_TRUE(r.isOk()) << r.status().message();
  }
  TrainerOptions second;
  second.checkpointDir = first.checkpointDir;
  second.resume = true;
  GpuRun c = makeGpuRun(b, shape, second);
  ASSERT_TRUE(c.trainer);
  auto r = c.trainer->run();
  ASSERT_TRUE(r.isOk()) << r.status().message();
  ASSERT_EQ(r->startStep, n);
  ASSERT_EQ(r->steps.size(), size_t(shape.steps - n));
  for (size_t i = 0; i < r->steps.size(); ++i) {
    const StepRecord &want = full[size_t(n) + i];
    EXPECT_EQ(std::memcmp(&r->steps[i].loss, &want.loss, 4), 0)
        << "step " << want.step << ": " << r->steps[i].loss << " vs "
        << want.loss;
    EXPECT_EQ(std::memcmp(&r->steps[i].gradNorm, &want.gradNorm, 4), 0)
        << "step " << want.step;
  }
  EXPECT_EQ(slotBytes(*c.rt, "w"), wantW);
  EXPECT_EQ(slotBytes(*c.rt, "adam_v.w"), wantM);
  EXPECT_EQ(slotBytes(*c.rt, "cache.w"), wantCache);
}

TEST(GpuTrainer, MissingCodeKernelsAreNamed) {
  ToyShape shape;
  Bundle b = gpuToyBundle(shape);
  Kernel *k = b.add_kernels();
  k->set_symbol("train_microbatch.rms_norm.7");
  k->set_missing_code(true);
  auto rt = Runtime::load(b, RuntimeOptions{});
  ASSERT_FALSE(rt.isOk());
  EXPECT_NE(rt.status().message().find("train_microbatch.rms_norm.7"),
            std::string::npos)
      << rt.status().message();
}

TEST(GpuTrainer, OutOfMemoryNamesTheArenaAndItsLargestSlot) {
  ToyShape shape;
  Bundle b = gpuToyBundle(shape);
  uint64_t huge = device().totalMemory() * 2;
  b.mutable_plan()->mutable_arenas(0)->set_bytes(huge);
  Slot *w = b.mutable_plan()->mutable_slots(int(slotOf(b, "w")));
  w->set_bytes(huge - w->offset() - 4096);
  auto rt = Runtime::load(b, RuntimeOptions{});
  ASSERT_FALSE(rt.isOk());
  const std::string &msg = rt.status().message();
  EXPECT_NE(msg.find("arena 'main' needs"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(huge) + " bytes"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("free of"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'w' ("), std::string::npos) << msg;
}

std::string runCommand(const std::string &command, int &rc) {
  std::string log = ::testing::TempDir() + "/octet-run-" +
                    std::to_string(::getpid()) + ".log";
  rc = std::system((command + " > '" + log + "' 2>&1").c_str());
  std::string text = readFile(log);
  std::printf("$ %s\n%s", command.c_str(), text.c_str());
  return text;
}

// octet-run itself on a bundle file: the step line, checkpoints, resume and
// TensorBoard files. OCTET_RUN names the binary (the device run sets it).
TEST(GpuTrainer, OctetRunTrainsSavesAndResumes) {
  const char *octetRun = std::getenv("OCTET_RUN");
  if (!octetRun)
    GTEST_SKIP() << "set OCTET_RUN to the octet-run binary to run this test";
  ToyShape shape;
  shape.steps = 6;
  Bundle b = gpuToyBundle(shape);
  std::string dir = freshTestDir("gpu-trainer-cli");
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  std::string path = dir + "/toy.octet";
  ASSERT_TRUE(writeBundle(b, path).isOk());
  std::string common = std::string(octetRun) + " '" + path +
                       "' --checkpoint-dir '" + dir + "/ck' --tensorboard '" +
                       dir + "/tb'";
  int rc = 0;
  std::string out = runCommand(common + " --steps 4", rc);
  ASSERT_EQ(rc, 0);
  for (const char *want :
       {"memory: plan arenas", "runtime fixed costs", "step 1/4  loss",
        "grad_norm", "tokens/s", "TFLOP/s", "MFU bf16", "fp8", "step 4/4",
        "checkpoint: ", "/ck/step-4"})
    EXPECT_NE(out.find(want), std::string::npos) << want;
  out = runCommand(common + " --resume", rc);
  ASSERT_EQ(rc, 0);
  EXPECT_NE(out.find("resumed from " + dir + "/ck/step-4 at step 4"),
            std::string::npos);
  EXPECT_NE(out.find("step 6/6"), std::string::npos);
  EXPECT_EQ(out.find("step 4/6"), std::string::npos);

  out = runCommand(
      std::string(octetRun) + " '" + path + "' --data /nonexistent/prefix", rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("/nonexistent/prefix"), std::string::npos);
}

} // namespace
} // namespace octet::test
