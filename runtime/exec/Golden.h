#ifndef OCTET_RUNTIME_EXEC_GOLDEN_H
#define OCTET_RUNTIME_EXEC_GOLDEN_H

// A golden directory: what the reference interpreter computes for the first
// steps of a compiled bundle, written by `octet golden` and checked on the
// GPU by `octet-run BUNDLE --golden DIR` (runtime/exec/GoldenCheck.h).
//
//   model.octet, model.mlir   the bundle and the fused kernel-dialect module
//                             it was emitted from (one `octet compile` run)
//   golden.txt                key value lines: steps, accumulation, recipe,
//                             the bundle's content hash
//   init.tsv                  name, bytes, FNV-1a 64 of each parameter's and
//                             state tensor's initial bytes in its slot's
//                             dtype, as the interpreter's store holds them
//   batches.safetensors       step<S>.micro<M>.<input> for every input of
//                             the train program
//   steps.tsv                 step, loss (mean over microbatches), grad
//                             norm, lr
//   grads.tsv / .safetensors  after step 1's microbatches, before the
//                             optimizer: every persistent slot
//   after.tsv / .safetensors  after step 1's optimizer step: the same
//
// A snapshot keeps, per slot, the L2 norm and the largest magnitude of the
// whole tensor, and its values at indices 0, stride, 2·stride, ... (all of
// them for tensors up to kMaxSamples elements). The stride is odd, so the
// samples do not all fall in one column of a power-of-two-wide matrix. That
// bounds a golden of a large model to a few megabytes, small enough to copy
// to a GPU host, while a wrong row, column or block still shows.
//
// Tolerances (one place, used by the checker and stated in the README): the
// interpreter rounds every value to its element type as the GPU does, but
// sums in another order (GEMM K-splits, atomics), so values that are then
// rounded to BF16 or FP8 can land one unit apart, and that difference
// propagates through the backward pass. Slots are compared by relative L2
// error, ||gpu - golden|| / max(||gpu||, ||golden||), over their samples,
// and by the relative error of their full L2 norms; the loss and grad norm
// by relative error, with the bound growing by `growth` per step after the
// first (each update feeds on slightly different gradients). AdamW's second
// moments (adam_v.*) are compared as their square roots (summarize), with
// the slot bounds. The FP8 scale state (fp8.*: amax
// histories, scales) holds the largest element of a tensor, which a flip
// upstream moves by up to one E5M2 unit: 0.25 for samples and norm.
//
//            loss    grad norm   slot samples   slot norms   growth per step
//   BF16     1e-3    5e-3        2e-2           2e-2         +10%
//   FP8      2e-3    2e-2        0.5            5e-2         +10%
//
// FP8 samples are looser: gradients pass through E5M2 (2 mantissa bits, one
// unit is 12.5-25% of a value), so a sum computed in another order flips
// single elements by a unit, and a weight gradient that sums many such
// terms to a small total (a norm's weight) magnifies it: on two Llama 3 8B
// layers the worst slot is 0.34 (grad.layers.1.attn_norm) while every norm
// agrees to about 1%. A wrong index or layout gives about 1 or more, a
// wrong scale a norm error of a factor.

#include "hf/Safetensors.h"
#include "support/Status.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace octet::golden {

inline constexpr const char *kBundleFile = "model.octet";
inline constexpr const char *kIrFile = "model.mlir";
inline constexpr const char *kInfoFile = "golden.txt";
inline constexpr const char *kInitFile = "init.tsv";
inline constexpr const char *kBatchesFile = "batches.safetensors";
inline constexpr const char *kStepsFile = "steps.tsv";
// Snapshot names: <name>.tsv and <name>.safetensors.
inline constexpr const char *kGradsSnapshot = "grads";
inline constexpr const char *kAfterSnapshot = "after";

inline constexpr uint64_t kMaxSamples = 16384;
// Bound on an FP8 scale-state slot (fp8.*), relative: one E5M2 unit.
inline constexpr double kFp8StateTolerance = 0.25;

struct Tolerances {
  // Relative error of the loss and the gradient norm of step 1; step s
  // allows (1 + growth·(s-1)) times more.
  double loss, gradNorm, growth;
  // Relative L2 error of a slot's samples after step 1, and relative error
  // of its full L2 norm.
  double tensor, tensorNorm;
};

// The bounds for the slot `name`.
Tolerances slotTolerances(const Tolerances &tol, const std::string &name);
// "fp8" when any GEMM of the bundle runs in FP8, else "bf16".
Tolerances tolerancesFor(const std::string &numerics);

uint64_t sampleStride(uint64_t elements);
uint64_t sampleCount(uint64_t elements);
uint64_t fnv1a64(const void *data, size_t bytes);
std::string batchTensorName(int64_t step, int64_t micro,
                            const std::string &input);

struct StepValues {
  int64_t step = 0;
  double loss = 0, gradNorm = 0, lr = 0;
};

struct SlotSummary {
  std::string name;
  uint64_t elements = 0;
  double l2 = 0, maxAbs = 0;
  std::vector<float> samples;
};

// Second moments are compared as their square roots, what AdamW divides
// by: √v carries the gradient's relative error, where the norm of v itself
// is a 4-norm of the gradient that its few largest elements decide.
bool comparedAsSquareRoot(const std::string &name);

// Norm, largest magnitude and samples of `elements` values given by `at`
// (of their square roots for comparedAsSquareRoot slots).
template <typename At>
SlotSummary summarize(const std::string &name, uint64_t elements, At raw) {
  bool root = comparedAsSquareRoot(name);
  auto at = [&](uint64_t i) -> double {
    double v = raw(i);
    return root ? std::sqrt(v) : v;
  };
  SlotSummary s;
  s.name = name;
  s.elements = elements;
  double sum = 0;
  for (uint64_t i = 0; i < elements; ++i) {
    double v = at(i);
    sum += v * v;
    s.maxAbs = std::max(s.maxAbs, v < 0 ? -v : v);
  }
  s.l2 = std::sqrt(sum);
  uint64_t stride = sampleStride(elements);
  for (uint64_t i = 0; i < elements; i += stride)
    s.samples.push_back(float(at(i)));
  return s;
}

struct Info {
  std::map<std::string, std::string> values;
  std::string get(const std::string &key) const {
    auto it = values.find(key);
    return it == values.end() ? "" : it->second;
  }
};

Status writeInfo(const std::string &dir, const Info &info);
StatusOr<Info> readInfo(const std::string &dir);
Status writeSteps(const std::string &dir, const std::vector<StepValues> &steps);
StatusOr<std::vector<StepValues>> readSteps(const std::string &dir);
// name -> (bytes, hash)
Status writeInitHashes(
    const std::string &dir,
    const std::map<std::string, std::pair<uint64_t, uint64_t>> &hashes);
StatusOr<std::map<std::string, std::pair<uint64_t, uint64_t>>>
readInitHashes(const std::string &dir);
Status writeSnapshot(const std::string &dir, const std::string &name,
                     const std::vector<SlotSummary> &slots);
StatusOr<std::map<std::string, SlotSummary>>
readSnapshot(const std::string &dir, const std::string &name);

// Relative L2 error of `a` against `b` (the same length): ||a-b|| over the
// larger of the two norms; 0 when both are zero.
double relativeL2(const std::vector<float> &a, const std::vector<float> &b);
double relativeError(double a, double b);

} // namespace octet::golden

#endif
