#ifndef OCTET_COMPILER_INTERPRETER_FP8OPS_H
#define OCTET_COMPILER_INTERPRETER_FP8OPS_H

// Reference semantics of the fp8 ops beyond quantize/dequantize/amax (which
// Interpreter.cpp defines): compute_scale, scale_update, block_quantize,
// block_dequantize, matmul, transpose, each run from the interpreter's one
// dispatch (execute() in Interpreter.cpp). Also FP8 statistics: per
// quantized tensor, its amax, scale and the shares of values that flush to
// zero or saturate.

#include "compiler/Interpreter/Interpreter.h"
#include "dialects/fp8/Fp8Dialect.h"

#include "llvm/Support/raw_ostream.h"

#include <map>
#include <mutex>
#include <string>

namespace octet::interp {

// scale = fp8Max / (max(amax, eps) · 2^margin), rounded down to a power of
// two when asked. `amax` must be finite (callers decide what a non-finite
// amax means: compute_scale gives 1, scale_update keeps the old scale).
float fp8ScaleFromAmax(float amax, float fp8Max, int64_t margin,
                       bool powerOfTwo, float eps);

llvm::Error computeScale(fp8::ComputeScaleOp op, ExecContext &ctx);
llvm::Error scaleUpdate(fp8::ScaleUpdateOp op, ExecContext &ctx);
llvm::Error blockQuantize(fp8::BlockQuantizeOp op, ExecContext &ctx);
llvm::Error blockDequantize(fp8::BlockDequantizeOp op, ExecContext &ctx);
// q / scale, block by block, of a [rows, cols] tensor and its scales in the
// fp8 dialect's layout: what fp8.matmul and a block-scaled kernel.gemm
// multiply.
std::vector<float> dequantizeBlocks(const Tensor &q, const Tensor &scales,
                                    llvm::ArrayRef<int64_t> block);
llvm::Error blockFactors(fp8::BlockFactorsOp op, ExecContext &ctx);
// q · factor, block by block, of a [rows, cols] tensor and its
// dequantization factors in cuBLASLt's layout (fp8.block_factors): what a
// kernel.gemm that takes factors multiplies, as cuBLASLt does.
std::vector<float> dequantizeBlockFactors(const Tensor &q,
                                          const Tensor &factors,
                                          llvm::ArrayRef<int64_t> block);
// FP32 accumulation of the FP8 values, one 1/(sa·sb) at the end when both
// scales are tensorwise (what cuBLASLt does); blockwise operands are widened
// block by block first.
llvm::Error fp8Matmul(fp8::MatmulOp op, ExecContext &ctx);
llvm::Error fp8Transpose(fp8::TransposeOp op, ExecContext &ctx);

// What one quantized tensor looked like, accumulated over the quantize
// executions since the last reset (microbatches of a step, say).
struct Fp8TensorStats {
  std::string format;      // "e4m3" or "e5m2"
  float amax = 0;          // largest |x| seen
  float scale = 0;         // the last scale used (for blockwise: smallest)
  int64_t values = 0;      // elements quantized
  int64_t underflows = 0;  // x != 0 but quantized to 0
  int64_t saturations = 0; // |x · scale| beyond the format's largest finite
};

// Collects Fp8TensorStats from every fp8.quantize and fp8.block_quantize the
// interpreter runs, keyed by the op's `tensor` attribute (the precision pass
// names each quantized tensor "<param>.<x|w|dy>"; unnamed ones fall back to
// their location).
class Fp8StatsCollector {
public:
  // An observer for Interpreter::setOpObserver.
  OpObserver observer();
  void reset();
  std::map<std::string, Fp8TensorStats> snapshot() const;
  // One line per tensor: name, format, amax, scale, underflow and
  // saturation shares (percent), prefixed with the step.
  void print(int64_t step, llvm::raw_ostream &os) const;

private:
  void record(const std::string &name, const Fp8TensorStats &s);
  mutable std::mutex mutex_;
  std::map<std::string, Fp8TensorStats> stats_;
};

} // namespace octet::interp

#endif
