// GPU tests of the kernels octet-fused-to-gpu generates (tests/gpu/codegen/
// layer-small.mlir: every fused kernel of a llama layer at 64 tokens, plus
// quantize-only kernels). Each kernel runs on fresh random inputs with its
// outputs poisoned (0xFF bytes: NaN in bf16, f32 and both FP8 formats), and
// is compared with a C++ reference of the region's ops:
// - FP8 casts (quant_*): bit for bit, on inputs that include ties, values
//   past the format's maximum, subnormals, infinities and NaN;
// - bf16 / FP8 results of fused kernels: within one unit in the last place
//   of the result format at the value's magnitude or the tensor's RMS,
//   whichever is larger (row sums run in another order on the GPU, and
//   exp/erf/sin/cos come from libdevice, 1-2 ulp in f32), on at most 1% of
//   the elements; every other element bit for bit;
// - f32 results (AdamW state, weight gradients): relative 1e-5 (2e-4 for
//   the column sums, whose order differs), absolute floor 1e-6 of the
//   tensor's largest magnitude.
// The interpreter is the project's oracle; these references follow the
// same op definitions (dialects/graph/GraphOps.td) with the same exact
// casts (compiler/Interpreter/Numerics.h).
//
// usage: octet-gpu-codegen-tests KERNEL_DIR [SEED]

#include "compiler/Interpreter/Numerics.h"
#include "tests/gpu/codegen/Harness.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>

using namespace octet;
using namespace octet::gputest;
using numerics::Format;

namespace {

// A tensor on the host: values as f32 (already exact in their dtype).
struct HostTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<float> v;
  size_t size() const { return v.size(); }
};

Format formatOf(const std::string &dtype) {
  if (dtype == "bf16")
    return Format::BF16;
  if (dtype == "f16")
    return Format::F16;
  if (dtype == "f8E4M3FN")
    return Format::E4M3FN;
  if (dtype == "f8E5M2")
    return Format::E5M2;
  return Format::F32;
}

std::vector<uint8_t> encode(const HostTensor &t) {
  std::vector<uint8_t> out;
  size_t n = t.v.size();
  if (t.dtype == "f32") {
    out.resize(n * 4);
    std::memcpy(out.data(), t.v.data(), n * 4);
  } else if (t.dtype == "bf16") {
    out.resize(n * 2);
    for (size_t i = 0; i < n; ++i) {
      uint16_t b = numerics::encodeBF16(t.v[i]);
      std::memcpy(&out[2 * i], &b, 2);
    }
  } else if (t.dtype == "i32") {
    out.resize(n * 4);
    for (size_t i = 0; i < n; ++i) {
      int32_t x = (int32_t)t.v[i];
      std::memcpy(&out[4 * i], &x, 4);
    }
  } else if (t.dtype == "i64") {
    out.resize(n * 8);
    for (size_t i = 0; i < n; ++i) {
      int64_t x = (int64_t)t.v[i];
      std::memcpy(&out[8 * i], &x, 8);
    }
  } else {
    std::fprintf(stderr, "no input encoding for %s\n", t.dtype.c_str());
    std::exit(2);
  }
  return out;
}

std::vector<float> decode(const std::string &dtype,
                          const std::vector<uint8_t> &bytes) {
  std::vector<float> out;
  if (dtype == "f32") {
    out.resize(bytes.size() / 4);
    std::memcpy(out.data(), bytes.data(), bytes.size());
  } else if (dtype == "bf16") {
    for (size_t i = 0; i < bytes.size(); i += 2) {
      uint16_t b;
      std::memcpy(&b, &bytes[i], 2);
      out.push_back(numerics::decodeBF16(b));
    }
  } else if (dtype == "f8E4M3FN") {
    for (uint8_t b : bytes)
      out.push_back(numerics::decodeE4M3(b));
  } else if (dtype == "f8E5M2") {
    for (uint8_t b : bytes)
      out.push_back(numerics::decodeE5M2(b));
  }
  return out;
}

float bits2f(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Rng {
  std::mt19937_64 gen;
  explicit Rng(uint64_t seed) : gen(seed) {}
  float normal(float mean, float std) {
    return std::normal_distribution<float>(mean, std)(gen);
  }
  uint64_t bits() { return gen(); }
};

// Unit in the last place of `format` at magnitude |x|.
double ulp(Format f, double x) {
  int mant = f == Format::BF16 ? 7 : f == Format::E4M3FN ? 3 : f == Format::E5M2 ? 2 : 23;
  int minExp = f == Format::BF16 ? -126 : f == Format::E4M3FN ? -6 : f == Format::E5M2 ? -14 : -126;
  int e = x == 0 ? minExp : std::max(minExp, (int)std::floor(std::log2(std::fabs(x))));
  return std::ldexp(1.0, e - mant);
}

struct Check {
  std::string what;
  bool ok = true;
  std::string detail;
};

// Compares a narrow-format result: bit for bit, or (fused) within one ulp
// on at most 1% of elements.
Check compareNarrow(const std::string &what, Format f,
                    const std::vector<float> &got,
                    const std::vector<float> &want, bool exact) {
  Check c{what};
  size_t off = 0, bad = 0, firstBad = SIZE_MAX;
  // Where an op cancels (x·cos − y·sin, dx + dres) a one-ulp difference of
  // an operand is more than one ulp of the small result: the floor is one
  // ulp at the tensor's RMS magnitude.
  double ms = 0;
  size_t finite = 0;
  for (float w : want)
    if (std::isfinite(w))
      ms += (double)w * w, ++finite;
  double floorUlp = ulp(f, std::sqrt(ms / std::max<size_t>(finite, 1)));
  for (size_t i = 0; i < want.size(); ++i) {
    float g = got[i], w = want[i];
    bool same = (std::isnan(g) && std::isnan(w)) ||
                (g == w && std::signbit(g) == std::signbit(w)) ||
                (g == 0 && w == 0 && !exact);
    if (same)
      continue;
    ++off;
    bool near = !exact && !std::isnan(g) && !std::isnan(w) &&
                std::fabs((double)g - w) <=
                    std::max(ulp(f, std::max(std::fabs(g), std::fabs(w))),
                             floorUlp) * 1.0001;
    if (!near) {
      ++bad;
      firstBad = std::min(firstBad, i);
    }
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "%zu/%zu differ (%.3f%%), %zu beyond tolerance",
                off, want.size(), 100.0 * off / std::max<size_t>(want.size(), 1),
                bad);
  c.detail = buf;
  if (bad || (!exact && off > want.size() / 100) || (exact && off)) {
    c.ok = false;
    if (firstBad != SIZE_MAX) {
      std::snprintf(buf, sizeof buf, "; first at %zu: got %g want %g", firstBad,
                    got[firstBad], want[firstBad]);
      c.detail += buf;
    }
  }
  return c;
}

Check compareF32(const std::string &what, const std::vector<float> &got,
                 const std::vector<float> &want, double rel) {
  Check c{what};
  double scale = 0;
  for (float w : want)
    scale = std::max(scale, (double)std::fabs(w));
  size_t bad = 0, first = SIZE_MAX;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i]))
      continue;
    double err = std::fabs((double)got[i] - want[i]);
    double tol = rel * std::fabs(want[i]) + 1e-6 * scale;
    if (!(err <= tol)) {
      ++bad;
      first = std::min(first, i);
    }
    if (std::isfinite(err))
      worst = std::max(worst, err / (std::fabs(want[i]) + 1e-6 * scale + 1e-30));
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "worst relative error %.2e, %zu beyond %.0e",
                worst, bad, rel);
  c.detail = buf;
  if (bad) {
    c.ok = false;
    std::snprintf(buf, sizeof buf, "; first at %zu: got %g want %g", first,
                  got[first], want[first]);
    c.detail += buf;
  }
  return c;
}

float rbf(float x) { return numerics::roundToBF16(x); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// A reference computes the results (in manifest order) from the inputs.
using Reference = std::function<std::vector<std::vector<float>>(
    const std::vector<HostTensor> &, const KernelSpec &)>;

// Row mean and 1/sqrt(var + 1e-5) of a LayerNorm input row.
std::pair<float, float> layerStats(const float *xr, int64_t d) {
  double s = 0, sq = 0;
  for (int64_t i = 0; i < d; ++i)
    s += xr[i];
  float mean = (float)(s / d);
  for (int64_t i = 0; i < d; ++i)
    sq += (double)(xr[i] - mean) * (xr[i] - mean);
  return {mean, 1.0f / std::sqrt((float)(sq / d) + 1e-5f)};
}

std::vector<float> quantize(const std::vector<float> &x, float scale,
                            const std::string &dtype, float &amax) {
  std::vector<float> q(x.size());
  Format f = formatOf(dtype);
  for (size_t i = 0; i < x.size(); ++i) {
    q[i] = numerics::roundTo(f, x[i] * scale, numerics::Overflow::SatFinite);
    float a = std::fabs(x[i]);
    amax = std::isnan(a) || std::isnan(amax) ? NAN : std::max(amax, a);
  }
  return q;
}

std::vector<float> rmsNorm(const std::vector<float> &x,
                           const std::vector<float> &w, int64_t len,
                           Format out) {
  std::vector<float> y(x.size());
  for (size_t r = 0; r < x.size() / len; ++r) {
    const float *xr = &x[r * len];
    double ss = 0;
    for (int64_t i = 0; i < len; ++i)
      ss += (double)xr[i] * xr[i];
    float inv = 1.0f / std::sqrt((float)ss / len + 1e-5f);
    for (int64_t i = 0; i < len; ++i)
      y[r * len + i] = numerics::roundTo(out, xr[i] * inv * w[i],
                                         numerics::Overflow::Ieee);
  }
  return y;
}

std::map<std::string, Reference> references() {
  std::map<std::string, Reference> refs;
  auto quant = [](const std::vector<HostTensor> &in, const KernelSpec &k) {
    float amax = 0;
    auto q = quantize(in[0].v, in[1].v[0], k.args[2].dtype, amax);
    return std::vector<std::vector<float>>{q, {amax}};
  };
  refs["quant_e4m3"] = quant;
  refs["quant_e5m2"] = quant;
  refs["attn_norm"] = [](const std::vector<HostTensor> &in, const KernelSpec &) {
    int64_t d = in[2].size();
    std::vector<float> h(in[0].size());
    for (size_t i = 0; i < h.size(); ++i)
      h[i] = rbf(in[0].v[i] + in[1].v[i]);
    auto n = rmsNorm(h, in[2].v, d, Format::BF16);
    float amax = 0;
    auto q = quantize(n, in[3].v[0], "f8E4M3FN", amax);
    return std::vector<std::vector<float>>{h, q, {amax}};
  };
  refs["attn_norm_bwd"] = [](const std::vector<HostTensor> &in,
                             const KernelSpec &) {
    const auto &dy = in[0].v, &x = in[1].v, &w = in[2].v, &dres = in[3].v;
    int64_t d = w.size(), rows = x.size() / d;
    std::vector<float> g(x.size());
    std::vector<double> dw(d, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = &x[r * d], *dyr = &dy[r * d];
      double ss = 0;
      for (int64_t i = 0; i < d; ++i)
        ss += (double)xr[i] * xr[i];
      float inv = 1.0f / std::sqrt((float)ss / d + 1e-5f);
      double dot = 0;
      for (int64_t i = 0; i < d; ++i)
        dot += (double)dyr[i] * w[i] * (xr[i] * inv);
      float mean = (float)(dot / d);
      for (int64_t i = 0; i < d; ++i) {
        float xhat = xr[i] * inv;
        float dx = rbf((dyr[i] * w[i] - xhat * mean) * inv);
        g[r * d + i] = rbf(dx + dres[r * d + i]);
        dw[i] += (double)dyr[i] * xhat;
      }
    }
    return std::vector<std::vector<float>>{g, std::vector<float>(dw.begin(), dw.end())};
  };
  refs["layer_norm"] = [](const std::vector<HostTensor> &in, const KernelSpec &) {
    const auto &x = in[0].v, &w = in[1].v, &b = in[2].v;
    int64_t d = w.size(), rows = x.size() / d;
    std::vector<float> y(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = &x[r * d];
      auto [mean, inv] = layerStats(xr, d);
      for (int64_t i = 0; i < d; ++i)
        y[r * d + i] = rbf((xr[i] - mean) * inv * w[i] + b[i]);
    }
    float amax = 0;
    auto q = quantize(y, in[3].v[0], "f8E4M3FN", amax);
    return std::vector<std::vector<float>>{q, {amax}};
  };
  refs["layer_norm_bwd"] = [](const std::vector<HostTensor> &in,
                              const KernelSpec &) {
    const auto &dy = in[0].v, &x = in[1].v, &w = in[2].v;
    int64_t d = w.size(), rows = x.size() / d;
    std::vector<float> dx(x.size());
    std::vector<double> dw(d, 0.0), db(d, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = &x[r * d], *dyr = &dy[r * d];
      auto [mean, inv] = layerStats(xr, d);
      double c1 = 0, c2 = 0;
      for (int64_t i = 0; i < d; ++i) {
        float xhat = (xr[i] - mean) * inv;
        c1 += (double)dyr[i] * w[i];
        c2 += (double)dyr[i] * w[i] * xhat;
      }
      float m1 = (float)(c1 / d), m2 = (float)(c2 / d);
      for (int64_t i = 0; i < d; ++i) {
        float xhat = (xr[i] - mean) * inv;
        dx[r * d + i] = rbf((dyr[i] * w[i] - m1 - xhat * m2) * inv);
        dw[i] += (double)dyr[i] * xhat;
        db[i] += dyr[i];
      }
    }
    return std::vector<std::vector<float>>{
        dx, std::vector<float>(dw.begin(), dw.end()),
        std::vector<float>(db.begin(), db.end())};
  };
  refs["swiglu"] = [](const std::vector<HostTensor> &in, const KernelSpec &) {
    std::vector<float> a(in[0].size());
    for (size_t i = 0; i < a.size(); ++i) {
      float g = in[0].v[i];
      a[i] = rbf(g * sigmoid(g) * in[1].v[i]);
    }
    float amax = 0;
    auto q = quantize(a, in[2].v[0], "f8E4M3FN", amax);
    return std::vector<std::vector<float>>{q, {amax}};
  };
  refs["swiglu_bwd"] = [](const std::vector<HostTensor> &in, const KernelSpec &) {
    size_t n = in[0].size();
    std::vector<float> dg(n), du(n);
    for (size_t i = 0; i < n; ++i) {
      float dy = in[0].v[i], g = in[1].v[i], u = in[2].v[i];
      float s = sigmoid(g);
      dg[i] = rbf(dy * u * (s * (1 + g * (1 - s))));
      du[i] = rbf(dy * (g * s));
    }
    float ag = 0, au = 0;
    auto qg = quantize(dg, in[3].v[0], "f8E5M2", ag);
    auto qu = quantize(du, in[3].v[0], "f8E5M2", au);
    return std::vector<std::vector<float>>{qg, qu, {ag}, {au}};
  };
  refs["gelu"] = [](const std::vector<HostTensor> &in, const KernelSpec &) {
    std::vector<float> a(in[0].size());
    for (size_t i = 0; i < a.size(); ++i) {
      float x = in[0].v[i];
      float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
      a[i] = rbf(0.5f * x * (1 + std::tanh(u)));
    }
    float amax = 0;
    auto q = quantize(a, in[1].v[0], "f8E4M3FN", amax);
    return std::vector<std::vector<float>>{q, {amax}};
  };
  auto rope = [](bool inverse) {
    return [inverse](const std::vector<HostTensor> &in, const KernelSpec &) {
      std::vector<std::vector<float>> outs;
      const auto &pos = in[2].v;
      for (int t = 0; t < 2; ++t) {
        const HostTensor &x = in[t];
        int64_t dh = x.shape.back(), half = dh / 2;
        int64_t len = x.size() / pos.size();
        // llama3 frequencies, as the compiler tabulates them.
        std::vector<float> inv(half);
        for (int64_t i = 0; i < half; ++i) {
          double f = std::pow(500000.0, -2.0 * i / dh);
          double wavelen = 2 * M_PI / f, lowWave = 8192.0 / 1, highWave = 8192.0 / 4;
          if (wavelen > lowWave)
            f /= 8;
          else if (wavelen >= highWave) {
            double smooth = (8192.0 / wavelen - 1) / (4 - 1);
            f = (1 - smooth) * f / 8 + smooth * f;
          }
          inv[i] = (float)f;
        }
        std::vector<float> y(x.size());
        for (size_t r = 0; r < pos.size(); ++r)
          for (int64_t j = 0; j < len; ++j) {
            int64_t jj = j % dh, i = jj % half;
            float angle = pos[r] * inv[i];
            float c = std::cos(angle), s = std::sin(angle);
            float xv = x.v[r * len + j];
            float partner = x.v[r * len + (jj < half ? j + half : j - half)];
            float sign = (jj < half) != inverse ? -1.0f : 1.0f;
            y[r * len + j] = rbf(xv * c + sign * partner * s);
          }
        outs.push_back(y);
      }
      return outs;
    };
  };
  refs["rope"] = rope(false);
  refs["rope_bwd"] = rope(true);
  refs["adamw"] = [](const std::vector<HostTensor> &in, const KernelSpec &k) {
    // Inputs: per parameter p, g, m, v (+ scale for matrices); then lr,
    // step, grad scale. Results: p', m', v' (+ fp8 weight, amax).
    size_t n = in.size();
    float lr = in[n - 3].v[0], step = in[n - 2].v[0], gs = in[n - 1].v[0];
    std::vector<std::vector<float>> outs;
    size_t i = 0, r = 0;
    int inputs = k.numInputs();
    (void)inputs;
    while (i + 3 < n - 3) {
      bool fp8 = i + 4 < n - 3 && in[i + 4].shape.empty();
      const auto &p = in[i].v, &g = in[i + 1].v, &m = in[i + 2].v, &v = in[i + 3].v;
      double wd = fp8 ? 0.1 : 0.0;
      float bc1 = 1 - std::pow(0.9f, step), bc2 = 1 - std::pow(0.95f, step);
      std::vector<float> p1(p.size()), m1(p.size()), v1(p.size());
      for (size_t e = 0; e < p.size(); ++e) {
        float gg = g[e] * gs;
        m1[e] = 0.9f * m[e] + (float)(1 - 0.9) * gg;
        v1[e] = 0.95f * v[e] + (float)(1 - 0.95) * (gg * gg);
        float upd = (m1[e] / bc1) / (std::sqrt(v1[e] / bc2) + 1e-8f);
        p1[e] = p[e] - lr * upd - lr * (float)wd * p[e];
      }
      outs.push_back(p1);
      outs.push_back(m1);
      outs.push_back(v1);
      r += 3;
      if (fp8) {
        float amax = 0;
        outs.push_back(quantize(p1, in[i + 4].v[0], "f8E4M3FN", amax));
        outs.push_back({amax});
        i += 5;
        r += 2;
      } else {
        i += 4;
      }
    }
    return outs;
  };
  return refs;
}

// Random inputs for kernel `k`, shaped by its manifest.
std::vector<HostTensor> makeInputs(const KernelSpec &k, Rng &rng) {
  std::vector<HostTensor> in;
  for (const BufferSpec &a : k.args) {
    if (a.role != "input")
      continue;
    HostTensor t{a.dtype, a.shape, std::vector<float>(a.elements())};
    Format f = formatOf(a.dtype);
    bool scalar = a.shape.empty();
    if (a.dtype == "i32") { // positions
      for (float &x : t.v)
        x = (float)(rng.bits() % 8192);
    } else if (a.dtype == "i64") { // step
      t.v[0] = 1 + rng.bits() % 1000;
    } else if (scalar) {
      t.v[0] = 1.0f; // set below, by position
    } else if (k.name == "quant_e4m3" && a.dtype == "f32") {
      // Any bit pattern: NaN, infinities, subnormals, values past 448.
      for (size_t i = 0; i < t.v.size(); ++i) {
        uint32_t u = (uint32_t)rng.bits();
        if (i % 4 == 0) // near the FP8 grid: ties and saturation edges
          u = (u & 0x80000000u) | ((uint32_t)(rng.bits() % 40 + 100) << 23) |
              ((uint32_t)(rng.bits() % 64) << 17) | ((i % 8 == 0) ? 0x10000u : 0u);
        t.v[i] = bits2f(u);
      }
    } else {
      float std = k.name == "adamw" ? 0.02f : 1.0f;
      float mean = 0;
      if (a.shape.size() == 1 && k.name != "adamw")
        mean = 1.0f, std = 0.1f; // norm weights
      for (float &x : t.v)
        x = numerics::roundTo(f, rng.normal(mean, std), numerics::Overflow::Ieee);
      if (k.name == "quant_e5m2")
        for (size_t i = 0; i < t.v.size(); i += 7)
          t.v[i] = numerics::roundToBF16(rng.normal(0, 1) * 3e4f);
    }
    in.push_back(std::move(t));
  }
  // Scalars by position: scales make values cross the FP8 maximum now and
  // then; AdamW gets a realistic step.
  size_t n = in.size();
  if (k.name == "adamw") {
    in[n - 3].v[0] = 3e-4f;
    in[n - 1].v[0] = 0.5f;
    for (size_t i = 0; i + 3 < n; ++i)
      if (in[i].shape.empty() && in[i].dtype == "f32")
        in[i].v[0] = 448.0f / 0.08f;
    // Second moments are non-negative: square each parameter's v.
    for (size_t i = 0; i + 3 < n - 3;) {
      for (float &x : in[i + 3].v)
        x = x * x;
      i += (i + 4 < n - 3 && in[i + 4].shape.empty()) ? 5 : 4;
    }
  } else {
    for (HostTensor &t : in)
      if (t.shape.empty() && t.dtype == "f32")
        t.v[0] = k.name == "quant_e5m2" ? 1.5f : k.name == "quant_e4m3" ? 0.75f : 96.0f;
  }
  return in;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s KERNEL_DIR [SEED]\n", argv[0]);
    return 2;
  }
  int count = 0;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&count) != CUDA_SUCCESS ||
      count == 0) {
    std::printf("SKIPPED: no CUDA GPU on this machine\n");
    return 0;
  }
  uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10)
                           : std::random_device{}();
  std::printf("seed %llu\n", (unsigned long long)seed);
  Rng rng(seed);
  Device dev;
  std::printf("device %s\n", dev.name().c_str());
  auto kernels = loadManifest(argv[1]);
  auto refs = references();
  int failures = 0;
  for (KernelSpec &k : kernels) {
    auto ref = refs.find(k.name);
    if (ref == refs.end()) {
      std::printf("FAIL %s: no reference\n", k.name.c_str());
      ++failures;
      continue;
    }
    dev.load(k);
    auto inputs = makeInputs(k, rng);
    Buffers bufs(k);
    int nin = k.numInputs();
    for (int i = 0; i < nin; ++i) {
      auto bytes = encode(inputs[i]);
      HARNESS_CHECK(cuMemcpyHtoD(bufs.ptrs[i], bytes.data(), bytes.size()));
    }
    // Poison every result and the workspace: unwritten elements read as NaN.
    for (size_t i = nin; i < k.args.size(); ++i)
      HARNESS_CHECK(cuMemsetD8(bufs.ptrs[i], 0xFF, k.args[i].bytes));
    launch(k, bufs, nullptr);
    HARNESS_CHECK(cuCtxSynchronize());
    auto want = ref->second(inputs, k);
    bool ok = true;
    for (size_t r = 0; r < want.size(); ++r) {
      const BufferSpec &a = k.args[nin + r];
      std::vector<uint8_t> bytes(a.bytes);
      HARNESS_CHECK(cuMemcpyDtoH(bytes.data(), bufs.ptrs[nin + r], a.bytes));
      auto got = decode(a.dtype, bytes);
      bool exact = k.name.rfind("quant_", 0) == 0;
      Check c;
      if (a.dtype == "f32")
        c = compareF32(a.name, got, want[r],
                       a.shape.size() == 1 && a.elements() > 1 && k.name != "adamw"
                           ? 2e-4
                           : (a.shape.empty() && !exact ? 1e-2 : (exact ? 0 : 1e-5)));
      else
        c = compareNarrow(a.name, formatOf(a.dtype), got, want[r], exact);
      std::printf("  %s %s.%s [%s] %s\n", c.ok ? "ok  " : "FAIL", k.name.c_str(),
                  a.name.c_str(), a.dtype.c_str(), c.detail.c_str());
      ok &= c.ok;
    }
    std::printf("%s %s\n", ok ? "PASS" : "FAIL", k.name.c_str());
    failures += !ok;
  }
  std::printf("%d of %zu kernels failed\n", failures, kernels.size());
  return failures ? 1 : 0;
}
