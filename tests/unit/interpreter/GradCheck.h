#ifndef OCTET_TESTS_UNIT_INTERPRETER_GRADCHECK_H
#define OCTET_TESTS_UNIT_INTERPRETER_GRADCHECK_H

// Shared by the gradient checks: parse a forward module, run the training
// pipeline on it, and compare the interpreter's gradients with central
// finite differences of @forward.

#include "compiler/Interpreter/Interpreter.h"
#include "compiler/Pipelines/Pipelines.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>
#include <vector>

namespace octet::testing {

// A context with the dialects forward and train modules use.
std::unique_ptr<mlir::MLIRContext> makeContext();

// The training pipeline's defaults with f32 activations: gradients checked
// against finite differences or another framework's f32 arithmetic must not
// carry BF16 rounding.
TrainingPipelineOptions f32Training();

// Parses `text` and runs the autodiff and activations stages of the training
// pipeline on it; fails the current test on an error.
mlir::OwningOpRef<mlir::ModuleOp>
parseAndDifferentiate(mlir::MLIRContext &ctx, const std::string &text,
                      const TrainingPipelineOptions &options = f32Training());

// Lines that reduce `value` (an f32 tensor of `shape`) to the scalar
// Σ value ∘ probe with a random probe (variable @probe, which
// probeVariable() declares) and return it, so dLoss/dValue = probe.
std::string probeLoss(const std::string &value,
                      const std::vector<int64_t> &shape);
std::string probeVariable(const std::vector<int64_t> &shape);
std::string tensorType(const std::vector<int64_t> &shape,
                       const std::string &element = "f32");

// A Llama forward graph with the importer's parameter names (embed,
// layers.N.attn.wq, ..., final_norm, lm_head unless tied): RMSNorm, GQA
// attention with RoPE (optionally document-masked by %cu), SwiGLU,
// residuals. Weights are drawn N(0, stdDev), norm weights N(0, normStd).
struct LlamaShape {
  int64_t batch = 2, seq = 6, hidden = 16, heads = 4, kvHeads = 2,
          headDim = 4, ffn = 24, vocab = 32;
  int layers = 1;
  bool tied = false, docs = false;
  double stdDev = 0.02, normStd = 0.02, eps = 1e-5, theta = 10000.0;
};
std::string llamaModule(const LlamaShape &shape);

// ‖got - want‖ / ‖want‖ over the whole tensor (f32 values).
double relativeError(const interp::Tensor &got, const interp::Tensor &want);

// The four @forward arguments of a [batch, seq] Llama batch: the tokens and
// labels given, a loss mask of ones and positions 0..seq-1 in every row.
std::vector<interp::Tensor> llamaBatch(int64_t batch, int64_t seq,
                                       const std::vector<int64_t> &tokens,
                                       const std::vector<int64_t> &labels);

struct GradCheckOptions {
  float step = 1e-2f;
  // A directional derivative along a random direction must match to
  // `directionalTol` relative; per-element gradients to
  // |fd - g| <= elementAbsTol * max|g| + elementRelTol * |g|.
  double directionalTol = 2e-3;
  double elementAbsTol = 5e-3;
  double elementRelTol = 2e-2;
  int elementsPerParam = 6;
  uint64_t seed = 7;
};

// Initialises the variables (seeded), runs @train_microbatch once and checks
// the accumulated gradient of every trainable variable against central
// differences of @forward.
void checkGradients(mlir::ModuleOp module, const std::vector<interp::Tensor> &args,
                    const GradCheckOptions &options = {});

} // namespace octet::testing

#endif
