// Hugging Face checkpoints in and out: the logits after loading match
// transformers' (tests/fixtures/hf_roundtrip, made by
// tests/fixtures/make_hf_roundtrip_golden.py), the export equals the input
// bit for bit, and bad checkpoints fail with errors that name the tensor and
// the file.

#include "compiler/Checkpoint/HfCheckpoint.h"
#include "support/Numerics.h"
#include "compiler/Transforms/Fusion/Passes.h"
#include "dialects/graph/GraphDialect.h"
#include "hf/HfConfig.h"
#include "frontends/GraphImporter.h"
#include "spec/SpecReader.h"
#include "hf/HfWeights.h"
#include "support/AtomicFile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

using namespace octet;
using hf::CheckpointReader;
using hf::checkSameModel;
using hf::hfConfigJson;
using hf::HfExportOptions;
using hf::HfLoadSummary;
using hf::NamedTensor;

namespace {

const std::string kFixtures =
    std::string(OCTET_SOURCE_DIR) + "/tests/fixtures/hf_roundtrip/";

std::string tempDir(const std::string &tag) {
  std::string pattern = ::testing::TempDir() + "octet-hf-" + tag + "-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  EXPECT_NE(mkdtemp(buf.data()), nullptr);
  return buf.data();
}

// A model of `config` (a HF config.json) and its forward graph, for batches
// of [batch, seq] tokens.
struct Model {
  std::unique_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  spec::Spec spec;
};

Model importModel(const std::string &config, int64_t batch, int64_t seq) {
  Model m;
  StatusOr<spec::ModelSpec> model = hf::readHfConfigFile(config);
  EXPECT_TRUE(model) << model.status().message();
  spec::Spec s;
  *s.mutable_model() = *model;
  s.mutable_train()->set_micro_batch_size(batch);
  s.mutable_train()->set_seq_len(seq);
  StatusOr<spec::Spec> resolved = spec::resolveSpec(s);
  EXPECT_TRUE(resolved) << resolved.status().message();
  m.spec = *resolved;
  mlir::DialectRegistry registry;
  registerImportDialects(registry);
  m.context = std::make_unique<mlir::MLIRContext>(registry);
  auto module = importForwardGraph(*m.context, m.spec);
  EXPECT_TRUE(module) << module.status().message();
  m.module = std::move(*module);
  return m;
}

// Golden tensors as interpreter tensors (F32 and I32 only).
std::map<std::string, interp::Tensor> readGolden() {
  std::map<std::string, interp::Tensor> out;
  auto reader = CheckpointReader::open(kFixtures + "golden.safetensors");
  EXPECT_TRUE(reader) << reader.status().message()
                      << "; regenerate with "
                         "tests/fixtures/make_hf_roundtrip_golden.py";
  if (!reader)
    return out;
  for (const std::string &name : reader->tensorNames()) {
    const hf::TensorInfo *info = reader->find(name);
    const uint8_t *data = reader->tensorData(name);
    size_t n = info->elementCount();
    if (info->dtype == DType::F32) {
      std::vector<float> values(n);
      std::memcpy(values.data(), data, 4 * n);
      out[name] = interp::Tensor::fromFloats(info->shape, std::move(values));
    } else {
      std::vector<int32_t> raw(n);
      std::memcpy(raw.data(), data, 4 * n);
      out[name] = interp::Tensor::fromInts(
          info->shape, std::vector<int64_t>(raw.begin(), raw.end()));
    }
  }
  return out;
}

// Runs @forward and returns what reaches the cross-entropy: the logits.
interp::Tensor forwardLogits(mlir::ModuleOp module,
                             interp::VariableStore &store,
                             const interp::Tensor &ids,
                             const interp::Tensor &positions) {
  int64_t b = ids.dim(0), s = ids.dim(1);
  interp::Interpreter interpreter(module);
  interp::Tensor logits;
  interpreter.setOpObserver([&](mlir::Operation *op, interp::ExecContext &c) {
    if (llvm::isa<graph::CrossEntropyOp>(op))
      logits = c.operand(op, 0);
  });
  auto result = interpreter.run(
      "forward",
      {ids, interp::Tensor::fromInts({b, s}, std::vector<int64_t>(b * s, 0)),
       interp::Tensor::fromFloats({b, s}, std::vector<float>(b * s, 1.0f)),
       positions},
      store);
  EXPECT_TRUE(bool(result)) << llvm::toString(result.takeError());
  return logits;
}

// Every tensor of `b` equals the one of the same name in `a`, byte for
// byte, and neither has one the other lacks.
void expectSameTensors(const std::string &a, const std::string &b) {
  auto ra = CheckpointReader::open(a), rb = CheckpointReader::open(b);
  ASSERT_TRUE(ra) << ra.status().message();
  ASSERT_TRUE(rb) << rb.status().message();
  ASSERT_EQ(ra->tensorNames(), rb->tensorNames());
  for (const std::string &name : ra->tensorNames()) {
    const auto *ta = ra->find(name), *tb = rb->find(name);
    EXPECT_EQ(ta->dtype, tb->dtype) << name;
    EXPECT_EQ(ta->shape, tb->shape) << name;
    ASSERT_EQ(ta->end - ta->begin, tb->end - tb->begin) << name;
    EXPECT_EQ(std::memcmp(ra->tensorData(name), rb->tensorData(name),
                          ta->end - ta->begin),
              0)
        << name << " differs";
  }
}

// `fuseQkv`: run octet-fuse-qkv first, so that q/k/v and gate/up are one
// stacked variable each.
void checkVariant(const std::string &variant, size_t minFiles,
                  bool fuseQkv = false) {
  SCOPED_TRACE(variant + (fuseQkv ? " (fused QKV)" : ""));
  std::map<std::string, interp::Tensor> golden = readGolden();
  ASSERT_TRUE(golden.count("logits_" + variant));
  const interp::Tensor &ids = golden.at("input_ids");
  const interp::Tensor &expected = golden.at("logits_" + variant);
  std::string dir = kFixtures + variant;
  size_t files = 0;
  for (const auto &entry : std::filesystem::directory_iterator(dir))
    files += entry.path().extension() == ".safetensors";
  EXPECT_GE(files, minFiles) << dir;

  Model m = importModel(dir + "/config.json", ids.dim(0), ids.dim(1));
  if (fuseQkv) {
    mlir::PassManager pm(m.context.get());
    pm.addPass(createOctetFuseQkv());
    ASSERT_TRUE(mlir::succeeded(pm.run(*m.module)));
    size_t fused = 0;
    for (auto var : m.module->getOps<graph::VariableOp>())
      fused += var->hasAttr("hf_names");
    EXPECT_EQ(fused, 4u); // wqkv and w_gate_up of both layers
  }
  interp::VariableStore store;
  StatusOr<HfLoadSummary> loaded = loadHfCheckpoint(dir, *m.module, store);
  ASSERT_TRUE(loaded) << loaded.status().message();
  size_t trainable = 0;
  for (auto var : m.module->getOps<graph::VariableOp>())
    trainable += var.isTrainable();
  EXPECT_EQ(loaded->parameters, trainable);

  interp::Tensor logits =
      forwardLogits(*m.module, store, ids, golden.at("position_ids"));
  ASSERT_TRUE(logits.valid());
  ASSERT_EQ(logits.shape(), expected.shape());
  double diff = 0, norm = 0, worst = 0;
  for (int64_t i = 0; i < expected.numel(); ++i) {
    double d = double(logits.f()[i]) - expected.f()[i];
    diff += d * d;
    norm += double(expected.f()[i]) * expected.f()[i];
    worst = std::max(worst, std::fabs(d));
  }
  double relative = std::sqrt(diff / norm);
  EXPECT_LE(relative, 1e-4);
  std::printf("%s%s: logits relative error %.2e (max abs %.2e) vs "
              "transformers\n",
              variant.c_str(), fuseQkv ? " (fused QKV)" : "", relative, worst);

  // Out again, in the dtypes the tensors came in: the same bits. Small
  // shards so that the index path is taken too.
  std::string out = tempDir(variant);
  HfExportOptions options;
  options.dtypes = loaded->dtypes;
  options.maxShardBytes = 100000;
  StatusOr<size_t> written = exportHfCheckpoint(out, *m.module, store, options);
  ASSERT_TRUE(written) << written.status().message();
  EXPECT_EQ(*written, loaded->tensors);
  EXPECT_TRUE(std::filesystem::exists(out + "/model.safetensors.index.json"));
  expectSameTensors(dir, out);
  std::filesystem::remove_all(out);
}

TEST(HfRoundTrip, UntiedShardedLogitsMatchTransformersAndExportIsBitExact) {
  checkVariant("untied", 2);
}

TEST(HfRoundTrip, TiedLogitsMatchTransformersAndExportIsBitExact) {
  checkVariant("tied", 1);
}

TEST(HfRoundTrip, FusedQkvGraphLoadsMatchesTransformersAndExportsBitExact) {
  checkVariant("untied", 2, /*fuseQkv=*/true);
}

//===--------------------------------------------------------------------===//
// Dtypes
//===--------------------------------------------------------------------===//

// Re-encodes a checkpoint with every float tensor in `dtype`.
void writeConverted(
    const std::string &from, const std::string &to, DType dtype,
    const std::vector<std::string> &drop = {},
    const std::map<std::string, std::vector<int64_t>> &reshape = {}) {
  auto reader = CheckpointReader::open(from);
  ASSERT_TRUE(reader) << reader.status().message();
  std::vector<NamedTensor> tensors;
  for (const std::string &name : reader->tensorNames()) {
    if (std::find(drop.begin(), drop.end(), name) != drop.end())
      continue;
    const hf::TensorInfo *info = reader->find(name);
    NamedTensor t{name, dtype, info->shape, {}};
    const float *values =
        reinterpret_cast<const float *>(reader->tensorData(name));
    size_t n = info->elementCount();
    if (reshape.count(name)) {
      t.shape = reshape.at(name);
      n = 1;
      for (int64_t d : t.shape)
        n *= d;
    }
    for (size_t i = 0; i < n; ++i) {
      float v = values[i % info->elementCount()];
      if (dtype == DType::F32) {
        uint8_t bytes[4];
        std::memcpy(bytes, &v, 4);
        t.data.insert(t.data.end(), bytes, bytes + 4);
        continue;
      }
      uint16_t bits = dtype == DType::BF16 ? numerics::encodeBF16(v)
                                           : numerics::encodeF16(v);
      t.data.push_back(uint8_t(bits));
      t.data.push_back(uint8_t(bits >> 8));
    }
    tensors.push_back(std::move(t));
  }
  std::filesystem::create_directories(to);
  ASSERT_TRUE(hf::writeCheckpoint(to, tensors));
  std::filesystem::copy_file(kFixtures + "tied/config.json",
                             to + "/config.json",
                             std::filesystem::copy_options::overwrite_existing);
}

TEST(HfRoundTrip, Bf16AndF16AreWidenedExactlyAndExportedBitExact) {
  for (DType dtype : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtypeName(dtype));
    std::string in = tempDir("half"), out = tempDir("half-out");
    writeConverted(kFixtures + "tied", in, dtype);
    Model m = importModel(in + "/config.json", 1, 4);
    interp::VariableStore store;
    StatusOr<HfLoadSummary> loaded = loadHfCheckpoint(in, *m.module, store);
    ASSERT_TRUE(loaded) << loaded.status().message();
    for (const auto &[name, d] : loaded->dtypes)
      EXPECT_EQ(d, dtype) << name;
    // The widened values are the half-precision ones, exactly.
    auto reader = CheckpointReader::open(in);
    const interp::Tensor &embed = store.get("embed");
    const uint8_t *raw = reader->tensorData("model.embed_tokens.weight");
    for (int64_t i = 0; i < embed.numel(); ++i) {
      uint16_t bits = uint16_t(raw[2 * i] | raw[2 * i + 1] << 8);
      float v = dtype == DType::BF16 ? numerics::decodeBF16(bits)
                                     : numerics::decodeF16(bits);
      ASSERT_EQ(embed.f()[i], v) << i;
    }
    HfExportOptions options;
    options.dtypes = loaded->dtypes;
    ASSERT_TRUE(exportHfCheckpoint(out, *m.module, store, options));
    expectSameTensors(in, out);
    std::filesystem::remove_all(in);
    std::filesystem::remove_all(out);
  }
}

TEST(HfRoundTrip, ExportInBf16SaysSoInItsConfig) {
  Model m = importModel(kFixtures + "tied/config.json", 1, 4);
  interp::VariableStore store;
  ASSERT_TRUE(loadHfCheckpoint(kFixtures + "tied", *m.module, store));
  auto config = readWholeFile(kFixtures + "tied/config.json");
  ASSERT_TRUE(config);
  HfExportOptions options;
  options.defaultDType = DType::BF16;
  options.configJson = *config;
  std::string out = tempDir("bf16-config");
  ASSERT_TRUE(exportHfCheckpoint(out, *m.module, store, options));
  auto written = readWholeFile(out + "/config.json");
  ASSERT_TRUE(written);
  EXPECT_NE(written->find("\"dtype\": \"bfloat16\""), std::string::npos)
      << *written;
  auto reader = CheckpointReader::open(out);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->find("model.norm.weight")->dtype, DType::BF16);
  // Kept in float32, the config is copied unchanged.
  options.defaultDType = DType::F32;
  ASSERT_TRUE(exportHfCheckpoint(out, *m.module, store, options));
  EXPECT_EQ(*readWholeFile(out + "/config.json"), *config);
  std::filesystem::remove_all(out);
}

//===--------------------------------------------------------------------===//
// Layouts: a fused QKV variable, GPT-2's transposed and chunked c_attn
//===--------------------------------------------------------------------===//

TEST(HfRoundTrip, FusedQkvVariableStacksTheHfTensorsAndSplitsThemBack) {
  // What octet-fuse-qkv leaves: one variable, its parts' HF names and rows.
  const char *ir = R"mlir(
    graph.variable @layers.0.attn.wqkv : tensor<8x4xf32> {kind = "weight",
        init = "normal", init_std = 0.02 : f64,
        fused_from = ["layers.0.attn.wq", "layers.0.attn.wk", "layers.0.attn.wv"],
        split = array<i64: 4, 2, 2>,
        hf_names = ["model.layers.0.self_attn.q_proj.weight",
                    "model.layers.0.self_attn.k_proj.weight",
                    "model.layers.0.self_attn.v_proj.weight"]}
    graph.variable @step : tensor<i64> {kind = "state", init = "zeros"}
  )mlir";
  mlir::DialectRegistry registry;
  registerImportDialects(registry);
  mlir::MLIRContext context(registry);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(ir, &context);
  ASSERT_TRUE(module);
  std::string dir = tempDir("qkv"), out = tempDir("qkv-out");
  std::vector<NamedTensor> tensors;
  auto make = [&](const std::string &name, int64_t rows, float base) {
    NamedTensor t{name, DType::F32, {rows, 4}, {}};
    for (int64_t i = 0; i < rows * 4; ++i) {
      float v = base + float(i);
      const uint8_t *p = reinterpret_cast<const uint8_t *>(&v);
      t.data.insert(t.data.end(), p, p + 4);
    }
    tensors.push_back(t);
  };
  make("model.layers.0.self_attn.q_proj.weight", 4, 100);
  make("model.layers.0.self_attn.k_proj.weight", 2, 200);
  make("model.layers.0.self_attn.v_proj.weight", 2, 300);
  ASSERT_TRUE(hf::writeCheckpoint(dir, tensors));

  interp::VariableStore store;
  StatusOr<HfLoadSummary> loaded = loadHfCheckpoint(dir, *module, store);
  ASSERT_TRUE(loaded) << loaded.status().message();
  const interp::Tensor &w = store.get("layers.0.attn.wqkv");
  EXPECT_EQ(w.f()[0], 100.0f);  // q row 0
  EXPECT_EQ(w.f()[15], 115.0f); // q row 3
  EXPECT_EQ(w.f()[16], 200.0f); // k row 0
  EXPECT_EQ(w.f()[24], 300.0f); // v row 0
  EXPECT_EQ(w.f()[31], 307.0f);
  ASSERT_TRUE(exportHfCheckpoint(out, *module, store, {}));
  expectSameTensors(dir, out);
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(out);
}

TEST(HfRoundTrip, TransposedChunksOfOneTensorRoundTrip) {
  // GPT-2: c_attn.weight is [in, 3 * out]; q, k, v are its transposed thirds.
  std::vector<hf::HfParameterLayout> layouts;
  for (int64_t i = 0; i < 3; ++i) {
    auto layout = hf::singleTensorLayout("w" + std::to_string(i), {2, 3},
                                         "h.0.attn.c_attn.weight");
    layout.pieces[0].transpose = true;
    layout.pieces[0].hfRow = 2 * i;
    layout.hfRows["h.0.attn.c_attn.weight"] = 6;
    layouts.push_back(layout);
  }
  std::map<std::string, std::vector<float>> params;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 6; ++j)
      params["w" + std::to_string(i)].push_back(float(10 * i + j));
  auto tensors = hf::exportHfTensors(params, layouts, {});
  ASSERT_TRUE(tensors) << tensors.status().message();
  ASSERT_EQ(tensors->size(), 1u);
  EXPECT_EQ((*tensors)[0].shape, (std::vector<int64_t>{3, 6}));
  // Element [c, r] of the HF tensor is row r, column c of the stacked parts.
  float first;
  std::memcpy(&first, (*tensors)[0].data.data() + 4 * 2, 4); // [0, 2]
  EXPECT_EQ(first, 10.0f);                                   // w1[0, 0]

  std::string dir = tempDir("gpt2");
  ASSERT_TRUE(hf::writeCheckpoint(dir, *tensors));
  auto reader = CheckpointReader::open(dir);
  ASSERT_TRUE(reader);
  auto loaded = hf::loadHfWeights(*reader, layouts, dir);
  ASSERT_TRUE(loaded) << loaded.status().message();
  EXPECT_EQ(loaded->parameters, params);
  std::filesystem::remove_all(dir);
}

//===--------------------------------------------------------------------===//
// Bad input
//===--------------------------------------------------------------------===//

// Loads `dir` into the tied fixture model; the error message, or "" when it
// loaded.
std::string loadError(const std::string &dir) {
  Model m = importModel(kFixtures + "tied/config.json", 1, 4);
  interp::VariableStore store;
  StatusOr<HfLoadSummary> loaded = loadHfCheckpoint(dir, *m.module, store);
  EXPECT_TRUE(store.all().empty()) << "a failed load changed the store";
  return loaded ? "" : loaded.status().message();
}

TEST(HfRoundTripErrors, MissingTensorIsNamedWithTheCheckpoint) {
  std::string dir = tempDir("missing");
  writeConverted(kFixtures + "tied", dir, DType::F32,
                 {"model.layers.1.mlp.up_proj.weight"});
  std::string error = loadError(dir);
  EXPECT_NE(error.find("\"model.layers.1.mlp.up_proj.weight\""),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("layers.1.mlp.w_up"), std::string::npos) << error;
  EXPECT_NE(error.find(dir), std::string::npos) << error;
  std::filesystem::remove_all(dir);
}

TEST(HfRoundTripErrors, ShapeMismatchNamesTensorFileAndBothShapes) {
  std::string dir = tempDir("shape");
  writeConverted(kFixtures + "tied", dir, DType::F32, {},
                 {{"model.layers.0.self_attn.k_proj.weight", {64, 64}}});
  std::string error = loadError(dir);
  EXPECT_NE(error.find("model.layers.0.self_attn.k_proj.weight"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find(dir + "/model.safetensors"), std::string::npos) << error;
  EXPECT_NE(error.find("[64, 64]"), std::string::npos) << error;
  EXPECT_NE(error.find("[32, 64]"), std::string::npos) << error;
  std::filesystem::remove_all(dir);
}

TEST(HfRoundTripErrors, ExtraTensorAndUnsupportedDtypeAreNamed) {
  std::string dir = tempDir("extra");
  writeConverted(kFixtures + "untied", dir, DType::F32);
  // The untied checkpoint's lm_head differs from its embedding: loading it
  // into a tied model must not drop it silently.
  std::string error = loadError(dir);
  EXPECT_NE(error.find("\"lm_head.weight\""), std::string::npos) << error;
  EXPECT_NE(error.find("tie_word_embeddings"), std::string::npos) << error;
  std::filesystem::remove_all(dir);

  std::vector<NamedTensor> tensors = {
      {"model.norm.weight", DType::I32, {64}, std::vector<uint8_t>(256, 0)}};
  dir = tempDir("dtype");
  ASSERT_TRUE(hf::writeCheckpoint(dir, tensors));
  std::vector<hf::HfParameterLayout> layouts = {
      hf::singleTensorLayout("final_norm", {64}, "model.norm.weight")};
  auto reader = CheckpointReader::open(dir);
  auto loaded = hf::loadHfWeights(*reader, layouts, dir);
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.status().message().find("\"model.norm.weight\" is I32"),
            std::string::npos)
      << loaded.status().message();
  EXPECT_NE(loaded.status().message().find(dir + "/model.safetensors"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(HfRoundTrip, TiedCheckpointWithACopiedLmHeadLoads) {
  // Some tied checkpoints store lm_head.weight anyway, as a copy of the
  // embedding: nothing is lost by leaving it out.
  auto reader = CheckpointReader::open(kFixtures + "tied");
  ASSERT_TRUE(reader);
  std::vector<NamedTensor> tensors;
  for (const std::string &name : reader->tensorNames()) {
    const hf::TensorInfo *info = reader->find(name);
    const uint8_t *data = reader->tensorData(name);
    tensors.push_back(
        {name, info->dtype, info->shape,
         std::vector<uint8_t>(data, data + info->end - info->begin)});
    if (name == "model.embed_tokens.weight") {
      tensors.push_back(tensors.back());
      tensors.back().name = "lm_head.weight";
    }
  }
  std::string dir = tempDir("tied-copy");
  ASSERT_TRUE(hf::writeCheckpoint(dir, tensors));
  Model m = importModel(kFixtures + "tied/config.json", 1, 4);
  interp::VariableStore store;
  StatusOr<HfLoadSummary> loaded = loadHfCheckpoint(dir, *m.module, store);
  ASSERT_TRUE(loaded) << loaded.status().message();
  ASSERT_EQ(loaded->skipped.count("lm_head.weight"), 1u);
  EXPECT_FALSE(store.has("lm_head"));
  std::filesystem::remove_all(dir);
}

TEST(HfRoundTripErrors, ConfigThatDisagreesWithTheSafetensors) {
  // config.json says ffn 96; the weights are ffn 128.
  std::string dir = tempDir("config");
  writeConverted(kFixtures + "tied", dir, DType::F32);
  auto text = readWholeFile(dir + "/config.json");
  ASSERT_TRUE(text);
  std::string config = *text;
  size_t at = config.find("\"intermediate_size\": 128");
  ASSERT_NE(at, std::string::npos) << config;
  config.replace(at, 24, "\"intermediate_size\": 96");
  ASSERT_TRUE(writeFileAtomically(dir + "/config.json", config));
  Model m = importModel(dir + "/config.json", 1, 4);
  interp::VariableStore store;
  StatusOr<HfLoadSummary> loaded = loadHfCheckpoint(dir, *m.module, store);
  ASSERT_FALSE(loaded);
  const std::string &error = loaded.status().message();
  EXPECT_NE(error.find("mlp.gate_proj.weight\" has shape [128, 64]"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("needs [96, 64]"), std::string::npos) << error;
  EXPECT_NE(error.find(dir + "/model.safetensors"), std::string::npos) << error;

  // A spec whose model differs from config.json in a field that leaves
  // every shape alone (rope_theta) is caught before any tensor is read.
  spec::ModelSpec other = m.spec.model();
  other.set_rope_theta(500000);
  Status same =
      checkSameModel(other, "spec.pbtxt", m.spec.model(), dir + "/config.json");
  ASSERT_FALSE(same);
  EXPECT_NE(same.message().find("rope_theta"), std::string::npos)
      << same.message();
  EXPECT_NE(same.message().find(dir + "/config.json"), std::string::npos);
  EXPECT_TRUE(checkSameModel(m.spec.model(), "a", m.spec.model(), "b"));
  std::filesystem::remove_all(dir);
}

TEST(HfRoundTrip, ConfigJsonFromASpecReadsBackAsTheSameModel) {
  Model m = importModel(kFixtures + "untied/config.json", 1, 4);
  StatusOr<std::string> json = hfConfigJson(m.spec.model());
  ASSERT_TRUE(json) << json.status().message();
  StatusOr<spec::ModelSpec> back = hf::importHfConfig(*json, "generated");
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_TRUE(checkSameModel(m.spec.model(), "spec", *back, "generated"));
}

TEST(HfLayout, OneRuleForSingleAndStackedTensors) {
  auto single =
      hf::parameterLayout("final_norm", {64}, {"model.norm.weight"}, {});
  ASSERT_TRUE(single) << single.status().message();
  ASSERT_EQ(single->pieces.size(), 1u);
  EXPECT_EQ(single->pieces[0].hfName, "model.norm.weight");
  EXPECT_EQ(single->pieces[0].rows, 64);

  auto fused = hf::parameterLayout(
      "layers.0.attn.wqkv", {96, 64},
      {"q_proj.weight", "k_proj.weight", "v_proj.weight"}, {64, 16, 16});
  ASSERT_TRUE(fused) << fused.status().message();
  ASSERT_EQ(fused->pieces.size(), 3u);
  EXPECT_EQ(fused->pieces[1].hfName, "k_proj.weight");
  EXPECT_EQ(fused->pieces[1].paramRow, 64);
  EXPECT_EQ(fused->pieces[2].paramRow, 80);
  EXPECT_EQ(fused->pieces[2].rows, 16);
  EXPECT_EQ(fused->pieces[2].hfRow, 0);
}

TEST(HfLayout, NamesWithoutRowsOrRowsThatDoNotAddUpAreErrors) {
  auto none = hf::parameterLayout("w", {4, 4}, {}, {});
  ASSERT_FALSE(none);
  EXPECT_NE(none.status().message().find("has no Hugging Face name"),
            std::string::npos)
      << none.status().message();
  auto noRows = hf::parameterLayout("wqkv", {8, 4}, {"q", "k"}, {});
  ASSERT_FALSE(noRows);
  EXPECT_NE(noRows.status().message().find("lists 2 HF tensors"),
            std::string::npos)
      << noRows.status().message();
  auto short_ = hf::parameterLayout("wqkv", {8, 4}, {"q", "k"}, {4, 2});
  ASSERT_FALSE(short_);
  EXPECT_NE(short_.status().message().find("has 8 rows"), std::string::npos)
      << short_.status().message();
}

} // namespace
