#include "runtime/blas/Gemm.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <tuple>

namespace octet::blas {
namespace {

std::optional<cudaDataType_t> cudaType(DType t) {
  switch (t) {
  case DType::F32:
    return CUDA_R_32F;
  case DType::BF16:
    return CUDA_R_16BF;
  case DType::F16:
    return CUDA_R_16F;
  case DType::F8E4M3FN:
    return CUDA_R_8F_E4M3;
  case DType::F8E5M2:
    return CUDA_R_8F_E5M2;
  default:
    return std::nullopt;
  }
}

cublasLtEpilogue_t cublasEpilogue(Epilogue e) {
  switch (e) {
  case Epilogue::None:
    return CUBLASLT_EPILOGUE_DEFAULT;
  case Epilogue::Bias:
    return CUBLASLT_EPILOGUE_BIAS;
  case Epilogue::Gelu:
    return CUBLASLT_EPILOGUE_GELU;
  case Epilogue::BiasGelu:
    return CUBLASLT_EPILOGUE_GELU_BIAS;
  case Epilogue::GeluAux:
    return CUBLASLT_EPILOGUE_GELU_AUX;
  case Epilogue::BiasGeluAux:
    return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  case Epilogue::BiasGrad:
    // Our A is cuBLASLt's B.
    return CUBLASLT_EPILOGUE_BGRADB;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool hasBias(Epilogue e) {
  return e == Epilogue::Bias || e == Epilogue::BiasGelu ||
         e == Epilogue::BiasGeluAux || e == Epilogue::BiasGrad;
}
bool hasAux(Epilogue e) {
  return e == Epilogue::GeluAux || e == Epilogue::BiasGeluAux;
}

template <typename T>
cublasStatus_t setAttr(cublasLtMatmulDesc_t d,
                       cublasLtMatmulDescAttributes_t attr, const T &value) {
  return cublasLtMatmulDescSetAttribute(d, attr, &value, sizeof(T));
}

cublasLtMatmulMatrixScale_t cublasScaleMode(ScaleMode mode) {
  switch (mode) {
  case ScaleMode::Tensorwise:
    return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  case ScaleMode::Vec128:
    return CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  case ScaleMode::Blk128x128:
    return CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  }
  return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
}

} // namespace

bool isGemmType(DType dtype) { return cudaType(dtype).has_value(); }

const char *scaleModeName(ScaleMode mode) {
  switch (mode) {
  case ScaleMode::Tensorwise:
    return "tensorwise";
  case ScaleMode::Vec128:
    return "vec128";
  case ScaleMode::Blk128x128:
    return "blk128x128";
  }
  return "?";
}

const char *epilogueName(Epilogue e) {
  switch (e) {
  case Epilogue::None:
    return "none";
  case Epilogue::Bias:
    return "bias";
  case Epilogue::Gelu:
    return "gelu";
  case Epilogue::BiasGelu:
    return "bias+gelu";
  case Epilogue::GeluAux:
    return "gelu-aux";
  case Epilogue::BiasGeluAux:
    return "bias+gelu-aux";
  case Epilogue::BiasGrad:
    return "bias-grad";
  }
  return "?";
}

std::string GemmDesc::key() const {
  std::string s;
  auto add = [&](int64_t v) { s += std::to_string(v) + ","; };
  add(m), add(n), add(k), add(int(a)), add(int(b)), add(int(d));
  add(transposeA), add(transposeB), add(packedLda()), add(packedLdb());
  add(packedLdd()), add(int(epilogue)), add(int(biasType)), add(int(auxType));
  add(auxLd), add(fastAccum), add(accumulate), add(aScale), add(bScale);
  add(dScale), add(amaxD), add(int64_t(workspaceBytes)), add(batch);
  add(strideA), add(strideB), add(strideD);
  add(int(aScaleMode)), add(int(bScaleMode));
  return s;
}

StatusOr<std::unique_ptr<BlasHandle>> BlasHandle::create() {
  std::unique_ptr<BlasHandle> h(new BlasHandle());
  OCTET_CHECK_CUBLAS(cublasLtCreate(&h->handle_));
  return h;
}

BlasHandle::~BlasHandle() {
  if (handle_)
    cublasLtDestroy(handle_);
}

Status Gemm::checkDesc() const {
  const GemmDesc &g = desc_;
  std::string at = "GEMM '" + g.name + "' (" + std::to_string(g.m) + "x" +
                   std::to_string(g.n) + "x" + std::to_string(g.k) + ")";
  if (g.m <= 0 || g.n <= 0 || g.k <= 0)
    return Status::error(at + " has an empty dimension");
  for (DType t : {g.a, g.b, g.d, g.biasType, g.auxType})
    if (!isGemmType(t))
      return Status::error(at + " has an operand of type " + dtypeName(t) +
                           ", which cuBLASLt does not multiply: use f32, "
                           "bf16, f16, e4m3 or e5m2");
  bool fp8 = isFp8(g.a) || isFp8(g.b);
  if (fp8) {
    if (!isFp8(g.a) || !isFp8(g.b))
      return Status::error(at + " mixes an FP8 operand (" + dtypeName(g.a) +
                           " x " + dtypeName(g.b) +
                           ") with a wider one: quantize both");
    if (g.a == DType::F8E5M2 && g.b == DType::F8E5M2)
      return Status::error(at + " multiplies E5M2 by E5M2, which Hopper "
                                "does not: keep one operand E4M3");
    if (g.transposeA || !g.transposeB)
      return Status::error(
          at + " is FP8 but not K-major: Hopper FP8 GEMMs need A stored "
               "[M, K] and B stored [N, K] (transpose_a = false, transpose_b "
               "= true); insert a transposed copy of the operand");
    if (g.k % 16 || g.packedLda() % 16 || g.packedLdb() % 16)
      return Status::error(at + " is FP8 with K or a leading dimension not "
                                "a multiple of 16, which cuBLASLt requires");
  }
  if (g.blockScaled()) {
    // cuBLASLt's block-scaled FP8 path on sm_90 (cuBLASLt >= 12.9): K-major
    // operands (checked above), 1x128 tiles or 128x128 blocks along K, not
    // both operands in blocks, both scales given, no epilogue and no fast
    // accumulation (the partial sums are promoted to f32 at every K block
    // to be scaled there).
    if (!fp8)
      return Status::error(at + " has block scales but " +
                           dtypeName(g.a) + " operands: block scaling is "
                           "for FP8 operands only");
    if (g.aScaleMode == ScaleMode::Tensorwise ||
        g.bScaleMode == ScaleMode::Tensorwise || !g.aScale || !g.bScale)
      return Status::error(at + " mixes block and tensorwise scales (A " +
                           scaleModeName(g.aScaleMode) + ", B " +
                           scaleModeName(g.bScaleMode) +
                           "): cuBLASLt takes block scales for both "
                           "operands, each with its scale slot");
    if (g.aScaleMode == ScaleMode::Blk128x128 &&
        g.bScaleMode == ScaleMode::Blk128x128)
      return Status::error(at + " has 128x128 block scales for both "
                                "operands; cuBLASLt takes them for one");
    if (g.m % 128 || g.n % 128 || g.k % 128)
      return Status::error(at + " is block-scaled with a dimension that is "
                                "not a multiple of 128");
    if (g.epilogue != Epilogue::None || g.fastAccum || g.dScale || g.amaxD ||
        g.batch > 1)
      return Status::error(at + " is block-scaled with an epilogue, fast "
                                "accumulation, a D scale, amax-of-D or a "
                                "batch, which cuBLASLt's block-scaled path "
                                "does not take");
  }
  if (hasAux(g.epilogue) && g.auxLd % 8)
    return Status::error(at + " has aux_ld " + std::to_string(g.auxLd) +
                         ", not a multiple of 8 as cuBLASLt requires");
  if ((g.aScale || g.bScale) && !fp8)
    return Status::error(at + " has A/B scales but BF16 operands: scales "
                              "apply to FP8 products only");
  if (g.amaxD && !isFp8(g.d))
    return Status::error(at + " asks for amax of a " +
                         std::string(dtypeName(g.d)) +
                         " output: cuBLASLt computes amax-of-D only for FP8 "
                         "outputs; take the amax in the kernel that quantizes "
                         "this output instead");
  if (g.dScale && !isFp8(g.d))
    return Status::error(at + " has a D scale but a " +
                         std::string(dtypeName(g.d)) +
                         " output: D scales quantize FP8 outputs only");
  return Status::ok();
}

Status Gemm::build() {
  const GemmDesc &g = desc_;
  OCTET_CHECK_CUBLAS(
      cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t opA = g.transposeB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = g.transposeA ? CUBLAS_OP_T : CUBLAS_OP_N;
  OCTET_CHECK_CUBLAS(setAttr(op_, CUBLASLT_MATMUL_DESC_TRANSA, opA));
  OCTET_CHECK_CUBLAS(setAttr(op_, CUBLASLT_MATMUL_DESC_TRANSB, opB));
  if (isFp8(g.a)) {
    int8_t fast = g.fastAccum ? 1 : 0;
    OCTET_CHECK_CUBLAS(setAttr(op_, CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast));
  }
  if (g.blockScaled()) {
    // Our A is cuBLASLt's B and ours B its A (see Gemm.h), and so are the
    // scale modes. In cuBLASLt's column-major terms our operand stored
    // [R, K] row-major is a K x R matrix whose inner dimension is K: VEC128
    // scales one 128-element run of that inner dimension, BLK128x128 one
    // 128x128 block, as the header (cublasLtMatmulMatrixScale_t) says.
    int32_t aMode = cublasScaleMode(g.bScaleMode);
    int32_t bMode = cublasScaleMode(g.aScaleMode);
    OCTET_CHECK_CUBLAS(setAttr(op_, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, aMode));
    OCTET_CHECK_CUBLAS(setAttr(op_, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, bMode));
  }
  OCTET_CHECK_CUBLAS(
      setAttr(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, cublasEpilogue(g.epilogue)));
  if (hasBias(g.epilogue)) {
    cudaDataType_t bt = *cudaType(g.biasType);
    OCTET_CHECK_CUBLAS(setAttr(op_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bt));
  }
  if (hasAux(g.epilogue)) {
    int64_t ld = g.auxLd ? g.auxLd : g.n;
    OCTET_CHECK_CUBLAS(setAttr(op_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ld));
    if (isFp8(g.a)) {
      cudaDataType_t at = *cudaType(g.auxType);
      OCTET_CHECK_CUBLAS(
          setAttr(op_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, at));
    }
  }
  // cuBLASLt's A is our B: [K, N] column-major when our B is stored [N, K].
  uint64_t aRows = g.transposeB ? g.k : g.n, aCols = g.transposeB ? g.n : g.k;
  uint64_t bRows = g.transposeA ? g.m : g.k, bCols = g.transposeA ? g.k : g.m;
  OCTET_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&layoutA_, *cudaType(g.b),
                                                aRows, aCols, g.packedLdb()));
  OCTET_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&layoutB_, *cudaType(g.a),
                                                bRows, bCols, g.packedLda()));
  // C is read only when accumulating; FP8 outputs take a BF16 C.
  DType cType = isFp8(g.d) ? DType::BF16 : g.d;
  OCTET_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&layoutC_, *cudaType(cType),
                                                g.n, g.m, g.packedLdd()));
  OCTET_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&layoutD_, *cudaType(g.d), g.n,
                                                g.m, g.packedLdd()));
  if (g.batch > 1) {
    int32_t count = int32_t(g.batch);
    struct L {
      cublasLtMatrixLayout_t layout;
      int64_t stride;
    } layouts[] = {{layoutA_, g.strideB},
                   {layoutB_, g.strideA},
                   {layoutC_, g.strideD},
                   {layoutD_, g.strideD}};
    for (const L &l : layouts) {
      OCTET_CHECK_CUBLAS(cublasLtMatrixLayoutSetAttribute(
          l.layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
      OCTET_CHECK_CUBLAS(cublasLtMatrixLayoutSetAttribute(
          l.layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &l.stride,
          sizeof l.stride));
    }
  }
  return Status::ok();
}

StatusOr<std::unique_ptr<Gemm>> Gemm::create(cublasLtHandle_t handle,
                                             const GemmDesc &desc,
                                             const std::string &recorded,
                                             std::string *note,
                                             int candidates,
                                             int configurations) {
  std::unique_ptr<Gemm> g(new Gemm());
  g->desc_ = desc;
  g->handle_ = handle;
  OCTET_RETURN_IF_ERROR(g->checkDesc());
  OCTET_RETURN_IF_ERROR(g->build());
  // cuBLASLt may pick a kernel that ignores scale, amax or epilogue pointers
  // when none are set at query time, and then refuse the real call; so the
  // query sees placeholders wherever the call will pass a pointer.
  OCTET_RETURN_IF_ERROR(g->setPointers(GemmArgs::placeholders()));
  std::string at = "GEMM '" + desc.name + "'";
  if (recorded.size() == sizeof(cublasLtMatmulAlgo_t)) {
    std::memcpy(&g->algo_, recorded.data(), sizeof g->algo_);
    cublasLtMatmulHeuristicResult_t check{};
    cublasStatus_t st = cublasLtMatmulAlgoCheck(
        handle, g->op_, g->layoutA_, g->layoutB_, g->layoutC_, g->layoutD_,
        &g->algo_, &check);
    if (st == CUBLAS_STATUS_SUCCESS &&
        check.workspaceSize <= desc.workspaceBytes) {
      g->workspaceNeeded_ = check.workspaceSize;
      g->fromRecord_ = true;
      return g;
    }
    if (note)
      *note = at + ": the recorded cuBLASLt algorithm is not valid here (" +
              cublasLtGetStatusName(st) +
              "; another cuBLASLt or GPU?); using the heuristic's choice";
  } else if (!recorded.empty() && note) {
    *note = at + ": recorded algorithm has " +
            std::to_string(recorded.size()) + " bytes, expected " +
            std::to_string(sizeof(cublasLtMatmulAlgo_t)) +
            "; using the heuristic's choice";
  }
  cublasLtMatmulPreference_t pref = nullptr;
  OCTET_CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = desc.workspaceBytes;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  std::vector<cublasLtMatmulHeuristicResult_t> results(
      size_t(std::max(1, candidates)));
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(
        handle, g->op_, g->layoutA_, g->layoutB_, g->layoutC_, g->layoutD_,
        pref, int(results.size()), results.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    return Status::error(
        at + " (" + std::to_string(desc.m) + "x" + std::to_string(desc.n) +
        "x" + std::to_string(desc.k) + ", " + dtypeName(desc.a) + " x " +
        dtypeName(desc.b) + " -> " + dtypeName(desc.d) + ", epilogue " +
        epilogueName(desc.epilogue) + "): cuBLASLt has no algorithm for it (" +
        cublasLtGetStatusName(st) +
        "); this combination of types, layout and epilogue is unsupported on "
        "this GPU, or the workspace (" +
        std::to_string(desc.workspaceBytes) + " bytes) is too small");
  results.resize(size_t(found));
  g->algo_ = results[0].algo;
  g->workspaceNeeded_ = results[0].workspaceSize;
  g->candidates_ = std::move(results);
  g->heuristicAnswers_ = found;
  if (found < candidates && configurations > found)
    g->addConfigurations(size_t(configurations));
  return g;
}

namespace {

template <typename T>
std::optional<T> configOf(const cublasLtMatmulAlgo_t &algo,
                          cublasLtMatmulAlgoConfigAttributes_t attr) {
  T value{};
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &value, sizeof value,
                                           &written) != CUBLAS_STATUS_SUCCESS)
    return std::nullopt;
  return value;
}

template <typename T>
std::vector<T> capList(const cublasLtMatmulAlgo_t &algo,
                       cublasLtMatmulAlgoCapAttributes_t attr) {
  size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes) !=
          CUBLAS_STATUS_SUCCESS ||
      bytes == 0)
    return {};
  std::vector<T> values(bytes / sizeof(T));
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, values.data(), bytes,
                                        &bytes) != CUBLAS_STATUS_SUCCESS)
    return {};
  values.resize(bytes / sizeof(T));
  return values;
}

// One configuration of an algorithm: the settings addConfigurations varies.
struct AlgoConfig {
  int32_t id = 0;
  uint32_t tile = 0, stages = 0, swizzle = 0;
  uint16_t cluster = 0;
  bool operator<(const AlgoConfig &o) const {
    return std::tie(id, tile, stages, swizzle, cluster) <
           std::tie(o.id, o.tile, o.stages, o.swizzle, o.cluster);
  }
};

} // namespace

// cuBLASLt's heuristic answers some descriptors with a single configuration
// (on sm_90 half of the blockwise recipe's descriptors, as many as its
// fprop and dgrad ones: 1x128 tiles times 128x128 blocks), which leaves
// tune() nothing to choose from. Here
// the heuristic's own algorithms are tried in the other tiles, stage counts,
// CTA swizzles and cluster shapes they offer: first the configurations one
// setting away from an answer (those nearest what the heuristic judged
// best), then every combination, each kept when cuBLASLt accepts it for this
// descriptor within the workspace, up to `limit` candidates in all.
void Gemm::addConfigurations(size_t limit) {
  static constexpr uint16_t kClusters[] = {
      CUBLASLT_CLUSTER_SHAPE_AUTO, CUBLASLT_CLUSTER_SHAPE_1x1x1,
      CUBLASLT_CLUSTER_SHAPE_2x1x1, CUBLASLT_CLUSTER_SHAPE_1x2x1,
      CUBLASLT_CLUSTER_SHAPE_2x2x1};
  // AlgoCheck is a host call of some microseconds; this bounds load time
  // for algorithms that offer many tiles and stage counts.
  constexpr int kMaxChecks = 4096;
  int checks = 0;
  std::set<AlgoConfig> tried;
  const size_t answers = candidates_.size();
  auto tryConfig = [&](const cublasLtMatmulAlgo_t &base,
                       const AlgoConfig &c) {
    if (candidates_.size() >= limit || checks >= kMaxChecks)
      return;
    if (!tried.insert(c).second)
      return;
    cublasLtMatmulAlgo_t algo = base;
    auto set = [&](cublasLtMatmulAlgoConfigAttributes_t attr, const auto &v) {
      return cublasLtMatmulAlgoConfigSetAttribute(&algo, attr, &v,
                                                  sizeof v) ==
             CUBLAS_STATUS_SUCCESS;
    };
    if (!set(CUBLASLT_ALGO_CONFIG_TILE_ID, c.tile) ||
        !set(CUBLASLT_ALGO_CONFIG_STAGES_ID, c.stages) ||
        !set(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, c.swizzle) ||
        !set(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, c.cluster))
      return;
    ++checks;
    cublasLtMatmulHeuristicResult_t check{};
    if (cublasLtMatmulAlgoCheck(handle_, op_, layoutA_, layoutB_, layoutC_,
                                layoutD_, &algo,
                                &check) != CUBLAS_STATUS_SUCCESS ||
        check.workspaceSize > desc_.workspaceBytes)
      return;
    check.algo = algo;
    candidates_.push_back(check);
  };
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < answers; ++i) {
      const cublasLtMatmulAlgo_t base = candidates_[i].algo;
      AlgoConfig own;
      own.id = configOf<int32_t>(base, CUBLASLT_ALGO_CONFIG_ID).value_or(0);
      own.tile = configOf<uint32_t>(base, CUBLASLT_ALGO_CONFIG_TILE_ID)
                     .value_or(0);
      own.stages = configOf<uint32_t>(base, CUBLASLT_ALGO_CONFIG_STAGES_ID)
                       .value_or(0);
      own.swizzle =
          configOf<uint32_t>(base, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING)
              .value_or(0);
      own.cluster =
          configOf<uint16_t>(base, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)
              .value_or(0);
      tried.insert(own);
      std::vector<uint32_t> tiles =
          capList<uint32_t>(base, CUBLASLT_ALGO_CAP_TILE_IDS);
      std::vector<uint32_t> stages =
          capList<uint32_t>(base, CUBLASLT_ALGO_CAP_STAGES_IDS);
      std::vector<uint32_t> swizzles = {0};
      uint32_t swizzling = 0;
      size_t written = 0;
      if (cublasLtMatmulAlgoCapGetAttribute(
              &base, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, &swizzling,
              sizeof swizzling, &written) == CUBLAS_STATUS_SUCCESS &&
          swizzling)
        swizzles.push_back(1);
      if (tiles.empty())
        tiles = {own.tile};
      if (stages.empty())
        stages = {own.stages};
      if (pass == 0) {
        for (uint32_t t : tiles)
          tryConfig(base, {own.id, t, own.stages, own.swizzle, own.cluster});
        for (uint32_t s : stages)
          tryConfig(base, {own.id, own.tile, s, own.swizzle, own.cluster});
        for (uint32_t w : swizzles)
          tryConfig(base, {own.id, own.tile, own.stages, w, own.cluster});
        for (uint16_t c : kClusters)
          tryConfig(base, {own.id, own.tile, own.stages, own.swizzle, c});
        continue;
      }
      for (uint32_t t : tiles)
        for (uint32_t s : stages)
          for (uint32_t w : swizzles)
            for (uint16_t c : kClusters)
              tryConfig(base, {own.id, t, s, w, c});
    }
}

bool Gemm::useAlgorithm(const std::string &bytes) {
  if (bytes.size() != sizeof(cublasLtMatmulAlgo_t))
    return false;
  cublasLtMatmulAlgo_t algo;
  std::memcpy(&algo, bytes.data(), sizeof algo);
  cublasLtMatmulHeuristicResult_t check{};
  if (cublasLtMatmulAlgoCheck(handle_, op_, layoutA_, layoutB_, layoutC_,
                              layoutD_, &algo,
                              &check) != CUBLAS_STATUS_SUCCESS ||
      check.workspaceSize > desc_.workspaceBytes)
    return false;
  algo_ = algo;
  workspaceNeeded_ = check.workspaceSize;
  return true;
}

StatusOr<double> Gemm::tune(const GemmArgs &args, CUstream stream, int reps) {
  if (candidates_.empty())
    return Status::error("GEMM '" + desc_.name +
                         "' has no heuristic candidates to time (its "
                         "algorithm was recorded)");
  reps = std::max(1, reps);
  CUevent start = nullptr, stop = nullptr;
  OCTET_CHECK_CUDA(cuEventCreate(&start, CU_EVENT_DEFAULT));
  if (CUresult r = cuEventCreate(&stop, CU_EVENT_DEFAULT); r != CUDA_SUCCESS) {
    cuEventDestroy(start);
    OCTET_CHECK_CUDA(r);
  }
  struct Events {
    CUevent a, b;
    ~Events() {
      cuEventDestroy(a);
      cuEventDestroy(b);
    }
  } events{start, stop};
  int best = -1;
  float bestMs = 0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    algo_ = candidates_[i].algo;
    workspaceNeeded_ = candidates_[i].workspaceSize;
    // A candidate cuBLASLt refuses for these operands is not a failure of
    // the GEMM: the others may run.
    if (!run(args, stream))
      continue;
    OCTET_CHECK_CUDA(cuEventRecord(start, stream));
    bool ran = true;
    for (int r = 0; r < reps && ran; ++r)
      ran = bool(run(args, stream));
    OCTET_CHECK_CUDA(cuEventRecord(stop, stream));
    OCTET_CHECK_CUDA(cuEventSynchronize(stop));
    float ms = 0;
    OCTET_CHECK_CUDA(cuEventElapsedTime(&ms, start, stop));
    if (ran && (best < 0 || ms < bestMs))
      best = int(i), bestMs = ms;
  }
  int chosen = best < 0 ? 0 : best;
  algo_ = candidates_[size_t(chosen)].algo;
  workspaceNeeded_ = candidates_[size_t(chosen)].workspaceSize;
  if (best < 0)
    return Status::error("GEMM '" + desc_.name + "': cuBLASLt ran none of " +
                         std::to_string(candidates_.size()) +
                         " candidate algorithms on its operands");
  return double(bestMs) * 1000.0 / reps;
}

Gemm::~Gemm() {
  if (layoutD_)
    cublasLtMatrixLayoutDestroy(layoutD_);
  if (layoutC_)
    cublasLtMatrixLayoutDestroy(layoutC_);
  if (layoutB_)
    cublasLtMatrixLayoutDestroy(layoutB_);
  if (layoutA_)
    cublasLtMatrixLayoutDestroy(layoutA_);
  if (op_)
    cublasLtMatmulDescDestroy(op_);
}

std::string Gemm::algorithmBytes() const {
  return std::string(reinterpret_cast<const char *>(&algo_), sizeof algo_);
}

Status Gemm::setPointers(const GemmArgs &x) {
  const GemmDesc &g = desc_;
  auto need = [&](CUdeviceptr p, const char *what) -> Status {
    if (p == 0)
      return Status::error("GEMM '" + g.name + "' needs a " + what +
                           " pointer but got none");
    return Status::ok();
  };
  OCTET_RETURN_IF_ERROR(need(x.a, "A"));
  OCTET_RETURN_IF_ERROR(need(x.b, "B"));
  OCTET_RETURN_IF_ERROR(need(x.d, "D"));
  // The operands are swapped for cuBLASLt, and so are their scales.
  if (g.bScale) {
    OCTET_RETURN_IF_ERROR(need(x.bScale, "B scale"));
    void *p = reinterpret_cast<void *>(x.bScale);
    OCTET_CHECK_CUBLAS(setAttr(op_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, p));
  }
  if (g.aScale) {
    OCTET_RETURN_IF_ERROR(need(x.aScale, "A scale"));
    void *p = reinterpret_cast<void *>(x.aScale);
    OCTET_CHECK_CUBLAS(setAttr(op_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, p));
  }
  if (g.dScale) {
    OCTET_RETURN_IF_ERROR(need(x.dScale, "D scale"));
    void *p = reinterpret_cast<void *>(x.dScale);
    OCTET_CHECK_CUBLAS(setAttr(op_, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, p));
  }
  if (g.amaxD) {
    OCTET_RETURN_IF_ERROR(need(x.amaxD, "amax-of-D"));
    void *p = reinterpret_cast<void *>(x.amaxD);
    OCTET_CHECK_CUBLAS(setAttr(op_, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, p));
  }
  if (hasBias(g.epilogue)) {
    OCTET_RETURN_IF_ERROR(need(x.bias, "bias"));
    void *p = reinterpret_cast<void *>(x.bias);
    OCTET_CHECK_CUBLAS(setAttr(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p));
  }
  if (hasAux(g.epilogue)) {
    OCTET_RETURN_IF_ERROR(need(x.aux, "aux"));
    void *p = reinterpret_cast<void *>(x.aux);
    OCTET_CHECK_CUBLAS(
        setAttr(op_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, p));
  }
  if (workspaceNeeded_ > 0)
    OCTET_RETURN_IF_ERROR(need(x.workspace, "workspace"));
  return Status::ok();
}

Status Gemm::run(const GemmArgs &x, CUstream stream, bool overwrite) {
  OCTET_RETURN_IF_ERROR(setPointers(x));
  const float alpha = 1.0f;
  const float beta = desc_.accumulate && !overwrite ? 1.0f : 0.0f;
  void *a = reinterpret_cast<void *>(x.a);
  void *b = reinterpret_cast<void *>(x.b);
  void *d = reinterpret_cast<void *>(x.d);
  void *ws = reinterpret_cast<void *>(x.workspace);
  // C aliases D only when it is read (accumulation) and has D's layout; an
  // FP8 D has a BF16 C layout, and cuBLASLt rejects C == D with different
  // layouts, so C is left out there.
  void *c = desc_.accumulate || !isFp8(desc_.d) ? d : nullptr;
  cublasStatus_t st = cublasLtMatmul(
      handle_, op_, &alpha, b, layoutA_, a, layoutB_, &beta, c, layoutC_, d,
      layoutD_, &algo_, ws, x.workspace ? desc_.workspaceBytes : 0, stream);
  if (st != CUBLAS_STATUS_SUCCESS)
    return cublasError(st, "cublasLtMatmul", __FILE__, __LINE__)
        .withContext("GEMM '" + desc_.name + "'");
  return Status::ok();
}

StatusOr<Gemm *> GemmCache::get(const GemmDesc &desc,
                                const std::string &recordedAlgorithm,
                                std::string *note) {
  std::string key = desc.key();
  auto it = gemms_.find(key);
  if (it != gemms_.end())
    return it->second.get();
  auto g = Gemm::create(handle_, desc, recordedAlgorithm, note);
  if (!g)
    return g.status();
  Gemm *raw = g->get();
  gemms_[key] = std::move(*g);
  return raw;
}

} // namespace octet::blas
