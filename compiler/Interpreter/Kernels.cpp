#include "compiler/Interpreter/Kernels.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace octet::interp {
namespace {

// A fixed pool: spawning threads per matmul would cost more than the small
// matmuls of a tiny model.
class ThreadPool {
public:
  explicit ThreadPool(int threads) {
    for (int t = 1; t < threads; ++t)
      workers_.emplace_back([this] { workerLoop(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto &w : workers_)
      w.join();
  }

  void run(int64_t tasks, const std::function<void(int64_t)> &task) {
    // One job object per run: a worker that wakes late holds its own job,
    // whose counter is exhausted, and can never run another job's tasks.
    auto job = std::make_shared<Job>();
    job->task = &task;
    job->tasks = tasks;
    job->pending = tasks;
    std::lock_guard<std::mutex> runLock(runMutex_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = job;
      ++generation_;
    }
    wake_.notify_all();
    drain(*job);
    std::unique_lock<std::mutex> lock(job->mutex);
    job->done.wait(lock, [&] { return job->pending == 0; });
  }

  static thread_local bool inside;

private:
  struct Job {
    const std::function<void(int64_t)> *task = nullptr;
    int64_t tasks = 0;
    std::atomic<int64_t> next{0};
    int64_t pending = 0;
    std::mutex mutex;
    std::condition_variable done;
  };

  static void drain(Job &job) {
    bool wasInside = inside;
    inside = true;
    int64_t finished = 0;
    for (;;) {
      int64_t index = job.next.fetch_add(1);
      if (index >= job.tasks)
        break;
      (*job.task)(index);
      ++finished;
    }
    inside = wasInside;
    if (finished) {
      std::lock_guard<std::mutex> lock(job.mutex);
      job.pending -= finished;
      if (job.pending == 0)
        job.done.notify_all();
    }
  }

  void workerLoop() {
    uint64_t seen = 0;
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_)
          return;
        seen = generation_;
        job = job_;
      }
      if (job)
        drain(*job);
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_, runMutex_;
  std::condition_variable wake_;
  std::shared_ptr<Job> job_;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

thread_local bool ThreadPool::inside = false;

ThreadPool &pool() {
  static ThreadPool instance(numThreads());
  return instance;
}

// Register-blocked micro-kernel: a 6 × 16 tile of C lives in registers
// (12 AVX vectors) while K streams through packed panels of A (6 wide) and
// B (16 wide), so each multiply-add costs a fraction of a load. Compiled
// twice so AVX2/FMA machines get 8-wide FMAs and others still run (an ISA
// level, not arch=haswell, which the resolver matches by CPU model).
constexpr int64_t kMR = 6;  // rows of C per tile
constexpr int64_t kNR = 16; // columns of C per tile
typedef float v8f __attribute__((vector_size(32)));

__attribute__((target_clones("arch=x86-64-v3", "default"))) void
microKernel(int64_t k, const float *ap, const float *bp, float *c,
            int64_t ldc, int64_t rows, int64_t cols, float alpha,
            bool accumulate) {
  v8f acc[kMR][2];
  for (int64_t r = 0; r < kMR; ++r)
    acc[r][0] = acc[r][1] = v8f{};
  for (int64_t p = 0; p < k; ++p) {
    v8f b0, b1;
    __builtin_memcpy(&b0, bp + p * kNR, sizeof(v8f));
    __builtin_memcpy(&b1, bp + p * kNR + 8, sizeof(v8f));
    const float *a = ap + p * kMR;
    for (int64_t r = 0; r < kMR; ++r) {
      acc[r][0] += a[r] * b0;
      acc[r][1] += a[r] * b1;
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    float tile[kNR];
    __builtin_memcpy(tile, &acc[r][0], sizeof(v8f));
    __builtin_memcpy(tile + 8, &acc[r][1], sizeof(v8f));
    float *crow = c + r * ldc;
    if (accumulate)
      for (int64_t j = 0; j < cols; ++j)
        crow[j] += alpha * tile[j];
    else
      for (int64_t j = 0; j < cols; ++j)
        crow[j] = alpha * tile[j];
  }
}

} // namespace

StatusOr<int> threadsFromEnvironment() {
  const char *env = std::getenv("OCTET_THREADS");
  if (!env)
    return 0;
  std::string_view text(env);
  int n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
      n < 1 || n > kMaxThreads)
    return Status::error("OCTET_THREADS='" + std::string(text) +
                         "': it takes a whole number of CPU worker threads "
                         "from 1 to " + std::to_string(kMaxThreads) +
                         "; unset it to use every core");
  return n;
}

int numThreads() {
  static int count = [] {
    StatusOr<int> fromEnv = threadsFromEnvironment();
    if (fromEnv && *fromEnv > 0)
      return *fromEnv;
    unsigned hw = std::thread::hardware_concurrency();
    return hw ? static_cast<int>(hw) : 1;
  }();
  return count;
}

void parallelFor(int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &body) {
  if (n <= 0)
    return;
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = (n + grain - 1) / grain;
  if (chunks == 1 || ThreadPool::inside || numThreads() == 1) {
    for (int64_t c = 0; c < chunks; ++c)
      body(c * grain, std::min(n, (c + 1) * grain));
    return;
  }
  pool().run(chunks, [&](int64_t c) {
    body(c * grain, std::min(n, (c + 1) * grain));
  });
}

void gemm(int64_t m, int64_t n, int64_t k, const float *a, bool transA,
          const float *b, bool transB, float *c, float alpha, bool accumulate,
          bool parallel) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    if (!accumulate)
      std::fill(c, c + m * n, 0.0f);
    return;
  }
  // Pack A into panels of kMR rows ([panel][k][kMR]) and B into panels of
  // kNR columns ([panel][k][kNR]), zero-padded at the edges, whatever the
  // transposes: the micro-kernel then reads both contiguously.
  int64_t rowPanels = (m + kMR - 1) / kMR, colPanels = (n + kNR - 1) / kNR;
  std::vector<float> ap(rowPanels * k * kMR, 0.0f), bp(colPanels * k * kNR, 0.0f);
  auto packA = [&](int64_t p0, int64_t p1) {
    for (int64_t panel = p0; panel < p1; ++panel)
      for (int64_t r = 0; r < kMR && panel * kMR + r < m; ++r) {
        int64_t i = panel * kMR + r;
        float *dst = ap.data() + panel * k * kMR + r;
        if (transA)
          for (int64_t p = 0; p < k; ++p)
            dst[p * kMR] = a[p * m + i];
        else
          for (int64_t p = 0; p < k; ++p)
            dst[p * kMR] = a[i * k + p];
      }
  };
  auto packB = [&](int64_t p0, int64_t p1) {
    for (int64_t panel = p0; panel < p1; ++panel) {
      int64_t j0 = panel * kNR, width = std::min(kNR, n - j0);
      float *dst = bp.data() + panel * k * kNR;
      if (transB)
        for (int64_t j = 0; j < width; ++j)
          for (int64_t p = 0; p < k; ++p)
            dst[p * kNR + j] = b[(j0 + j) * k + p];
      else
        for (int64_t p = 0; p < k; ++p)
          std::copy_n(b + p * n + j0, width, dst + p * kNR);
    }
  };
  // Each task: one column panel × a run of row panels, so the B panel stays
  // in L1/L2 while A panels stream.
  constexpr int64_t kRowPanelsPerTask = 16;
  int64_t rowRuns = (rowPanels + kRowPanelsPerTask - 1) / kRowPanelsPerTask;
  auto task = [&](int64_t index) {
    int64_t cp = index / rowRuns, run = index % rowRuns;
    int64_t j0 = cp * kNR, cols = std::min(kNR, n - j0);
    for (int64_t rp = run * kRowPanelsPerTask;
         rp < std::min(rowPanels, (run + 1) * kRowPanelsPerTask); ++rp) {
      int64_t i0 = rp * kMR;
      microKernel(k, ap.data() + rp * k * kMR, bp.data() + cp * k * kNR,
                  c + i0 * n + j0, n, std::min(kMR, m - i0), cols, alpha,
                  accumulate);
    }
  };
  int64_t tasks = colPanels * rowRuns;
  if (!parallel || m * n * k < (1 << 15)) {
    packA(0, rowPanels);
    packB(0, colPanels);
    for (int64_t i = 0; i < tasks; ++i)
      task(i);
    return;
  }
  parallelFor(rowPanels, 16, packA);
  parallelFor(colPanels, 8, packB);
  parallelFor(tasks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      task(i);
  });
}

namespace {

// Copies head h of a [B, S, H, Dh] tensor for batch b into [S, Dh].
void gatherHead(const float *x, const AttentionShape &s, int64_t heads,
                int64_t b, int64_t h, float *dst) {
  for (int64_t t = 0; t < s.seq; ++t)
    std::copy_n(x + ((b * s.seq + t) * heads + h) * s.headDim, s.headDim,
                dst + t * s.headDim);
}

void scatterHead(const float *src, const AttentionShape &s, int64_t heads,
                 int64_t b, int64_t h, float *x) {
  for (int64_t t = 0; t < s.seq; ++t)
    std::copy_n(src + t * s.headDim, s.headDim,
                x + ((b * s.seq + t) * heads + h) * s.headDim);
}

// Key range [lo, hi] that query i may see, given causality and documents.
// Documents are contiguous runs of tokens, so the range is an interval.
struct KeyRange {
  int64_t lo, hi;
};

std::vector<KeyRange> keyRanges(const AttentionShape &s, const int64_t *docIds,
                                int64_t b) {
  std::vector<KeyRange> ranges(s.seq);
  int64_t start = 0;
  for (int64_t i = 0; i < s.seq; ++i) {
    if (docIds && i > 0 && docIds[b * s.seq + i] != docIds[b * s.seq + i - 1])
      start = i;
    ranges[i].lo = docIds ? start : 0;
  }
  int64_t end = s.seq - 1;
  for (int64_t i = s.seq - 1; i >= 0; --i) {
    if (docIds && i + 1 < s.seq &&
        docIds[b * s.seq + i] != docIds[b * s.seq + i + 1])
      end = i;
    ranges[i].hi = s.causal ? i : (docIds ? end : s.seq - 1);
  }
  return ranges;
}

} // namespace

void attentionForward(const AttentionShape &s, const float *q, const float *k,
                      const float *v, const int64_t *docIds, float *out,
                      float *lse) {
  int64_t group = s.qHeads / s.kvHeads;
  int64_t S = s.seq, D = s.headDim;
  parallelFor(s.batch * s.qHeads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> qh(S * D), kh(S * D), vh(S * D), oh(S * D), p(S * S);
    for (int64_t task = begin; task < end; ++task) {
      int64_t b = task / s.qHeads, h = task % s.qHeads, hk = h / group;
      std::vector<KeyRange> ranges = keyRanges(s, docIds, b);
      gatherHead(q, s, s.qHeads, b, h, qh.data());
      gatherHead(k, s, s.kvHeads, b, hk, kh.data());
      gatherHead(v, s, s.kvHeads, b, hk, vh.data());
      gemm(S, S, D, qh.data(), false, kh.data(), true, p.data(), s.scale,
           false, /*parallel=*/false);
      for (int64_t i = 0; i < S; ++i) {
        float *row = p.data() + i * S;
        KeyRange r = ranges[i];
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = r.lo; j <= r.hi; ++j)
          mx = std::max(mx, row[j]);
        double sum = 0;
        for (int64_t j = 0; j < S; ++j) {
          if (j < r.lo || j > r.hi) {
            row[j] = 0.0f;
            continue;
          }
          row[j] = std::exp(row[j] - mx);
          sum += row[j];
        }
        float inv = static_cast<float>(1.0 / sum);
        for (int64_t j = r.lo; j <= r.hi; ++j)
          row[j] *= inv;
        lse[(b * s.qHeads + h) * S + i] =
            mx + static_cast<float>(std::log(sum));
      }
      gemm(S, D, S, p.data(), false, vh.data(), false, oh.data(), 1.0f, false,
           /*parallel=*/false);
      scatterHead(oh.data(), s, s.qHeads, b, h, out);
    }
  });
}

void attentionBackward(const AttentionShape &s, const float *dout,
                       const float *q, const float *k, const float *v,
                       const float *out, const float *lse,
                       const int64_t *docIds, float *dq, float *dk, float *dv) {
  int64_t group = s.qHeads / s.kvHeads;
  int64_t S = s.seq, D = s.headDim;
  // One task per kv head, so the sums of dk and dv over its query heads need
  // no synchronisation.
  parallelFor(s.batch * s.kvHeads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> qh(S * D), kh(S * D), vh(S * D), oh(S * D), doh(S * D),
        dqh(S * D), dkh(S * D), dvh(S * D), p(S * S), dp(S * S), delta(S);
    for (int64_t task = begin; task < end; ++task) {
      int64_t b = task / s.kvHeads, hk = task % s.kvHeads;
      std::vector<KeyRange> ranges = keyRanges(s, docIds, b);
      gatherHead(k, s, s.kvHeads, b, hk, kh.data());
      gatherHead(v, s, s.kvHeads, b, hk, vh.data());
      std::fill(dkh.begin(), dkh.end(), 0.0f);
      std::fill(dvh.begin(), dvh.end(), 0.0f);
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        gatherHead(q, s, s.qHeads, b, h, qh.data());
        gatherHead(out, s, s.qHeads, b, h, oh.data());
        gatherHead(dout, s, s.qHeads, b, h, doh.data());
        // P recomputed from q, k and the saved lse.
        gemm(S, S, D, qh.data(), false, kh.data(), true, p.data(), s.scale,
             false, false);
        const float *l = lse + (b * s.qHeads + h) * S;
        for (int64_t i = 0; i < S; ++i) {
          float *row = p.data() + i * S;
          KeyRange r = ranges[i];
          for (int64_t j = 0; j < S; ++j)
            row[j] = (j < r.lo || j > r.hi) ? 0.0f : std::exp(row[j] - l[i]);
          double d = 0;
          for (int64_t c = 0; c < D; ++c)
            d += double(doh[i * D + c]) * oh[i * D + c];
          delta[i] = static_cast<float>(d);
        }
        // dV += Pᵀ dO; dP = dO Vᵀ; dS = P ∘ (dP − δ); dQ = scale dS K;
        // dK += scale dSᵀ Q.
        gemm(S, D, S, p.data(), true, doh.data(), false, dvh.data(), 1.0f,
             true, false);
        gemm(S, S, D, doh.data(), false, vh.data(), true, dp.data(), 1.0f,
             false, false);
        for (int64_t i = 0; i < S; ++i)
          for (int64_t j = 0; j < S; ++j)
            dp[i * S + j] = p[i * S + j] * (dp[i * S + j] - delta[i]);
        gemm(S, D, S, dp.data(), false, kh.data(), false, dqh.data(), s.scale,
             false, false);
        gemm(S, D, S, dp.data(), true, qh.data(), false, dkh.data(), s.scale,
             true, false);
        scatterHead(dqh.data(), s, s.qHeads, b, h, dq);
      }
      scatterHead(dkh.data(), s, s.kvHeads, b, hk, dk);
      scatterHead(dvh.data(), s, s.kvHeads, b, hk, dv);
    }
  });
}

} // namespace octet::interp
