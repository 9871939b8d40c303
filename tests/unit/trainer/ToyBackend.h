#ifndef OCTET_TESTS_UNIT_TRAINER_TOYBACKEND_H
#define OCTET_TESTS_UNIT_TRAINER_TOYBACKEND_H

// A TrainBackend in host memory running a toy model, so the training loop's
// logic is tested without a GPU. The bundle is real (plan, slots, programs,
// parameters, state); the programs' steps are C++ instead of kernels:
//   INIT            cache = bf16(w)
//   TRAIN_MICROBATCH pred_i = cache[token_i] + b; loss = mean (pred - y)^2
//                   with y = label / vocab; grads accumulate into gw, gb
//   OPTIMIZER_STEP  Adam on (w, b) with moments m, v and a step counter;
//                   outputs grad_norm, lr; clears gradients; refreshes cache
//   EVAL            the loss alone
// The cache (a WEIGHT_CACHE slot) makes resuming without it diverge, as an
// FP8 weight copy would.

#include "runtime/exec/TrainBackend.h"
#include "runtime/exec/Trainer.h"

#include <functional>
#include <memory>
#include <vector>

#ifndef ASSERT_OK
#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    ::octet::Status st_ = (expr);                                              \
    ASSERT_TRUE(st_.isOk()) << st_.message();                                  \
  } while (0)
#endif

namespace octet::test {

struct ToyShape {
  int64_t vocab = 64, rows = 2, seq = 8, accum = 2, steps = 10;
  double lr = 0.05;
  uint64_t seed = 7;
  // Adds "layers.0.attn.wqkv", kToyQkvRows x kToyQkvCols in `fusedDType`,
  // stored in HF checkpoints as q_proj (4 rows), k_proj and v_proj (2
  // each); the toy's programs leave it as it is.
  bool fused = false;
  bundle::DType fusedDType = bundle::F32;
  // With `fused`: the data-parallel ranks that share out the fused
  // parameter's f32 master (ZeRO-1's Parameter.data_shards): its slot
  // holds kToyQkvRows / qkvShards rows.
  int64_t qkvShards = 1;
};

inline constexpr int64_t kToyQkvRows = 8, kToyQkvCols = 3;

bundle::Bundle makeToyBundle(const ToyShape &shape);

// Staging memory in plain host memory (a GPU backend's is pinned).
class HostVectorBuffer : public HostBuffer {
public:
  explicit HostVectorBuffer(uint64_t bytes) : data_(bytes) {}
  void *data() override { return data_.data(); }
  uint64_t bytes() const override { return data_.size(); }

private:
  std::vector<uint8_t> data_;
};

class ToyBackend;

// A trainer over the toy bundle of `shape` (changed by `edit` first, when
// given) and synthetic data, or the status that stopped its setup.
struct ToyRun {
  std::unique_ptr<ToyBackend> backend;
  std::unique_ptr<TrainData> data;
  std::unique_ptr<Trainer> trainer;
  Status status = Status::ok();
};
ToyRun makeToyRun(const ToyShape &shape, TrainerOptions options,
                  const std::function<void(bundle::Bundle &)> &edit = {});

class HostRank;

// Data parallelism in the toy: `ranks` trainers in threads, each rank's
// gradients summed over the ranks before its Adam step, as the compiled
// all-reduce does; `edit` changes each rank's bundle first.
struct DataParallelRuns {
  std::vector<ToyRun> runs;
  std::vector<std::shared_ptr<HostRank>> groups;
  std::vector<StatusOr<TrainResult>> results;
};
DataParallelRuns
runDataParallel(int ranks, const ToyShape &shape, const TrainerOptions &options,
                const std::function<void(bundle::Bundle &)> &edit = {});

// The toy's optimizer, Adam without weight decay, on `count` elements at step
// `step`: the squared gradient norm added to `squaredNorm`, the gradients
// cleared.
void toyAdamStep(float *w, float *g, float *m, float *v, int64_t count,
                 int32_t step, float lr, double &squaredNorm);

// The synthetic data the toy trains on.
StatusOr<std::unique_ptr<TrainData>> openToyData(const ToyShape &shape);

// Parameters are sums in another order on two ranks (g0 + g1 rather than
// (0 + g0) + g1 element by element), so equal within float rounding.
void expectSameFloats(const std::vector<uint8_t> &a,
                      const std::vector<uint8_t> &b, const char *what);

// An empty path under the test's temporary directory (removed if it
// exists), unique to this process.
std::string freshTestDir(const std::string &name);

class ToyBackend : public TrainBackend {
public:
  explicit ToyBackend(bundle::Bundle bundle);
  const bundle::Bundle &bundle() const override { return bundle_; }
  const bundle::Program *program(bundle::ProgramKind kind) const override;
  Status run(bundle::ProgramKind kind, RunMode mode) override;
  Status writeSlot(uint32_t slot, const void *data, uint64_t bytes) override;
  Status readSlot(uint32_t slot, void *data, uint64_t bytes) override;
  Status zeroSlot(uint32_t slot) override;
  Status synchronize() override { return Status::ok(); }
  StatusOr<std::unique_ptr<HostBuffer>> hostBuffer(uint64_t bytes) override;
  DeviceMemory memory() const override;
  std::string deviceName() const override { return "NVIDIA H100 80GB HBM3"; }

  // Slot contents by name (tests compare parameters bit for bit).
  std::vector<uint8_t> slotBytes(const std::string &name) const;
  int runs(bundle::ProgramKind kind) const { return runs_[kind]; }

  // Data parallelism: called on the gradient sums (grad.w, then grad.b) at
  // the end of the TRAIN_MICROBATCH run that completes a step, where a
  // data-parallel bundle's last_microbatch all-reduces are.
  std::function<Status(float *gradients, int64_t count)> reduceGradients;
  int graphRuns() const { return graphRuns_; }

  // The step timeline: what ran between beginTimeline and endTimeline
  // (kind, and whether as a graph), and how many program runs came before.
  Status beginTimeline() override;
  Status endTimeline() override;
  struct TimelineRun {
    bundle::ProgramKind kind;
    bool graph;
  };
  std::vector<TimelineRun> timelineRuns;
  int timelineBegins = 0, timelineEnds = 0, runsBeforeTimeline = -1;

private:
  float *f32(const std::string &name);
  int32_t *i32(const std::string &name);
  uint8_t *at(uint32_t slot);
  void forward(bool train, float &loss);

  bundle::Bundle bundle_;
  std::vector<uint8_t> arena_;
  int runs_[8] = {};
  int graphRuns_ = 0;
  bool recording_ = false;
};

} // namespace octet::test

#endif
