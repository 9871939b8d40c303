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

namespace {

constexpr int64_t kWholeThreads = 256;

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

class WholeOpBuilder : public Emitter {
public:
  WholeOpBuilder(kernel::FusedOp fused, OpBuilder &b)
      : Emitter(b, fused.getLoc()), fused(fused) {}

  // Builds every launch into `mod`, recording them in `launches`. Fails,
  // naming the op, on anything it cannot lower.
  LogicalResult build(gpu::GPUModuleOp mod, StringRef sym,
                      LaunchList &launches);
  // The tile kernel that follows a row kernel computing an RMSNorm: the
  // region's block quantizations of the norm, the norm evaluated on each
  // tile from its input and the rows' 1/rms at `inverseAt` in the row
  // kernel's workspace of `workspaceFloats` floats.
  LogicalResult buildNormTiles(gpu::GPUModuleOp mod, StringRef sym,
                               LaunchList &launches,
                               const DenseMap<Value, int64_t> &inverseAt,
                               int64_t workspaceFloats);
  int64_t workspaceFloats() const { return wsFloats; }

private:
  struct Func {
    gpu::GPUFuncOp func;
    Value tid, block, shared;
    SmallVector<Value> extra;
  };
  // A kernel of `threads` threads; `extraShared` are workgroup buffers
  // beside the reduction scratch (Func::extra, in order).
  Func begin(gpu::GPUModuleOp mod, std::string name, int64_t threads,
             ArrayRef<Type> extraShared = {});
  // The buffer of region value v: the kernel's argument, or its entry of
  // the argument table, read here (in a class's code, the entry the
  // update table gives).
  Value mem(Value v) {
    return bufferOf(v, memOf, table, tableIndex, classEntry, elementType(v));
  }
  bool inMemory(Value v) { return memOf.count(v) || tableIndex.count(v); }
  // Element i of region value v (a kernel buffer), as stored or as f32;
  // x rounded to v's type into element i.
  Value readAt(Value v, Value i) { return load(mem(v), i); }
  Value readF32(Value v, Value i) { return toF32(readAt(v, i)); }
  void writeF32(Value v, Value i, Value x) {
    store(fromF32(x, elementType(v)), mem(v), i);
  }
  static Type elementType(Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType();
  }
  // for (i = tid; i < n; i += threads) acc = f(acc, i), then over the block.
  Value stride(const Func &f, int64_t n, Value init, bool isMax,
               function_ref<Value(Value)> element);
  Value blockReduce(const Func &f, Value x, bool isMax);
  Value thread0(const Func &f) {
    return cmpI(arith::CmpIPredicate::eq, f.tid, idx(0));
  }
  // Rows of a [..., V] tensor: (count, width).
  static std::pair<int64_t, int64_t> rowsOf(Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    return {t.getNumElements() / t.getShape().back(), t.getShape().back()};
  }

  // fp8_max(dtype) / (max(amax, eps) · 2^margin), rounded down to a power
  // of two when asked: the one formula of scale_update and compute_scale.
  Value scaleFromAmax(Value amax, Type dtype, int64_t margin, bool powerOfTwo,
                      double eps);
  Value isFinite(Value x) {
    return cmpF(arith::CmpFPredicate::OLT, absF(x),
                f32c(std::numeric_limits<float>::infinity()));
  }

  LogicalResult scalarOps(gpu::GPUModuleOp mod, StringRef sym,
                          ArrayRef<Operation *> ops, LaunchList &launches);
  LogicalResult blockQuantize(fp8::BlockQuantizeOp op, gpu::GPUModuleOp mod,
                              StringRef name, LaunchList &launches,
                              DenseSet<Operation *> &done);
  // A quantization of a tile kernel's input, and its fp8.transpose in the
  // same kernel (or null).
  struct TileQuantization {
    fp8::BlockQuantizeOp op;
    fp8::TransposeOp transposed;
  };
  bool isYielded(Value v) {
    return llvm::is_contained(
        fused.getBodyBlock().getTerminator()->getOperands(), v);
  }
  static bool fitsTiles(ArrayRef<TileQuantization> qs);
  // The fp8.block_factors of block scales that the kernel yields
  // (octet-fuse-block-factors).
  SmallVector<fp8::BlockFactorsOp, 1> yieldedFactors(Value scales) {
    SmallVector<fp8::BlockFactorsOp, 1> out;
    for (Operation *user : scales.getUsers())
      if (auto f = dyn_cast<fp8::BlockFactorsOp>(user);
          f && isYielded(f.getFactors()))
        out.push_back(f);
    return out;
  }
  bool writesScales(Value scales) {
    return isYielded(scales) || !yieldedFactors(scales).empty();
  }
  // Block (r, kb) of `scales` ([rows, cols]) has `scale`: stored where the
  // kernel yields the scales, and 1 / scale at its place in each of their
  // factors the kernel yields (cuBLASLt's layout, fp8.block_factors), so
  // that the GEMM reads them with no launch in between. The thread of a
  // 128x128 row's last block writes the row's padding (0).
  void writeBlockScale(Value scales, Value r, Value kb, Value scale) {
    auto shape = cast<RankedTensorType>(scales.getType()).getShape();
    int64_t rows = shape[0], cols = shape[1];
    if (isYielded(scales))
      writeF32(scales, addI(mulI(r, cols), kb), scale);
    for (fp8::BlockFactorsOp factors : yieldedFactors(scales)) {
      ArrayRef<int64_t> block = factors.getBlock();
      int64_t stride = fp8::BlockFactorsOp::factorStride(rows, cols, block);
      bool tiles = block[0] == 1;
      Value at = tiles ? addI(mulI(kb, stride), r) : addI(mulI(r, stride), kb);
      writeF32(factors.getFactors(), at, divF(f32c(1), scale));
      if (!tiles && stride > cols)
        ifThen(cmpI(arith::CmpIPredicate::eq, kb, idx(cols - 1)), [&] {
          for (int64_t p = cols; p < stride; ++p)
            writeF32(factors.getFactors(), addI(mulI(r, stride), idx(p)),
                     f32c(0));
        });
    }
  }
  // Marks the factors of a quantization's scales as written with them.
  void factorsDone(Value scales, DenseSet<Operation *> &done) {
    for (Operation *user : scales.getUsers())
      if (isa<fp8::BlockFactorsOp>(user))
        done.insert(user);
  }
  // A value with a buffer of the kernel: an input or a result.
  bool isBuffer(Value v) { return isa<BlockArgument>(v) || isYielded(v); }
  // The ops that compute a tile kernel's input inside the kernel (the
  // producer fusion put in front of the quantization): each square
  // evaluates them on its own elements, so the tensor is never stored.
  // Adds them to `evaluated`; fails, naming the op, on one it cannot.
  LogicalResult evaluatedInTiles(Value v, DenseSet<Operation *> &evaluated);
  // Rows firstRow .. + 8, columns col .. + 8 of v viewed as [rows, last
  // dimension], as f32: loaded where v is in memory, else computed.
  SmallVector<Value, 8> squareOf(Value v, Value firstRow, Value col);
  void blockQuantizeTiles(ArrayRef<TileQuantization> qs, gpu::GPUModuleOp mod,
                          StringRef name, LaunchList &launches);
  // Global norm: thread f.tid's sum of squares over its share of the
  // `count` elements from `lo` of `mem` (a buffer of `elem`): `loads` loads
  // of `lanes` elements, the j-th at element first + (j * threads + tid) *
  // lanes of them, those past `count` read at `lo` (count >= lanes) and
  // dropped; with lanes > 1, the last count % lanes elements one a thread.
  // A fixed order: the same bits every run.
  Value sumOfSquares(const Func &f, Value mem, Type elem, Value lo, Value first,
                     Value count, int64_t lanes, int64_t loads);

  // One memref argument per input and per result, in the kernel ABI's
  // order.
  void setBufferTypes();

  kernel::FusedOp fused;
  SmallVector<Type> argTypes;
  // An RMSNorm result evaluated in tiles → its rows' 1/rms in the workspace.
  DenseMap<Value, int64_t> normInverseAt;
  // The tile kernel waits for the row kernel it follows (programmatic).
  bool waitsForRowKernel = false;
  DenseMap<Value, Value> memOf;
  // Only FP8 scale updates (a model's hundreds of them): one argument table
  // (inputs, then results), and updates of the same kind share code.
  bool argTable = false;
  Value table;
  DenseMap<Value, int64_t> tableIndex;
  DenseMap<Value, Value> classEntry;
  Value workspace;
  int64_t wsFloats = 0;
};

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

// Blockwise FP8: a block of threads per tile (1x128, 128x1 or 128x128):
// the tile's amax over the block, its scale (the formula of compute_scale,
// margin 0), then the cast. An fp8.transpose of the results in the same
// kernel (the K-major copy that wgrad and dgrad read, with its scales) is
// written from the same registers: each tile is read once, whichever
// layouts are kept. The tile's elements are read in row-major order, so a
// 1x128 tile is one coalesced row segment; a 128x1 tile walks a column.
LogicalResult WholeOpBuilder::blockQuantize(fp8::BlockQuantizeOp o,
                                            gpu::GPUModuleOp mod,
                                            StringRef name,
                                            LaunchList &launches,
                                            DenseSet<Operation *> &done) {
  Block &body = fused.getBodyBlock();
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  auto yielded = [&](Value v) {
    return llvm::is_contained(yield.getValues(), v);
  };
  // The quantization's transpose in the kernel, if any; fails unless every
  // result is a kernel result or that transpose's operand.
  auto quantization = [&](fp8::BlockQuantizeOp q)
      -> FailureOr<TileQuantization> {
    fp8::TransposeOp transposed;
    for (Operation *user : q.getResult().getUsers())
      if (auto t = dyn_cast<fp8::TransposeOp>(user);
          t && t.getScale() == q.getScales())
        transposed = t;
    auto readers = [&](Value v) {
      for (Operation *user : v.getUsers())
        if (user != transposed.getOperation() &&
            !isa<kernel::YieldOp, fp8::BlockFactorsOp>(user))
          return true;
      return false;
    };
    if (readers(q.getResult()) || readers(q.getScales()))
      return q.emitOpError("results must be kernel results or transposed "
                           "(fp8.transpose) in the same kernel"),
             failure();
    if (transposed && (readers(transposed.getResult()) ||
                       readers(transposed.getResultScale())))
      return transposed.emitOpError("results must be kernel results"),
             failure();
    return TileQuantization{q, transposed};
  };
  // Every quantization of the same input in the kernel (a gradient's 1x128
  // and 128x1 tiles, say): one read serves them all where they fit tiles.
  SmallVector<TileQuantization> group;
  for (Operation &op : body.without_terminator())
    if (auto q = dyn_cast<fp8::BlockQuantizeOp>(&op);
        q && q.getInput() == o.getInput() && !done.contains(q)) {
      FailureOr<TileQuantization> tq = quantization(q);
      if (failed(tq))
        return failure();
      group.push_back(*tq);
    }
  if (group.size() > 1 && !fitsTiles(group))
    group.erase(std::next(group.begin()), group.end());
  for (TileQuantization q : group) {
    done.insert(q.op);
    factorsDone(q.op.getScales(), done);
    if (q.transposed) {
      done.insert(q.transposed);
      factorsDone(q.transposed.getResultScale(), done);
    }
  }
  if (fitsTiles(group)) {
    blockQuantizeTiles(group, mod, name, launches);
    return success();
  }
  if (!isBuffer(o.getInput()))
    return o.emitOpError("quantizes a tensor computed in the kernel, which "
                         "needs the 128 x 128 tile kernel: a 2-D tensor "
                         "whose sides are multiples of 128, 1x128, 128x1 or "
                         "128x128 blocks"),
           failure();
  fp8::TransposeOp transposed = group.front().transposed;
  auto shape = cast<RankedTensorType>(o.getInput().getType()).getShape();
  int64_t rows = shape[0], cols = shape[1];
  int64_t br = o.getBlock()[0], bc = o.getBlock()[1];
  int64_t tileRows = ceilDiv(rows, br), tileCols = ceilDiv(cols, bc);
  Type dtype = o.getDtype();
  OpBuilder::InsertionGuard guard(b);
  Func f = begin(mod, name.str(), kWholeThreads);
  Value tr = divUI(f.block, idx(tileCols)), tc = remUI(f.block, idx(tileCols));
  Value r0 = mulI(tr, idx(br)), c0 = mulI(tc, idx(bc));
  // Element e of the tile: row r0 + e / bc, column c0 + e % bc, inside the
  // tensor or not (a last, partial tile).
  auto at = [&](Value e) {
    Value r = addI(r0, divUI(e, idx(bc))), c = addI(c0, remUI(e, idx(bc)));
    Value inside = andI(cmpI(arith::CmpIPredicate::ult, r, idx(rows)),
                        cmpI(arith::CmpIPredicate::ult, c, idx(cols)));
    return std::make_tuple(r, c, inside);
  };
  Value input = mem(o.getInput());
  auto element = [&](Value r, Value c, Value inside) {
    Value i = select(inside, addI(mulI(r, idx(cols)), c), idx(0));
    return select(inside, toF32(load(input, i)), f32c(0));
  };
  Value amax = stride(f, br * bc, f32c(0), true, [&](Value e) {
    auto [r, c, inside] = at(e);
    return absF(element(r, c, inside));
  });
  Value scale = select(isFinite(amax),
                       scaleFromAmax(amax, dtype, 0, o.getPowerOfTwo(),
                                     o.getEps().convertToDouble()),
                       f32c(1));
  ifThen(thread0(f), [&] {
    writeBlockScale(o.getScales(), tr, tc, scale);
    // The transposed scales: tile (tr, tc) is tile (tc, tr) of the
    // transposed tensor.
    if (transposed)
      writeBlockScale(transposed.getResultScale(), tc, tr, scale);
  });
  scf::ForOp::create(
      b, loc, f.tid, idx(br * bc), idx(kWholeThreads), ValueRange{},
      [&](OpBuilder &, Location, Value e, ValueRange) {
        auto [r, c, inside] = at(e);
        Value q = fromF32(mulF(element(r, c, inside), scale), dtype);
        ifThen(inside, [&] {
          if (yielded(o.getResult()))
            store(q, mem(o.getResult()), addI(mulI(r, idx(cols)), c));
          if (transposed && yielded(transposed.getResult()))
            store(q, mem(transposed.getResult()), addI(mulI(c, idx(rows)), r));
        });
        scf::YieldOp::create(b, loc);
      });
  launches.add(f.func.getName(), tileRows * tileCols, kWholeThreads);
  return success();
}

// Tensors whose sides are multiples of 128 (every operand of a block-scaled
// GEMM) go through one kernel of 128 x 128 tiles, a block of 256 threads
// per tile. Thread t owns an 8 x 8 square: columns 8(t % 16) .. + 8 of rows
// 8(t / 16) .. + 8, read as 8 16-byte row pieces (a warp reads two whole
// 256-byte tile rows an instruction, every load issued before the first
// use). A 1x128 tile is a tile row: its amax is the 16 threads' maxima
// folded by shuffles. A 128x1 tile is a tile column: the two row groups of
// a warp fold by a shuffle, the 8 warps through shared memory, and 128
// threads make the column scales. A 128x128 block is the whole tile (the
// block reduction). Row-major FP8 rows are written 8 bytes a thread, 128
// contiguous bytes a tile row. The transposed copy goes through a shared
// 128 x 128-byte tile: each thread turns its square over in registers and
// writes its 8 columns as 8-byte pieces (piece a of tile row c at a ^ (c /
// 8), so that the 16 threads of a half-warp hit 16 distinct 8-byte bank
// pairs), and after a barrier 8 threads write each output row's 128 bytes
// as 16-byte stores. The input is read once for every quantization and
// layout the kernel writes.
constexpr int64_t kTileSide = 128;
constexpr int64_t kTileThreads = 256;
constexpr int64_t kSquareSide = 8; // a thread's rows and columns
constexpr int64_t kSquaresAcross = kTileSide / kSquareSide;
constexpr int64_t kTileWarps = kTileThreads / kWarp;
static_assert(kSquaresAcross * kSquaresAcross == kTileThreads,
              "a thread per square of the tile");

enum class TileKind { Rows, Columns, Whole };

static std::optional<TileKind> tileKind(fp8::BlockQuantizeOp o) {
  ArrayRef<int64_t> block = o.getBlock();
  if (block[0] == 1 && block[1] == kTileSide)
    return TileKind::Rows;
  if (block[0] == kTileSide && block[1] == 1)
    return TileKind::Columns;
  if (block[0] == kTileSide && block[1] == kTileSide)
    return TileKind::Whole;
  return std::nullopt;
}

bool WholeOpBuilder::fitsTiles(ArrayRef<TileQuantization> qs) {
  Value input = TileQuantization(qs.front()).op.getInput();
  auto type = cast<RankedTensorType>(input.getType());
  int64_t width = type.getElementType().getIntOrFloatBitWidth();
  if (type.getRank() != 2 || type.getShape()[0] % kTileSide ||
      type.getShape()[1] % kTileSide || !isa<FloatType>(type.getElementType()) ||
      (width != 16 && width != 32))
    return false;
  int transposes = 0;
  for (TileQuantization q : qs) {
    std::optional<TileKind> kind = tileKind(q.op);
    if (!kind || q.op.getInput() != input)
      return false;
    if (q.transposed) {
      // A row tile transposed would be a column tile of the result: the
      // precision pass never asks for it.
      if (*kind == TileKind::Rows)
        return false;
      ++transposes;
    }
  }
  return transposes <= 1;
}

LogicalResult WholeOpBuilder::evaluatedInTiles(
    Value v, DenseSet<Operation *> &evaluated) {
  if (isBuffer(v))
    return success();
  Operation *def = v.getDefiningOp();
  auto width = [](Value x) {
    return cast<RankedTensorType>(x.getType()).getShape().back();
  };
  bool fits = false;
  if (auto r = dyn_cast<graph::ReshapeOp>(def)) {
    fits = width(r.getInput()) == width(v);
  } else if (auto c = dyn_cast<graph::ConcatOp>(def)) {
    fits = c.getDim() + 1 == cast<RankedTensorType>(v.getType()).getRank() &&
           llvm::all_of(c.getInputs(), [&](Value piece) {
             return width(piece) % kTileSide == 0;
           });
  } else if (auto n = dyn_cast<graph::RMSNormOp>(def)) {
    // From its input in memory and the row kernel's 1/rms of each row.
    fits = normInverseAt.count(v) && isBuffer(n.getInput()) &&
           isBuffer(n.getWeight());
  } else {
    fits = isa<graph::SwigluOp, graph::SwigluGradOp>(def);
  }
  if (!fits)
    return def->emitOpError(
               "computes a block-quantized tensor in the kernel; the tile "
               "kernel evaluates only SwiGLU, its gradient, an RMSNorm of a "
               "tensor in memory after the row kernel that kept its rows' "
               "1/rms, reshapes that keep the last dimension and joins of "
               "pieces 128 wide"),
           failure();
  evaluated.insert(def);
  for (Value operand : def->getOperands())
    if (failed(evaluatedInTiles(operand, evaluated)))
      return failure();
  return success();
}

SmallVector<Value, 8> WholeOpBuilder::squareOf(Value v, Value firstRow,
                                               Value col) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t width = type.getShape().back();
  Type elem = type.getElementType();
  auto f32x8 = VectorType::get({kSquareSide}, f32);
  SmallVector<Value, 8> x;
  if (inMemory(v)) {
    Value buffer = mem(v);
    for (int64_t j = 0; j < kSquareSide; ++j) {
      Value at = addI(mulI(addI(firstRow, idx(j)), width), col);
      if (elem.isF32()) {
        auto f32x4 = VectorType::get({4}, f32);
        Value lo = vload(f32x4, buffer, at, 16);
        Value hi = vload(f32x4, buffer, addI(at, idx(4)), 16);
        x.push_back(
            shuffle(lo, hi, ArrayRef<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
      } else {
        x.push_back(toF32(
            vload(VectorType::get({kSquareSide}, elem), buffer, at, 16)));
      }
    }
    return x;
  }
  Operation *def = v.getDefiningOp();
  if (auto r = dyn_cast<graph::ReshapeOp>(def))
    return squareOf(r.getInput(), firstRow, col);
  if (auto c = dyn_cast<graph::ConcatOp>(def)) {
    // Pieces are multiples of 128 wide, so a tile lies in one of them and
    // its threads all take the same branch.
    SmallVector<Type> types(kSquareSide, f32x8);
    std::function<SmallVector<Value, 8>(size_t, int64_t)> piece =
        [&](size_t k, int64_t offset) -> SmallVector<Value, 8> {
      Value input = c.getInputs()[k];
      int64_t pieceWidth = cast<RankedTensorType>(input.getType())
                               .getShape()
                               .back();
      if (k + 1 == c.getInputs().size())
        return squareOf(input, firstRow, subI(col, idx(offset)));
      Value inside = cmpI(arith::CmpIPredicate::ult, col,
                          idx(offset + pieceWidth));
      auto branch = scf::IfOp::create(b, loc, types, inside, true);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(branch.thenBlock());
        scf::YieldOp::create(
            b, loc, ValueRange(squareOf(input, firstRow, subI(col, idx(offset)))));
        b.setInsertionPointToStart(branch.elseBlock());
        scf::YieldOp::create(b, loc,
                             ValueRange(piece(k + 1, offset + pieceWidth)));
      }
      return SmallVector<Value, 8>(branch.getResults());
    };
    return piece(0, 0);
  }
  if (auto n = dyn_cast<graph::RMSNormOp>(def)) {
    // (x · inv) · w as the row kernel computes it, with the row kernel's
    // inv: the tiles hold the values its row kernel would have stored.
    SmallVector<Value, 8> in = squareOf(n.getInput(), firstRow, col);
    Value weight = mem(n.getWeight());
    Value w;
    if (elementType(n.getWeight()).isF32()) {
      auto f32x4 = VectorType::get({4}, f32);
      w = shuffle(vload(f32x4, weight, col, 16),
                  vload(f32x4, weight, addI(col, idx(4)), 16),
                  ArrayRef<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
    } else {
      w = toF32(vload(VectorType::get({kSquareSide},
                                      elementType(n.getWeight())),
                      weight, col, 16));
    }
    int64_t at = normInverseAt.lookup(v);
    for (int64_t j = 0; j < kSquareSide; ++j) {
      Value inv = load(workspace, addI(idx(at), addI(firstRow, idx(j))));
      x.push_back(
          roundTo(mulF(mulF(in[j], broadcast(f32x8, inv)), w), elem));
    }
    return x;
  }
  // SwiGLU and its gradient as the row kernels compute them (the same
  // contracted products), each result rounded to its type.
  bool wasContract = contract;
  contract = true;
  if (auto o = dyn_cast<graph::SwigluOp>(def)) {
    SmallVector<Value, 8> g = squareOf(o.getLhs(), firstRow, col);
    SmallVector<Value, 8> u = squareOf(o.getRhs(), firstRow, col);
    for (int64_t j = 0; j < kSquareSide; ++j)
      x.push_back(roundTo(swiglu(g[j], u[j]), elem));
  } else {
    auto grad = cast<graph::SwigluGradOp>(def);
    SmallVector<Value, 8> dy = squareOf(grad.getGrad(), firstRow, col);
    SmallVector<Value, 8> g = squareOf(grad.getGate(), firstRow, col);
    SmallVector<Value, 8> u = squareOf(grad.getUp(), firstRow, col);
    bool gate = v == grad.getGateGrad();
    for (int64_t j = 0; j < kSquareSide; ++j) {
      auto [gateGrad, upGrad] = swigluGrad(dy[j], g[j], u[j]);
      x.push_back(roundTo(gate ? gateGrad : upGrad, elem));
    }
  }
  contract = wasContract;
  return x;
}

void WholeOpBuilder::blockQuantizeTiles(ArrayRef<TileQuantization> qs,
                                        gpu::GPUModuleOp mod, StringRef name,
                                        LaunchList &launches) {
  Value inputValue = TileQuantization(qs.front()).op.getInput();
  auto inType = cast<RankedTensorType>(inputValue.getType());
  int64_t rows = inType.getShape()[0], cols = inType.getShape()[1];
  int64_t tileRows = rows / kTileSide, tileCols = cols / kTileSide;
  bool columns = llvm::any_of(qs, [](TileQuantization q) {
    return tileKind(q.op) == TileKind::Columns;
  });
  bool transposes = llvm::any_of(
      qs, [](TileQuantization q) { return bool(q.transposed); });
  Type i8 = b.getIntegerType(8);
  auto sharedOf = [&](int64_t n, Type elem) {
    return MemRefType::get({n}, elem, MemRefLayoutAttrInterface(),
                           b.getI64IntegerAttr(kSharedSpace));
  };
  SmallVector<Type> extra;
  int columnMaxima = -1, columnScales = -1, byteTile = -1;
  if (columns) {
    columnMaxima = extra.size();
    extra.push_back(sharedOf(kTileWarps * kTileSide, f32));
    columnScales = extra.size();
    extra.push_back(sharedOf(kTileSide, f32));
  }
  if (transposes) {
    byteTile = extra.size();
    extra.push_back(sharedOf(kTileSide * kTileSide, i8));
  }
  OpBuilder::InsertionGuard guard(b);
  Func f = begin(mod, name.str(), kTileThreads, extra);
  Value t = f.tid;
  Value lane = remUI(t, kWarp), warp = divUI(t, kWarp);
  Value squareCol = remUI(t, kSquaresAcross);
  Value squareRow = divUI(t, kSquaresAcross);
  Value tileRow = divUI(f.block, tileCols), tileCol = remUI(f.block, tileCols);
  Value r0 = mulI(tileRow, kTileSide), c0 = mulI(tileCol, kTileSide);
  Value firstRow = addI(r0, mulI(squareRow, kSquareSide));
  Value col = addI(c0, mulI(squareCol, kSquareSide));
  auto rowAt = [&](int64_t j) {
    return addI(mulI(addI(firstRow, idx(j)), cols), col);
  };

  // The square, 8 rows of 8 values, as f32.
  auto f32x8 = VectorType::get({kSquareSide}, f32);
  SmallVector<Value, kSquareSide> x = squareOf(inputValue, firstRow, col);
  auto scaleOf = [&](fp8::BlockQuantizeOp o, Value amax) {
    return select(isFinite(amax),
                  scaleFromAmax(amax, o.getDtype(), 0, o.getPowerOfTwo(),
                                o.getEps().convertToDouble()),
                  f32c(1));
  };
  auto cast8 = [&](Value v, Type dtype) { return fromF32(v, dtype); };

  for (TileQuantization q : qs) {
    fp8::BlockQuantizeOp o = q.op;
    Type dtype = o.getDtype();
    TileKind kind = *tileKind(o);
    // Each row's FP8 values.
    SmallVector<Value, kSquareSide> quantized;
    if (kind == TileKind::Rows) {
      for (int64_t j = 0; j < kSquareSide; ++j) {
        Value m = reduceMaximumF(absF(x[j]));
        // The 16 threads of a tile row: lanes differing in their low 4 bits.
        for (int64_t off = 1; off < kSquaresAcross; off *= 2)
          m = maximumF(m, shuffleXor(m, off));
        Value scale = scaleOf(o, m);
        quantized.push_back(cast8(mulF(x[j], broadcast(f32x8, scale)), dtype));
        if (writesScales(o.getScales()))
          ifThen(cmpI(arith::CmpIPredicate::eq, squareCol, idx(0)), [&] {
            writeBlockScale(o.getScales(), addI(firstRow, idx(j)), tileCol,
                            scale);
          });
      }
    } else if (kind == TileKind::Columns) {
      Value m = absF(x[0]);
      for (int64_t j = 1; j < kSquareSide; ++j)
        m = maximumF(m, absF(x[j]));
      // The warp's two row groups (lanes 16 apart), then the 8 warps.
      SmallVector<Value, kSquareSide> lanes;
      for (int64_t k = 0; k < kSquareSide; ++k) {
        Value e = extract(m, k);
        lanes.push_back(maximumF(e, shuffleXor(e, kSquaresAcross)));
      }
      Value folded = splat(f32x8, 0.0);
      for (int64_t k = 0; k < kSquareSide; ++k)
        folded = insert(lanes[k], folded, k);
      Value maxima = f.extra[columnMaxima], scales = f.extra[columnScales];
      ifThen(cmpI(arith::CmpIPredicate::ult, lane, idx(kSquaresAcross)), [&] {
        vstore(folded, maxima,
               addI(mulI(warp, kTileSide), mulI(squareCol, kSquareSide)), 16);
      });
      barrier();
      ifThen(cmpI(arith::CmpIPredicate::ult, t, idx(kTileSide)), [&] {
        // Warps in order: the same bits whatever order they finished in.
        Value amax = load(maxima, t);
        for (int64_t w = 1; w < kTileWarps; ++w)
          amax = maximumF(amax, load(maxima, addI(t, idx(w * kTileSide))));
        Value scale = scaleOf(o, amax);
        store(scale, scales, t);
        writeBlockScale(o.getScales(), tileRow, addI(c0, t), scale);
        if (q.transposed)
          writeBlockScale(q.transposed.getResultScale(), addI(c0, t),
                          tileRow, scale);
      });
      barrier();
      Value scale = vload(f32x8, scales, mulI(squareCol, kSquareSide), 16);
      for (int64_t j = 0; j < kSquareSide; ++j)
        quantized.push_back(cast8(mulF(x[j], scale), dtype));
    } else {
      Value m = reduceMaximumF(absF(x[0]));
      for (int64_t j = 1; j < kSquareSide; ++j)
        m = maximumF(m, reduceMaximumF(absF(x[j])));
      Value amax = blockReduce(f, m, true);
      Value scale = scaleOf(o, amax);
      ifThen(thread0(f), [&] {
        writeBlockScale(o.getScales(), tileRow, tileCol, scale);
        if (q.transposed)
          writeBlockScale(q.transposed.getResultScale(), tileCol, tileRow,
                          scale);
      });
      Value splatScale = broadcast(f32x8, scale);
      for (int64_t j = 0; j < kSquareSide; ++j)
        quantized.push_back(cast8(mulF(x[j], splatScale), dtype));
    }
    if (isYielded(o.getResult()))
      for (int64_t j = 0; j < kSquareSide; ++j)
        vstore(quantized[j], mem(o.getResult()), rowAt(j), 8);
    if (!q.transposed || !isYielded(q.transposed.getResult()))
      continue;

    // Column k of the square: byte k of each of its rows.
    auto bytes8 = VectorType::get({kSquareSide}, i8);
    SmallVector<Value, kSquareSide> rowBytes;
    for (Value r : quantized)
      rowBytes.push_back(vector::BitCastOp::create(b, loc, bytes8, r));
    SmallVector<int64_t> concat16, concat32;
    for (int64_t i = 0; i < 16; ++i)
      concat16.push_back(i);
    for (int64_t i = 0; i < 32; ++i)
      concat32.push_back(i);
    SmallVector<Value, 4> pairs;
    for (int64_t j = 0; j < kSquareSide; j += 2)
      pairs.push_back(shuffle(rowBytes[j], rowBytes[j + 1], concat16));
    Value upper = shuffle(pairs[0], pairs[1], concat32);
    Value lower = shuffle(pairs[2], pairs[3], concat32);
    Value tile = f.extra[byteTile];
    for (int64_t k = 0; k < kSquareSide; ++k) {
      SmallVector<int64_t> pick;
      for (int64_t j = 0; j < kSquareSide; ++j)
        pick.push_back(j * kSquareSide + k);
      Value column = shuffle(upper, lower, pick);
      // Tile row (input column) 8·squareCol + k, piece squareRow, swizzled.
      Value tileRowAt = addI(mulI(squareCol, kSquareSide), idx(k));
      Value piece = xOrI(squareRow, squareCol);
      vstore(column, tile,
             addI(mulI(tileRowAt, kTileSide), mulI(piece, kSquareSide)), 8);
    }
    barrier();
    // Output row c of the tile (input column c0 + c), 16 bytes m: pieces
    // 2m and 2m + 1, stored at (2m ^ (c / 8)) and its neighbour, swapped
    // when c / 8 is odd.
    auto bytes16 = VectorType::get({2 * kSquareSide}, i8);
    SmallVector<int64_t> swap;
    for (int64_t i = 0; i < 2 * kSquareSide; ++i)
      swap.push_back((i + kSquareSide) % (2 * kSquareSide));
    auto out16 = VectorType::get({2 * kSquareSide}, dtype);
    constexpr int64_t kPiecesPerRow = kTileSide / (2 * kSquareSide);
    for (int64_t p = 0; p < kTileSide * kPiecesPerRow / kTileThreads; ++p) {
      Value linear = addI(t, idx(p * kTileThreads));
      Value c = divUI(linear, kPiecesPerRow);
      Value m = remUI(linear, kPiecesPerRow);
      Value writer = divUI(c, kSquareSide);
      Value stored = xOrI(m, shRUI(writer, 1));
      Value v = vload(bytes16, tile,
                      addI(mulI(c, kTileSide), mulI(stored, 2 * kSquareSide)),
                      16);
      Value odd = cmpI(arith::CmpIPredicate::ne, andI(writer, 1), idx(0));
      v = select(odd, shuffle(v, v, swap), v);
      vstore(vector::BitCastOp::create(b, loc, out16, v),
             mem(q.transposed.getResult()),
             addI(mulI(addI(c0, c), rows),
                  addI(r0, mulI(m, 2 * kSquareSide))),
             16);
    }
  }
  // Two blocks a multiprocessor, as the tiles of a stored tensor run: the
  // squares of every operand an evaluated tensor reads would otherwise
  // take the registers of one.
  if (!isBuffer(inputValue))
    f.func->setAttr("nvvm.minctasm", b.getI32IntegerAttr(2));
  launches.add(f.func.getName(), tileRows * tileCols, kTileThreads, 0, 1,
               waitsForRowKernel);
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
    return MemRefType::get({std::max<int64_t>(numElements(v.getType()), 1)},
                           elementType(v), MemRefLayoutAttrInterface(),
                           b.getI64IntegerAttr(kGlobalSpace));
  };
  for (Value v : body.getArguments())
    argTypes.push_back(memrefOf(v));
  for (Value v : body.getTerminator()->getOperands())
    argTypes.push_back(memrefOf(v));
}

LogicalResult
WholeOpBuilder::buildNormTiles(gpu::GPUModuleOp mod, StringRef sym,
                               LaunchList &launches,
                               const DenseMap<Value, int64_t> &inverseAt,
                               int64_t workspaceFloats) {
  setBufferTypes();
  wsFloats = workspaceFloats;
  argTypes.push_back(MemRefType::get({wsFloats}, f32,
                                     MemRefLayoutAttrInterface(),
                                     b.getI64IntegerAttr(kGlobalSpace)));
  normInverseAt = inverseAt;
  waitsForRowKernel = true;
  Block &body = fused.getBodyBlock();
  DenseSet<Operation *> evaluated, done;
  SmallVector<fp8::BlockQuantizeOp> quantizations;
  for (auto q : body.getOps<fp8::BlockQuantizeOp>())
    if (inverseAt.count(throughReshapes(q.getInput()))) {
      if (failed(evaluatedInTiles(q.getInput(), evaluated)))
        return failure();
      quantizations.push_back(q);
    }
  int n = 0;
  for (fp8::BlockQuantizeOp q : quantizations) {
    if (done.contains(q))
      continue;
    if (failed(blockQuantize(q, mod, (sym + "_" + Twine(n++)).str(), launches,
                             done)))
      return failure();
  }
  return success();
}

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
  void write(Value in, Value out, Type outElem,
             function_ref<Value(Value, Value, int64_t)> f) {
    int64_t outBytes = outElem.getIntOrFloatBitWidth() / 8;
    int64_t align = std::min<int64_t>(16, lanes * outBytes);
    e.forLoop(tid, pieces, kVocabThreads * kVocabUnroll, {},
              [&](Value i, ValueRange) -> SmallVector<Value> {
                SmallVector<std::pair<Value, Value>> places;
                SmallVector<Value> xs;
                for (int64_t u = 0; u < kVocabUnroll; ++u) {
                  places.push_back(piece(i, u, /*reversed=*/true));
                  xs.push_back(in ? e.toF32(loadPiece(in, places.back().first))
                                  : Value());
                }
                for (int64_t u = 0; u < kVocabUnroll; ++u) {
                  auto [at, valid] = places[u];
                  Value g = f(xs[u], at, lanes);
                  auto storeIt = [&] {
                    e.vstore(e.fromF32(g, outElem), out, e.addI(start, at),
                             align);
                  };
                  if (valid)
                    e.ifThen(valid, storeIt);
                  else
                    storeIt();
                }
                return {};
              });
    if (Value mine = singles())
      e.ifThen(mine, [&] {
        Value at = singleAt(mine);
        Value x;
        if (in)
          x = e.broadcast(VectorType::get({1}, e.f32),
                          e.toF32(e.load(in, e.addI(start, at))));
        Value g = f(x, at, 1);
        e.store(e.fromF32(e.extract(g, 0), outElem), out, e.addI(start, at));
      });
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
    bool scalarOnly = llvm::all_of(op->getResults(),
                                   [](Value v) { return isScalarTensor(v); }) &&
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
      if (!yielded(o.getResult()))
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
      Value logits = mem(o.getLogits()), out = mem(o.getResult());
      Type outElem = elementType(o.getResult());
      VocabRow row(*this, f.tid, f.block, width, elementType(o.getLogits()));
      Value m = readF32(o.getLossMask(), f.block);
      Value keep = cmpF(arith::CmpFPredicate::UNE, m, f32c(0));
      auto ifKeep = scf::IfOp::create(b, loc, keep, /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPoint(ifKeep.thenBlock()->getTerminator());
        Value norm = divF(readF32(o.getGrad(), idx(0)),
                          maximumF(load(workspace, idx(0)), f32c(1)));
        Value scale = mulF(norm, m);
        auto [mx, sum] = row.maxAndSumExp(logits, f.extra[0]);
        Value lse = addF(mx, log(sum));
        Value label = indexCast(readAt(o.getLabels(), f.block));
        row.write(logits, out, outElem, [&](Value x, Value at, int64_t lanes) {
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
          return ifHit.getResult(0);
        });
        // Masked tokens get zeros, as the interpreter leaves them; their
        // rows are not read.
        b.setInsertionPoint(ifKeep.elseBlock()->getTerminator());
        row.write(Value(), out, outElem, [&](Value, Value, int64_t lanes) {
          return splat(VectorType::get({lanes}, f32), 0);
        });
      }
      launches.add(f.func.getName(), rows, kVocabThreads);
    } else {
      return op->emitOpError("has no GPU lowering in octet-fused-to-gpu"),
             failure();
    }
  }
  if (!scalarList.empty())
    return scalarOps(mod, sym, scalarList, launches);
  return success();
}

} // namespace

LogicalResult buildNormTileKernels(kernel::FusedOp fused, OpBuilder &b,
                                   gpu::GPUModuleOp mod, StringRef sym,
                                   LaunchList &launches,
                                   const DenseMap<Value, int64_t> &inverseAt,
                                   int64_t workspaceFloats) {
  WholeOpBuilder builder(fused, b);
  return builder.buildNormTiles(mod, sym, launches, inverseAt,
                                workspaceFloats);
}

FailureOr<int64_t> buildWholeOpKernels(kernel::FusedOp fused, OpBuilder &b,
                                       gpu::GPUModuleOp mod, StringRef sym,
                                       LaunchList &launches) {
  WholeOpBuilder builder(fused, b);
  if (failed(builder.build(mod, sym, launches)))
    return failure();
  return builder.workspaceFloats() * 4;
}

} // namespace octet::codegen
