//===- Emitter.h - IR building over scalars and LLVM pointers ---*- C++ -*-===//
//
// The vocabulary of the kernels written at the level of LLVM pointers and
// single PTX instructions (attention, the clustered norm + transpose):
// i32 / f32 arithmetic, typed global and shared addressing, inline PTX.
//
//===----------------------------------------------------------------------===//

#ifndef OCTET_COMPILER_CODEGEN_EMITTER_H
#define OCTET_COMPILER_CODEGEN_EMITTER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

#include <array>

namespace octet::codegen {

using namespace mlir;

// Small IR building vocabulary over i32 / f32 scalars and LLVM pointers.
class Emitter {
public:
  Emitter(OpBuilder &b, Location loc)
      : b(b), loc(loc), ctx(b.getContext()), i32(b.getI32Type()),
        f32(b.getF32Type()), bf16(b.getBF16Type()),
        ptrG(LLVM::LLVMPointerType::get(ctx, 1)),
        ptrS(LLVM::LLVMPointerType::get(ctx, 3)) {}

  OpBuilder &b;
  Location loc;
  MLIRContext *ctx;
  Type i32, f32, bf16, ptrG, ptrS;

  Value c(int64_t v) { return arith::ConstantIntOp::create(b, loc, i32, v); }
  Value cf(double v) {
    return arith::ConstantFloatOp::create(b, loc, cast<FloatType>(f32),
                                          APFloat(static_cast<float>(v)));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value add(Value x, int64_t y) { return y ? add(x, c(y)) : x; }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value mul(Value x, int64_t y) { return y == 1 ? x : mul(x, c(y)); }
  Value div(Value x, int64_t y) {
    return y == 1 ? x : arith::DivUIOp::create(b, loc, x, c(y)).getResult();
  }
  Value rem(Value x, int64_t y) { return arith::RemUIOp::create(b, loc, x, c(y)); }
  Value band(Value x, int64_t y) { return arith::AndIOp::create(b, loc, x, c(y)); }
  Value bxor(Value x, Value y) { return arith::XOrIOp::create(b, loc, x, y); }
  Value shr(Value x, int64_t y) { return arith::ShRUIOp::create(b, loc, x, c(y)); }
  Value shl(Value x, int64_t y) { return arith::ShLIOp::create(b, loc, x, c(y)); }
  Value smax(Value x, Value y) { return arith::MaxSIOp::create(b, loc, x, y); }
  Value smin(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value lt(Value x, Value y) { return cmp(arith::CmpIPredicate::slt, x, y); }
  Value gt(Value x, Value y) { return cmp(arith::CmpIPredicate::sgt, x, y); }
  Value le(Value x, Value y) { return cmp(arith::CmpIPredicate::sle, x, y); }
  Value orb(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value andb(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value select(Value p, Value x, Value y) {
    return arith::SelectOp::create(b, loc, p, x, y);
  }
  Value fadd(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value fsub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value fmul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value fdiv(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value fma(Value x, Value y, Value z) {
    return LLVM::FMAOp::create(b, loc, x, y, z);
  }
  Value fmax(Value x, Value y) { return arith::MaximumFOp::create(b, loc, x, y); }
  Value feq(Value x, Value y) {
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x, y);
  }

  Value threadId() { return NVVM::ThreadIdXOp::create(b, loc, i32); }
  Value blockId() { return NVVM::BlockIdXOp::create(b, loc, i32); }
  void barrier() { NVVM::Barrier0Op::create(b, loc); }

  // Element `index` of a typed global buffer.
  Value gep(Value base, Type elem, Value index) {
    return LLVM::GEPOp::create(b, loc, base.getType(), elem, base,
                               ValueRange{index});
  }
  Value load(Type t, Value ptr, unsigned align = 0) {
    return LLVM::LoadOp::create(b, loc, t, ptr, align);
  }
  void store(Value v, Value ptr, unsigned align = 0) {
    LLVM::StoreOp::create(b, loc, v, ptr, align);
  }

  // One PTX instruction with register operands.
  Value asmOp(Type result, StringRef text, StringRef constraints,
              ValueRange args, bool sideEffects = false) {
    auto op = LLVM::InlineAsmOp::create(
        b, loc, result, args, b.getStringAttr(text),
        b.getStringAttr(constraints),
        sideEffects ? b.getUnitAttr() : UnitAttr(), UnitAttr(),
        LLVM::TailCallKindAttr(),
        LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT), ArrayAttr());
    return op.getRes();
  }
  Value exp2(Value x) {
    return asmOp(f32, "ex2.approx.ftz.f32 $0, $1;", "=f,f", {x});
  }
  Value log2(Value x) {
    return asmOp(f32, "lg2.approx.ftz.f32 $0, $1;", "=f,f", {x});
  }
  // Two f32 → bf16x2 (round to nearest even), `lo` in the low half.
  Value packBf16(Value lo, Value hi) {
    return asmOp(i32, "cvt.rn.bf16x2.f32 $0, $1, $2;", "=r,f,f", {hi, lo});
  }

  Value shuffleXor(Value v, int64_t offset) {
    return gpu::ShuffleOp::create(b, loc, v, offset, 32, gpu::ShuffleMode::XOR)
        .getShuffleResult();
  }

  Value smemAt(Value smem, Value byteOffset) {
    return LLVM::GEPOp::create(b, loc, ptrS, b.getI8Type(), smem,
                               ValueRange{byteOffset});
  }
  // ldmatrix.x4 (transposed when `trans`): four 8x8 b16 matrices, lane l
  // giving the row address of matrix l / 8.
  std::array<Value, 4> ldmatrix4(Value ptr, bool trans) {
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
  // D = A·B + C for one m16n8k16 tile: A 4 regs of bf16x2, B 2, C/D 4 f32.
  void mma(ArrayRef<Value> a, ArrayRef<Value> bfrag, MutableArrayRef<Value> acc) {
    Type f32x4 = LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
    Value r = NVVM::MmaOp::create(
        b, loc, f32x4, a, bfrag, ValueRange(acc), {16, 8, 16}, std::nullopt,
        std::nullopt,
        std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16,
                                      NVVM::MMATypes::bf16},
        std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                       NVVM::MMALayout::col});
    for (int i = 0; i < 4; ++i)
      acc[i] = LLVM::ExtractValueOp::create(b, loc, r, i);
  }
  // PTX with no result, kept where it is (side effects); a "~{memory}"
  // constraint also keeps memory accesses from moving across it.
  void asmVoid(StringRef text, StringRef constraints, ValueRange args) {
    LLVM::InlineAsmOp::create(
        b, loc, TypeRange(), args, b.getStringAttr(text),
        b.getStringAttr(constraints), b.getUnitAttr(), UnitAttr(),
        LLVM::TailCallKindAttr(),
        LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT), ArrayAttr());
  }
  // Adds (x, y) to the two f32 at `ptr` (8-byte aligned, global).
  void reduceAdd2(Value ptr, Value x, Value y) {
    asmVoid("red.global.add.v2.f32 [$0], {$1, $2};", "l,f,f", {ptr, x, y});
  }
  void cpAsync16(Value dst, Value src) {
    NVVM::CpAsyncOp::create(b, loc, dst, src, 16, NVVM::LoadCacheModifierKind::CG,
                            Value());
  }
  void cpAsyncCommit() { NVVM::CpAsyncCommitGroupOp::create(b, loc); }
  void cpAsyncWaitAll() { NVVM::CpAsyncWaitGroupOp::create(b, loc, 0); }

  template <typename Fn> void ifThen(Value cond, Fn body) {
    auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    body();
  }
};

// A kernel of `numArgs` global pointers and `threads` threads a block, the
// builder left before its return.
inline gpu::GPUFuncOp makeKernel(OpBuilder &b, gpu::GPUModuleOp mod, StringRef name,
                          unsigned numArgs, int64_t threads, Location loc) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(mod.getBody());
  SmallVector<Type> args(numArgs, LLVM::LLVMPointerType::get(b.getContext(), 1));
  auto f = gpu::GPUFuncOp::create(b, loc, name, b.getFunctionType(args, {}));
  f->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  f.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({(int32_t)threads, 1, 1}));
  b.setInsertionPointToStart(&f.getBody().front());
  gpu::ReturnOp::create(b, loc);
  return f;
}

// The dynamic shared memory of every kernel of the module, as the external
// shared array `name`.
inline Value sharedBase(Emitter &e, gpu::GPUModuleOp mod, StringRef name) {
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

#endif // OCTET_COMPILER_CODEGEN_EMITTER_H
