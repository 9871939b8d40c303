#include "compiler/Interpreter/Kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
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

// Packs a [rows, cols] row-major block transposed into [cols, rows].
void transpose(const float *src, int64_t rows, int64_t cols, float *dst) {
  constexpr int64_t B = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += B)
    for (int64_t c0 = 0; c0 < cols; c0 += B) {
      int64_t r1 = std::min(rows, r0 + B), c1 = std::min(cols, c0 + B);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c)
          dst[c * rows + r] = src[r * cols + c];
    }
}

constexpr int64_t kRows = 4;   // rows of C per micro-kernel call
constexpr int64_t kCols = 128; // columns of C held in the accumulator tile

// C rows [0, rows) × columns [j0, j1) of a [M, K] · [K, N] product. The tile
// of 4 × 128 accumulators stays in L1 while B streams through once per four
// rows of A. Compiled twice so AVX2/FMA machines get 8-wide FMAs and others
// still run.
__attribute__((target_clones("arch=haswell", "default"))) void
microKernel(int64_t rows, int64_t k, const float *a, int64_t lda,
            const float *b, int64_t ldb, float *c, int64_t ldc, int64_t j0,
            int64_t j1, float alpha, bool accumulate) {
  float tile[kRows][kCols];
  int64_t width = j1 - j0;
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < width; ++j)
      tile[r][j] = 0.0f;
  if (rows == kRows) {
    for (int64_t p = 0; p < k; ++p) {
      const float *brow = b + p * ldb + j0;
      float a0 = a[p], a1 = a[lda + p], a2 = a[2 * lda + p],
            a3 = a[3 * lda + p];
      float *t0 = tile[0], *t1 = tile[1], *t2 = tile[2], *t3 = tile[3];
      for (int64_t j = 0; j < width; ++j) {
        float bj = brow[j];
        t0[j] += a0 * bj;
        t1[j] += a1 * bj;
        t2[j] += a2 * bj;
        t3[j] += a3 * bj;
      }
    }
  } else {
    for (int64_t p = 0; p < k; ++p) {
      const float *brow = b + p * ldb + j0;
      for (int64_t r = 0; r < rows; ++r) {
        float ar = a[r * lda + p];
        float *t = tile[r];
        for (int64_t j = 0; j < width; ++j)
          t[j] += ar * brow[j];
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    float *crow = c + r * ldc + j0;
    if (accumulate)
      for (int64_t j = 0; j < width; ++j)
        crow[j] += alpha * tile[r][j];
    else
      for (int64_t j = 0; j < width; ++j)
        crow[j] = alpha * tile[r][j];
  }
}

} // namespace

int numThreads() {
  static int count = [] {
    if (const char *env = std::getenv("OCTET_THREADS")) {
      int n = std::atoi(env);
      if (n > 0)
        return n;
    }
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
  // Canonical operands: A [M, K] and B [K, N], both row-major.
  std::vector<float> aPacked, bPacked;
  if (transA) {
    aPacked.resize(m * k);
    transpose(a, k, m, aPacked.data());
    a = aPacked.data();
  }
  if (transB) {
    bPacked.resize(k * n);
    transpose(b, n, k, bPacked.data());
    b = bPacked.data();
  }
  int64_t rowBlocks = (m + kRows - 1) / kRows;
  int64_t colBlocks = (n + kCols - 1) / kCols;
  auto block = [&](int64_t index) {
    int64_t rb = index / colBlocks, cb = index % colBlocks;
    int64_t i0 = rb * kRows, rows = std::min(kRows, m - i0);
    int64_t j0 = cb * kCols, j1 = std::min(n, j0 + kCols);
    microKernel(rows, k, a + i0 * k, k, b, n, c + i0 * n, n, j0, j1, alpha,
                accumulate);
  };
  int64_t blocks = rowBlocks * colBlocks;
  // About 64k multiply-adds per chunk keeps scheduling overhead small.
  int64_t perBlock = kRows * std::min(kCols, n) * k;
  int64_t grain = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, perBlock));
  if (!parallel) {
    for (int64_t i = 0; i < blocks; ++i)
      block(i);
    return;
  }
  parallelFor(blocks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      block(i);
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
