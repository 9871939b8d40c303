// GPU test and bench of the flash-attention kernels octet-attention-to-gpu
// generates (tests/gpu/codegen/attention-small.mlir: causal and not, GQA,
// head dims 64 and 128, cu_seqlens documents packed in a row, forward and
// backward).
//
// Test: every kernel runs on fresh random inputs (bf16 values drawn from
// N(0, 1); random document cuts, empty documents and cuts at batch-row
// boundaries allowed), its results poisoned first (0xFF bytes: NaN), and is
// compared with the reference interpreter's attention (compiler/Interpreter
// Kernels.cpp, f32 with double row sums) on the same bf16 inputs. The
// backward gets the interpreter's forward output (rounded to bf16, as the
// interpreter stores it) and lse, and its workspace is poisoned too, so the
// prep kernel must zero the dQ accumulator itself.
// Tolerances, per element, with rms the tensor's reference RMS:
// - out (bf16), dq/dk/dv (bf16): |gpu - ref| <= 2^-6 (|ref| + rms). P and
//   dS enter the tensor-core products as bf16 (relative error 2^-9 each) and
//   results are rounded to bf16 (2^-9); the bound leaves 4x that.
// - lse (f32): |gpu - ref| <= 1e-4 (1 + |ref|): ex2/lg2.approx have
//   about 2^-22 relative error; sums run in another order.
//
// Golden: with --golden DIR (octet-attention-golden's output, the MLIR
// interpreter run on the build host) one function's forward and backward
// also run on the golden's inputs and are checked against its results with
// the same bounds; the backward reads the golden's out and lse.
//
// usage: octet-gpu-attention-tests KERNEL_DIR [SEED] [--golden DIR]
//        octet-gpu-attention-tests --bench KERNEL_DIR [ITERATIONS]

#include "compiler/Interpreter/Kernels.h"
#include "support/Numerics.h"
#include "tests/gpu/codegen/Harness.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

using namespace octet;
using namespace octet::gputest;

namespace {

struct AttnLaunch {
  std::string kernel;
  unsigned grid = 0, block = 0, shared = 0;
  CUfunction function = nullptr;
};

// A tensor map launch `launch` of the op passes before the buffers
// (kernels.json "tensor_maps"): a 3-D view [B·S][heads][Dh] of bf16
// operand `operand`, boxes of `columns` × 1 × `rows`, `swizzle` bytes.
struct TensorMapSpec {
  int operand = 0;
  unsigned rows = 0, columns = 0, swizzle = 0;
  size_t launch = 0;
};

struct AttnKernel {
  std::string name, kind, module, ptx, cubin;
  std::vector<TensorMapSpec> tensorMaps;
  std::vector<AttnLaunch> launches;
  std::vector<BufferSpec> args;
  size_t workspaceBytes = 0;
  bool causal = false;
  double scale = 0;
};

std::vector<AttnKernel> loadAttention(const std::string &dir) {
  auto j = nlohmann::json::parse(readFile(dir + "/kernels.json"));
  std::vector<AttnKernel> out;
  for (auto &k : j["kernels"]) {
    std::string kind = k["kind"];
    if (kind != "attention_fwd" && kind != "attention_bwd")
      continue;
    AttnKernel a;
    a.name = k["name"];
    a.kind = kind;
    a.module = k["module"];
    a.ptx = dir + "/" + k["ptx"].get<std::string>();
    if (k.contains("tensor_maps"))
      for (auto &m : k["tensor_maps"])
        a.tensorMaps.push_back({m["operand"], m["box_rows"], m["box_columns"],
                                m["swizzle_bytes"], m.value("launch", size_t(0))});
    if (k.contains("cubin"))
      a.cubin = dir + "/" + k["cubin"].get<std::string>();
    for (auto &l : k["launches"])
      a.launches.push_back({l["kernel"], l["grid"], l["block"],
                            l.value("shared_bytes", 0u)});
    for (auto &x : k["args"]) {
      BufferSpec b;
      b.name = x["name"];
      b.role = x["role"];
      b.dtype = x["dtype"];
      for (auto &d : x["shape"])
        b.shape.push_back(d);
      b.bytes = x["bytes"];
      a.args.push_back(b);
    }
    a.workspaceBytes = k["workspace_bytes"];
    a.causal = k["attributes"]["causal"];
    a.scale = k["attributes"]["scale"];
    out.push_back(a);
  }
  return out;
}

void loadModule(AttnKernel &k) {
  CUmodule mod;
  std::string image = readFile(k.cubin.empty() ? k.ptx : k.cubin);
  HARNESS_CHECK(cuModuleLoadData(&mod, image.c_str()));
  for (AttnLaunch &l : k.launches) {
    HARNESS_CHECK(cuModuleGetFunction(&l.function, mod, l.kernel.c_str()));
    if (l.shared > 48 * 1024)
      HARNESS_CHECK(cuFuncSetAttribute(
          l.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
          l.shared));
  }
}

CUtensorMap encodeTensorMap(const TensorMapSpec &spec, const BufferSpec &arg,
                            CUdeviceptr address) {
  if (arg.dtype != "bf16" || arg.shape.size() != 4 ||
      (spec.swizzle != 128 && spec.swizzle != 0)) {
    std::fprintf(stderr, "tensor map of %s: expects a bf16 [B,S,H,Dh] operand "
                         "and a 128-byte or no swizzle\n", arg.name.c_str());
    std::exit(2);
  }
  uint64_t heads = arg.shape[2], dh = arg.shape[3];
  cuuint64_t dims[3] = {dh, heads, uint64_t(arg.shape[0] * arg.shape[1])};
  cuuint64_t strides[2] = {dh * 2, heads * dh * 2};
  cuuint32_t box[3] = {spec.columns, 1, spec.rows};
  cuuint32_t elementStrides[3] = {1, 1, 1};
  CUtensorMap map;
  HARNESS_CHECK(cuTensorMapEncodeTiled(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3,
      reinterpret_cast<void *>(address), dims, strides, box, elementStrides,
      CU_TENSOR_MAP_INTERLEAVE_NONE,
      spec.swizzle ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return map;
}

void launchAll(const AttnKernel &k, std::vector<CUdeviceptr> &ptrs,
               CUstream stream) {
  // A launch's tensor maps first, passed by value (grid constants), then
  // the buffers.
  for (size_t i = 0; i < k.launches.size(); ++i) {
    std::vector<CUtensorMap> maps;
    for (const TensorMapSpec &m : k.tensorMaps)
      if (m.launch == i)
        maps.push_back(encodeTensorMap(m, k.args[m.operand], ptrs[m.operand]));
    std::vector<void *> params;
    for (CUtensorMap &m : maps)
      params.push_back(&m);
    for (CUdeviceptr &p : ptrs)
      params.push_back(&p);
    const AttnLaunch &l = k.launches[i];
    HARNESS_CHECK(cuLaunchKernel(l.function, l.grid, 1, 1, l.block, 1, 1,
                                 l.shared, stream, params.data(), nullptr));
  }
}

// The problem an attention kernel was generated for, read from its buffers.
struct Problem {
  interp::AttentionShape shape{};
  int64_t cuLen = 0;
};

Problem problemOf(const AttnKernel &k) {
  bool forward = k.kind == "attention_fwd";
  const BufferSpec &q = k.args[forward ? 0 : 1];
  const BufferSpec &kv = k.args[forward ? 1 : 2];
  Problem p;
  p.shape = {q.shape[0], q.shape[1],     q.shape[2],
             kv.shape[2], q.shape[3],    k.causal,
             static_cast<float>(k.scale)};
  int inputs = 0;
  for (auto &a : k.args)
    inputs += a.role == "input";
  if (inputs == (forward ? 4 : 7))
    p.cuLen = k.args[inputs - 1].shape[0];
  return p;
}

float roundBf16(float x) {
  return numerics::decodeBF16(numerics::encodeBF16(x));
}

std::vector<float> randomBf16(size_t n, std::mt19937 &rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = roundBf16(dist(rng));
  return v;
}

// The bench's inputs: N(0, 1) values as BF16 bytes, drawn on every core
// in pieces with their own generators (seeded from `seed` and the piece),
// since one generator took seconds a tensor on the GPU host.
std::vector<uint8_t> randomBf16Bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> out(n * 2);
  const size_t piece = 1 << 20;
  const size_t pieces = (n + piece - 1) / piece;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (size_t p = t; p < pieces; p += threads) {
        std::mt19937 rng(seed * 1000003u + static_cast<uint32_t>(p));
        std::normal_distribution<float> dist(0.0f, 1.0f);
        for (size_t i = p * piece; i < std::min(n, (p + 1) * piece); ++i) {
          uint16_t b = numerics::encodeBF16(dist(rng));
          std::memcpy(&out[2 * i], &b, 2);
        }
      }
    });
  for (std::thread &t : pool)
    t.join();
  return out;
}

// cu_seqlens over B·S tokens: random cuts, some of them repeated (empty
// documents) or on batch-row boundaries.
std::vector<int32_t> randomCuts(int64_t len, int64_t tokens, int64_t seq,
                                std::mt19937 &rng) {
  std::vector<int32_t> cu(len);
  cu[0] = 0;
  cu[len - 1] = static_cast<int32_t>(tokens);
  std::uniform_int_distribution<int64_t> pick(0, tokens);
  for (int64_t i = 1; i + 1 < len; ++i) {
    int64_t c = pick(rng);
    if (i % 5 == 1)
      c = (c / seq) * seq;
    cu[i] = static_cast<int32_t>(c);
  }
  std::sort(cu.begin(), cu.end());
  if (len > 3)
    cu[2] = cu[1]; // an empty document
  return cu;
}

std::vector<int64_t> documentIds(const std::vector<int32_t> &cu, int64_t tokens) {
  std::vector<int64_t> ids(tokens);
  for (size_t d = 0; d + 1 < cu.size(); ++d)
    for (int64_t t = cu[d]; t < cu[d + 1]; ++t)
      ids[t] = static_cast<int64_t>(d);
  return ids;
}

std::vector<uint8_t> encodeBf16(const std::vector<float> &v) {
  std::vector<uint8_t> out(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t b = numerics::encodeBF16(v[i]);
    std::memcpy(&out[2 * i], &b, 2);
  }
  return out;
}

std::vector<float> decodeBf16(const std::vector<uint8_t> &bytes) {
  std::vector<float> v(bytes.size() / 2);
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t b;
    std::memcpy(&b, &bytes[2 * i], 2);
    v[i] = numerics::decodeBF16(b);
  }
  return v;
}

template <typename T> std::vector<uint8_t> rawBytes(const std::vector<T> &v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// Device buffers in argument order, poisoned (0xFF) before the inputs go in.
struct DeviceBuffers {
  std::vector<CUdeviceptr> ptrs;
  std::vector<size_t> sizes;
  explicit DeviceBuffers(const AttnKernel &k) {
    for (auto &a : k.args) {
      CUdeviceptr p;
      HARNESS_CHECK(cuMemAlloc(&p, std::max<size_t>(a.bytes, 16)));
      HARNESS_CHECK(cuMemsetD8(p, 0xFF, a.bytes));
      ptrs.push_back(p);
      sizes.push_back(a.bytes);
    }
  }
  ~DeviceBuffers() {
    for (CUdeviceptr p : ptrs)
      cuMemFree(p);
  }
  void upload(size_t i, const std::vector<uint8_t> &bytes) {
    if (bytes.size() != sizes[i]) {
      std::fprintf(stderr, "buffer %zu: %zu bytes, kernel expects %zu\n", i,
                   bytes.size(), sizes[i]);
      std::exit(2);
    }
    HARNESS_CHECK(cuMemcpyHtoD(ptrs[i], bytes.data(), bytes.size()));
  }
  std::vector<uint8_t> download(size_t i) {
    std::vector<uint8_t> out(sizes[i]);
    HARNESS_CHECK(cuMemcpyDtoH(out.data(), ptrs[i], out.size()));
    return out;
  }
};

// Checks |gpu - ref| <= rel (|ref| + rms) (rel·(1 + |ref|) when rmsFloor is
// false); prints the worst element as a fraction of its bound.
bool compare(const std::string &what, const std::vector<float> &gpu,
             const std::vector<float> &ref, double rel, bool rmsScaled) {
  double sq = 0;
  for (float r : ref)
    sq += double(r) * r;
  double rms = std::sqrt(sq / std::max<size_t>(ref.size(), 1));
  double worst = 0;
  size_t worstAt = 0, bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double bound = rel * (std::fabs(ref[i]) + (rmsScaled ? rms : 1.0));
    double err = std::fabs(double(gpu[i]) - ref[i]);
    double ratio = std::isfinite(gpu[i]) ? err / bound : INFINITY;
    if (!(ratio <= 1.0))
      ++bad;
    if (!(ratio <= worst)) {
      worst = ratio;
      worstAt = i;
    }
  }
  std::printf("  %-4s rms %.4g, worst |err|/bound %.3f at %zu (gpu %.6g ref "
              "%.6g)%s\n",
              what.c_str(), rms, worst, worstAt, gpu[worstAt], ref[worstAt],
              bad ? " FAIL" : "");
  if (bad)
    std::printf("  %-4s %zu of %zu elements out of bounds\n", what.c_str(), bad,
                ref.size());
  return bad == 0;
}

// Random bf16 q, k, v (and dO) with random documents where the kernel
// takes cu_seqlens.
struct Inputs {
  std::vector<float> q, k, v, dout;
  std::vector<int32_t> cu;
  std::vector<int64_t> ids;
  const int64_t *docs() const { return ids.empty() ? nullptr : ids.data(); }
};

Inputs randomInputs(const Problem &p, std::mt19937 &rng) {
  const auto &s = p.shape;
  int64_t tokens = s.batch * s.seq;
  Inputs in;
  in.q = randomBf16(tokens * s.qHeads * s.headDim, rng);
  in.k = randomBf16(tokens * s.kvHeads * s.headDim, rng);
  in.v = randomBf16(tokens * s.kvHeads * s.headDim, rng);
  in.dout = randomBf16(in.q.size(), rng);
  if (p.cuLen) {
    in.cu = randomCuts(p.cuLen, tokens, s.seq, rng);
    in.ids = documentIds(in.cu, tokens);
  }
  return in;
}

constexpr double kFwdRel = 1.0 / 64;
constexpr double kBwdRel = 1.0 / 32;
constexpr double kLseRel = 1e-4;

bool testForward(AttnKernel &k, std::mt19937 &rng) {
  Problem p = problemOf(k);
  auto &s = p.shape;
  Inputs in = randomInputs(p, rng);
  DeviceBuffers bufs(k);
  bufs.upload(0, encodeBf16(in.q));
  bufs.upload(1, encodeBf16(in.k));
  bufs.upload(2, encodeBf16(in.v));
  size_t outAt = 3;
  if (p.cuLen)
    bufs.upload(outAt++, rawBytes(in.cu));
  launchAll(k, bufs.ptrs, nullptr);
  HARNESS_CHECK(cuCtxSynchronize());
  auto out = decodeBf16(bufs.download(outAt));
  auto lseBytes = bufs.download(outAt + 1);
  std::vector<float> lse(lseBytes.size() / 4);
  std::memcpy(lse.data(), lseBytes.data(), lseBytes.size());

  std::vector<float> refOut(in.q.size()), refLse(lse.size());
  interp::attentionForward(s, in.q.data(), in.k.data(), in.v.data(), in.docs(),
                           refOut.data(), refLse.data());
  bool ok = compare("out", out, refOut, kFwdRel, true);
  ok &= compare("lse", lse, refLse, kLseRel, false);
  return ok;
}

bool testBackward(AttnKernel &k, std::mt19937 &rng) {
  Problem p = problemOf(k);
  auto &s = p.shape;
  Inputs in = randomInputs(p, rng);
  const auto &q = in.q, &kk = in.k, &v = in.v, &dout = in.dout;
  const int64_t *docs = in.docs();
  std::vector<float> out(q.size()), lse(s.batch * s.qHeads * s.seq);
  interp::attentionForward(s, q.data(), kk.data(), v.data(), docs, out.data(),
                           lse.data());
  for (float &x : out)
    x = roundBf16(x);

  DeviceBuffers bufs(k);
  bufs.upload(0, encodeBf16(dout));
  bufs.upload(1, encodeBf16(q));
  bufs.upload(2, encodeBf16(kk));
  bufs.upload(3, encodeBf16(v));
  bufs.upload(4, encodeBf16(out));
  bufs.upload(5, rawBytes(lse));
  size_t dqAt = 6;
  if (p.cuLen)
    bufs.upload(dqAt++, rawBytes(in.cu));
  launchAll(k, bufs.ptrs, nullptr);
  HARNESS_CHECK(cuCtxSynchronize());
  auto dq = decodeBf16(bufs.download(dqAt));
  auto dk = decodeBf16(bufs.download(dqAt + 1));
  auto dv = decodeBf16(bufs.download(dqAt + 2));

  std::vector<float> refDq(q.size()), refDk(kk.size()), refDv(v.size());
  interp::attentionBackward(s, dout.data(), q.data(), kk.data(), v.data(),
                            out.data(), lse.data(), docs, refDq.data(),
                            refDk.data(), refDv.data());
  bool ok = compare("dq", dq, refDq, kBwdRel, true);
  ok &= compare("dk", dk, refDk, kBwdRel, true);
  ok &= compare("dv", dv, refDv, kBwdRel, true);
  return ok;
}

std::vector<float> readFloats(const std::string &path) {
  std::string bytes = readFile(path);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

// The golden's forward and backward, on its inputs.
bool testGolden(std::vector<AttnKernel> &kernels, const std::string &dir) {
  auto g = nlohmann::json::parse(readFile(dir + "/golden.json"));
  std::map<std::string, std::vector<float>> t;
  for (auto *list : {&g["inputs"], &g["outputs"]})
    for (auto &x : *list)
      t[x["name"]] = readFloats(dir + "/" + x["file"].get<std::string>());
  bool docs = t.count("cu_seqlens") > 0;
  std::vector<int32_t> cu;
  if (docs) {
    cu.resize(t["cu_seqlens"].size());
    std::memcpy(cu.data(), t["cu_seqlens"].data(), cu.size() * 4);
  }
  auto find = [&](const std::string &name) -> AttnKernel & {
    for (AttnKernel &k : kernels)
      if (k.name == name)
        return k;
    std::fprintf(stderr, "golden names %s, which kernels.json lacks\n",
                 name.c_str());
    std::exit(2);
  };
  std::printf("golden %s (%s, seed %d)\n", g["function"].get<std::string>().c_str(),
              g["source"].get<std::string>().c_str(), g["seed"].get<int>());
  AttnKernel &fwd = find(g["forward"]);
  DeviceBuffers f(fwd);
  f.upload(0, encodeBf16(t["q"]));
  f.upload(1, encodeBf16(t["k"]));
  f.upload(2, encodeBf16(t["v"]));
  size_t at = 3;
  if (docs)
    f.upload(at++, rawBytes(cu));
  launchAll(fwd, f.ptrs, nullptr);
  HARNESS_CHECK(cuCtxSynchronize());
  bool ok = compare("out", decodeBf16(f.download(at)), t["out"], kFwdRel, true);
  auto lseBytes = f.download(at + 1);
  std::vector<float> lse(lseBytes.size() / 4);
  std::memcpy(lse.data(), lseBytes.data(), lseBytes.size());
  ok &= compare("lse", lse, t["lse"], kLseRel, false);

  AttnKernel &bwd = find(g["backward"]);
  DeviceBuffers b(bwd);
  b.upload(0, encodeBf16(t["dout"]));
  b.upload(1, encodeBf16(t["q"]));
  b.upload(2, encodeBf16(t["k"]));
  b.upload(3, encodeBf16(t["v"]));
  b.upload(4, encodeBf16(t["out"]));
  b.upload(5, rawBytes(t["lse"]));
  at = 6;
  if (docs)
    b.upload(at++, rawBytes(cu));
  launchAll(bwd, b.ptrs, nullptr);
  HARNESS_CHECK(cuCtxSynchronize());
  ok &= compare("dq", decodeBf16(b.download(at)), t["dq"], kBwdRel, true);
  ok &= compare("dk", decodeBf16(b.download(at + 1)), t["dk"], kBwdRel, true);
  ok &= compare("dv", decodeBf16(b.download(at + 2)), t["dv"], kBwdRel, true);
  return ok;
}

int runTests(const std::string &dir, unsigned seed, const std::string &golden) {
  Device device;
  std::printf("device: %s, seed %u\n", device.name().c_str(), seed);
  auto kernels = loadAttention(dir);
  if (kernels.empty()) {
    std::fprintf(stderr, "%s/kernels.json lists no attention kernels\n",
                 dir.c_str());
    return 2;
  }
  std::mt19937 rng(seed);
  int failed = 0;
  for (AttnKernel &k : kernels) {
    loadModule(k);
    Problem p = problemOf(k);
    auto &s = p.shape;
    std::printf("%s: B %ld S %ld Hq %ld Hkv %ld Dh %ld%s%s\n", k.name.c_str(),
                (long)s.batch, (long)s.seq, (long)s.qHeads, (long)s.kvHeads,
                (long)s.headDim, s.causal ? " causal" : "",
                p.cuLen ? (" documents " + std::to_string(p.cuLen - 1)).c_str()
                        : "");
    bool ok = k.kind == "attention_fwd" ? testForward(k, rng)
                                        : testBackward(k, rng);
    failed += !ok;
  }
  std::printf("%d of %zu attention kernels failed\n", failed, kernels.size());
  if (!golden.empty() && !testGolden(kernels, golden)) {
    std::printf("the golden check failed\n");
    return 1;
  }
  return failed ? 1 : 0;
}

// Times every attention op of the folder (all its launches, inputs random)
// and prints one JSON object per op.
int runBench(const std::string &dir, int iterations) {
  Device device;
  auto kernels = loadAttention(dir);
  std::printf("[\n");
  for (size_t i = 0; i < kernels.size(); ++i) {
    AttnKernel &k = kernels[i];
    loadModule(k);
    Problem p = problemOf(k);
    auto &s = p.shape;
    DeviceBuffers bufs(k);
    bool forward = k.kind == "attention_fwd";
    int inputs = 0;
    for (auto &a : k.args)
      inputs += a.role == "input";
    // Documents: lengths from half to 1.5 times tokens / documents in a
    // fixed pattern (bench/attention_torch.py cuts the same), the last
    // taking what is left; attention FLOPs are summed over them.
    double pairs = double(s.seq) * s.seq * s.batch;
    std::vector<int32_t> cuts;
    if (p.cuLen) {
      int64_t docs = p.cuLen - 1, tokens = s.batch * s.seq, mean = tokens / docs;
      cuts.push_back(0);
      for (int64_t d = 0; d + 1 < docs; ++d)
        cuts.push_back(static_cast<int32_t>(std::min<int64_t>(
            cuts.back() + mean / 2 + mean * ((d * 37) % 11) / 10, tokens)));
      cuts.push_back(static_cast<int32_t>(tokens));
      pairs = 0;
      for (size_t d = 0; d + 1 < cuts.size(); ++d) {
        // A document is cut at batch-row boundaries.
        for (int64_t b = 0; b < s.batch; ++b) {
          int64_t lo = std::max<int64_t>(cuts[d], b * s.seq);
          int64_t hi = std::min<int64_t>(cuts[d + 1], (b + 1) * s.seq);
          if (hi > lo)
            pairs += double(hi - lo) * (hi - lo);
        }
      }
    }
    for (int a = 0; a < inputs; ++a) {
      if (k.args[a].dtype == "i32")
        bufs.upload(a, rawBytes(cuts));
      else if (k.args[a].dtype == "bf16")
        bufs.upload(a, randomBf16Bytes(k.args[a].elements(), 1 + a));
      else if (k.args[a].dtype == "f32") // lse: about log(S) for N(0,1) scores
        bufs.upload(a, rawBytes(std::vector<float>(k.args[a].elements(),
                                                   std::log((float)s.seq))));
    }
    CUevent start, stop;
    HARNESS_CHECK(cuEventCreate(&start, 0));
    HARNESS_CHECK(cuEventCreate(&stop, 0));
    for (int w = 0; w < 3; ++w)
      launchAll(k, bufs.ptrs, nullptr);
    HARNESS_CHECK(cuEventRecord(start, nullptr));
    for (int it = 0; it < iterations; ++it)
      launchAll(k, bufs.ptrs, nullptr);
    HARNESS_CHECK(cuEventRecord(stop, nullptr));
    HARNESS_CHECK(cuEventSynchronize(stop));
    float ms = 0;
    HARNESS_CHECK(cuEventElapsedTime(&ms, start, stop));
    double seconds = ms / 1e3 / iterations;
    double flops = 4.0 * s.qHeads * pairs * s.headDim;
    if (s.causal)
      flops /= 2;
    if (!forward)
      flops *= 2.5;
    std::printf("  {\"op\": \"%s\", \"kernel\": \"%s\", \"documents\": %ld, "
                "\"device\": \"%s\", \"batch\": %ld, "
                "\"seq\": %ld, \"q_heads\": %ld, \"kv_heads\": %ld, "
                "\"head_dim\": %ld, \"causal\": %s, \"ms\": %.4f, "
                "\"tflops\": %.1f, \"iterations\": %d}%s\n",
                k.kind.c_str(), k.module.c_str(), (long)std::max<int64_t>(p.cuLen - 1, 0),
                device.name().c_str(), (long)s.batch,
                (long)s.seq, (long)s.qHeads, (long)s.kvHeads, (long)s.headDim,
                s.causal ? "true" : "false", seconds * 1e3,
                flops / seconds / 1e12, iterations,
                i + 1 < kernels.size() ? "," : "");
  }
  std::printf("]\n");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc >= 3 && std::string(argv[1]) == "--bench")
    return runBench(argv[2], argc > 3 ? std::atoi(argv[3]) : 20);
  std::string golden;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--golden") {
      golden = argv[i + 1];
      for (int j = i; j + 2 < argc + 0; ++j)
        argv[j] = argv[j + 2];
      argc -= 2;
      break;
    }
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s KERNEL_DIR [SEED] [--golden DIR]\n"
                         "       %s --bench KERNEL_DIR [ITERATIONS]\n",
                 argv[0], argv[0]);
    return 2;
  }
  return runTests(argv[1], argc > 2 ? std::atoi(argv[2]) : 1234, golden);
}
