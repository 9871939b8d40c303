// The Hopper attention forward of octet-attention-to-gpu (hopper-forward=1):
// wgmma from 128-byte-swizzled shared tiles, TMA loads through mbarrier
// pipelines, a loader warpgroup and two consumer warpgroups with
// setmaxnreg. The mma.sync kernels and the pass are in AttentionToGpu.cpp.

#include "compiler/Codegen/AttentionKernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

using namespace mlir;

namespace octet::codegen::attention {
namespace {

// A wgmma shared-memory descriptor: start address, leading and stride byte
// offsets (each >> 4) and the 128-byte swizzle (layout type 1, bits 62-63).
Value wgmmaDescriptor(Emitter &e, Value address, int64_t leading,
                      int64_t stride) {
  Type i64 = e.b.getI64Type();
  Value lo = e.orI(e.andI(e.shRUI(address, 4), 0x3FFF),
                   e.i32c((leading >> 4) << 16));
  int64_t hi = (stride >> 4) | (int64_t(1) << 30);
  Value lo64 = arith::ExtUIOp::create(e.b, e.loc, i64, lo);
  Value hi64 = arith::ConstantIntOp::create(e.b, e.loc, i64, hi << 32);
  return arith::OrIOp::create(e.b, e.loc, lo64, hi64);
}

// Accumulators as the LLVM struct wgmma ops carry, and back.
Value packStruct(Emitter &e, ArrayRef<Value> xs) {
  SmallVector<Type> types(xs.size(), e.f32);
  Type st = LLVM::LLVMStructType::getLiteral(e.ctx, types);
  Value s = LLVM::UndefOp::create(e.b, e.loc, st);
  for (auto [i, x] : llvm::enumerate(xs))
    s = LLVM::InsertValueOp::create(e.b, e.loc, s, x, i);
  return s;
}
void unpackStruct(Emitter &e, Value s, MutableArrayRef<Value> xs) {
  for (size_t i = 0; i < xs.size(); ++i)
    xs[i] = LLVM::ExtractValueOp::create(e.b, e.loc, s, i);
}

// acc (64 × n, f32, this thread's n/2) += A · B for one k-step of 16, A and
// B from shared-memory descriptors, both K-major; acc = A · B when not
// `accumulate` (no instruction then sets the accumulators first, which
// would make ptxas serialise the wgmmas in flight).
void wgmmaSS(Emitter &e, MutableArrayRef<Value> acc, Value descA, Value descB,
             int64_t n, bool accumulate) {
  auto *ctx = e.ctx;
  SmallVector<Type> types(acc.size(), e.f32);
  Value in = accumulate ? packStruct(e, acc)
                        : LLVM::UndefOp::create(
                              e.b, e.loc,
                              LLVM::LLVMStructType::getLiteral(ctx, types));
  Value r = NVVM::WgmmaMmaAsyncOp::create(
      e.b, e.loc, in.getType(), in, descA, descB,
      NVVM::MMAShapeAttr::get(ctx, 64, n, 16),
      NVVM::WGMMATypesAttr::get(ctx, NVVM::WGMMATypes::bf16),
      NVVM::WGMMATypesAttr::get(ctx, NVVM::WGMMATypes::bf16),
      NVVM::WGMMATypesAttr::get(ctx, NVVM::WGMMATypes::f32),
      NVVM::WGMMAScaleOutAttr::get(ctx, accumulate ? NVVM::WGMMAScaleOut::one
                                                   : NVVM::WGMMAScaleOut::zero),
      NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
      NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
      NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::row),
      NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::col),
      NVVM::MMAIntOverflowAttr());
  unpackStruct(e, r, acc);
}

// acc += A · B with A (64 × 16 bf16) in registers, four bf16x2 a thread in
// the m16n8k16 A layout of the thread's warp, and B (16 × n) from a
// descriptor of an MN-major tile (transposed). NVVM has no op for a
// register A operand, hence the PTX.
void wgmmaRS(Emitter &e, MutableArrayRef<Value> acc, ArrayRef<Value> a,
             Value descB, int64_t n) {
  int64_t m = acc.size();
  std::string text = "wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) +
                     "k16.f32.bf16.bf16 {";
  std::string constraints;
  for (int64_t i = 0; i < m; ++i) {
    text += (i ? ", $" : "$") + std::to_string(i);
    constraints += (i ? ",=f" : "=f");
  }
  // Operands: the m results, the m accumulators tied to them, A, B.
  text += "}, {";
  for (int64_t i = 0; i < 4; ++i)
    text += (i ? ", $" : "$") + std::to_string(2 * m + i);
  text += "}, $" + std::to_string(2 * m + 4) + ", 1, 1, 1, 1;";
  SmallVector<Value> args;
  for (int64_t i = 0; i < m; ++i) {
    constraints += "," + std::to_string(i);
    args.push_back(acc[i]);
  }
  constraints += ",r,r,r,r,l";
  args.append(a.begin(), a.end());
  args.push_back(descB);
  SmallVector<Type> types(m, e.f32);
  Value r = e.asmOp(LLVM::LLVMStructType::getLiteral(e.ctx, types), text,
                    constraints, args, /*sideEffects=*/true);
  unpackStruct(e, r, acc);
}

struct Mbarriers {
  Emitter &e;
  Value smem, pad;
  Value at(Value offset) { return e.smemAt(smem, e.addI(pad, offset)); }
  void init(Value offset, int64_t count) {
    NVVM::MBarrierInitOp::create(e.b, e.loc, at(offset), e.i32c(count), Value());
  }
  void expectBytes(Value offset, int64_t bytes) {
    NVVM::MBarrierArriveExpectTxOp::create(e.b, e.loc, Type(), at(offset),
                                           e.i32c(bytes), nullptr, nullptr,
                                           Value());
  }
  void arrive(Value offset) {
    NVVM::MBarrierArriveOp::create(e.b, e.loc, Type(), at(offset), Value(),
                                   nullptr);
  }
  void wait(Value offset, Value parity) {
    NVVM::MBarrierTryWaitParityOp::create(e.b, e.loc, at(offset), parity,
                                          e.i32c(0x989680));
  }
};

} // namespace

bool hopperForwardCovers(const AttnShape &s, std::string &why) {
  HopperFwdTiling t;
  if (s.seq % t.queryTile)
    why = "sequence " + std::to_string(s.seq) + " is not a multiple of " +
          std::to_string(t.queryTile);
  return why.empty();
}

int64_t buildHopperForward(OpBuilder &b, gpu::GPUModuleOp mod, StringRef name,
                           const AttnShape &s, const HopperFwdTiling &t,
                           Location loc) {
  bool docs = s.cuLen > 0;
  MLIRContext *ctx = b.getContext();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(mod.getBody());
  Type ptrGeneric = LLVM::LLVMPointerType::get(ctx);
  Type ptrGlobal = LLVM::LLVMPointerType::get(ctx, 1);
  SmallVector<Type> argTypes(3, ptrGeneric);
  argTypes.append(docs ? 6 : 5, ptrGlobal);
  auto fnType = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), argTypes);
  auto f = LLVM::LLVMFuncOp::create(b, loc, name, fnType);
  // A kernel built as llvm.func directly: gpu.func's lowering drops the
  // argument attributes that make a tensor map a grid constant.
  f->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  f->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(), b.getUnitAttr());
  f->setAttr("nvvm.maxntid", b.getDenseI32ArrayAttr({(int32_t)t.threads, 1, 1}));
  f->setAttr("nvvm.minctasm", b.getI32IntegerAttr(1));
  for (unsigned i = 0; i < 3; ++i) {
    f.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(),
                 TypeAttr::get(LLVM::LLVMArrayType::get(b.getI8Type(), 128)));
    f.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(), b.getI64IntegerAttr(64));
    f.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(), b.getUnitAttr());
  }
  Block *entry = f.addEntryBlock(b);
  b.setInsertionPointToStart(entry);
  auto ret = LLVM::ReturnOp::create(b, loc, ValueRange());
  b.setInsertionPoint(ret);
  Emitter e(b, loc);
  auto args = f.getArguments();
  Value tmQ = args[0], tmK = args[1], tmV = args[2];
  Value cu = docs ? args[6] : Value();
  Value out = args[docs ? 7 : 6], lse = args[docs ? 8 : 7];

  const int64_t D = s.headDim, Br = t.queryTile, Bc = t.keyTile,
                S = t.stages;
  const int64_t colBlocks = D / kBlockCols;
  const int64_t qBytes = Br * D * 2, kvBytes = Bc * D * 2;
  const int64_t offK = qBytes, offV = qBytes + S * kvBytes;
  const int64_t offBar = qBytes + 2 * S * kvBytes;
  // Barriers: q full, then per stage k full, v full, k empty, v empty.
  auto kFull = [&](Value st) { return e.addI(e.i32c(offBar + 8), e.shLI(st, 3)); };
  auto vFull = [&](Value st) { return e.addI(e.i32c(offBar + 8 + 8 * S), e.shLI(st, 3)); };
  auto kEmpty = [&](Value st) { return e.addI(e.i32c(offBar + 8 + 16 * S), e.shLI(st, 3)); };
  auto vEmpty = [&](Value st) { return e.addI(e.i32c(offBar + 8 + 24 * S), e.shLI(st, 3)); };
  // 1 KiB for aligning the base to the 1024 bytes a swizzle pattern spans.
  const int64_t sharedBytes = offBar + 8 + 32 * S + 1024;

  Value smem = sharedBase(e, mod, "octet_attention_smem");
  Value base = LLVM::PtrToIntOp::create(b, loc, e.i32, smem);
  Value aligned = e.andI(e.addI(base, 1023), e.i32c(~int64_t(1023)));
  Value pad = e.subI(aligned, base);
  Mbarriers bars{e, smem, pad};
  auto cluster = [&](int64_t offset, Value extra) {
    Value p = e.smemAt(smem, e.addI(pad, e.addI(e.i32c(offset), extra)));
    return LLVM::AddrSpaceCastOp::create(b, loc, LLVM::LLVMPointerType::get(ctx, 7), p);
  };

  Value tid = e.threadId32();
  Value warp = e.shRUI(tid, 5), lane = e.andI(tid, 31);
  Value group = e.shRUI(tid, 7);
  QueryTile tile = queryTileOf(e, s, cu, Br, Bc);
  Value head = tile.head, kvHead = tile.kvHead, q0 = tile.q0;
  Value rowStart = tile.rowStart;
  Value tileBegin = tile.tileBegin, tileEnd = tile.tileEnd;
  auto &bounds = tile.bounds;

  e.ifThen(e.cmpI(arith::CmpIPredicate::eq, tid, e.i32c(0)), [&] {
    bars.init(e.i32c(offBar), 1);
    for (int64_t st = 0; st < S; ++st) {
      bars.init(kFull(e.i32c(st)), 1);
      bars.init(vFull(e.i32c(st)), 1);
      bars.init(kEmpty(e.i32c(st)), 8); // one arrival a consumer warp
      bars.init(vEmpty(e.i32c(st)), 8);
    }
    NVVM::FenceMbarrierInitOp::create(b, loc);
  });
  e.barrier();

  auto tensorCopy = [&](Value map, int64_t offset, Value extra, Value col,
                        Value headIdx, Value row, Value bar) {
    NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
        b, loc, cluster(offset, extra), map, ValueRange{col, headIdx, row},
        bars.at(bar), ValueRange(), Value(), Value(),
        NVVM::TMALoadModeAttr::get(ctx, NVVM::TMALoadMode::TILE),
        b.getBoolAttr(false), NVVM::CTAGroupKindAttr(), Value());
  };

  Value isLoader = e.cmpI(arith::CmpIPredicate::eq, group, e.i32c(0));
  auto roles = scf::IfOp::create(b, loc, TypeRange(), isLoader, true);
  // Loader warpgroup.
  {
    OpBuilder::InsertionGuard inIf(b);
    b.setInsertionPointToStart(roles.thenBlock());
    NVVM::SetMaxRegisterOp::create(
        b, loc, b.getI32IntegerAttr(t.loaderRegs),
        NVVM::SetMaxRegisterActionAttr::get(ctx, NVVM::SetMaxRegisterAction::decrease));
    e.ifThen(e.cmpI(arith::CmpIPredicate::eq, tid, e.i32c(0)), [&] {
      bars.expectBytes(e.i32c(offBar), qBytes);
      for (int64_t cb = 0; cb < colBlocks; ++cb)
        tensorCopy(tmQ, cb * Br * kSwizzleRow, e.i32c(0), e.i32c(cb * kBlockCols),
                   head, e.addI(rowStart, q0), e.i32c(offBar));
      e.forLoop(tileBegin, tileEnd, 1, {}, [&](Value j, ValueRange) {
        Value it = e.subI(j, tileBegin);
        Value st = e.remUI(it, S);
        // A fresh mbarrier's phase "before the first" counts as complete, so
        // the first pass through the slots does not wait.
        Value parity = e.xOrI(e.andI(e.divUI(it, S), 1), e.i32c(1));
        Value slot = e.mulI(st, kvBytes);
        Value row = e.addI(rowStart, e.mulI(j, Bc));
        bars.wait(kEmpty(st), parity);
        bars.expectBytes(kFull(st), kvBytes);
        for (int64_t cb = 0; cb < colBlocks; ++cb)
          tensorCopy(tmK, offK + cb * Bc * kSwizzleRow, slot,
                     e.i32c(cb * kBlockCols), kvHead, row, kFull(st));
        bars.wait(vEmpty(st), parity);
        bars.expectBytes(vFull(st), kvBytes);
        for (int64_t cb = 0; cb < colBlocks; ++cb)
          tensorCopy(tmV, offV + cb * Bc * kSwizzleRow, slot,
                     e.i32c(cb * kBlockCols), kvHead, row, vFull(st));
        return SmallVector<Value>{};
      });
    });
  }
  // Consumer warpgroups.
  b.setInsertionPointToStart(roles.elseBlock());
  NVVM::SetMaxRegisterOp::create(
      b, loc, b.getI32IntegerAttr(t.consumerRegs),
      NVVM::SetMaxRegisterActionAttr::get(ctx, NVVM::SetMaxRegisterAction::increase));
  Value consumer = e.subI(group, e.i32c(1));
  Value warpInGroup = e.andI(warp, 3);
  Value g = e.shRUI(lane, 2), t4 = e.andI(lane, 3);
  Value groupRow = e.mulI(consumer, 64);
  // The warpgroup's rows: [q0 + groupRow, +64); this thread's rows g and
  // g + 8 of its warp's 16.
  Value firstRow = e.addI(q0, groupRow);
  auto [loGroupLast, unusedHi] = bounds(e.addI(firstRow, 63));
  auto [unusedLo, hiGroupFirst] = bounds(firstRow);
  (void)unusedHi;
  (void)unusedLo;
  SmallVector<Value> rowIdx, rowLo, rowHi;
  for (int64_t half = 0; half < 2; ++half) {
    Value row = e.addI(firstRow, e.addI(e.mulI(warpInGroup, 16), e.addI(g, 8 * half)));
    auto [lo, hi] = bounds(row);
    rowIdx.push_back(row);
    rowLo.push_back(lo);
    rowHi.push_back(hi);
  }
  const int64_t sRegs = Bc / 2, oRegs = D / 2;
  Value zero = e.f32c(0.0),
        negInf = e.f32c(-std::numeric_limits<float>::infinity());
  bars.wait(e.i32c(offBar), e.i32c(0));
  Value qGroup = e.addI(aligned, e.mulI(groupRow, kSwizzleRow));
  Value c = e.f32c(s.scale * kLog2e);

  // The two consumer warpgroups take turns issuing their GEMMs (named
  // barriers 1 and 2, 256 threads: one warpgroup waits, the other
  // arrives), so that one's softmax runs under the other's GEMMs.
  Value mine = e.addI(consumer, 1), other = e.subI(e.i32c(2), consumer);
  auto myTurn = [&] {
    NVVM::BarrierOp::create(b, loc, Type(), mine, e.i32c(256),
                            NVVM::BarrierReductionAttr(), Value());
  };
  auto yourTurn = [&] {
    NVVM::BarrierArriveOp::create(b, loc, other, e.i32c(256));
  };
  e.ifThen(e.cmpI(arith::CmpIPredicate::eq, consumer, e.i32c(1)), yourTurn);
  // After the turn of tile j: the other warpgroup's, but for the second
  // warpgroup's last (the first has no turn left to wait for).
  auto handOver = [&](Value j) {
    e.ifThen(e.orI(e.cmpI(arith::CmpIPredicate::eq, consumer, e.i32c(0)),
                   e.cmpI(arith::CmpIPredicate::sgt, tileEnd, e.addI(j, 1))),
             yourTurn);
  };

  auto stageOf = [&](Value j) {
    Value it = e.subI(j, tileBegin);
    return std::pair<Value, Value>{e.remUI(it, S), e.andI(e.divUI(it, S), 1)};
  };
  // The GEMMs of a turn: S_j = Q·K_jᵀ (64 × Bc, fresh accumulators) and,
  // when `o` is given, O += P·V_{j-1}. Every descriptor is computed before
  // the first wgmma: nothing but wgmmas may define their inputs while some
  // are in flight. Q·Kᵀ: k-steps of 16 columns, 32 bytes within a 128-byte
  // swizzled row, then the next column block. P·V: P from registers (two
  // n-tiles of S are one k-step's A fragment), V MN-major: 16 key rows a
  // k-step (2 KiB into each column block), column blocks `Bc` rows apart
  // (the leading byte offset). S and P·V are two commit groups, in order.
  auto issue = [&](Value j, MutableArrayRef<Value> o, ArrayRef<Value> p) {
    auto [st, parity] = stageOf(j);
    bars.wait(kFull(st), parity);
    Value kTile = e.addI(aligned, e.addI(e.i32c(offK), e.mulI(st, kvBytes)));
    SmallVector<Value> aDescs, bDescs, vDescs;
    for (int64_t kk = 0; kk < D / 16; ++kk) {
      int64_t cb = kk / 4, within = (kk % 4) * 32;
      aDescs.push_back(wgmmaDescriptor(
          e, e.addI(qGroup, cb * Br * kSwizzleRow + within), 16, 8 * kSwizzleRow));
      bDescs.push_back(wgmmaDescriptor(
          e, e.addI(kTile, cb * Bc * kSwizzleRow + within), 16, 8 * kSwizzleRow));
    }
    if (!o.empty()) {
      auto [vst, vparity] = stageOf(e.addI(j, -1));
      bars.wait(vFull(vst), vparity);
      Value vTile = e.addI(aligned, e.addI(e.i32c(offV), e.mulI(vst, kvBytes)));
      for (int64_t kk = 0; kk < Bc / 16; ++kk)
        vDescs.push_back(wgmmaDescriptor(e, e.addI(vTile, kk * 16 * kSwizzleRow),
                                         Bc * kSwizzleRow, 8 * kSwizzleRow));
    }
    SmallVector<Value> acc(sRegs, zero);
    NVVM::WgmmaFenceAlignedOp::create(b, loc);
    for (int64_t kk = 0; kk < D / 16; ++kk)
      wgmmaSS(e, acc, aDescs[kk], bDescs[kk], Bc, /*accumulate=*/kk > 0);
    NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
    if (!o.empty()) {
      for (int64_t kk = 0; kk < Bc / 16; ++kk)
        wgmmaRS(e, o, p.slice(4 * kk, 4), vDescs[kk], D);
      NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
    }
    return acc;
  };
  // O += P·V_j alone (the last tile's).
  auto issueValues = [&](Value j, MutableArrayRef<Value> o, ArrayRef<Value> p) {
    auto [st, parity] = stageOf(j);
    bars.wait(vFull(st), parity);
    Value vTile = e.addI(aligned, e.addI(e.i32c(offV), e.mulI(st, kvBytes)));
    SmallVector<Value> descs;
    for (int64_t kk = 0; kk < Bc / 16; ++kk)
      descs.push_back(wgmmaDescriptor(e, e.addI(vTile, kk * 16 * kSwizzleRow),
                                      Bc * kSwizzleRow, 8 * kSwizzleRow));
    NVVM::WgmmaFenceAlignedOp::create(b, loc);
    for (int64_t kk = 0; kk < Bc / 16; ++kk)
      wgmmaRS(e, o, p.slice(4 * kk, 4), descs[kk], D);
    NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  };
  auto release = [&](Value j, bool keys) {
    Value st = stageOf(j).first;
    e.ifThen(e.cmpI(arith::CmpIPredicate::eq, lane, e.i32c(0)),
             [&] { bars.arrive(keys ? kEmpty(st) : vEmpty(st)); });
  };
  auto waitGroups = [&](int64_t pending) {
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(pending));
  };
  // Keys outside a row's [lo, hi] get -inf; only tiles that cross the
  // bounds of some row of the warpgroup pay for it.
  auto mask = [&](Value j, SmallVector<Value> &sAcc) {
    Value keyBase = e.mulI(j, Bc);
    Value needsMask = e.orI(
        e.cmpI(arith::CmpIPredicate::slt, keyBase, loGroupLast),
        e.cmpI(arith::CmpIPredicate::sgt, e.addI(keyBase, Bc - 1), hiGroupFirst));
    auto maskIf = scf::IfOp::create(b, loc, TypeRange(ValueRange(sAcc)), needsMask, true);
    {
      OpBuilder::InsertionGuard inIf(b);
      b.setInsertionPointToStart(maskIf.thenBlock());
      SmallVector<Value> masked(sAcc);
      Value colBase = e.addI(keyBase, e.mulI(t4, 2));
      for (int64_t nt = 0; nt < Bc / 8; ++nt)
        for (int64_t i = 0; i < 4; ++i) {
          int64_t r = i / 2;
          Value key = e.addI(colBase, nt * 8 + (i % 2));
          Value outside = e.orI(e.cmpI(arith::CmpIPredicate::slt, key, rowLo[r]),
                                e.cmpI(arith::CmpIPredicate::sgt, key, rowHi[r]));
          masked[nt * 4 + i] = e.select(outside, negInf, masked[nt * 4 + i]);
        }
      scf::YieldOp::create(b, loc, masked);
      b.setInsertionPointToStart(maskIf.elseBlock());
      scf::YieldOp::create(b, loc, sAcc);
    }
    for (auto [i, r] : llvm::enumerate(maskIf.getResults()))
      sAcc[i] = r;
  };
  // Online softmax in the exp2 domain, as the mma.sync kernel does: P in
  // place of S, the new m and l, and each row's factor for O.
  auto softmax = [&](SmallVector<Value> &sAcc, ArrayRef<Value> m, ArrayRef<Value> l,
                     SmallVector<Value> &mNew, SmallVector<Value> &lNew,
                     SmallVector<Value> &alpha) {
    mNew.assign(2, Value());
    lNew.assign(2, Value());
    alpha.assign(2, Value());
    for (int64_t half = 0; half < 2; ++half) {
      Value mx = m[half];
      for (int64_t nt = 0; nt < Bc / 8; ++nt)
        for (int64_t i = 0; i < 2; ++i)
          mx = e.maximumF(mx, sAcc[nt * 4 + half * 2 + i]);
      mx = e.maximumF(mx, e.shuffleXor(mx, 1));
      mx = e.maximumF(mx, e.shuffleXor(mx, 2));
      // A row with no visible key so far keeps m = -inf; exponents then
      // use 0 so that they give 0, not NaN.
      Value mUse = e.select(e.cmpF(arith::CmpFPredicate::OEQ, mx, negInf), zero, mx);
      alpha[half] = e.exp2(e.mulF(e.subF(m[half], mUse), c));
      Value negMc = e.mulF(mUse, e.f32c(-s.scale * kLog2e));
      Value sum = zero;
      for (int64_t nt = 0; nt < Bc / 8; ++nt)
        for (int64_t i = 0; i < 2; ++i) {
          Value &x = sAcc[nt * 4 + half * 2 + i];
          x = e.exp2(e.fma(x, c, negMc));
          sum = e.addF(sum, x);
        }
      lNew[half] = e.fma(l[half], alpha[half], sum);
      mNew[half] = mx;
    }
  };
  auto packP = [&](ArrayRef<Value> sAcc) {
    SmallVector<Value> p;
    for (int64_t i = 0; i < sRegs; i += 2)
      p.push_back(e.packBf16(sAcc[i], sAcc[i + 1]));
    return p;
  };

  // Tile tileBegin: its scores and softmax; P·V waits for the next turn.
  myTurn();
  SmallVector<Value> sFirst = issue(tileBegin, {}, {});
  handOver(tileBegin);
  waitGroups(0);
  release(tileBegin, true);
  mask(tileBegin, sFirst);
  SmallVector<Value> m0(2, negInf), l0(2, zero), mFirst, lFirst, alphaFirst;
  softmax(sFirst, m0, l0, mFirst, lFirst, alphaFirst);
  SmallVector<Value> init(oRegs, zero);
  init.append(mFirst);
  init.append(lFirst);
  SmallVector<Value> pFirst = packP(sFirst);
  init.append(pFirst);

  // Each later tile j: S_j and P_{j-1}·V_{j-1} issued together, the
  // softmax of S_j while P·V runs, then O rescaled by the new maximum.
  ValueRange carriedOut = e.forLoop(
      e.addI(tileBegin, 1), tileEnd, 1, init, [&](Value j, ValueRange carried) {
        SmallVector<Value> o(carried.begin(), carried.begin() + oRegs);
        SmallVector<Value> m(carried.begin() + oRegs, carried.begin() + oRegs + 2);
        SmallVector<Value> l(carried.begin() + oRegs + 2, carried.begin() + oRegs + 4);
        SmallVector<Value> p(carried.begin() + oRegs + 4, carried.end());
        Value previous = e.addI(j, -1);
        myTurn();
        SmallVector<Value> sAcc = issue(j, o, p);
        handOver(j);
        waitGroups(1);
        release(j, true);
        mask(j, sAcc);
        SmallVector<Value> mNew, lNew, alpha;
        softmax(sAcc, m, l, mNew, lNew, alpha);
        waitGroups(0);
        release(previous, false);
        // P_j takes P_{j-1}'s registers (the loop carries it), which the
        // P·V just waited for was reading.
        SmallVector<Value> pNew = packP(sAcc);
        for (int64_t dt = 0; dt < D / 8; ++dt)
          for (int64_t i = 0; i < 4; ++i)
            o[dt * 4 + i] = e.mulF(o[dt * 4 + i], alpha[i / 2]);
        SmallVector<Value> next(o);
        next.append(mNew);
        next.append(lNew);
        next.append(pNew);
        return next;
      });
  // The last tile's P·V.
  SmallVector<Value> oLast(carriedOut.begin(), carriedOut.begin() + oRegs);
  SmallVector<Value> pLast(carriedOut.begin() + oRegs + 4, carriedOut.end());
  issueValues(e.addI(tileEnd, -1), oLast, pLast);
  waitGroups(0);
  SmallVector<Value> results(oLast);
  results.append(carriedOut.begin() + oRegs, carriedOut.begin() + oRegs + 4);

  // out = O / l (bf16), lse = m·scale + ln l.
  for (int64_t half = 0; half < 2; ++half) {
    SmallVector<Value> o;
    for (int64_t dt = 0; dt < D / 8; ++dt)
      for (int64_t i = 0; i < 2; ++i)
        o.push_back(results[dt * 4 + half * 2 + i]);
    storeOutputRow(e, s, tile, out, lse, rowIdx[half], t4, o,
                   results[oRegs + half], results[oRegs + 2 + half]);
  }
  return sharedBytes;
}

} // namespace octet::codegen::attention
