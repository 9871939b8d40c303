#ifndef OCTET_RUNTIME_BLAS_GEMM_H
#define OCTET_RUNTIME_BLAS_GEMM_H

// cuBLASLt matrix products in BF16 and FP8 as the bundle describes them, in
// row-major terms:
//   D[M, N] = scale_d · (scale_a · scale_b · op(A)[M, K] · op(B)[K, N])
//             (+ D when accumulating), then the epilogue.
// cuBLASLt is column-major, so the row-major product is issued as
// D^T = op(B)^T · op(A)^T: our B is cuBLASLt's A and our A its B. Hopper FP8
// needs both operands K-major ("TN"): A stored [M, K] and B stored [N, K]
// (transpose_b), which is exactly fprop's X · W^T.
//
// The algorithm is chosen once: when the Gemm is created, the one recorded in
// the bundle if cuBLASLt accepts it, else the heuristic's first choice; the
// heuristic's next candidates are kept so that the caller can time them on
// the real operands (tune) or adopt one timed earlier (useAlgorithm).

#include "runtime/core/CudaCheck.h"
#include "support/DType.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace octet::blas {

// The element types cuBLASLt multiplies here: f32, bf16, f16, e4m3, e5m2.
bool isGemmType(DType dtype);

enum class Epilogue {
  None,
  // + bias, one value per column of D (per output feature).
  Bias,
  Gelu,
  BiasGelu,
  // gelu, and the pre-activation written to aux ([M, N], row stride auxLd).
  GeluAux,
  BiasGeluAux,
  // bias = sum of op(A) over K, one value per row of D: the bias gradient
  // of a wgrad dW = dY^T · X (A = dY^T).
  BiasGrad,
};
const char *epilogueName(Epilogue epilogue);

enum class Role { Unspecified, Fprop, Dgrad, Wgrad };

// How a scale pointer covers its operand, an operand stored [R, K] (K-major;
// R is M for A, N for B). The factors multiply (dequantization factors).
enum class ScaleMode {
  // One f32 for the operand (for A with no B scale: for the product).
  Tensorwise,
  // CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F: one f32 per 1x128 tile along K,
  // stored [K / 128][R]: the R factors of a K tile are contiguous.
  Vec128,
  // CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F: one f32 per 128x128 block,
  // stored [R / 128][ceil4(K / 128)]: the K blocks of a row block contiguous,
  // rows of blocks 16-byte aligned.
  Blk128x128,
};
const char *scaleModeName(ScaleMode mode);

struct GemmDesc {
  std::string name;
  Role role = Role::Unspecified;
  int64_t m = 0, n = 0, k = 0;
  DType a = DType::BF16, b = DType::BF16, d = DType::BF16;
  bool transposeA = false, transposeB = false;
  // Row strides in elements; 0 means packed.
  int64_t lda = 0, ldb = 0, ldd = 0;
  Epilogue epilogue = Epilogue::None;
  DType biasType = DType::BF16;
  DType auxType = DType::BF16;
  int64_t auxLd = 0;
  // FP8 fast accumulation (fprop only: gradients keep full accumulation).
  bool fastAccum = false;
  bool accumulate = false;
  bool aScale = false, bScale = false, dScale = false, amaxD = false;
  // Block scaling (sm_90, cuBLASLt >= 12.9): both operands' modes other
  // than Tensorwise, both scales set.
  ScaleMode aScaleMode = ScaleMode::Tensorwise;
  ScaleMode bScaleMode = ScaleMode::Tensorwise;
  bool blockScaled() const {
    return aScaleMode != ScaleMode::Tensorwise ||
           bScaleMode != ScaleMode::Tensorwise;
  }
  uint64_t workspaceBytes = 0;
  int64_t batch = 1, strideA = 0, strideB = 0, strideD = 0;

  int64_t packedLda() const { return lda ? lda : (transposeA ? m : k); }
  int64_t packedLdb() const { return ldb ? ldb : (transposeB ? k : n); }
  int64_t packedLdd() const { return ldd ? ldd : n; }
  // A stable text of every field that shapes the cuBLASLt objects.
  std::string key() const;
};

// Device pointers for one call. Unused ones stay 0.
struct GemmArgs {
  CUdeviceptr a = 0, b = 0, d = 0;
  CUdeviceptr bias = 0, aux = 0;
  CUdeviceptr aScale = 0, bScale = 0, dScale = 0, amaxD = 0;
  CUdeviceptr workspace = 0;
  // Aligned non-null stand-ins, for the algorithm query.
  static GemmArgs placeholders() {
    GemmArgs p;
    p.a = p.b = p.d = p.bias = p.aux = p.aScale = p.bScale = p.dScale =
        p.amaxD = p.workspace = 256;
    return p;
  }
};

class BlasHandle {
public:
  static StatusOr<std::unique_ptr<BlasHandle>> create();
  ~BlasHandle();
  cublasLtHandle_t get() const { return handle_; }

private:
  cublasLtHandle_t handle_ = nullptr;
};

class Gemm {
public:
  // `recordedAlgorithm`: 64 bytes from a previous run (may be empty). When
  // cuBLASLt rejects it, the heuristic chooses and `note` says so, keeping
  // up to `candidates` of its answers, best first, for tune(). Where the
  // heuristic gives fewer than `candidates`, other configurations of its
  // algorithms that cuBLASLt accepts here are added, up to `configurations`
  // in all (0: none).
  static StatusOr<std::unique_ptr<Gemm>>
  create(cublasLtHandle_t handle, const GemmDesc &desc,
         const std::string &recordedAlgorithm = {}, std::string *note = nullptr,
         int candidates = 1, int configurations = 0);
  ~Gemm();
  Gemm(const Gemm &) = delete;
  Gemm &operator=(const Gemm &) = delete;

  // `overwrite`: D = product (beta = 0) even where the descriptor
  // accumulates, as a step's first microbatch does.
  Status run(const GemmArgs &args, CUstream stream, bool overwrite = false);
  const GemmDesc &desc() const { return desc_; }
  // The chosen cublasLtMatmulAlgo_t, to record in the bundle.
  std::string algorithmBytes() const;
  bool usedRecordedAlgorithm() const { return fromRecord_; }
  // Workspace the chosen algorithm needs (at most desc.workspaceBytes).
  size_t workspaceNeeded() const { return workspaceNeeded_; }

  // The heuristic's answers kept at creation (none when a recorded
  // algorithm was taken), and the configurations added after them.
  int candidates() const { return int(candidates_.size()); }
  int heuristicAnswers() const { return heuristicAnswers_; }
  // Runs every candidate on these operands (one warm-up call, then `reps`
  // calls between two events) and keeps the fastest. The calls write D (and
  // aux, amax): give it memory whose contents do not matter yet. Returns the
  // winner's time per call in microseconds; candidates cuBLASLt refuses at
  // run time are skipped, and if all are, the first stays chosen.
  StatusOr<double> tune(const GemmArgs &args, CUstream stream, int reps);
  // Takes these algorithm bytes (timed earlier for the same descriptor)
  // when cuBLASLt accepts them here with the workspace the desc allows;
  // false, and nothing changes, otherwise.
  bool useAlgorithm(const std::string &bytes);

private:
  Gemm() = default;
  Status checkDesc() const;
  Status build();
  Status setPointers(const GemmArgs &args);
  void addConfigurations(size_t limit);

  GemmDesc desc_;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t layoutA_ = nullptr; // cuBLASLt's A: our B
  cublasLtMatrixLayout_t layoutB_ = nullptr; // cuBLASLt's B: our A
  cublasLtMatrixLayout_t layoutC_ = nullptr;
  cublasLtMatrixLayout_t layoutD_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  size_t workspaceNeeded_ = 0;
  std::vector<cublasLtMatmulHeuristicResult_t> candidates_;
  int heuristicAnswers_ = 0;
  bool fromRecord_ = false;
};

// Descriptor cache: one Gemm per distinct descriptor, created on first use.
class GemmCache {
public:
  explicit GemmCache(cublasLtHandle_t handle) : handle_(handle) {}
  StatusOr<Gemm *> get(const GemmDesc &desc,
                       const std::string &recordedAlgorithm = {},
                       std::string *note = nullptr);
  size_t size() const { return gemms_.size(); }

private:
  cublasLtHandle_t handle_;
  std::map<std::string, std::unique_ptr<Gemm>> gemms_;
};

} // namespace octet::blas

#endif
