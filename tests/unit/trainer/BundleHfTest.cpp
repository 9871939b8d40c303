// octet-run's Hugging Face path on real compiled bundles, without a GPU:
// the models transformers saved in tests/fixtures/hf_roundtrip (untied and
// sharded; tied in one file) are compiled with `octet compile CONFIG.json`,
// loaded by the trainer into a host-memory copy of the plan's arena, and
// saved back as a checkpoint. Every parameter's slot must hold its HF
// tensors as the bundle's hf_pieces say (a fused QKV or gate/up weight:
// the tensors stacked), and the checkpoint's model must be the fixture's
// tensors, bit for bit. The programs do not run: the kernels need a GPU,
// and this checks where the numbers go, not what the step makes of them
// (bench/hf_oracle_gpu.sh checks that against transformers on a GPU).

#include "bundle/Bundle.h"
#include "bundle/InitValues.h"
#include "runtime/checkpoint/TrainState.h"
#include "runtime/exec/Trainer.h"
#include "tests/unit/trainer/ToyBackend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace octet {
namespace {

// The plan's arena in host memory; programs do nothing.
class ArenaBackend : public TrainBackend {
public:
  explicit ArenaBackend(bundle::Bundle b)
      : bundle_(std::move(b)), arena_(bundle_.plan().arenas(0).bytes(), 0xA5) {}
  const bundle::Bundle &bundle() const override { return bundle_; }
  const bundle::Program *program(bundle::ProgramKind kind) const override {
    for (const bundle::Program &p : bundle_.ranks(0).programs())
      if (p.kind() == kind)
        return &p;
    return nullptr;
  }
  Status run(bundle::ProgramKind, RunMode) override { return Status::ok(); }
  Status writeSlot(uint32_t slot, const void *data, uint64_t bytes) override {
    std::memcpy(at(slot), data, bytes);
    return Status::ok();
  }
  Status readSlot(uint32_t slot, void *data, uint64_t bytes) override {
    std::memcpy(data, at(slot), bytes);
    return Status::ok();
  }
  Status zeroSlot(uint32_t slot) override {
    std::memset(at(slot), 0, bundle_.plan().slots(int(slot)).bytes());
    return Status::ok();
  }
  Status synchronize() override { return Status::ok(); }
  StatusOr<std::unique_ptr<HostBuffer>> hostBuffer(uint64_t bytes) override {
    return std::unique_ptr<HostBuffer>(new test::HostVectorBuffer(bytes));
  }
  DeviceMemory memory() const override {
    DeviceMemory m;
    m.arenas = m.used = arena_.size();
    m.total = uint64_t(80) << 30;
    return m;
  }
  std::string deviceName() const override { return "host"; }
  std::vector<uint8_t> slotBytes(uint32_t slot) const {
    const bundle::Slot &s = bundle_.plan().slots(int(slot));
    return {arena_.begin() + long(s.offset()),
            arena_.begin() + long(s.offset() + s.bytes())};
  }

private:
  uint8_t *at(uint32_t slot) {
    return arena_.data() + bundle_.plan().slots(int(slot)).offset();
  }
  bundle::Bundle bundle_;
  std::vector<uint8_t> arena_;
};

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/bundle-hf-" + std::to_string(::getpid()) +
         "-" + name;
}

std::string fixtureDir(const std::string &model) {
  return std::string(OCTET_SOURCE_DIR) + "/tests/fixtures/hf_roundtrip/" +
         model;
}

// The fixture's config.json compiled into a bundle.
StatusOr<bundle::Bundle> compileFixture(const std::string &model) {
  std::string bundlePath = tempPath(model + ".octet");
  std::string cmd = std::string(OCTET_BINARY) + " compile " +
                    fixtureDir(model) + "/config.json -o " + bundlePath +
                    " > " + bundlePath + ".log 2>&1";
  if (std::system(cmd.c_str()) != 0)
    return Status::error("failed: " + cmd);
  return bundle::readBundle(bundlePath);
}

void roundTrip(const std::string &model, size_t fusedExpected) {
  std::string fixture = fixtureDir(model);
  auto b = compileFixture(model);
  ASSERT_TRUE(b.isOk()) << b.status().message();
  auto reader = hf::CheckpointReader::open(fixture);
  ASSERT_TRUE(reader.isOk()) << reader.status().message();

  ArenaBackend backend(*b);
  TrainDataOptions d;
  d.kind = "synthetic";
  d.rows = uint32_t(b->schedule().micro_batch_size());
  d.sequenceLength = uint32_t(b->schedule().seq_len());
  d.vocabSize = b->schedule().vocab_size();
  auto data = TrainData::open(d);
  ASSERT_TRUE(data.isOk()) << data.status().message();
  TrainerOptions o;
  o.out = nullptr;
  o.initWeights = fixture;
  o.checkpointDir = tempPath(model + "-ckpt");
  std::system(("rm -rf '" + o.checkpointDir + "'").c_str());
  auto trainer = Trainer::create(backend, **data, o);
  ASSERT_TRUE(trainer.isOk()) << trainer.status().message();
  TrainResult result;
  Status started = (*trainer)->start(result);
  ASSERT_TRUE(started.isOk()) << started.message();

  size_t fused = 0;
  for (const bundle::Parameter &p : b->parameters()) {
    ASSERT_FALSE(p.hf_pieces().empty()) << p.name();
    std::vector<uint8_t> expected;
    for (const bundle::HfPiece &piece : p.hf_pieces()) {
      EXPECT_EQ(piece.tensor_row(), 0);
      EXPECT_FALSE(piece.transpose());
      auto bytes = reader->readTensor(piece.tensor());
      ASSERT_TRUE(bytes.isOk()) << bytes.status().message();
      expected.insert(expected.end(), bytes->begin(), bytes->end());
    }
    fused += p.hf_pieces_size() > 1;
    ASSERT_EQ(p.dtype(), bundle::F32) << p.name();
    EXPECT_TRUE(backend.slotBytes(p.slot()) == expected)
        << p.name() << " does not hold its HF tensors";
  }
  EXPECT_EQ(fused, fusedExpected);

  auto path = (*trainer)->saveCheckpoint(0);
  ASSERT_TRUE(path.isOk()) << path.status().message();
  auto saved = checkpoint::loadTrainCheckpoint(*path);
  ASSERT_TRUE(saved.isOk()) << saved.status().message();
  std::vector<std::string> names;
  for (const hf::NamedTensor &t : saved->model) {
    names.push_back(t.name);
    auto original = reader->readTensor(t.name);
    ASSERT_TRUE(original.isOk()) << t.name << " is not a tensor of the model";
    EXPECT_EQ(t.shape, reader->find(t.name)->shape) << t.name;
    EXPECT_TRUE(t.data == *original) << t.name << " changed on the way";
  }
  std::sort(names.begin(), names.end());
  // Every tensor of the fixture but a tied copy of the embedding.
  std::vector<std::string> all = reader->tensorNames();
  EXPECT_EQ(names, all);
}

TEST(BundleHf, UntiedShardedModelLoadsIntoFusedParametersAndBack) {
  // 2 layers: a fused QKV and a fused gate/up weight each.
  roundTrip("untied", 4);
}

TEST(BundleHf, TiedModelLoadsIntoFusedParametersAndBack) {
  roundTrip("tied", 4);
}

// What octet-profile runs a compiled bundle's TRAIN_MICROBATCH on: the
// plan's memory as a fresh training run starts (every parameter and state
// tensor from its Init, gradient accumulators zero) and, written over the
// input slots before each run, a synthetic batch whose every token's loss
// counts (a masked token's cross-entropy skips its vocabulary row).
TEST(BundleHf, ACompiledBundleStartsFromItsInitAndTakesASyntheticBatch) {
  auto b = compileFixture("tied");
  ASSERT_TRUE(b.isOk()) << b.status().message();
  ArenaBackend backend(*b);
  auto data = TrainData::open(scheduledDataOptions(b->schedule()));
  ASSERT_TRUE(data.isOk()) << data.status().message();
  TrainerOptions o;
  o.out = nullptr;
  o.steps = 1;
  auto trainer = Trainer::create(backend, **data, o);
  ASSERT_TRUE(trainer.isOk()) << trainer.status().message();
  TrainResult result;
  Status started = (*trainer)->start(result);
  ASSERT_TRUE(started.isOk()) << started.message();

  const bundle::MemoryPlan &plan = b->plan();
  for (const bundle::Parameter &p : b->parameters()) {
    uint64_t elements = 1;
    for (int64_t d : p.shape())
      elements *= uint64_t(d);
    auto init = bundle::initialBytes(p.init(), p.dtype(), elements, p.name());
    ASSERT_TRUE(init.isOk()) << init.status().message();
    EXPECT_TRUE(backend.slotBytes(p.slot()) ==
                std::vector<uint8_t>(init->begin(), init->end()))
        << p.name() << " does not hold its Init";
  }
  for (int i = 0; i < plan.slots_size(); ++i)
    if (plan.slots(i).kind() == bundle::GRADIENT &&
        plan.slots(i).program().empty())
      EXPECT_EQ(backend.slotBytes(uint32_t(i)),
                std::vector<uint8_t>(plan.slots(i).bytes(), 0))
          << plan.slots(i).name();

  const bundle::Program *train = backend.program(bundle::TRAIN_MICROBATCH);
  ASSERT_NE(train, nullptr);
  const int64_t vocab = b->schedule().vocab_size();
  bool mask = false, tokens = false;
  for (int run = 0; run < 2; ++run) {
    // What the program's later activations leave in its input slots.
    for (const bundle::NamedSlot &in : train->inputs())
      ASSERT_TRUE(backend.zeroSlot(in.slot()).isOk());
    Status written = (*trainer)->writeInputs(bundle::TRAIN_MICROBATCH, 1);
    ASSERT_TRUE(written.isOk()) << written.message();
    for (const bundle::NamedSlot &in : train->inputs()) {
      std::vector<uint8_t> bytes = backend.slotBytes(in.slot());
      ASSERT_EQ(bytes.size() % 4, 0u) << in.name();
      for (size_t at = 0; at < bytes.size(); at += 4) {
        if (in.name() == "loss_mask") {
          float one = 0;
          std::memcpy(&one, &bytes[at], 4);
          ASSERT_EQ(one, 1.0f) << "loss_mask element " << at / 4;
          mask = true;
        } else if (in.name() == "tokens" || in.name() == "labels") {
          int32_t id = -1;
          std::memcpy(&id, &bytes[at], 4);
          ASSERT_TRUE(id >= 0 && id < vocab) << in.name() << " " << id;
          tokens = true;
        }
      }
    }
  }
  EXPECT_TRUE(mask) << "the TRAIN_MICROBATCH program takes no loss_mask";
  EXPECT_TRUE(tokens) << "the TRAIN_MICROBATCH program takes no tokens";
}

} // namespace
} // namespace octet
