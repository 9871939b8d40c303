// octet-kernel-oracle: the reference interpreter's answers for every
// kernel.fused region of a file, on fresh random inputs, for the GPU tests
// of the generated kernels (octet-gpu-codegen-tests compares the GPU's
// results with these; it links no MLIR, so the interpreter runs here).
//
// usage: octet-kernel-oracle INPUT.mlir --out DIR [--seed N]
//                            [--kernels KDIR [--unlowered NAME]...]
//
// For kernel i (its index in kernels.json; the region's index without
// --kernels) it writes DIR/k<i>.in<j>.bin and DIR/k<i>.out<j>.bin (the bytes of each buffer as the GPU holds it: bf16
// bits, FP8 bytes, little-endian f32/i32/i64) and DIR/golden.json, which
// names each buffer and says how the GPU's result is checked:
// - "exact": bit for bit (NaN matches NaN). Results that only move, cast or
//   gather values: FP8 quantize of a kernel input (the casts), transposes,
//   slices, concatenations, embedding rows, amax of those, integer and
//   constant results.
// - "ulp": bf16 / FP8 results of arithmetic: within one unit in the last
//   place of the format at the value's magnitude or at the tensor's RMS, on
//   at most 1% of the elements; the others bit for bit.
// - "relative": f32 results within `tolerance` relative to the value, plus
//   an absolute floor of 1e-6 of the tensor's largest magnitude.
// The tolerances are compiler/Codegen/README.md's "Accuracy".
//
// With --kernels, the regions must match KDIR/kernels.json (the launch
// manifest octet-emit-ptx wrote from the same file) one for one, in order:
// name, buffer count, dtypes, shapes and bytes; a mismatch is an error.
// Regions named by --unlowered (codegen has no lowering for them yet) must
// be absent from the manifest, and are skipped. Regions that share a module
// with an earlier one (every layer's) run the same code: only the first
// gets inputs and results. The seed is printed; without --seed it comes
// from the clock.

#include "compiler/Interpreter/Interpreter.h"
#include "support/Numerics.h"
#include "dialects/fp8/Fp8Dialect.h"
#include "dialects/graph/GraphDialect.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

using namespace mlir;
using namespace octet;
using interp::Tensor;

namespace {

[[noreturn]] void die(const llvm::Twine &message) {
  llvm::errs() << "octet-kernel-oracle: " << message << "\n";
  std::exit(1);
}

std::string dtypeString(Type element) {
  std::string s;
  llvm::raw_string_ostream os(s);
  element.print(os);
  return s;
}

// The buffer as the GPU kernel reads or writes it.
std::vector<uint8_t> encode(const Tensor &t) {
  int64_t n = t.numel(), w = int64_t(dtypeBytes(t.dtype()));
  std::vector<uint8_t> out(std::max<int64_t>(n, 1) * w);
  for (int64_t i = 0; i < n; ++i) {
    uint8_t *p = &out[i * w];
    switch (t.dtype()) {
    case DType::F32:
      std::memcpy(p, &t.f()[i], 4);
      break;
    case DType::BF16: {
      uint16_t b = numerics::encodeBF16(t.f()[i]);
      std::memcpy(p, &b, 2);
      break;
    }
    case DType::F16: {
      uint16_t b = numerics::encodeF16(t.f()[i]);
      std::memcpy(p, &b, 2);
      break;
    }
    case DType::F8E4M3FN:
      *p = numerics::encodeE4M3(t.f()[i]);
      break;
    case DType::F8E5M2:
      *p = numerics::encodeE5M2(t.f()[i]);
      break;
    case DType::I32: {
      int32_t x = (int32_t)t.i()[i];
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::I64:
      std::memcpy(p, &t.i()[i], 8);
      break;
    default:
      die(std::string("no kernel buffer encoding for ") + dtypeName(t.dtype()));
    }
  }
  return out;
}

// Looks through views: the ops that read `v` and the operand index.
void readers(Value v, SmallVectorImpl<OpOperand *> &out) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (isa<graph::ReshapeOp, graph::SaveOp>(user))
      readers(user->getResult(0), out);
    else
      out.push_back(&use);
  }
}

// What a kernel input holds, from the ops that read it; its random values
// follow (ids within the table, non-negative second moments, FP8 scales
// that make some values cross the format's maximum, ...).
struct InputKind {
  enum {
    Normal,     // N(mean, std), rounded to the dtype
    Index,      // integers in [0, bound)
    Labels,     // integers in [0, bound), but one in 16 outside it (-100
                // or bound): a gradient's labels no loss reads
    Step,       // optimizer step counter
    Mask,       // loss mask: 0 or 1, mostly 1
    Constant,   // `value`
    Positive,   // |N(0, std)|
    Square,     // N(0, std)², second moments
    Uniform,    // uniform in [lo, hi)
    CastBits,   // any f32 bit pattern: NaN, inf, subnormals, FP8 ties
    CastWide,   // N(0, 1) with every 7th value past E5M2's maximum
  } kind = Normal;
  double mean = 0, std = 1, value = 0, lo = 0, hi = 1;
  int64_t bound = 0;
};

int64_t lastDim(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getRank() ? t.getShape().back() : 1;
}

// A cross-entropy gradient, through reshapes: an FP8 LM head's logits
// gradient when it is cast.
bool isLogitsGradient(Value v) {
  while (auto reshape = v.getDefiningOp<graph::ReshapeOp>())
    v = reshape.getInput();
  return static_cast<bool>(v.getDefiningOp<graph::CrossEntropyGradOp>());
}

InputKind classify(BlockArgument arg) {
  SmallVector<OpOperand *> uses;
  readers(arg, uses);
  InputKind k;
  bool isFloat = isa<FloatType>(getElementTypeOrSelf(arg.getType()));
  bool isScalar = cast<RankedTensorType>(arg.getType()).getRank() == 0;
  for (OpOperand *use : uses) {
    Operation *op = use->getOwner();
    unsigned n = use->getOperandNumber();
    if (auto e = dyn_cast<graph::EmbeddingOp>(op); e && n == 1)
      return {InputKind::Index, 0, 0, 0, 0, 0,
              cast<RankedTensorType>(e.getTable().getType()).getDimSize(0)};
    if (auto e = dyn_cast<graph::EmbeddingGradOp>(op); e && n == 1)
      return {InputKind::Index, 0, 0, 0, 0, 0,
              cast<RankedTensorType>(e.getResult().getType()).getDimSize(0)};
    if (auto c = dyn_cast<graph::CrossEntropyOp>(op)) {
      if (n == 1)
        return {InputKind::Index, 0, 0, 0, 0, 0, lastDim(c.getLogits())};
      if (n == 2)
        return {InputKind::Mask};
      return {InputKind::Normal, 0, 2};
    }
    if (auto c = dyn_cast<graph::CrossEntropyGradOp>(op)) {
      if (n == 0)
        return {InputKind::Constant, 0, 0, 1.0};
      // The loss refuses a label outside the row where the mask is not 0;
      // the gradient ignores it.
      bool lossReads = llvm::any_of(uses, [](OpOperand *u) {
        return isa<graph::CrossEntropyOp>(u->getOwner());
      });
      if (n == 2)
        return {lossReads ? InputKind::Index : InputKind::Labels, 0, 0, 0, 0,
                0, lastDim(c.getLogits())};
      if (n == 3)
        return {InputKind::Mask};
      return {InputKind::Normal, 0, 2};
    }
    if (isa<graph::RopeOp>(op) && n == 1)
      return {InputKind::Index, 0, 0, 0, 0, 0, 8192};
    if (isa<graph::IncrementOp, graph::LrScheduleOp>(op))
      return {InputKind::Step};
    if (isa<graph::ClipScaleOp>(op))
      return {InputKind::Uniform, 0, 0, 0, 0.1, 3.0};
    if (isa<fp8::ScaleUpdateOp>(op))
      return n == 2 ? InputKind{InputKind::Uniform, 0, 0, 0, 0.5, 8.0}
                    : InputKind{InputKind::Positive, 0, 100.0};
    if (isa<fp8::ComputeScaleOp>(op))
      return {InputKind::CastBits};
    if (isa<graph::AdamWUpdateOp>(op)) {
      if (n == 3)
        return {InputKind::Square, 0, 0.02};
      if (n == 4)
        return {InputKind::Constant, 0, 0, 3e-4};
      if (n == 5)
        return {InputKind::Step};
      if (n == 6)
        return {InputKind::Constant, 0, 0, 0.5};
      return {InputKind::Normal, 0, 0.02};
    }
    if (isa<graph::CastOp>(op)) {
      // A bf16 gradient cast to f32 for AdamW.
      SmallVector<OpOperand *> next;
      readers(op->getResult(0), next);
      if (llvm::any_of(next, [](OpOperand *u) {
            return isa<graph::AdamWUpdateOp>(u->getOwner());
          }))
        return {InputKind::Normal, 0, 0.02};
    }
    if (isa<graph::RMSNormOp, graph::LayerNormOp, graph::RMSNormGradOp,
            graph::LayerNormGradOp>(op) &&
        cast<RankedTensorType>(arg.getType()).getRank() == 1)
      return n == 1 || (isa<graph::RMSNormGradOp, graph::LayerNormGradOp>(op) &&
                        n == 2)
                 ? InputKind{InputKind::Normal, 1.0, 0.1}
                 : InputKind{InputKind::Normal, 0.0, 0.1};
    if (auto q = dyn_cast<fp8::QuantizeOp>(op)) {
      auto format = getElementTypeOrSelf(q.getResult().getType());
      bool e4m3 = isa<Float8E4M3FNType>(format);
      if (n == 0) {
        // A kernel input quantized as it is: the cast itself is tested.
        if (getElementTypeOrSelf(arg.getType()).isF32() && e4m3)
          k = {InputKind::CastBits};
        else if (!e4m3)
          k = {InputKind::CastWide};
        continue;
      }
      // The scale: values from a weight update are small (N(0, 0.02));
      // casts get scales that put ties and saturation in range; activations
      // (about N(0, 1)) cross the maximum now and then.
      Value x = q.getInput();
      if (x.getDefiningOp<graph::AdamWUpdateOp>())
        return {InputKind::Constant, 0, 0, 448.0 / 0.08};
      // An FP8 LM head's logits gradient: about -1 / tokens at the label,
      // which 2^22 takes past E5M2's maximum (the cast saturates), the
      // other elements p / tokens well inside the range.
      if (isLogitsGradient(x))
        return {InputKind::Constant, 0, 0, std::ldexp(1.0, 22)};
      if (isa<BlockArgument>(x))
        return {InputKind::Constant, 0, 0, e4m3 ? 0.75 : 1.5};
      return {InputKind::Constant, 0, 0, 96.0};
    }
    if (isa<fp8::TransposeOp>(op) && n == 1) {
      // The cast's own scale, which the cast above sets.
      auto q = op->getOperand(0).getDefiningOp<fp8::QuantizeOp>();
      if (q && isLogitsGradient(q.getInput()))
        continue;
      return {InputKind::Constant, 0, 0, 96.0};
    }
  }
  if (isScalar && isFloat && k.kind == InputKind::Normal)
    return {InputKind::Constant, 0, 0, 1.0};
  if (!isFloat && k.kind == InputKind::Normal)
    return {InputKind::Index, 0, 0, 0, 0, 0, 1000};
  return k;
}

Tensor makeInput(BlockArgument arg, std::mt19937_64 &rng) {
  auto type = cast<RankedTensorType>(arg.getType());
  DType dtype = cantFail(interp::dtypeOf(type.getElementType()));
  Tensor t(dtype, std::vector<int64_t>(type.getShape()));
  InputKind k = classify(arg);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> uniform(0, 1);
  int64_t n = t.numel();
  if (!isFloat(dtype)) {
    // Integers no op bounds (an index kind with a bound) stay in [0, 1000).
    bool bounded = k.kind == InputKind::Index || k.kind == InputKind::Labels;
    int64_t bound = bounded && k.bound > 0 ? k.bound : 1000;
    for (int64_t i = 0; i < n; ++i) {
      t.i()[i] = k.kind == InputKind::Step ? 1 + (int64_t)(rng() % 1000)
                                          : (int64_t)(rng() % bound);
      if (k.kind == InputKind::Labels && i % 16 == 7)
        t.i()[i] = i % 32 == 7 ? -100 : bound;
    }
    return t;
  }
  for (int64_t i = 0; i < n; ++i) {
    double x = 0;
    switch (k.kind) {
    case InputKind::Normal:
    case InputKind::Index:
    case InputKind::Labels:
    case InputKind::Step:
      x = k.mean + k.std * normal(rng);
      break;
    case InputKind::Mask:
      x = uniform(rng) < 0.9 ? 1.0 : 0.0;
      break;
    case InputKind::Constant:
      x = k.value;
      break;
    case InputKind::Positive:
      x = std::fabs(k.std * normal(rng));
      break;
    case InputKind::Square:
      x = std::pow(k.std * normal(rng), 2);
      break;
    case InputKind::Uniform:
      x = k.lo + (k.hi - k.lo) * uniform(rng);
      break;
    case InputKind::CastBits: {
      uint32_t u = (uint32_t)rng();
      if (i % 4 == 0) // near the FP8 grid: ties and the saturation edge
        u = (u & 0x80000000u) | ((uint32_t)(rng() % 40 + 100) << 23) |
            ((uint32_t)(rng() % 64) << 17) | (i % 8 == 0 ? 0x10000u : 0u);
      float f;
      std::memcpy(&f, &u, 4);
      t.f()[i] = f;
      continue;
    }
    case InputKind::CastWide:
      x = normal(rng) * (i % 7 == 0 ? 3e4 : 1.0);
      break;
    }
    t.f()[i] = (float)x;
  }
  t.roundToType();
  return t;
}

// How the GPU's value of a result is checked (see the file comment).
struct Check {
  std::string kind;
  double tolerance = 0;
};

// Ops whose results the GPU reproduces bit for bit when their inputs are.
bool movesValues(Operation *op) {
  return isa<graph::ReshapeOp, graph::SaveOp, graph::SliceOp, graph::ConcatOp,
             graph::CastOp, graph::EmbeddingOp, graph::FillOp,
             graph::IncrementOp, fp8::QuantizeOp, fp8::TransposeOp,
             fp8::AmaxOp>(op);
}

bool exactSlice(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return true;
  return movesValues(def) && llvm::all_of(def->getOperands(), exactSlice);
}

// A column sum: a weight or bias gradient (summed over the tokens) or the
// embedding gradient (summed per id).
bool isColumnSum(Value v) {
  Operation *def = v.getDefiningOp();
  if (isa_and_nonnull<graph::BiasGradOp, graph::EmbeddingGradOp>(def))
    return true;
  return isa_and_nonnull<graph::RMSNormGradOp, graph::LayerNormGradOp>(def) &&
         cast<OpResult>(v).getResultNumber() > 0;
}

bool readsColumnSum(Value v) {
  if (isColumnSum(v))
    return true;
  Operation *def = v.getDefiningOp();
  return def && llvm::any_of(def->getOperands(), readsColumnSum);
}

Check checkFor(Value result) {
  Type element = getElementTypeOrSelf(result.getType());
  if (!isa<FloatType>(element) || exactSlice(result))
    return {"exact", 0};
  if (!element.isF32())
    return {"ulp", 1};
  // An amax of a tensor computed in the kernel: the tensor's elements may
  // be one ulp of their format apart.
  Operation *def = result.getDefiningOp();
  // So are the block scales of a tensor the kernel computes (SwiGLU's
  // gradient in the tile kernel): each is its tile's amax.
  // (also as the K-major copy's scales).
  Value scales = result;
  if (isa<fp8::TransposeOp>(def) && result == def->getResult(1))
    scales = def->getOperand(1);
  auto quantize = scales.getDefiningOp<fp8::BlockQuantizeOp>();
  bool computedBlockScales = quantize && scales == quantize.getScales() &&
                             !exactSlice(quantize.getInput());
  if ((isa<fp8::QuantizeOp>(def) && result == def->getResult(1)) ||
      isa<fp8::AmaxOp>(def) || computedBlockScales) {
    Type source = getElementTypeOrSelf(
        (computedBlockScales ? quantize->getOperand(0) : def->getOperand(0))
            .getType());
    return {"relative", source.isF32() ? 1e-5 : std::ldexp(1.0, -7)};
  }
  // Column sums (weight gradients) and the embedding gradient's atomic adds
  // run in another order than the interpreter's sums.
  return {"relative", readsColumnSum(result) ? 2e-4 : 1e-5};
}

// Runs one region with the interpreter: a scratch function holding a copy
// of the kernel.fused op over the function's arguments.
std::vector<Tensor> interpret(kernel::FusedOp fused,
                              const std::vector<Tensor> &inputs) {
  OpBuilder b(fused.getContext());
  OwningOpRef<ModuleOp> scratch = ModuleOp::create(fused.getLoc());
  b.setInsertionPointToEnd(scratch->getBody());
  auto func = func::FuncOp::create(
      b, fused.getLoc(), "region",
      b.getFunctionType(fused.getInputs().getTypes(), fused.getResultTypes()));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToEnd(entry);
  IRMapping map;
  for (auto [outer, arg] : llvm::zip(fused.getInputs(), entry->getArguments()))
    map.map(outer, arg);
  Operation *copy = b.clone(*fused, map);
  func::ReturnOp::create(b, fused.getLoc(), copy->getResults());
  interp::VariableStore variables;
  interp::Interpreter interpreter(*scratch);
  auto out = interpreter.run("region", inputs, variables);
  if (!out)
    die("kernel '" + fused.getName() +
        "': the interpreter failed: " + llvm::toString(out.takeError()));
  return *out;
}

void writeBytes(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    die("cannot write " + path + ": " + ec.message());
  os.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
}

llvm::json::Object describe(const std::string &file, Value v, size_t bytes) {
  auto t = cast<RankedTensorType>(v.getType());
  llvm::json::Array shape;
  for (int64_t d : t.getShape())
    shape.push_back(d);
  return llvm::json::Object{{"file", file},
                            {"dtype", dtypeString(t.getElementType())},
                            {"shape", std::move(shape)},
                            {"bytes", (int64_t)bytes}};
}

// kernels.json as octet-emit-ptx wrote it: one entry per lowered region, in
// the regions' order.
llvm::json::Array loadManifest(const std::string &kernelDir) {
  std::string path = kernelDir + "/kernels.json";
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    die("cannot read " + path + ": " + buffer.getError().message() +
        " (run octet-emit-ptx on the same file first)");
  auto parsed = llvm::json::parse((*buffer)->getBuffer());
  if (!parsed)
    die(path + ": " + llvm::toString(parsed.takeError()));
  llvm::json::Array *kernels =
      parsed->getAsObject() ? parsed->getAsObject()->getArray("kernels")
                            : nullptr;
  if (!kernels)
    die(path + ": no \"kernels\" list");
  return std::move(*kernels);
}

// The manifest entry must describe the region's buffers (the GPU test
// fills and reads them by position): dtypes, shapes and bytes.
void checkBuffers(const std::string &path, const llvm::json::Object &kernel,
                  kernel::FusedOp fused) {
  std::string name = fused.getName().str();
  SmallVector<Value> values(fused.getBodyBlock().getArguments());
  llvm::append_range(values, fused.getBodyBlock().getTerminator()->getOperands());
  size_t compared = 0;
  for (const llvm::json::Value &a : *kernel.getArray("args")) {
    const llvm::json::Object &arg = *a.getAsObject();
    if (arg.getString("role") == "workspace")
      continue;
    if (compared == values.size())
      die(path + ": kernel '" + name + "' has more buffers than its region");
    Value v = values[compared++];
    auto type = cast<RankedTensorType>(v.getType());
    llvm::json::Array shape;
    for (int64_t d : type.getShape())
      shape.push_back(d);
    int64_t bytes =
        std::max<int64_t>(type.getNumElements(), 1) *
        int64_t(dtypeBytes(cantFail(interp::dtypeOf(type.getElementType()))));
    llvm::json::Object want{{"dtype", dtypeString(type.getElementType())},
                            {"shape", std::move(shape)},
                            {"bytes", bytes}};
    for (const char *field : {"dtype", "shape", "bytes"})
      if (!arg.get(field) || *arg.get(field) != *want.get(field)) {
        std::string got = "nothing", expected;
        if (arg.get(field)) {
          got.clear();
          llvm::raw_string_ostream(got) << *arg.get(field);
        }
        llvm::raw_string_ostream(expected) << *want.get(field);
        die(path + ": kernel '" + name + "' buffer " +
            arg.getString("name").value_or("?") + " has " + field + " " + got +
            ", the region's is " + expected);
      }
  }
  if (compared != values.size())
    die(path + ": kernel '" + name + "' has fewer buffers than its region");
}

} // namespace

constexpr const char *kUsage =
    "usage: octet-kernel-oracle INPUT.mlir --out DIR [--seed N] "
    "[--kernels KDIR [--unlowered NAME]...]";

int main(int argc, char **argv) {
  std::string input, outDir, kernelDir;
  std::set<std::string> unlowered;
  uint64_t seed = (uint64_t)std::chrono::system_clock::now()
                      .time_since_epoch()
                      .count();
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--out")
      outDir = value();
    else if (a == "--seed")
      seed = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--kernels")
      kernelDir = value();
    else if (a == "--unlowered")
      unlowered.insert(value());
    else if (!a.empty() && a[0] == '-')
      die("unknown option " + a + "; " + kUsage);
    else
      input = a;
  }
  if (input.empty() || outDir.empty())
    die(kUsage);

  DialectRegistry registry;
  registry.insert<graph::GraphDialect, fp8::Fp8Dialect, kernel::KernelDialect,
                  func::FuncDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sources;
  auto file = llvm::MemoryBuffer::getFile(input);
  if (!file)
    die("cannot read " + input + ": " + file.getError().message());
  sources.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sources, &context);
  if (!module)
    die("cannot parse " + input);
  if (std::error_code ec = llvm::sys::fs::create_directories(outDir))
    die("cannot create " + outDir + ": " + ec.message());

  std::printf("octet-kernel-oracle: seed %llu\n", (unsigned long long)seed);
  std::mt19937_64 rng(seed);
  std::string manifestPath = kernelDir + "/kernels.json";
  llvm::json::Array manifest;
  if (!kernelDir.empty())
    manifest = loadManifest(kernelDir);
  llvm::json::Array kernels;
  size_t region = 0, next = 0, shared = 0, attention = 0;
  std::set<std::string> modulesDone, skipped;
  int64_t totalBytes = 0;
  // Attention ops have manifest entries of their own, tested by
  // AttentionKernelTest against their own reference.
  auto skipAttention = [&] {
    while (next < manifest.size() && manifest[next]
                                         .getAsObject()
                                         ->getString("kind")
                                         .value_or("")
                                         .starts_with("attention")) {
      ++next;
      ++attention;
    }
  };
  module->walk([&](kernel::FusedOp fused) {
    // Cleared accumulators are memsets of their variables: no kernel.
    if (fused.isStoredZeroFill())
      return;
    std::string name = fused.getName().str();
    size_t index = region++;
    if (!kernelDir.empty()) {
      skipAttention();
      // Regions codegen cannot lower yet have no entry; every other region
      // has the next one.
      bool listed = next < manifest.size() &&
                    manifest[next].getAsObject()->getString("name") == name;
      if (unlowered.count(name)) {
        if (listed)
          die(manifestPath + " has kernels for '" + name +
              "' now: drop --unlowered " + name);
        skipped.insert(name);
        return;
      }
      if (!listed)
        die(manifestPath + ": entry " + llvm::Twine(next) + " is '" +
            (next < manifest.size()
                 ? manifest[next].getAsObject()->getString("name").value_or("?")
                 : llvm::StringRef("(none)")) +
            "', the file's next region is '" + name +
            "': emit the kernels from the same file");
      const llvm::json::Object &entry = *manifest[next].getAsObject();
      checkBuffers(manifestPath, entry, fused);
      index = next++;
      // Regions that compute the same thing share a module (every layer's):
      // one of them is enough.
      std::string moduleName = entry.getString("module").value_or("").str();
      if (!modulesDone.insert(moduleName).second) {
        ++shared;
        return;
      }
    }
    std::vector<Tensor> inputs;
    llvm::json::Array inputList, resultList;
    Block &body = fused.getBodyBlock();
    std::string prefix = "k" + std::to_string(index);
    for (BlockArgument arg : body.getArguments()) {
      inputs.push_back(makeInput(arg, rng));
      auto bytes = encode(inputs.back());
      std::string file =
          prefix + ".in" + std::to_string(arg.getArgNumber()) + ".bin";
      writeBytes(outDir + "/" + file, bytes);
      totalBytes += bytes.size();
      inputList.push_back(describe(file, arg, bytes.size()));
    }
    std::vector<Tensor> results = interpret(fused, inputs);
    auto yield = cast<kernel::YieldOp>(body.getTerminator());
    for (auto [r, value] : llvm::enumerate(yield.getValues())) {
      auto bytes = encode(results[r]);
      std::string file = prefix + ".out" + std::to_string(r) + ".bin";
      writeBytes(outDir + "/" + file, bytes);
      totalBytes += bytes.size();
      llvm::json::Object entry = describe(file, value, bytes.size());
      Check check = checkFor(value);
      entry["check"] = check.kind;
      entry["tolerance"] = check.tolerance;
      resultList.push_back(std::move(entry));
    }
    kernels.push_back(llvm::json::Object{{"name", name},
                                         {"kernel_index", (int64_t)index},
                                         {"inputs", std::move(inputList)},
                                         {"results", std::move(resultList)}});
  });
  skipAttention();
  if (kernels.empty())
    die(input + " has no kernel.fused region to test");
  if (!kernelDir.empty() && next != manifest.size())
    die(manifestPath + " lists " + llvm::Twine(manifest.size()) +
        " kernels, the file's regions match " + llvm::Twine(next) +
        ": emit the kernels from the same file");
  for (const std::string &name : unlowered)
    if (!skipped.count(name))
      die("--unlowered " + name + ": the file has no such region");

  size_t tested = kernels.size();
  std::string golden;
  llvm::raw_string_ostream os(golden);
  os << llvm::formatv(
      "{0:2}", llvm::json::Value(llvm::json::Object{
                   {"format", 1},
                   {"source", input},
                   {"seed", std::to_string(seed)},
                   {"kernels", std::move(kernels)}}));
  os << "\n";
  writeBytes(outDir + "/golden.json",
             std::vector<uint8_t>(golden.begin(), golden.end()));
  std::printf("octet-kernel-oracle: %zu kernels, %.1f MiB of inputs and "
              "expected results in %s",
              tested, totalBytes / 1048576.0, outDir.c_str());
  if (!kernelDir.empty()) {
    std::printf("; they match kernels.json (%zu more share their modules; "
                "%zu attention kernels are tested on their own",
                shared, attention);
    for (const std::string &name : skipped)
      std::printf("; '%s' has no kernels yet", name.c_str());
    std::printf(")");
  }
  std::printf("\n");
  return 0;
}
