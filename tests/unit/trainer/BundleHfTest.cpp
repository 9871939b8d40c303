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

void roundTrip(const std::string &model, size_t fusedExpected) {
  std::string fixture =
      std::string(OCTET_SOURCE_DIR) + "/tests/fixtures/hf_roundtrip/" + model;
  std::string bundlePath = tempPath(model + ".octet");
  std::string cmd = std::string(OCTET_BINARY) + " compile " + fixture +
                    "/config.json -o " + bundlePath + " > " + bundlePath +
                    ".log 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto b = bundle::readBundle(bundlePath);
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

} // namespace
} // namespace octet
