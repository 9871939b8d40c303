#include "runtime/exec/GoldenCheck.h"

#include "support/Numerics.h"
#include "bundle/Bundle.h"
#include "bundle/InitValues.h"
#include "hf/Safetensors.h"
#include "runtime/exec/Golden.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

namespace octet {

using namespace octet::bundle;

namespace {

const Program *programOf(TrainBackend &backend, ProgramKind kind) {
  return backend.program(kind);
}

// Element i of a slot's bytes, as a double; NaN for a slot whose wire
// dtype has no DType.
double slotValue(const uint8_t *p, bundle::DType wireDType, uint64_t i) {
  std::optional<octet::DType> dtype = dtypeFromProto(wireDType);
  if (!dtype)
    return NAN;
  const uint8_t *element = p + octet::dtypeBytes(*dtype) * i;
  switch (*dtype) {
  case octet::DType::I32: {
    int32_t v;
    std::memcpy(&v, element, 4);
    return v;
  }
  case octet::DType::I64: {
    int64_t v;
    std::memcpy(&v, element, 8);
    return double(v);
  }
  case octet::DType::U8:
    return *element;
  default:
    return numerics::decodeFloat(*dtype, element);
  }
}

struct Mismatch {
  std::string name;
  double error = 0, normError = 0, tolerance = 0, normTolerance = 0;
  double gpuL2 = 0, goldenL2 = 0, gpuMax = 0, goldenMax = 0;
  double score() const {
    return std::max(error / tolerance, normError / normTolerance);
  }
};

class Checker {
public:
  Checker(TrainBackend &backend, const GoldenCheckOptions &options)
      : backend_(backend), options_(options), bundle_(backend.bundle()) {}

  StatusOr<bool> run();

private:
  void print(const char *fmt, ...) __attribute__((format(printf, 2, 3)));
  Status writeInitialValues(bool &ok);
  Status compareSnapshot(const std::string &name, const std::string &what,
                         bool &ok);
  StatusOr<float> readScalar(const Program &p, const std::string &output);

  TrainBackend &backend_;
  GoldenCheckOptions options_;
  const Bundle &bundle_;
  golden::Tolerances tol_{};
  std::vector<std::string> keep_;
};

void Checker::print(const char *fmt, ...) {
  if (!options_.out)
    return;
  va_list args;
  va_start(args, fmt);
  std::vfprintf(options_.out, fmt, args);
  va_end(args);
  std::fflush(options_.out);
}

Status Checker::writeInitialValues(bool &ok) {
  auto hashes = golden::readInitHashes(options_.dir);
  if (!hashes)
    return hashes.status();
  const MemoryPlan &plan = bundle_.plan();
  int differ = 0, checked = 0;
  auto write = [&](const std::string &name, const Init &init,
                   uint32_t slot) -> Status {
    const Slot &s = plan.slots(int(slot));
    uint64_t elements = s.bytes() / std::max<uint64_t>(1, dtypeBytes(s.dtype()));
    auto bytes = initialPart(init, s.dtype(), 0, elements, name,
                             std::thread::hardware_concurrency());
    if (!bytes)
      return bytes.status();
    auto it = hashes->find(name);
    if (it == hashes->end())
      return Status::error(options_.dir + "/" + golden::kInitFile +
                           ": no initial value of '" + name +
                           "': the golden belongs to another bundle");
    ++checked;
    if (it->second.first != bytes->size() ||
        it->second.second != golden::fnv1a64(bytes->data(), bytes->size())) {
      if (differ++ < options_.worst)
        print("  initial value of '%s' differs from the interpreter's\n",
              name.c_str());
      ok = false;
    }
    // The host's copy must outlive the asynchronous write.
    keep_.push_back(std::move(*bytes));
    return backend_.writeSlot(slot, keep_.back().data(), keep_.back().size());
  };
  for (const Parameter &p : bundle_.parameters())
    OCTET_RETURN_IF_ERROR(write(p.name(), p.init(), p.slot()));
  for (const StateTensor &s : bundle_.state())
    OCTET_RETURN_IF_ERROR(write(s.name(), s.init(), s.slot()));
  OCTET_RETURN_IF_ERROR(backend_.synchronize());
  keep_.clear();
  print("initial values: %d parameter and state tensors, %d differ from the "
        "interpreter's (FNV-1a of their bytes)\n",
        checked, differ);
  return Status::ok();
}

StatusOr<float> Checker::readScalar(const Program &p,
                                    const std::string &output) {
  for (const NamedSlot &o : p.outputs())
    if (o.name() == output) {
      float v = 0;
      OCTET_RETURN_IF_ERROR(backend_.readSlot(o.slot(), &v, 4));
      OCTET_RETURN_IF_ERROR(backend_.synchronize());
      return v;
    }
  return Status::error("program '" + p.name() + "' has no output '" + output +
                       "'");
}

Status Checker::compareSnapshot(const std::string &name,
                                const std::string &what, bool &ok) {
  auto golden = golden::readSnapshot(options_.dir, name);
  if (!golden)
    return golden.status();
  const MemoryPlan &plan = bundle_.plan();
  // Variables' slots: the persistent ones and the step-local gradients,
  // which the golden lists only before the optimizer (their window).
  std::map<std::string, uint32_t> slots;
  for (int i = 0; i < plan.slots_size(); ++i)
    if (plan.slots(i).program().empty() ||
        !plan.slots(i).last_program().empty())
      slots[plan.slots(i).name()] = uint32_t(i);
  std::vector<Mismatch> all;
  std::vector<golden::SlotSummary> gpu;
  std::vector<uint8_t> bytes;
  for (const auto &[slotName, want] : *golden) {
    auto it = slots.find(slotName);
    if (it == slots.end())
      return Status::error(options_.dir + "/" + name + ".tsv: slot '" +
                           slotName + "' is not a persistent slot of the "
                           "bundle: the golden belongs to another bundle");
    const Slot &s = plan.slots(int(it->second));
    uint64_t elements = s.bytes() / std::max<uint64_t>(1, dtypeBytes(s.dtype()));
    if (elements != want.elements)
      return Status::error("slot '" + slotName + "' has " +
                           std::to_string(elements) + " elements; the "
                           "golden's has " + std::to_string(want.elements));
    bytes.resize(s.bytes());
    OCTET_RETURN_IF_ERROR(backend_.readSlot(it->second, bytes.data(),
                                            bytes.size()));
    OCTET_RETURN_IF_ERROR(backend_.synchronize());
    golden::SlotSummary got =
        golden::summarize(slotName, elements, [&](uint64_t i) {
          return slotValue(bytes.data(), s.dtype(), i);
        });
    gpu.push_back(got);
    Mismatch m;
    m.name = slotName;
    m.error = golden::relativeL2(got.samples, want.samples);
    m.normError = golden::relativeError(got.l2, want.l2);
    golden::Tolerances slotTol = golden::slotTolerances(tol_, slotName);
    m.tolerance = slotTol.tensor;
    m.normTolerance = slotTol.tensorNorm;
    m.gpuL2 = got.l2;
    m.goldenL2 = want.l2;
    m.gpuMax = got.maxAbs;
    m.goldenMax = want.maxAbs;
    all.push_back(m);
  }
  std::sort(all.begin(), all.end(), [](const Mismatch &a, const Mismatch &b) {
    return a.score() > b.score();
  });
  int bad = 0;
  for (const Mismatch &m : all)
    bad += !(m.score() <= 1);
  print("%s: %zu slots, %d outside their bounds (relative L2 %.3g, norm "
        "%.3g; adam_v as its square root); worst:\n",
        what.c_str(), all.size(), bad, tol_.tensor, tol_.tensorNorm);
  print("  %-52s %10s %10s %12s %12s %11s %11s\n", "slot", "rel L2",
        "norm err", "gpu |x|", "golden |x|", "gpu max", "golden max");
  for (size_t i = 0; i < all.size() && int(i) < options_.worst; ++i) {
    const Mismatch &m = all[i];
    print("  %-52s %10.3g %10.3g %12.5g %12.5g %11.4g %11.4g%s\n",
          m.name.c_str(), m.error, m.normError, m.gpuL2, m.goldenL2, m.gpuMax,
          m.goldenMax, m.score() <= 1 ? "" : "  MISMATCH");
  }
  if (bad)
    ok = false;
  if (!options_.saveDir.empty())
    return golden::writeSnapshot(options_.saveDir, name, gpu);
  return Status::ok();
}

StatusOr<bool> Checker::run() {
  auto info = golden::readInfo(options_.dir);
  if (!info)
    return info.status();
  std::string hash;
  for (unsigned char c : bundle_.content_hash()) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", c);
    hash += hex;
  }
  if (info->get("bundle_sha256") != hash)
    return Status::error(options_.dir + ": the golden was made from bundle " +
                         info->get("bundle_sha256") + ", this one is " + hash +
                         ": run octet-run on " + options_.dir + "/" +
                         golden::kBundleFile + " or rerun `octet golden`");
  tol_ = golden::tolerancesFor(info->get("numerics"));
  auto steps = golden::readSteps(options_.dir);
  if (!steps)
    return steps.status();
  auto batches =
      hf::SafetensorsFile::open(options_.dir + "/" + golden::kBatchesFile);
  if (!batches)
    return batches.status();
  const Program *train = programOf(backend_, TRAIN_MICROBATCH);
  const Program *optimizer = programOf(backend_, OPTIMIZER_STEP);
  if (!train || !optimizer)
    return Status::error("the bundle has no train or optimizer program");
  int64_t accum = std::max<int64_t>(1, bundle_.schedule().grad_accum_steps());
  print("golden %s: %zu steps, %s numerics; tolerances: loss %.3g, grad "
        "norm %.3g (+%.0f%% per later step), slots %.3g relative L2 and "
        "%.3g in norm (adam_v as its square root)\n",
        options_.dir.c_str(), steps->size(), info->get("numerics").c_str(),
        tol_.loss, tol_.gradNorm, 100 * tol_.growth, tol_.tensor,
        tol_.tensorNorm);

  bool ok = true;
  const MemoryPlan &plan = bundle_.plan();
  for (int i = 0; i < plan.slots_size(); ++i)
    if (plan.slots(i).kind() == GRADIENT && plan.slots(i).program().empty())
      OCTET_RETURN_IF_ERROR(backend_.zeroSlot(uint32_t(i)));
  OCTET_RETURN_IF_ERROR(writeInitialValues(ok));
  if (backend_.hasProgram(INIT))
    OCTET_RETURN_IF_ERROR(backend_.run(INIT, {}));
  OCTET_RETURN_IF_ERROR(backend_.synchronize());

  print("%5s %12s %12s %9s %12s %12s %9s\n", "step", "loss", "golden",
        "rel err", "grad norm", "golden", "rel err");
  for (const golden::StepValues &want : *steps) {
    bool graph = options_.graph && want.step > 1;
    double lossSum = 0;
    for (int64_t m = 0; m < accum; ++m) {
      for (const NamedSlot &in : train->inputs()) {
        std::string tensor = golden::batchTensorName(want.step, m, in.name());
        auto data = batches->readTensor(tensor);
        if (!data)
          return data.status();
        const Slot &s = plan.slots(int(in.slot()));
        if (data->size() != s.bytes())
          return Status::error(batches->path() + ": '" + tensor + "' has " +
                               std::to_string(data->size()) +
                               " bytes; input slot '" + s.name() + "' has " +
                               std::to_string(s.bytes()));
        OCTET_RETURN_IF_ERROR(
            backend_.writeSlot(in.slot(), data->data(), data->size()));
        OCTET_RETURN_IF_ERROR(backend_.synchronize());
      }
      OCTET_RETURN_IF_ERROR(
          backend_.run(TRAIN_MICROBATCH, {graph, m + 1 == accum, m == 0}));
      auto loss = readScalar(*train, "loss");
      if (!loss)
        return loss.status();
      lossSum += *loss;
    }
    if (want.step == 1)
      OCTET_RETURN_IF_ERROR(compareSnapshot(
          golden::kGradsSnapshot,
          "step 1, gradients before the optimizer (every variable's slot)",
          ok));
    OCTET_RETURN_IF_ERROR(backend_.run(OPTIMIZER_STEP, {graph}));
    auto gradNorm = readScalar(*optimizer, "grad_norm");
    if (!gradNorm)
      return gradNorm.status();
    if (want.step == 1)
      OCTET_RETURN_IF_ERROR(compareSnapshot(
          golden::kAfterSnapshot,
          "step 1, after the optimizer (every persistent slot; the step-local "
          "gradients are gone)",
          ok));
    double loss = lossSum / double(accum);
    double scale = 1 + tol_.growth * double(want.step - 1);
    double lossErr = golden::relativeError(loss, want.loss);
    double normErr = golden::relativeError(*gradNorm, want.gradNorm);
    bool stepOk =
        lossErr <= tol_.loss * scale && normErr <= tol_.gradNorm * scale;
    ok &= stepOk;
    print("%5lld %12.6f %12.6f %9.2e %12.6f %12.6f %9.2e%s\n",
          (long long)want.step, loss, want.loss, lossErr, double(*gradNorm),
          want.gradNorm, normErr, stepOk ? "" : "  MISMATCH");
  }
  print("golden check: %s\n", ok ? "PASS" : "FAIL");
  return ok;
}

} // namespace

StatusOr<bool> runGoldenCheck(TrainBackend &backend,
                              const GoldenCheckOptions &options) {
  Checker checker(backend, options);
  return checker.run();
}

} // namespace octet
