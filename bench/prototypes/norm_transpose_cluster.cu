// RMSNorm + FP8 e4m3 quantize + amax + transpose in one launch, with thread
// block clusters: the hand-written prototype of the kernel octet-fused-to-gpu
// now generates (compiler/Codegen/NormTransposeKernel.cpp), kept with the
// variants measured on the way to it (Llama 3 8B layer 0's input norm,
// 8192 x 4096; the row kernel + transpose launch ran at 68.8% of copy
// bandwidth, compiler/Codegen/README.md).
//
// Measured on an H100 80GB HBM3, timed as octet-fused-bench times (a 256 MiB
// memset before each of 21 repeats, events, median): 53.9-54.3 us, 81.8-82.3% of a
// device-to-device copy, out/outT/amax byte-exact against a reference kernel
// that sums in the same order. Variants measured on the way: rstd shared
// over distributed shared memory then 64 x 64 tiles re-read from L2,
// 49-56%; rows in registers with a cluster barrier per band, 61-68%; one
// warp a row, 67-77%; rows split over 2-4 warps (this one, with the ring),
// 72-82%. Clusters of 2 beat 4 and 8 because 66 clusters of 2 fill the 132
// SMs (a band each of 1.94 on average, 2 at most) where 30 of 4 leave 12
// idle; a release cluster barrier costs a membar over the block's global
// stores, hence mbarriers and st.async.
//
// Design: a 64-row band per 2-block cluster (1 block a multiprocessor,
// persistent: 66 clusters, 2 bands each).
//   * x rows stream into a 7-slot shared ring with cp.async.bulk (one 8 KB
//     row a slot, an mbarrier a slot); the row group that consumes a slot
//     refills it with the row 7 ahead (only it: the mbarrier's parity would
//     alias otherwise).
//   * row warps: 4 warps a row (1024 columns each in registers); partial
//     sums of squares meet in shared memory behind a named barrier; they
//     write `out` and push each 256-byte FP8 chunk with st.async into the
//     shared memory of the block that owns those columns.
//   * transposer warps (4): wait for the band on an mbarrier, turn 4 x 4
//     byte squares with byte permutes from local shared memory, write outT
//     in 64-byte runs, then arrive on every block's `free` mbarrier.
//
// Build: nvcc -O3 -arch=sm_90a -std=c++17 norm_transpose_cluster.cu -o ntc
// Run on an H100: ./ntc (every configuration), ./ntc "[ea]" (this one).
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cooperative_groups.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <cstring>
namespace cg = cooperative_groups;
constexpr int R = 8192, C = 4096, NB = R / 64;

__device__ __forceinline__ uint32_t pack4(float a, float b, float c, float d) {
  __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
  __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
  return (uint32_t)lo | ((uint32_t)hi << 16);
}
__device__ __forceinline__ void cl_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cl_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory"); }
__device__ __forceinline__ uint32_t mapa(uint32_t a, int rank) {
  uint32_t r; asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank)); return r;
}
__device__ __forceinline__ uint32_t ld_dsmem(uint32_t a) {
  uint32_t v; asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(a) : "memory"); return v;
}
__device__ __forceinline__ void cl_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
__device__ __forceinline__ float4 ldw(const float4 *p) {
  float4 v;
  asm volatile("ld.global.nc.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint4 ldx(const uint4 *p, int hint) {
  uint4 v;
  if (hint == 1) v = __ldcs(p);               // evict-first streaming
  else if (hint == 2) v = __ldlu(p);
  else v = __ldg(p);
  return v;
}
// Sum of squares of n 16-byte chunks of bf16 in the warp order: lane
// partials over its chunks, then an xor tree over the warp.
__device__ __forceinline__ float partialSS(const uint4 *v, int n) {
  float ss = 0;
  for (int c = 0; c < n; ++c) {
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v[c]);
#pragma unroll
    for (int i = 0; i < 4; ++i) { float2 f = __bfloat1622float2(h[i]); ss += f.x * f.x + f.y * f.y; }
  }
#pragma unroll
  for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(~0u, ss, o);
  return ss;
}
__device__ __forceinline__ float yval(float xv, float rstd, float w) { return __bfloat162float(__float2bfloat16(xv * rstd * w)); }

// Eight bf16 of a row normalized (y = bf16(x * rstd * w)), their largest |y|
// into amax, cast to FP8 after the scale: 8 bytes.
__device__ __forceinline__ uint2 normQuant8(const uint4 &v, float rstd, float4 w0, float4 w1, float scale,
                                            float &amax) {
  const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
  float wv[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
  float y[8];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    float2 f = __bfloat1622float2(h[e]);
    y[2 * e] = yval(f.x, rstd, wv[2 * e]);
    y[2 * e + 1] = yval(f.y, rstd, wv[2 * e + 1]);
    amax = fmaxf(amax, fmaxf(fabsf(y[2 * e]), fabsf(y[2 * e + 1])));
  }
  return make_uint2(pack4(y[0] * scale, y[1] * scale, y[2] * scale, y[3] * scale),
                    pack4(y[4] * scale, y[5] * scale, y[6] * scale, y[7] * scale));
}

__device__ __forceinline__ void blockAmax(float a, float *red, float *amaxOut) {
  for (int o = 16; o; o >>= 1) a = fmaxf(a, __shfl_xor_sync(~0u, a, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = a;
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = red[0];
    for (int i = 1; i < blockDim.x / 32; ++i) m = fmaxf(m, red[i]);
    atomicMax((unsigned *)amaxOut, __float_as_uint(m));
  }
}

// ---------------------------------------------------------------- Variant D (warp-specialized, mbarriers, st.async push)
// Row warps: rows in registers (optionally two rows in flight), write out, and push each 256-byte chunk of FP8
//   bytes with st.async into the shared memory of the CTA that owns those columns (completing bytes on its
//   `ready` mbarrier). Transposer warps: wait `ready`, transpose the band's 64 rows x C/N columns from local shared
//   memory (4x4 squares, __byte_perm), write outT in 64-byte runs, then arrive (remotely) on every CTA's `free`.
__device__ __forceinline__ void mb_init(uint32_t a, int n) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(a), "r"(n) : "memory"); }
__device__ __forceinline__ void mb_expect_arrive(uint32_t a, uint32_t tx) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(a), "r"(tx) : "memory");
}
__device__ __forceinline__ void mb_wait(uint32_t a, uint32_t parity) {
  uint32_t ok;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0,1,0,p; }"
                 : "=r"(ok) : "r"(a), "r"(parity) : "memory");
  } while (!ok);
}
__device__ __forceinline__ void mb_arrive_remote(uint32_t remote) {
  asm volatile("mbarrier.arrive.relaxed.cluster.shared::cluster.b64 _, [%0];" :: "r"(remote) : "memory");
}
__device__ __forceinline__ void st_async8(uint32_t remote, uint2 v, uint32_t remoteBar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];"
               :: "r"(remote), "r"(v.x), "r"(v.y), "r"(remoteBar) : "memory");
}
__device__ __forceinline__ void st_async16(uint32_t remote, uint4 v, uint32_t remoteBar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];"
               :: "r"(remote), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(remoteBar) : "memory");
}
// V16: each lane owns 16 consecutive columns per chunk (16-byte out stores and st.async; different sum order).
// DBG 1: rows only (no push, no transposer)  2: no outT stores  3: no push, transposer never waits (outT garbage)
// ---------------------------------------------------------------- Variant E: D with each row split over S warps
// (more warps doing rows at fewer registers each). The S partial sums of squares meet in shared memory behind a
// named barrier per row group; the sum order is matched by refKernelS<S>.
template <int N, int S, int ROWW, int TW, int NBUF, int SLOTS, int MINB, int DBG = 0>
__global__ void __launch_bounds__((ROWW + TW) * 32, MINB)
clE(const uint4 *__restrict__ x, const float4 *__restrict__ w, const float *scale_p, uint2 *__restrict__ out,
    uint8_t *__restrict__ outT, float *amaxOut) {
  constexpr int RW = 64 / N, SW = C / N, BUFB = 64 * SW + 128, TT = TW * 32;
  constexpr int G = ROWW / S, CPW = 16 / S;  // row groups, 256-column chunks per warp
  static_assert(ROWW % S == 0 && SW % 256 == 0 && SW % TT == 0, "shape");
  static_assert(SLOTS % G == 0, "a ring slot must be refilled by the group that reads it");
  static_assert(G + 2 <= 16, "named barriers");
  extern __shared__ __align__(128) uint8_t sm[];  // NBUF x BUFB FP8 band slices, w (16 KB), SLOTS x 8 KB rows
  __shared__ __align__(8) uint64_t bars[2 * NBUF];  // ready[NBUF], free[NBUF]
  __shared__ __align__(8) uint64_t rbars[SLOTS ? SLOTS : 1];  // full[SLOTS]
  __shared__ float ssb[G][2][S];
  __shared__ float red[32];
  cg::cluster_group cl = cg::this_cluster();
  const int rank = (int)cl.block_rank();
  const int cid = blockIdx.x / N, K = gridDim.x / N;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int iters = cid < NB ? (NB - cid + K - 1) / K : 0;
  const uint32_t smA = (uint32_t)__cvta_generic_to_shared(sm);
  const uint32_t barA = (uint32_t)__cvta_generic_to_shared(bars);
  float4 *wsm = reinterpret_cast<float4 *>(sm + NBUF * BUFB);
  const uint32_t ringA = smA + NBUF * BUFB + C * 4;
  const uint32_t rbarA = (uint32_t)__cvta_generic_to_shared(rbars);
  constexpr int SL = SLOTS ? SLOTS : 1;
  const int total = iters * RW;
  auto issueRow = [&](int q) {
    const int i = q / RW, j = q % RW;
    const uint4 *xr = x + (size_t)((cid + i * K) * 64 + rank * RW + j) * (C / 8);
    mb_expect_arrive(rbarA + 8 * (q % SL), C * 2);
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(ringA + (q % SL) * (C * 2)), "l"(xr), "r"(C * 2), "r"(rbarA + 8 * (q % SL)) : "memory");
  };
  if (threadIdx.x == 0) {
    for (int i = 0; i < NBUF; ++i) { mb_init(barA + 8 * i, 1); mb_init(barA + 8 * (NBUF + i), N); }
    for (int i = 0; i < SLOTS; ++i) mb_init(rbarA + 8 * i, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    for (int i = 0; i < NBUF && i < iters; ++i) mb_expect_arrive(barA + 8 * i, 64 * SW);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    for (int q = 0; q < SLOTS && q < total; ++q) issueRow(q);
  }
  for (int i = threadIdx.x; i < C / 4; i += blockDim.x) wsm[i] = __ldg(w + i);
  __syncthreads();
  cl_arrive();
  cl_wait();
  float amax = 0;
  if (warp < ROWW) {
    const float scale = *scale_p;
    const int gi = warp / S, h = warp % S;
    uint4 v[CPW];
#pragma unroll 1
    for (int q = gi; q < total; q += G) {
      const int i = q / RW, j = q % RW, buf = i % NBUF, u = i / NBUF, par = (q / G) & 1;
      const int row = (cid + i * K) * 64 + rank * RW + j;
      if (SLOTS) {
        mb_wait(rbarA + 8 * (q % SL), (q / SL) & 1);
        const uint4 *sr = reinterpret_cast<const uint4 *>(sm + NBUF * BUFB + C * 4 + (q % SL) * (C * 2));
#pragma unroll
        for (int cc = 0; cc < CPW; ++cc) v[cc] = sr[(h * CPW + cc) * 32 + lane];
      } else {
        const uint4 *xr = x + (size_t)row * (C / 8);
#pragma unroll
        for (int cc = 0; cc < CPW; ++cc) v[cc] = __ldg(xr + (h * CPW + cc) * 32 + lane);
      }
      float tot;
      if (S > 1) {
        const float ss = partialSS(v, CPW);
        if (lane == 0) ssb[gi][par][h] = ss;
        asm volatile("bar.sync %0, %1;" :: "r"(2 + gi), "r"(S * 32) : "memory");
        tot = 0;
#pragma unroll
        for (int hh = 0; hh < S; ++hh) tot += ssb[gi][par][hh];
      } else {
        tot = partialSS(v, CPW);
        __syncwarp();
      }
      // every warp of the group has its part in registers (its sum needed it): refill the slot
      if (SLOTS && h == 0 && lane == 0 && q + SL < total) issueRow(q + SL);
      const float rstd = rsqrtf(tot / C + 1e-5f);
      if (DBG != 1 && i >= NBUF) mb_wait(barA + 8 * (NBUF + buf), (u - 1) & 1);
#pragma unroll
      for (int cc = 0; cc < CPW; ++cc) asm volatile("" : "+r"(v[cc].x), "+r"(v[cc].y), "+r"(v[cc].z), "+r"(v[cc].w));
      const int rb = rank * RW + j;
      const uint32_t offRow = buf * BUFB + rb * SW + (rb / 16) * 32;
#pragma unroll
      for (int cc = 0; cc < CPW; ++cc) {
        const int c = h * CPW + cc;
        const int colBase = c * 256, col = colBase + lane * 8;
        uint2 o2 = normQuant8(v[cc], rstd, wsm[col / 4], wsm[col / 4 + 1], scale, amax);
        *reinterpret_cast<uint2 *>(reinterpret_cast<uint8_t *>(out) + (size_t)row * C + col) = o2;
        const int dest = colBase / SW, lc = colBase % SW + lane * 8;
        if (DBG != 1) st_async8(mapa(smA + offRow + lc, dest), o2, mapa(barA + 8 * buf, dest));
      }
    }
  } else if (DBG != 1) {
    const int tt = threadIdx.x - ROWW * 32;
    for (int i = 0; i < iters; ++i) {
      const int buf = i % NBUF, u = i / NBUF, b = cid + i * K;
      mb_wait(barA + 8 * buf, u & 1);
      const uint8_t *bb = sm + buf * BUFB;
#pragma unroll 1
      for (int it = 0; it < SW / TT; ++it) {
        const int un = it * TT + tt, g = un % 4, cgp = un / 4;
        const int col = cgp * 4;
        uint32_t wd[16];
#pragma unroll
        for (int jj = 0; jj < 16; ++jj) wd[jj] = *reinterpret_cast<const uint32_t *>(bb + (g * 16 + jj) * SW + col + g * 32);
        uint32_t o[4][4];
#pragma unroll
        for (int gg = 0; gg < 4; ++gg)
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            uint32_t lo = __byte_perm(wd[4 * gg], wd[4 * gg + 1], k | ((4 + k) << 4));
            uint32_t hi = __byte_perm(wd[4 * gg + 2], wd[4 * gg + 3], k | ((4 + k) << 4));
            o[k][gg] = __byte_perm(lo, hi, 0x5410);
          }
#pragma unroll
        for (int k = 0; k < 4; ++k)
          *reinterpret_cast<uint4 *>(outT + (size_t)(rank * SW + col + k) * R + b * 64 + g * 16) =
              make_uint4(o[k][0], o[k][1], o[k][2], o[k][3]);
      }
      asm volatile("bar.sync 1, %0;" :: "r"(TT) : "memory");
      if (tt == 0) {
        if (i + NBUF < iters) mb_expect_arrive(barA + 8 * buf, 64 * SW);
        for (int s2 = 0; s2 < N; ++s2) mb_arrive_remote(mapa(barA + 8 * (NBUF + buf), s2));
      }
    }
  }
  cl_arrive();
  cl_wait();
  blockAmax(amax, red, amaxOut);
}
// reference with the sum order of clE<S>: per warp-part partial (lane sums, xor tree), parts added in order
template <int S>
__global__ void refKernelS(const __nv_bfloat16 *x, const float *w, const float *scale_p, uint8_t *out, uint8_t *outT) {
  int row = blockIdx.x, lane = threadIdx.x;
  const uint4 *xr = reinterpret_cast<const uint4 *>(x + (size_t)row * C);
  constexpr int CPW = 16 / S;
  float tot = 0;
  for (int h = 0; h < S; ++h) {
    uint4 v[CPW];
    for (int cc = 0; cc < CPW; ++cc) v[cc] = xr[(h * CPW + cc) * 32 + lane];
    tot += partialSS(v, CPW);
  }
  float rstd = rsqrtf(tot / C + 1e-5f);
  for (int c = lane; c < C; c += 32) {
    float y = yval(__bfloat162float(x[(size_t)row * C + c]), rstd, w[c]);
    __nv_fp8_e4m3 q(y * *scale_p);
    uint8_t byte = *reinterpret_cast<uint8_t *>(&q);
    out[(size_t)row * C + c] = byte;
    outT[(size_t)c * R + row] = byte;
  }
}
// ---------------------------------------------------------------- baseline (two launches) + reference
__global__ void __launch_bounds__(64) rowKernel(const uint4 *x, const float4 *w, const float *scale_p, uint2 *out, float *amaxOut) {
  __shared__ float red[8];
  constexpr int CH = 8;
  int t = threadIdx.x, row = blockIdx.x;
  float scale = *scale_p, amax = 0;
  uint4 v[CH];
  const uint4 *xr = x + (size_t)row * (C / 8);
#pragma unroll
  for (int c = 0; c < CH; ++c) v[c] = xr[c * 64 + t];
  const float ss = partialSS(v, CH);
  if ((t & 31) == 0) red[t >> 5] = ss;
  __syncthreads();
  float rstd = rsqrtf((red[0] + red[1]) / C + 1e-5f);
#pragma unroll
  for (int c = 0; c < CH; ++c) {
    out[(size_t)row * (C / 8) + c * 64 + t] =
        normQuant8(v[c], rstd, w[(c * 64 + t) * 2], w[(c * 64 + t) * 2 + 1], scale, amax);
  }
  blockAmax(amax, red, amaxOut);
}
__global__ void __launch_bounds__(256) tileKernel(const uint32_t *in, uint32_t *outT) {
  __shared__ uint32_t sh[64 * 17];
  int tile = gridDim.x - 1 - blockIdx.x;
  int t = threadIdx.x, row0 = (tile / (C / 64)) * 64, col0 = (tile % (C / 64)) * 64;
  int sc = t % 16, sr = t / 16;
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = in[((size_t)(row0 + sr * 4 + i) * C + col0 + sc * 4) / 4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    uint32_t lo = __byte_perm(w[0], w[1], k | ((4 + k) << 4)), hi = __byte_perm(w[2], w[3], k | ((4 + k) << 4));
    sh[(sc * 4 + k) * 17 + sr] = __byte_perm(lo, hi, 0x5410);
  }
  __syncthreads();
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    int srow = t / 16 + p * 16;
    outT[((size_t)(col0 + srow) * R + row0 + sc * 4) / 4] = sh[srow * 17 + sc];
  }
}
// Reference: a warp per row, same sum order as the warp-per-row kernels; element-wise writes of both layouts.
__global__ void refKernel(const __nv_bfloat16 *x, const float *w, const float *scale_p, uint8_t *out, uint8_t *outT, float *amaxOut) {
  int row = blockIdx.x, lane = threadIdx.x;
  const uint4 *xr = reinterpret_cast<const uint4 *>(x + (size_t)row * C);
  uint4 v[16];
  for (int c = 0; c < 16; ++c) v[c] = xr[c * 32 + lane];
  float rstd = rsqrtf(partialSS(v, 16) / C + 1e-5f);
  float amax = 0;
  for (int c = lane; c < C; c += 32) {
    float y = yval(__bfloat162float(x[(size_t)row * C + c]), rstd, w[c]);
    amax = fmaxf(amax, fabsf(y));
    __nv_fp8_e4m3 q(y * *scale_p);
    uint8_t byte = *reinterpret_cast<uint8_t *>(&q);
    out[(size_t)row * C + c] = byte;
    outT[(size_t)c * R + row] = byte;
  }
  for (int o = 16; o; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(~0u, amax, o));
  if (lane == 0) atomicMax((unsigned *)amaxOut, __float_as_uint(amax));
}

#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1); } } while (0)
static float fp8f(uint8_t b) {
  __nv_fp8_e4m3 q; *reinterpret_cast<uint8_t *>(&q) = b; return float(q);
}
int main(int argc, char **argv) {
  const char *filt = argc > 1 ? argv[1] : nullptr;
  size_t xb = (size_t)R * C * 2, ob = (size_t)R * C;
  void *x, *w, *scale, *out, *outT, *amax, *flush, *rout, *routT;
  CK(cudaMalloc(&x, xb)); CK(cudaMalloc(&w, C * 4)); CK(cudaMalloc(&scale, 4)); CK(cudaMalloc(&out, ob));
  CK(cudaMalloc(&outT, ob)); CK(cudaMalloc(&rout, ob)); CK(cudaMalloc(&routT, ob)); CK(cudaMalloc(&amax, 4));
  CK(cudaMalloc(&flush, 256 << 20));
  {
    std::vector<__nv_bfloat16> hx((size_t)R * C); uint32_t s = 1;
    for (auto &v : hx) { s = s * 1664525u + 1013904223u; v = __float2bfloat16(((s >> 8) / 16777216.0f - 0.5f) * 4); }
    CK(cudaMemcpy(x, hx.data(), xb, cudaMemcpyHostToDevice));
    std::vector<float> hw(C); for (int i = 0; i < C; ++i) hw[i] = 0.5f + (i % 7) * 0.1f;
    CK(cudaMemcpy(w, hw.data(), C * 4, cudaMemcpyHostToDevice));
    float sc = 8.0f; CK(cudaMemcpy(scale, &sc, 4, cudaMemcpyHostToDevice));
  }
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  auto timeIt = [&](const std::function<void()> &f) {
    std::vector<float> ms;
    for (int r = 0; r < 21; ++r) {
      cudaMemsetAsync(amax, 0, 4);
      cudaMemsetAsync(flush, r, 256 << 20);
      cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b);
      float m; cudaEventElapsedTime(&m, a, b); ms.push_back(m);
    }
    std::sort(ms.begin(), ms.end()); return ms[10];
  };
  double copyBW; float copyMs = 0;
  if (getenv("COPYBW")) copyBW = atof(getenv("COPYBW"));
  else {
    void *ca, *cb; size_t cbytes = (size_t)2 << 30; CK(cudaMalloc(&ca, cbytes)); CK(cudaMalloc(&cb, cbytes));
    copyMs = timeIt([&] { cudaMemcpyAsync(cb, ca, cbytes, cudaMemcpyDeviceToDevice); });
    copyBW = 2.0 * cbytes / (copyMs * 1e6);
    CK(cudaFree(ca)); CK(cudaFree(cb));
  }
  double bytes = xb + 2.0 * ob + C * 4;
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  const bool base = !filt || !strcmp(filt, "BASE");
  if (base) printf("%s, %d SMs; copy %.4f ms = %.0f GB/s\n", prop.name, prop.multiProcessorCount, copyMs, copyBW);
  // reference
  CK(cudaMemset(amax, 0, 4));
  refKernel<<<R, 32>>>((__nv_bfloat16 *)x, (float *)w, (float *)scale, (uint8_t *)rout, (uint8_t *)routT, (float *)amax);
  CK(cudaDeviceSynchronize());
  float refAmax; CK(cudaMemcpy(&refAmax, amax, 4, cudaMemcpyDeviceToHost));
  std::vector<uint8_t> ref(ob), refT(ob), got(ob), gotT(ob);
  CK(cudaMemcpy(ref.data(), rout, ob, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(refT.data(), routT, ob, cudaMemcpyDeviceToHost));
  if (base) printf("ref amax %.6f\n", refAmax);
  auto check = [&](const char *name) -> std::string {
    CK(cudaDeviceSynchronize());
    float am; CK(cudaMemcpy(&am, amax, 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(got.data(), out, ob, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(gotT.data(), outT, ob, cudaMemcpyDeviceToHost));
    size_t bad = 0, badT = 0; float md = 0;
    for (size_t i = 0; i < ob; ++i) if (got[i] != ref[i]) { ++bad; md = std::max(md, fabsf(fp8f(got[i]) - fp8f(ref[i]))); }
    for (size_t i = 0; i < ob; ++i) if (gotT[i] != refT[i]) { ++badT; md = std::max(md, fabsf(fp8f(gotT[i]) - fp8f(refT[i]))); }
    char buf[200];
    if (!bad && !badT && am == refAmax) snprintf(buf, sizeof buf, "exact");
    else snprintf(buf, sizeof buf, "MISMATCH out %zu outT %zu maxdiff %g amax %g vs %g", bad, badT, md, am, refAmax);
    return buf;
  };
  auto report = [&](const char *name, float ms, const std::string &ok) {
    printf("%-44s %8.2f us  %5.1f%% of copy  %s\n", name, ms * 1e3, 100 * bytes / (ms * 1e6) / copyBW, ok.c_str());
    fflush(stdout);
  };
  // baseline
  if (base) {
    auto f = [&] { rowKernel<<<R, 64>>>((uint4 *)x, (float4 *)w, (float *)scale, (uint2 *)out, (float *)amax);
                   tileKernel<<<R / 64 * C / 64, 256>>>((uint32_t *)out, (uint32_t *)outT); };
    CK(cudaMemset(out, 0xff, ob)); CK(cudaMemset(outT, 0xff, ob));
    float ms = timeIt(f);
    report("two launches (row + tile)", ms, check("base"));
    float rms = timeIt([&] { rowKernel<<<R, 64>>>((uint4 *)x, (float4 *)w, (float *)scale, (uint2 *)out, (float *)amax); });
    printf("row kernel alone %.2f us = %.1f%% of copy for its 96 MiB (x + out)\n", rms * 1e3, 100 * (xb + ob) / (rms * 1e6) / copyBW);
  }
  auto runCluster = [&](const char *name, const void *kern, int N, int threads, size_t dsmem, int gridMode, auto launch) {
    if (filt && (base || !strstr(name, filt))) return;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dsmem));
    if (N > 8) CK(cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = N; attr[0].val.clusterDim.y = 1; attr[0].val.clusterDim.z = 1;
    cfg.blockDim = dim3(threads); cfg.dynamicSmemBytes = dsmem; cfg.attrs = attr; cfg.numAttrs = 1;
    cfg.gridDim = dim3(NB * N);
    int ncl = 0;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&ncl, kern, &cfg);
    if (e) { printf("%-44s occupancy error %s\n", name, cudaGetErrorString(e)); cudaGetLastError(); return; }
    if (ncl == 0) { printf("%-44s cannot be resident (max active clusters 0)\n", name); return; }
    cudaFuncAttributes fa; CK(cudaFuncGetAttributes(&fa, kern));
    int clusters = gridMode == 0 ? std::min(ncl, NB) : NB;
    cfg.gridDim = dim3(clusters * N);
    char nm[160]; snprintf(nm, sizeof nm, "%s [maxcl %d grid %d cl, %d regs, %zu+%zu smem]", name, ncl, clusters, fa.numRegs, dsmem, fa.sharedSizeBytes);
    CK(cudaMemset(out, 0xff, ob)); CK(cudaMemset(outT, 0xff, ob));
    float ms = timeIt([&] { launch(cfg); });
    CK(cudaGetLastError());
    report(nm, ms, check(name));
  };
#define RUNE(NAME, N, S, ROWW, TW, NBUF, SLOTS, MINB, ...)                                                            \
  {                                                                                                                    \
    auto k = clE<N, S, ROWW, TW, NBUF, SLOTS, MINB, ##__VA_ARGS__>;                                                    \
    size_t ds = (size_t)NBUF * (64 * (C / N) + 128) + C * 4 + SLOTS * C * 2;                                           \
    bool sel = !filt || (!base && strstr(NAME, filt));                                                                 \
    if (sel && S > 1) {                                                                                                \
      refKernelS<S><<<R, 32>>>((__nv_bfloat16 *)x, (float *)w, (float *)scale, (uint8_t *)rout, (uint8_t *)routT);   \
      CK(cudaDeviceSynchronize());                                                                                     \
      CK(cudaMemcpy(ref.data(), rout, ob, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(refT.data(), routT, ob, cudaMemcpyDeviceToHost)); \
    }                                                                                                                  \
    runCluster(NAME, (const void *)k, N, (ROWW + TW) * 32, ds, 0, [&](cudaLaunchConfig_t &cfg) {                       \
      CK(cudaLaunchKernelEx(&cfg, k, (const uint4 *)x, (const float4 *)w, (const float *)scale, (uint2 *)out,          \
                            (uint8_t *)outT, (float *)amax));                                                          \
    });                                                                                                                \
    if (sel && S > 1) {                                                                                                \
      refKernel<<<R, 32>>>((__nv_bfloat16 *)x, (float *)w, (float *)scale, (uint8_t *)rout, (uint8_t *)routT, (float *)amax); \
      CK(cudaDeviceSynchronize());                                                                                     \
      CK(cudaMemcpy(ref.data(), rout, ob, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(refT.data(), routT, ob, cudaMemcpyDeviceToHost)); \
    }                                                                                                                  \
  }
  RUNE("[e4] E N=2 S=2 16rw+4tw 1buf ring8", 2, 2, 16, 4, 1, 8, 1);
  RUNE("[e5] E N=8 S=2 16rw+4tw 2buf ring16", 8, 2, 16, 4, 2, 16, 1);
  RUNE("[e7] E N=2 S=4 24rw+8tw 1buf ring6", 2, 4, 24, 8, 1, 6, 1);
  RUNE("[ea] E N=2 S=4 28rw+4tw 1buf ring7", 2, 4, 28, 4, 1, 7, 1);
  RUNE("[eb] E N=2 S=2 12rw+4tw 1buf ring6", 2, 2, 12, 4, 1, 6, 1);
  RUNE("[y1] DBG E rows only N=2 S=2 ring8", 2, 2, 16, 4, 1, 8, 1, 1);
  return 0;
}
