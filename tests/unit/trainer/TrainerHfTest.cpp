// Hugging Face weights in and out of the training loop, on the host-memory
// backend: a fused parameter (the toy's layers.0.attn.wqkv, BF16) loads from
// its q/k/v tensors of a sharded directory, goes back out under those names
// bit for bit (checkpoints and --save-hf), resumes through them, and a
// checkpoint that does not fit says which tensor and what to do.

#include "bundle/Bundle.h"
#include "bundle/InitValues.h"
#include "runtime/checkpoint/TrainState.h"
#include "runtime/exec/Trainer.h"
#include "support/AtomicFile.h"
#include "support/Numerics.h"
#include "tests/unit/trainer/ToyBackend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <sys/stat.h>

namespace octet::test {
namespace {

const char *kQ = "model.layers.0.self_attn.q_proj.weight";
const char *kK = "model.layers.0.self_attn.k_proj.weight";
const char *kV = "model.layers.0.self_attn.v_proj.weight";

ToyShape fusedShape() {
  ToyShape shape;
  shape.fused = true;
  shape.fusedDType = bundle::BF16;
  shape.steps = 2;
  return shape;
}

// Distinct BF16 values: row r, column c of tensor `tag` is tag + r/8 + c/64.
hf::NamedTensor bf16Tensor(const std::string &name, int64_t rows, float tag) {
  hf::NamedTensor t{name, DType::BF16, {rows, kToyQkvCols}, {}};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < kToyQkvCols; ++c) {
      uint16_t bits = numerics::encodeBF16(tag + float(r) / 8 + float(c) / 64);
      t.data.push_back(uint8_t(bits & 0xff));
      t.data.push_back(uint8_t(bits >> 8));
    }
  return t;
}

hf::NamedTensor f32Tensor(const std::string &name, std::vector<float> v) {
  hf::NamedTensor t{name, DType::F32, {int64_t(v.size())}, {}};
  t.data.resize(v.size() * 4);
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

// The toy model's weights in HF form: q, k and v apart, the embedding by
// its HF name and the bias by its octet name (HF has none for it).
std::vector<hf::NamedTensor> toyWeights(const ToyShape &shape) {
  std::vector<float> w(size_t(shape.vocab));
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = float(i) / 128.0f;
  return {bf16Tensor(kQ, 4, 1.0f), bf16Tensor(kK, 2, 2.0f),
          bf16Tensor(kV, 2, 3.0f),
          f32Tensor("model.embed_tokens.weight", w), f32Tensor("b", {0.5f})};
}

// Writes `tensors` as shards of about two tensors each, with the index.
std::string writeSharded(const std::string &name,
                         const std::vector<hf::NamedTensor> &tensors) {
  std::string dir = freshTestDir(name);
  EXPECT_EQ(::mkdir(dir.c_str(), 0755), 0);
  EXPECT_TRUE(hf::writeCheckpoint(dir, tensors, /*maxShardBytes=*/128).isOk());
  EXPECT_TRUE(isRegularFile(dir + "/model.safetensors.index.json"));
  return dir;
}

std::vector<uint8_t> concat(const std::vector<hf::NamedTensor> &parts) {
  std::vector<uint8_t> out;
  for (const hf::NamedTensor &t : parts)
    out.insert(out.end(), t.data.begin(), t.data.end());
  return out;
}

const hf::NamedTensor *named(const std::vector<hf::NamedTensor> &tensors,
                             const std::string &name) {
  for (const hf::NamedTensor &t : tensors)
    if (t.name == name)
      return &t;
  return nullptr;
}

TEST(TrainerHf, FusedParameterRoundTripsThroughShardedHfTensors) {
  ToyShape shape = fusedShape();
  std::vector<hf::NamedTensor> weights = toyWeights(shape);
  std::string dir = writeSharded("hf-fused-in", weights);
  TrainerOptions o;
  o.initWeights = dir;
  o.checkpointDir = freshTestDir("hf-fused-ckpt");
  ToyRun r = makeToyRun(shape, o);
  ASSERT_OK(r.status);
  TrainResult result;
  ASSERT_OK(r.trainer->start(result));
  // Stacked along dimension 0, bit for bit: q's 4 rows, k's 2, v's 2.
  EXPECT_EQ(r.backend->slotBytes("layers.0.attn.wqkv"),
            concat({weights[0], weights[1], weights[2]}));
  EXPECT_EQ(r.backend->slotBytes("w"), weights[3].data);
  EXPECT_EQ(r.backend->slotBytes("b"), weights[4].data);

  // A checkpoint holds the fused parameter as its HF tensors again.
  auto path = r.trainer->saveCheckpoint(0);
  ASSERT_TRUE(path.isOk()) << path.status().message();
  auto saved = checkpoint::loadTrainCheckpoint(*path);
  ASSERT_TRUE(saved.isOk()) << saved.status().message();
  EXPECT_EQ(named(saved->model, "layers.0.attn.wqkv"), nullptr);
  for (int i = 0; i < 5; ++i) {
    const hf::NamedTensor *t = named(saved->model, weights[i].name);
    ASSERT_NE(t, nullptr) << weights[i].name;
    EXPECT_EQ(t->dtype, weights[i].dtype) << t->name;
    EXPECT_EQ(t->shape, weights[i].shape) << t->name;
    EXPECT_EQ(t->data, weights[i].data) << t->name << " changed on the way";
  }
}

TEST(TrainerHf, ResumeRestoresTheFusedParameterFromItsHfTensors) {
  ToyShape shape = fusedShape();
  TrainerOptions o;
  o.checkpointDir = freshTestDir("hf-fused-resume");
  o.steps = 2;
  ToyRun a = makeToyRun(shape, o);
  ASSERT_OK(a.status);
  ASSERT_TRUE(a.trainer->run().isOk());
  std::vector<uint8_t> qkv = a.backend->slotBytes("layers.0.attn.wqkv");

  o.resume = true;
  o.steps = 2;
  ToyRun b = makeToyRun(shape, o);
  ASSERT_OK(b.status);
  TrainResult result;
  ASSERT_OK(b.trainer->start(result));
  EXPECT_EQ(result.startStep, 2);
  EXPECT_EQ(b.backend->slotBytes("layers.0.attn.wqkv"), qkv);
}

// Makes the toy exportable to HF: the bias under an HF name (the norm's)
// and a config.
void nameBiasForExport(bundle::Bundle &b) {
  for (bundle::Parameter &p : *b.mutable_parameters())
    if (p.name() == "b") {
      bundle::HfPiece *piece = p.add_hf_pieces();
      piece->set_tensor("model.norm.weight");
      piece->set_rows(1);
    }
  b.mutable_build()->set_hf_config("{\"model_type\": \"llama\"}");
}

TEST(TrainerHf, SaveHfWritesHfNamesAndTheConfig) {
  ToyShape shape = fusedShape();
  std::vector<hf::NamedTensor> weights = toyWeights(shape);
  weights[4].name = "model.norm.weight";
  std::string dir = writeSharded("hf-save-in", weights);
  TrainerOptions o;
  o.initWeights = dir;
  o.saveHf = freshTestDir("hf-save-out");
  o.steps = 1;
  ToyRun r = makeToyRun(shape, o, nameBiasForExport);
  ASSERT_OK(r.status);
  ASSERT_TRUE(r.trainer->run().isOk());
  auto reader = hf::CheckpointReader::open(o.saveHf);
  ASSERT_TRUE(reader.isOk()) << reader.status().message();
  std::vector<std::string> names = reader->tensorNames();
  EXPECT_EQ(names, (std::vector<std::string>{
                       "model.embed_tokens.weight", kK, kQ, kV,
                       "model.norm.weight"}));
  // The toy's optimizer leaves the fused weight alone: it comes out as it
  // went in.
  for (int i = 0; i < 3; ++i) {
    auto bytes = reader->readTensor(weights[i].name);
    ASSERT_TRUE(bytes.isOk());
    EXPECT_EQ(*bytes, weights[i].data) << weights[i].name;
  }
  // The bundle's config, since none lies beside --init-from; the weights
  // mix F32 and BF16, so it names no dtype.
  auto config = readWholeFile(o.saveHf + "/config.json");
  ASSERT_TRUE(config.isOk());
  EXPECT_EQ(*config, "{\"model_type\": \"llama\"}");

  // With a config.json beside the weights, that one, naming their dtype.
  ASSERT_OK(writeFileAtomically(dir + "/config.json",
                                "{\"model_type\": \"llama\", "
                                "\"torch_dtype\": \"bfloat16\"}"));
  ToyShape f32 = shape;
  f32.fusedDType = bundle::F32;
  o.saveHf = freshTestDir("hf-save-out-f32");
  ToyRun s = makeToyRun(f32, o, nameBiasForExport);
  ASSERT_OK(s.status);
  ASSERT_TRUE(s.trainer->run().isOk());
  config = readWholeFile(o.saveHf + "/config.json");
  ASSERT_TRUE(config.isOk());
  EXPECT_NE(config->find("\"torch_dtype\": \"float32\""), std::string::npos)
      << *config;
}

// ZeRO-1 with the fused parameter's master sharded over two ranks
// (Parameter.data_shards): each rank's slot takes its rows of the HF
// tensors (rank 0 q_proj's 4, rank 1 k_proj's and v_proj's 2 each), and
// --save-hf joins the ranks' parts, so the export holds the whole tensors.
TEST(TrainerHf, AShardedMasterLoadsItsPartAndSavesWhole) {
  ToyShape shape = fusedShape();
  shape.qkvShards = 2;
  shape.accum = 1;
  std::vector<hf::NamedTensor> weights = toyWeights(shape);
  weights[4].name = "model.norm.weight";
  std::string dir = writeSharded("hf-sharded-in", weights);
  auto nameBias = [](bundle::Bundle &b) {
    nameBiasForExport(b);
    b.set_world_size(2);
  };
  TrainerOptions o;
  o.initWeights = dir;
  o.saveHf = freshTestDir("hf-sharded-out");
  o.steps = 1;
  DataParallelRuns d = runDataParallel(2, shape, o, nameBias);
  std::vector<uint8_t> whole = concat({weights[0], weights[1], weights[2]});
  size_t half = whole.size() / 2;
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(d.runs[size_t(r)].status);
    ASSERT_TRUE(d.results[size_t(r)].isOk())
        << d.results[size_t(r)].status().message();
    EXPECT_EQ(d.runs[size_t(r)].backend->slotBytes("layers.0.attn.wqkv"),
              std::vector<uint8_t>(whole.begin() + ptrdiff_t(half * size_t(r)),
                                   whole.begin() +
                                       ptrdiff_t(half * size_t(r + 1))))
        << "rank " << r;
  }
  auto reader = hf::CheckpointReader::open(o.saveHf);
  ASSERT_TRUE(reader.isOk()) << reader.status().message();
  for (int i = 0; i < 3; ++i) {
    auto bytes = reader->readTensor(weights[i].name);
    ASSERT_TRUE(bytes.isOk()) << weights[i].name;
    EXPECT_EQ(*bytes, weights[i].data) << weights[i].name;
  }
}

// Without --init-from, a sharded master's initial values are the whole
// parameter's draw (the same on every layout), each rank keeping its part.
TEST(TrainerHf, AShardedMasterStartsFromItsPartOfTheWholeDraw) {
  ToyShape shape = fusedShape();
  shape.qkvShards = 2;
  shape.accum = 1;
  shape.steps = 1;
  TrainerOptions o;
  DataParallelRuns d = runDataParallel(
      2, shape, o, [](bundle::Bundle &b) { b.set_world_size(2); });
  ASSERT_OK(d.runs[0].status);
  const bundle::Bundle &b = d.runs[0].backend->bundle();
  const bundle::Parameter *qkv = nullptr;
  for (const bundle::Parameter &p : b.parameters())
    if (p.name() == "layers.0.attn.wqkv")
      qkv = &p;
  ASSERT_NE(qkv, nullptr);
  auto whole = bundle::initialBytes(qkv->init(), qkv->dtype(),
                                    uint64_t(kToyQkvRows * kToyQkvCols),
                                    qkv->name());
  ASSERT_TRUE(whole.isOk()) << whole.status().message();
  size_t half = whole->size() / 2;
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(d.results[size_t(r)].isOk())
        << d.results[size_t(r)].status().message();
    std::vector<uint8_t> mine = d.runs[size_t(r)].backend->slotBytes(
        "layers.0.attn.wqkv");
    EXPECT_EQ(std::string(mine.begin(), mine.end()),
              whole->substr(half * size_t(r), half))
        << "rank " << r;
  }
}

TEST(TrainerHf, SaveHfIsRefusedBeforeTrainingWhenItCannotBeLoaded) {
  TrainerOptions o;
  o.saveHf = freshTestDir("hf-save-refused");
  // The toy bundle has no HF config.
  ToyRun r = makeToyRun(fusedShape(), o);
  ASSERT_FALSE(r.status.isOk());
  EXPECT_NE(r.status.message().find("holds no HF config.json"),
            std::string::npos)
      << r.status.message();
  // Its bias has no HF name.
  ToyRun s = makeToyRun(fusedShape(), o, [](bundle::Bundle &b) {
    b.mutable_build()->set_hf_config("{}");
  });
  ASSERT_FALSE(s.status.isOk());
  EXPECT_NE(s.status.message().find("parameter 'b' has no HF name"),
            std::string::npos)
      << s.status.message();
}

// Starts a run from `weights` and returns the error it stops with.
std::string initError(const std::string &name,
                      const std::vector<hf::NamedTensor> &weights) {
  TrainerOptions o;
  o.initWeights = writeSharded(name, weights);
  ToyRun r = makeToyRun(fusedShape(), o);
  EXPECT_TRUE(r.status.isOk()) << r.status.message();
  if (!r.status.isOk())
    return r.status.message();
  TrainResult result;
  Status st = r.trainer->start(result);
  EXPECT_FALSE(st.isOk());
  return st.message();
}

TEST(TrainerHf, CheckpointsThatDoNotFitNameTheTensorAndTheFix) {
  ToyShape shape = fusedShape();
  std::vector<hf::NamedTensor> weights = toyWeights(shape);

  std::vector<hf::NamedTensor> noK = weights;
  noK.erase(noK.begin() + 1);
  std::string missing = initError("hf-missing", noK);
  EXPECT_NE(missing.find("lacks 1 tensor the model needs: \"" +
                         std::string(kK) +
                         "\" (parameter \"layers.0.attn.wqkv\")"),
            std::string::npos)
      << missing;
  EXPECT_NE(missing.find("describe different models"), std::string::npos);

  std::vector<hf::NamedTensor> wideK = weights;
  wideK[1] = bf16Tensor(kK, 3, 2.0f);
  std::string shapeError = initError("hf-shape", wideK);
  EXPECT_NE(shapeError.find("tensor \"" + std::string(kK) +
                            "\" has shape [3, 3], but parameter "
                            "\"layers.0.attn.wqkv\" needs [2, 3]"),
            std::string::npos)
      << shapeError;
  EXPECT_NE(shapeError.find(".safetensors"), std::string::npos)
      << "the message names the file: " << shapeError;

  std::vector<hf::NamedTensor> extra = weights;
  extra.push_back(bf16Tensor("model.layers.9.mlp.up_proj.weight", 1, 0.0f));
  std::string extraError = initError("hf-extra", extra);
  EXPECT_NE(extraError.find("holds tensor \"model.layers.9.mlp.up_proj."
                            "weight\" [1, 3], which no parameter of the "
                            "model takes"),
            std::string::npos)
      << extraError;

  std::vector<hf::NamedTensor> noBias = weights;
  noBias.pop_back();
  std::string biasError = initError("hf-nobias", noBias);
  EXPECT_NE(biasError.find("has no tensor 'b' (the parameter has no HF name "
                           "in this bundle)"),
            std::string::npos)
      << biasError;
}

TEST(TrainerHf, AConfigBesideTheWeightsMustBeTheBundlesModel) {
  ToyShape shape = fusedShape();
  std::string dir = writeSharded("hf-config", toyWeights(shape));
  // transformers 5 spells the rotary theta under rope_parameters.
  ASSERT_OK(writeFileAtomically(
      dir + "/config.json",
      "{\"model_type\": \"llama\", \"rms_norm_eps\": 1e-05, "
      "\"rope_parameters\": {\"rope_theta\": 10000.0}}"));
  auto withConfig = [](const std::string &config) {
    return [config](bundle::Bundle &b) {
      b.mutable_build()->set_hf_config(config);
    };
  };
  TrainerOptions o;
  o.initWeights = dir;
  ToyRun same = makeToyRun(
      shape, o,
      withConfig("{\"model_type\": \"llama\", \"rms_norm_eps\": 1e-5, "
                 "\"rope_theta\": 10000, \"head_dim\": 64}"));
  ASSERT_OK(same.status);
  TrainResult result;
  ASSERT_OK(same.trainer->start(result));

  ToyRun other = makeToyRun(
      shape, o,
      withConfig("{\"model_type\": \"llama\", \"rope_theta\": 500000}"));
  ASSERT_OK(other.status);
  Status st = other.trainer->start(result);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find(dir + "/config.json gives rope_theta 10000.0, "
                              "but the bundle (its spec's HF config) says "
                              "500000"),
            std::string::npos)
      << st.message();
}

TEST(TrainerHf, OctetNamedWeightsStillLoad) {
  // A safetensors file of octet's names (the fused parameter whole).
  ToyShape shape = fusedShape();
  std::vector<hf::NamedTensor> weights = toyWeights(shape);
  hf::NamedTensor fused{"layers.0.attn.wqkv",
                        DType::BF16,
                        {kToyQkvRows, kToyQkvCols},
                        concat({weights[0], weights[1], weights[2]})};
  std::string dir = writeSharded(
      "hf-octet-names", {fused, weights[3], f32Tensor("b", {0.25f})});
  TrainerOptions o;
  o.initWeights = dir;
  ToyRun r = makeToyRun(shape, o);
  ASSERT_OK(r.status);
  TrainResult result;
  ASSERT_OK(r.trainer->start(result));
  EXPECT_EQ(r.backend->slotBytes("layers.0.attn.wqkv"), fused.data);
}

} // namespace
} // namespace octet::test
