// cuBLASLt GEMMs against a CPU reference. Inputs are drawn already rounded to
// their formats (exact BF16 / E4M3 / E5M2 values, through the interpreter's
// exact casts), so the reference sees the very numbers the GPU multiplies and
// the only differences are accumulation order and the output rounding.

#include "support/Numerics.h"
#include "runtime/blas/Gemm.h"
#include "tests/gpu/runtime/GpuTest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace octet::test {
namespace {

using blas::Epilogue;
using blas::GemmDesc;
namespace nx = octet::numerics;

std::vector<uint8_t> encode(DType t, const std::vector<float> &v) {
  size_t width = dtypeBytes(t);
  std::vector<uint8_t> out(v.size() * width);
  for (size_t i = 0; i < v.size(); ++i)
    nx::encodeFloat(t, v[i], &out[width * i]);
  return out;
}

std::vector<float> decode(DType t, const std::vector<uint8_t> &b) {
  size_t width = dtypeBytes(t);
  std::vector<float> out(b.size() / width);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = nx::decodeFloat(t, &b[width * i]);
  return out;
}

std::vector<float> randomValues(DType t, size_t n, float stddev,
                                uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.f, stddev);
  std::vector<float> v(n);
  for (float &x : v)
    x = nx::roundTo(t, dist(rng));
  return v;
}

double gelu(double x) {
  const double c = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

struct Inputs {
  std::vector<float> a, b, bias, dInit;
  float aScale = 1, bScale = 1, dScale = 1;
};

struct Outputs {
  std::vector<float> d, aux, bias;
  float amax = 0;
};

// op(A)·op(B) in double, from the row-major stored operands.
std::vector<double> referenceProduct(const GemmDesc &g, const Inputs &in) {
  std::vector<double> out(size_t(g.m * g.n), 0.0);
  int64_t lda = g.packedLda(), ldb = g.packedLdb();
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double s = 0;
      for (int64_t k = 0; k < g.k; ++k) {
        double a = g.transposeA ? in.a[size_t(k * lda + i)]
                                : in.a[size_t(i * lda + k)];
        double b = g.transposeB ? in.b[size_t(j * ldb + k)]
                                : in.b[size_t(k * ldb + j)];
        s += a * b;
      }
      out[size_t(i * g.n + j)] = s * double(in.aScale) * double(in.bScale);
    }
  return out;
}

Outputs runGemm(const GemmDesc &g, const Inputs &in) {
  Outputs out;
  auto handle = unwrap(blas::BlasHandle::create());
  if (!handle)
    return out;
  auto gemm = unwrap(blas::Gemm::create(handle->get(), g));
  if (!gemm)
    return out;
  size_t aElems = size_t(g.m * g.k), bElems = size_t(g.k * g.n);
  DeviceBuffer a(aElems * dtypeBytes(g.a));
  DeviceBuffer b(bElems * dtypeBytes(g.b));
  DeviceBuffer d(size_t(g.m * g.n) * dtypeBytes(g.d));
  DeviceBuffer aux(size_t(g.m * g.n) * dtypeBytes(g.auxType));
  size_t biasLen = g.epilogue == Epilogue::BiasGrad ? size_t(g.m) : size_t(g.n);
  DeviceBuffer bias(biasLen * dtypeBytes(g.biasType));
  // 16 bytes apart: cuBLASLt wants aligned pointers.
  DeviceBuffer scales(16 * sizeof(float));
  DeviceBuffer ws(g.workspaceBytes);
  a.upload(encode(g.a, in.a));
  b.upload(encode(g.b, in.b));
  if (g.accumulate)
    d.upload(encode(g.d, in.dInit));
  else
    d.poison();
  aux.poison();
  if (g.epilogue == Epilogue::BiasGrad)
    bias.poison();
  else if (!in.bias.empty())
    bias.upload(encode(g.biasType, in.bias));
  std::vector<float> sc(16, 0.f);
  sc[0] = in.aScale, sc[4] = in.bScale, sc[8] = in.dScale, sc[12] = -1.f;
  scales.upload(sc);
  blas::GemmArgs args;
  args.a = a.get(), args.b = b.get(), args.d = d.get();
  args.bias = bias.get(), args.aux = aux.get();
  args.aScale = scales.get(), args.bScale = scales.get() + 16;
  args.dScale = scales.get() + 32, args.amaxD = scales.get() + 48;
  args.workspace = ws.get();
  Status st = gemm->run(args, nullptr);
  EXPECT_TRUE(st.isOk()) << st.message();
  out.d = decode(g.d, d.download<uint8_t>());
  out.aux = decode(g.auxType, aux.download<uint8_t>());
  out.bias = decode(g.biasType, bias.download<uint8_t>());
  out.amax = scales.download<float>()[12];
  return out;
}

// ‖got − want‖ / ‖want‖, failing on any NaN.
double relError(const std::vector<float> &got, const std::vector<double> &want) {
  double num = 0, den = 0;
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (!std::isfinite(got[i]))
      return INFINITY;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

GemmDesc desc(const char *name, int64_t m, int64_t n, int64_t k, DType a,
              DType b, DType d, bool ta, bool tb) {
  GemmDesc g;
  g.name = name;
  g.m = m, g.n = n, g.k = k;
  g.a = a, g.b = b, g.d = d;
  g.transposeA = ta, g.transposeB = tb;
  g.workspaceBytes = 32u << 20;
  return g;
}

Inputs inputsFor(const GemmDesc &g, uint64_t seed) {
  Inputs in;
  in.a = randomValues(g.a, size_t(g.m * g.k), 1.0f, seed);
  in.b = randomValues(g.b, size_t(g.k * g.n), 1.0f, seed + 1);
  return in;
}

// BF16 output: one rounding of a value whose relative error bound is 2^-9.
constexpr double kBf16Tol = 4e-3;

TEST(GemmBf16, FpropXTimesWTransposed) {
  auto g = desc("bf16.fprop", 128, 256, 512, DType::BF16, DType::BF16,
                DType::BF16, false, true);
  Inputs in = inputsFor(g, 1);
  Outputs out = runGemm(g, in);
  EXPECT_LT(relError(out.d, referenceProduct(g, in)), kBf16Tol);
}

TEST(GemmBf16, DgradDyTimesW) {
  // dX[M, K] = dY[M, N] · W[N, K]: W is not transposed.
  auto g = desc("bf16.dgrad", 128, 384, 256, DType::BF16, DType::BF16,
                DType::BF16, false, false);
  Inputs in = inputsFor(g, 2);
  Outputs out = runGemm(g, in);
  EXPECT_LT(relError(out.d, referenceProduct(g, in)), kBf16Tol);
}

TEST(GemmBf16, WgradAccumulatesIntoF32) {
  // dW[N, K] += dY^T · X with dY stored [T, N] and X stored [T, K].
  auto g = desc("bf16.wgrad", 192, 256, 512, DType::BF16, DType::BF16,
                DType::F32, true, false);
  g.accumulate = true;
  Inputs in = inputsFor(g, 3);
  in.dInit = randomValues(DType::F32, size_t(g.m * g.n), 4.0f, 33);
  Outputs out = runGemm(g, in);
  auto want = referenceProduct(g, in);
  for (size_t i = 0; i < want.size(); ++i)
    want[i] += in.dInit[i];
  EXPECT_LT(relError(out.d, want), 1e-5);
}

TEST(GemmBf16, BiasEpilogue) {
  auto g = desc("bf16.bias", 128, 256, 256, DType::BF16, DType::BF16,
                DType::BF16, false, true);
  g.epilogue = Epilogue::Bias;
  Inputs in = inputsFor(g, 4);
  in.bias = randomValues(DType::BF16, size_t(g.n), 4.0f, 44);
  Outputs out = runGemm(g, in);
  auto want = referenceProduct(g, in);
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j)
      want[size_t(i * g.n + j)] += in.bias[size_t(j)];
  EXPECT_LT(relError(out.d, want), kBf16Tol);
}

TEST(GemmBf16, GeluAuxKeepsPreActivation) {
  auto g = desc("bf16.gelu_aux", 128, 256, 256, DType::BF16, DType::BF16,
                DType::BF16, false, true);
  g.epilogue = Epilogue::BiasGeluAux;
  g.auxLd = g.n;
  Inputs in = inputsFor(g, 5);
  in.bias = randomValues(DType::BF16, size_t(g.n), 1.0f, 55);
  Outputs out = runGemm(g, in);
  auto pre = referenceProduct(g, in);
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j)
      pre[size_t(i * g.n + j)] += in.bias[size_t(j)];
  std::vector<double> act(pre.size());
  for (size_t i = 0; i < pre.size(); ++i)
    act[i] = gelu(pre[i]);
  EXPECT_LT(relError(out.aux, pre), kBf16Tol);
  EXPECT_LT(relError(out.d, act), kBf16Tol);
}

TEST(GemmBf16, GeluEpilogue) {
  auto g = desc("bf16.gelu", 64, 128, 256, DType::BF16, DType::BF16,
                DType::BF16, false, true);
  g.epilogue = Epilogue::Gelu;
  Inputs in = inputsFor(g, 6);
  Outputs out = runGemm(g, in);
  auto want = referenceProduct(g, in);
  for (double &x : want)
    x = gelu(x);
  EXPECT_LT(relError(out.d, want), kBf16Tol);
}

TEST(GemmBf16, BiasGradOfWgrad) {
  // dW[N, K] = dY^T · X and db[N] = sum over tokens of dY, in one GEMM.
  auto g = desc("bf16.wgrad_bgrad", 128, 256, 512, DType::BF16, DType::BF16,
                DType::BF16, true, false);
  g.epilogue = Epilogue::BiasGrad;
  g.biasType = DType::BF16;
  Inputs in = inputsFor(g, 7);
  Outputs out = runGemm(g, in);
  EXPECT_LT(relError(out.d, referenceProduct(g, in)), kBf16Tol);
  std::vector<double> db(size_t(g.m), 0.0);
  for (int64_t t = 0; t < g.k; ++t)
    for (int64_t i = 0; i < g.m; ++i)
      db[size_t(i)] += in.a[size_t(t * g.m + i)];
  EXPECT_LT(relError(out.bias, db), kBf16Tol);
}

TEST(GemmFp8, FpropE4M3WithScalesAndFastAccum) {
  auto g = desc("fp8.fprop", 128, 256, 512, DType::F8E4M3FN, DType::F8E4M3FN,
                DType::BF16, false, true);
  g.aScale = g.bScale = true;
  g.fastAccum = true;
  Inputs in = inputsFor(g, 8);
  in.aScale = 0.5f, in.bScale = 0.125f;
  Outputs out = runGemm(g, in);
  EXPECT_LT(relError(out.d, referenceProduct(g, in)), 1e-2);
}

TEST(GemmFp8, AmaxOfBf16OutputIsRefusedWithAFix) {
  // cuBLASLt computes amax-of-D only for FP8 outputs; the runtime says so
  // before asking it.
  auto handle = unwrap(blas::BlasHandle::create());
  ASSERT_TRUE(handle);
  auto g = desc("fp8.fprop_amax", 128, 256, 512, DType::F8E4M3FN,
                DType::F8E4M3FN, DType::BF16, false, true);
  g.aScale = g.bScale = g.amaxD = true;
  auto gemm = blas::Gemm::create(handle->get(), g);
  ASSERT_FALSE(gemm.isOk());
  EXPECT_NE(gemm.status().message().find("amax-of-D only for FP8 outputs"),
            std::string::npos)
      << gemm.status().message();
}

TEST(GemmFp8, DgradE5M2GradTimesE4M3Weight) {
  // dX = dY · W with W^T stored [K, N] (K-major), full accumulation.
  auto g = desc("fp8.dgrad", 128, 256, 384, DType::F8E5M2, DType::F8E4M3FN,
                DType::BF16, false, true);
  g.aScale = g.bScale = true;
  Inputs in = inputsFor(g, 9);
  in.aScale = 2.0f, in.bScale = 0.25f;
  Outputs out = runGemm(g, in);
  EXPECT_LT(relError(out.d, referenceProduct(g, in)), kBf16Tol);
}

TEST(GemmFp8, WgradE5M2TimesE4M3AccumulatesF32) {
  // dW[N, K] += dY^T · X, both transposed copies K-major (K = tokens).
  auto g = desc("fp8.wgrad", 256, 128, 512, DType::F8E5M2, DType::F8E4M3FN,
                DType::F32, false, true);
  g.aScale = g.bScale = true;
  g.accumulate = true;
  Inputs in = inputsFor(g, 10);
  in.aScale = 0.5f, in.bScale = 0.5f;
  in.dInit = randomValues(DType::F32, size_t(g.m * g.n), 8.0f, 1010);
  Outputs out = runGemm(g, in);
  auto want = referenceProduct(g, in);
  for (size_t i = 0; i < want.size(); ++i)
    want[i] += in.dInit[i];
  // Without fast accumulation Hopper's FP8 MMA still accumulates a few
  // products in reduced precision before promoting to f32: about 6e-5
  // measured on an H200, against 1e-7 for the BF16 wgrad above.
  EXPECT_LT(relError(out.d, want), 2e-4);
}

TEST(GemmFp8, E4M3OutputWithDScaleAndAmax) {
  auto g = desc("fp8.out", 128, 128, 256, DType::F8E4M3FN, DType::F8E4M3FN,
                DType::F8E4M3FN, false, true);
  g.aScale = g.bScale = g.dScale = g.amaxD = true;
  Inputs in = inputsFor(g, 11);
  in.aScale = 0.25f, in.bScale = 0.25f, in.dScale = 8.0f;
  Outputs out = runGemm(g, in);
  auto pre = referenceProduct(g, in);
  double amax = 0;
  std::vector<double> want(pre.size());
  size_t exact = 0;
  for (size_t i = 0; i < pre.size(); ++i) {
    amax = std::max(amax, std::fabs(pre[i]));
    want[i] = nx::roundToE4M3(float(pre[i] * in.dScale));
    exact += out.d[i] == float(want[i]);
  }
  // Rounding to E4M3 (3 mantissa bits) of a sum the GPU accumulates in
  // another order: almost every element matches exactly, the rest by one
  // step, so the norm error stays well under one E4M3 ulp (2^-3).
  EXPECT_GT(double(exact), 0.95 * double(want.size()));
  EXPECT_LT(relError(out.d, want), 2e-2);
  // amax is of D before the D scale: what the next scale update needs.
  EXPECT_NEAR(out.amax, amax, 1e-3 * amax);
}

TEST(GemmFp8, BiasGeluEpilogue) {
  auto g = desc("fp8.bias_gelu", 128, 256, 256, DType::F8E4M3FN,
                DType::F8E4M3FN, DType::BF16, false, true);
  g.aScale = g.bScale = true;
  g.epilogue = Epilogue::BiasGelu;
  g.biasType = DType::BF16;
  Inputs in = inputsFor(g, 12);
  in.aScale = 0.0625f, in.bScale = 1.0f;
  in.bias = randomValues(DType::BF16, size_t(g.n), 1.0f, 1212);
  Outputs out = runGemm(g, in);
  auto want = referenceProduct(g, in);
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double &x = want[size_t(i * g.n + j)];
      x = gelu(x + in.bias[size_t(j)]);
    }
  EXPECT_LT(relError(out.d, want), kBf16Tol);
}

TEST(GemmFp8, RejectsNonKMajorLayoutWithAFix) {
  auto handle = unwrap(blas::BlasHandle::create());
  ASSERT_TRUE(handle);
  auto g = desc("fp8.bad", 128, 128, 128, DType::F8E4M3FN, DType::F8E4M3FN,
                DType::BF16, false, false);
  auto gemm = blas::Gemm::create(handle->get(), g);
  ASSERT_FALSE(gemm.isOk());
  EXPECT_NE(gemm.status().message().find("K-major"), std::string::npos)
      << gemm.status().message();
  EXPECT_NE(gemm.status().message().find("fp8.bad"), std::string::npos);
}

// Block-scaled FP8 (the blockwise recipe): each operand's factors in the
// layout Gemm.h states for its mode, every factor a power of two between
// 2^-4 and 2^4, so the reference's scaled products are exact. Factors that
// belong to no block (the 16-byte padding of a 128x128 row) are NaN: a
// kernel that reads them poisons D.
struct BlockOperand {
  blas::ScaleMode mode;
  int64_t rows, k;
  std::vector<float> factors;
  int64_t stride() const {
    return mode == blas::ScaleMode::Vec128 ? rows : (k / 128 + 3) / 4 * 4;
  }
  float factor(int64_t r, int64_t kk) const {
    return mode == blas::ScaleMode::Vec128
               ? factors[size_t(kk / 128 * stride() + r)]
               : factors[size_t(r / 128 * stride() + kk / 128)];
  }
};

BlockOperand blockOperand(blas::ScaleMode mode, int64_t rows, int64_t k,
                          uint64_t seed) {
  BlockOperand op{mode, rows, k, {}};
  int64_t count = mode == blas::ScaleMode::Vec128
                      ? k / 128 * rows
                      : rows / 128 * op.stride();
  op.factors.assign(size_t(count), NAN);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> exponent(-4, 4);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t kb = 0; kb < k / 128; ++kb) {
      size_t at = mode == blas::ScaleMode::Vec128
                      ? size_t(kb * op.stride() + r)
                      : size_t(r / 128 * op.stride() + kb);
      if (mode == blas::ScaleMode::Vec128 || r % 128 == 0)
        op.factors[at] = std::ldexp(1.0f, exponent(rng));
    }
  return op;
}

// `configurations` > 0: the algorithm is the fastest of the heuristic's
// answers and the configurations added to them (Gemm::create), timed on
// these operands first, as octet-run chooses.
std::vector<float> runBlockScaled(const GemmDesc &g, const Inputs &in,
                                  const BlockOperand &fa,
                                  const BlockOperand &fb,
                                  int configurations = 0) {
  auto handle = unwrap(blas::BlasHandle::create());
  if (!handle)
    return {};
  auto gemm = unwrap(blas::Gemm::create(handle->get(), g, {}, nullptr,
                                        configurations ? 8 : 1,
                                        configurations));
  if (!gemm)
    return {};
  DeviceBuffer a(size_t(g.m * g.k) * dtypeBytes(g.a));
  DeviceBuffer b(size_t(g.k * g.n) * dtypeBytes(g.b));
  DeviceBuffer d(size_t(g.m * g.n) * dtypeBytes(g.d));
  DeviceBuffer sa(fa.factors.size() * sizeof(float));
  DeviceBuffer sb(fb.factors.size() * sizeof(float));
  DeviceBuffer ws(g.workspaceBytes);
  a.upload(encode(g.a, in.a));
  b.upload(encode(g.b, in.b));
  sa.upload(fa.factors);
  sb.upload(fb.factors);
  if (g.accumulate)
    d.upload(encode(g.d, in.dInit));
  else
    d.poison();
  blas::GemmArgs args;
  args.a = a.get(), args.b = b.get(), args.d = d.get();
  args.aScale = sa.get(), args.bScale = sb.get();
  args.workspace = ws.get();
  if (configurations) {
    EXPECT_GE(gemm->candidates(), gemm->heuristicAnswers());
    EXPECT_LE(gemm->candidates(), std::max(8, configurations));
    auto us = gemm->tune(args, nullptr, 2);
    EXPECT_TRUE(us.isOk()) << us.status().message();
    // The timing calls accumulated into D.
    if (g.accumulate)
      d.upload(encode(g.d, in.dInit));
  }
  Status st = gemm->run(args, nullptr);
  EXPECT_TRUE(st.isOk()) << st.message();
  return decode(g.d, d.download<uint8_t>());
}

std::vector<double> blockReference(const GemmDesc &g, const Inputs &in,
                                   const BlockOperand &fa,
                                   const BlockOperand &fb) {
  std::vector<double> out(size_t(g.m * g.n), 0.0);
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double s = g.accumulate ? in.dInit[size_t(i * g.n + j)] : 0.0;
      for (int64_t k = 0; k < g.k; ++k)
        s += double(in.a[size_t(i * g.k + k)]) * fa.factor(i, k) *
             double(in.b[size_t(j * g.k + k)]) * fb.factor(j, k);
      out[size_t(i * g.n + j)] = s;
    }
  return out;
}

GemmDesc blockDesc(const char *name, int64_t m, int64_t n, int64_t k, DType a,
                   DType b, DType d, blas::ScaleMode am, blas::ScaleMode bm) {
  GemmDesc g = desc(name, m, n, k, a, b, d, false, true);
  g.aScale = g.bScale = true;
  g.aScaleMode = am, g.bScaleMode = bm;
  return g;
}

// Random operands and factors (seed, seed + 2, seed + 3), D against the
// reference within `tolerance`.
void expectBlockScaled(const GemmDesc &g, uint64_t seed, double tolerance,
                       int configurations = 0) {
  Inputs in = inputsFor(g, seed);
  if (g.accumulate)
    in.dInit = randomValues(DType::F32, size_t(g.m * g.n), 4.0f, seed + 1);
  auto fa = blockOperand(g.aScaleMode, g.m, g.k, seed + 2);
  auto fb = blockOperand(g.bScaleMode, g.n, g.k, seed + 3);
  EXPECT_LT(relError(runBlockScaled(g, in, fa, fb, configurations),
                     blockReference(g, in, fa, fb)),
            tolerance);
}

// fprop: x in 1x128 tiles (VEC128) times w in 128x128 blocks; K = 384
// gives 3 K blocks a row of w's factors, padded to 4.
TEST(GemmBlockScaled, FpropTilesTimesBlocks) {
  expectBlockScaled(blockDesc("block.fprop", 256, 384, 384, DType::F8E4M3FN,
                              DType::F8E4M3FN, DType::BF16,
                              blas::ScaleMode::Vec128,
                              blas::ScaleMode::Blk128x128),
                    21, kBf16Tol);
}

// dgrad: an E5M2 gradient in tiles times the K-major copy of w in blocks.
TEST(GemmBlockScaled, DgradE5M2TilesTimesE4M3Blocks) {
  expectBlockScaled(blockDesc("block.dgrad", 128, 512, 768, DType::F8E5M2,
                              DType::F8E4M3FN, DType::BF16,
                              blas::ScaleMode::Vec128,
                              blas::ScaleMode::Blk128x128),
                    31, kBf16Tol);
}

// wgrad: dy^T and x^T, both in 1x128 tiles along the tokens, accumulated
// into an f32 gradient. The bound is GemmFp8.WgradE5M2TimesE4M3AccumulatesF32's:
// Hopper's FP8 MMA accumulates a few products in reduced precision before
// each promotion to f32.
TEST(GemmBlockScaled, WgradTilesTimesTilesAccumulatesF32) {
  auto g = blockDesc("block.wgrad", 384, 256, 512, DType::F8E4M3FN,
                     DType::F8E4M3FN, DType::F32, blas::ScaleMode::Vec128,
                     blas::ScaleMode::Vec128);
  g.accumulate = true;
  expectBlockScaled(g, 41, 2e-4);
}

// The configurations added where cuBLASLt's heuristic gives few answers
// (half of the blockwise bundles' descriptors on sm_90): the fastest still
// computes the product.
TEST(GemmBlockScaled, TimedConfigurationsComputeTheProduct) {
  expectBlockScaled(blockDesc("block.fprop.timed", 256, 384, 384,
                              DType::F8E4M3FN, DType::F8E4M3FN, DType::BF16,
                              blas::ScaleMode::Vec128,
                              blas::ScaleMode::Blk128x128),
                    51, kBf16Tol, 64);
  auto g = blockDesc("block.wgrad.timed", 384, 256, 512, DType::F8E4M3FN,
                     DType::F8E4M3FN, DType::F32, blas::ScaleMode::Vec128,
                     blas::ScaleMode::Vec128);
  g.accumulate = true;
  expectBlockScaled(g, 61, 2e-4, 64);
}

TEST(GemmBlockScaled, RejectsMixedModesAndEpiloguesWithAFix) {
  auto handle = unwrap(blas::BlasHandle::create());
  ASSERT_TRUE(handle);
  auto mixed = blockDesc("block.mixed", 128, 128, 128, DType::F8E4M3FN,
                         DType::F8E4M3FN, DType::BF16, blas::ScaleMode::Vec128,
                         blas::ScaleMode::Tensorwise);
  auto st = blas::Gemm::create(handle->get(), mixed).status();
  EXPECT_NE(st.message().find("mixes block and tensorwise scales"),
            std::string::npos)
      << st.message();
  auto bias = blockDesc("block.bias", 128, 128, 128, DType::F8E4M3FN,
                        DType::F8E4M3FN, DType::BF16, blas::ScaleMode::Vec128,
                        blas::ScaleMode::Blk128x128);
  bias.epilogue = Epilogue::Bias;
  st = blas::Gemm::create(handle->get(), bias).status();
  EXPECT_NE(st.message().find("block-scaled with an epilogue"),
            std::string::npos)
      << st.message();
}

TEST(GemmCache, ReusesDescriptorAndRecordsAlgorithm) {
  auto handle = unwrap(blas::BlasHandle::create());
  ASSERT_TRUE(handle);
  blas::GemmCache cache(handle->get());
  auto g = desc("cache", 128, 128, 128, DType::BF16, DType::BF16, DType::BF16,
                false, true);
  auto first = unwrap(cache.get(g));
  auto again = unwrap(cache.get(g));
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first, again);
  EXPECT_EQ(cache.size(), 1u);
  std::string algo = first->algorithmBytes();
  EXPECT_EQ(algo.size(), sizeof(cublasLtMatmulAlgo_t));
  std::string note;
  auto replay = unwrap(blas::Gemm::create(handle->get(), g, algo, &note));
  ASSERT_TRUE(replay);
  EXPECT_TRUE(replay->usedRecordedAlgorithm()) << note;
  EXPECT_EQ(replay->algorithmBytes(), algo);
}

} // namespace
} // namespace octet::test
