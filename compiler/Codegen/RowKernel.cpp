//===- RowKernel.cpp - Register-resident row kernels ----------------------===//
//
// The row kernel of a planned region (KernelPlan.h): a block owns a row; its
// threads hold the row in registers as `vec`-element f32 vectors, thread t
// owning elements [c·vec·T + vec·t, +vec) of chunk c, so that every load
// and store is a 16-byte access (8 bf16 elements) and a warp touches 512
// contiguous bytes. Blocks are dealt out to segments by fixed block ranges;
// a segment whose blocks loop over rows loads row r + blocks while it
// computes row r. The ops of a row are in RowOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/RowKernel.h"

#include "compiler/Codegen/Launches.h"
#include "compiler/Codegen/RowKernelBuilder.h"
#include "compiler/Codegen/TransposeKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <map>

using namespace mlir;

namespace octet::codegen {

RowKernelBuilder::RowKernelBuilder(kernel::FusedOp fused,
                                   const KernelPlan &plan, OpBuilder &b,
                                   bool argTable)
    : Emitter(b, fused.getLoc()), fused(fused), plan(plan), vec(plan.vec),
      argTable(argTable) {
  // Products feeding sums may fuse into one fma (a single rounding instead
  // of two: within the stated f32 tolerances, and fewer instructions an
  // element in kernels that issue as much as they move).
  contract = true;
  vecType = VectorType::get({vec}, f32);
  // Two slots used in turn: a slot is rewritten only after the barrier of
  // the reduction in between, which every reader of its last use has passed.
  reduction.warps = plan.threads / kWarp;
  reduction.slots = 2;
}

Value RowKernelBuilder::chunkBase(int64_t c) {
  return addI(idx(c * plan.threads * vec), tid8);
}

void RowKernelBuilder::widen(Val &val) {
  if (!val.rawElem)
    return;
  for (Value &c : val.chunks)
    c = toF32(c);
  val.rawElem = Type();
}

Type RowKernelBuilder::memrefFor(Value v, bool atomicMax) {
  auto t = cast<RankedTensorType>(v.getType());
  Type elem = atomicMax ? b.getI32Type() : t.getElementType();
  return MemRefType::get({std::max<int64_t>(t.getNumElements(), 1)}, elem,
                         MemRefLayoutAttrInterface(),
                         b.getI64IntegerAttr(kGlobalSpace));
}

SmallVector<Type> RowKernelBuilder::argumentTypes() {
  SmallVector<Type> types = bufferTypes();
  if (argTable)
    types = {argTableType(b, types.size())};
  if (plan.workspaceFloats)
    types.push_back(MemRefType::get({plan.workspaceFloats}, f32,
                                    MemRefLayoutAttrInterface(),
                                    b.getI64IntegerAttr(kGlobalSpace)));
  return types;
}

SmallVector<Type> RowKernelBuilder::bufferTypes() {
  SmallVector<Type> types;
  for (Value v : fused.getBodyBlock().getArguments())
    types.push_back(memrefFor(v, false));
  auto yield = cast<kernel::YieldOp>(fused.getBodyBlock().getTerminator());
  for (Value v : yield.getValues()) {
    bool amax = false;
    for (const Segment &seg : plan.segments)
      if (seg.roles.count(v) && seg.roles.lookup(v) == Role::Amax)
        amax = true;
    types.push_back(memrefFor(v, amax));
  }
  return types;
}

bool RowKernelBuilder::usesArgTable(kernel::FusedOp fused,
                                    const KernelPlan &plan) {
  // Flat slices only: their code differs between tensors by sizes alone.
  return fused.getKind() == "multi_tensor" && !plan.workspaceFloats &&
         llvm::all_of(plan.segments, [](const Segment &seg) {
           return seg.flat && !seg.tileRows && seg.columnSums.empty();
         });
}

Value RowKernelBuilder::mem(Value v) {
  return bufferOf(v, memOf, table, tableIndex, classEntry, tableElem.lookup(v));
}

Value RowKernelBuilder::chunkValid(const Segment &seg, int64_t len, int64_t c,
                                   Value rowStart) {
  int64_t span = plan.threads * vec;
  Value valid;
  Value base = chunkBase(c);
  if ((c + 1) * span > len)
    valid = cmpI(arith::CmpIPredicate::ult, base, idx(len));
  if (seg.flat && rowStart && (segFlatElements || seg.flatElements % len)) {
    Value global = addI(rowStart, base);
    Value inside = cmpI(arith::CmpIPredicate::ult, global,
                        segFlatElements ? segFlatElements
                                        : idx(seg.flatElements));
    valid = valid ? andI(valid, inside) : inside;
  }
  return valid;
}

Value RowKernelBuilder::loadChunk(Value mem, Type elem, Value offset,
                                  Value valid) {
  // Invalid lanes read element 0 and are replaced by zeros: no branch, and
  // zeros are neutral for the sums and maxima that follow.
  if (valid)
    offset = select(valid, offset, idx(0));
  auto type = VectorType::get({vec}, elem);
  int64_t bytes = vec * elem.getIntOrFloatBitWidth() / 8;
  Value v = vload(type, mem, offset, std::min<int64_t>(bytes, 16));
  if (valid)
    v = select(valid, v, zeros(type));
  return v;
}

// An FP8 chunk still pending its rounding is rounded by the store's
// truncation, which is that rounding.
void RowKernelBuilder::storeChunk(Value mem, Type elem, Value offset,
                                  Value valid, Value v) {
  OpBuilder::InsertionGuard guard(b);
  if (valid) {
    auto ifOp = scf::IfOp::create(b, loc, valid, /*withElseRegion=*/false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  }
  Value narrow = fromF32(v, elem);
  int64_t bytes = vec * elem.getIntOrFloatBitWidth() / 8;
  vstore(narrow, mem, offset, std::min<int64_t>(bytes, 16));
}

void RowKernelBuilder::storeNarrow(Value mem, Value offset, Value valid,
                                   Value narrow) {
  OpBuilder::InsertionGuard guard(b);
  if (valid) {
    auto ifOp = scf::IfOp::create(b, loc, valid, /*withElseRegion=*/false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  }
  auto type = cast<VectorType>(narrow.getType());
  int64_t bytes = type.getNumElements() * type.getElementTypeBitWidth() / 8;
  vstore(narrow, mem, offset, std::min<int64_t>(bytes, 16));
}

Value RowKernelBuilder::loadScalar(Value mem, Type elem, Value index) {
  Value v = load(mem, index);
  return toF32(v);
}

// Sums over the block: addF combines the lanes' and the warps' partials.
SmallVector<Value> RowKernelBuilder::blockSums(SmallVector<Value> xs) {
  auto sum = [&](ArrayRef<Value> p, ArrayRef<Value> q, int64_t) {
    SmallVector<Value> r;
    for (auto [x, y] : llvm::zip(p, q))
      r.push_back(addF(x, y));
    return r;
  };
  return blockReduce(*this, reduction, std::move(xs), sum, sum);
}

// Mean and M2 (sum of squared deviations) of the block's values, each
// thread holding `perThread` of them with their mean and M2: Chan et al.'s
// pairwise update, which with equal counts is mean = (a + b) / 2,
// M2 = M2a + M2b + (b − a)²·n/2. As accurate as two passes over the data,
// with one barrier instead of two.
std::pair<Value, Value> RowKernelBuilder::blockMeanM2(Value mean, Value m2,
                                                      int64_t perThread) {
  auto pairwise = [&](ArrayRef<Value> p, ArrayRef<Value> q, int64_t level) {
    double n = (double)(perThread << level);
    Value d = subF(q[0], p[0]);
    // (p + q)·0.5 and M2p + M2q: the same bits on both lanes.
    Value m = mulF(addF(p[0], q[0]), f32c(0.5));
    Value s = addF(addF(p[1], q[1]), mulF(mulF(d, d), f32c(n / 2)));
    return SmallVector<Value>{m, s};
  };
  int64_t perWarp = perThread * kWarp;
  auto sequential = [&](ArrayRef<Value> acc, ArrayRef<Value> next, int64_t w) {
    // acc holds w warps, next one more.
    Value d = subF(next[0], acc[0]);
    Value m = addF(acc[0], mulF(d, f32c(1.0 / (double)(w + 1))));
    Value s = addF(addF(acc[1], next[1]),
                   mulF(mulF(d, d), f32c((double)w * perWarp / (w + 1))));
    return SmallVector<Value>{m, s};
  };
  SmallVector<Value> r =
      blockReduce(*this, reduction, {mean, m2}, pairwise, sequential);
  return {r[0], r[1]};
}

const SmallVector<Value> &RowKernelBuilder::chunksOf(Value v) {
  Val &val = vals[v];
  if (val.deferredFrom) {
    Type elem = cast<RankedTensorType>(v.getType()).getElementType();
    val.chunks = loadColumn(val.deferredFrom, elem, val.deferredLength);
    val.rawElem = elem;
    val.deferredFrom = Value();
  }
  widen(val);
  if (val.pendingFp8) {
    for (Value &c : val.chunks)
      c = roundTo(c, val.pendingFp8);
    val.pendingFp8 = Type();
  }
  return val.chunks;
}

Value RowKernelBuilder::ropeTable(graph::RopeOp rope) {
  int64_t dh =
      cast<RankedTensorType>(rope.getInput().getType()).getShape().back();
  int64_t half = dh / 2;
  SmallVector<float> table;
  double theta = rope.getTheta().convertToDouble();
  for (int64_t i = 0; i < half; ++i) {
    double inv = std::pow(theta, -2.0 * (double)i / (double)dh);
    if (rope.getScaling() == "llama3") {
      // Llama 3.1 frequency rescaling: long wavelengths slowed by `factor`,
      // short ones kept, a smooth blend between.
      double factor =
          rope.getFactor() ? rope.getFactor()->convertToDouble() : 8;
      double lowF = rope.getLowFreqFactor()
                        ? rope.getLowFreqFactor()->convertToDouble()
                        : 1;
      double highF = rope.getHighFreqFactor()
                         ? rope.getHighFreqFactor()->convertToDouble()
                         : 4;
      double orig = rope.getOriginalMaxPosition()
                        ? (double)*rope.getOriginalMaxPosition()
                        : 8192;
      double wavelen = 2 * M_PI / inv;
      double lowWave = orig / lowF, highWave = orig / highF;
      if (wavelen > lowWave) {
        inv = inv / factor;
      } else if (wavelen >= highWave) {
        double smooth = (orig / wavelen - lowF) / (highF - lowF);
        inv = (1 - smooth) * inv / factor + smooth * inv;
      }
    }
    table.push_back((float)inv);
  }
  std::string name = "rope_inv_freq_" + std::to_string(ropeTables++);
  return constantArray(
      *this, module, name,
      DenseElementsAttr::get(RankedTensorType::get({half}, f32),
                             ArrayRef<float>(table)));
}

void RowKernelBuilder::emitDispatch(
    ArrayRef<int64_t> starts, int64_t lo, int64_t hi, Value blockId,
    function_ref<void(int64_t, Value)> emitCase) {
  if (hi - lo == 1) {
    Value local = subI(blockId, idx(starts[lo]));
    emitCase(lo, local);
    return;
  }
  int64_t mid = (lo + hi) / 2;
  Value below = cmpI(arith::CmpIPredicate::ult, blockId, idx(starts[mid]));
  OpBuilder::InsertionGuard guard(b);
  auto ifOp = scf::IfOp::create(b, loc, below, /*withElseRegion=*/true);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  emitDispatch(starts, lo, mid, blockId, emitCase);
  b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  emitDispatch(starts, mid, hi, blockId, emitCase);
}

bool RowKernelBuilder::ownScalar(Value v) {
  if (!argTable || !isa<BlockArgument>(v) || !isScalarTensor(v))
    return false;
  return llvm::count_if(plan.segments, [&](const Segment &seg) {
           return seg.roles.count(v);
         }) == 1;
}

SmallVector<Value> RowKernelBuilder::segmentBuffers(const Segment &seg) {
  SmallVector<Value> buffers;
  for (auto [v, role] : seg.roles)
    if (tableIndex.count(v) &&
        !(isa<BlockArgument>(v) && isScalarTensor(v) && !ownScalar(v)))
      buffers.push_back(v);
  return buffers;
}

std::string RowKernelBuilder::classKey(const Segment &seg) {
  std::string text;
  llvm::raw_string_ostream os(text);
  DenseMap<Value, std::string> names;
  os << seg.loop << ";";
  for (auto [i, v] : llvm::enumerate(segmentBuffers(seg))) {
    names[v] = "b" + std::to_string(i);
    os << (int)seg.roles.lookup(v) << tableElem.lookup(v) << ",";
  }
  os << "\n";
  for (auto [i, op] : llvm::enumerate(seg.ops)) {
    os << op->getName() << "(";
    for (Value v : op->getOperands()) {
      if (auto it = names.find(v); it != names.end())
        os << it->second;
      else if (auto arg = dyn_cast<BlockArgument>(v))
        os << "a" << arg.getArgNumber(); // a scalar every segment reads
      else
        os << "?";
      os << ",";
    }
    os << ")";
    for (NamedAttribute a : op->getAttrs())
      if (a.getName() != "tensor" && a.getName() != "param")
        os << a.getName().getValue() << "=" << a.getValue() << ";";
    for (auto [r, v] : llvm::enumerate(op->getResults())) {
      os << getElementTypeOrSelf(v.getType()) << ",";
      names.try_emplace(v, "o" + std::to_string(i) + "." + std::to_string(r));
    }
    os << "\n";
  }
  return text;
}

void RowKernelBuilder::emitSegmentClasses(Value block) {
  // Classes in order of their first segment; a segment's record in the
  // segment table: its class, blocks, rows, elements and the argument
  // table entries of its buffers (in segmentBuffers order).
  constexpr int64_t kSizes = 4;
  llvm::MapVector<std::string, const Segment *, std::map<std::string, unsigned>>
      classes;
  SmallVector<int64_t> classOf;
  int64_t width = kSizes;
  for (const Segment &seg : plan.segments) {
    auto [it, added] = classes.insert({classKey(seg), &seg});
    classOf.push_back(std::distance(classes.begin(), it));
    width = std::max<int64_t>(width, kSizes + segmentBuffers(seg).size());
  }
  SmallVector<int64_t> starts, records;
  for (auto [s, seg] : llvm::enumerate(plan.segments)) {
    starts.push_back(seg.firstBlock);
    SmallVector<int64_t> record{classOf[s], seg.blocks, seg.rows,
                                seg.flatElements};
    for (Value v : segmentBuffers(seg))
      record.push_back(tableIndex.lookup(v));
    record.resize(width, 0);
    llvm::append_range(records, record);
  }
  auto i64Array = [&](StringRef name, ArrayRef<int64_t> values) {
    auto type = RankedTensorType::get({(int64_t)values.size()}, b.getI64Type());
    return constantArray(*this, module, name,
                         DenseElementsAttr::get(type, values));
  };
  Value startOf = i64Array("segment_starts", starts);
  Value recordOf = i64Array("segment_records", records);
  auto at = [&](Value array, Value i) { return indexCast(load(array, i)); };

  // The last segment that starts at or before the block: lo stays at or
  // before it, hi past it.
  int64_t n = starts.size(), steps = llvm::Log2_64_Ceil(n);
  ValueRange bounds = forLoop(
      idx(0), idx(steps), 1, ValueRange{idx(0), idx(n)},
      [&](Value, ValueRange lh) -> SmallVector<Value> {
        Value mid = divUI(addI(lh[0], lh[1]), 2);
        Value below = cmpI(arith::CmpIPredicate::ule, at(startOf, mid), block);
        return {select(below, mid, lh[0]), select(below, lh[1], mid)};
      });
  Value s = bounds[0];
  Value record = mulI(s, width);
  auto field = [&](int64_t k) { return at(recordOf, addI(record, k)); };
  Value cls = field(0);
  Value local = subI(block, at(startOf, s));
  for (auto [c, entry] : llvm::enumerate(classes)) {
    const Segment &seg = *entry.second;
    auto emitClass = [&] {
      segBlocks = field(1);
      segRows = field(2);
      segFlatElements = field(3);
      classEntry.clear();
      for (auto [k, v] : llvm::enumerate(segmentBuffers(seg)))
        classEntry[v] = field(kSizes + k);
      for (Value v : segmentBuffers(seg))
        if (ownScalar(v))
          vals[v].scalar = loadScalar(mem(v), tableElem.lookup(v), idx(0));
      emitSegment(seg, local);
      classEntry.clear();
      segFlatElements = Value();
    };
    if (classes.size() == 1)
      emitClass();
    else
      ifThen(cmpI(arith::CmpIPredicate::eq, cls, idx(c)), emitClass);
  }
}

gpu::GPUFuncOp RowKernelBuilder::buildMain(gpu::GPUModuleOp mod,
                                           StringRef name) {
  module = mod;
  OpBuilder::InsertionGuard guard(b);
  auto sharedType = MemRefType::get({kReduceFloats + 2 * plan.ropeHalf}, f32,
                                    MemRefLayoutAttrInterface(),
                                    b.getI64IntegerAttr(kSharedSpace));
  SmallVector<Type> workgroup{sharedType};
  if (plan.parkBytes)
    workgroup.push_back(MemRefType::get({plan.parkBytes}, b.getI8Type(),
                                        MemRefLayoutAttrInterface(),
                                        b.getI64IntegerAttr(kSharedSpace)));
  gpu::GPUFuncOp func =
      createKernel(b, loc, mod, name, argumentTypes(), workgroup, plan.threads);
  // Memory-bound: ask for enough resident blocks to keep bytes in flight
  // (ptxas caps registers to fit them). Kernels that loop over rows get
  // exactly the blocks they launch per SM, so the grid is one wave.
  // Kernels that loop over rows launch columnBlocksPerSM blocks per SM:
  // capping registers so that they all fit keeps the grid one wave (measured
  // on an H200: RMSNorm backward 57% → 75% of copy bandwidth). Capping the
  // one-block-per-row kernels as well made ptxas spill and lost 4-5%.
  if (plan.blocksPerSM)
    func->setAttr("nvvm.minctasm", b.getI32IntegerAttr(plan.blocksPerSM));
  // 16-byte vector reads of the RoPE angle table need an aligned buffer.
  func.setWorkgroupAttributionAttr(0, b.getStringAttr("llvm.align"),
                                   b.getI64IntegerAttr(16));

  Block &body = fused.getBodyBlock();
  bindArguments(func);
  shared = func.getWorkgroupAttributions().front();
  if (plan.parkBytes) {
    parked = func.getWorkgroupAttributions()[1];
    // 8-byte accesses of the parked groups.
    func.setWorkgroupAttributionAttr(1, b.getStringAttr("llvm.align"),
                                     b.getI64IntegerAttr(16));
  }
  // The entry block's arguments end with the workgroup buffer: index the
  // workspace by the signature.
  if (plan.workspaceFloats)
    workspace = func.getArgument(func.getFunctionType().getNumInputs() - 1);

  // A launch follows (column sums, transposes): it may start as soon as
  // every block of this one has, and waits for this one's results itself.
  if (plan.workspaceFloats || !plan.transposes.empty())
    asmVoid("griddepcontrol.launch_dependents;", "", {});

  tid = threadId();
  tid8 = mulI(tid, idx(vec));
  reduction.shared = shared;
  reduction.lane = remUI(tid, idx(kWarp));
  reduction.warp = divUI(tid, idx(kWarp));
  Value block = blockId();

  // Scalars (scales, learning rate, step) are read once per thread.
  // A segment class's own scalars (an FP8 weight's scale) are read in its
  // code.
  for (BlockArgument arg : body.getArguments())
    if (isScalarTensor(arg) && !arg.use_empty() && !ownScalar(arg))
      vals[arg].scalar = loadScalar(
          mem(arg), cast<RankedTensorType>(arg.getType()).getElementType(),
          idx(0));

  // The tiled transposes' tensorwise scales: a one-element copy.
  for (const Segment &seg : plan.segments)
    for (fp8::TransposeOp t : seg.tiled) {
      if (!inMemory(t.getResultScale()))
        continue;
      ifThen(andI(cmpI(arith::CmpIPredicate::eq, block, idx(0)),
                  cmpI(arith::CmpIPredicate::eq, tid, idx(0))),
             [&] {
               Value scale = load(mem(t.getScale()), idx(0));
               store(scale, mem(t.getResultScale()), idx(0));
             });
    }

  if (argTable) {
    emitSegmentClasses(block);
    return func;
  }
  SmallVector<int64_t> starts;
  for (const Segment &seg : plan.segments)
    starts.push_back(seg.firstBlock);
  emitDispatch(starts, 0, starts.size(), block, [&](int64_t s, Value local) {
    emitSegment(plan.segments[s], local);
  });
  return func;
}

void RowKernelBuilder::bindArguments(gpu::GPUFuncOp func) {
  memOf.clear();
  Block &body = fused.getBodyBlock();
  if (argTable) {
    // Inputs then results, as the argument table lists them; a result
    // that is also an input keeps the input's entry.
    table = func.getArgument(0);
    SmallVector<Type> types = bufferTypes();
    SmallVector<Value> values(body.getArguments());
    llvm::append_range(values,
                       cast<kernel::YieldOp>(body.getTerminator()).getValues());
    for (auto [i, v] : llvm::enumerate(values))
      if (tableIndex.try_emplace(v, i).second)
        tableElem[v] = cast<MemRefType>(types[i]).getElementType();
    return;
  }
  unsigned numInputs = body.getNumArguments();
  for (auto [i, arg] : llvm::enumerate(body.getArguments()))
    memOf[arg] = func.getArgument(i);
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    if (!memOf.count(v))
      memOf[v] = func.getArgument(numInputs + i);
}

gpu::GPUFuncOp RowKernelBuilder::createFollowingKernel(gpu::GPUModuleOp mod,
                                                       StringRef name,
                                                       int64_t threads,
                                                       TypeRange workgroup) {
  module = mod;
  gpu::GPUFuncOp func =
      createKernel(b, loc, mod, name, argumentTypes(), workgroup, threads);
  // These kernels follow the row kernel, launched as its programmatic
  // dependent so that their launch overlaps its last blocks: nothing of its
  // output is read before it has finished. Launched plainly, the wait
  // returns at once.
  asmVoid("griddepcontrol.wait;", "~{memory}", {});
  bindArguments(func);
  return func;
}

void RowKernelBuilder::emitSegment(const Segment &seg, Value localBlock) {
  for (auto [v, len] : seg.length)
    lengthOf[v] = len;
  if (!segRows) {
    segRows = idx(seg.rows);
    segBlocks = idx(seg.blocks);
  }
  int64_t numChunkAccs = 0;
  for (Value v : seg.columnSums)
    numChunkAccs += ceilDiv(seg.length.lookup(v), plan.threads * vec);
  SmallVector<Value> inits;
  for (int64_t i = 0; i < numChunkAccs; ++i)
    inits.push_back(chunkConst(0.0));
  for (size_t i = 0; i < seg.amaxes.size(); ++i)
    inits.push_back(f32c(0.0));

  SmallVector<Value> accs;
  columns.clear();
  if (seg.tileRows) {
    accs = inits;
    emitTiledRows(seg, localBlock, accs);
  } else if (!seg.loop) {
    accs = emitRow(seg, localBlock, inits, loadRow(seg, localBlock));
  } else {
    // Every row reads the same columns (norm weights): once per block when
    // the block also holds column sums (its registers are sized for it);
    // persistent row kernels read them per row (L1 hits) to keep registers
    // for more resident blocks.
    if (seg.sumsColumns)
      loadColumns(seg);
    // Software pipelining: row r + blocks is loaded (as stored, narrow)
    // before row r is computed, so a block keeps its next row in flight
    // through the reductions and the stores of this one.
    size_t numAccs = inits.size();
    SmallVector<Value> carried = inits;
    llvm::append_range(carried, loadRow(seg, localBlock));
    auto forOp = scf::ForOp::create(
        b, loc, localBlock, segRows, segBlocks, carried,
        [&](OpBuilder &, Location, Value row, ValueRange iterArgs) {
          Value next = addI(row, segBlocks);
          Value more = cmpI(arith::CmpIPredicate::ult, next, segRows);
          SmallVector<Type> rawTypes;
          for (Value v : iterArgs.drop_front(numAccs))
            rawTypes.push_back(v.getType());
          // Nothing to prefetch when the segment reads no rows (a fill).
          scf::IfOp ifOp;
          if (!rawTypes.empty()) {
            ifOp = scf::IfOp::create(b, loc, rawTypes, more,
                                     /*withElseRegion=*/true);
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPointToStart(ifOp.thenBlock());
            scf::YieldOp::create(b, loc, loadRow(seg, next));
            b.setInsertionPointToStart(ifOp.elseBlock());
            // Past the last row: the values are never read.
            scf::YieldOp::create(b, loc, iterArgs.drop_front(numAccs));
          }
          SmallVector<Value> out =
              emitRow(seg, row, iterArgs.take_front(numAccs),
                      iterArgs.drop_front(numAccs));
          // The next row's reductions reuse the shared slots.
          barrier();
          if (ifOp)
            llvm::append_range(out, ifOp.getResults());
          scf::YieldOp::create(b, loc, out);
        });
    accs.assign(forOp.getResults().begin(),
                forOp.getResults().begin() + numAccs);
  }

  // Column sums: this block's partial row into the workspace.
  int64_t a = 0;
  for (Value v : seg.columnSums) {
    int64_t len = seg.length.lookup(v);
    Value wsArg = workspace;
    Value rowStart =
        addI(idx(plan.workspaceOffset.lookup(v)), mulI(localBlock, idx(len)));
    for (int64_t c = 0, e = ceilDiv(len, plan.threads * vec); c < e; ++c) {
      Value off = addI(rowStart, chunkBase(c));
      storeChunk(wsArg, f32, off, chunkValid(seg, len, c, Value()), accs[a++]);
    }
  }
  // Whole-tensor maxima: one atomic per block. The values are non-negative
  // (or NaN, whose bits exceed every finite value's), so an unsigned integer
  // max of the float bits is the float max.
  for (Value v : seg.amaxes) {
    Value m = blockMax(*this, reduction, accs[a++]);
    if (!inMemory(v))
      continue;
    Value bits = bitcast(b.getI32Type(), m);
    ifThen(cmpI(arith::CmpIPredicate::eq, tid, idx(0)),
           [&] { atomicMaxU(bits, mem(v), idx(0)); });
  }
  segRows = segBlocks = Value();
}

// The segment's row inputs, in role order: every chunk as stored (narrow),
// converted where first used.
SmallVector<Value> RowKernelBuilder::loadRow(const Segment &seg, Value row) {
  SmallVector<Value> raw;
  int64_t span = plan.threads * vec;
  for (auto [v, role] : seg.roles) {
    if (!isa<BlockArgument>(v) || role != Role::Row)
      continue;
    Type elem = cast<RankedTensorType>(v.getType()).getElementType();
    int64_t len = seg.length.lookup(v);
    Value rowStart = mulI(row, idx(len));
    for (int64_t c = 0, e = ceilDiv(len, span); c < e; ++c)
      raw.push_back(loadChunk(mem(v), elem,
                              addI(rowStart, chunkBase(c)),
                              chunkValid(seg, len, c, rowStart)));
  }
  return raw;
}

SmallVector<Value> RowKernelBuilder::loadColumn(Value mem, Type elem,
                                                int64_t len) {
  SmallVector<Value> chunks;
  for (int64_t c = 0, e = ceilDiv(len, plan.threads * vec); c < e; ++c) {
    Value valid;
    if ((c + 1) * plan.threads * vec > len)
      valid = cmpI(arith::CmpIPredicate::ult, chunkBase(c), idx(len));
    chunks.push_back(loadChunk(mem, elem, chunkBase(c), valid));
  }
  return chunks;
}

void RowKernelBuilder::loadColumns(const Segment &seg) {
  for (auto [v, role] : seg.roles) {
    if (!isa<BlockArgument>(v) || role != Role::Column)
      continue;
    Val val;
    val.rawElem = cast<RankedTensorType>(v.getType()).getElementType();
    val.chunks = loadColumn(mem(v), val.rawElem, seg.length.lookup(v));
    columns[v] = val;
  }
}

SmallVector<Value>
RowKernelBuilder::emitRow(const Segment &seg, Value row, ValueRange accsIn,
                          ValueRange raw,
                          DenseMap<Value, SmallVector<Value>> *stored) {
  SmallVector<Value> accs(accsIn.begin(), accsIn.end());
  anglesFor = nullptr;
  DenseMap<Value, int> accIdx;
  int a = 0;
  for (Value v : seg.columnSums) {
    accIdx[v] = a;
    a += ceilDiv(seg.length.lookup(v), plan.threads * vec);
  }
  for (Value v : seg.amaxes)
    accIdx[v] = a++;

  int64_t span = plan.threads * vec;
  // The row's inputs were loaded (all chunks at once, so the whole row is in
  // flight before the first use); per-row scalars are read here.
  size_t r = 0;
  for (auto [v, role] : seg.roles) {
    if (!isa<BlockArgument>(v) || role == Role::Scalar)
      continue;
    Type elem = cast<RankedTensorType>(v.getType()).getElementType();
    if (role == Role::PerRow) {
      vals[v].scalar = loadScalar(mem(v), elem, row);
    } else if (role == Role::Column) {
      if (columns.count(v)) {
        vals[v] = columns.lookup(v);
      } else {
        Val val;
        val.deferredFrom = mem(v);
        val.deferredLength = seg.length.lookup(v);
        vals[v] = val;
      }
    } else if (role == Role::Row) {
      Val val;
      val.rawElem = elem;
      int64_t n = ceilDiv(seg.length.lookup(v), span);
      val.chunks.assign(raw.begin() + r, raw.begin() + r + n);
      r += n;
      vals[v] = val;
    }
  }

  currentRow = row;
  for (Operation *op : seg.ops)
    if (failed(emitOp(seg, op, accs, accIdx)))
      return accs;

  // Results of this segment, in yield order.
  auto yield = cast<kernel::YieldOp>(fused.getBodyBlock().getTerminator());
  for (Value v : yield.getValues()) {
    if (!seg.roles.count(v) || seg.roles.lookup(v) != Role::Row ||
        isa<BlockArgument>(v))
      continue;
    int64_t len = seg.length.lookup(v);
    Type elem = cast<RankedTensorType>(v.getType()).getElementType();
    Val &val = vals[v];
    widen(val);
    Value rowStart = mulI(row, idx(len));
    bool keep = stored && llvm::any_of(seg.tiled, [&](fp8::TransposeOp t) {
                  return t.getInput() == v;
                });
    for (auto [c, chunk] : llvm::enumerate(val.chunks)) {
      Value off = addI(rowStart, chunkBase(c));
      Value valid = chunkValid(seg, len, c, rowStart);
      if (!keep) {
        storeChunk(mem(v), elem, off, valid, chunk);
        continue;
      }
      Value narrow = fromF32(chunk, elem);
      storeNarrow(mem(v), off, valid, narrow);
      (*stored)[v].push_back(narrow);
    }
  }
  return accs;
}

FailureOr<SmallVector<int64_t>>
buildRowKernels(kernel::FusedOp fused, const KernelPlan &plan, OpBuilder &b,
                gpu::GPUModuleOp mod, StringRef sym, LaunchList &launches) {
  SmallVector<int64_t> zeroed;
  auto yield = cast<kernel::YieldOp>(fused.getBodyBlock().getTerminator());
  for (auto [i, v] : llvm::enumerate(yield.getValues())) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return fused.emitOpError("yields its operand #")
             << arg.getArgNumber()
             << " unchanged; a kernel result must be computed";
    for (const Segment &seg : plan.segments)
      if (seg.roles.count(v) && seg.roles.lookup(v) == Role::Amax)
        zeroed.push_back(i);
  }

  bool argTable = RowKernelBuilder::usesArgTable(fused, plan);
  RowKernelBuilder kb(fused, plan, b, argTable);
  fp8::QuantizeOp quantizeInTranspose = kb.quantizeInTranspose();
  // A transpose of a quantize that no result keeps row-major is planned
  // only where the transpose launch quantizes it (castsInTransposeLaunch).
  assert(llvm::all_of(plan.transposes,
                      [&](fp8::TransposeOp t) {
                        return isa<BlockArgument>(t.getInput()) ||
                               llvm::is_contained(yield.getValues(),
                                                  t.getInput()) ||
                               (quantizeInTranspose &&
                                t.getInput() == quantizeInTranspose.getResult());
                      }) &&
         "a transpose of a tensor nothing writes");
  if (argTable)
    launches.useArgTable();
  // The launch after the row kernel is its programmatic dependent (H100,
  // llama3-8b LayerNorm backward: 79.0-79.8% -> 80.0-80.4% of copy).
  bool rowKernel = !plan.segments.empty() && !quantizeInTranspose;
  if (rowKernel)
    launches.add(kb.buildMain(mod, sym).getName(), plan.totalBlocks,
                 plan.threads);
  bool columnSums = !plan.workspaceOffset.empty();
  if (columnSums && !plan.transposes.empty()) {
    int64_t grid = 0;
    gpu::GPUFuncOp f = kb.buildColumnSumAndTransposes(
        mod, (sym + "_colsum_transpose").str(), grid);
    launches.add(f.getName(), grid, kTransposeThreads, 0, 1, rowKernel);
  } else if (columnSums) {
    gpu::GPUFuncOp f = kb.buildColumnSum(mod, (sym + "_colsum").str());
    launches.add(f.getName(), kb.columnSumBlocks(), kColumnSumThreads, 0, 1,
                 rowKernel);
  } else if (!plan.transposes.empty()) {
    int64_t grid = 0;
    gpu::GPUFuncOp f = kb.buildTransposes(mod, (sym + "_transpose").str(), grid,
                                          quantizeInTranspose);
    launches.add(f.getName(), grid, kTransposeThreads, 0, 1, rowKernel);
  }
  return zeroed;
}

} // namespace octet::codegen
