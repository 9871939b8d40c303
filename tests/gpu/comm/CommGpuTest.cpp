// Collectives across ranks on GPUs, through octet's comm layer (store
// bootstrap, NCCL loaded at run time, watchdog), one process per GPU.
//
//   octet-comm-gpu-test --gpus N     launches N ranks of itself (the
//                                    launcher library), each running the
//                                    checks below; exits 77 (skipped) with
//                                    fewer than N GPUs
//   octet-comm-gpu-test --rank [--steps K]
//                                    one rank (torchrun's variables): the
//                                    checks, or K steps of a small
//                                    all-reduce with a heartbeat, printing
//                                    "step k" (tests/gpu/comm/kill-rank.sh
//                                    kills a rank among them)
//   octet-comm-gpu-test --free-port  prints a free loopback port
//
// Each check prints "PASS name" or "FAIL name: what differed".

#include "runtime/comm/Bootstrap.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/Launch.h"
#include "runtime/comm/Socket.h"
#include "runtime/comm/Watchdog.h"
#include "runtime/core/Device.h"
#include "support/Numerics.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

using namespace octet;
using namespace octet::comm;
using namespace octet::numerics;
using namespace std::chrono_literals;

namespace {

int failures = 0;

void report(const std::string &name, const std::string &problem) {
  if (problem.empty()) {
    std::printf("PASS %s\n", name.c_str());
  } else {
    ++failures;
    std::printf("FAIL %s: %s\n", name.c_str(), problem.c_str());
  }
  std::fflush(stdout);
}

// A device buffer of `bytes`, freed with the buffer.
class DeviceBuffer {
public:
  static StatusOr<DeviceBuffer> allocate(size_t bytes) {
    DeviceBuffer b;
    OCTET_CHECK_CUDA(cuMemAlloc(&b.ptr_, bytes));
    b.bytes_ = bytes;
    return b;
  }
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer &&o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = 0;
  }
  ~DeviceBuffer() {
    if (ptr_)
      cuMemFree(ptr_);
  }
  void *get() const { return reinterpret_cast<void *>(ptr_); }
  template <typename T> Status upload(const std::vector<T> &host) {
    OCTET_CHECK_CUDA(cuMemcpyHtoD(ptr_, host.data(), host.size() * sizeof(T)));
    return Status::ok();
  }
  template <typename T> StatusOr<std::vector<T>> download(size_t count) {
    std::vector<T> host(count);
    OCTET_CHECK_CUDA(cuMemcpyDtoH(host.data(), ptr_, count * sizeof(T)));
    return host;
  }

private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

struct Rank {
  int rank = 0, world = 1;
  const NcclLibrary *nccl = nullptr;
  Communicator *comm = nullptr;
  CUstream stream = nullptr;
};

template <typename T>
std::string firstMismatch(const std::vector<T> &got,
                          const std::vector<T> &want) {
  for (size_t i = 0; i < want.size(); ++i)
    if (!(got[i] == want[i]))
      return "element " + std::to_string(i) + " is " +
             std::to_string(double(got[i])) + ", expected " +
             std::to_string(double(want[i]));
  return "";
}

#define CHECK_OK(name, expr)                                                   \
  do {                                                                         \
    Status s_ = (expr);                                                        \
    if (!s_) {                                                                 \
      report(name, s_.message());                                              \
      return;                                                                  \
    }                                                                          \
  } while (0)

void sync(Rank &r) { cuStreamSynchronize(r.stream); }

void checkAllReduce(Rank &r, ReduceOp op, const std::string &name) {
  const size_t n = 1 << 20;
  std::vector<float> host(n), want(n);
  float ranksSum = float(r.world * (r.world + 1) / 2);
  for (size_t i = 0; i < n; ++i) {
    host[i] = float(r.rank + 1) * float(i % 7 + 1);
    want[i] = op == ReduceOp::Avg ? ranksSum / float(r.world) * float(i % 7 + 1)
                                  : ranksSum * float(i % 7 + 1);
  }
  auto buf = DeviceBuffer::allocate(n * sizeof(float));
  CHECK_OK(name, buf.status());
  CHECK_OK(name, buf->upload(host));
  auto type = ncclTypeFor(bundle::F32, true, r.nccl->version());
  CHECK_OK(name, type.status());
  // In place, as the gradient buffers are.
  CHECK_OK(name,
           r.comm->allReduce(buf->get(), buf->get(), n, *type, op, r.stream));
  sync(r);
  auto got = buf->download<float>(n);
  CHECK_OK(name, got.status());
  report(name, firstMismatch(*got, want));
}

// A sum all-reduce of a narrow type (BF16, FP8) through its encoding:
// each rank adds value(i), which must come back as world * value(i).
template <typename Bits, typename Encode, typename Decode, typename Value>
void checkNarrowAllReduce(Rank &r, const std::string &name, bundle::DType dtype,
                          Encode encode, Decode decode, Value value) {
  const size_t n = 4096;
  std::vector<Bits> host(n);
  for (size_t i = 0; i < n; ++i)
    host[i] = encode(value(i));
  auto type = ncclTypeFor(dtype, /*reduced=*/true, r.nccl->version());
  CHECK_OK(name, type.status());
  auto buf = DeviceBuffer::allocate(n * sizeof(Bits));
  CHECK_OK(name, buf.status());
  CHECK_OK(name, buf->upload(host));
  CHECK_OK(name, r.comm->allReduce(buf->get(), buf->get(), n, *type,
                                   ReduceOp::Sum, r.stream));
  sync(r);
  auto got = buf->template download<Bits>(n);
  CHECK_OK(name, got.status());
  std::vector<float> decoded(n), want(n);
  for (size_t i = 0; i < n; ++i) {
    decoded[i] = decode((*got)[i]);
    want[i] = float(r.world) * value(i);
  }
  report(name, firstMismatch(decoded, want));
}

void checkNarrowAllReduces(Rank &r) {
  checkNarrowAllReduce<uint16_t>(
      r, "all_reduce bf16", bundle::BF16, [](float v) { return encodeBF16(v); },
      decodeBF16, [](size_t i) { return float(i % 5); });
  // 1.0 and 0.5: every partial sum of up to 8 ranks is exact in E4M3.
  checkNarrowAllReduce<uint8_t>(
      r, "all_reduce fp8 e4m3", bundle::F8E4M3FN,
      [](float v) { return encodeE4M3(v); }, decodeE4M3,
      [](size_t i) { return i % 2 ? 0.5f : 1.0f; });
}

// A reduce-scatter of m elements a rank: each rank's input of world × m
// elements, and the block it must receive.
struct ScatterCase {
  std::vector<float> host, want;
};
ScatterCase scatterCase(const Rank &r, size_t m) {
  const size_t total = m * size_t(r.world);
  ScatterCase c{std::vector<float>(total), std::vector<float>(m)};
  float ranksSum = float(r.world * (r.world + 1) / 2);
  for (size_t j = 0; j < total; ++j)
    c.host[j] = float(r.rank + 1) * float(j % 97);
  for (size_t i = 0; i < m; ++i)
    c.want[i] = ranksSum * float((size_t(r.rank) * m + i) % 97);
  return c;
}

void checkReduceScatter(Rank &r) {
  const size_t m = 1 << 18, total = m * size_t(r.world);
  auto [host, want] = scatterCase(r, m);
  auto send = DeviceBuffer::allocate(total * sizeof(float));
  auto recv = DeviceBuffer::allocate(m * sizeof(float));
  CHECK_OK("reduce_scatter", send.status());
  CHECK_OK("reduce_scatter", recv.status());
  CHECK_OK("reduce_scatter", send->upload(host));
  CHECK_OK("reduce_scatter",
           r.comm->reduceScatter(send->get(), recv->get(), m, ncclFloat32,
                                 ReduceOp::Sum, r.stream));
  sync(r);
  auto got = recv->download<float>(m);
  CHECK_OK("reduce_scatter", got.status());
  report("reduce_scatter", firstMismatch(*got, want));
}

// Rank q's block of an all-gather holds element(q, i).
template <typename T, typename Element>
void checkAllGather(Rank &r, const std::string &name, bundle::DType dtype,
                    Element element) {
  const size_t m = 1 << 16, total = m * size_t(r.world);
  auto type = ncclTypeFor(dtype, /*reduced=*/false, r.nccl->version());
  CHECK_OK(name, type.status());
  std::vector<T> host(m), want(total);
  for (size_t i = 0; i < m; ++i)
    host[i] = element(r.rank, i);
  for (size_t j = 0; j < total; ++j)
    want[j] = element(int(j / m), j % m);
  auto send = DeviceBuffer::allocate(m * sizeof(T));
  auto recv = DeviceBuffer::allocate(total * sizeof(T));
  CHECK_OK(name, send.status());
  CHECK_OK(name, recv.status());
  CHECK_OK(name, send->upload(host));
  CHECK_OK(name,
           r.comm->allGather(send->get(), recv->get(), m, *type, r.stream));
  sync(r);
  auto got = recv->template download<T>(total);
  CHECK_OK(name, got.status());
  report(name, firstMismatch(*got, want));
}

void checkAllGathers(Rank &r) {
  checkAllGather<float>(r, "all_gather f32", bundle::F32, [](int q, size_t i) {
    return float(q * 10 + int(i % 10));
  });
  // FP8 is only moved here: it travels as bytes.
  checkAllGather<uint8_t>(
      r, "all_gather fp8 bytes", bundle::F8E4M3FN,
      [](int q, size_t i) { return uint8_t(q * 16 + int(i % 16)); });
}

void checkBroadcast(Rank &r) {
  const size_t n = 1000;
  std::vector<int32_t> host(n), want(n);
  for (size_t i = 0; i < n; ++i) {
    want[i] = int32_t(i * 3 + 1);
    host[i] = r.rank == 0 ? want[i] : -1;
  }
  auto buf = DeviceBuffer::allocate(n * 4);
  CHECK_OK("broadcast", buf.status());
  CHECK_OK("broadcast", buf->upload(host));
  CHECK_OK("broadcast", r.comm->broadcast(buf->get(), buf->get(), n, ncclInt32,
                                          /*root=*/0, r.stream));
  sync(r);
  auto got = buf->download<int32_t>(n);
  CHECK_OK("broadcast", got.status());
  report("broadcast", firstMismatch(*got, want));
}

void checkSendRecvRing(Rank &r) {
  // Each rank sends to the next and receives from the previous, in one
  // group: a pipeline step's shape.
  const size_t n = 1 << 16;
  int next = (r.rank + 1) % r.world, prev = (r.rank + r.world - 1) % r.world;
  std::vector<float> host(n, float(r.rank + 1)), want(n, float(prev + 1));
  auto send = DeviceBuffer::allocate(n * 4);
  auto recv = DeviceBuffer::allocate(n * 4);
  CHECK_OK("send/recv ring", send.status());
  CHECK_OK("send/recv ring", recv.status());
  CHECK_OK("send/recv ring", send->upload(host));
  CHECK_OK("send/recv ring", CommGroup::start(*r.nccl));
  CHECK_OK("send/recv ring",
           r.comm->send(send->get(), n, ncclFloat32, next, r.stream));
  CHECK_OK("send/recv ring",
           r.comm->recv(recv->get(), n, ncclFloat32, prev, r.stream));
  CHECK_OK("send/recv ring", CommGroup::end(*r.nccl, 60s));
  sync(r);
  auto got = recv->download<float>(n);
  CHECK_OK("send/recv ring", got.status());
  report("send/recv ring", firstMismatch(*got, want));
}

void checkSplit(Rank &r) {
  // Singleton groups: each sub-communicator holds one rank, so an
  // all-reduce over it leaves the data alone; then everyone in one group.
  std::vector<std::vector<int>> alone, together(1);
  for (int q = 0; q < r.world; ++q) {
    alone.push_back({q});
    together[0].push_back(q);
  }
  for (auto *groups : {&alone, &together}) {
    std::string name =
        groups == &alone ? "split (one rank each)" : "split (all ranks)";
    auto key = splitKeyFor(*groups, r.rank);
    CHECK_OK(name, key.status());
    CommOptions o;
    o.name = groups == &alone ? "alone" : "dp";
    auto sub = r.comm->split(*key, o);
    CHECK_OK(name, sub.status());
    int expectSize = groups == &alone ? 1 : r.world;
    if ((*sub)->size() != expectSize) {
      report(name, "size " + std::to_string((*sub)->size()));
      continue;
    }
    Rank subRank = r;
    subRank.comm = sub->get();
    subRank.rank = (*sub)->rank();
    subRank.world = (*sub)->size();
    checkAllReduce(subRank, ReduceOp::Sum, "all_reduce over " + name);
    CHECK_OK(name, (*sub)->finalize(60s));
  }
}

// The data group's use of a rank's arenas: memory from ncclMemAlloc,
// registered with the communicator (ncclCommRegister), then the in-place
// reduce-scatter and all-gather ZeRO-1 issues into it, and the
// deregistration in finalize before the memory is freed.
void checkRegisteredInPlace(Rank &r) {
  const std::string name = "registered in-place reduce_scatter + all_gather";
  if (!r.nccl->api().memAlloc || !r.nccl->api().commRegister) {
    report(name, "NCCL " + r.nccl->versionString() +
                     " has no ncclMemAlloc / ncclCommRegister");
    return;
  }
  std::vector<std::vector<int>> together(1);
  for (int q = 0; q < r.world; ++q)
    together[0].push_back(q);
  auto key = splitKeyFor(together, r.rank);
  CHECK_OK(name, key.status());
  CommOptions o;
  o.name = "data";
  auto sub = r.comm->split(*key, o);
  CHECK_OK(name, sub.status());
  const size_t m = 1 << 18, total = m * size_t(r.world);
  void *raw = nullptr;
  if (r.nccl->api().memAlloc(&raw, total * sizeof(float)) != ncclSuccess) {
    report(name, "ncclMemAlloc failed");
    return;
  }
  auto base = CUdeviceptr(raw);
  auto part = base + CUdeviceptr(size_t(r.rank) * m * sizeof(float));
  std::string problem;
  auto run = [&]() -> Status {
    OCTET_RETURN_IF_ERROR((*sub)->registerBuffer(
        raw, total * sizeof(float), BufferRegistration::Registered));
    auto [host, want] = scatterCase(r, m);
    OCTET_CHECK_CUDA(cuMemcpyHtoD(base, host.data(), total * sizeof(float)));
    OCTET_RETURN_IF_ERROR((*sub)->reduceScatter(
        raw, reinterpret_cast<void *>(part), m, ncclFloat32, ReduceOp::Sum,
        r.stream));
    sync(r);
    std::vector<float> got(m);
    OCTET_CHECK_CUDA(cuMemcpyDtoH(got.data(), part, m * sizeof(float)));
    problem = firstMismatch(got, want);
    if (!problem.empty())
      return Status::error("reduce_scatter: " + problem);
    // Each rank's part, then every part everywhere.
    for (size_t i = 0; i < m; ++i)
      got[i] = float(r.rank * 1000 + int(i % 13));
    OCTET_CHECK_CUDA(cuMemcpyHtoD(part, got.data(), m * sizeof(float)));
    OCTET_RETURN_IF_ERROR((*sub)->allGather(reinterpret_cast<void *>(part),
                                            raw, m, ncclFloat32, r.stream));
    sync(r);
    std::vector<float> all(total), wantAll(total);
    OCTET_CHECK_CUDA(cuMemcpyDtoH(all.data(), base, total * sizeof(float)));
    for (size_t j = 0; j < total; ++j)
      wantAll[j] = float(int(j / m) * 1000 + int((j % m) % 13));
    problem = firstMismatch(all, wantAll);
    if (!problem.empty())
      return Status::error("all_gather: " + problem);
    return (*sub)->finalize(60s);
  };
  Status s = run();
  if (!s) // the registration goes with the communicator, before the memory
    (*sub)->abort();
  r.nccl->api().memFree(raw);
  report(name, s ? "" : s.message());
}

int runRank(int steps) {
  auto env = rankEnvFromProcess();
  if (!env) {
    std::fprintf(stderr, "%s\n", env.status().message().c_str());
    return 2;
  }
  DeviceOptions deviceOptions;
  deviceOptions.ordinal = env->localRank;
  auto device = Device::open(deviceOptions);
  if (!device) {
    std::fprintf(stderr, "%s\n", device.status().message().c_str());
    return 2;
  }
  BootstrapOptions bo;
  bo.env = *env;
  bo.bundleHash = "octet-comm-gpu-test";
  bo.bundleWorldSize = uint32_t(env->worldSize);
  bo.joinTimeout = 60s;
  auto boot = Bootstrap::join(bo);
  if (!boot) {
    std::fprintf(stderr, "%s\n", boot.status().message().c_str());
    return 2;
  }
  Bootstrap &b = **boot;
  auto nccl = NcclLibrary::get();
  auto id = b.shareFromRank0(
      "octet/nccl-id/world",
      [&]() -> StatusOr<std::string> {
        if (!nccl)
          return nccl.status();
        return newUniqueId(**nccl);
      },
      60s);
  if (!id) {
    std::fprintf(stderr, "%s\n", id.status().message().c_str());
    return 2;
  }
  if (!nccl) { // rank 0 had it, this rank does not
    (void)b.reportFailure(nccl.status().message());
    std::fprintf(stderr, "%s\n", nccl.status().message().c_str());
    return 2;
  }
  if (b.rank() == 0)
    std::printf("NCCL %s from %s\n", (*nccl)->versionString().c_str(),
                (*nccl)->path().c_str());
  CommOptions co;
  auto world = Communicator::init(**nccl, *id, b.worldSize(), b.rank(), co);
  if (!world) {
    (void)b.reportFailure(world.status().message());
    std::fprintf(stderr, "%s\n", world.status().message().c_str());
    return 2;
  }
  WatchdogOptions wo;
  wo.rank = b.rank();
  wo.worldSize = b.worldSize();
  wo.stepTimeout = 60s;
  auto dog = Watchdog::start(wo, &b.store(), b.server());
  dog->watch(world->get());
  auto stream = Stream::create();
  if (!stream) {
    std::fprintf(stderr, "%s\n", stream.status().message().c_str());
    return 2;
  }
  Rank r{b.rank(), b.worldSize(), *nccl, world->get(), (*stream)->handle()};

  if (steps > 0) {
    auto buf = DeviceBuffer::allocate(1 << 20);
    if (!buf)
      return 2;
    for (int step = 0; step < steps; ++step) {
      Status s = r.comm->allReduce(buf->get(), buf->get(), (1 << 20) / 4,
                                   ncclFloat32, ReduceOp::Sum, r.stream);
      if (!s) {
        std::fprintf(stderr, "%s\n", s.message().c_str());
        return 2;
      }
      sync(r);
      dog->heartbeat(step);
      std::printf("step %d\n", step);
      std::fflush(stdout);
    }
  } else {
    checkAllReduce(r, ReduceOp::Sum, "all_reduce f32 sum");
    checkAllReduce(r, ReduceOp::Avg, "all_reduce f32 avg");
    checkNarrowAllReduces(r);
    checkReduceScatter(r);
    checkAllGathers(r);
    checkBroadcast(r);
    checkSendRecvRing(r);
    checkSplit(r);
    checkRegisteredInPlace(r);
  }
  dog->unwatch(world->get());
  dog->stop();
  Status fin = (*world)->finalize(60s);
  if (!fin)
    report("finalize", fin.message());
  Status done = b.finish(60s);
  if (!done)
    report("finish", done.message());
  std::printf("rank %d: %s\n", b.rank(), failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}

int launch(int gpus, int argc, char **argv) {
  int count = 0;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&count) != CUDA_SUCCESS ||
      count < gpus) {
    std::printf("skipped: %d GPU(s) visible, the test needs %d\n", count, gpus);
    return 77;
  }
  LaunchOptions o;
  o.ranks = gpus;
  o.command = {"/proc/self/exe", "--rank"};
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--steps" && i + 1 < argc) {
      o.command.push_back(argv[i]);
      o.command.push_back(argv[i + 1]);
    }
  // The children must run this very binary: resolve the link now.
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = 0;
    o.command[0] = self;
  }
  auto result = launchRanks(o);
  if (!result) {
    std::fprintf(stderr, "octet launch: %s\n",
                 result.status().message().c_str());
    return 2;
  }
  return result->exitCode;
}

} // namespace

int main(int argc, char **argv) {
  int gpus = 0, steps = 0;
  bool rank = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--gpus" && i + 1 < argc)
      gpus = std::atoi(argv[++i]);
    else if (a == "--steps" && i + 1 < argc)
      steps = std::atoi(argv[++i]);
    else if (a == "--rank")
      rank = true;
    else if (a == "--free-port") {
      int port = 0;
      auto probe = listenTcp("127.0.0.1", 0, &port, "port");
      if (!probe)
        return 2;
      std::printf("%d\n", port);
      return 0;
    }
  }
  if (rank)
    return runRank(steps);
  if (gpus > 0)
    return launch(gpus, argc, argv);
  std::fprintf(stderr, "usage: octet-comm-gpu-test --gpus N | --rank "
                       "[--steps K] | --free-port\n");
  return 2;
}
