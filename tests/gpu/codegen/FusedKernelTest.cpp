// GPU tests of the kernels octet-fused-to-gpu generates, against the
// reference interpreter. octet-kernel-oracle (KernelOracle.cpp, on a machine
// with MLIR) ran the interpreter on every kernel.fused region on fresh
// random inputs and wrote the inputs, the expected results and golden.json;
// this binary (no MLIR) loads each kernel's cubin or PTX, copies the inputs
// in, poisons every result and the workspace (0xFF bytes: NaN in bf16, f32
// and both FP8 formats, so an element the kernel never writes fails), runs
// the launches and compares each result as golden.json says, then does it
// all again (a second launch must not see what the first left):
// - exact: bit for bit (NaN matches NaN): the FP8 casts, transposes,
//   slices, joins, gathers, amax of those, integers and constants;
// - ulp: bf16 / FP8 results of arithmetic within one unit in the last place
//   of the format at the value's magnitude or the tensor's RMS, whichever
//   is larger (row sums run in another order, exp/erf/sin/cos come from
//   libdevice at 1-2 ulp in f32), on at most 1% of the elements; every other
//   element bit for bit;
// - relative: f32 results within the stated tolerance relative to the
//   value (1e-5; 2e-4 for column sums and the embedding gradient's atomic
//   adds; 2^-7 for the amax of a bf16 tensor computed in the kernel), with
//   an absolute floor of 1e-6 of the tensor's largest magnitude.
//
// usage: octet-gpu-codegen-tests KERNEL_DIR GOLDEN_DIR [KERNEL_DIR GOLDEN_DIR]...

#include "support/Numerics.h"
#include "tests/gpu/codegen/Harness.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace octet;
using namespace octet::gputest;

namespace {

struct GoldenBuffer {
  std::string file, dtype, check;
  double tolerance = 0;
  size_t bytes = 0;
};

struct GoldenKernel {
  std::string name;
  size_t kernelIndex = 0; // in kernels.json
  std::vector<GoldenBuffer> inputs, results;
};

std::vector<GoldenKernel> loadGolden(const std::string &dir, std::string &seed) {
  auto j = nlohmann::json::parse(readFile(dir + "/golden.json"));
  seed = j["seed"];
  std::vector<GoldenKernel> out;
  auto buffers = [&](const nlohmann::json &list) {
    std::vector<GoldenBuffer> bs;
    for (auto &b : list) {
      GoldenBuffer g;
      g.file = dir + "/" + b["file"].get<std::string>();
      g.dtype = b["dtype"];
      g.bytes = b["bytes"];
      if (b.contains("check")) {
        g.check = b["check"];
        g.tolerance = b["tolerance"];
      }
      bs.push_back(g);
    }
    return bs;
  };
  for (auto &k : j["kernels"])
    out.push_back({k["name"], k["kernel_index"], buffers(k["inputs"]),
                   buffers(k["results"])});
  return out;
}

DType formatOf(const std::string &dtype) {
  if (dtype == "bf16")
    return DType::BF16;
  if (dtype == "f16")
    return DType::F16;
  if (dtype == "f8E4M3FN")
    return DType::F8E4M3FN;
  if (dtype == "f8E5M2")
    return DType::F8E5M2;
  return DType::F32;
}

// Values of a buffer as doubles (integers exactly up to 2^53).
std::vector<double> decode(const std::string &dtype,
                           const std::string &bytes) {
  std::vector<double> out;
  const char *p = bytes.data();
  size_t n = bytes.size();
  if (dtype == "f32" || dtype == "i32") {
    for (size_t i = 0; i + 4 <= n; i += 4) {
      if (dtype == "f32") {
        float f;
        std::memcpy(&f, p + i, 4);
        out.push_back(f);
      } else {
        int32_t x;
        std::memcpy(&x, p + i, 4);
        out.push_back(x);
      }
    }
  } else if (dtype == "i64") {
    for (size_t i = 0; i + 8 <= n; i += 8) {
      int64_t x;
      std::memcpy(&x, p + i, 8);
      out.push_back((double)x);
    }
  } else if (dtype == "bf16" || dtype == "f16") {
    for (size_t i = 0; i + 2 <= n; i += 2) {
      uint16_t b;
      std::memcpy(&b, p + i, 2);
      out.push_back(dtype == "bf16" ? numerics::decodeBF16(b)
                                    : numerics::decodeF16(b));
    }
  } else if (dtype == "f8E4M3FN" || dtype == "f8E5M2") {
    for (size_t i = 0; i < n; ++i)
      out.push_back(dtype == "f8E4M3FN" ? numerics::decodeE4M3(p[i])
                                        : numerics::decodeE5M2(p[i]));
  } else {
    std::fprintf(stderr, "golden.json: no decoding for dtype %s\n",
                 dtype.c_str());
    std::exit(2);
  }
  return out;
}

// Unit in the last place of `format` at magnitude |x|.
double ulp(DType f, double x) {
  int mant = f == DType::BF16       ? 7
             : f == DType::F16      ? 10
             : f == DType::F8E4M3FN ? 3
             : f == DType::F8E5M2   ? 2
                                    : 23;
  int minExp = f == DType::BF16       ? -126
               : f == DType::F16      ? -14
               : f == DType::F8E4M3FN ? -6
               : f == DType::F8E5M2   ? -14
                                      : -126;
  int e = x == 0 ? minExp
                 : std::max(minExp, (int)std::floor(std::log2(std::fabs(x))));
  return std::ldexp(1.0, e - mant);
}

bool sameValue(double g, double w) {
  return (std::isnan(g) && std::isnan(w)) ||
         (g == w && std::signbit(g) == std::signbit(w));
}

struct Verdict {
  bool ok = true;
  std::string detail;
};

std::string firstDifference(size_t at, double got, double want) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "; first at %zu: got %.9g want %.9g", at, got,
                want);
  return buf;
}

Verdict compareExact(const std::vector<double> &got,
                     const std::vector<double> &want) {
  size_t off = 0, first = SIZE_MAX;
  for (size_t i = 0; i < want.size(); ++i)
    if (!sameValue(got[i], want[i])) {
      ++off;
      first = std::min(first, i);
    }
  char buf[128];
  std::snprintf(buf, sizeof buf, "bit for bit: %zu/%zu differ", off,
                want.size());
  Verdict v{off == 0, buf};
  if (off)
    v.detail += firstDifference(first, got[first], want[first]);
  return v;
}

Verdict compareUlp(DType f, const std::vector<double> &got,
                   const std::vector<double> &want) {
  // Where an op cancels (x·cos − y·sin, dx + dres) a one-ulp difference of
  // an operand is more than one ulp of the small result: the floor is one
  // ulp at the tensor's RMS magnitude.
  double ms = 0;
  size_t finite = 0;
  for (double w : want)
    if (std::isfinite(w))
      ms += w * w, ++finite;
  double floorUlp = ulp(f, std::sqrt(ms / std::max<size_t>(finite, 1)));
  size_t off = 0, bad = 0, first = SIZE_MAX;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got[i], w = want[i];
    if (sameValue(g, w) || (g == 0 && w == 0))
      continue;
    ++off;
    bool near = !std::isnan(g) && !std::isnan(w) &&
                std::fabs(g - w) <=
                    std::max(ulp(f, std::max(std::fabs(g), std::fabs(w))),
                             floorUlp) *
                        1.0001;
    if (!near) {
      ++bad;
      first = std::min(first, i);
    }
  }
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "one ulp: %zu/%zu differ (%.3f%%, at most 1%%), %zu beyond",
                off, want.size(), 100.0 * off / std::max<size_t>(want.size(), 1),
                bad);
  Verdict v{bad == 0 && off <= want.size() / 100, buf};
  if (bad)
    v.detail += firstDifference(first, got[first], want[first]);
  return v;
}

Verdict compareRelative(const std::vector<double> &got,
                        const std::vector<double> &want, double rel) {
  double scale = 0;
  for (double w : want)
    if (std::isfinite(w))
      scale = std::max(scale, std::fabs(w));
  size_t bad = 0, first = SIZE_MAX;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (sameValue(got[i], want[i]))
      continue;
    double err = std::fabs(got[i] - want[i]);
    double floor = 1e-6 * scale;
    if (!(err <= rel * std::fabs(want[i]) + floor)) {
      ++bad;
      first = std::min(first, i);
    }
    if (std::isfinite(err))
      worst = std::max(worst, err / (std::fabs(want[i]) + floor + 1e-30));
  }
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "relative %.0e: worst %.2e, %zu/%zu beyond", rel, worst, bad,
                want.size());
  Verdict v{bad == 0, buf};
  if (bad)
    v.detail += firstDifference(first, got[first], want[first]);
  return v;
}

// Runs every kernel of KERNEL_DIR against GOLDEN_DIR; returns the failures.
int runDirectory(Device &dev, const std::string &kernelDir,
                 const std::string &goldenDir, int &total) {
  auto kernels = loadManifest(kernelDir);
  std::string seed;
  auto golden = loadGolden(goldenDir, seed);
  std::printf("%s: %zu of %zu kernels (the rest share their code), inputs "
              "of seed %s (%s)\n",
              kernelDir.c_str(), golden.size(), kernels.size(), seed.c_str(),
              goldenDir.c_str());
  int failures = 0;
  for (size_t n = 0; n < golden.size(); ++n) {
    const GoldenKernel &g = golden[n];
    if (g.kernelIndex >= kernels.size()) {
      std::printf("FAIL %s: golden kernel '%s' is kernel %zu, %s lists %zu: "
                  "generate both from the same file\n",
                  goldenDir.c_str(), g.name.c_str(), g.kernelIndex,
                  kernelDir.c_str(), kernels.size());
      ++failures;
      continue;
    }
    KernelSpec &k = kernels[g.kernelIndex];
    ++total;
    int nin = k.numInputs();
    size_t nres = 0;
    for (auto &a : k.args)
      nres += a.role == "result";
    if (g.name != k.name || (size_t)nin != g.inputs.size() ||
        nres != g.results.size()) {
      std::printf("FAIL %s: golden kernel %zu is '%s' with %zu inputs and %zu "
                  "results, the manifest's has %d and %zu\n",
                  k.name.c_str(), g.kernelIndex, g.name.c_str(), g.inputs.size(),
                  g.results.size(), nin, nres);
      ++failures;
      continue;
    }
    dev.load(k);
    Buffers bufs(k);
    for (int i = 0; i < nin; ++i) {
      std::string bytes = readFile(g.inputs[i].file);
      if (bytes.size() != k.args[i].bytes) {
        std::printf("FAIL %s: %s has %zu bytes, the kernel's input %d %zu\n",
                    k.name.c_str(), g.inputs[i].file.c_str(), bytes.size(), i,
                    k.args[i].bytes);
        std::exit(1);
      }
      HARNESS_CHECK(cuMemcpyHtoD(bufs.ptrs[i], bytes.data(), bytes.size()));
    }
    // Twice, poisoned each time: a launch must not depend on what an
    // earlier one left behind (the column-sum tickets, the amax zeroing).
    std::vector<std::vector<double>> wanted;
    for (const GoldenBuffer &want : g.results)
      wanted.push_back(decode(want.dtype, readFile(want.file)));
    bool ok = true;
    for (int run = 0; run < 2; ++run) {
      for (size_t i = nin; i < k.args.size(); ++i)
        HARNESS_CHECK(cuMemsetD8(bufs.ptrs[i], 0xFF, k.args[i].bytes));
      launch(k, bufs, nullptr);
      HARNESS_CHECK(cuCtxSynchronize());
      for (size_t r = 0; r < nres; ++r) {
        const BufferSpec &a = k.args[nin + r];
        const GoldenBuffer &want = g.results[r];
        std::string bytes(a.bytes, '\0');
        HARNESS_CHECK(cuMemcpyDtoH(bytes.data(), bufs.ptrs[nin + r], a.bytes));
        auto gotValues = decode(a.dtype, bytes);
        const auto &wantValues = wanted[r];
        Verdict v;
        if (gotValues.size() != wantValues.size())
          v = {false, "size differs from golden"};
        else if (want.check == "exact")
          v = compareExact(gotValues, wantValues);
        else if (want.check == "ulp")
          v = compareUlp(formatOf(a.dtype), gotValues, wantValues);
        else if (want.check == "relative")
          v = compareRelative(gotValues, wantValues, want.tolerance);
        else
          v = {false, "golden.json names no check '" + want.check + "'"};
        std::printf("  %s %s.%s [%s]%s %s\n", v.ok ? "ok  " : "FAIL",
                    k.name.c_str(), a.name.c_str(), a.dtype.c_str(),
                    run ? " (second launch)" : "", v.detail.c_str());
        ok &= v.ok;
      }
    }
    std::printf("%s %s\n", ok ? "PASS" : "FAIL", k.name.c_str());
    failures += !ok;
  }
  return failures;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3 || argc % 2 == 0) {
    std::fprintf(stderr,
                 "usage: %s KERNEL_DIR GOLDEN_DIR [KERNEL_DIR GOLDEN_DIR]...\n"
                 "(GOLDEN_DIR: octet-kernel-oracle's output for the file "
                 "KERNEL_DIR was emitted from)\n",
                 argv[0]);
    return 2;
  }
  int count = 0;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&count) != CUDA_SUCCESS ||
      count == 0) {
    std::printf("SKIPPED: no CUDA GPU on this machine\n");
    return 0;
  }
  Device dev;
  std::printf("device %s\n", dev.name().c_str());
  int failures = 0, total = 0;
  for (int i = 1; i + 1 < argc; i += 2)
    failures += runDirectory(dev, argv[i], argv[i + 1], total);
  std::printf("%d of %d kernels failed\n", failures, total);
  return failures ? 1 : 0;
}
