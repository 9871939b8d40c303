#include "tests/unit/trainer/ToyBackend.h"
#include "tests/unit/trainer/HostRanks.h"

#include "support/Numerics.h"
#include "bundle/Bundle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unistd.h>

namespace octet::test {

using namespace octet::bundle;

Bundle makeToyBundle(const ToyShape &t) {
  Bundle b;
  b.set_format_version(kBundleFormatVersion);
  b.set_compiler_version("toy");
  b.set_world_size(1);
  Schedule *s = b.mutable_schedule();
  s->set_micro_batch_size(t.rows);
  s->set_seq_len(t.seq);
  s->set_grad_accum_steps(t.accum);
  s->set_steps(t.steps);
  s->set_vocab_size(t.vocab);
  s->set_log_interval(1);
  s->set_seed(t.seed);
  s->set_lr(t.lr);
  s->set_min_lr_ratio(1.0);
  s->set_flops_per_token(6.0 * double(t.vocab));
  MemoryPlan *plan = b.mutable_plan();
  Arena *arena = plan->add_arenas();
  arena->set_name("main");
  arena->set_alignment(256);
  uint64_t offset = 0;
  auto slot = [&](const std::string &name, SlotKind kind, bundle::DType dtype,
                  std::vector<int64_t> shape, const std::string &program) {
    Slot *x = plan->add_slots();
    x->set_name(name);
    x->set_kind(kind);
    x->set_dtype(dtype);
    uint64_t n = 1;
    for (int64_t d : shape) {
      x->add_shape(d);
      n *= uint64_t(d);
    }
    x->set_bytes(n * dtypeBytes(dtype));
    x->set_offset(offset);
    x->set_program(program);
    offset += (x->bytes() + 255) / 256 * 256;
    return uint32_t(plan->slots_size() - 1);
  };
  const int64_t v = t.vocab, n = t.rows * t.seq;
  uint32_t w = slot("w", PARAMETER, F32, {v}, "");
  uint32_t bias = slot("b", PARAMETER, F32, {1}, "");
  uint32_t gw = slot("grad.w", GRADIENT, F32, {v}, "");
  uint32_t gb = slot("grad.b", GRADIENT, F32, {1}, "");
  uint32_t mw = slot("adam_m.w", OPTIMIZER_STATE, F32, {v}, "");
  uint32_t vw = slot("adam_v.w", OPTIMIZER_STATE, F32, {v}, "");
  uint32_t mb = slot("adam_m.b", OPTIMIZER_STATE, F32, {1}, "");
  uint32_t vb = slot("adam_v.b", OPTIMIZER_STATE, F32, {1}, "");
  uint32_t step = slot("step", OPTIMIZER_STATE, I32, {}, "");
  slot("cache.w", WEIGHT_CACHE, BF16, {v}, "");
  uint32_t tokens = slot("tokens", IO, I32, {t.rows, t.seq}, "train");
  uint32_t labels = slot("labels", IO, I32, {t.rows, t.seq}, "train");
  uint32_t mask = slot("loss_mask", IO, F32, {t.rows, t.seq}, "train");
  uint32_t positions = slot("positions", IO, I32, {t.rows, t.seq}, "train");
  uint32_t loss = slot("loss", IO, F32, {}, "train");
  uint32_t gradNorm = slot("grad_norm", IO, F32, {}, "optimizer");
  uint32_t lr = slot("lr", IO, F32, {}, "optimizer");
  uint32_t evalLoss = slot("eval.loss", IO, F32, {}, "eval");
  uint32_t qkv = 0, gradQkv = 0;
  if (t.fused) {
    qkv = slot("layers.0.attn.wqkv", PARAMETER, t.fusedDType,
               {kToyQkvRows / t.qkvShards, kToyQkvCols}, "");
    gradQkv = slot("grad.layers.0.attn.wqkv", GRADIENT, t.fusedDType,
                   {kToyQkvRows, kToyQkvCols}, "");
  }
  (void)n;
  arena->set_bytes(offset);
  plan->set_peak_live_bytes(offset);

  // hf: the HF tensors and the rows each gives.
  auto param = [&](const std::string &name,
                   std::vector<std::pair<std::string, int64_t>> hf,
                   std::vector<int64_t> shape, uint32_t slot, uint32_t grad,
                   bool normal, bundle::DType dtype = F32) {
    Parameter *p = b.add_parameters();
    p->set_name(name);
    for (const auto &[tensor, rows] : hf) {
      HfPiece *piece = p->add_hf_pieces();
      piece->set_tensor(tensor);
      piece->set_rows(rows);
    }
    for (int64_t d : shape)
      p->add_shape(d);
    p->set_dtype(dtype);
    p->set_slot(slot);
    p->set_grad_slot(grad);
    p->set_trainable(true);
    if (normal) {
      p->mutable_init()->set_kind(Init::NORMAL);
      p->mutable_init()->set_std(0.5);
      p->mutable_init()->set_seed(t.seed ^ 0x1234);
    }
  };
  param("w", {{"model.embed_tokens.weight", v}}, {v}, w, gw, true);
  param("b", {}, {1}, bias, gb, false);
  if (t.fused)
    param("layers.0.attn.wqkv",
          {{"model.layers.0.self_attn.q_proj.weight", 4},
           {"model.layers.0.self_attn.k_proj.weight", 2},
           {"model.layers.0.self_attn.v_proj.weight", 2}},
          {kToyQkvRows, kToyQkvCols}, qkv, gradQkv, true, t.fusedDType);
  if (t.fused && t.qkvShards > 1)
    b.mutable_parameters(b.parameters_size() - 1)
        ->set_data_shards(uint32_t(t.qkvShards));
  auto state = [&](const std::string &name, StateKind kind,
                   const std::string &owner, std::vector<int64_t> shape,
                   bundle::DType dtype, uint32_t slot) {
    StateTensor *st = b.add_state();
    st->set_name(name);
    st->set_kind(kind);
    st->set_owner(owner);
    for (int64_t d : shape)
      st->add_shape(d);
    st->set_dtype(dtype);
    st->set_slot(slot);
  };
  state("adam_m.w", ADAM_M, "w", {v}, F32, mw);
  state("adam_v.w", ADAM_V, "w", {v}, F32, vw);
  state("adam_m.b", ADAM_M, "b", {1}, F32, mb);
  state("adam_v.b", ADAM_V, "b", {1}, F32, vb);
  state("step", STEP_COUNTER, "", {}, I32, step);

  RankProgram *rank = b.add_ranks();
  auto program = [&](ProgramKind kind, const std::string &name) {
    Program *p = rank->add_programs();
    p->set_kind(kind);
    p->set_name(name);
    p->set_capturable(true);
    return p;
  };
  auto named = [](google::protobuf::RepeatedPtrField<NamedSlot> *list,
                  const std::string &name, uint32_t slot) {
    NamedSlot *x = list->Add();
    x->set_name(name);
    x->set_slot(slot);
  };
  program(INIT, "init");
  for (ProgramKind kind : {TRAIN_MICROBATCH, EVAL}) {
    Program *p = program(kind, kind == EVAL ? "forward" : "train_microbatch");
    named(p->mutable_inputs(), "tokens", tokens);
    named(p->mutable_inputs(), "labels", labels);
    named(p->mutable_inputs(), "loss_mask", mask);
    named(p->mutable_inputs(), "positions", positions);
    named(p->mutable_outputs(), "loss", kind == EVAL ? evalLoss : loss);
  }
  Program *opt = program(OPTIMIZER_STEP, "optimizer_step");
  named(opt->mutable_outputs(), "grad_norm", gradNorm);
  named(opt->mutable_outputs(), "lr", lr);
  b.set_content_hash(computeContentHash(b));
  return b;
}

StatusOr<std::unique_ptr<TrainData>> openToyData(const ToyShape &shape) {
  TrainDataOptions d;
  d.kind = "synthetic";
  d.rows = uint32_t(shape.rows);
  d.sequenceLength = uint32_t(shape.seq);
  d.seed = shape.seed;
  d.vocabSize = shape.vocab;
  return TrainData::open(d);
}

DataParallelRuns runDataParallel(int ranks, const ToyShape &shape,
                                 const TrainerOptions &options,
                                 const std::function<void(bundle::Bundle &)> &edit) {
  DataParallelRuns d;
  auto host = std::make_shared<HostRanks>(ranks);
  for (int r = 0; r < ranks; ++r) {
    d.groups.push_back(std::make_shared<HostRank>(*host, r));
    TrainerOptions o = options;
    o.dataParallel = d.groups.back();
    d.runs.push_back(makeToyRun(shape, o, edit));
    HostRank *group = d.groups.back().get();
    d.runs.back().backend->reduceGradients = [group](float *g, int64_t n) {
      std::vector<double> values(g, g + n);
      OCTET_RETURN_IF_ERROR(group->sum(values));
      for (int64_t i = 0; i < n; ++i)
        g[i] = float(values[size_t(i)]);
      return Status::ok();
    };
  }
  for (int r = 0; r < ranks; ++r)
    d.results.push_back(Status::error("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    if (d.runs[size_t(r)].status.isOk())
      threads.emplace_back([&d, r, host] {
        d.results[size_t(r)] = d.runs[size_t(r)].trainer->run();
      });
  for (std::thread &t : threads)
    t.join();
  return d;
}

void toyAdamStep(float *w, float *g, float *m, float *v, int64_t count,
                 int32_t step, float lr, double &squaredNorm) {
  for (int64_t i = 0; i < count; ++i) {
    squaredNorm += double(g[i]) * g[i];
    m[i] = 0.9f * m[i] + 0.1f * g[i];
    v[i] = 0.999f * v[i] + 0.001f * g[i] * g[i];
    float mh = m[i] / (1.0f - std::pow(0.9f, float(step)));
    float vh = v[i] / (1.0f - std::pow(0.999f, float(step)));
    w[i] -= lr * mh / (std::sqrt(vh) + 1e-8f);
    g[i] = 0;
  }
}

void expectSameFloats(const std::vector<uint8_t> &a,
                      const std::vector<uint8_t> &b, const char *what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i + 4 <= a.size(); i += 4) {
    float x, y;
    std::memcpy(&x, &a[i], 4);
    std::memcpy(&y, &b[i], 4);
    ASSERT_NEAR(x, y, 1e-5f * std::max(1.0f, std::fabs(y)))
        << what << " element " << i / 4;
  }
}

ToyRun makeToyRun(const ToyShape &shape, TrainerOptions options,
                  const std::function<void(bundle::Bundle &)> &edit) {
  ToyRun r;
  Bundle b = makeToyBundle(shape);
  if (edit)
    edit(b);
  r.backend = std::make_unique<ToyBackend>(std::move(b));
  auto data = openToyData(shape);
  if (!data) {
    r.status = data.status();
    return r;
  }
  r.data = std::move(*data);
  options.out = nullptr;
  auto t = Trainer::create(*r.backend, *r.data, options);
  if (!t) {
    r.status = t.status();
    return r;
  }
  r.trainer = std::move(*t);
  return r;
}

std::string freshTestDir(const std::string &name) {
  std::string dir =
      ::testing::TempDir() + "/" + name + "-" + std::to_string(::getpid());
  std::string command = "rm -rf '" + dir + "'";
  EXPECT_EQ(std::system(command.c_str()), 0);
  return dir;
}

ToyBackend::ToyBackend(Bundle bundle)
    : bundle_(std::move(bundle)), arena_(bundle_.plan().arenas(0).bytes()) {
  // Fresh device memory is not zero.
  for (size_t i = 0; i < arena_.size(); ++i)
    arena_[i] = uint8_t(0xA5 ^ i);
}

const Program *ToyBackend::program(ProgramKind kind) const {
  for (const Program &p : bundle_.ranks(0).programs())
    if (p.kind() == kind)
      return &p;
  return nullptr;
}

uint8_t *ToyBackend::at(uint32_t slot) {
  return arena_.data() + bundle_.plan().slots(int(slot)).offset();
}

static int findSlot(const Bundle &b, const std::string &name) {
  for (int i = 0; i < b.plan().slots_size(); ++i)
    if (b.plan().slots(i).name() == name)
      return i;
  return -1;
}

float *ToyBackend::f32(const std::string &name) {
  return reinterpret_cast<float *>(at(uint32_t(findSlot(bundle_, name))));
}

int32_t *ToyBackend::i32(const std::string &name) {
  return reinterpret_cast<int32_t *>(at(uint32_t(findSlot(bundle_, name))));
}

std::vector<uint8_t> ToyBackend::slotBytes(const std::string &name) const {
  const Slot &s = bundle_.plan().slots(findSlot(bundle_, name));
  return {arena_.begin() + long(s.offset()),
          arena_.begin() + long(s.offset() + s.bytes())};
}

void ToyBackend::forward(bool train, float &loss) {
  const Schedule &s = bundle_.schedule();
  const int64_t n = s.micro_batch_size() * s.seq_len();
  auto *cache =
      reinterpret_cast<uint16_t *>(at(uint32_t(findSlot(bundle_, "cache.w"))));
  int32_t *tok = i32("tokens"), *lab = i32("labels");
  float *mask = f32("loss_mask");
  float b = *f32("b");
  float *gw = f32("grad.w"), *gb = f32("grad.b");
  double sum = 0, count = 0;
  for (int64_t i = 0; i < n; ++i)
    count += mask[i];
  for (int64_t i = 0; i < n; ++i) {
    if (mask[i] == 0)
      continue;
    float y = float(lab[i]) / float(s.vocab_size());
    float d = numerics::decodeBF16(cache[tok[i]]) + b - y;
    sum += double(d) * d;
    if (train) {
      float g = float(2.0 * d / count);
      gw[tok[i]] += g;
      *gb += g;
    }
  }
  loss = float(sum / std::max(1.0, count));
}

Status ToyBackend::beginTimeline() {
  if (recording_)
    return Status::error("the timeline is already recording");
  recording_ = true;
  ++timelineBegins;
  runsBeforeTimeline = 0;
  for (int n : runs_)
    runsBeforeTimeline += n;
  return Status::ok();
}

Status ToyBackend::endTimeline() {
  if (!recording_)
    return Status::error("the timeline was not recording");
  recording_ = false;
  ++timelineEnds;
  return Status::ok();
}

Status ToyBackend::run(ProgramKind kind, RunMode mode) {
  if (!hasProgram(kind))
    return Status::error("no such program");
  ++runs_[kind];
  graphRuns_ += mode.graph;
  if (recording_)
    timelineRuns.push_back({kind, mode.graph});
  const int64_t v = bundle_.schedule().vocab_size();
  auto *cache =
      reinterpret_cast<uint16_t *>(at(uint32_t(findSlot(bundle_, "cache.w"))));
  auto refreshCache = [&] {
    for (int64_t i = 0; i < v; ++i)
      cache[i] = numerics::encodeBF16(f32("w")[i]);
  };
  switch (kind) {
  case INIT:
    refreshCache();
    break;
  case TRAIN_MICROBATCH:
    forward(true, *f32("loss"));
    if (reduceGradients && mode.lastMicrobatch) {
      OCTET_RETURN_IF_ERROR(reduceGradients(f32("grad.w"), v));
      OCTET_RETURN_IF_ERROR(reduceGradients(f32("grad.b"), 1));
    }
    break;
  case EVAL:
    forward(false, *f32("eval.loss"));
    break;
  case OPTIMIZER_STEP: {
    int32_t t = ++*i32("step");
    float lr = float(bundle_.schedule().lr());
    double norm = 0;
    toyAdamStep(f32("w"), f32("grad.w"), f32("adam_m.w"), f32("adam_v.w"), v, t,
                lr, norm);
    toyAdamStep(f32("b"), f32("grad.b"), f32("adam_m.b"), f32("adam_v.b"), 1, t,
                lr, norm);
    *f32("grad_norm") = float(std::sqrt(norm));
    *f32("lr") = lr;
    refreshCache();
    break;
  }
  default:
    return Status::error("unknown program");
  }
  return Status::ok();
}

Status ToyBackend::writeSlot(uint32_t slot, const void *data, uint64_t bytes) {
  if (bytes > bundle_.plan().slots(int(slot)).bytes())
    return Status::error("write past the slot");
  std::memcpy(at(slot), data, bytes);
  return Status::ok();
}

Status ToyBackend::readSlot(uint32_t slot, void *data, uint64_t bytes) {
  if (bytes > bundle_.plan().slots(int(slot)).bytes())
    return Status::error("read past the slot");
  std::memcpy(data, at(slot), bytes);
  return Status::ok();
}

Status ToyBackend::zeroSlot(uint32_t slot) {
  std::memset(at(slot), 0, bundle_.plan().slots(int(slot)).bytes());
  return Status::ok();
}

StatusOr<std::unique_ptr<HostBuffer>> ToyBackend::hostBuffer(uint64_t bytes) {
  return std::unique_ptr<HostBuffer>(new HostVectorBuffer(bytes));
}

DeviceMemory ToyBackend::memory() const {
  DeviceMemory m;
  m.arenas = arena_.size();
  m.fixedCosts = 1 << 20;
  m.used = m.arenas + m.fixedCosts;
  m.total = uint64_t(80) << 30;
  return m;
}

} // namespace octet::test
