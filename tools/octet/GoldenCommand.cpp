// octet golden: the reference interpreter's first steps of a compiled
// bundle, for `octet-run BUNDLE --golden DIR` to check the GPU against
// (runtime/exec/Golden.h describes the directory).
//
// The spec goes through the compile of `octet compile` (the same stages, in
// this process, once): the fused IR is written beside the bundle emitted
// from it. The interpreter then runs that IR's programs in the order the GPU
// trainer runs the bundle's: INIT after every parameter and state tensor
// holds its initial value, then per step the train program once per
// microbatch and the optimizer step.

#include "compiler/Interpreter/Interpreter.h"
#include "compiler/Interpreter/Kernels.h"
#include "support/Numerics.h"
#include "compiler/Registration.h"
#include "tools/octet/CompileSpec.h"
#include "bundle/Bundle.h"
#include "runtime/data/TrainBatches.h"
#include "runtime/exec/Golden.h"
#include "tools/octet/CommandErrors.h"
#include "tools/octet/Commands.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace mlir;

namespace octet {
namespace {

int inputError(const std::string &message) {
  return reportInputError("golden", message);
}

// The interpreter's value in the slot's dtype, as the GPU holds it. Floats
// are already rounded to that type in the store, so encoding is exact.
StatusOr<std::string> slotBytes(const interp::Tensor &t, bundle::DType dtype,
                                const std::string &name) {
  uint64_t n = uint64_t(t.numel());
  std::string out(n * bundle::dtypeBytes(dtype), '\0');
  char *dst = out.data();
  bool isFloat = octet::isFloat(t.dtype());
  auto value = [&](uint64_t i) -> double {
    return isFloat ? double(t.f()[i]) : double(t.i()[i]);
  };
  for (uint64_t i = 0; i < n; ++i) {
    switch (dtype) {
    case bundle::F32: {
      float f = float(value(i));
      std::memcpy(dst + 4 * i, &f, 4);
      break;
    }
    case bundle::BF16: {
      uint16_t h = numerics::encodeBF16(float(value(i)));
      std::memcpy(dst + 2 * i, &h, 2);
      break;
    }
    case bundle::F16: {
      uint16_t h = numerics::encodeF16(float(value(i)));
      std::memcpy(dst + 2 * i, &h, 2);
      break;
    }
    case bundle::F8E4M3FN:
      dst[i] = char(numerics::encodeE4M3(float(value(i))));
      break;
    case bundle::F8E5M2:
      dst[i] = char(numerics::encodeE5M2(float(value(i))));
      break;
    case bundle::I32: {
      int32_t v = isFloat ? int32_t(value(i)) : int32_t(t.i()[i]);
      std::memcpy(dst + 4 * i, &v, 4);
      break;
    }
    case bundle::I64: {
      int64_t v = isFloat ? int64_t(value(i)) : t.i()[i];
      std::memcpy(dst + 8 * i, &v, 8);
      break;
    }
    default:
      return Status::error("tensor '" + name + "': slot dtype " +
                           std::string(bundle::dtypeName(dtype)) +
                           " has no golden encoding");
    }
  }
  return out;
}

golden::SlotSummary summarizeTensor(const std::string &name,
                                    const interp::Tensor &t) {
  if (isFloat(t.dtype()))
    return golden::summarize(name, uint64_t(t.numel()),
                             [&](uint64_t i) { return double(t.f()[i]); });
  return golden::summarize(name, uint64_t(t.numel()),
                           [&](uint64_t i) { return double(t.i()[i]); });
}

// Seeded tokens uniform over the vocabulary (SplitMix64), for models whose
// golden needs no corpus.
class RandomTokens {
public:
  explicit RandomTokens(uint64_t seed) : state_(seed) {}
  int32_t next(int64_t vocab) {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return int32_t(z % uint64_t(vocab));
  }

private:
  uint64_t state_;
};

const bundle::Program *programOf(const bundle::Bundle &b,
                                 bundle::ProgramKind kind) {
  if (b.ranks().empty())
    return nullptr;
  for (const bundle::Program &p : b.ranks(0).programs())
    if (p.kind() == kind)
      return &p;
  return nullptr;
}

int run(const GoldenOptions &opts) {
  using Clock = std::chrono::steady_clock;
  if (std::error_code ec = llvm::sys::fs::create_directories(opts.dir))
    return inputError(opts.dir + ": cannot create: " + ec.message());
  std::string bundlePath = opts.dir + "/" + golden::kBundleFile;
  std::string irPath = opts.dir + "/" + golden::kIrFile;
  SpecSource source{opts.spec, "", 0};
  StatusOr<spec::Spec> spec = loadSpecSource(source);
  if (!spec)
    return inputError(spec.status().message());
  DialectRegistry registry;
  registerCompilerDialects(registry);
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  auto compiled = compileSpec(context, *spec, opts.spec);
  if (!compiled)
    return inputError(compiled.status().message());
  OwningOpRef<ModuleOp> &module = *compiled;
  if (Status st = writeBundleFile(*module, source, *spec, bundlePath); !st)
    return inputError(st.message());
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(irPath, ec, llvm::sys::fs::OF_Text);
    if (ec)
      return inputError(irPath + ": cannot write: " + ec.message());
    module->print(out);
    out << "\n";
  }
  auto loaded = bundle::readBundle(bundlePath);
  if (!loaded)
    return inputError(loaded.status().message());
  const bundle::Bundle &b = *loaded;
  const bundle::Schedule &sched = b.schedule();
  const bundle::MemoryPlan &plan = b.plan();

  const bundle::Program *initProgram = programOf(b, bundle::INIT);
  const bundle::Program *trainProgram = programOf(b, bundle::TRAIN_MICROBATCH);
  const bundle::Program *optimizerProgram =
      programOf(b, bundle::OPTIMIZER_STEP);
  if (!trainProgram || !optimizerProgram)
    return inputError(bundlePath + ": the bundle has no train or optimizer "
                                   "program");
  if (!optimizerProgram->inputs().empty())
    return inputError(bundlePath + ": the optimizer program takes inputs (" +
                      optimizerProgram->inputs(0).name() +
                      "); the golden runs optimizers that schedule their "
                      "own learning rate");
  auto trainFn = module->lookupSymbol<func::FuncOp>(trainProgram->name());
  if (!trainFn)
    return inputError(irPath + ": no function @" + trainProgram->name());

  bool fp8 = false;
  for (const bundle::PrecisionEntry &p : b.precision())
    fp8 |= p.a_type() == bundle::F8E4M3FN || p.a_type() == bundle::F8E5M2;
  golden::Info info;
  info.values["steps"] = std::to_string(opts.steps);
  info.values["grad_accum_steps"] =
      std::to_string(std::max<int64_t>(1, sched.grad_accum_steps()));
  info.values["numerics"] = fp8 ? "fp8" : "bf16";
  info.values["spec"] = opts.spec;
  info.values["data"] = opts.text.empty() ? "random tokens" : opts.text;
  std::string hash;
  for (unsigned char c : b.content_hash()) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", c);
    hash += hex;
  }
  info.values["bundle_sha256"] = hash;

  // Slots that hold variables by name: parameters, gradients, state, weight
  // caches, and the step-local gradients (between the train microbatches
  // and the optimizer only: the interpreter drops them after it, so the
  // snapshot after the optimizer leaves them out).
  std::map<std::string, uint32_t> persistent;
  for (int i = 0; i < plan.slots_size(); ++i)
    if (plan.slots(i).program().empty() ||
        !plan.slots(i).last_program().empty())
      persistent[plan.slots(i).name()] = uint32_t(i);

  interp::VariableStore store;
  store.initialize(*module, sched.seed());
  std::map<std::string, std::pair<uint64_t, uint64_t>> hashes;
  auto hashInit = [&](const std::string &name, uint32_t slot) -> Status {
    if (!store.has(name))
      return Status::error(irPath + ": the bundle initialises '" + name +
                           "', which the fused IR has no variable for");
    auto bytes =
        slotBytes(store.get(name), plan.slots(int(slot)).dtype(), name);
    if (!bytes)
      return bytes.status();
    hashes[name] = {bytes->size(),
                    golden::fnv1a64(bytes->data(), bytes->size())};
    return Status::ok();
  };
  for (const bundle::Parameter &p : b.parameters())
    if (Status st = hashInit(p.name(), p.slot()); !st)
      return inputError(st.message());
  for (const bundle::StateTensor &s : b.state())
    if (Status st = hashInit(s.name(), s.slot()); !st)
      return inputError(st.message());
  if (Status st = golden::writeInitHashes(opts.dir, hashes); !st)
    return inputError(st.message());

  interp::Interpreter interpreter(*module);
  if (initProgram) {
    auto r = interpreter.run(initProgram->name(), {}, store);
    if (!r)
      return inputError(llvm::toString(r.takeError()));
  }

  int64_t rows = sched.micro_batch_size(), seq = sched.seq_len();
  int64_t accum = std::max<int64_t>(1, sched.grad_accum_steps());
  std::unique_ptr<data::TrainBatchSource> text;
  if (!opts.text.empty()) {
    data::TrainBatchOptions o;
    o.kind = "text";
    o.path = opts.text;
    o.rows = uint32_t(rows);
    o.sequenceLength = uint32_t(seq);
    o.seed = sched.seed();
    auto source = data::openTrainBatches(o);
    if (!source)
      return inputError(source.status().message());
    text = std::move(*source);
  }
  RandomTokens random(sched.seed() ^ 0x676f6c64656eull);

  hf::SafetensorsWriter batchesOut;
  std::vector<std::vector<int32_t>> keepInts;
  std::vector<std::vector<float>> keepFloats;
  std::vector<golden::StepValues> steps;
  auto snapshot = [&](const std::string &name) -> Status {
    std::vector<golden::SlotSummary> slots;
    for (const auto &[var, tensor] : store.all())
      if (persistent.count(var))
        slots.push_back(summarizeTensor(var, tensor));
    return golden::writeSnapshot(opts.dir, name, slots);
  };

  std::printf("octet golden: %s, %lld steps x %lld microbatch(es) of [%lld, "
              "%lld] tokens, %s, on the reference interpreter (%d threads)\n",
              opts.spec.c_str(), (long long)opts.steps, (long long)accum,
              (long long)rows, (long long)seq, fp8 ? "FP8" : "BF16",
              interp::numThreads());
  std::fflush(stdout);
  for (int64_t s = 1; s <= opts.steps; ++s) {
    auto t0 = Clock::now();
    double lossSum = 0;
    for (int64_t m = 0; m < accum; ++m) {
      data::PackedBatch batch;
      if (text) {
        if (Status st = text->next(uint64_t((s - 1) * accum + m), batch); !st)
          return inputError(st.message());
      } else {
        int64_t n = rows * seq;
        std::vector<int32_t> stream(size_t(n + 1));
        for (int32_t &t : stream)
          t = random.next(sched.vocab_size());
        batch.inputs.assign(stream.begin(), stream.end() - 1);
        batch.targets.assign(stream.begin() + 1, stream.end());
        batch.lossMask.assign(size_t(n), 1.0f);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t i = 0; i < seq; ++i)
            batch.positionIds.push_back(int32_t(i));
        for (int64_t r = 0; r <= rows; ++r)
          batch.cuSeqlens.push_back(int32_t(r * seq));
      }
      std::vector<interp::Tensor> args;
      for (unsigned a = 0; a < trainFn.getNumArguments(); ++a) {
        auto nameAttr = trainFn.getArgAttrOfType<StringAttr>(a, "graph.name");
        std::string name = nameAttr ? nameAttr.str() : "";
        auto type = cast<RankedTensorType>(trainFn.getArgumentTypes()[a]);
        std::vector<int64_t> shape(type.getShape().begin(),
                                   type.getShape().end());
        int64_t count = type.getNumElements();
        const bundle::NamedSlot *in = nullptr;
        for (const bundle::NamedSlot &x : trainProgram->inputs())
          if (x.name() == name)
            in = &x;
        if (!in)
          return inputError(bundlePath + ": train program input '" + name +
                            "' of the IR is not an input of the bundle's");
        std::string tensorName = golden::batchTensorName(s, m, name);
        if (name == "loss_mask") {
          keepFloats.push_back(batch.lossMask);
          keepFloats.back().resize(size_t(count), 0.0f);
          args.push_back(interp::Tensor::fromFloats(shape, keepFloats.back()));
          if (Status st = batchesOut.addView(
                  tensorName, DType::F32, shape,
                  keepFloats.back().data(), size_t(count) * 4);
              !st)
            return inputError(st.message());
          continue;
        }
        std::vector<int32_t> values =
            name == "tokens"       ? batch.inputs
            : name == "labels"     ? batch.targets
            : name == "positions"  ? batch.positionIds
            : name == "cu_seqlens" ? batch.cuSeqlens
                                   : std::vector<int32_t>{};
        if (values.empty())
          return inputError(irPath + ": train input '" + name +
                            "' is none of tokens, labels, loss_mask, "
                            "positions, cu_seqlens");
        if (name == "cu_seqlens") {
          auto padded = data::padCuSeqlens(values, size_t(count));
          if (!padded)
            return inputError(padded.status().message());
          values = std::move(*padded);
        }
        keepInts.push_back(values);
        args.push_back(interp::Tensor::fromInts(
            shape, std::vector<int64_t>(values.begin(), values.end())));
        if (Status st = batchesOut.addView(tensorName, DType::I32,
                                           shape, keepInts.back().data(),
                                           size_t(count) * 4);
            !st)
          return inputError(st.message());
      }
      interpreter.setFirstMicrobatch(m == 0);
      interpreter.setLastMicrobatch(m + 1 == accum);
      auto result = interpreter.run(trainProgram->name(), args, store);
      if (!result)
        return inputError(llvm::toString(result.takeError()));
      lossSum += (*result)[0].item();
    }
    if (s == 1)
      if (Status st = snapshot(golden::kGradsSnapshot); !st)
        return inputError(st.message());
    auto result = interpreter.run(optimizerProgram->name(), {}, store);
    if (!result)
      return inputError(llvm::toString(result.takeError()));
    if (s == 1)
      if (Status st = snapshot(golden::kAfterSnapshot); !st)
        return inputError(st.message());
    golden::StepValues v;
    v.step = s;
    v.loss = lossSum / double(accum);
    v.gradNorm = (*result)[0].item();
    v.lr = result->size() > 1 ? (*result)[1].item() : 0;
    steps.push_back(v);
    std::printf("step %3lld  loss %.6f  grad_norm %.6f  lr %.4e  (%.1f s)\n",
                (long long)s, v.loss, v.gradNorm, v.lr,
                std::chrono::duration<double>(Clock::now() - t0).count());
    std::fflush(stdout);
  }
  if (Status st = batchesOut.write(opts.dir + "/" + golden::kBatchesFile);
      !st)
    return inputError(st.message());
  if (Status st = golden::writeSteps(opts.dir, steps); !st)
    return inputError(st.message());
  if (Status st = golden::writeInfo(opts.dir, info); !st)
    return inputError(st.message());
  std::printf("wrote %s: check it with `octet-run %s --golden %s`\n",
              opts.dir.c_str(), bundlePath.c_str(), opts.dir.c_str());
  return 0;
}

} // namespace

int runGoldenCommand(const GoldenOptions &opts) { return run(opts); }

} // namespace octet
