#ifndef OCTET_COMPILER_INTERPRETER_KERNELS_H
#define OCTET_COMPILER_INTERPRETER_KERNELS_H

// The interpreter's hot loops on raw float32 buffers: a thread pool, a blocked
// matrix product and blocked attention. No MLIR here, so CPU reference checks
// of GPU kernels can call them directly.

#include "support/Status.h"

#include <cstdint>
#include <functional>

namespace octet::interp {

// Number of worker threads (OCTET_THREADS overrides the hardware count).
int numThreads();

// OCTET_THREADS as numThreads reads it: 0 when it is unset, else a count
// from 1 to kMaxThreads; anything else is an error naming the variable and
// what it takes, which tools report before any work starts (numThreads
// itself falls back to the hardware count).
constexpr int kMaxThreads = 1024;
StatusOr<int> threadsFromEnvironment();

// Calls body(begin, end) over [0, n) split into chunks of at least `grain`
// items, in parallel. Chunk boundaries depend only on n and grain, never on
// the thread count, so reductions done per chunk are deterministic. Nested
// calls run inline.
void parallelFor(int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &body);

// C[M, N] (+)= alpha · op(A) · op(B). A is [M, K] row-major, or [K, M] when
// transA; B is [K, N], or [N, K] when transB. Each C element sums over k in
// order, so results do not depend on the thread count. `parallel` = false
// keeps it on the calling thread (for use inside parallel tasks).
void gemm(int64_t m, int64_t n, int64_t k, const float *a, bool transA,
          const float *b, bool transB, float *c, float alpha, bool accumulate,
          bool parallel = true);

struct AttentionShape {
  int64_t batch, seq, qHeads, kvHeads, headDim;
  bool causal;
  float scale;
};

// q [B, S, Hq, Dh], k and v [B, S, Hkv, Dh] → out [B, S, Hq, Dh] and lse
// [B, Hq, S]. docIds (nullable) gives each of the B·S tokens its document;
// tokens attend only within their document.
void attentionForward(const AttentionShape &shape, const float *q,
                      const float *k, const float *v, const int64_t *docIds,
                      float *out, float *lse);

// Gradients from the saved out and lse: dq [B, S, Hq, Dh], dk and dv
// [B, S, Hkv, Dh] (overwritten).
void attentionBackward(const AttentionShape &shape, const float *dout,
                       const float *q, const float *k, const float *v,
                       const float *out, const float *lse,
                       const int64_t *docIds, float *dq, float *dk, float *dv);

} // namespace octet::interp

#endif
