// octet-fused-to-gpu: one gpu.func per kernel.fused region.
//
// The kernel model. A region splits into segments: groups of ops connected
// through non-scalar tensors (one per parameter in an AdamW multi-tensor
// kernel, usually one otherwise). Each segment is a set of rows: a token for
// norms, RoPE and activations, or a fixed slice of a flattened tensor when
// nothing in the segment needs row structure. A block owns a row; its T
// threads hold the row in registers as 8-element f32 vectors, thread t owning
// elements [c·8T + 8t, c·8T + 8t + 8) of chunk c, so every load and store is
// a 16-byte (bf16) access and a warp touches 512 contiguous bytes. Blocks are
// dealt out to segments by fixed block ranges.
//
// Values are carried as f32 and rounded to each op's result type after the
// op (bf16/f16 results are rounded at once, FP8 ones when first read or
// stored), which is what the interpreter does op by op.

#include "compiler/Codegen/Passes.h"

#include "dialects/fp8/Fp8Dialect.h"
#include "dialects/graph/GraphDialect.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

namespace octet::codegen {
#define GEN_PASS_DEF_FUSEDTOGPU
#include "compiler/Codegen/Passes.h.inc"
} // namespace octet::codegen

using namespace mlir;

namespace octet::codegen {
namespace {

constexpr int64_t kVec = 8;       // elements per thread access
constexpr int64_t kWarp = 32;
constexpr int64_t kMaxChunks = 16; // 8·16 = 128 registers per row tensor
constexpr unsigned kGlobalSpace = 1;
constexpr unsigned kSharedSpace = 3;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t numElements(Type t) {
  return cast<RankedTensorType>(t).getNumElements();
}

bool isScalarTensor(Value v) {
  return cast<RankedTensorType>(v.getType()).getRank() == 0;
}

enum class Role { Row, Column, PerRow, Scalar, ColumnSum, Amax };

// How a segment's rows are laid out and which blocks run it.
struct Segment {
  SmallVector<Operation *> ops;
  llvm::MapVector<Value, Role> roles;
  DenseMap<Value, int64_t> length; // row length (Row, Column, ColumnSum)
  bool flat = false;               // rows are slices of a flattened tensor
  int64_t flatElements = 0;
  int64_t rows = 0;
  int64_t blocks = 0;
  bool loop = false; // blocks loop over rows (column sums need it)
  int64_t firstBlock = 0;
  SmallVector<Value> columnSums; // in accumulator order
  SmallVector<Value> amaxes;     // in accumulator order
};

struct Plan {
  SmallVector<Segment, 0> segments;
  int64_t threads = 0;
  int64_t totalBlocks = 0;
  int64_t workspaceFloats = 0;
  int64_t ropeHalf = 0; // largest RoPE half head size: angle table in smem
  int64_t columnBlocksPerSM = 3;
  DenseMap<Value, int64_t> workspaceOffset; // per ColumnSum value
  DenseMap<Value, int64_t> workspaceRows;
};

// Operand and result roles that the op's semantics fix; everything else is
// a row tensor (or a scalar when 0-d).
void assignRoles(Operation *op, Segment &seg) {
  auto set = [&](Value v, Role r) { seg.roles[v] = r; };
  for (Value v : op->getOperands())
    if (!seg.roles.count(v))
      seg.roles[v] = isScalarTensor(v) ? Role::Scalar : Role::Row;
  for (Value v : op->getResults())
    seg.roles[v] = isScalarTensor(v) ? Role::Scalar : Role::Row;
  if (auto n = dyn_cast<graph::RMSNormOp>(op)) {
    set(n.getWeight(), Role::Column);
  } else if (auto n = dyn_cast<graph::LayerNormOp>(op)) {
    set(n.getWeight(), Role::Column);
    set(n.getBias(), Role::Column);
  } else if (auto g = dyn_cast<graph::RMSNormGradOp>(op)) {
    set(g.getWeight(), Role::Column);
    set(g.getWeightGrad(), Role::ColumnSum);
  } else if (auto g = dyn_cast<graph::LayerNormGradOp>(op)) {
    set(g.getWeight(), Role::Column);
    set(g.getWeightGrad(), Role::ColumnSum);
    set(g.getBiasGrad(), Role::ColumnSum);
  } else if (auto g = dyn_cast<graph::BiasGradOp>(op)) {
    set(g.getResult(), Role::ColumnSum);
  } else if (auto r = dyn_cast<graph::RopeOp>(op)) {
    set(r.getPositions(), Role::PerRow);
  } else if (auto q = dyn_cast<fp8::QuantizeOp>(op)) {
    set(q.getAmax(), Role::Amax);
  } else if (auto a = dyn_cast<fp8::AmaxOp>(op)) {
    set(a.getResult(), Role::Amax);
  }
}

bool needsRows(Operation *op) {
  return isa<graph::RMSNormOp, graph::LayerNormOp, graph::RMSNormGradOp,
             graph::LayerNormGradOp, graph::BiasGradOp, graph::RopeOp>(op);
}

bool isSupported(Operation *op) {
  return isa<graph::AddOp, graph::MulOp, graph::SiluOp, graph::GeluOp,
             graph::SwigluOp, graph::CastOp, graph::ReshapeOp, graph::SaveOp,
             graph::SiluGradOp, graph::GeluGradOp, graph::SwigluGradOp,
             graph::RMSNormOp, graph::LayerNormOp, graph::RMSNormGradOp,
             graph::LayerNormGradOp, graph::BiasGradOp, graph::RopeOp,
             graph::AdamWUpdateOp, fp8::QuantizeOp, fp8::DequantizeOp,
             fp8::AmaxOp>(op);
}

// Splits the body into segments and fixes every size. Errors name the op.
FailureOr<Plan> planKernel(kernel::FusedOp fused, int64_t numSMs,
                           int64_t columnBlocksPerSM) {
  Block &body = fused.getBodyBlock();
  llvm::EquivalenceClasses<Operation *> classes;
  DenseMap<Value, Operation *> firstUser;
  for (Operation &op : body.without_terminator()) {
    if (!isSupported(&op))
      return op.emitOpError("has no GPU lowering in octet-fused-to-gpu"),
             failure();
    classes.insert(&op);
    auto link = [&](Value v) {
      if (isScalarTensor(v))
        return;
      auto [it, inserted] = firstUser.try_emplace(v, &op);
      if (!inserted)
        classes.unionSets(it->second, &op);
    };
    for (Value v : op.getOperands())
      link(v);
    for (Value v : op.getResults())
      link(v);
  }
  Plan plan;
  plan.columnBlocksPerSM = columnBlocksPerSM;
  DenseMap<Operation *, size_t> segmentOf;
  for (Operation &op : body.without_terminator()) {
    Operation *leader = classes.getLeaderValue(&op);
    auto [it, inserted] = segmentOf.try_emplace(leader, plan.segments.size());
    if (inserted)
      plan.segments.emplace_back();
    plan.segments[it->second].ops.push_back(&op);
  }

  // Rows first, threads second: the thread count is shared by the kernel.
  for (Segment &seg : plan.segments) {
    bool rowOps = false;
    graph::RopeOp rope;
    for (Operation *op : seg.ops) {
      assignRoles(op, seg);
      rowOps |= needsRows(op);
      if (auto r = dyn_cast<graph::RopeOp>(op))
        rope = r;
    }
    Value primary;
    for (auto [v, role] : seg.roles)
      if (role == Role::Row &&
          (!primary || cast<RankedTensorType>(v.getType()).getRank() >
                           cast<RankedTensorType>(primary.getType()).getRank()))
        primary = v;
    if (!primary)
      return seg.ops.front()->emitOpError("has no row tensor to lay out"),
             failure();
    auto primaryType = cast<RankedTensorType>(primary.getType());
    if (!primaryType.hasStaticShape())
      return seg.ops.front()->emitOpError(
                 "needs static shapes for GPU codegen"),
             failure();
    if (!rowOps) {
      seg.flat = true;
      seg.flatElements = primaryType.getNumElements();
      for (auto [v, role] : seg.roles)
        if (role == Role::Row && numElements(v.getType()) != seg.flatElements)
          return seg.ops.front()->emitOpError(
                     "mixes element counts in one elementwise group"),
                 failure();
      if (seg.flatElements % kVec)
        return seg.ops.front()->emitOpError("element count must be a multiple "
                                            "of 8 for 16-byte accesses"),
               failure();
      continue;
    }
    int64_t rowRank =
        rope ? cast<RankedTensorType>(rope.getPositions().getType()).getRank()
             : primaryType.getRank() - 1;
    ArrayRef<int64_t> lead = primaryType.getShape().take_front(rowRank);
    seg.rows = 1;
    for (int64_t d : lead)
      seg.rows *= d;
    for (auto [v, role] : seg.roles) {
      auto t = cast<RankedTensorType>(v.getType());
      if (role == Role::Row) {
        if (t.getNumElements() % seg.rows)
          return seg.ops.front()->emitOpError("tensor ")
                     << t << " does not split into " << seg.rows << " rows",
                 failure();
        seg.length[v] = t.getNumElements() / seg.rows;
      } else if (role == Role::Column || role == Role::ColumnSum) {
        seg.length[v] = t.getNumElements();
      } else if (role == Role::PerRow && t.getNumElements() != seg.rows) {
        return seg.ops.front()->emitOpError("per-row tensor ")
                   << t << " does not have " << seg.rows << " elements",
               failure();
      }
      if (seg.length.count(v) && seg.length[v] % kVec)
        return seg.ops.front()->emitOpError("row length ")
                   << seg.length[v]
                   << " must be a multiple of 8 for 16-byte accesses",
               failure();
      if (role == Role::ColumnSum)
        seg.loop = true;
    }
  }

  int64_t threads = 0;
  for (Segment &seg : plan.segments) {
    if (seg.flat)
      continue;
    int64_t longest = 0;
    for (auto [v, len] : seg.length)
      longest = std::max(longest, len);
    // About four 8-element chunks per thread keeps 64 bytes of each bf16
    // input in flight per thread without crowding registers.
    int64_t want = llvm::alignTo(ceilDiv(longest, kVec * 4), kWarp);
    threads = std::max(threads, std::clamp<int64_t>(want, kWarp, 1024));
  }
  if (threads == 0)
    threads = 256;
  plan.threads = threads;
  int64_t span = threads * kVec;

  int64_t block = 0;
  for (Segment &seg : plan.segments) {
    if (seg.flat) {
      int64_t len = span * 2;
      seg.rows = ceilDiv(seg.flatElements, len);
      for (auto [v, role] : seg.roles)
        if (role == Role::Row)
          seg.length[v] = len;
    }
    for (auto [v, len] : seg.length)
      if (ceilDiv(len, span) > kMaxChunks)
        return seg.ops.front()->emitOpError("row of ")
                   << len << " elements is too long for a register-resident "
                   << "row kernel (at most " << span * kMaxChunks << ")",
               failure();
    for (Operation *op : seg.ops)
      if (auto rope = dyn_cast<graph::RopeOp>(op)) {
        int64_t dh = cast<RankedTensorType>(rope.getInput().getType())
                         .getShape()
                         .back();
        int64_t half = dh / 2;
        bool sameThread = half % span == 0;
        bool inWarp = span % dh == 0 && half % kVec == 0 &&
                      half / kVec < kWarp && llvm::isPowerOf2_64(half / kVec);
        if (dh % 2 || (!sameThread && !inWarp))
          return rope.emitOpError("head size ")
                     << dh << " does not fit the row layout (" << threads
                     << " threads of 8 elements)",
                 failure();
        plan.ropeHalf = std::max(plan.ropeHalf, half);
      }
    seg.blocks =
        seg.loop ? std::min(seg.rows, numSMs * columnBlocksPerSM) : seg.rows;
    seg.firstBlock = block;
    block += seg.blocks;
    for (auto [v, role] : seg.roles) {
      if (role == Role::ColumnSum) {
        seg.columnSums.push_back(v);
        plan.workspaceOffset[v] = plan.workspaceFloats;
        plan.workspaceRows[v] = seg.blocks;
        plan.workspaceFloats += seg.blocks * seg.length[v];
      } else if (role == Role::Amax) {
        seg.amaxes.push_back(v);
      }
    }
  }
  plan.totalBlocks = block;
  return plan;
}

std::string symbolFor(StringRef name) {
  std::string s;
  for (char c : name)
    s.push_back(llvm::isAlnum(c) ? c : '_');
  if (s.empty() || llvm::isDigit(s[0]))
    s.insert(s.begin(), 'k');
  return s;
}

// A value as the threads of a block hold it.
struct Val {
  SmallVector<Value> chunks; // vector<8xf32>, Row/Column values
  Value scalar;              // f32: Scalar and PerRow values
  Type pendingFp8;           // chunks still need rounding to this FP8 type
};

class KernelBuilder {
public:
  KernelBuilder(kernel::FusedOp fused, const Plan &plan, OpBuilder &b)
      : fused(fused), plan(plan), b(b), loc(fused.getLoc()) {
    f32 = b.getF32Type();
    vecType = VectorType::get({kVec}, f32);
  }

  gpu::GPUFuncOp buildMain(gpu::GPUModuleOp module, StringRef name);
  gpu::GPUFuncOp buildColumnSum(gpu::GPUModuleOp module, StringRef name);

private:
  // Kernel arguments: inputs, results, then the workspace.
  SmallVector<Type> argumentTypes();
  Type memrefFor(Value tensorValue, bool atomicMax);

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value f32c(double v) {
    return arith::ConstantOp::create(b, loc, f32, b.getF32FloatAttr(v));
  }
  Value splat(double v) {
    return arith::ConstantOp::create(
        b, loc, vecType, DenseElementsAttr::get(vecType, (float)v));
  }
  Value bcast(Value s) { return vector::BroadcastOp::create(b, loc, vecType, s); }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value sigmoid(Value x) {
    Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
    return div(splat(1.0), add(splat(1.0), e));
  }

  Value toF32(Value v);
  Value fromF32(Value v, Type elem);
  Value roundTo(Value v, Type elem);

  // Chunk c of a row of `len` elements: this thread's first element, and
  // whether it lies inside the row (null when it always does).
  Value chunkBase(int64_t c) {
    return arith::AddIOp::create(b, loc, idx(c * plan.threads * kVec), tid8);
  }
  Value chunkValid(const Segment &seg, int64_t len, int64_t c, Value rowStart);

  Value loadChunk(Value mem, Type elem, Value offset, Value valid);
  void storeChunk(Value mem, Type elem, Value offset, Value valid, Value v,
                  Type pendingFp8);
  Value loadScalar(Value mem, Type elem, Value index);

  // Sum or max over the block; every thread gets the result.
  Value blockReduce(Value x, bool isMax);

  const SmallVector<Value> &chunksOf(Value v);
  Value scalarOf(Value v) { return vals[v].scalar; }

  void emitSegment(const Segment &seg, Value localBlock);
  SmallVector<Value> emitRow(const Segment &seg, Value row, ValueRange accs);
  LogicalResult emitOp(const Segment &seg, Operation *op, Value row,
                       SmallVector<Value> &accs, DenseMap<Value, int> &accIdx);
  void emitDispatch(ArrayRef<int64_t> starts, int64_t lo, int64_t hi,
                    Value blockId,
                    function_ref<void(int64_t, Value)> emitCase);
  Value ropeTable(graph::RopeOp rope);

  kernel::FusedOp fused;
  const Plan &plan;
  OpBuilder &b;
  Location loc;
  Type f32;
  VectorType vecType;
  gpu::GPUModuleOp module;
  Value tid, tid8, lane, warp, shared, workspace;
  int reduceSlot = 0;
  DenseMap<Value, Value> memOf; // region value → kernel argument
  DenseMap<Value, Val> vals;
  DenseMap<Value, int64_t> lengthOf;
  int ropeTables = 0;
  // Which RoPE angles the shared table holds in the current row.
  Operation *anglesFor = nullptr;
};

Type KernelBuilder::memrefFor(Value v, bool atomicMax) {
  auto t = cast<RankedTensorType>(v.getType());
  Type elem = atomicMax ? b.getI32Type() : t.getElementType();
  return MemRefType::get({std::max<int64_t>(t.getNumElements(), 1)}, elem,
                         MemRefLayoutAttrInterface(),
                         b.getI64IntegerAttr(kGlobalSpace));
}

SmallVector<Type> KernelBuilder::argumentTypes() {
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
  if (plan.workspaceFloats)
    types.push_back(MemRefType::get({plan.workspaceFloats}, f32,
                                    MemRefLayoutAttrInterface(),
                                    b.getI64IntegerAttr(kGlobalSpace)));
  return types;
}

Value KernelBuilder::toF32(Value v) {
  Type elem = getElementTypeOrSelf(v.getType());
  if (elem.isF32())
    return v;
  Type target = isa<VectorType>(v.getType()) ? Type(vecType) : f32;
  if (isa<FloatType>(elem))
    return arith::ExtFOp::create(b, loc, target, v);
  return arith::SIToFPOp::create(b, loc, target, v);
}

Value KernelBuilder::fromF32(Value v, Type elem) {
  if (elem.isF32())
    return v;
  Type target = elem;
  if (auto vt = dyn_cast<VectorType>(v.getType()))
    target = vt.clone(elem);
  return arith::TruncFOp::create(b, loc, target, v);
}

Value KernelBuilder::roundTo(Value v, Type elem) {
  if (elem.isF32())
    return v;
  return toF32(fromF32(v, elem));
}

Value KernelBuilder::chunkValid(const Segment &seg, int64_t len, int64_t c,
                                Value rowStart) {
  int64_t span = plan.threads * kVec;
  Value valid;
  Value base = chunkBase(c);
  if ((c + 1) * span > len)
    valid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, base,
                                  idx(len));
  if (seg.flat && seg.flatElements % len && rowStart) {
    Value global = arith::AddIOp::create(b, loc, rowStart, base);
    Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                         global, idx(seg.flatElements));
    valid = valid ? arith::AndIOp::create(b, loc, valid, inside) : inside;
  }
  return valid;
}

Value KernelBuilder::loadChunk(Value mem, Type elem, Value offset,
                               Value valid) {
  // Invalid lanes read element 0 and are replaced by zeros: no branch, and
  // zeros are neutral for the sums and maxima that follow.
  if (valid)
    offset = arith::SelectOp::create(b, loc, valid, offset, idx(0));
  auto type = VectorType::get({kVec}, elem);
  int64_t bytes = kVec * elem.getIntOrFloatBitWidth() / 8;
  Value v = vector::LoadOp::create(b, loc, type, mem, ValueRange{offset},
                                   /*nontemporal=*/false,
                                   llvm::MaybeAlign(std::min<int64_t>(bytes, 16)));
  v = toF32(v);
  if (valid)
    v = arith::SelectOp::create(b, loc, valid, v, splat(0.0));
  return v;
}

void KernelBuilder::storeChunk(Value mem, Type elem, Value offset, Value valid,
                               Value v, Type pendingFp8) {
  (void)pendingFp8;
  OpBuilder::InsertionGuard guard(b);
  if (valid) {
    auto ifOp = scf::IfOp::create(b, loc, valid, /*withElseRegion=*/false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  }
  Value narrow = fromF32(v, elem);
  int64_t bytes = kVec * elem.getIntOrFloatBitWidth() / 8;
  vector::StoreOp::create(b, loc, narrow, mem, ValueRange{offset},
                          /*nontemporal=*/false,
                          llvm::MaybeAlign(std::min<int64_t>(bytes, 16)));
}

Value KernelBuilder::loadScalar(Value mem, Type elem, Value index) {
  Value v = memref::LoadOp::create(b, loc, mem, ValueRange{index});
  return toF32(v);
}

Value KernelBuilder::blockReduce(Value x, bool isMax) {
  auto combine = [&](Value p, Value q) -> Value {
    return isMax ? Value(arith::MaximumFOp::create(b, loc, p, q)) : add(p, q);
  };
  Value width = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(kWarp));
  for (int64_t off = kWarp / 2; off >= 1; off /= 2) {
    Value o = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(off));
    Value other = gpu::ShuffleOp::create(b, loc, x, o, width,
                                         gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    x = combine(x, other);
  }
  int64_t warps = plan.threads / kWarp;
  if (warps == 1)
    return x;
  // Two slots used in turn: a slot is rewritten only after the barrier of
  // the reduction in between, which every reader of its last use has passed.
  int64_t slot = (reduceSlot++ % 2) * kWarp;
  Value isLeader =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, idx(0));
  {
    OpBuilder::InsertionGuard guard(b);
    auto ifOp = scf::IfOp::create(b, loc, isLeader, false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    Value at = arith::AddIOp::create(b, loc, warp, idx(slot));
    memref::StoreOp::create(b, loc, x, shared, ValueRange{at});
  }
  gpu::BarrierOp::create(b, loc);
  Value acc = memref::LoadOp::create(b, loc, shared, ValueRange{idx(slot)});
  for (int64_t w = 1; w < warps; ++w)
    acc = combine(acc, memref::LoadOp::create(b, loc, shared,
                                              ValueRange{idx(slot + w)}));
  return acc;
}

const SmallVector<Value> &KernelBuilder::chunksOf(Value v) {
  Val &val = vals[v];
  if (val.pendingFp8) {
    for (Value &c : val.chunks)
      c = roundTo(c, val.pendingFp8);
    val.pendingFp8 = Type();
  }
  return val.chunks;
}

Value KernelBuilder::ropeTable(graph::RopeOp rope) {
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
      double factor = rope.getFactor() ? rope.getFactor()->convertToDouble() : 8;
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
  auto type = MemRefType::get({half}, f32);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto tensorType = RankedTensorType::get({half}, f32);
    memref::GlobalOp::create(
        b, loc, name, b.getStringAttr("private"), type,
        DenseElementsAttr::get(tensorType, ArrayRef<float>(table)),
        /*constant=*/true, b.getI64IntegerAttr(32));
  }
  return memref::GetGlobalOp::create(b, loc, type, name);
}

void KernelBuilder::emitDispatch(ArrayRef<int64_t> starts, int64_t lo,
                                 int64_t hi, Value blockId,
                                 function_ref<void(int64_t, Value)> emitCase) {
  if (hi - lo == 1) {
    Value local =
        arith::SubIOp::create(b, loc, blockId, idx(starts[lo]));
    emitCase(lo, local);
    return;
  }
  int64_t mid = (lo + hi) / 2;
  Value below = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                      blockId, idx(starts[mid]));
  OpBuilder::InsertionGuard guard(b);
  auto ifOp = scf::IfOp::create(b, loc, below, /*withElseRegion=*/true);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  emitDispatch(starts, lo, mid, blockId, emitCase);
  b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  emitDispatch(starts, mid, hi, blockId, emitCase);
}

gpu::GPUFuncOp KernelBuilder::buildMain(gpu::GPUModuleOp mod,
                                        StringRef name) {
  module = mod;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(mod.getBody());
  auto sharedType = MemRefType::get({2 * kWarp + 2 * plan.ropeHalf}, f32,
                                    MemRefLayoutAttrInterface(),
                                    b.getI64IntegerAttr(kSharedSpace));
  auto func = gpu::GPUFuncOp::create(
      b, loc, name, b.getFunctionType(argumentTypes(), {}),
      TypeRange{sharedType}, TypeRange{});
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({(int32_t)plan.threads, 1, 1}));
  // Memory-bound: ask for enough resident blocks to keep bytes in flight
  // (ptxas caps registers to fit them). Kernels that loop over rows get
  // exactly the blocks they launch per SM, so the grid is one wave.
  // Kernels that loop over rows launch columnBlocksPerSM blocks per SM:
  // capping registers so that they all fit keeps the grid one wave (measured
  // on an H200: RMSNorm backward 57% → 75% of copy bandwidth). Capping the
  // one-block-per-row kernels as well made ptxas spill and lost 4-5%.
  if (llvm::any_of(plan.segments, [](const Segment &s) { return s.loop; }))
    func->setAttr("nvvm.minctasm", b.getI32IntegerAttr(plan.columnBlocksPerSM));
  // 16-byte vector reads of the RoPE angle table need an aligned buffer.
  func.setWorkgroupAttributionAttr(0, b.getStringAttr("llvm.align"),
                                   b.getI64IntegerAttr(16));
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  auto ret = gpu::ReturnOp::create(b, loc);
  b.setInsertionPoint(ret);

  Block &body = fused.getBodyBlock();
  unsigned numInputs = body.getNumArguments();
  for (auto [i, arg] : llvm::enumerate(body.getArguments()))
    memOf[arg] = func.getArgument(i);
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    if (!memOf.count(v))
      memOf[v] = func.getArgument(numInputs + i);
  shared = func.getWorkgroupAttributions().front();
  // The entry block's arguments end with the workgroup buffer: index the
  // workspace by the signature.
  if (plan.workspaceFloats)
    workspace = func.getArgument(func.getFunctionType().getNumInputs() - 1);

  tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  tid8 = arith::MulIOp::create(b, loc, tid, idx(kVec));
  lane = arith::RemUIOp::create(b, loc, tid, idx(kWarp));
  warp = arith::DivUIOp::create(b, loc, tid, idx(kWarp));
  Value blockId = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);

  // Scalars (scales, learning rate, step) are read once per thread.
  for (BlockArgument arg : body.getArguments())
    if (isScalarTensor(arg) && !arg.use_empty())
      vals[arg].scalar = loadScalar(
          memOf[arg], cast<RankedTensorType>(arg.getType()).getElementType(),
          idx(0));

  SmallVector<int64_t> starts;
  for (const Segment &seg : plan.segments)
    starts.push_back(seg.firstBlock);
  emitDispatch(starts, 0, starts.size(), blockId,
               [&](int64_t s, Value local) {
                 emitSegment(plan.segments[s], local);
               });
  return func;
}

void KernelBuilder::emitSegment(const Segment &seg, Value localBlock) {
  for (auto [v, len] : seg.length)
    lengthOf[v] = len;
  int64_t numChunkAccs = 0;
  for (Value v : seg.columnSums)
    numChunkAccs += ceilDiv(seg.length.lookup(v), plan.threads * kVec);
  SmallVector<Value> inits;
  for (int64_t i = 0; i < numChunkAccs; ++i)
    inits.push_back(splat(0.0));
  for (size_t i = 0; i < seg.amaxes.size(); ++i)
    inits.push_back(f32c(0.0));

  SmallVector<Value> accs;
  if (!seg.loop) {
    accs = emitRow(seg, localBlock, inits);
  } else {
    auto forOp = scf::ForOp::create(
        b, loc, localBlock, idx(seg.rows), idx(seg.blocks), inits,
        [&](OpBuilder &, Location, Value row, ValueRange iterArgs) {
          SmallVector<Value> next = emitRow(seg, row, iterArgs);
          // The next row's reductions reuse the shared slots.
          gpu::BarrierOp::create(b, loc);
          scf::YieldOp::create(b, loc, next);
        });
    accs.assign(forOp.getResults().begin(), forOp.getResults().end());
  }

  // Column sums: this block's partial row into the workspace.
  int64_t a = 0;
  for (Value v : seg.columnSums) {
    int64_t len = seg.length.lookup(v);
    Value wsArg = workspace;
    Value rowStart = arith::AddIOp::create(
        b, loc, idx(plan.workspaceOffset.lookup(v)),
        arith::MulIOp::create(b, loc, localBlock, idx(len)));
    for (int64_t c = 0, e = ceilDiv(len, plan.threads * kVec); c < e; ++c) {
      Value off = arith::AddIOp::create(b, loc, rowStart, chunkBase(c));
      storeChunk(wsArg, f32, off, chunkValid(seg, len, c, Value()), accs[a++],
                 Type());
    }
  }
  // Whole-tensor maxima: one atomic per block. The values are non-negative
  // (or NaN, whose bits exceed every finite value's), so an unsigned integer
  // max of the float bits is the float max.
  for (Value v : seg.amaxes) {
    Value m = blockReduce(accs[a++], /*isMax=*/true);
    if (!memOf.count(v))
      continue;
    Value bits = arith::BitcastOp::create(b, loc, b.getI32Type(), m);
    Value first =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, idx(0));
    OpBuilder::InsertionGuard guard(b);
    auto ifOp = scf::IfOp::create(b, loc, first, false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::maxu, bits,
                                memOf.lookup(v), ValueRange{idx(0)});
  }
}

SmallVector<Value> KernelBuilder::emitRow(const Segment &seg, Value row,
                                          ValueRange accsIn) {
  SmallVector<Value> accs(accsIn.begin(), accsIn.end());
  anglesFor = nullptr;
  DenseMap<Value, int> accIdx;
  int a = 0;
  for (Value v : seg.columnSums) {
    accIdx[v] = a;
    a += ceilDiv(seg.length.lookup(v), plan.threads * kVec);
  }
  for (Value v : seg.amaxes)
    accIdx[v] = a++;

  int64_t span = plan.threads * kVec;
  // Load every input the segment reads, all chunks at once, so the block has
  // its whole row in flight before the first use.
  for (auto [v, role] : seg.roles) {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || role == Role::Scalar)
      continue;
    Type elem = cast<RankedTensorType>(v.getType()).getElementType();
    Value mem = memOf.lookup(v);
    if (role == Role::PerRow) {
      vals[v].scalar = loadScalar(mem, elem, row);
      continue;
    }
    int64_t len = seg.length.lookup(v);
    Value rowStart = role == Role::Row
                         ? Value(arith::MulIOp::create(b, loc, row, idx(len)))
                         : Value();
    Val val;
    for (int64_t c = 0, e = ceilDiv(len, span); c < e; ++c) {
      Value off = chunkBase(c);
      if (rowStart)
        off = arith::AddIOp::create(b, loc, rowStart, off);
      val.chunks.push_back(
          loadChunk(mem, elem, off, chunkValid(seg, len, c, rowStart)));
    }
    vals[v] = val;
  }

  for (Operation *op : seg.ops)
    if (failed(emitOp(seg, op, row, accs, accIdx)))
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
    Value rowStart = arith::MulIOp::create(b, loc, row, idx(len));
    for (auto [c, chunk] : llvm::enumerate(val.chunks)) {
      Value off = arith::AddIOp::create(b, loc, rowStart, chunkBase(c));
      storeChunk(memOf.lookup(v), elem, off, chunkValid(seg, len, c, rowStart),
                 chunk, val.pendingFp8);
    }
  }
  return accs;
}

LogicalResult KernelBuilder::emitOp(const Segment &seg, Operation *op,
                                    Value row, SmallVector<Value> &accs,
                                    DenseMap<Value, int> &accIdx) {
  int64_t span = plan.threads * kVec;
  auto elemOf = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType();
  };
  // Elementwise: f applied chunk by chunk, result rounded to its type.
  auto map = [&](Value result, auto f, auto... inputs) {
    Val out;
    size_t n = chunksOf(std::get<0>(std::make_tuple(inputs...))).size();
    for (size_t c = 0; c < n; ++c)
      out.chunks.push_back(roundTo(f(chunksOf(inputs)[c]...), elemOf(result)));
    vals[result] = out;
  };
  auto validMask = [&](Value v, size_t c) -> Value {
    int64_t len = seg.length.lookup(v);
    if ((int64_t)(c + 1) * span <= len)
      return Value();
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                 chunkBase(c), idx(len));
  };
  auto masked = [&](Value v, size_t c, Value x) {
    if (Value ok = validMask(v, c))
      return Value(arith::SelectOp::create(b, loc, ok, x, splat(0.0)));
    return x;
  };
  auto sumOver = [&](Value like, ArrayRef<Value> chunks) {
    Value acc;
    for (auto [c, x] : llvm::enumerate(chunks)) {
      Value m = masked(like, c, x);
      acc = acc ? add(acc, m) : m;
    }
    Value s =
        vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, acc);
    return blockReduce(s, false);
  };
  auto invRms = [&](Value x, double eps, int64_t len) {
    SmallVector<Value> sq;
    for (Value c : chunksOf(x))
      sq.push_back(mul(c, c));
    Value ss = sumOver(x, sq);
    Value meanSq = div(ss, f32c((double)len));
    Value var = add(meanSq, f32c(eps));
    return div(f32c(1.0), math::SqrtOp::create(b, loc, var));
  };
  // LayerNorm statistics, two passes over the registers: x - mean, and
  // 1/sqrt(var + eps) broadcast.
  auto layerStats = [&](Value xv, double eps, SmallVector<Value> &centered) {
    int64_t len = seg.length.lookup(xv);
    SmallVector<Value> x = chunksOf(xv), sq;
    Value mean = bcast(div(sumOver(xv, x), f32c((double)len)));
    for (Value c : x) {
      centered.push_back(sub(c, mean));
      sq.push_back(mul(centered.back(), centered.back()));
    }
    Value var = div(sumOver(xv, sq), f32c((double)len));
    return bcast(div(f32c(1.0),
                     math::SqrtOp::create(b, loc, add(var, f32c(eps)))));
  };
  // Per chunk: x̂ = centred·inv, w·dy, w·dy·x̂ (row-summed next) and dy·x̂
  // (the weight gradient's column term).
  auto normGradTerms = [&](ArrayRef<Value> dy, ArrayRef<Value> centred,
                           ArrayRef<Value> w, Value inv,
                           SmallVector<Value> &xhat, SmallVector<Value> &wdy,
                           SmallVector<Value> &prod,
                           SmallVector<Value> &dwTerm) {
    for (size_t c = 0; c < centred.size(); ++c) {
      xhat.push_back(mul(centred[c], inv));
      wdy.push_back(mul(dy[c], w[c]));
      prod.push_back(mul(wdy.back(), xhat.back()));
      dwTerm.push_back(mul(dy[c], xhat.back()));
    }
  };
  auto amaxInto = [&](Value amaxResult, ArrayRef<Value> chunks, Value like) {
    int i = accIdx.lookup(amaxResult);
    Value acc;
    for (auto [c, x] : llvm::enumerate(chunks)) {
      Value m = masked(like, c, math::AbsFOp::create(b, loc, x));
      acc = acc ? Value(arith::MaximumFOp::create(b, loc, acc, m)) : m;
    }
    Value r = vector::ReductionOp::create(b, loc,
                                          vector::CombiningKind::MAXIMUMF, acc);
    accs[i] = arith::MaximumFOp::create(b, loc, accs[i], r);
  };
  auto columnAdd = [&](Value result, ArrayRef<Value> chunks, Value like) {
    int i = accIdx.lookup(result);
    for (auto [c, x] : llvm::enumerate(chunks))
      accs[i + c] = add(accs[i + c], masked(like, c, x));
  };

  if (auto o = dyn_cast<graph::AddOp>(op)) {
    map(o.getResult(), [&](Value x, Value y) { return add(x, y); }, o.getLhs(),
        o.getRhs());
  } else if (auto o = dyn_cast<graph::MulOp>(op)) {
    map(o.getResult(), [&](Value x, Value y) { return mul(x, y); }, o.getLhs(),
        o.getRhs());
  } else if (auto o = dyn_cast<graph::SiluOp>(op)) {
    map(o.getResult(), [&](Value x) { return mul(x, sigmoid(x)); },
        o.getInput());
  } else if (auto o = dyn_cast<graph::SwigluOp>(op)) {
    map(o.getResult(),
        [&](Value g, Value u) { return mul(mul(g, sigmoid(g)), u); },
        o.getLhs(), o.getRhs());
  } else if (auto o = dyn_cast<graph::GeluOp>(op)) {
    bool tanhForm = o.getApproximate() == "tanh";
    map(o.getResult(),
        [&](Value x) -> Value {
          Value inner;
          if (tanhForm) {
            Value x3 = mul(mul(x, x), x);
            Value u = mul(splat(0.7978845608028654),
                          add(x, mul(splat(0.044715), x3)));
            inner = math::TanhOp::create(b, loc, u);
          } else {
            inner = math::ErfOp::create(b, loc,
                                        mul(x, splat(0.7071067811865476)));
          }
          return mul(mul(splat(0.5), x), add(splat(1.0), inner));
        },
        o.getInput());
  } else if (auto o = dyn_cast<graph::GeluGradOp>(op)) {
    bool tanhForm = o.getApproximate() == "tanh";
    map(o.getResult(),
        [&](Value dy, Value x) -> Value {
          Value d;
          if (tanhForm) {
            Value x2 = mul(x, x);
            Value u = mul(splat(0.7978845608028654),
                          add(x, mul(splat(0.044715), mul(x2, x))));
            Value t = math::TanhOp::create(b, loc, u);
            Value du = mul(splat(0.7978845608028654),
                           add(splat(1.0), mul(splat(3 * 0.044715), x2)));
            Value sech2 = sub(splat(1.0), mul(t, t));
            d = add(mul(splat(0.5), add(splat(1.0), t)),
                    mul(mul(splat(0.5), x), mul(sech2, du)));
          } else {
            Value cdf = mul(splat(0.5),
                            add(splat(1.0),
                                math::ErfOp::create(
                                    b, loc, mul(x, splat(0.7071067811865476)))));
            Value pdf = mul(splat(0.3989422804014327),
                            math::ExpOp::create(
                                b, loc, mul(splat(-0.5), mul(x, x))));
            d = add(cdf, mul(x, pdf));
          }
          return mul(dy, d);
        },
        o.getGrad(), o.getInput());
  } else if (auto o = dyn_cast<graph::SiluGradOp>(op)) {
    map(o.getResult(),
        [&](Value dy, Value x) {
          Value s = sigmoid(x);
          return mul(dy, mul(s, add(splat(1.0), mul(x, sub(splat(1.0), s)))));
        },
        o.getGrad(), o.getInput());
  } else if (auto o = dyn_cast<graph::SwigluGradOp>(op)) {
    SmallVector<Value> dy = chunksOf(o.getGrad());
    SmallVector<Value> g = chunksOf(o.getGate());
    SmallVector<Value> u = chunksOf(o.getUp());
    Val dg, du;
    Type elem = elemOf(o.getGateGrad());
    for (size_t c = 0; c < dy.size(); ++c) {
      Value s = sigmoid(g[c]);
      Value silu = mul(g[c], s);
      Value dsilu = mul(s, add(splat(1.0), mul(g[c], sub(splat(1.0), s))));
      dg.chunks.push_back(roundTo(mul(mul(dy[c], u[c]), dsilu), elem));
      du.chunks.push_back(roundTo(mul(dy[c], silu), elem));
    }
    vals[o.getGateGrad()] = dg;
    vals[o.getUpGrad()] = du;
  } else if (auto o = dyn_cast<graph::CastOp>(op)) {
    Type elem = elemOf(o.getResult());
    Val out;
    out.chunks = chunksOf(o.getInput());
    if (isa<Float8E4M3FNType, Float8E5M2Type>(elem))
      out.pendingFp8 = elem;
    else
      for (Value &c : out.chunks)
        c = roundTo(c, elem);
    vals[o.getResult()] = out;
  } else if (isa<graph::ReshapeOp, graph::SaveOp>(op)) {
    Value in = op->getOperand(0), out = op->getResult(0);
    if (seg.length.lookup(in) != seg.length.lookup(out))
      return op->emitOpError("changes the row length; only reshapes that keep "
                             "rows whole fuse");
    vals[out] = vals[in];
  } else if (auto o = dyn_cast<graph::RMSNormOp>(op)) {
    int64_t len = seg.length.lookup(o.getInput());
    Value inv =
        bcast(invRms(o.getInput(), o.getEps().convertToDouble(), len));
    map(o.getResult(), [&](Value x, Value w) { return mul(mul(x, inv), w); },
        o.getInput(), o.getWeight());
  } else if (auto o = dyn_cast<graph::LayerNormOp>(op)) {
    SmallVector<Value> x = chunksOf(o.getInput()), centered;
    Value inv = layerStats(o.getInput(), o.getEps().convertToDouble(), centered);
    SmallVector<Value> w = chunksOf(o.getWeight());
    SmallVector<Value> bias = chunksOf(o.getBias());
    Val out;
    for (size_t c = 0; c < x.size(); ++c)
      out.chunks.push_back(roundTo(add(mul(mul(centered[c], inv), w[c]), bias[c]),
                                   elemOf(o.getResult())));
    vals[o.getResult()] = out;
  } else if (auto o = dyn_cast<graph::RMSNormGradOp>(op)) {
    int64_t len = seg.length.lookup(o.getInput());
    Value invS = invRms(o.getInput(), o.getEps().convertToDouble(), len);
    Value inv = bcast(invS);
    SmallVector<Value> dy = chunksOf(o.getGrad());
    SmallVector<Value> x = chunksOf(o.getInput());
    SmallVector<Value> w = chunksOf(o.getWeight());
    SmallVector<Value> xhat, wdy, prod, dwTerm;
    normGradTerms(dy, x, w, inv, xhat, wdy, prod, dwTerm);
    Value mean = bcast(div(sumOver(o.getInput(), prod), f32c((double)len)));
    Val dx;
    for (size_t c = 0; c < x.size(); ++c)
      dx.chunks.push_back(roundTo(mul(sub(wdy[c], mul(xhat[c], mean)), inv),
                                  elemOf(o.getInputGrad())));
    vals[o.getInputGrad()] = dx;
    columnAdd(o.getWeightGrad(), dwTerm, o.getInput());
  } else if (auto o = dyn_cast<graph::LayerNormGradOp>(op)) {
    int64_t len = seg.length.lookup(o.getInput());
    SmallVector<Value> dy = chunksOf(o.getGrad());
    SmallVector<Value> x = chunksOf(o.getInput());
    SmallVector<Value> w = chunksOf(o.getWeight());
    SmallVector<Value> centered;
    Value inv = layerStats(o.getInput(), o.getEps().convertToDouble(), centered);
    SmallVector<Value> xhat, wdy, prod, dwTerm;
    normGradTerms(dy, centered, w, inv, xhat, wdy, prod, dwTerm);
    Value c1 = bcast(div(sumOver(o.getInput(), wdy), f32c((double)len)));
    Value c2 = bcast(div(sumOver(o.getInput(), prod), f32c((double)len)));
    Val dx;
    for (size_t c = 0; c < x.size(); ++c)
      dx.chunks.push_back(
          roundTo(mul(sub(sub(wdy[c], c1), mul(xhat[c], c2)), inv),
                  elemOf(o.getInputGrad())));
    vals[o.getInputGrad()] = dx;
    columnAdd(o.getWeightGrad(), dwTerm, o.getInput());
    columnAdd(o.getBiasGrad(), dy, o.getInput());
  } else if (auto o = dyn_cast<graph::BiasGradOp>(op)) {
    columnAdd(o.getResult(), chunksOf(o.getGrad()), o.getGrad());
  } else if (auto o = dyn_cast<graph::RopeOp>(op)) {
    auto type = cast<RankedTensorType>(o.getInput().getType());
    int64_t dh = type.getShape().back(), half = dh / 2;
    // A token's angles depend only on the frequency index: the first `half`
    // threads compute cos/sin once into shared memory (libdevice sinf/cosf,
    // full range reduction), everyone reads them as vectors.
    Value pos = scalarOf(o.getPositions());
    int64_t angles = 2 * kWarp;
    auto sameAngles = [&](Operation *other) {
      auto r = dyn_cast_or_null<graph::RopeOp>(other);
      return r && r.getPositions() == o.getPositions() &&
             r.getTheta() == o.getTheta() && r.getScaling() == o.getScaling() &&
             r.getFactor() == o.getFactor() &&
             r.getLowFreqFactor() == o.getLowFreqFactor() &&
             r.getHighFreqFactor() == o.getHighFreqFactor() &&
             r.getOriginalMaxPosition() == o.getOriginalMaxPosition() &&
             cast<RankedTensorType>(r.getInput().getType()).getShape().back() ==
                 dh;
    };
    if (!sameAngles(anglesFor)) {
      if (anglesFor) // others may still read the previous table
        gpu::BarrierOp::create(b, loc);
      Value table = ropeTable(o);
      scf::ForOp::create(
          b, loc, tid, idx(half), idx(plan.threads), ValueRange{},
          [&](OpBuilder &, Location, Value i, ValueRange) {
            Value f = memref::LoadOp::create(b, loc, table, ValueRange{i});
            Value angle = mul(pos, f);
            Value at = arith::AddIOp::create(b, loc, i, idx(angles));
            memref::StoreOp::create(b, loc, math::CosOp::create(b, loc, angle),
                                    shared, ValueRange{at});
            Value at2 = arith::AddIOp::create(b, loc, at, idx(half));
            memref::StoreOp::create(b, loc, math::SinOp::create(b, loc, angle),
                                    shared, ValueRange{at2});
            scf::YieldOp::create(b, loc);
          });
      gpu::BarrierOp::create(b, loc);
      anglesFor = op;
    }
    SmallVector<Value> x = chunksOf(o.getInput());
    bool sameThread = half % span == 0;
    Val out;
    for (size_t c = 0; c < x.size(); ++c) {
      Value base = chunkBase(c);
      Value inHead = arith::RemUIOp::create(b, loc, base, idx(dh));
      Value firstHalf = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::ult, inHead, idx(half));
      Value freqIdx = arith::RemUIOp::create(b, loc, inHead, idx(half));
      Value cosAt = arith::AddIOp::create(b, loc, freqIdx, idx(angles));
      Value sinAt = arith::AddIOp::create(b, loc, cosAt, idx(half));
      Value cosA = vector::LoadOp::create(b, loc, vecType, shared,
                                          ValueRange{cosAt}, false,
                                          llvm::MaybeAlign(16));
      Value sinA = vector::LoadOp::create(b, loc, vecType, shared,
                                          ValueRange{sinAt}, false,
                                          llvm::MaybeAlign(16));
      Value partner;
      if (sameThread) {
        int64_t step = half / span;
        bool first = ((int64_t)c * span) % dh < half;
        partner = x[first ? c + step : c - step];
      } else {
        // The partner element lies (half / 8) lanes away in the same warp.
        Value width =
            arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(kWarp));
        Value off = arith::ConstantOp::create(
            b, loc, b.getI32IntegerAttr(half / kVec));
        partner = splat(0.0);
        for (int64_t k = 0; k < kVec; ++k) {
          Value e = vector::ExtractOp::create(b, loc, x[c], k);
          Value s = gpu::ShuffleOp::create(b, loc, e, off, width,
                                           gpu::ShuffleMode::XOR)
                        .getShuffleResult();
          partner = vector::InsertOp::create(b, loc, s, partner, k);
        }
      }
      // rotate-half: first half x·cos − x₂·sin, second half x·cos + x₁·sin;
      // the inverse rotates by −angle.
      Value minus = o.getInverse() ? splat(1.0) : splat(-1.0);
      Value plus = o.getInverse() ? splat(-1.0) : splat(1.0);
      Value sign = arith::SelectOp::create(b, loc, firstHalf, minus, plus);
      out.chunks.push_back(roundTo(add(mul(x[c], cosA),
                                       mul(mul(sign, partner), sinA)),
                                   elemOf(o.getResult())));
    }
    vals[o.getResult()] = out;
  } else if (auto o = dyn_cast<graph::AdamWUpdateOp>(op)) {
    double b1 = o.getBeta1().convertToDouble();
    double b2 = o.getBeta2().convertToDouble();
    double eps = o.getEps().convertToDouble();
    double wd = o.getWeightDecay().convertToDouble();
    Value lr = bcast(scalarOf(o.getLr()));
    Value t = scalarOf(o.getStep());
    Value gs = bcast(scalarOf(o.getGradScale()));
    Value bc1 = sub(f32c(1.0), math::PowFOp::create(b, loc, f32c(b1), t));
    Value bc2 = sub(f32c(1.0), math::PowFOp::create(b, loc, f32c(b2), t));
    Value bc1v = bcast(bc1), bc2v = bcast(bc2);
    SmallVector<Value> p = chunksOf(o.getParam());
    SmallVector<Value> g = chunksOf(o.getGrad());
    SmallVector<Value> m = chunksOf(o.getExpAvg());
    SmallVector<Value> v = chunksOf(o.getExpAvgSq());
    Val np, nm, nv;
    for (size_t c = 0; c < p.size(); ++c) {
      Value gg = mul(g[c], gs);
      Value m1 = add(mul(splat(b1), m[c]), mul(splat(1.0 - b1), gg));
      Value v1 = add(mul(splat(b2), v[c]), mul(splat(1.0 - b2), mul(gg, gg)));
      Value mhat = div(m1, bc1v);
      Value vhat = div(v1, bc2v);
      Value upd = div(mhat, add(math::SqrtOp::create(b, loc, vhat), splat(eps)));
      Value p1 = sub(sub(p[c], mul(lr, upd)), mul(mul(lr, splat(wd)), p[c]));
      np.chunks.push_back(roundTo(p1, elemOf(o.getNewParam())));
      nm.chunks.push_back(roundTo(m1, elemOf(o.getNewExpAvg())));
      nv.chunks.push_back(roundTo(v1, elemOf(o.getNewExpAvgSq())));
    }
    vals[o.getNewParam()] = np;
    vals[o.getNewExpAvg()] = nm;
    vals[o.getNewExpAvgSq()] = nv;
  } else if (auto o = dyn_cast<fp8::QuantizeOp>(op)) {
    SmallVector<Value> x = chunksOf(o.getInput());
    Value scale = bcast(scalarOf(o.getScale()));
    Val q;
    for (Value c : x)
      q.chunks.push_back(mul(c, scale));
    q.pendingFp8 = elemOf(o.getResult());
    vals[o.getResult()] = q;
    amaxInto(o.getAmax(), x, o.getInput());
  } else if (auto o = dyn_cast<fp8::DequantizeOp>(op)) {
    Value scale = bcast(scalarOf(o.getScale()));
    map(o.getResult(), [&](Value q) { return div(q, scale); }, o.getInput());
  } else if (auto o = dyn_cast<fp8::AmaxOp>(op)) {
    amaxInto(o.getResult(), chunksOf(o.getInput()), o.getInput());
  } else {
    return op->emitOpError("has no GPU lowering in octet-fused-to-gpu");
  }
  (void)row;
  return success();
}

gpu::GPUFuncOp KernelBuilder::buildColumnSum(gpu::GPUModuleOp mod,
                                             StringRef name) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(mod.getBody());
  auto func = gpu::GPUFuncOp::create(b, loc, name,
                                     b.getFunctionType(argumentTypes(), {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  constexpr int64_t threads = 256;
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({threads, 1, 1}));
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  auto ret = gpu::ReturnOp::create(b, loc);
  b.setInsertionPoint(ret);

  Block &body = fused.getBodyBlock();
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  Value ws = func.getArgument(func.getFunctionType().getNumInputs() - 1);
  Value t = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value blockId = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  // Sums every column's partials in block order, so the result does not
  // depend on scheduling.
  SmallVector<std::pair<Value, unsigned>> outputs;
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    if (plan.workspaceOffset.count(v))
      outputs.push_back({v, body.getNumArguments() + i});
  SmallVector<int64_t> starts;
  int64_t next = 0;
  for (auto [v, arg] : outputs) {
    starts.push_back(next);
    next += ceilDiv(numElements(v.getType()), threads);
  }
  emitDispatch(starts, 0, starts.size(), blockId, [&](int64_t o, Value local) {
    auto [v, argNo] = outputs[o];
    int64_t len = numElements(v.getType());
    int64_t partials = plan.workspaceRows.lookup(v);
    Value col = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, local, idx(threads)), t);
    Value inside =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, col, idx(len));
    OpBuilder::InsertionGuard g2(b);
    auto ifOp = scf::IfOp::create(b, loc, inside, false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    Value first = arith::AddIOp::create(
        b, loc, idx(plan.workspaceOffset.lookup(v)), col);
    auto loop = scf::ForOp::create(
        b, loc, idx(0), idx(partials), idx(1), ValueRange{f32c(0.0)},
        [&](OpBuilder &, Location, Value g, ValueRange acc) {
          Value at = arith::AddIOp::create(
              b, loc, first, arith::MulIOp::create(b, loc, g, idx(len)));
          Value x = memref::LoadOp::create(b, loc, ws, ValueRange{at});
          scf::YieldOp::create(b, loc, ValueRange{add(acc[0], x)});
        });
    Type elem = cast<RankedTensorType>(v.getType()).getElementType();
    Value out = fromF32(loop.getResult(0), elem);
    memref::StoreOp::create(b, loc, out, func.getArgument(argNo),
                            ValueRange{col});
  });
  (void)next;
  return func;
}

struct FusedToGpuPass : impl::FusedToGpuBase<FusedToGpuPass> {
  using FusedToGpuBase::FusedToGpuBase;

  void runOnOperation() override {
    ModuleOp moduleOp = getOperation();
    SmallVector<kernel::FusedOp> fusedOps;
    moduleOp.walk([&](kernel::FusedOp op) { fusedOps.push_back(op); });
    if (fusedOps.empty())
      return;
    OpBuilder b(&getContext());
    moduleOp->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                      b.getUnitAttr());
    llvm::StringSet<> used;
    for (kernel::FusedOp fused : fusedOps) {
      FailureOr<Plan> plan = planKernel(fused, numSMs, columnBlocksPerSM);
      if (failed(plan))
        return signalPassFailure();
      // gpu.modules share the module's symbol table with its functions.
      std::string sym = symbolFor(fused.getName());
      for (int i = 2; used.contains(sym) ||
                      SymbolTable::lookupSymbolIn(moduleOp, sym);
           ++i)
        sym = symbolFor(fused.getName()) + "_" + std::to_string(i);
      used.insert(sym);

      b.setInsertionPointToEnd(moduleOp.getBody());
      auto mod = gpu::GPUModuleOp::create(b, fused.getLoc(), sym);
      KernelBuilder kb(fused, *plan, b);
      gpu::GPUFuncOp main = kb.buildMain(mod, sym);
      SmallVector<Attribute> kernels, launches;
      auto record = [&](gpu::GPUFuncOp f, int64_t grid, int64_t block) {
        auto ref = SymbolRefAttr::get(
            b.getStringAttr(sym), {FlatSymbolRefAttr::get(f.getNameAttr())});
        kernels.push_back(ref);
        launches.push_back(b.getDictionaryAttr(
            {b.getNamedAttr("kernel", ref),
             b.getNamedAttr("grid", b.getI64IntegerAttr(grid)),
             b.getNamedAttr("block", b.getI64IntegerAttr(block))}));
      };
      record(main, plan->totalBlocks, plan->threads);
      if (plan->workspaceFloats) {
        gpu::GPUFuncOp sum = kb.buildColumnSum(mod, sym + "_colsum");
        int64_t blocks = 0;
        for (Value v : cast<kernel::YieldOp>(fused.getBodyBlock().getTerminator())
                           .getValues())
          if (plan->workspaceOffset.count(v))
            blocks += ceilDiv(numElements(v.getType()), 256);
        record(sum, blocks, 256);
      }
      SmallVector<int64_t> zeroed;
      auto yield = cast<kernel::YieldOp>(fused.getBodyBlock().getTerminator());
      for (auto [i, v] : llvm::enumerate(yield.getValues())) {
        if (isa<BlockArgument>(v))
          return fused.emitOpError("yields its operand #")
                     << cast<BlockArgument>(v).getArgNumber()
                     << " unchanged; a kernel result must be computed",
                 signalPassFailure();
        for (const Segment &seg : plan->segments)
          if (seg.roles.count(v) && seg.roles.lookup(v) == Role::Amax)
            zeroed.push_back(i);
      }
      fused.setKernelsAttr(b.getArrayAttr(kernels));
      fused->setAttr("launch", b.getArrayAttr(launches));
      fused->setAttr("workspace_bytes",
                     b.getI64IntegerAttr(plan->workspaceFloats * 4));
      fused->setAttr("zero_results", b.getDenseI64ArrayAttr(zeroed));
    }
  }
};

} // namespace
} // namespace octet::codegen
