//===- WholeOpKernel.cpp - Kernels for ops outside the row model ---------===//
//
// Kernels for ops that do not fit the register-resident row model: a
// vocabulary row is too long to hold in registers (cross-entropy), a gather
// or scatter indexes rows by token id (embedding), a reduction spans whole
// tensors (global norm), or the work is a handful of scalars (step counter,
// learning rate, clip coefficient, FP8 scale state). Each op is a launch of
// its own, reading its operands from the kernel's buffers.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/WholeOpKernel.h"

#include "compiler/Codegen/Emitter.h"
#include "compiler/Codegen/KernelPlan.h"
#include "compiler/Codegen/Launches.h"
#include "compiler/Codegen/TransposeKernel.h"
#include "compiler/Codegen/WholeOpBuilder.h"

#include "dialects/fp8/Fp8Dialect.h"
#include "dialects/graph/GraphDialect.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/DenseSet.h"

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <limits>

using namespace mlir;

namespace octet::codegen {
namespace {

bool isWholeOp(Operation *op) {
  return isa<graph::EmbeddingOp, graph::EmbeddingGradOp, graph::CrossEntropyOp,
             graph::CrossEntropyGradOp, graph::GlobalNormOp, graph::ClipScaleOp,
             graph::IncrementOp, graph::LrScheduleOp, fp8::ScaleUpdateOp,
             fp8::ComputeScaleOp, fp8::BlockQuantizeOp>(op) ||
         (isa<graph::FillOp>(op) && isScalarTensor(op->getResult(0)));
}

} // namespace

bool hasWholeOps(kernel::FusedOp fused) {
  for (Operation &op : fused.getBodyBlock().without_terminator()) {
    // A norm's block quantizations run after its row kernel.
    if (auto q = dyn_cast<fp8::BlockQuantizeOp>(op);
        q && throughReshapes(q.getInput())
                 .getDefiningOp<graph::RMSNormOp>())
      continue;
    if (isWholeOp(&op))
      return true;
  }
  // Arithmetic on scalars alone has no row to lay out: one thread does it.
  auto scalar = [](Value v) { return isScalarTensor(v); };
  return llvm::all_of(fused.getInputs(), scalar) &&
         llvm::all_of(fused.getResults(), scalar);
}

LogicalResult checkOverwritesLowered(kernel::FusedOp fused) {
  std::optional<ArrayRef<int64_t>> overwrites = fused.getOverwrites();
  if (!overwrites)
    return success();
  Block &body = fused.getBodyBlock();
  auto grad = dyn_cast<graph::CrossEntropyGradOp>(body.front());
  auto logits = grad ? dyn_cast<BlockArgument>(grad.getLogits())
                     : BlockArgument();
  bool lowered = grad && logits && body.getOperations().size() == 2 &&
                 overwrites->size() == 1 &&
                 (*overwrites)[0] == int64_t(logits.getArgNumber()) &&
                 body.getTerminator()->getOperand(0) == grad.getResult();
  if (!lowered)
    return fused.emitOpError("'")
           << fused.getName()
           << "' writes a result over an input (overwrites), but only a lone "
              "cross_entropy_grad over its logits is lowered to read each "
              "element before writing it; drop the mark";
  return success();
}

namespace detail {
namespace {

// Global norm: a block reads one chunk of one tensor, kNormLoads 16-byte
// loads a thread, all issued before their squares are added (64 KiB a
// block): enough bytes in flight to keep HBM busy, and few enough blocks
// (76 K for Llama 3.2 1B's 1.24 G gradients, 605 K at 8 elements a thread)
// that one block adds their partial sums quickly.
constexpr int64_t kNormLoads = 16;
constexpr int64_t kNormFinishUnroll = 8;

// Elements of a 16-byte load of `elem` (1 for elements wider than that).
int64_t normLanes(Type elem) {
  int64_t bytes = ceilDiv(elem.getIntOrFloatBitWidth(), 8);
  return std::max<int64_t>(1, 16 / bytes);
}
int64_t normChunk(Type elem) {
  return kWholeThreads * kNormLoads * normLanes(elem);
}
// Blocks of the partial-sum kernel over tensor `v`.
int64_t normBlocks(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  return ceilDiv(type.getNumElements(), normChunk(type.getElementType()));
}
// Blocks of the partial-sum kernel of global norm `op`: its workspace.
int64_t normBlocks(graph::GlobalNormOp op) {
  int64_t blocks = 0;
  for (Value in : op->getOperands())
    blocks += normBlocks(in);
  return blocks;
}
bool isLoneGlobalNorm(Block &body) {
  auto ops = body.without_terminator();
  return std::distance(ops.begin(), ops.end()) == 1 &&
         isa<graph::GlobalNormOp>(*ops.begin());
}

} // namespace

WholeOpBuilder::Func WholeOpBuilder::begin(gpu::GPUModuleOp mod,
                                           std::string name, int64_t threads,
                                           ArrayRef<Type> extraShared) {
  // The caller holds an insertion guard: this leaves the builder inside the
  // new kernel, before its return.
  auto sharedType = MemRefType::get({kWarp}, f32, MemRefLayoutAttrInterface(),
                                    b.getI64IntegerAttr(kSharedSpace));
  SmallVector<Type> workgroup{sharedType};
  llvm::append_range(workgroup, extraShared);
  gpu::GPUFuncOp func =
      createKernel(b, loc, mod, name, argTypes, workgroup, threads);
  memOf.clear();
  tableIndex.clear();
  Block &body = fused.getBodyBlock();
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  if (argTable) {
    table = func.getArgument(0);
    SmallVector<Value> values(body.getArguments());
    llvm::append_range(values, yield.getValues());
    for (auto [i, v] : llvm::enumerate(values))
      tableIndex.try_emplace(v, i);
  } else {
    for (auto [i, arg] : llvm::enumerate(body.getArguments()))
      memOf[arg] = func.getArgument(i);
    for (auto [i, v] : llvm::enumerate(yield.getValues()))
      if (!memOf.count(v))
        memOf[v] = func.getArgument(body.getNumArguments() + i);
  }
  workspace = wsFloats ? func.getArgument(argTypes.size() - 1) : Value();
  // Launched as the row kernel's programmatic dependent: it reads what
  // that kernel writes.
  if (waitsForRowKernel)
    asmVoid("griddepcontrol.wait;", "~{memory}", {});
  Value tid = threadId();
  // 16-byte vector accesses to every extra buffer.
  for (unsigned i = 1; i < workgroup.size(); ++i)
    func.setWorkgroupAttributionAttr(i, b.getStringAttr("llvm.align"),
                                     b.getI64IntegerAttr(16));
  auto attributions = func.getWorkgroupAttributions();
  return Func{func, tid, blockId(), attributions.front(),
              SmallVector<Value>(std::next(attributions.begin()),
                                 attributions.end())};
}

// One slot, reused by the kernel's reductions: each waits for a barrier
// before it writes, since the last one's readers may still be reading.
Value WholeOpBuilder::blockReduce(const Func &f, Value x, bool isMax) {
  ReductionScratch scratch;
  scratch.shared = f.shared;
  scratch.warps = kWholeThreads / kWarp;
  scratch.barrierFirst = true;
  scratch.tid = f.tid;
  return isMax ? blockMax(*this, scratch, x) : blockSum(*this, scratch, x);
}

Value WholeOpBuilder::stride(const Func &f, int64_t n, Value init, bool isMax,
                             function_ref<Value(Value)> element) {
  auto loop = scf::ForOp::create(
      b, loc, f.tid, idx(n), idx(kWholeThreads), ValueRange{init},
      [&](OpBuilder &, Location, Value i, ValueRange acc) {
        Value x = element(i);
        Value r = isMax ? Value(maximumF(acc[0], x)) : addF(acc[0], x);
        scf::YieldOp::create(b, loc, ValueRange{r});
      });
  return blockReduce(f, loop.getResult(0), isMax);
}

Value WholeOpBuilder::scaleFromAmax(Value amax, Type dtype, int64_t margin,
                                    bool powerOfTwo, double eps) {
  double fp8Max = fp8::maxFinite(dtype);
  Value denom =
      mulF(maximumF(amax, f32c(eps)), f32c(std::ldexp(1.0, margin)));
  Value scale = divF(f32c(fp8Max), denom);
  if (!powerOfTwo)
    return scale;
  // Down to a power of two: keep sign and exponent, clear the mantissa.
  Value bits = bitcast(b.getI32Type(), scale);
  Value mask = arith::ConstantOp::create(
      b, loc, b.getI32IntegerAttr((int32_t)0xFF800000u));
  return bitcast(f32, andI(bits, mask));
}

LogicalResult WholeOpBuilder::scalarOps(gpu::GPUModuleOp mod, StringRef sym,
                                        ArrayRef<Operation *> ops,
                                        LaunchList &launches) {
  OpBuilder::InsertionGuard guard(b);
  DenseMap<Value, Value> scalars; // values computed in this kernel
  DenseMap<Value, SmallVector<Value>> joined; // concatenations of scalars
  auto read = [&](Value v) -> Value {
    if (Value s = scalars.lookup(v))
      return s;
    return readAt(v, idx(0));
  };
  auto write = [&](Value v, Value x) {
    scalars[v] = x;
    if (inMemory(v))
      store(x, mem(v), idx(0));
  };
  // A delayed-scaling update, its history rolled by `lanes` threads of one
  // warp (lane `lane`): the maximum is exact in any order, so the lanes
  // split the copy and reduce by shuffles; lane 0 writes the scalars.
  auto scaleUpdate = [&](fp8::ScaleUpdateOp o, Value lane,
                         int64_t lanes) -> LogicalResult {
    if (!inMemory(o.getAmaxHistory()) || !inMemory(o.getNewHistory()))
      return o.emitOpError("needs its amax histories in kernel buffers"),
             failure();
    auto atLane0 = [&](function_ref<void()> body) {
      if (lanes == 1)
        return body();
      ifThen(cmpI(arith::CmpIPredicate::eq, lane, idx(0)), body);
    };
    fp8::RecipeAttr recipe = o.getRecipe();
    int64_t len = numElements(o.getAmaxHistory().getType());
    Value amax = read(o.getAmax());
    // Newest first: [amax, history[0 .. H-2]], and its maximum.
    atLane0([&] { store(amax, mem(o.getNewHistory()), idx(0)); });
    Value first = lanes == 1 ? idx(1) : addI(idx(1), lane);
    auto roll = scf::ForOp::create(
        b, loc, first, idx(len), idx(lanes), ValueRange{amax},
        [&](OpBuilder &, Location, Value i, ValueRange acc) {
          Value h = readAt(o.getAmaxHistory(), subI(i, idx(1)));
          store(h, mem(o.getNewHistory()), i);
          scf::YieldOp::create(b, loc, ValueRange{maximumF(acc[0], h)});
        });
    Value rolled = roll.getResult(0);
    if (lanes > 1)
      rolled = warpMax(*this, rolled);
    Value eff =
        recipe.getAmaxAlgorithm() == fp8::AmaxAlgorithm::max ? rolled : amax;
    Value next = scaleFromAmax(eff, o.getDtype(), recipe.getMargin(),
                               recipe.getPowerOfTwoScales(),
                               o.getEps().convertToDouble());
    Value scale = select(isFinite(eff), next, read(o.getScale()));
    atLane0([&] {
      write(o.getNewScale(), scale);
      write(o.getNewScaleInv(), divF(f32c(1), scale));
    });
    return success();
  };

  // Only scale updates (the step's fp8.scale_updates region, one per FP8
  // tensor, each with its own history): they are independent, so a block
  // per update instead of one thread walking every history in turn. The
  // updates of one kind (recipe, types) share code: block j reads its
  // class and its buffers' argument table entries from the update table.
  if (argTable) {
    Func f = begin(mod, (sym + "_scalars").str(), kWarp);
    auto buffers = [](Operation *op) {
      SmallVector<Value> values(op->getOperands());
      llvm::append_range(values, op->getResults());
      return values;
    };
    llvm::MapVector<std::string, Operation *, std::map<std::string, unsigned>>
        classes;
    SmallVector<int64_t> records;
    int64_t width = 1 + buffers(ops.front()).size();
    for (Operation *op : ops) {
      std::string key;
      llvm::raw_string_ostream os(key);
      os << op->getName() << "(";
      for (Value v : buffers(op))
        os << v.getType() << (inMemory(v) ? "" : " unstored") << ",";
      os << ")";
      for (NamedAttribute a : op->getAttrs())
        if (a.getName() != "tensor" && a.getName() != "param")
          os << a.getName().getValue() << "=" << a.getValue() << ";";
      auto it = classes.insert({key, op}).first;
      records.push_back(std::distance(classes.begin(), it));
      for (Value v : buffers(op))
        records.push_back(tableIndex.lookup(v));
    }
    Value recordOf = constantArray(
        *this, mod, "update_records",
        DenseElementsAttr::get(
            RankedTensorType::get({(int64_t)records.size()}, b.getI64Type()),
            ArrayRef<int64_t>(records)));
    auto field = [&](int64_t k) {
      return indexCast(load(recordOf, addI(mulI(f.block, width), k)));
    };
    Value cls = field(0);
    LogicalResult result = success();
    for (auto [c, entry] : llvm::enumerate(classes)) {
      auto op = cast<fp8::ScaleUpdateOp>(entry.second);
      ifThen(cmpI(arith::CmpIPredicate::eq, cls, idx(c)), [&] {
        classEntry.clear();
        for (auto [k, v] : llvm::enumerate(buffers(op)))
          classEntry[v] = field(1 + k);
        if (failed(scaleUpdate(op, f.tid, kWarp)))
          result = failure();
        classEntry.clear();
      });
    }
    if (failed(result))
      return failure();
    launches.add(f.func.getName(), (int64_t)ops.size(), kWarp);
    launches.useArgTable();
    return success();
  }

  // One thread: a few scalars (and amax histories of a few entries each).
  Func f = begin(mod, (sym + "_scalars").str(), kWarp);
  OpBuilder::InsertionGuard inner(b);
  auto ifOp = scf::IfOp::create(b, loc, thread0(f), false);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  for (Operation *op : ops) {
    if (auto o = dyn_cast<graph::FillOp>(op)) {
      Type elem = elementType(o.getResult());
      Attribute value =
          isa<FloatType>(elem)
              ? Attribute(b.getFloatAttr(elem, o.getValue().convertToDouble()))
              : Attribute(b.getIntegerAttr(
                    elem, (int64_t)o.getValue().convertToDouble()));
      write(o.getResult(),
            arith::ConstantOp::create(b, loc, cast<TypedAttr>(value)));
    } else if (auto o = dyn_cast<graph::AddOp>(op)) {
      // A sum of scalars (the pipeline's loss over its microbatches).
      write(o.getResult(), addF(read(o.getLhs()), read(o.getRhs())));
    } else if (auto o = dyn_cast<graph::IncrementOp>(op)) {
      Value one = arith::ConstantOp::create(
          b, loc, b.getIntegerAttr(elementType(o.getResult()), 1));
      write(o.getResult(), addI(read(o.getInput()), one));
    } else if (auto o = dyn_cast<graph::LrScheduleOp>(op)) {
      double lr = o.getLr().convertToDouble();
      double warmup = (double)o.getWarmupStepsAttr().getInt();
      double total = (double)o.getTotalStepsAttr().getInt();
      double ratio = o.getMinLrRatio().convertToDouble();
      Value step = toF32(read(o.getStep()));
      Value warm = mulF(step, f32c(warmup > 0 ? lr / warmup : 0));
      Value p = mulF(subF(step, f32c(warmup)),
                     f32c(1.0 / std::max(1.0, total - warmup)));
      p = minimumF(maximumF(p, f32c(0)), f32c(1));
      Value cosine = cos(mulF(p, f32c(M_PI)));
      Value decay =
          mulF(f32c(lr), addF(f32c(ratio), mulF(f32c((1 - ratio) * 0.5),
                                                addF(f32c(1), cosine))));
      Value inWarmup = cmpF(arith::CmpFPredicate::OLE, step, f32c(warmup));
      if (warmup <= 0)
        inWarmup = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
      write(o.getResult(), select(inWarmup, warm, decay));
    } else if (auto o = dyn_cast<graph::ClipScaleOp>(op)) {
      double maxNorm = o.getMaxNorm().convertToDouble();
      double scale = o.getScale().convertToDouble();
      Value coef = f32c(1);
      if (maxNorm > 0)
        coef =
            minimumF(f32c(1), divF(f32c(maxNorm),
                                   addF(toF32(read(o.getNorm())), f32c(1e-6))));
      write(o.getResult(), mulF(f32c(scale), coef));
    } else if (auto o = dyn_cast<fp8::ScaleUpdateOp>(op)) {
      if (failed(scaleUpdate(o, f.tid, 1)))
        return failure();
    } else if (auto o = dyn_cast<graph::ReshapeOp>(op);
               o && numElements(o.getResult().getType()) == 1) {
      scalars[o.getResult()] = read(o.getInput());
    } else if (auto o = dyn_cast<graph::ConcatOp>(op)) {
      // Scalars side by side: what an amax of them reads.
      joined[o.getResult()] = SmallVector<Value>(o->getOperands());
    } else if (auto o = dyn_cast<fp8::AmaxOp>(op)) {
      // The largest of a few amaxes (a chunked FP8 head's gradient: one
      // per chunk), NaN propagating as the interpreter's.
      auto it = joined.find(o.getInput());
      SmallVector<Value> parts =
          it != joined.end() ? it->second : SmallVector<Value>{o.getInput()};
      Value m = f32c(0);
      for (Value part : parts) {
        if (numElements(part.getType()) != 1)
          return o.emitOpError("reads more than scalars; GPU codegen takes "
                               "an amax of scalars here"),
                 failure();
        m = maximumF(m, absF(read(part)));
      }
      write(o.getResult(), m);
    } else if (auto o = dyn_cast<fp8::ComputeScaleOp>(op)) {
      // Current scaling: this step's amax, no previous scale to fall back
      // on, so a non-finite amax gives 1 (as the interpreter does).
      Value amax = read(o.getAmax());
      Value next = scaleFromAmax(amax, o.getDtype(), o.getMargin(),
                                 o.getPowerOfTwo(),
                                 o.getEps().convertToDouble());
      Value scale = select(isFinite(amax), next, f32c(1));
      write(o.getResult(), scale);
      write(o.getScaleInv(), divF(f32c(1), scale));
    } else {
      return op->emitOpError("has no GPU lowering in octet-fused-to-gpu"),
             failure();
    }
  }
  launches.add(f.func.getName(), 1, kWarp);
  return success();
}

Value WholeOpBuilder::sumOfSquares(const Func &f, Value mem, Type elem,
                                   Value lo, Value first, Value count,
                                   int64_t lanes, int64_t loads) {
  auto vectorType = VectorType::get({lanes}, elem);
  Value acc = lanes > 1 ? zeros(VectorType::get({lanes}, f32)) : f32c(0);
  Value none = acc;
  // Loaded first, squared after: the loads are independent, so they are
  // all in flight at once.
  SmallVector<Value> xs;
  for (int64_t j = 0; j < loads; ++j) {
    Value e = addI(first, mulI(addI(f.tid, j * kWholeThreads), lanes));
    Value ok = cmpI(arith::CmpIPredicate::ule, addI(e, lanes), count);
    Value at = addI(lo, select(ok, e, idx(0)));
    Value x = lanes > 1 ? toF32(vload(vectorType, mem, at, 16))
                        : toF32(load(mem, at));
    xs.push_back(select(ok, x, none));
  }
  for (Value x : xs)
    acc = fma(x, x, acc);
  if (lanes == 1)
    return acc;
  Value s = reduceAdd(acc);
  // The tensor's last elements, short of a whole load.
  Value i = addI(subI(count, remUI(count, lanes)), f.tid);
  Value ok = cmpI(arith::CmpIPredicate::ult, i, count);
  Value x = toF32(load(mem, addI(lo, select(ok, i, idx(0)))));
  return addF(s, select(ok, mulF(x, x), f32c(0)));
}

void WholeOpBuilder::setBufferTypes() {
  Block &body = fused.getBodyBlock();
  auto memrefOf = [&](Value v) {
    auto q = v.getDefiningOp<fp8::QuantizeOp>();
    Type elem = q && q.getAmax() == v ? b.getI32Type() : elementType(v);
    return MemRefType::get({std::max<int64_t>(numElements(v.getType()), 1)},
                           elem, MemRefLayoutAttrInterface(),
                           b.getI64IntegerAttr(kGlobalSpace));
  };
  for (Value v : body.getArguments())
    argTypes.push_back(memrefOf(v));
  for (Value v : body.getTerminator()->getOperands())
    argTypes.push_back(memrefOf(v));
}

FailureOr<WholeOpBuilder::Fp8LogitsGrad>
WholeOpBuilder::fp8LogitsGradOf(Operation *crossEntropyGrad,
                                DenseSet<Operation *> &done) {
  Fp8LogitsGrad out;
  Value v = crossEntropyGrad->getResult(0);
  if (isYielded(v))
    return out;
  SmallVector<Operation *> taken;
  while (v.hasOneUse() && isa<graph::ReshapeOp>(*v.user_begin())) {
    taken.push_back(*v.user_begin());
    v = taken.back()->getResult(0);
  }
  auto quantize = v.hasOneUse() ? dyn_cast<fp8::QuantizeOp>(*v.user_begin())
                                : fp8::QuantizeOp();
  auto fail = [&](const Twine &why) {
    crossEntropyGrad->emitOpError(why);
    return failure();
  };
  if (!quantize)
    return fail("result must be a kernel result or be cast to FP8 "
                "(fp8.quantize) through reshapes alone");
  if (!isa<BlockArgument>(quantize.getScale()))
    return fail("is cast to FP8 with a scale computed in the kernel; GPU "
                "codegen needs it in a kernel input");
  if (!isYielded(quantize.getResult()))
    return fail("is cast to FP8, but the FP8 tensor is not a kernel result");
  taken.push_back(quantize);
  out.quantize = quantize;
  for (Operation *user : quantize.getResult().getUsers()) {
    if (isa<kernel::YieldOp>(user))
      continue;
    auto t = dyn_cast<fp8::TransposeOp>(user);
    if (!t || out.transpose || t.getScale() != quantize.getScale() ||
        !isYielded(t.getResult()))
      return fail("is cast to FP8, which only an fp8.transpose that the "
                  "kernel yields may read");
    out.transpose = t;
    taken.push_back(t);
  }
  done.insert(taken.begin(), taken.end());
  return out;
}

LogicalResult WholeOpBuilder::transposeLaunch(gpu::GPUModuleOp mod,
                                              std::string name,
                                              fp8::TransposeOp t,
                                              LaunchList &launches) {
  OpBuilder::InsertionGuard guard(b);
  Func f = begin(mod, name, kTransposeThreads);
  auto type = cast<RankedTensorType>(t.getInput().getType());
  int64_t rows = type.getRank() == 2 ? type.getDimSize(0) : 1;
  SmallVector<TransposeCopy> copies;
  copies.push_back(TransposeCopy{mem(t.getInput()), mem(t.getResult()), rows,
                                 type.getNumElements() / rows});
  // The tensorwise scale passes through, as a 1 x 1 copy.
  if (isYielded(t.getResultScale()))
    copies.push_back(TransposeCopy{mem(t.getScale()),
                                   mem(t.getResultScale()), 1, 1});
  int64_t grid = emitTransposeCopies(b, loc, f.func, copies);
  launches.add(f.func.getName(), grid, kTransposeThreads);
  return success();
}

namespace {

// A token's row of the vocabulary in the cross-entropy kernels: a block of
// kVocabThreads threads streams it in 16-byte pieces. The row starts at
// element row · width, which is 16-byte aligned only when the width is a
// multiple of the piece (buffers are: the plan's slots are 256-byte
// aligned), so the `head` elements before the first 16-byte boundary and
// those after the last whole piece are read one at a time, by a thread
// each (fewer than two pieces' worth, fewer than the threads).
// 1024 threads, which ptxas gives 64 registers each (the register file):
// one row in flight per SM, so that the gradient's second read of a row
// (132 rows of Llama 3's 250 KB bf16 vocabulary: 33 MB, under H100's 50 MB
// L2) can find much of it still in L2.
constexpr int64_t kVocabThreads = 1024;
// Pieces a thread loads before it uses any: the loads of an SM's block
// (1024 threads x 4 x 16 bytes) cover the memory's latency at full rate.
constexpr int64_t kVocabUnroll = 4;
constexpr double kLog2e = 1.4426950408889634;

class VocabRow {
public:
  VocabRow(Emitter &e, Value tid, Value row, int64_t width, Type elem)
      : e(e), tid(tid), width(width),
        lanes(16 / (int64_t)(elem.getIntOrFloatBitWidth() / 8)), elem(elem) {
    start = e.mulI(row, e.idx(width));
    if (width % lanes == 0) {
      head = e.idx(0);
      pieces = e.idx(width / lanes);
      return;
    }
    Value misaligned = e.remUI(start, lanes);
    head = e.minSI(e.remUI(e.subI(e.idx(lanes), misaligned), lanes),
                   e.idx(width));
    pieces = e.divUI(e.subI(e.idx(width), head), lanes);
  }

  // The scratch of the block's reductions: (max, sum) of each of the
  // 32 warps.
  static MemRefType scratchType(Emitter &e) {
    return MemRefType::get({kMaxReduced * kWarp}, e.f32,
                           MemRefLayoutAttrInterface(),
                           e.b.getI64IntegerAttr(kSharedSpace));
  }

  // The row's maximum and sum of exp(x - max), in every thread, from one
  // read of the row: each thread keeps a running maximum and rescales its
  // running sum by exp(old - new) when the maximum grows, and the block
  // merges the threads' pairs the same way. The sum's terms are
  // ex2.approx((x - max) · log2 e).
  std::pair<Value, Value> maxAndSumExp(Value mem, Value scratchMem) {
    auto vecType = VectorType::get({lanes}, e.f32);
    Value minusInf = e.f32c(-INFINITY);
    ValueRange loop = e.forLoop(
        tid, pieces, kVocabThreads * kVocabUnroll, {minusInf, e.f32c(0)},
        [&](Value i, ValueRange acc) -> SmallVector<Value> {
          // The step's loads first, then a piece at a time: its maximum
          // and the sum rescaled to it. One rescale a piece rather than a
          // step keeps one piece in f32 at a time (62 registers where a
          // step's 32 floats took the cap of 64: ptxas -v, bf16 rows).
          SmallVector<std::pair<Value, Value>> loaded;
          for (int64_t u = 0; u < kVocabUnroll; ++u) {
            auto [at, valid] = piece(i, u, /*reversed=*/false);
            loaded.push_back({loadPiece(mem, at), valid});
          }
          Value mx = acc[0], sum = acc[1];
          for (auto [raw, valid] : loaded) {
            Value x = e.toF32(raw);
            if (valid)
              x = e.select(valid, x, e.splat(vecType, -INFINITY));
            Value grown = e.maximumF(mx, e.reduceMaximumF(x));
            Value shift = finiteShift(grown);
            sum = e.mulF(sum, expShifted(mx, shift));
            Value shiftV = e.broadcast(vecType, shift);
            sum = e.addF(sum, e.reduceAdd(e.perLane(
                                  e.mulF(e.subF(x, shiftV),
                                         e.splat(vecType, kLog2e)),
                                  [&](Value t) { return e.exp2(t); })));
            mx = grown;
          }
          return {mx, sum};
        });
    SmallVector<Value> acc{loop[0], loop[1]};
    if (Value mine = singles()) {
      // (x, 1) where this thread has an element outside the pieces,
      // (-inf, 0) (which merges as nothing) where it has none.
      Value x = e.toF32(e.load(mem, e.addI(start, singleAt(mine))));
      x = e.select(mine, x, minusInf);
      acc = merge(acc, {x, e.select(mine, e.f32c(1), e.f32c(0))});
    }
    ReductionScratch scratch;
    scratch.shared = scratchMem;
    scratch.warps = kVocabThreads / kWarp;
    scratch.barrierFirst = true;
    scratch.tid = tid;
    auto combine = [&](ArrayRef<Value> p, ArrayRef<Value> q, int64_t) {
      return merge(p, q);
    };
    SmallVector<Value> r = blockReduce(e, scratch, acc, combine, combine);
    return {r[0], r[1]};
  }

  // Writes f(x, at, lanes) over every element of the row of `out` (of
  // `outElem`): x the f32 values of `in`'s elements [at, at + lanes) of
  // the row (null when `in` is), f's result as many f32. A thread loads its
  // pieces before it stores any and stores only what it has loaded: `out`
  // may be `in`. The pieces go from the row's end to its start: the end
  // was read last by the reductions before, so more of the row is still in
  // L2.
  //
  // With `fp8Scale` (an f32 scalar), what is stored is f's result times the
  // scale cast to the FP8 `outElem` (round to nearest even, saturating, as
  // fp8.quantize does), and the result is this thread's largest |f| over
  // what it wrote (NaN propagating); without, null.
  Value write(Value in, Value out, Type outElem,
              function_ref<Value(Value, Value, int64_t)> f,
              Value fp8Scale = Value()) {
    int64_t outBytes = outElem.getIntOrFloatBitWidth() / 8;
    int64_t align = std::min<int64_t>(16, lanes * outBytes);
    bool quantize = static_cast<bool>(fp8Scale);
    SmallVector<Value> init;
    if (quantize)
      init.push_back(e.f32c(0));
    // g as stored: cast as it is, or scaled and cast to FP8.
    auto stored = [&](Value g, int64_t n) {
      if (!quantize)
        return e.fromF32(g, outElem);
      auto type = VectorType::get({n}, e.f32);
      return e.fromF32(e.mulF(g, e.broadcast(type, fp8Scale)), outElem);
    };
    ValueRange loop = e.forLoop(
        tid, pieces, kVocabThreads * kVocabUnroll, init,
        [&](Value i, ValueRange acc) -> SmallVector<Value> {
          SmallVector<std::pair<Value, Value>> places;
          SmallVector<Value> xs;
          for (int64_t u = 0; u < kVocabUnroll; ++u) {
            places.push_back(piece(i, u, /*reversed=*/true));
            xs.push_back(in ? e.toF32(loadPiece(in, places.back().first))
                            : Value());
          }
          Value amax = quantize ? acc[0] : Value();
          for (int64_t u = 0; u < kVocabUnroll; ++u) {
            auto [at, valid] = places[u];
            Value g = f(xs[u], at, lanes);
            auto storeIt = [&] {
              e.vstore(stored(g, lanes), out, e.addI(start, at), align);
            };
            if (valid)
              e.ifThen(valid, storeIt);
            else
              storeIt();
            if (quantize) {
              Value m = e.reduceMaximumF(e.absF(g));
              if (valid)
                m = e.select(valid, m, e.f32c(0));
              amax = e.maximumF(amax, m);
            }
          }
          return quantize ? SmallVector<Value>{amax} : SmallVector<Value>{};
        });
    Value amax = quantize ? loop[0] : Value();
    if (Value mine = singles()) {
      auto ifMine = scf::IfOp::create(e.b, e.loc,
                                      quantize ? TypeRange{e.f32} : TypeRange{},
                                      mine, /*withElseRegion=*/quantize);
      OpBuilder::InsertionGuard g(e.b);
      e.b.setInsertionPointToStart(ifMine.thenBlock());
      Value at = singleAt(mine);
      Value x;
      if (in)
        x = e.broadcast(VectorType::get({1}, e.f32),
                        e.toF32(e.load(in, e.addI(start, at))));
      Value gv = f(x, at, 1);
      e.store(e.extract(stored(gv, 1), 0), out, e.addI(start, at));
      if (quantize) {
        scf::YieldOp::create(e.b, e.loc,
                             ValueRange{e.absF(e.extract(gv, 0))});
        e.b.setInsertionPointToStart(ifMine.elseBlock());
        scf::YieldOp::create(e.b, e.loc, ValueRange{e.f32c(0)});
      }
      if (quantize) {
        e.b.setInsertionPointAfter(ifMine);
        amax = e.maximumF(amax, ifMine.getResult(0));
      }
    }
    return amax;
  }

private:
  // Piece u of loop step i: the row-relative element it starts at and
  // whether it is in the row (null: always). A piece past the row reads
  // the step's first piece, which is this thread's own.
  std::pair<Value, Value> piece(Value i, int64_t u, bool reversed) {
    Value j = e.addI(i, e.idx(u * kVocabThreads));
    Value valid;
    if (u > 0) {
      valid = e.cmpI(arith::CmpIPredicate::ult, j, pieces);
      j = e.select(valid, j, i);
    }
    if (reversed)
      j = e.subI(e.subI(pieces, e.idx(1)), j);
    return {e.addI(head, e.mulI(j, lanes)), valid};
  }
  Value loadPiece(Value mem, Value at) {
    return e.vload(VectorType::get({lanes}, elem), mem, e.addI(start, at),
                   16);
  }
  // Whether this thread has one of the elements outside the pieces (null
  // when the width is a multiple of the piece), and where it is: thread k
  // takes the k-th of the head then the tail.
  Value singles() {
    if (width % lanes == 0)
      return Value();
    Value count = e.subI(e.idx(width), e.mulI(pieces, lanes));
    return e.cmpI(arith::CmpIPredicate::ult, tid, count);
  }
  Value singleAt(Value mine) {
    Value inHead = e.cmpI(arith::CmpIPredicate::ult, tid, head);
    Value at = e.select(inHead, tid, e.addI(tid, e.mulI(pieces, lanes)));
    return e.select(mine, at, e.idx(0));
  }
  // The shift of the exponentials under maximum mx: mx, or 0 where mx is
  // -inf (nothing seen yet, or every element -inf), so that exp(-inf -
  // shift) is 0, not NaN.
  Value finiteShift(Value mx) {
    Value none = e.cmpF(arith::CmpFPredicate::OEQ, mx, e.f32c(-INFINITY));
    return e.select(none, e.f32c(0), mx);
  }
  Value expShifted(Value x, Value shift) {
    return e.exp2(e.mulF(e.subF(x, shift), e.f32c(kLog2e)));
  }
  // Two (max, sum of exp(x - max)) pairs as one; symmetric, so that a
  // warp's butterfly leaves the same bits in every lane.
  SmallVector<Value> merge(ArrayRef<Value> p, ArrayRef<Value> q) {
    Value mx = e.maximumF(p[0], q[0]);
    Value shift = finiteShift(mx);
    return {mx, e.addF(e.mulF(p[1], expShifted(p[0], shift)),
                       e.mulF(q[1], expShifted(q[0], shift)))};
  }

  Emitter &e;
  Value tid;
  int64_t width, lanes;
  Type elem;
  Value start, head, pieces;
};

} // namespace

LogicalResult WholeOpBuilder::build(gpu::GPUModuleOp mod, StringRef sym,
                                    LaunchList &launches) {
  Block &body = fused.getBodyBlock();
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  setBufferTypes();
  auto ops = body.without_terminator();
  argTable = std::distance(ops.begin(), ops.end()) > 1 &&
             llvm::all_of(ops, [](Operation &op) {
               return isa<fp8::ScaleUpdateOp>(op);
             });
  // A global norm over a model's gradients (a hundred tensors and more)
  // looks each block's tensor up in the table instead of a branch per
  // tensor.
  argTable = argTable || isLoneGlobalNorm(body);
  if (argTable)
    argTypes = {argTableType(b, argTypes.size())};
  // Workspace: per-row partial sums of the reductions, fixed below.
  for (Operation &op : body.without_terminator()) {
    if (auto o = dyn_cast<graph::CrossEntropyOp>(&op))
      wsFloats = std::max(wsFloats, 2 * rowsOf(o.getLogits()).first);
    else if (auto o = dyn_cast<graph::CrossEntropyGradOp>(&op))
      wsFloats = std::max<int64_t>(wsFloats, 1);
    else if (auto o = dyn_cast<graph::GlobalNormOp>(&op))
      wsFloats = std::max(wsFloats, normBlocks(o));
  }
  if (wsFloats)
    argTypes.push_back(MemRefType::get({wsFloats}, f32,
                                       MemRefLayoutAttrInterface(),
                                       b.getI64IntegerAttr(kGlobalSpace)));
  auto yielded = [&](Value v) {
    return llvm::is_contained(yield.getValues(), v);
  };
  auto inputsInMemory = [&](Operation *op) {
    return llvm::all_of(op->getOperands(), [&](Value v) {
      return isa<BlockArgument>(v) || yielded(v);
    });
  };

  SmallVector<Operation *> scalarList;
  DenseSet<Operation *> done;
  // Scalars in, scalars out: every op is the one thread's, whatever it
  // makes in between (a join of scalars, say).
  bool scalarRegion =
      llvm::all_of(fused.getInputs(), [](Value v) { return isScalarTensor(v); }) &&
      llvm::all_of(fused.getResults(), [](Value v) { return isScalarTensor(v); });
  // What the tile kernels compute from the kernel's inputs before they
  // quantize (octet-fuse-swiglu-quantize's SwiGLU and SwiGLU gradient).
  DenseSet<Operation *> evaluated;
  for (auto q : body.getOps<fp8::BlockQuantizeOp>())
    if (failed(evaluatedInTiles(q.getInput(), evaluated)))
      return failure();
  done.insert(evaluated.begin(), evaluated.end());
  int n = 0;
  for (Operation &opRef : body.without_terminator()) {
    Operation *op = &opRef;
    if (done.contains(op))
      continue;
    std::string name = (sym + "_" + Twine(n++)).str();
    bool scalarOnly = (scalarRegion ||
                       llvm::all_of(op->getResults(),
                                    [](Value v) { return isScalarTensor(v); })) &&
                      !isa<graph::GlobalNormOp, graph::CrossEntropyOp>(op);
    if (scalarOnly || isa<fp8::ScaleUpdateOp>(op)) {
      scalarList.push_back(op);
      continue;
    }
    if (!inputsInMemory(op) && !isa<fp8::BlockQuantizeOp>(op))
      return op->emitOpError("reads a value computed in the same kernel; "
                             "GPU codegen needs it in a kernel input"),
             failure();
    OpBuilder::InsertionGuard guard(b);
    if (auto o = dyn_cast<graph::EmbeddingOp>(op)) {
      if (!yielded(o.getResult()))
        return o.emitOpError("result must be a kernel result"), failure();
      // A thread per output element: rows of the table copied in order.
      int64_t total = numElements(o.getResult().getType());
      int64_t width = rowsOf(o.getResult()).second;
      Func f = begin(mod, name, kWholeThreads);
      Value i = addI(mulI(f.block, idx(kWholeThreads)), f.tid);
      ifThen(cmpI(arith::CmpIPredicate::ult, i, idx(total)), [&] {
        Value t = divUI(i, idx(width));
        Value j = remUI(i, idx(width));
        Value id = indexCast(readAt(o.getIds(), t));
        writeF32(o.getResult(), i,
                 readF32(o.getTable(), addI(mulI(id, idx(width)), j)));
      });
      launches.add(f.func.getName(), ceilDiv(total, kWholeThreads),
                   kWholeThreads);
    } else if (auto o = dyn_cast<graph::EmbeddingGradOp>(op)) {
      // d_table = accumulators + scatter-addF(dy): the accumulating adds
      // that fusion folds in (a tied LM head's gradient, say) give the
      // starting value.
      Value out = o.getResult();
      SmallVector<Value> inits;
      while (!yielded(out)) {
        auto user = out.hasOneUse() ? dyn_cast<graph::AddOp>(*out.user_begin())
                                    : graph::AddOp();
        if (!user)
          return o.emitOpError("result must be a kernel result or be added "
                               "to one"),
                 failure();
        Value init = user.getLhs() == out ? user.getRhs() : user.getLhs();
        if (!isa<BlockArgument>(init))
          return o.emitOpError("is added to a value computed in the kernel"),
                 failure();
        inits.push_back(init);
        out = user.getResult();
        done.insert(user);
      }
      if (!elementType(out).isF32())
        return o.emitOpError("needs an f32 table gradient (atomic adds)"),
               failure();
      int64_t total = numElements(out.getType());
      {
        Func f = begin(mod, name + "_init", kWholeThreads);
        Value i = addI(mulI(f.block, idx(kWholeThreads)), f.tid);
        ifThen(cmpI(arith::CmpIPredicate::ult, i, idx(total)), [&] {
          Value x = f32c(0);
          for (Value init : inits)
            x = addF(x, readF32(init, i));
          writeF32(out, i, x);
        });
        launches.add(f.func.getName(), ceilDiv(total, kWholeThreads),
                     kWholeThreads);
      }
      int64_t tokens = numElements(o.getIds().getType());
      int64_t width = rowsOf(out).second;
      b.setInsertionPointToEnd(mod.getBody());
      Func f = begin(mod, name, kWholeThreads);
      Value i = addI(mulI(f.block, idx(kWholeThreads)), f.tid);
      ifThen(cmpI(arith::CmpIPredicate::ult, i, idx(tokens * width)), [&] {
        Value t = divUI(i, idx(width));
        Value j = remUI(i, idx(width));
        Value id = indexCast(readAt(o.getIds(), t));
        atomicAddF(readF32(o.getGrad(), i), mem(out),
                   addI(mulI(id, idx(width)), j));
      });
      launches.add(f.func.getName(), ceilDiv(tokens * width, kWholeThreads),
                   kWholeThreads);
    } else if (auto o = dyn_cast<graph::GlobalNormOp>(op)) {
      if (!argTable)
        return o.emitOpError("must be the only op of its kernel.fused "
                             "region: its kernel reads the tensors through "
                             "an argument table"),
               failure();
      // Per-block partial sums of squares, then one block adds them in
      // order: deterministic. Block b reads a chunk of the last tensor
      // whose first block is at or before b (a binary search over the
      // tensors' first blocks); tensors of the same element type share
      // code, which reads the tensor's table entry and length from its
      // record.
      int64_t blocks = normBlocks(o);
      if (blocks > 0) {
        Func f = begin(mod, name + "_partial", kWholeThreads);
        SmallVector<Type> classes;
        SmallVector<int64_t> starts, records;
        constexpr int64_t kFields = 3; // class, elements, table entry
        int64_t first = 0;
        for (Value in : o->getOperands()) {
          int64_t len = numElements(in.getType());
          if (len == 0)
            continue;
          auto it = llvm::find(classes, elementType(in));
          if (it == classes.end())
            it = classes.insert(it, elementType(in));
          starts.push_back(first);
          llvm::append_range(
              records, ArrayRef<int64_t>{std::distance(classes.begin(), it),
                                         len, tableIndex.lookup(in)});
          first += normBlocks(in);
        }
        auto i64Array = [&](StringRef suffix, ArrayRef<int64_t> values) {
          auto type =
              RankedTensorType::get({(int64_t)values.size()}, b.getI64Type());
          return constantArray(*this, mod, (name + suffix).str(),
                               DenseElementsAttr::get(type, values));
        };
        Value startOf = i64Array("_starts", starts);
        Value recordOf = i64Array("_records", records);
        auto at = [&](Value array, Value i) {
          return indexCast(load(array, i));
        };
        int64_t n = starts.size();
        ValueRange bounds = forLoop(
            idx(0), idx(llvm::Log2_64_Ceil(n)), 1, ValueRange{idx(0), idx(n)},
            [&](Value, ValueRange lh) -> SmallVector<Value> {
              Value mid = divUI(addI(lh[0], lh[1]), 2);
              Value below =
                  cmpI(arith::CmpIPredicate::ule, at(startOf, mid), f.block);
              return {select(below, mid, lh[0]), select(below, lh[1], mid)};
            });
        Value tensor = bounds[0];
        Value local = subI(f.block, at(startOf, tensor));
        auto field = [&](int64_t k) {
          return at(recordOf, addI(mulI(tensor, kFields), k));
        };
        Value cls = field(0), len = field(1), entry = field(2);
        // A view into a larger buffer may start anywhere.
        Value aligned = cmpI(arith::CmpIPredicate::eq,
                             andI(indexCast(load(table, entry)), 15), idx(0));
        auto ifElse = [&](Value cond, function_ref<Value()> then,
                          function_ref<Value()> otherwise) {
          auto ifOp = scf::IfOp::create(b, loc, TypeRange{f32}, cond, true);
          OpBuilder::InsertionGuard g(b);
          b.setInsertionPointToStart(ifOp.thenBlock());
          scf::YieldOp::create(b, loc, ValueRange{then()});
          b.setInsertionPointToStart(ifOp.elseBlock());
          scf::YieldOp::create(b, loc, ValueRange{otherwise()});
          return ifOp.getResult(0);
        };
        std::function<Value(size_t)> classFrom = [&](size_t c) -> Value {
          Type elem = classes[c];
          auto sum = [&] {
            Value mem = tableEntry(table, entry, elem);
            int64_t lanes = normLanes(elem), chunk = normChunk(elem);
            Value lo = mulI(local, chunk);
            Value count = minSI(subI(len, lo), idx(chunk));
            // One element a load: the chunk in `lanes` rounds of
            // kNormLoads loads, not all at once (registers).
            auto scalars = [&]() -> Value {
              int64_t round = kWholeThreads * kNormLoads;
              return forLoop(
                  idx(0), idx(lanes), 1, ValueRange{f32c(0)},
                  [&](Value r, ValueRange acc) -> SmallVector<Value> {
                    Value s = sumOfSquares(f, mem, elem, lo, mulI(r, round),
                                           count, 1, kNormLoads);
                    return {addF(acc[0], s)};
                  })[0];
            };
            if (lanes == 1)
              return scalars();
            // 16-byte loads where the address allows and the chunk holds
            // one (the loads past its end read its first), else one
            // element a load.
            Value whole = cmpI(arith::CmpIPredicate::uge, count, idx(lanes));
            return ifElse(
                andI(aligned, whole),
                [&] {
                  return sumOfSquares(f, mem, elem, lo, idx(0), count, lanes,
                                      kNormLoads);
                },
                scalars);
          };
          if (c + 1 == classes.size())
            return sum();
          return ifElse(cmpI(arith::CmpIPredicate::eq, cls, idx(c)), sum,
                        [&] { return classFrom(c + 1); });
        };
        Value sum = blockReduce(f, classFrom(0), false);
        ifThen(thread0(f), [&] { store(sum, workspace, f.block); });
        launches.add(f.func.getName(), blocks, kWholeThreads);
        b.setInsertionPointToEnd(mod.getBody());
      }
      // The partials in a fixed order: thread t adds t, t + threads, ...,
      // kNormFinishUnroll loads in flight at a time.
      Func f = begin(mod, name, kWholeThreads);
      int64_t step = kWholeThreads * kNormFinishUnroll;
      Value partial = f32c(0);
      if (blocks > 0)
        partial = forLoop(
            f.tid, idx(blocks), step, ValueRange{f32c(0)},
            [&](Value i, ValueRange acc) -> SmallVector<Value> {
              SmallVector<Value> xs;
              for (int64_t u = 0; u < kNormFinishUnroll; ++u) {
                Value j = addI(i, u * kWholeThreads);
                Value ok = cmpI(arith::CmpIPredicate::ult, j, idx(blocks));
                xs.push_back(select(ok, load(workspace, select(ok, j, idx(0))),
                                    f32c(0)));
              }
              Value s = acc[0];
              for (Value x : xs)
                s = addF(s, x);
              return {s};
            })[0];
      Value total = blockReduce(f, partial, false);
      ifThen(thread0(f), [&] {
        writeF32(o.getResult(), idx(0),
                 mulF(f32c(o.getScale().convertToDouble()), sqrt(total)));
      });
      launches.add(f.func.getName(), 1, kWholeThreads);
      launches.useArgTable();
    } else if (auto o = dyn_cast<fp8::BlockQuantizeOp>(op)) {
      if (failed(blockQuantize(o, mod, name, launches, done)))
        return failure();
    } else if (auto o = dyn_cast<graph::CrossEntropyOp>(op)) {
      auto [rows, width] = rowsOf(o.getLogits());
      {
        // A block per token: the row's max and sum of exponentials from
        // one read of it (VocabRow); a masked token's row is not read.
        Func f = begin(mod, name + "_rows", kVocabThreads,
                       {VocabRow::scratchType(*this)});
        Value m = readF32(o.getLossMask(), f.block);
        Value keep = cmpF(arith::CmpFPredicate::UNE, m, f32c(0));
        auto ifKeep = scf::IfOp::create(b, loc, keep, /*withElseRegion=*/true);
        {
          OpBuilder::InsertionGuard g(b);
          b.setInsertionPoint(ifKeep.thenBlock()->getTerminator());
          VocabRow row(*this, f.tid, f.block, width,
                       elementType(o.getLogits()));
          auto [mx, sum] = row.maxAndSumExp(mem(o.getLogits()), f.extra[0]);
          ifThen(thread0(f), [&] {
            Value label = indexCast(readAt(o.getLabels(), f.block));
            Value inRow = cmpI(arith::CmpIPredicate::ult, label, idx(width));
            Value safe = select(inRow, label, idx(0));
            Value z = readF32(o.getLogits(),
                              addI(mulI(f.block, idx(width)), safe));
            Value nll = subF(addF(mx, log(sum)), z);
            store(mulF(nll, m), workspace, f.block);
          });
          b.setInsertionPoint(ifKeep.elseBlock()->getTerminator());
          ifThen(thread0(f), [&] { store(f32c(0), workspace, f.block); });
        }
        ifThen(thread0(f),
               [&] { store(m, workspace, addI(f.block, idx(rows))); });
        launches.add(f.func.getName(), rows, kVocabThreads);
      }
      b.setInsertionPointToEnd(mod.getBody());
      Func f = begin(mod, name, kWholeThreads);
      Value total = stride(f, rows, f32c(0), false,
                           [&](Value i) { return load(workspace, i); });
      // A chunk of a batch divides by the batch's count.
      Value count =
          o.getBatchMask()
              ? stride(f, numElements(o.getBatchMask().getType()), f32c(0),
                       false,
                       [&](Value i) { return readF32(o.getBatchMask(), i); })
              : stride(f, rows, f32c(0), false, [&](Value i) {
                  return load(workspace, addI(i, idx(rows)));
                });
      ifThen(thread0(f), [&] {
        writeF32(o.getLoss(), idx(0), divF(total, maximumF(count, f32c(1))));
      });
      launches.add(f.func.getName(), 1, kWholeThreads);
    } else if (auto o = dyn_cast<graph::CrossEntropyGradOp>(op)) {
      // An FP8 LM head's logits gradient: the kernel writes it cast, with
      // its amax, and the transpose launch after it the K-major copy.
      FailureOr<Fp8LogitsGrad> fp8Grad = fp8LogitsGradOf(o, done);
      if (failed(fp8Grad))
        return failure();
      if (!fp8Grad->quantize && !yielded(o.getResult()))
        return o.emitOpError("result must be a kernel result"), failure();
      auto [rows, width] = rowsOf(o.getLogits());
      {
        Func f = begin(mod, name + "_count", kWholeThreads);
        Value divisorMask =
            o.getBatchMask() ? o.getBatchMask() : o.getLossMask();
        Value count = stride(f, numElements(divisorMask.getType()), f32c(0),
                             false, [&](Value i) {
                               return readF32(divisorMask, i);
                             });
        ifThen(thread0(f), [&] { store(count, workspace, idx(0)); });
        launches.add(f.func.getName(), 1, kWholeThreads);
      }
      b.setInsertionPointToEnd(mod.getBody());
      // A block per token: one read of the row for its max and sum of
      // exponentials, then one read + write of the gradient (VocabRow). The
      // reductions have read the row whole before any thread writes, and
      // each thread writes only what it has just read: the gradient may be
      // written over the logits (checkOverwritesLowered).
      Func f = begin(mod, name, kVocabThreads, {VocabRow::scratchType(*this)});
      fp8::QuantizeOp quantize = fp8Grad->quantize;
      Value logits = mem(o.getLogits());
      Value out = mem(quantize ? quantize.getResult() : o.getResult());
      Type outElem =
          elementType(quantize ? quantize.getResult() : o.getResult());
      // The gradient as the interpreter quantizes it: rounded to the
      // element type cross_entropy_grad returns, then scaled and cast.
      Type gradElem = elementType(o.getResult());
      Value fp8Scale =
          quantize ? readF32(quantize.getScale(), idx(0)) : Value();
      VocabRow row(*this, f.tid, f.block, width, elementType(o.getLogits()));
      Value m = readF32(o.getLossMask(), f.block);
      Value keep = cmpF(arith::CmpFPredicate::UNE, m, f32c(0));
      // Quantizing, each branch yields this thread's largest |gradient|.
      SmallVector<Type> partialType;
      if (quantize)
        partialType.push_back(f32);
      auto ifKeep = scf::IfOp::create(b, loc, partialType, keep,
                                      /*withElseRegion=*/true);
      auto enter = [&](Block *block) {
        if (quantize)
          b.setInsertionPointToEnd(block);
        else
          b.setInsertionPoint(block->getTerminator());
      };
      {
        OpBuilder::InsertionGuard g(b);
        enter(ifKeep.thenBlock());
        Value norm = divF(readF32(o.getGrad(), idx(0)),
                          maximumF(load(workspace, idx(0)), f32c(1)));
        Value scale = mulF(norm, m);
        auto [mx, sum] = row.maxAndSumExp(logits, f.extra[0]);
        Value lse = addF(mx, log(sum));
        Value label = indexCast(readAt(o.getLabels(), f.block));
        Value kept = row.write(logits, out, outElem, [&](Value x, Value at,
                                                          int64_t lanes) {
          auto type = VectorType::get({lanes}, f32);
          Value t = mulF(subF(x, broadcast(type, lse)), splat(type, kLog2e));
          Value p = mulF(perLane(t, [&](Value y) { return exp2(y); }),
                         broadcast(type, scale));
          // The label's lane, if this piece has it: a label outside the
          // row is in none, and the gradient ignores it as the interpreter
          // does.
          Value lane = subI(label, at);
          Value hit = cmpI(arith::CmpIPredicate::ult, lane, idx(lanes));
          auto ifHit = scf::IfOp::create(b, loc, TypeRange{type}, hit,
                                         /*withElseRegion=*/true);
          OpBuilder::InsertionGuard gh(b);
          b.setInsertionPointToStart(ifHit.thenBlock());
          Value fixed = p;
          for (int64_t k = 0; k < lanes; ++k) {
            Value pk = extract(p, k);
            Value isLabel = cmpI(arith::CmpIPredicate::eq, lane, idx(k));
            fixed = insert(select(isLabel, subF(pk, scale), pk), fixed, k);
          }
          scf::YieldOp::create(b, loc, ValueRange{fixed});
          b.setInsertionPointToStart(ifHit.elseBlock());
          scf::YieldOp::create(b, loc, ValueRange{p});
          b.setInsertionPointAfter(ifHit);
          return quantize ? roundTo(ifHit.getResult(0), gradElem)
                          : ifHit.getResult(0);
        }, fp8Scale);
        if (quantize)
          scf::YieldOp::create(b, loc, ValueRange{kept});
        // Masked tokens get zeros, as the interpreter leaves them; their
        // rows are not read.
        enter(ifKeep.elseBlock());
        Value masked =
            row.write(Value(), out, outElem, [&](Value, Value, int64_t lanes) {
              return splat(VectorType::get({lanes}, f32), 0);
            }, fp8Scale);
        if (quantize)
          scf::YieldOp::create(b, loc, ValueRange{masked});
      }
      if (quantize && isYielded(quantize.getAmax())) {
        // The block's largest |gradient| into the amax: one atomic max of
        // the float bits a block (non-negative or NaN, whose bits exceed
        // every finite value's; zeroed before the launch).
        ReductionScratch scratch;
        scratch.shared = f.extra[0];
        scratch.warps = kVocabThreads / kWarp;
        scratch.barrierFirst = true;
        scratch.tid = f.tid;
        blockMaxInThread0(*this, scratch, ifKeep.getResult(0), [&](Value mx) {
          atomicMaxU(bitcast(b.getI32Type(), mx), mem(quantize.getAmax()),
                     idx(0));
        });
        zeroed.push_back(resultIndex(quantize.getAmax()));
      }
      launches.add(f.func.getName(), rows, kVocabThreads);
      if (fp8Grad->transpose) {
        b.setInsertionPointToEnd(mod.getBody());
        if (failed(transposeLaunch(mod, name + "_t", fp8Grad->transpose,
                                   launches)))
          return failure();
      }
    } else {
      return op->emitOpError("has no GPU lowering in octet-fused-to-gpu"),
             failure();
    }
  }
  if (!scalarList.empty())
    return scalarOps(mod, sym, scalarList, launches);
  return success();
}

} // namespace detail

using detail::WholeOpBuilder;

FailureOr<int64_t> buildWholeOpKernels(kernel::FusedOp fused, OpBuilder &b,
                                       gpu::GPUModuleOp mod, StringRef sym,
                                       LaunchList &launches,
                                       SmallVectorImpl<int64_t> &zeroResults) {
  WholeOpBuilder builder(fused, b);
  if (failed(builder.build(mod, sym, launches)))
    return failure();
  llvm::append_range(zeroResults, builder.zeroedResults());
  return builder.workspaceFloats() * 4;
}

} // namespace octet::codegen
