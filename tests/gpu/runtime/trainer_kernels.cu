// The toy model of tests/unit/trainer/ToyBackend.h as GPU kernels, so the
// training loop runs on the GPU through real launches, CUDA graphs and
// slot copies. One thread each: the sizes are tiny, and a fixed order of
// additions keeps every run bit-identical (what resume tests compare).
#include <cuda_bf16.h>

extern "C" __global__ void toy_refresh_cache(const float *w,
                                             __nv_bfloat16 *cache,
                                             unsigned vocab) {
  if (threadIdx.x || blockIdx.x)
    return;
  for (unsigned i = 0; i < vocab; ++i)
    cache[i] = __float2bfloat16_rn(w[i]);
}

// train != 0: accumulate gradients into gw, gb.
extern "C" __global__ void toy_forward(const __nv_bfloat16 *cache,
                                       const float *b, const int *tokens,
                                       const int *labels, const float *mask,
                                       float *gw, float *gb, float *loss,
                                       unsigned vocab, unsigned n,
                                       unsigned train) {
  if (threadIdx.x || blockIdx.x)
    return;
  double count = 0, sum = 0;
  for (unsigned i = 0; i < n; ++i)
    count += mask[i];
  for (unsigned i = 0; i < n; ++i) {
    if (mask[i] == 0.0f)
      continue;
    float y = __fdiv_rn(float(labels[i]), float(vocab));
    float d = __fsub_rn(__fadd_rn(__bfloat162float(cache[tokens[i]]), *b), y);
    sum += double(d) * d;
    if (train) {
      float g = float(2.0 * d / count);
      gw[tokens[i]] = __fadd_rn(gw[tokens[i]], g);
      *gb = __fadd_rn(*gb, g);
    }
  }
  *loss = float(sum / (count > 1.0 ? count : 1.0));
}

extern "C" __global__ void toy_adam(float *w, float *b, float *gw, float *gb,
                                    float *mw, float *vw, float *mb, float *vb,
                                    int *step, __nv_bfloat16 *cache,
                                    float *gradNorm, float *lrOut, float lr,
                                    unsigned vocab) {
  if (threadIdx.x || blockIdx.x)
    return;
  int t = ++*step;
  double norm = 0;
  float c1 = 1.0f - powf(0.9f, float(t)), c2 = 1.0f - powf(0.999f, float(t));
  for (unsigned i = 0; i <= vocab; ++i) {
    float *x = i < vocab ? w + i : b, *g = i < vocab ? gw + i : gb;
    float *m = i < vocab ? mw + i : mb, *v = i < vocab ? vw + i : vb;
    norm += double(*g) * *g;
    *m = __fadd_rn(__fmul_rn(0.9f, *m), __fmul_rn(0.1f, *g));
    *v = __fadd_rn(__fmul_rn(0.999f, *v), __fmul_rn(__fmul_rn(0.001f, *g), *g));
    float mh = __fdiv_rn(*m, c1), vh = __fdiv_rn(*v, c2);
    *x = __fsub_rn(*x, __fdiv_rn(__fmul_rn(lr, mh),
                                 __fadd_rn(__fsqrt_rn(vh), 1e-8f)));
    *g = 0.0f;
  }
  for (unsigned i = 0; i < vocab; ++i)
    cache[i] = __float2bfloat16_rn(w[i]);
  *gradNorm = float(sqrt(norm));
  *lrOut = lr;
}
