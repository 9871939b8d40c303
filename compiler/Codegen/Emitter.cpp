//===- Emitter.cpp - The IR vocabulary of every kernel family -------------===//

#include "compiler/Codegen/Emitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;

namespace octet::codegen {

Emitter::Emitter(OpBuilder &b, Location loc)
    : b(b), loc(loc), ctx(b.getContext()), i32(b.getI32Type()),
      f32(b.getF32Type()), bf16(b.getBF16Type()),
      ptrG(LLVM::LLVMPointerType::get(ctx, 1)),
      ptrS(LLVM::LLVMPointerType::get(ctx, 3)) {}

Value Emitter::idx(int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}
Value Emitter::i32c(int64_t v) {
  return arith::ConstantIntOp::create(b, loc, i32, v);
}
Value Emitter::f32c(double v) {
  return arith::ConstantOp::create(b, loc, f32, b.getF32FloatAttr(v));
}
Value Emitter::intc(Type type, int64_t v) {
  return type.isIndex() ? idx(v) : i32c(v);
}
Value Emitter::splat(VectorType type, double v) {
  return arith::ConstantOp::create(b, loc, type,
                                   DenseElementsAttr::get(type, (float)v));
}
Value Emitter::zeros(Type type) {
  return arith::ConstantOp::create(b, loc, type, b.getZeroAttr(type));
}

Value Emitter::addI(Value x, Value y) {
  return arith::AddIOp::create(b, loc, x, y);
}
Value Emitter::addI(Value x, int64_t y) {
  return y ? addI(x, intc(x.getType(), y)) : x;
}
Value Emitter::subI(Value x, Value y) {
  return arith::SubIOp::create(b, loc, x, y);
}
Value Emitter::mulI(Value x, Value y) {
  return arith::MulIOp::create(b, loc, x, y);
}
Value Emitter::mulI(Value x, int64_t y) {
  return y == 1 ? x : mulI(x, intc(x.getType(), y));
}
Value Emitter::divUI(Value x, Value y) {
  return arith::DivUIOp::create(b, loc, x, y);
}
Value Emitter::divUI(Value x, int64_t y) {
  return y == 1 ? x : divUI(x, intc(x.getType(), y));
}
Value Emitter::remUI(Value x, Value y) {
  return arith::RemUIOp::create(b, loc, x, y);
}
Value Emitter::remUI(Value x, int64_t y) {
  return remUI(x, intc(x.getType(), y));
}
Value Emitter::andI(Value x, Value y) {
  return arith::AndIOp::create(b, loc, x, y);
}
Value Emitter::andI(Value x, int64_t y) {
  return andI(x, intc(x.getType(), y));
}
Value Emitter::orI(Value x, Value y) {
  return arith::OrIOp::create(b, loc, x, y);
}
Value Emitter::xOrI(Value x, Value y) {
  return arith::XOrIOp::create(b, loc, x, y);
}
Value Emitter::shLI(Value x, int64_t y) {
  return arith::ShLIOp::create(b, loc, x, intc(x.getType(), y));
}
Value Emitter::shRUI(Value x, int64_t y) {
  return arith::ShRUIOp::create(b, loc, x, intc(x.getType(), y));
}
Value Emitter::maxSI(Value x, Value y) {
  return arith::MaxSIOp::create(b, loc, x, y);
}
Value Emitter::minSI(Value x, Value y) {
  return arith::MinSIOp::create(b, loc, x, y);
}
Value Emitter::cmpI(arith::CmpIPredicate predicate, Value x, Value y) {
  return arith::CmpIOp::create(b, loc, predicate, x, y);
}
Value Emitter::select(Value cond, Value x, Value y) {
  return arith::SelectOp::create(b, loc, cond, x, y);
}
Value Emitter::indexCast(Value x) {
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), x);
}

static arith::FastMathFlagsAttr fastMath(Emitter &e) {
  return arith::FastMathFlagsAttr::get(
      e.ctx,
      e.contract ? arith::FastMathFlags::contract : arith::FastMathFlags::none);
}
Value Emitter::addF(Value x, Value y) {
  return arith::AddFOp::create(b, loc, x, y, fastMath(*this));
}
Value Emitter::subF(Value x, Value y) {
  return arith::SubFOp::create(b, loc, x, y, fastMath(*this));
}
Value Emitter::mulF(Value x, Value y) {
  return arith::MulFOp::create(b, loc, x, y, fastMath(*this));
}
Value Emitter::divF(Value x, Value y) {
  return arith::DivFOp::create(b, loc, x, y);
}
Value Emitter::negF(Value x) { return arith::NegFOp::create(b, loc, x); }
Value Emitter::maximumF(Value x, Value y) {
  return arith::MaximumFOp::create(b, loc, x, y);
}
Value Emitter::fma(Value x, Value y, Value z) {
  return math::FmaOp::create(b, loc, x, y, z);
}
Value Emitter::minimumF(Value x, Value y) {
  return arith::MinimumFOp::create(b, loc, x, y);
}
Value Emitter::absF(Value x) { return math::AbsFOp::create(b, loc, x); }
Value Emitter::sqrt(Value x) { return math::SqrtOp::create(b, loc, x); }
Value Emitter::exp(Value x) { return math::ExpOp::create(b, loc, x); }
Value Emitter::log(Value x) { return math::LogOp::create(b, loc, x); }
Value Emitter::cos(Value x) { return math::CosOp::create(b, loc, x); }
Value Emitter::sin(Value x) { return math::SinOp::create(b, loc, x); }
Value Emitter::cmpF(arith::CmpFPredicate predicate, Value x, Value y) {
  return arith::CmpFOp::create(b, loc, predicate, x, y);
}
Value Emitter::bitcast(Type type, Value x) {
  return arith::BitcastOp::create(b, loc, type, x);
}

Value Emitter::toF32(Value x) {
  Type elem = getElementTypeOrSelf(x.getType());
  if (elem.isF32())
    return x;
  Type target = f32;
  if (auto vector = dyn_cast<VectorType>(x.getType()))
    target = vector.clone(f32);
  if (isa<FloatType>(elem))
    return arith::ExtFOp::create(b, loc, target, x);
  return arith::SIToFPOp::create(b, loc, target, x);
}
Value Emitter::fromF32(Value x, Type elem) {
  if (elem.isF32())
    return x;
  Type target = elem;
  if (auto vector = dyn_cast<VectorType>(x.getType()))
    target = vector.clone(elem);
  return arith::TruncFOp::create(b, loc, target, x);
}
Value Emitter::roundTo(Value x, Type elem) {
  if (elem.isF32())
    return x;
  return toF32(fromF32(x, elem));
}

Value Emitter::broadcast(VectorType type, Value scalar) {
  return vector::BroadcastOp::create(b, loc, type, scalar);
}
Value Emitter::extract(Value vector, int64_t lane) {
  return vector::ExtractOp::create(b, loc, vector, lane);
}
Value Emitter::reduceAdd(Value vector) {
  return vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD,
                                     vector);
}
Value Emitter::insert(Value scalar, Value vector, int64_t lane) {
  return vector::InsertOp::create(b, loc, scalar, vector, lane);
}
Value Emitter::shuffle(Value x, Value y, ArrayRef<int64_t> mask) {
  return vector::ShuffleOp::create(b, loc, x, y, mask);
}
Value Emitter::reduceMaximumF(Value vector) {
  return vector::ReductionOp::create(b, loc, vector::CombiningKind::MAXIMUMF,
                                     vector);
}

Value Emitter::load(Value mem, Value index) {
  return memref::LoadOp::create(b, loc, mem, ValueRange{index});
}
void Emitter::store(Value x, Value mem, Value index) {
  memref::StoreOp::create(b, loc, x, mem, ValueRange{index});
}
Value Emitter::vload(VectorType type, Value mem, Value index,
                     int64_t alignBytes) {
  return vector::LoadOp::create(b, loc, type, mem, ValueRange{index},
                                /*nontemporal=*/false,
                                llvm::MaybeAlign(alignBytes));
}
void Emitter::vstore(Value x, Value mem, Value index, int64_t alignBytes) {
  vector::StoreOp::create(b, loc, x, mem, ValueRange{index},
                          /*nontemporal=*/false, llvm::MaybeAlign(alignBytes));
}
void Emitter::atomicMaxU(Value x, Value mem, Value index) {
  memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::maxu, x, mem,
                              ValueRange{index});
}
void Emitter::atomicAddF(Value x, Value mem, Value index) {
  memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addf, x, mem,
                              ValueRange{index});
}
Value Emitter::gep(Value base, Type elem, Value index) {
  return LLVM::GEPOp::create(b, loc, base.getType(), elem, base,
                             ValueRange{index});
}
Value Emitter::loadPtr(Type type, Value ptr, unsigned align) {
  return LLVM::LoadOp::create(b, loc, type, ptr, align);
}
void Emitter::storePtr(Value x, Value ptr, unsigned align) {
  LLVM::StoreOp::create(b, loc, x, ptr, align);
}
Value Emitter::bufferOf(Value v, const DenseMap<Value, Value> &arguments,
                        Value table, const DenseMap<Value, int64_t> &tableIndex,
                        const DenseMap<Value, Value> &classEntry, Type elem) {
  if (Value m = arguments.lookup(v))
    return m;
  auto it = tableIndex.find(v);
  if (it == tableIndex.end())
    return Value();
  Value entry = classEntry.lookup(v);
  return tableEntry(table, entry ? entry : idx(it->second), elem);
}

Value Emitter::tableEntry(Value table, Value entry, Type elem) {
  // The descriptor that the memref lowering expects, over the address: the
  // accesses through it index the address, whatever the size says.
  Type i64 = b.getI64Type();
  Value ptr = LLVM::IntToPtrOp::create(b, loc, ptrG, load(table, entry));
  auto array = LLVM::LLVMArrayType::get(i64, 1);
  auto descriptor =
      LLVM::LLVMStructType::getLiteral(ctx, {ptrG, ptrG, i64, array, array});
  Value d = LLVM::PoisonOp::create(b, loc, descriptor);
  auto set = [&](Value x, ArrayRef<int64_t> at) {
    d = LLVM::InsertValueOp::create(b, loc, d, x, at);
  };
  auto constant = [&](int64_t v) {
    return LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(v));
  };
  set(ptr, {0});
  set(ptr, {1});
  set(constant(0), {2});
  set(constant(0), {3, 0});
  set(constant(1), {4, 0});
  auto type = MemRefType::get({ShapedType::kDynamic}, elem,
                              MemRefLayoutAttrInterface(),
                              b.getI64IntegerAttr(1));
  return UnrealizedConversionCastOp::create(b, loc, type, d).getResult(0);
}

Value Emitter::smemAt(Value smem, Value byteOffset) {
  return LLVM::GEPOp::create(b, loc, ptrS, b.getI8Type(), smem,
                             ValueRange{byteOffset});
}

Value Emitter::threadId() {
  return gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
}
Value Emitter::blockId() {
  return gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
}
Value Emitter::threadId32() { return NVVM::ThreadIdXOp::create(b, loc, i32); }
Value Emitter::blockId32() { return NVVM::BlockIdXOp::create(b, loc, i32); }
void Emitter::barrier() { gpu::BarrierOp::create(b, loc); }
Value Emitter::shuffleXor(Value x, int64_t offset) {
  return gpu::ShuffleOp::create(b, loc, x, offset, kWarp, gpu::ShuffleMode::XOR)
      .getShuffleResult();
}

void Emitter::ifThen(Value cond, function_ref<void()> body) {
  OpBuilder::InsertionGuard guard(b);
  auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  body();
}

ValueRange
Emitter::forLoop(Value lb, Value ub, int64_t step, ValueRange init,
                 function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  auto loop =
      scf::ForOp::create(b, loc, lb, ub, intc(lb.getType(), step), init);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  SmallVector<Value> next =
      body(loop.getInductionVar(), loop.getRegionIterArgs());
  if (!init.empty())
    scf::YieldOp::create(b, loc, next);
  return loop.getResults();
}

// No asm dialect attribute: LLVM's default, AT&T, which PTX text ignores.
Value Emitter::asmOp(Type result, StringRef text, StringRef constraints,
                     ValueRange args, bool sideEffects) {
  auto op = LLVM::InlineAsmOp::create(
      b, loc, result, args, b.getStringAttr(text), b.getStringAttr(constraints),
      sideEffects ? b.getUnitAttr() : UnitAttr(), UnitAttr(),
      LLVM::TailCallKindAttr(), LLVM::AsmDialectAttr(), ArrayAttr());
  return op.getRes();
}
void Emitter::asmVoid(StringRef text, StringRef constraints, ValueRange args) {
  LLVM::InlineAsmOp::create(b, loc, TypeRange(), args, b.getStringAttr(text),
                            b.getStringAttr(constraints), b.getUnitAttr(),
                            UnitAttr(), LLVM::TailCallKindAttr(),
                            LLVM::AsmDialectAttr(), ArrayAttr());
}
Value Emitter::exp2(Value x) {
  return asmOp(f32, "ex2.approx.ftz.f32 $0, $1;", "=f,f", {x});
}
Value Emitter::log2(Value x) {
  return asmOp(f32, "lg2.approx.ftz.f32 $0, $1;", "=f,f", {x});
}
Value Emitter::constLike(Value x, double v) {
  if (auto type = dyn_cast<VectorType>(x.getType()))
    return splat(type, v);
  return f32c(v);
}
Value Emitter::perLane(Value v, function_ref<Value(Value)> f) {
  auto type = dyn_cast<VectorType>(v.getType());
  if (!type)
    return f(v);
  Value out = v;
  for (int64_t k = 0; k < type.getNumElements(); ++k)
    out = insert(f(extract(v, k)), out, k);
  return out;
}
Value Emitter::rcpApprox(Value x) {
  return perLane(x, [&](Value s) -> Value {
    return NVVM::RcpApproxFtzF32Op::create(b, loc, f32, s);
  });
}
Value Emitter::logistic2(Value y) {
  return perLane(y, [&](Value s) -> Value {
    return NVVM::RcpApproxFtzF32Op::create(b, loc, f32,
                                           addF(exp2(s), f32c(1.0)));
  });
}
Value Emitter::sigmoid(Value x) {
  return logistic2(mulF(x, constLike(x, -M_LOG2E)));
}
Value Emitter::swiglu(Value g, Value u) { return mulF(mulF(g, sigmoid(g)), u); }
std::pair<Value, Value> Emitter::swigluGrad(Value dy, Value g, Value u) {
  Value one = constLike(g, 1.0);
  Value s = sigmoid(g);
  Value silu = mulF(g, s);
  Value dsilu = mulF(s, addF(one, mulF(g, subF(one, s))));
  return {mulF(mulF(dy, u), dsilu), mulF(dy, silu)};
}
Value Emitter::packBf16(Value lo, Value hi) {
  return asmOp(i32, "cvt.rn.bf16x2.f32 $0, $1, $2;", "=r,f,f", {hi, lo});
}

std::array<Value, 4> Emitter::ldmatrix4(Value ptr, bool trans) {
  Type i32x4 = LLVM::LLVMStructType::getLiteral(ctx, {i32, i32, i32, i32});
  Value r = NVVM::LdMatrixOp::create(
      b, loc, i32x4, ptr, b.getI32IntegerAttr(4),
      NVVM::MMALayoutAttr::get(ctx, trans ? NVVM::MMALayout::col
                                          : NVVM::MMALayout::row),
      NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8),
      NVVM::LdStMatrixEltTypeAttr::get(ctx, NVVM::LdStMatrixEltType::B16));
  std::array<Value, 4> out;
  for (int i = 0; i < 4; ++i)
    out[i] = LLVM::ExtractValueOp::create(b, loc, r, i);
  return out;
}

void Emitter::mma(ArrayRef<Value> a, ArrayRef<Value> bfrag,
                  MutableArrayRef<Value> acc) {
  Type f32x4 = LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
  Value r = NVVM::MmaOp::create(
      b, loc, f32x4, a, bfrag, ValueRange(acc), {16, 8, 16}, std::nullopt,
      std::nullopt,
      std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16, NVVM::MMATypes::bf16},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  for (int i = 0; i < 4; ++i)
    acc[i] = LLVM::ExtractValueOp::create(b, loc, r, i);
}

void Emitter::reduceAdd2(Value ptr, Value x, Value y) {
  asmVoid("red.global.add.v2.f32 [$0], {$1, $2};", "l,f,f", {ptr, x, y});
}
void Emitter::cpAsync16(Value dst, Value src) {
  NVVM::CpAsyncOp::create(b, loc, dst, src, 16, NVVM::LoadCacheModifierKind::CG,
                          Value());
}
void Emitter::cpAsyncCommit() { NVVM::CpAsyncCommitGroupOp::create(b, loc); }
void Emitter::cpAsyncWaitAll() { NVVM::CpAsyncWaitGroupOp::create(b, loc, 0); }

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

SmallVector<Value> warpReduce(Emitter &e, SmallVector<Value> xs,
                              Combine combine, int64_t lanes) {
  assert(lanes >= 1 && lanes <= kWarp && (lanes & (lanes - 1)) == 0);
  Value width =
      arith::ConstantOp::create(e.b, e.loc, e.b.getI32IntegerAttr(kWarp));
  for (int64_t off = lanes / 2, level = 0; off >= 1; off /= 2, ++level) {
    Value o = arith::ConstantOp::create(e.b, e.loc, e.b.getI32IntegerAttr(off));
    SmallVector<Value> other;
    for (Value x : xs)
      other.push_back(
          gpu::ShuffleOp::create(e.b, e.loc, x, o, width, gpu::ShuffleMode::XOR)
              .getShuffleResult());
    xs = combine(xs, other, level);
  }
  return xs;
}

namespace {

// The pairwise combination of two partials lists by one Emitter float op
// (addF for sums, maximumF for maxima), as the reductions take it.
using FloatOp = Value (Emitter::*)(Value, Value);
auto pairwise(Emitter &e, FloatOp op) {
  return [&e, op](ArrayRef<Value> p, ArrayRef<Value> q, int64_t) {
    SmallVector<Value> r;
    for (auto [x, y] : llvm::zip(p, q))
      r.push_back((e.*op)(x, y));
    return r;
  };
}

// Warp `w`'s value j of the current slot, and where this warp writes its
// own.
struct Slots {
  Emitter &e;
  ReductionScratch &s;
  int64_t first; // floats before the slot
  Value lane, warp;

  bool isPointer() const {
    return isa<LLVM::LLVMPointerType>(s.shared.getType());
  }
  void write(Value x, int64_t j) {
    int64_t at = first + j * kWarp;
    if (isPointer())
      return e.storePtr(
          x, e.smemAt(s.shared,
                      e.addI(e.i32c(s.byteOffset + 4 * at), e.shLI(warp, 2))));
    e.store(x, s.shared, e.addI(warp, at));
  }
  Value read(int64_t w, int64_t j) {
    int64_t at = first + j * kWarp + w;
    if (isPointer())
      return e.loadPtr(e.f32,
                       e.smemAt(s.shared, e.i32c(s.byteOffset + 4 * at)));
    return e.load(s.shared, e.idx(at));
  }
};

// The warps' partials of a block reduction, after the butterfly: written
// by each warp's lane 0, then, after a barrier, folded in warp order by
// every thread or (inThread0) only by thread 0, where `use` gets them.
SmallVector<Value> acrossWarps(Emitter &e, ReductionScratch &s,
                               SmallVector<Value> xs, Combine merge,
                               bool inThread0,
                               function_ref<void(ArrayRef<Value>)> use) {
  assert((int64_t)xs.size() <= kMaxReduced && "too many values reduced");
  int64_t first = (s.next++ % s.slots) * kMaxReduced * kWarp;
  Value lane = s.lane, warp = s.warp;
  if (!lane) {
    lane = e.remUI(s.tid, e.intc(s.tid.getType(), kWarp));
    warp = e.divUI(s.tid, e.intc(s.tid.getType(), kWarp));
  }
  Slots slots{e, s, first, lane, warp};
  if (s.barrierFirst)
    e.barrier();
  e.ifThen(e.cmpI(arith::CmpIPredicate::eq, lane, e.intc(lane.getType(), 0)),
           [&] {
             for (auto [j, x] : llvm::enumerate(xs))
               slots.write(x, j);
           });
  e.barrier();
  auto fold = [&] {
    auto readWarp = [&](int64_t w) {
      SmallVector<Value> r;
      for (size_t j = 0; j < xs.size(); ++j)
        r.push_back(slots.read(w, j));
      return r;
    };
    SmallVector<Value> acc = readWarp(0);
    for (int64_t w = 1; w < s.warps; ++w)
      acc = merge(acc, readWarp(w), w);
    return acc;
  };
  if (!inThread0)
    return fold();
  e.ifThen(e.cmpI(arith::CmpIPredicate::eq, s.tid, e.intc(s.tid.getType(), 0)),
           [&] { use(fold()); });
  return {};
}

} // namespace

SmallVector<Value> blockReduce(Emitter &e, ReductionScratch &scratch,
                               SmallVector<Value> xs, Combine combine,
                               Combine merge) {
  xs = warpReduce(e, std::move(xs), combine);
  if (scratch.warps == 1)
    return xs;
  return acrossWarps(e, scratch, std::move(xs), merge, /*inThread0=*/false,
                     nullptr);
}

Value blockSum(Emitter &e, ReductionScratch &scratch, Value x) {
  auto add = pairwise(e, &Emitter::addF);
  return blockReduce(e, scratch, {x}, add, add).front();
}

Value blockMax(Emitter &e, ReductionScratch &scratch, Value x) {
  auto max = pairwise(e, &Emitter::maximumF);
  return blockReduce(e, scratch, {x}, max, max).front();
}

void blockMaxInThread0(Emitter &e, ReductionScratch &scratch, Value x,
                       function_ref<void(Value)> use) {
  auto max = pairwise(e, &Emitter::maximumF);
  SmallVector<Value> xs = warpReduce(e, {x}, max);
  acrossWarps(e, scratch, xs, max, /*inThread0=*/true,
              [&](ArrayRef<Value> r) { use(r.front()); });
}

Value warpSum(Emitter &e, Value x, int64_t lanes) {
  return warpReduce(e, {x}, pairwise(e, &Emitter::addF), lanes).front();
}

Value warpMax(Emitter &e, Value x) {
  return warpReduce(e, {x}, pairwise(e, &Emitter::maximumF)).front();
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

gpu::GPUFuncOp createKernel(OpBuilder &b, Location loc, gpu::GPUModuleOp mod,
                            StringRef name, TypeRange args, TypeRange workgroup,
                            int64_t threads) {
  b.setInsertionPointToEnd(mod.getBody());
  auto func = gpu::GPUFuncOp::create(b, loc, name, b.getFunctionType(args, {}),
                                     workgroup, TypeRange{});
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({(int32_t)threads, 1, 1}));
  b.setInsertionPointToStart(&func.getBody().front());
  auto ret = gpu::ReturnOp::create(b, loc);
  b.setInsertionPoint(ret);
  return func;
}

gpu::GPUFuncOp makeKernel(OpBuilder &b, gpu::GPUModuleOp mod, StringRef name,
                          unsigned numArgs, int64_t threads, Location loc) {
  OpBuilder::InsertionGuard guard(b);
  SmallVector<Type> args(numArgs,
                         LLVM::LLVMPointerType::get(b.getContext(), 1));
  return createKernel(b, loc, mod, name, args, {}, threads);
}

Value constantArray(Emitter &e, gpu::GPUModuleOp mod, StringRef name,
                    DenseElementsAttr values) {
  auto type = MemRefType::get(values.getType().getShape(),
                              values.getType().getElementType());
  if (!mod.lookupSymbol(name)) {
    OpBuilder::InsertionGuard guard(e.b);
    e.b.setInsertionPointToStart(mod.getBody());
    memref::GlobalOp::create(e.b, e.loc, name, e.b.getStringAttr("private"),
                             type, values, /*constant=*/true,
                             e.b.getI64IntegerAttr(32));
  }
  return memref::GetGlobalOp::create(e.b, e.loc, type, name);
}

MemRefType argTableType(OpBuilder &b, int64_t entries) {
  // Static: the bare-pointer calling convention takes no dynamic sizes.
  return MemRefType::get({std::max<int64_t>(entries, 1)}, b.getI64Type(),
                         MemRefLayoutAttrInterface(), b.getI64IntegerAttr(1));
}

Value sharedBase(Emitter &e, gpu::GPUModuleOp mod, StringRef name) {
  if (!mod.lookupSymbol(name)) {
    OpBuilder::InsertionGuard guard(e.b);
    e.b.setInsertionPointToStart(mod.getBody());
    LLVM::GlobalOp::create(e.b, e.loc,
                           LLVM::LLVMArrayType::get(e.b.getI8Type(), 0),
                           /*isConstant=*/false, LLVM::Linkage::External, name,
                           Attribute(), /*alignment=*/128, /*addrSpace=*/3);
  }
  return LLVM::AddressOfOp::create(e.b, e.loc, e.ptrS, name);
}

} // namespace octet::codegen
