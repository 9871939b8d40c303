// The Hopper attention forward (hopper-forward=1) and backward
// (hopper-backward=1) of octet-attention-to-gpu: wgmma from 128-byte-
// swizzled shared tiles, TMA loads through mbarrier pipelines, a loader
// warpgroup and two consumer warpgroups with setmaxnreg. The mma.sync
// kernels (and the backward's prep and `_dq` kernels, which the Hopper
// backward keeps) and the pass are in AttentionToGpu.cpp.

#include "compiler/Codegen/AttentionKernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"

#include <array>
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
// B from shared-memory descriptors, K-major unless `mnMajorA` / `mnMajorB`
// (transposed, as a register-A product's B always is); acc = A · B when not
// `accumulate` (no instruction then sets the accumulators first, which
// would make ptxas serialise the wgmmas in flight).
void wgmmaSS(Emitter &e, MutableArrayRef<Value> acc, Value descA, Value descB,
             int64_t n, bool accumulate, bool mnMajorA = false,
             bool mnMajorB = false) {
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
      NVVM::MMALayoutAttr::get(ctx, mnMajorA ? NVVM::MMALayout::col
                                             : NVVM::MMALayout::row),
      NVVM::MMALayoutAttr::get(ctx, mnMajorB ? NVVM::MMALayout::row
                                             : NVVM::MMALayout::col),
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

// Two f32 as one vector<2xf32> (an 8-byte store).
Value pairF32(Emitter &e, Value x, Value y) {
  auto type = VectorType::get({2}, e.f32);
  Value v = LLVM::UndefOp::create(e.b, e.loc, type);
  v = LLVM::InsertElementOp::create(e.b, e.loc, v, x, e.i32c(0));
  return LLVM::InsertElementOp::create(e.b, e.loc, v, y, e.i32c(1));
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

// A kernel built as llvm.func directly (gpu.func's lowering drops the
// argument attributes that make a tensor map a grid constant): `maps`
// tensor maps of 128 bytes, then `buffers` global pointers. The builder is
// left before the body's return.
LLVM::LLVMFuncOp hopperKernel(OpBuilder &b, gpu::GPUModuleOp mod, StringRef name,
                              unsigned maps, unsigned buffers, int64_t threads,
                              Location loc) {
  MLIRContext *ctx = b.getContext();
  b.setInsertionPointToEnd(mod.getBody());
  SmallVector<Type> argTypes(maps, LLVM::LLVMPointerType::get(ctx));
  argTypes.append(buffers, LLVM::LLVMPointerType::get(ctx, 1));
  auto fnType = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), argTypes);
  auto f = LLVM::LLVMFuncOp::create(b, loc, name, fnType);
  f->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  f->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(), b.getUnitAttr());
  f->setAttr("nvvm.maxntid", b.getDenseI32ArrayAttr({(int32_t)threads, 1, 1}));
  f->setAttr("nvvm.minctasm", b.getI32IntegerAttr(1));
  for (unsigned i = 0; i < maps; ++i) {
    f.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(),
                 TypeAttr::get(LLVM::LLVMArrayType::get(b.getI8Type(), 128)));
    f.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(), b.getI64IntegerAttr(64));
    f.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(), b.getUnitAttr());
  }
  Block *entry = f.addEntryBlock(b);
  b.setInsertionPointToStart(entry);
  auto ret = LLVM::ReturnOp::create(b, loc, ValueRange());
  b.setInsertionPoint(ret);
  return f;
}

// The dynamic shared memory from a 1024-byte boundary (the span of a
// 128-byte swizzle pattern; the kernel asks for 1 KiB more): `aligned` is
// its 32-bit shared address, `pad` the bytes skipped.
struct SwizzledShared {
  Emitter &e;
  Value smem, aligned, pad;
  SwizzledShared(Emitter &e, gpu::GPUModuleOp mod) : e(e) {
    smem = sharedBase(e, mod, "octet_attention_smem");
    Value base = LLVM::PtrToIntOp::create(e.b, e.loc, e.i32, smem);
    aligned = e.andI(e.addI(base, 1023), e.i32c(~int64_t(1023)));
    pad = e.subI(aligned, base);
  }
  Value at(Value offset) { return e.smemAt(smem, e.addI(pad, offset)); }
  // The shared::cluster pointer the bulk copies write to.
  Value cluster(int64_t offset, Value extra) {
    Value p = at(e.addI(e.i32c(offset), extra));
    return LLVM::AddrSpaceCastOp::create(
        e.b, e.loc, LLVM::LLVMPointerType::get(e.ctx, 7), p);
  }
};

// One TMA box of `map` at (col, head, row) into `dst`, completing on `bar`.
void copyBox(Emitter &e, Value dst, Value map, Value col, Value head, Value row,
             Value bar) {
  NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
      e.b, e.loc, dst, map, ValueRange{col, head, row}, bar, ValueRange(),
      Value(), Value(),
      NVVM::TMALoadModeAttr::get(e.ctx, NVVM::TMALoadMode::TILE),
      e.b.getBoolAttr(false), NVVM::CTAGroupKindAttr(), Value());
}

// Warp specialisation: warpgroup 0 gives registers back (setmaxnreg) and
// its first thread runs `load` (its warps 1-3 `otherLoaderWarps`, if any);
// the builder is left in the other warpgroups' branch, after they take
// what was given back.
void splitRoles(Emitter &e, Value tid, int64_t loaderRegs, int64_t consumerRegs,
                function_ref<void()> load,
                function_ref<void()> otherLoaderWarps = nullptr) {
  OpBuilder &b = e.b;
  auto setMax = [&](int64_t regs, NVVM::SetMaxRegisterAction action) {
    NVVM::SetMaxRegisterOp::create(
        b, e.loc, b.getI32IntegerAttr(regs),
        NVVM::SetMaxRegisterActionAttr::get(e.ctx, action));
  };
  Value isLoader = e.cmpI(arith::CmpIPredicate::eq, e.shRUI(tid, 7), e.i32c(0));
  auto roles = scf::IfOp::create(b, e.loc, TypeRange(), isLoader, true);
  {
    OpBuilder::InsertionGuard inIf(b);
    b.setInsertionPointToStart(roles.thenBlock());
    setMax(loaderRegs, NVVM::SetMaxRegisterAction::decrease);
    e.ifThen(e.cmpI(arith::CmpIPredicate::eq, tid, e.i32c(0)), load);
    if (otherLoaderWarps)
      e.ifThen(e.cmpI(arith::CmpIPredicate::uge, tid, e.i32c(32)),
               otherLoaderWarps);
  }
  b.setInsertionPointToStart(roles.elseBlock());
  setMax(consumerRegs, NVVM::SetMaxRegisterAction::increase);
}

} // namespace

// Both Hopper kernels tile the sequence by 128 rows (the forward's query
// tiles, the backward's key tiles).
static bool coversTiles(const AttnShape &s, int64_t tile, std::string &why) {
  if (s.seq % tile)
    why = "sequence " + std::to_string(s.seq) + " is not a multiple of " +
          std::to_string(tile);
  return why.empty();
}

bool hopperForwardCovers(const AttnShape &s, std::string &why) {
  return coversTiles(s, HopperFwdTiling().queryTile, why);
}

int64_t buildHopperForward(OpBuilder &b, gpu::GPUModuleOp mod, StringRef name,
                           const AttnShape &s, const HopperFwdTiling &t,
                           Location loc) {
  bool docs = s.cuLen > 0;
  OpBuilder::InsertionGuard guard(b);
  auto f = hopperKernel(b, mod, name, 3, docs ? 6 : 5, t.threads, loc);
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

  SwizzledShared sh(e, mod);
  Value aligned = sh.aligned;
  Mbarriers bars{e, sh.smem, sh.pad};
  auto cluster = [&](int64_t offset, Value extra) { return sh.cluster(offset, extra); };

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
    copyBox(e, cluster(offset, extra), map, col, headIdx, row, bars.at(bar));
  };

  // Loader warpgroup.
  splitRoles(e, tid, t.loaderRegs, t.consumerRegs, [&] {
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
  // Consumer warpgroups.
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

bool hopperBackwardCovers(const AttnShape &s, std::string &why) {
  return coversTiles(s, HopperBwdTiling().keyTile, why);
}

int64_t buildHopperBackward(OpBuilder &b, gpu::GPUModuleOp mod, StringRef name,
                            const AttnShape &s, const HopperBwdTiling &t,
                            Location loc) {
  bool docs = s.cuLen > 0;
  OpBuilder::InsertionGuard guard(b);
  auto f = hopperKernel(b, mod, name, 4, docs ? 11 : 10, t.threads, loc);
  Emitter e(b, loc);
  auto args = f.getArguments();
  Value tmDo = args[0], tmQ = args[1], tmK = args[2], tmV = args[3];
  // Buffers from argument 4: dout, q, k, v, out, lse, [cu], dq, dk, dv,
  // workspace. dout and out reach this kernel through the prep's D, the
  // documents through its bounds, dq through the `_dq` kernel.
  Value lse = args[9];
  unsigned next = docs ? 12 : 11;
  Value dk = args[next], dv = args[next + 1], ws = args[next + 2];
  BwdWorkspace w(s);

  const int64_t D = s.headDim, Bn = t.keyTile, Bm = t.queryTile,
                S = t.stages;
  const int64_t colBlocks = D / kBlockCols;
  const int64_t kvBytes = Bn * D * 2, qBytes = Bm * D * 2;
  // Per stage: lse, D, and the documents' first and last token (room for
  // all four either way keeps the tiles after them 1024-byte aligned).
  const int64_t sideBytes = Bm * 4, sideStage = 4 * sideBytes;
  const int64_t dsBytes = Bn * Bm * 2;
  // dQ columns a consumer warpgroup computes: half of 128 each, or all 64
  // over its own keys (half of 64 columns would start mid-way through a
  // swizzled row of K).
  const bool splitDq = D == 128;
  const int64_t dqCols = splitDq ? D / 2 : D;
  // The f32 dQ tile as the accumulator holds it (dqTileWord: 64 query
  // rows × 64 columns, 32-byte pieces swizzled by row), so that one bulk
  // reduction adds it all; the swizzle also spreads a store's eight rows
  // over the banks.
  const int64_t dqRowBytes = dqCols * 4, dqBytes = Bm * dqRowBytes;
  assert(Bm == kDqTileRows && dqCols == kDqTileCols);
  const int64_t offK = 0, offV = kvBytes, offQ = 2 * kvBytes,
                offDo = offQ + S * qBytes, offSide = offDo + S * qBytes,
                offDs = offSide + S * sideStage, offDq = offDs + 2 * dsBytes,
                offBar = offDq + 2 * dqBytes;
  // Barriers: K and V arrived, then per stage full and empty.
  auto full = [&](Value st) { return e.addI(e.i32c(offBar + 8), e.shLI(st, 3)); };
  auto empty = [&](Value st) {
    return e.addI(e.i32c(offBar + 8 + 8 * S), e.shLI(st, 3));
  };
  const int64_t sharedBytes = offBar + 8 + 16 * S + 1024;

  Value tid = e.threadId32();
  Value group = e.shRUI(tid, 7);
  KeyTile tile = keyTileOf(e, s, ws, Bn, Bm);
  Value batch = tile.batch, kvHead = tile.kvHead, j0 = tile.j0,
        rowStart = tile.rowStart, steps = tile.steps;
  auto wsAt = [&](int64_t base, Value index, Type type) {
    return e.gep(ws, type, e.addI(index, base));
  };
  auto stepHead = [&](Value step) { return tile.headOf(e, step); };
  auto stepRow = [&](Value step) { return tile.rowOf(e, step); };
  auto stageOf = [&](Value step) {
    return std::pair<Value, Value>{e.remUI(step, S), e.andI(e.divUI(step, S), 1)};
  };

  SwizzledShared sh(e, mod);
  Value aligned = sh.aligned;
  auto namedBarrier = [&](Value id, int64_t threads) {
    NVVM::BarrierOp::create(b, loc, Type(), id, e.i32c(threads),
                            NVVM::BarrierReductionAttr(), Value());
  };
  auto namedArrive = [&](Value id, int64_t threads) {
    NVVM::BarrierArriveOp::create(b, loc, id, e.i32c(threads));
  };
  // Named barriers: 1 both consumer warpgroups; for consumer c, 2 + c its
  // warpgroup, 4 + c its dQ tile written (the consumer arrives, its writer
  // warp waits) and 6 + c its dQ tile read (the other way round).
  const int64_t dqThreads = 128 + 32;
  auto dqFull = [&](Value c) { return e.addI(c, e.i32c(4)); };
  auto dqEmpty = [&](Value c) { return e.addI(c, e.i32c(6)); };
  Mbarriers bars{e, sh.smem, sh.pad};
  e.ifThen(e.cmpI(arith::CmpIPredicate::eq, tid, e.i32c(0)), [&] {
    bars.init(e.i32c(offBar), 1);
    for (int64_t st = 0; st < S; ++st) {
      bars.init(full(e.i32c(st)), 1);
      bars.init(empty(e.i32c(st)), 8); // one arrival a consumer warp
    }
    NVVM::FenceMbarrierInitOp::create(b, loc);
  });
  e.barrier();

  // Loader warpgroup: K and V once, then each step's Q, dO (TMA boxes of 64
  // columns) and its rows' lse, D and document bounds (plain bulk copies).
  splitRoles(e, tid, t.loaderRegs, t.consumerRegs, [&] {
    Value kvBar = bars.at(e.i32c(offBar));
    bars.expectBytes(e.i32c(offBar), 2 * kvBytes);
    Value keyRow = e.addI(rowStart, j0);
    for (int64_t cb = 0; cb < colBlocks; ++cb) {
      copyBox(e, sh.cluster(offK + cb * Bn * kSwizzleRow, e.i32c(0)), tmK,
              e.i32c(cb * kBlockCols), kvHead, keyRow, kvBar);
      copyBox(e, sh.cluster(offV + cb * Bn * kSwizzleRow, e.i32c(0)), tmV,
              e.i32c(cb * kBlockCols), kvHead, keyRow, kvBar);
    }
    e.forLoop(e.i32c(0), steps, 1, {}, [&](Value step, ValueRange) {
      auto [st, phase] = stageOf(step);
      // A fresh mbarrier's phase "before the first" counts as complete,
      // so the first pass through the slots does not wait.
      bars.wait(empty(st), e.xOrI(phase, e.i32c(1)));
      bars.expectBytes(full(st), 2 * qBytes + (docs ? 4 : 2) * sideBytes);
      Value head = stepHead(step), i0 = stepRow(step);
      Value row = e.addI(rowStart, i0);
      Value slot = e.mulI(st, qBytes), bar = bars.at(full(st));
      for (int64_t cb = 0; cb < colBlocks; ++cb) {
        copyBox(e, sh.cluster(offQ + cb * Bm * kSwizzleRow, slot), tmQ,
                e.i32c(cb * kBlockCols), head, row, bar);
        copyBox(e, sh.cluster(offDo + cb * Bm * kSwizzleRow, slot), tmDo,
                e.i32c(cb * kBlockCols), head, row, bar);
      }
      Value side =
          e.addI(e.mulI(e.addI(e.mulI(batch, s.qHeads), head), s.seq), i0);
      Value sideSlot = e.mulI(st, sideStage);
      auto bulk = [&](int64_t at, Value src) {
        NVVM::CpAsyncBulkGlobalToSharedClusterOp::create(
            b, loc, sh.cluster(offSide + at, sideSlot), src, bar,
            e.i32c(sideBytes), Value(), Value());
      };
      bulk(0, e.gep(lse, e.f32, side));
      bulk(sideBytes, wsAt(w.delta, side, e.f32));
      if (docs) {
        bulk(2 * sideBytes, wsAt(w.docLo, row, e.i32));
        bulk(3 * sideBytes, wsAt(w.docHi, row, e.i32));
      }
      return SmallVector<Value>{};
    });
  }, [&] {
    // Warps 1 and 2: the dQ writers of consumer warpgroups 1 and 2. Each
    // step's f32 tile goes to the accumulator as one bulk reduction of
    // 16 KiB, issued here: the consumers' wgmmas are warpgroup-wide, so a
    // consumer lane issuing copies (a bulk copy a query row, as before)
    // held all four warps; and the copy engine takes one large copy far
    // sooner than 64 small ones.
    e.ifThen(e.cmpI(arith::CmpIPredicate::ult, tid, e.i32c(96)), [&] {
      Value writerOf = e.subI(e.shRUI(tid, 5), e.i32c(1));
      Value lane = e.andI(tid, 31);
      Value tileAt =
          e.addI(aligned, e.addI(e.i32c(offDq), e.mulI(writerOf, dqBytes)));
      Value colTile = splitDq ? writerOf : e.i32c(0);
      namedArrive(dqEmpty(writerOf), dqThreads);
      e.forLoop(e.i32c(0), steps, 1, {}, [&](Value step, ValueRange) {
        Value head = stepHead(step), i0 = stepRow(step);
        namedBarrier(dqFull(writerOf), dqThreads);
        e.ifThen(e.cmpI(arith::CmpIPredicate::eq, lane, e.i32c(0)), [&] {
          Value first = dqTileWord(e, s, batch, head, i0, colTile);
          Value dst = LLVM::PtrToIntOp::create(b, loc, b.getI64Type(),
                                               wsAt(w.dq, first, e.f32));
          e.asmVoid("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 "
                    "[$0], [$1], " + std::to_string(dqBytes) + ";",
                    "l,r,~{memory}", {dst, tileAt});
          NVVM::CpAsyncBulkCommitGroupOp::create(b, loc);
        });
        // The tile may be written again once its reads are done.
        NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0),
                                             b.getUnitAttr());
        namedArrive(dqEmpty(writerOf), dqThreads);
        return SmallVector<Value>{};
      });
      // The reductions are written, not only read, before the `_dq`
      // kernel reads the accumulator.
      NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0),
                                           UnitAttr());
    });
  });
  // Consumer warpgroups: key rows [keyBase, +64) of the tile each.
  Value consumer = e.subI(group, e.i32c(1));
  Value keyBase = e.mulI(consumer, 64);
  // A thread's place: in its warpgroup, its warp, the m16n8k16 fragment
  // (g, t4), and its first key row in the tile.
  struct Place {
    Value local, lane, warpInGroup, g, t4, threadKey;
  };
  auto placeOf = [&](Value id) {
    Place p;
    p.local = e.andI(id, 127);
    p.lane = e.andI(id, 31);
    p.warpInGroup = e.andI(e.shRUI(id, 5), 3);
    p.g = e.shRUI(p.lane, 2);
    p.t4 = e.andI(p.lane, 3);
    p.threadKey = e.addI(keyBase, e.addI(e.mulI(p.warpInGroup, 16), p.g));
    return p;
  };
  Value dqCol0 = splitDq ? e.mulI(consumer, dqCols) : e.i32c(0);
  Value dqTile = e.addI(e.i32c(offDq), e.mulI(consumer, dqBytes));
  Value zero = e.f32c(0.0);
  Value c = e.f32c(s.scale * kLog2e);
  auto waitGroups = [&](int64_t pending) {
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(pending));
  };
  auto commit = [&] { NVVM::WgmmaGroupSyncAlignedOp::create(b, loc); };
  // Shared memory written by threads, read next by wgmma or a bulk copy
  // (the async proxy).
  auto fenceAsyncProxy = [&] { e.asmVoid("fence.proxy.async.shared::cta;", "", {}); };
  auto packPairs = [&](ArrayRef<Value> acc) {
    SmallVector<Value> p;
    for (size_t i = 0; i < acc.size(); i += 2)
      p.push_back(e.packBf16(acc[i], acc[i + 1]));
    return p;
  };
  bars.wait(e.i32c(offBar), e.i32c(0));

  const int64_t accRegs = D / 2, tileRegs = Bm / 2;
  // Dh 128: a step's dK += dSᵀ·Q stays in flight into the next step, which
  // issues its Sᵀ and dPᵀ behind it and only then waits (and frees the
  // stage's Q and dO), so the tensor cores do not drain between steps. On
  // an H100 the backward went 469 → 501 TFLOP/s at seq 8192, 409 → 440 at
  // 4096; at Dh 64 (a smaller dK, each warpgroup's dQ over its own keys)
  // it lost 392 → 377, so Dh 64 waits for dK in its own step
  // (bench/results/h100/attention-pipeline).
  const bool dkAcrossSteps = D == 128;
  SmallVector<Value> init(2 * accRegs, zero); // dK then dV
  ValueRange accOut = e.forLoop(
      e.i32c(0), steps, 1, init, [&](Value step, ValueRange carried) {
        SmallVector<Value> dkAcc(carried.begin(), carried.begin() + accRegs);
        SmallVector<Value> dvAcc(carried.begin() + accRegs, carried.end());
        auto [stage, phase] = stageOf(step);
        Value st = stage;
        Value head = stepHead(step), i0 = stepRow(step);
        bars.wait(full(st), phase);
        // The shared base and the thread index, opaque to LLVM: else it
        // hoists what derives from them alone out of the loop (the
        // descriptors of K and V, the side and shared store addresses of
        // every fragment) and they hold registers throughout, next to dK
        // and dV; here each is an add where it is used.
        auto opaque = [&](Value x) {
          return e.asmOp(e.i32, "mov.b32 $0, $1;", "=r,r", {x}, /*sideEffects=*/true);
        };
        Value aligned = opaque(sh.aligned);
        Place here = placeOf(opaque(tid));
        Value local = here.local, lane = here.lane,
              warpInGroup = here.warpInGroup, g = here.g, t4 = here.t4,
              threadKey = here.threadKey;
        Value kRows = e.addI(aligned, e.addI(e.i32c(offK), e.mulI(keyBase, kSwizzleRow)));
        Value vRows = e.addI(aligned, e.addI(e.i32c(offV), e.mulI(keyBase, kSwizzleRow)));
        // The K columns (a swizzled column block) this warpgroup's dQ takes.
        Value kCols = e.addI(aligned, e.addI(e.i32c(offK),
                                             e.mulI(e.shRUI(dqCol0, 6), Bn * kSwizzleRow)));
        Value qSlot = e.addI(aligned, e.addI(e.i32c(offQ), e.mulI(st, qBytes)));
        Value doSlot = e.addI(aligned, e.addI(e.i32c(offDo), e.mulI(st, qBytes)));
        Value sideOff = e.addI(e.i32c(offSide), e.mulI(st, sideStage));
        // A thread's query columns come in pairs (2·t4 + 8·nt, +1): one
        // 8-byte load a pair (half the loads; 392 → 399 TFLOP/s at Dh 64,
        // seq 8192, bench/results/h100/attention-pipeline/c2).
        auto sideWord = [&](int64_t vec, Value col) {
          return sh.at(e.addI(sideOff, e.addI(e.i32c(vec * sideBytes), e.shLI(col, 2))));
        };
        auto sidePair = [&](int64_t vec, Value col, Type type) {
          Value v = e.loadPtr(VectorType::get({2}, type), sideWord(vec, col), 8);
          return std::array<Value, 2>{
              LLVM::ExtractElementOp::create(e.b, e.loc, v, e.i32c(0)),
              LLVM::ExtractElementOp::create(e.b, e.loc, v, e.i32c(1))};
        };
        auto sideAt = [&](int64_t vec, Value col, Type type) {
          return e.loadPtr(type, sideWord(vec, col), 4);
        };

        // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (64 keys × 64 queries), both operands
        // K-major: k-steps of 16 columns, 32 bytes into a swizzled row,
        // then the next column block. Commit groups, in order: Sᵀ, dPᵀ,
        // dV, dQ, dK.
        SmallVector<Value> sAcc(tileRegs, zero), dpAcc(tileRegs, zero);
        auto scores = [&](MutableArrayRef<Value> out, Value rows, Value tile) {
          for (int64_t kk = 0; kk < D / 16; ++kk) {
            int64_t cb = kk / 4, within = (kk % 4) * 32;
            wgmmaSS(e, out,
                    wgmmaDescriptor(e, e.addI(rows, cb * Bn * kSwizzleRow + within),
                                    16, 8 * kSwizzleRow),
                    wgmmaDescriptor(e, e.addI(tile, cb * Bm * kSwizzleRow + within),
                                    16, 8 * kSwizzleRow),
                    Bm, /*accumulate=*/kk > 0);
          }
          commit();
        };
        NVVM::WgmmaFenceAlignedOp::create(b, loc);
        scores(sAcc, kRows, qSlot);
        scores(dpAcc, vRows, doSlot);

        // Pᵀ = 2^(s·c − lse·log2 e) where key r is visible to query q, while
        // dPᵀ is still in flight. Tiles wholly inside every row's bounds
        // skip the per-element test.
        waitGroups(1);
        // The previous step's dK is done too (groups complete in order).
        if (dkAcrossSteps) {
          Value previous = e.addI(step, -1);
          e.ifThen(e.andI(e.cmpI(arith::CmpIPredicate::sgt, step, e.i32c(0)),
                          e.cmpI(arith::CmpIPredicate::eq, lane, e.i32c(0))),
                   [&] { bars.arrive(empty(stageOf(previous).first)); });
        }
        Value visibleAll;
        if (docs) {
          Value loMax = sideAt(2, e.i32c(Bm - 1), e.i32);
          Value hiMin = s.causal ? i0 : sideAt(3, e.i32c(0), e.i32);
          visibleAll = e.andI(e.cmpI(arith::CmpIPredicate::sle, loMax, j0),
                              e.cmpI(arith::CmpIPredicate::sle, e.addI(j0, Bn - 1), hiMin));
        } else {
          visibleAll = s.causal
                           ? e.cmpI(arith::CmpIPredicate::sle, e.addI(j0, Bn - 1), i0)
                           : arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1)
                                 .getResult();
        }
        Value keyRow0 = e.addI(j0, threadKey);
        auto columnOf = [&](int64_t nt, int64_t i) {
          return e.addI(e.mulI(t4, 2), nt * 8 + i);
        };
        for (int64_t nt = 0; nt < Bm / 8; ++nt) {
          auto lsePair = sidePair(0, columnOf(nt, 0), e.f32);
          std::array<Value, 2> loPair, hiPair;
          if (docs) {
            loPair = sidePair(2, columnOf(nt, 0), e.i32);
            hiPair = sidePair(3, columnOf(nt, 0), e.i32);
          }
          for (int64_t i = 0; i < 2; ++i) {
            Value col = columnOf(nt, i);
            Value negL = e.mulF(lsePair[i], e.f32c(-kLog2e));
            Value lo = e.i32c(0), hi = e.i32c(s.seq - 1);
            if (docs) {
              lo = loPair[i];
              hi = hiPair[i];
            }
            if (s.causal)
              hi = e.addI(i0, col);
            for (int64_t half = 0; half < 2; ++half) {
              int64_t at = nt * 4 + half * 2 + i;
              Value key = e.addI(keyRow0, 8 * half);
              Value visible = e.orI(
                  visibleAll, e.andI(e.cmpI(arith::CmpIPredicate::sle, lo, key),
                                     e.cmpI(arith::CmpIPredicate::sle, key, hi)));
              sAcc[at] = e.select(visible, e.exp2(e.fma(sAcc[at], c, negL)), zero);
            }
          }
        }
        // Two n-tiles of the scores are one k-step's A fragment (m16n8k16
        // layout), as P is in the forward's P·V.
        SmallVector<Value> pFrag = packPairs(sAcc);

        // dV += Pᵀ·dO: A from registers, dO MN-major (16 query rows a
        // k-step, column blocks Bm rows apart); it runs while dSᵀ is
        // computed.
        auto gradient = [&](MutableArrayRef<Value> out, ArrayRef<Value> frag,
                            Value tile) {
          for (int64_t kk = 0; kk < Bm / 16; ++kk)
            wgmmaRS(e, out, frag.slice(4 * kk, 4),
                    wgmmaDescriptor(e, e.addI(tile, kk * 16 * kSwizzleRow),
                                    Bm * kSwizzleRow, 8 * kSwizzleRow),
                    D);
          commit();
        };
        NVVM::WgmmaFenceAlignedOp::create(b, loc);
        gradient(dvAcc, pFrag, doSlot);

        // dSᵀ = Pᵀ ∘ (dPᵀ − D[q]), from P as rounded to bf16 for dV (the
        // f32 P would take 32 more registers next to dK and dV).
        waitGroups(1);
        SmallVector<Value> dsAcc(tileRegs);
        for (int64_t nt = 0; nt < Bm / 8; ++nt) {
          auto dPair = sidePair(1, columnOf(nt, 0), e.f32);
          for (int64_t i = 0; i < 2; ++i) {
            Value dd = dPair[i];
            for (int64_t half = 0; half < 2; ++half) {
              int64_t at = nt * 4 + half * 2 + i;
              Value pair = pFrag[at / 2];
              Value bits = i ? e.andI(pair, e.i32c(~int64_t(0xFFFF))) : e.shLI(pair, 16);
              Value p = e.bitcast(e.f32, bits);
              dsAcc[at] = e.mulF(p, e.subF(dpAcc[at], dd));
            }
          }
        }
        SmallVector<Value> dsFrag = packPairs(dsAcc);

        // dSᵀ to shared memory for dQ (bf16; a key row is 64 queries, one
        // 128-byte swizzled row), in the slot of this step's parity: the
        // other slot's may still be read by the other warpgroup's dQ.
        Value dsOff = e.addI(e.i32c(offDs), e.mulI(e.andI(step, 1), dsBytes));
        for (int64_t nt = 0; nt < Bm / 8; ++nt)
          for (int64_t half = 0; half < 2; ++half) {
            Value row = e.addI(threadKey, 8 * half);
            Value at = e.addI(dsOff, e.addI(swizzled(e, row, e.i32c(nt), kSwizzleRow),
                                            e.shLI(t4, 2)));
            e.storePtr(dsFrag[nt * 2 + half], sh.at(at), 4);
          }
        fenceAsyncProxy();

        // Both halves of dSᵀ are written; dV may still be in flight.
        namedBarrier(e.i32c(1), 256);

        // dQ = dS·K: dSᵀ as an MN-major A, K as an MN-major B (16 keys a
        // k-step). Dh 128: the tile's 128 keys, this warpgroup's 64
        // columns; Dh 64: its own 64 keys, all columns (both warpgroups add
        // into the same rows). Then through the shared tile to the writer
        // warp, while dK += dSᵀ·Q (issued after dQ, as dV) keeps the
        // tensor cores busy.
        SmallVector<Value> dqAcc(dqCols / 2, zero);
        Value dsTile = e.addI(aligned, dsOff);
        const int64_t dqKeys = splitDq ? Bn : Bn / 2;
        Value keyOff = splitDq ? e.i32c(0) : e.mulI(keyBase, kSwizzleRow);
        NVVM::WgmmaFenceAlignedOp::create(b, loc);
        for (int64_t kk = 0; kk < dqKeys / 16; ++kk)
          wgmmaSS(e, dqAcc,
                  wgmmaDescriptor(e, e.addI(dsTile, e.addI(keyOff, kk * 16 * kSwizzleRow)),
                                  Bn * kSwizzleRow, 8 * kSwizzleRow),
                  wgmmaDescriptor(e, e.addI(kCols, e.addI(keyOff, kk * 16 * kSwizzleRow)),
                                  Bn * kSwizzleRow, 8 * kSwizzleRow),
                  dqCols, /*accumulate=*/kk > 0, /*mnMajorA=*/true,
                  /*mnMajorB=*/true);
        commit();
        gradient(dkAcc, dsFrag, qSlot);
        waitGroups(1);
        // The writer warp has read the last tile out; this one goes in as
        // pairs (8-byte stores), then the writer reduces it into the
        // accumulator while dK runs.
        namedBarrier(dqEmpty(consumer), dqThreads);
        for (int64_t nt = 0; nt < dqCols / 8; ++nt)
          for (int64_t half = 0; half < 2; ++half) {
            Value row = e.addI(e.mulI(warpInGroup, 16), e.addI(g, 8 * half));
            // Piece nt of the row sits at nt ^ (row % 8) = nt ^ g.
            Value piece = e.xOrI(g, e.i32c(nt));
            Value at = e.addI(dqTile, e.addI(e.mulI(row, dqRowBytes),
                                             e.addI(e.shLI(t4, 3), e.shLI(piece, 5))));
            e.storePtr(pairF32(e, dqAcc[nt * 4 + half * 2],
                               dqAcc[nt * 4 + half * 2 + 1]),
                       sh.at(at), 8);
          }
        fenceAsyncProxy();
        namedArrive(dqFull(consumer), dqThreads);
        if (!dkAcrossSteps) {
          // dK is done: Q and dO may go.
          waitGroups(0);
          e.ifThen(e.cmpI(arith::CmpIPredicate::eq, lane, e.i32c(0)),
                   [&] { bars.arrive(empty(st)); });
        }
        SmallVector<Value> out(dkAcc);
        out.append(dvAcc);
        return out;
      });
  SmallVector<Value> acc(accOut);
  if (dkAcrossSteps) {
    waitGroups(0);
    // The wait defines no register as far as LLVM knows: without the
    // empty asm it moves dK's scaling above it.
    for (int64_t i = 0; i < accRegs; ++i)
      acc[i] = e.asmOp(e.f32, "", "=f,0", {acc[i]}, /*sideEffects=*/true);
  }
  // dK = scale · Σ dSᵀ·Q, dV, to bf16.
  Place me = placeOf(tid);
  Value threadKey = me.threadKey, t4 = me.t4;
  const int64_t kvStride = s.kvHeads * D;
  Value scale = e.f32c(s.scale);
  for (int64_t half = 0; half < 2; ++half) {
    Value row = e.addI(j0, e.addI(threadKey, 8 * half));
    Value rowBase = e.addI(e.mulI(e.addI(rowStart, row), kvStride),
                           e.addI(e.mulI(kvHead, D), e.mulI(t4, 2)));
    for (int64_t dt = 0; dt < D / 8; ++dt) {
      int64_t at = dt * 4 + half * 2;
      Value k0 = e.mulF(acc[at], scale), k1 = e.mulF(acc[at + 1], scale);
      e.storePtr(e.packBf16(k0, k1), e.gep(dk, e.bf16, e.addI(rowBase, dt * 8)), 4);
      e.storePtr(e.packBf16(acc[accRegs + at], acc[accRegs + at + 1]),
                 e.gep(dv, e.bf16, e.addI(rowBase, dt * 8)), 4);
    }
  }
  return sharedBytes;
}

} // namespace octet::codegen::attention
