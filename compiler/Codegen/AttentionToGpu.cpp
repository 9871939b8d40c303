// octet-attention-to-gpu: kernel.attention_fwd / kernel.attention_bwd →
// flash-attention gpu.func kernels on bf16 tensor cores (mma.sync
// m16n8k16, ldmatrix, cp.async), or the Hopper ones (HopperAttention.cpp).
//
// Every loop over fragments is unrolled here, at generation time: a warp's
// accumulators are plain SSA values carried through one scf.for over the
// key/value (forward) or query (backward) tiles, so that they live in
// registers. Shared memory tiles are rows of Dh bf16 in 16-byte chunks,
// chunk c of row r stored at c ^ (r % 8): the eight rows an ldmatrix reads
// at one chunk column then fall in eight distinct bank groups. The Hopper
// forward and backward (wgmma, TMA) are in HopperAttention.cpp.

#include "compiler/Codegen/AttentionKernels.h"
#include "compiler/Codegen/Emitter.h"
#include "compiler/Codegen/Launches.h"
#include "compiler/Codegen/Passes.h"

#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/bit.h"

#include <array>
#include <cmath>
#include <functional>
#include <limits>

namespace octet::codegen {
#define GEN_PASS_DEF_ATTENTIONTOGPU
#include "compiler/Codegen/Passes.h.inc"
} // namespace octet::codegen

using namespace mlir;

namespace octet::codegen::attention {


// Tiling of the forward kernel: a CTA per (query tile, head, batch row),
// `warps` warps of `mTiles` 16-row MMA tiles each.
struct FwdTiling {
  int64_t warps = 4, mTiles = 2, keyTile = 64;
  int64_t queryTile() const { return kTile * mTiles * warps; }
  int64_t threads() const { return 32 * warps; }
};

// Tiling of the backward kernel: a CTA per (key tile, kv head, batch row),
// each warp owning 16 key rows; the query tiles it loops over have as many
// rows as the CTA has key rows, so that dQ = dS·K splits 16 query rows per
// warp as well.
struct BwdTiling {
  int64_t warps = 4;
  int64_t keyTile() const { return kTile * warps; }
  int64_t queryTile() const { return kTile * warps; }
  int64_t threads() const { return 32 * warps; }
};

constexpr int64_t kPrepThreads = 128;
// Query columns the backward handles at once within its query tile.
constexpr int64_t kPassColumns = 32;
constexpr int64_t kConvertThreads = 256;

LogicalResult checkShape(Operation *op, Value q, Value k, Value v,
                         Value cu, bool causal, double scale, AttnShape &s) {
  auto qt = cast<RankedTensorType>(q.getType());
  auto kt = cast<RankedTensorType>(k.getType());
  auto vt = cast<RankedTensorType>(v.getType());
  for (auto [name, t] : {std::pair<StringRef, RankedTensorType>{"q", qt},
                         {"k", kt}, {"v", vt}})
    if (!t.getElementType().isBF16())
      return op->emitOpError("attention codegen supports bf16 only; ")
             << name << " is " << t.getElementType()
             << " (cast it to bf16 before the attention)";
  if (qt.getRank() != 4 || kt.getShape() != vt.getShape())
    return op->emitOpError("expects q [B,S,Hq,Dh] and k, v [B,S,Hkv,Dh]");
  s.batch = qt.getDimSize(0);
  s.seq = qt.getDimSize(1);
  s.qHeads = qt.getDimSize(2);
  s.headDim = qt.getDimSize(3);
  s.kvHeads = kt.getDimSize(2);
  s.causal = causal;
  s.scale = scale;
  if (s.kvHeads <= 0 || s.qHeads % s.kvHeads)
    return op->emitOpError("kv heads (") << s.kvHeads
           << ") must divide query heads (" << s.qHeads << ")";
  if (s.headDim != 64 && s.headDim != 128)
    return op->emitOpError("attention codegen supports head dims 64 and "
                           "128; got ")
           << s.headDim;
  if (s.seq % 128)
    return op->emitOpError("attention codegen needs the sequence to be a "
                           "multiple of 128 (the query tile); got ")
           << s.seq << " (pad the batch rows, masking with cu_seqlens)";
  if (s.batch * s.seq * s.qHeads * s.headDim >=
      std::numeric_limits<int32_t>::max())
    return op->emitOpError("tensor too large for 32-bit offsets: ")
           << s.batch * s.seq * s.qHeads * s.headDim << " elements";
  if (scale <= 0)
    return op->emitOpError("attention codegen needs a positive scale");
  if (cu)
    s.cuLen = cast<RankedTensorType>(cu.getType()).getNumElements();
  if (cu && s.cuLen < 2)
    return op->emitOpError("cu_seqlens needs at least 2 elements");
  return success();
}

// Byte offset of (row, 16-byte chunk) in a swizzled tile of `rowBytes`.
Value swizzled(Emitter &e, Value row, Value chunk, int64_t rowBytes) {
  return e.addI(e.mulI(row, rowBytes), e.shLI(e.xOrI(chunk, e.andI(row, 7)), 4));
}

Value dqTileWord(Emitter &e, const AttnShape &s, Value batch, Value head,
                 Value i0, Value colTile) {
  int64_t rowTiles = s.seq / kDqTileRows, colTiles = s.headDim / kDqTileCols;
  Value tile = e.addI(e.mulI(e.addI(e.mulI(batch, s.qHeads), head), rowTiles),
                      e.divUI(i0, kDqTileRows));
  return e.mulI(e.addI(e.mulI(tile, colTiles), colTile),
                kDqTileRows * kDqTileCols);
}

// The row and the chunk parity each lane addresses in an ldmatrix.x4 over a
// 16x16 slab: `a` for an A operand (and for a transposed B read from a
// row-major [k, n] tile), `b` for a B operand from a row-major [n, k] tile.
struct LaneRows {
  Value aRow, aChunkBit, bRow, bChunkBit;
  LaneRows(Emitter &e, Value lane) {
    Value laneRow = e.andI(lane, 7);
    aRow = e.addI(laneRow, e.mulI(e.andI(e.shRUI(lane, 3), 1), 8));
    aChunkBit = e.shRUI(lane, 4);
    bRow = e.addI(laneRow, e.mulI(e.shRUI(lane, 4), 8));
    bChunkBit = e.andI(e.shRUI(lane, 3), 1);
  }
};

// Four fragments from a swizzled tile at `tileBase`: 16 rows from `row`,
// chunks `chunk` (even) and `chunk` + 1.
std::array<Value, 4> loadFragments(Emitter &e, Value smem, Value tileBase,
                                   Value row, Value chunkBit, int64_t chunk,
                                   bool trans, int64_t rowBytes) {
  Value chunkIdx = e.xOrI(e.i32c(chunk), chunkBit);
  return e.ldmatrix4(
      e.smemAt(smem, e.addI(tileBase, swizzled(e, row, chunkIdx, rowBytes))),
      trans);
}

// Copies `rows` rows of Dh bf16 (global row stride `stride` elements) into a
// swizzled shared tile with cp.async, 16 bytes per thread and step.
void copyTile(Emitter &e, Value smem, Value tileOffset, Value src,
              int64_t stride, int64_t rows, int64_t headDim, int64_t threads,
              Value tid) {
  int64_t chunksPerRow = headDim / 8, chunks = rows * chunksPerRow;
  for (int64_t first = 0; first < chunks; first += threads) {
    Value idx = e.addI(tid, first);
    Value row = e.divUI(idx, chunksPerRow), chunk = e.remUI(idx, chunksPerRow);
    auto copy = [&] {
      Value dst = e.smemAt(smem, e.addI(tileOffset,
                                       swizzled(e, row, chunk, headDim * 2)));
      Value from = e.gep(src, e.bf16, e.addI(e.mulI(row, stride), e.mulI(chunk, 8)));
      e.cpAsync16(dst, from);
    };
    if (first + threads <= chunks)
      copy();
    else
      e.ifThen(e.cmpI(arith::CmpIPredicate::slt, idx, e.i32c(chunks)), copy);
  }
}

// Copies `bytes` (a multiple of 16) of contiguous data with cp.async.
void copyBytes(Emitter &e, Value smem, Value offset, Value src, int64_t bytes,
               int64_t threads, Value tid) {
  for (int64_t first = 0; first < bytes / 16; first += threads) {
    Value idx = e.addI(tid, first);
    auto copy = [&] {
      Value dst = e.smemAt(smem, e.addI(offset, e.shLI(idx, 4)));
      Value from = LLVM::GEPOp::create(e.b, e.loc, e.ptrG, e.b.getI8Type(), src,
                                       ValueRange{e.shLI(idx, 4)});
      e.cpAsync16(dst, from);
    };
    if (first + threads <= bytes / 16)
      copy();
    else
      e.ifThen(e.cmpI(arith::CmpIPredicate::slt, idx, e.i32c(bytes / 16)),
               copy);
  }
}

// The document holding absolute token `token` (b·S + i): its first and last
// token, relative to batch row `rowStart` and clamped to the row. A
// branch-free binary search for the last d with cu[d] <= token, unrolled
// over the static length of cu_seqlens.
std::pair<Value, Value> documentBounds(Emitter &e, const AttnShape &s,
                                       Value cu, Value token, Value rowStart) {
  int64_t last = s.cuLen - 2; // the last document index
  Value d = e.i32c(0);
  if (last > 0)
    for (int64_t step = (int64_t)llvm::bit_floor((uint64_t)last); step >= 1; step /= 2) {
      Value cand = e.addI(d, step);
      Value inRange = e.cmpI(arith::CmpIPredicate::sle, cand, e.i32c(last));
      Value at = e.loadPtr(e.i32, e.gep(cu, e.i32, e.minSI(cand, e.i32c(last))));
      d = e.select(
          e.andI(inRange, e.cmpI(arith::CmpIPredicate::sle, at, token)), cand,
          d);
    }
  Value first = e.loadPtr(e.i32, e.gep(cu, e.i32, d));
  Value end = e.loadPtr(e.i32, e.gep(cu, e.i32, e.addI(d, 1)));
  Value lo = e.maxSI(e.subI(first, rowStart), e.i32c(0));
  Value hi = e.minSI(e.subI(e.addI(end, -1), rowStart), e.i32c(s.seq - 1));
  return {lo, hi};
}

// ---------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------

QueryTile queryTileOf(Emitter &e, const AttnShape &s, Value cu, int64_t rows,
                      int64_t keyTile) {
  QueryTile t;
  Value bid = e.blockId32();
  Value bh = e.remUI(bid, s.batch * s.qHeads);
  Value qt = e.subI(e.i32c(s.seq / rows - 1), e.divUI(bid, s.batch * s.qHeads));
  t.batch = e.divUI(bh, s.qHeads);
  t.head = e.remUI(bh, s.qHeads);
  t.kvHead = e.divUI(t.head, s.group());
  t.q0 = e.mulI(qt, rows);
  t.rowStart = e.mulI(t.batch, s.seq);
  t.bounds = [&e, &s, cu, rowStart = t.rowStart](Value row) {
    Value lo = e.i32c(0), hi = e.i32c(s.seq - 1);
    if (cu)
      std::tie(lo, hi) = documentBounds(e, s, cu, e.addI(rowStart, row), rowStart);
    if (s.causal)
      hi = row;
    return std::pair<Value, Value>{lo, hi};
  };
  Value loFirst, hiLast;
  std::tie(loFirst, t.hiFirst) = t.bounds(t.q0);
  std::tie(t.loLast, hiLast) = t.bounds(e.addI(t.q0, rows - 1));
  t.tileBegin = e.divUI(loFirst, keyTile);
  t.tileEnd = e.addI(e.divUI(hiLast, keyTile), 1);
  return t;
}

KeyTile keyTileOf(Emitter &e, const AttnShape &s, Value ws, int64_t keyRows,
                  int64_t queryRows) {
  KeyTile t;
  BwdWorkspace w(s);
  Value bid = e.blockId32();
  Value bh = e.remUI(bid, s.batch * s.kvHeads);
  t.batch = e.divUI(bh, s.kvHeads);
  t.kvHead = e.remUI(bh, s.kvHeads);
  t.j0 = e.mulI(e.divUI(bid, s.batch * s.kvHeads), keyRows);
  t.rowStart = e.mulI(t.batch, s.seq);
  auto docBound = [&](int64_t base, Value pos) {
    return e.loadPtr(e.i32, e.gep(ws, e.i32, e.addI(e.addI(t.rowStart, pos), base)));
  };
  bool docs = s.cuLen > 0;
  Value qLo = s.causal ? t.j0 : (docs ? docBound(w.docLo, t.j0) : e.i32c(0));
  Value qHi = docs ? docBound(w.docHi, e.addI(t.j0, keyRows - 1))
                   : e.i32c(s.seq - 1);
  t.queryRows = queryRows;
  t.group = s.group();
  t.tileLo = e.divUI(qLo, queryRows);
  t.tilesPerHead = e.addI(e.subI(e.divUI(qHi, queryRows), t.tileLo), 1);
  t.steps = e.mulI(t.tilesPerHead, s.group());
  return t;
}

Value KeyTile::headOf(Emitter &e, Value step) const {
  return e.addI(e.mulI(kvHead, group), e.divUI(step, tilesPerHead));
}

Value KeyTile::rowOf(Emitter &e, Value step) const {
  return e.mulI(e.addI(tileLo, e.remUI(step, tilesPerHead)), queryRows);
}

// Query row `row` of the tile from this thread's accumulators: out = O / l
// (bf16; `o` holds the thread's column pairs 8·i + 2·t4, +1), lse = m·scale
// + ln l, with l summed over the row's four threads first.
void storeOutputRow(Emitter &e, const AttnShape &s, const QueryTile &t,
                    Value out, Value lse, Value row, Value t4,
                    ArrayRef<Value> o, Value m, Value lsum) {
  const int64_t D = s.headDim;
  lsum = e.addF(lsum, e.shuffleXor(lsum, 1));
  lsum = e.addF(lsum, e.shuffleXor(lsum, 2));
  Value inv = e.divF(e.f32c(1.0), lsum);
  Value outRow = e.gep(out, e.bf16,
                       e.addI(e.mulI(e.addI(t.rowStart, row), s.qHeads * D),
                              e.addI(e.mulI(t.head, D), e.mulI(t4, 2))));
  for (int64_t dt = 0; dt < D / 8; ++dt) {
    Value x0 = e.mulF(o[2 * dt], inv), x1 = e.mulF(o[2 * dt + 1], inv);
    e.storePtr(e.packBf16(x0, x1), e.gep(outRow, e.bf16, e.i32c(dt * 8)), 4);
  }
  Value value = e.addF(e.mulF(m, e.f32c(s.scale)), e.mulF(e.log2(lsum), e.f32c(kLn2)));
  e.ifThen(e.cmpI(arith::CmpIPredicate::eq, t4, e.i32c(0)), [&] {
    Value at = e.addI(e.mulI(e.addI(e.mulI(t.batch, s.qHeads), t.head), s.seq), row);
    e.storePtr(value, e.gep(lse, e.f32, at), 4);
  });
}

} // namespace octet::codegen::attention

namespace octet::codegen {
namespace {

using namespace attention;

// Arguments: q, k, v, [cu_seqlens], out, lse.
int64_t buildForward(OpBuilder &b, gpu::GPUModuleOp mod, StringRef name,
                     const AttnShape &s, const FwdTiling &t, Location loc) {
  bool docs = s.cuLen > 0;
  gpu::GPUFuncOp f = makeKernel(b, mod, name, docs ? 6 : 5, t.threads(), loc);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(f.getBody().front().getTerminator());
  Emitter e(b, loc);
  auto args = f.getArguments();
  Value q = args[0], k = args[1], v = args[2];
  Value cu = docs ? args[3] : Value();
  Value out = args[docs ? 4 : 3], lse = args[docs ? 5 : 4];

  const int64_t D = s.headDim, Br = t.queryTile(), Bc = t.keyTile,
                MT = t.mTiles, rowBytes = D * 2;
  const int64_t qStride = s.qHeads * D, kvStride = s.kvHeads * D;
  const int64_t dTiles = D / 8, kTiles = Bc / 8;
  Value smem = sharedBase(e, mod, "octet_attention_smem");
  Value sQ = e.i32c(0), sK = e.i32c(Br * rowBytes), sV = e.i32c((Br + Bc) * rowBytes);

  Value tid = e.threadId32();
  Value warp = e.shRUI(tid, 5), lane = e.andI(tid, 31);
  Value g = e.shRUI(lane, 2), t4 = e.andI(lane, 3);
  QueryTile tile = queryTileOf(e, s, cu, Br, Bc);
  Value head = tile.head, kvHead = tile.kvHead, q0 = tile.q0;
  Value rowStart = tile.rowStart, loLast = tile.loLast, hiFirst = tile.hiFirst;
  Value tileBegin = tile.tileBegin, tileEnd = tile.tileEnd;
  auto &bounds = tile.bounds;

  // Rows g and g + 8 of each of the warp's m-tiles.
  Value warpRow = e.mulI(warp, kTile * MT);
  SmallVector<Value> rowLo, rowHi, rowIdx;
  for (int64_t mt = 0; mt < MT; ++mt)
    for (int64_t half = 0; half < 2; ++half) {
      Value row = e.addI(q0, e.addI(warpRow, e.addI(g, mt * kTile + 8 * half)));
      auto [lo, hi] = bounds(row);
      rowIdx.push_back(row);
      rowLo.push_back(lo);
      rowHi.push_back(hi);
    }

  Value qBase = e.gep(q, e.bf16, e.addI(e.mulI(e.addI(rowStart, q0), qStride),
                                       e.mulI(head, D)));
  Value kvBase = e.mulI(kvHead, D);
  auto kvTile = [&](Value base, Value tile) {
    return e.gep(base, e.bf16,
                 e.addI(e.mulI(e.addI(rowStart, e.mulI(tile, Bc)), kvStride), kvBase));
  };
  copyTile(e, smem, sQ, qBase, qStride, Br, D, t.threads(), tid);
  copyTile(e, smem, sK, kvTile(k, tileBegin), kvStride, Bc, D, t.threads(), tid);
  e.cpAsyncCommit();

  LaneRows lanes(e, lane);
  Value aRow = lanes.aRow, aChunkBit = lanes.aChunkBit;
  Value bRow = lanes.bRow, bChunkBit = lanes.bChunkBit;
  auto ldAt = [&](Value tileBase, Value row, Value chunkBit, int64_t chunk,
                  bool trans) {
    return loadFragments(e, smem, tileBase, row, chunkBit, chunk, trans,
                         rowBytes);
  };

  // Loop state: O (MT x dTiles x 4), then m and l (2 per m-tile).
  Value zero = e.f32c(0.0), negInf = e.f32c(-std::numeric_limits<float>::infinity());
  SmallVector<Value> init;
  for (int64_t i = 0; i < MT * dTiles * 4; ++i)
    init.push_back(zero);
  for (int64_t i = 0; i < 2 * MT; ++i)
    init.push_back(negInf);
  for (int64_t i = 0; i < 2 * MT; ++i)
    init.push_back(zero);
  auto loop = scf::ForOp::create(b, loc, tileBegin, tileEnd, e.i32c(1), init);
  {
    OpBuilder::InsertionGuard inLoop(b);
    b.setInsertionPointToStart(loop.getBody());
    Value j = loop.getInductionVar();
    auto carried = loop.getRegionIterArgs();
    SmallVector<Value> o(carried.begin(), carried.begin() + MT * dTiles * 4);
    SmallVector<Value> m(carried.begin() + MT * dTiles * 4,
                         carried.begin() + MT * dTiles * 4 + 2 * MT);
    SmallVector<Value> l(carried.begin() + MT * dTiles * 4 + 2 * MT,
                         carried.end());
    auto oAt = [&](int64_t mt, int64_t dt, int64_t i) -> Value & {
      return o[(mt * dTiles + dt) * 4 + i];
    };

    e.cpAsyncWaitAll();
    e.barrier();
    copyTile(e, smem, sV, kvTile(v, j), kvStride, Bc, D, t.threads(), tid);
    e.cpAsyncCommit();

    // S = Q·Kᵀ for the warp's rows.
    SmallVector<Value> sAcc(MT * kTiles * 4, zero);
    auto sAt = [&](int64_t mt, int64_t nt, int64_t i) -> Value & {
      return sAcc[(mt * kTiles + nt) * 4 + i];
    };
    for (int64_t kk = 0; kk < D / 16; ++kk) {
      SmallVector<std::array<Value, 4>> a;
      for (int64_t mt = 0; mt < MT; ++mt)
        a.push_back(ldAt(sQ, e.addI(warpRow, e.addI(aRow, mt * kTile)), aChunkBit,
                         2 * kk, false));
      for (int64_t np = 0; np < Bc / 16; ++np) {
        auto bf = ldAt(sK, e.addI(bRow, np * 16), bChunkBit, 2 * kk, false);
        for (int64_t mt = 0; mt < MT; ++mt) {
          SmallVector<Value> lo(4), hi(4);
          for (int i = 0; i < 4; ++i) {
            lo[i] = sAt(mt, 2 * np, i);
            hi[i] = sAt(mt, 2 * np + 1, i);
          }
          e.mma(a[mt], {bf[0], bf[1]}, lo);
          e.mma(a[mt], {bf[2], bf[3]}, hi);
          for (int i = 0; i < 4; ++i) {
            sAt(mt, 2 * np, i) = lo[i];
            sAt(mt, 2 * np + 1, i) = hi[i];
          }
        }
      }
    }

    // Keys outside a row's [lo, hi] get -inf; only tiles that cross some
    // row's bounds pay for it.
    Value keyBase = e.mulI(j, Bc);
    Value needsMask = e.orI(
        e.cmpI(arith::CmpIPredicate::slt, keyBase, loLast),
        e.cmpI(arith::CmpIPredicate::sgt, e.addI(keyBase, Bc - 1), hiFirst));
    auto maskIf = scf::IfOp::create(b, loc, TypeRange(ValueRange(sAcc)), needsMask,
                                    /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard inIf(b);
      b.setInsertionPointToStart(maskIf.thenBlock());
      SmallVector<Value> masked(sAcc);
      Value colBase = e.addI(keyBase, e.mulI(t4, 2));
      for (int64_t mt = 0; mt < MT; ++mt)
        for (int64_t nt = 0; nt < kTiles; ++nt)
          for (int64_t i = 0; i < 4; ++i) {
            int64_t r = mt * 2 + i / 2;
            Value key = e.addI(colBase, nt * 8 + (i % 2));
            Value out = e.orI(e.cmpI(arith::CmpIPredicate::slt, key, rowLo[r]),
                              e.cmpI(arith::CmpIPredicate::sgt, key, rowHi[r]));
            Value &x = masked[(mt * kTiles + nt) * 4 + i];
            x = e.select(out, negInf, x);
          }
      scf::YieldOp::create(b, loc, masked);
      b.setInsertionPointToStart(maskIf.elseBlock());
      scf::YieldOp::create(b, loc, sAcc);
    }
    for (auto [i, r] : llvm::enumerate(maskIf.getResults()))
      sAcc[i] = r;

    // Online softmax in the exp2 domain: p = 2^(s·c − m·c), c = scale·log2 e.
    Value c = e.f32c(s.scale * kLog2e);
    SmallVector<Value> mNew(2 * MT), lNew(2 * MT);
    for (int64_t mt = 0; mt < MT; ++mt)
      for (int64_t half = 0; half < 2; ++half) {
        int64_t r = mt * 2 + half;
        Value mx = m[r];
        for (int64_t nt = 0; nt < kTiles; ++nt)
          for (int64_t i = 0; i < 2; ++i)
            mx = e.maximumF(mx, sAt(mt, nt, half * 2 + i));
        mx = e.maximumF(mx, e.shuffleXor(mx, 1));
        mx = e.maximumF(mx, e.shuffleXor(mx, 2));
        // A row with no visible key so far keeps m = -inf; exponents then
        // use 0 so that they give 0, not NaN.
        Value mUse =
            e.select(e.cmpF(arith::CmpFPredicate::OEQ, mx, negInf), zero, mx);
        Value alpha = e.exp2(e.mulF(e.subF(m[r], mUse), c));
        Value negMc = e.mulF(mUse, e.f32c(-s.scale * kLog2e));
        Value sum = zero;
        for (int64_t nt = 0; nt < kTiles; ++nt)
          for (int64_t i = 0; i < 2; ++i) {
            Value &x = sAt(mt, nt, half * 2 + i);
            x = e.exp2(e.fma(x, c, negMc));
            sum = e.addF(sum, x);
          }
        // l stays a per-thread partial sum until the end.
        lNew[r] = e.fma(l[r], alpha, sum);
        mNew[r] = mx;
        for (int64_t dt = 0; dt < dTiles; ++dt)
          for (int64_t i = 0; i < 2; ++i)
            oAt(mt, dt, half * 2 + i) = e.mulF(oAt(mt, dt, half * 2 + i), alpha);
      }
    // P as the A operand of P·V: the accumulator layout of two n-tiles is
    // the A layout of one k-step.
    SmallVector<std::array<Value, 4>> p; // [mt][kk]
    for (int64_t mt = 0; mt < MT; ++mt)
      for (int64_t kk = 0; kk < Bc / 16; ++kk)
        p.push_back({e.packBf16(sAt(mt, 2 * kk, 0), sAt(mt, 2 * kk, 1)),
                     e.packBf16(sAt(mt, 2 * kk, 2), sAt(mt, 2 * kk, 3)),
                     e.packBf16(sAt(mt, 2 * kk + 1, 0), sAt(mt, 2 * kk + 1, 1)),
                     e.packBf16(sAt(mt, 2 * kk + 1, 2), sAt(mt, 2 * kk + 1, 3))});

    // V arrives; K is free for the next tile, which loads under P·V.
    e.cpAsyncWaitAll();
    e.barrier();
    Value next = e.addI(j, 1);
    e.ifThen(e.cmpI(arith::CmpIPredicate::slt, next, tileEnd), [&] {
      copyTile(e, smem, sK, kvTile(k, next), kvStride, Bc, D, t.threads(), tid);
      e.cpAsyncCommit();
    });

    for (int64_t kk = 0; kk < Bc / 16; ++kk)
      for (int64_t dp = 0; dp < D / 16; ++dp) {
        auto bf = ldAt(sV, e.addI(aRow, kk * 16), aChunkBit, 2 * dp, true);
        for (int64_t mt = 0; mt < MT; ++mt) {
          SmallVector<Value> lo(4), hi(4);
          for (int i = 0; i < 4; ++i) {
            lo[i] = oAt(mt, 2 * dp, i);
            hi[i] = oAt(mt, 2 * dp + 1, i);
          }
          e.mma(p[mt * (Bc / 16) + kk], {bf[0], bf[1]}, lo);
          e.mma(p[mt * (Bc / 16) + kk], {bf[2], bf[3]}, hi);
          for (int i = 0; i < 4; ++i) {
            oAt(mt, 2 * dp, i) = lo[i];
            oAt(mt, 2 * dp + 1, i) = hi[i];
          }
        }
      }
    SmallVector<Value> yield(o);
    yield.append(mNew);
    yield.append(lNew);
    scf::YieldOp::create(b, loc, yield);
  }

  // out = O / l (bf16), lse = m·scale + ln l.
  auto results = loop.getResults();
  for (int64_t mt = 0; mt < MT; ++mt)
    for (int64_t half = 0; half < 2; ++half) {
      int64_t r = mt * 2 + half;
      SmallVector<Value> o;
      for (int64_t dt = 0; dt < dTiles; ++dt)
        for (int64_t i = 0; i < 2; ++i)
          o.push_back(results[(mt * dTiles + dt) * 4 + half * 2 + i]);
      storeOutputRow(e, s, tile, out, lse, rowIdx[r], t4, o,
                     results[MT * dTiles * 4 + r],
                     results[MT * dTiles * 4 + 2 * MT + r]);
    }
  return (Br + 2 * Bc) * rowBytes;
}

// ---------------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------------

struct BwdArgs {
  Value dout, q, k, v, out, lse, cu, dq, dk, dv, ws;
  BwdArgs(gpu::GPUFuncOp f, bool docs) {
    auto a = f.getArguments();
    dout = a[0], q = a[1], k = a[2], v = a[3], out = a[4], lse = a[5];
    unsigned i = 6;
    cu = docs ? a[i++] : Value();
    dq = a[i++], dk = a[i++], dv = a[i++], ws = a[i++];
  }
};

// D = rowsum(dO∘O) per (token, head), the dQ accumulator zeroed, and each
// token's document bounds. D / 8 lanes per (token, head) row, 8 elements
// each, so that a warp's loads and stores are whole consecutive rows: a
// thread a row read and zeroed 256- and 512-byte strided pieces (Dh 128),
// and ran at a quarter of the bandwidth.
int64_t prepLanes(const AttnShape &s) { return s.headDim / 8; }

int64_t buildPrep(OpBuilder &b, gpu::GPUModuleOp mod, StringRef name,
                  const AttnShape &s, Location loc) {
  bool docs = s.cuLen > 0;
  gpu::GPUFuncOp f = makeKernel(b, mod, name, docs ? 11 : 10, kPrepThreads, loc);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(f.getBody().front().getTerminator());
  Emitter e(b, loc);
  BwdArgs a(f, docs);
  BwdWorkspace ws(s);
  const int64_t lanes = prepLanes(s);
  assert(lanes >= 1 && lanes <= 32 && kPrepThreads % lanes == 0);
  int64_t rows = s.batch * s.seq * s.qHeads, D = s.headDim;
  Value thread = e.addI(e.mulI(e.blockId32(), kPrepThreads), e.threadId32());
  Value part = e.remUI(thread, lanes);
  Value wanted = e.divUI(thread, lanes);
  // The shuffles take the whole warp: every thread sums a row (the last
  // one, past the end) and only those of real rows store.
  Value inBounds = e.cmpI(arith::CmpIPredicate::slt, wanted, e.i32c(rows));
  Value idx = e.select(inBounds, wanted, e.i32c(rows - 1));
  Type v8bf = VectorType::get({8}, e.bf16);
  Value at = e.addI(e.mulI(idx, D), e.mulI(part, 8));
  Value x = e.toF32(e.loadPtr(v8bf, e.gep(a.dout, e.bf16, at), 16));
  Value y = e.toF32(e.loadPtr(v8bf, e.gep(a.out, e.bf16, at), 16));
  Value sum = e.f32c(0.0);
  for (int64_t i = 0; i < 8; ++i)
    sum = e.fma(e.extract(x, i), e.extract(y, i), sum);
  sum = warpSum(e, sum, lanes);
  e.ifThen(inBounds, [&] {
    Value token = e.divUI(idx, s.qHeads), head = e.remUI(idx, s.qHeads);
    Value batch = e.divUI(token, s.seq), pos = e.remUI(token, s.seq);
    auto v4f = VectorType::get({4}, e.f32);
    Value zero4 = e.splat(v4f, 0.0);
    e.storePtr(zero4, e.gep(a.ws, e.f32, e.addI(at, ws.dq)), 16);
    e.storePtr(zero4, e.gep(a.ws, e.f32, e.addI(at, ws.dq + 4)), 16);
    e.ifThen(e.cmpI(arith::CmpIPredicate::eq, part, e.i32c(0)), [&] {
      Value deltaAt =
          e.addI(e.mulI(e.addI(e.mulI(batch, s.qHeads), head), s.seq), pos);
      e.storePtr(sum, e.gep(a.ws, e.f32, e.addI(deltaAt, ws.delta)), 4);
      if (docs)
        e.ifThen(e.cmpI(arith::CmpIPredicate::eq, head, e.i32c(0)), [&] {
          auto [lo, hi] =
              documentBounds(e, s, a.cu, token, e.mulI(batch, s.seq));
          e.storePtr(lo, e.gep(a.ws, e.i32, e.addI(token, ws.docLo)), 4);
          e.storePtr(hi, e.gep(a.ws, e.i32, e.addI(token, ws.docHi)), 4);
        });
    });
  });
  return 0;
}

// dQ = scale · accumulator, to bf16; 8 elements per thread.
int64_t buildConvert(OpBuilder &b, gpu::GPUModuleOp mod, StringRef name,
                     const AttnShape &s, bool tiledDq, Location loc) {
  bool docs = s.cuLen > 0;
  gpu::GPUFuncOp f =
      makeKernel(b, mod, name, docs ? 11 : 10, kConvertThreads, loc);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(f.getBody().front().getTerminator());
  Emitter e(b, loc);
  BwdArgs a(f, docs);
  int64_t groups = s.batch * s.seq * s.qHeads * s.headDim / 8;
  Value idx = e.addI(e.mulI(e.blockId32(), kConvertThreads), e.threadId32());
  e.ifThen(e.cmpI(arith::CmpIPredicate::slt, idx, e.i32c(groups)), [&] {
    Type v4f = VectorType::get({4}, e.f32);
    auto v8f = VectorType::get({8}, e.f32);
    Type v8bf = VectorType::get({8}, e.bf16);
    Value at = e.mulI(idx, 8);
    // The thread's 8 columns are one 32-byte piece of a tile row in the
    // Hopper backward's layout.
    Value from = at;
    if (tiledDq) {
      Value column = e.remUI(at, s.headDim);
      Value headRow = e.divUI(at, s.headDim);
      Value head = e.remUI(headRow, s.qHeads), token = e.divUI(headRow, s.qHeads);
      Value batch = e.divUI(token, s.seq), t = e.remUI(token, s.seq);
      Value r = e.remUI(t, kDqTileRows), c = e.remUI(column, kDqTileCols);
      Value piece = e.xOrI(e.divUI(c, 8), e.andI(r, 7));
      from = e.addI(dqTileWord(e, s, batch, head, e.subI(t, r),
                               e.divUI(column, kDqTileCols)),
                    e.addI(e.mulI(r, kDqTileCols), e.mulI(piece, 8)));
    }
    Value lo = e.loadPtr(v4f, e.gep(a.ws, e.f32, from), 16);
    Value hi = e.loadPtr(v4f, e.gep(a.ws, e.f32, e.addI(from, 4)), 16);
    Value both = e.shuffle(lo, hi, {0, 1, 2, 3, 4, 5, 6, 7});
    Value scale = e.broadcast(v8f, e.f32c(s.scale));
    Value scaled = e.mulF(both, scale);
    e.storePtr(e.fromF32(scaled, e.bf16), e.gep(a.dq, e.bf16, at), 16);
  });
  return 0;
}

// dK and dV for one key tile of one kv head, over every query tile of the
// kv head's query heads that sees the tile; dQ through f32 atomics.
int64_t buildBackward(OpBuilder &b, gpu::GPUModuleOp mod, StringRef name,
                      const AttnShape &s, const BwdTiling &t, Location loc) {
  bool docs = s.cuLen > 0;
  gpu::GPUFuncOp f = makeKernel(b, mod, name, docs ? 11 : 10, t.threads(), loc);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(f.getBody().front().getTerminator());
  Emitter e(b, loc);
  BwdArgs a(f, docs);
  BwdWorkspace ws(s);

  const int64_t D = s.headDim, Bn = t.keyTile(), Bm = t.queryTile(),
                rowBytes = D * 2, threads = t.threads();
  const int64_t qStride = s.qHeads * D, kvStride = s.kvHeads * D;
  const int64_t dTiles = D / 8;
  // Shared memory: K, V, two stages of (Q, dO, lse, D[, doc lo, doc hi]),
  // then dSᵀ [Bn, Bm] bf16.
  const int64_t sideBytes = Bm * 4;
  const int64_t stageBytes = 2 * Bm * rowBytes + (docs ? 4 : 2) * sideBytes;
  const int64_t offV = Bn * rowBytes, offStages = 2 * Bn * rowBytes;
  const int64_t offDs = offStages + 2 * stageBytes;
  const int64_t dsRowBytes = Bm * 2;
  const int64_t sharedBytes = offDs + Bn * dsRowBytes;
  Value smem = sharedBase(e, mod, "octet_attention_smem");

  Value tid = e.threadId32(), bid = e.blockId32();
  Value warp = e.shRUI(tid, 5), lane = e.andI(tid, 31);
  Value g = e.shRUI(lane, 2), t4 = e.andI(lane, 3);
  KeyTile tile = keyTileOf(e, s, a.ws, Bn, Bm);
  Value batch = tile.batch, kvHead = tile.kvHead, j0 = tile.j0,
        rowStart = tile.rowStart, steps = tile.steps;
  auto wsWord = [&](int64_t base, Value index, Type type) {
    return e.gep(a.ws, type, e.addI(index, base));
  };

  Value kvOffset = e.addI(e.mulI(e.addI(rowStart, j0), kvStride), e.mulI(kvHead, D));
  copyTile(e, smem, e.i32c(0), e.gep(a.k, e.bf16, kvOffset), kvStride, Bn, D,
           threads, tid);
  copyTile(e, smem, e.i32c(offV), e.gep(a.v, e.bf16, kvOffset), kvStride, Bn, D,
           threads, tid);

  auto stepHead = [&](Value step) { return tile.headOf(e, step); };
  auto stepRow = [&](Value step) { return tile.rowOf(e, step); };
  auto stageBase = [&](Value stage) {
    return e.addI(e.i32c(offStages), e.mulI(stage, stageBytes));
  };
  auto loadStage = [&](Value step) {
    Value head = stepHead(step), i0 = stepRow(step);
    Value base = stageBase(e.andI(step, 1));
    Value rows = e.addI(e.mulI(e.addI(rowStart, i0), qStride), e.mulI(head, D));
    copyTile(e, smem, base, e.gep(a.q, e.bf16, rows), qStride, Bm, D, threads,
             tid);
    copyTile(e, smem, e.addI(base, Bm * rowBytes), e.gep(a.dout, e.bf16, rows),
             qStride, Bm, D, threads, tid);
    Value side = e.addI(e.mulI(e.addI(e.mulI(batch, s.qHeads), head), s.seq), i0);
    Value sideOff = e.addI(base, 2 * Bm * rowBytes);
    copyBytes(e, smem, sideOff, e.gep(a.lse, e.f32, side), sideBytes, threads, tid);
    copyBytes(e, smem, e.addI(sideOff, sideBytes),
              wsWord(ws.delta, side, e.f32), sideBytes, threads, tid);
    if (docs) {
      copyBytes(e, smem, e.addI(sideOff, 2 * sideBytes),
                wsWord(ws.docLo, e.addI(rowStart, i0), e.i32), sideBytes,
                threads, tid);
      copyBytes(e, smem, e.addI(sideOff, 3 * sideBytes),
                wsWord(ws.docHi, e.addI(rowStart, i0), e.i32), sideBytes,
                threads, tid);
    }
  };
  e.ifThen(e.cmpI(arith::CmpIPredicate::slt, e.i32c(0), steps),
           [&] { loadStage(e.i32c(0)); });
  e.cpAsyncCommit();

  LaneRows lanes(e, lane);
  Value aRow = lanes.aRow, aChunkBit = lanes.aChunkBit;
  Value bRow = lanes.bRow, bChunkBit = lanes.bChunkBit;
  auto ldAt = [&](Value tileBase, Value row, Value chunkBit, int64_t chunk,
                  bool trans, int64_t tileRowBytes) {
    return loadFragments(e, smem, tileBase, row, chunkBit, chunk, trans,
                         tileRowBytes);
  };
  Value warpRow = e.mulI(warp, kTile);

  Value zero = e.f32c(0.0);
  SmallVector<Value> init(2 * dTiles * 4, zero); // dK then dV
  auto loop = scf::ForOp::create(b, loc, e.i32c(0), steps, e.i32c(1), init);
  {
    OpBuilder::InsertionGuard inLoop(b);
    b.setInsertionPointToStart(loop.getBody());
    Value step = loop.getInductionVar();
    SmallVector<Value> dk(loop.getRegionIterArgs().begin(),
                          loop.getRegionIterArgs().begin() + dTiles * 4);
    SmallVector<Value> dv(loop.getRegionIterArgs().begin() + dTiles * 4,
                          loop.getRegionIterArgs().end());
    e.cpAsyncWaitAll();
    e.barrier();
    Value next = e.addI(step, 1);
    e.ifThen(e.cmpI(arith::CmpIPredicate::slt, next, steps), [&] {
      loadStage(next);
      e.cpAsyncCommit();
    });
    Value head = stepHead(step), i0 = stepRow(step);
    Value base = stageBase(e.andI(step, 1));
    Value sQ = base, sDo = e.addI(base, Bm * rowBytes);
    Value sSide = e.addI(base, 2 * Bm * rowBytes);

    Value keyRow0 = e.addI(j0, e.addI(warpRow, g));
    Value visibleAll;
    if (docs) {
      Value loMax = e.loadPtr(
          e.i32, e.smemAt(smem, e.addI(sSide, 2 * sideBytes + (Bm - 1) * 4)));
      Value hiMin = s.causal ? i0
                             : e.loadPtr(e.i32, e.smemAt(smem, e.addI(sSide, 3 * sideBytes)));
      visibleAll =
          e.andI(e.cmpI(arith::CmpIPredicate::sle, loMax, j0),
                 e.cmpI(arith::CmpIPredicate::sle, e.addI(j0, Bn - 1), hiMin));
    } else {
      visibleAll =
          s.causal ? e.cmpI(arith::CmpIPredicate::sle, e.addI(j0, Bn - 1), i0)
                   : arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1)
                         .getResult();
    }
    Value c = e.f32c(s.scale * kLog2e);
    auto aFrom = [&](ArrayRef<Value> acc, int64_t kk) -> std::array<Value, 4> {
      return {e.packBf16(acc[(2 * kk) * 4 + 0], acc[(2 * kk) * 4 + 1]),
              e.packBf16(acc[(2 * kk) * 4 + 2], acc[(2 * kk) * 4 + 3]),
              e.packBf16(acc[(2 * kk + 1) * 4 + 0], acc[(2 * kk + 1) * 4 + 1]),
              e.packBf16(acc[(2 * kk + 1) * 4 + 2], acc[(2 * kk + 1) * 4 + 3])};
    };
    // The query tile in passes of kPassColumns columns: fewer scores live
    // at once next to the dK and dV accumulators.
    for (int64_t pass = 0; pass < Bm / kPassColumns; ++pass) {
      const int64_t col0 = pass * kPassColumns, nTiles = kPassColumns / 8;
      // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ for the warp's 16 key rows.
      SmallVector<Value> st(nTiles * 4, zero), dpt(nTiles * 4, zero);
      for (int64_t kk = 0; kk < D / 16; ++kk) {
        auto ak = ldAt(e.i32c(0), e.addI(warpRow, aRow), aChunkBit, 2 * kk, false,
                       rowBytes);
        auto av = ldAt(e.i32c(offV), e.addI(warpRow, aRow), aChunkBit, 2 * kk,
                       false, rowBytes);
        for (int64_t np = 0; np < nTiles / 2; ++np) {
          Value row = e.addI(bRow, col0 + np * 16);
          auto bq = ldAt(sQ, row, bChunkBit, 2 * kk, false, rowBytes);
          auto bdo = ldAt(sDo, row, bChunkBit, 2 * kk, false, rowBytes);
          e.mma(ak, {bq[0], bq[1]}, MutableArrayRef<Value>(&st[2 * np * 4], 4));
          e.mma(ak, {bq[2], bq[3]},
                MutableArrayRef<Value>(&st[(2 * np + 1) * 4], 4));
          e.mma(av, {bdo[0], bdo[1]}, MutableArrayRef<Value>(&dpt[2 * np * 4], 4));
          e.mma(av, {bdo[2], bdo[3]},
                MutableArrayRef<Value>(&dpt[(2 * np + 1) * 4], 4));
        }
      }

      // Pᵀ = 2^(s·c − lse·log2 e) where key row r is visible to query
      // column q, dSᵀ = Pᵀ ∘ (dPᵀ − D[q]).
      SmallVector<Value> pt(nTiles * 4), dst(nTiles * 4);
      for (int64_t nt = 0; nt < nTiles; ++nt)
        for (int64_t i = 0; i < 2; ++i) {
          Value colIdx = e.addI(e.mulI(t4, 2), col0 + nt * 8 + i);
          Value colByte = e.shLI(colIdx, 2);
          Value l = e.loadPtr(e.f32, e.smemAt(smem, e.addI(sSide, colByte)), 4);
          Value dd = e.loadPtr(
              e.f32, e.smemAt(smem, e.addI(e.addI(sSide, sideBytes), colByte)), 4);
          Value negL = e.mulF(l, e.f32c(-kLog2e));
          Value lo = e.i32c(0), hi = e.i32c(s.seq - 1);
          if (docs) {
            lo = e.loadPtr(e.i32, e.smemAt(smem, e.addI(e.addI(sSide, 2 * sideBytes),
                                                    colByte)));
            hi = e.loadPtr(e.i32, e.smemAt(smem, e.addI(e.addI(sSide, 3 * sideBytes),
                                                    colByte)));
          }
          if (s.causal)
            hi = e.addI(i0, colIdx);
          for (int64_t half = 0; half < 2; ++half) {
            int64_t at = nt * 4 + half * 2 + i;
            Value keyRow = e.addI(keyRow0, 8 * half);
            Value visible =
                e.orI(visibleAll,
                      e.andI(e.cmpI(arith::CmpIPredicate::sle, lo, keyRow),
                             e.cmpI(arith::CmpIPredicate::sle, keyRow, hi)));
            Value pv = e.select(visible, e.exp2(e.fma(st[at], c, negL)), zero);
            pt[at] = pv;
            dst[at] = e.mulF(pv, e.subF(dpt[at], dd));
          }
        }
      // dV += Pᵀ·dO, dK += dSᵀ·Q (scaled at the end).
      for (int64_t kk = 0; kk < nTiles / 2; ++kk) {
        auto ap = aFrom(pt, kk), ads = aFrom(dst, kk);
        Value row = e.addI(aRow, col0 + kk * 16);
        for (int64_t dp = 0; dp < D / 16; ++dp) {
          auto bdo = ldAt(sDo, row, aChunkBit, 2 * dp, true, rowBytes);
          auto bq = ldAt(sQ, row, aChunkBit, 2 * dp, true, rowBytes);
          e.mma(ap, {bdo[0], bdo[1]}, MutableArrayRef<Value>(&dv[2 * dp * 4], 4));
          e.mma(ap, {bdo[2], bdo[3]},
                MutableArrayRef<Value>(&dv[(2 * dp + 1) * 4], 4));
          e.mma(ads, {bq[0], bq[1]}, MutableArrayRef<Value>(&dk[2 * dp * 4], 4));
          e.mma(ads, {bq[2], bq[3]},
                MutableArrayRef<Value>(&dk[(2 * dp + 1) * 4], 4));
        }
      }
      // dSᵀ to shared memory (bf16, swizzled rows of Bm), for dQ = dS·K.
      for (int64_t nt = 0; nt < nTiles; ++nt)
        for (int64_t half = 0; half < 2; ++half) {
          Value row = e.addI(warpRow, e.addI(g, 8 * half));
          Value chunk = e.i32c(col0 / 8 + nt);
          Value off = e.addI(e.i32c(offDs), e.addI(swizzled(e, row, chunk, dsRowBytes),
                                              e.mulI(t4, 4)));
          e.storePtr(e.packBf16(dst[nt * 4 + half * 2], dst[nt * 4 + half * 2 + 1]),
                  e.smemAt(smem, off), 4);
        }
    }
    e.barrier();
    // dQ rows warp·16.. of the query tile, 64 columns at a time.
    // dS is stored transposed: A fragments of dS come from dSᵀ with the
    // lanes of a B operand, transposed.
    Value dsARow = bRow, dsChunkBit = bChunkBit;
    for (int64_t dh = 0; dh < D / 64; ++dh) {
      SmallVector<Value> acc(8 * 4, zero);
      for (int64_t kk = 0; kk < Bn / 16; ++kk) {
        Value chunk = e.addI(e.mulI(warp, 2), dsChunkBit);
        Value row = e.addI(dsARow, kk * 16);
        auto ads = e.ldmatrix4(
            e.smemAt(smem, e.addI(e.i32c(offDs), swizzled(e, row, chunk, dsRowBytes))),
            true);
        for (int64_t dp = 0; dp < 4; ++dp) {
          auto bk = ldAt(e.i32c(0), e.addI(aRow, kk * 16), aChunkBit,
                         dh * 8 + 2 * dp, true, rowBytes);
          e.mma(ads, {bk[0], bk[1]}, MutableArrayRef<Value>(&acc[2 * dp * 4], 4));
          e.mma(ads, {bk[2], bk[3]},
                MutableArrayRef<Value>(&acc[(2 * dp + 1) * 4], 4));
        }
      }
      for (int64_t half = 0; half < 2; ++half) {
        Value row = e.addI(i0, e.addI(warpRow, e.addI(g, 8 * half)));
        Value rowBase = e.addI(e.mulI(e.addI(rowStart, row), qStride),
                              e.addI(e.mulI(head, D), e.mulI(t4, 2)));
        // Two adjacent columns per red.global.add.v2.f32 (sm_90).
        for (int64_t nt = 0; nt < 8; ++nt)
          e.reduceAdd2(wsWord(ws.dq, e.addI(rowBase, dh * 64 + nt * 8), e.f32),
                       acc[nt * 4 + half * 2], acc[nt * 4 + half * 2 + 1]);
      }
    }
    SmallVector<Value> yield(dk);
    yield.append(dv);
    scf::YieldOp::create(b, loc, yield);
  }
  auto results = loop.getResults();
  Value scale = e.f32c(s.scale);
  for (int64_t half = 0; half < 2; ++half) {
    Value row = e.addI(j0, e.addI(warpRow, e.addI(g, 8 * half)));
    Value rowBase = e.addI(e.mulI(e.addI(rowStart, row), kvStride),
                          e.addI(e.mulI(kvHead, D), e.mulI(t4, 2)));
    for (int64_t dt = 0; dt < dTiles; ++dt) {
      int64_t at = dt * 4 + half * 2;
      Value k0 = e.mulF(results[at], scale), k1 = e.mulF(results[at + 1], scale);
      e.storePtr(e.packBf16(k0, k1), e.gep(a.dk, e.bf16, e.addI(rowBase, dt * 8)), 4);
      Value v0 = results[dTiles * 4 + at], v1 = results[dTiles * 4 + at + 1];
      e.storePtr(e.packBf16(v0, v1), e.gep(a.dv, e.bf16, e.addI(rowBase, dt * 8)), 4);
    }
  }
  return sharedBytes;
}

// A key for attention ops that compute the same thing, so that every
// layer's op shares one gpu.module.
std::string opKey(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << op->getName() << ";";
  for (Type t : op->getOperandTypes())
    os << t << ",";
  os << op->getAttr("causal") << ";" << op->getAttr("scale");
  return text;
}

struct AttentionToGpuPass
    : impl::AttentionToGpuBase<AttentionToGpuPass> {
  using AttentionToGpuBase::AttentionToGpuBase;

  void runOnOperation() override {
    ModuleOp moduleOp = getOperation();
    SmallVector<Operation *> ops;
    moduleOp.walk([&](Operation *op) {
      if (isa<kernel::AttentionFwdOp, kernel::AttentionBwdOp>(op))
        ops.push_back(op);
    });
    if (ops.empty())
      return;
    OpBuilder b(&getContext());
    moduleOp->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                      b.getUnitAttr());
    llvm::StringMap<Operation *> built;
    // Ops like one already refused (every layer's) are not reported again.
    llvm::StringSet<> refused;
    int counter = 0;
    for (Operation *op : ops) {
      // An op lowered by an earlier run of the pass keeps its kernels.
      if (cast<kernel::LaunchedOpInterface>(op).hasLaunches())
        continue;
      std::string key = opKey(op);
      if (refused.contains(key))
        continue;
      if (Operation *same = built.lookup(key)) {
        copyLaunches(same, op);
        if (Attribute maps = same->getAttr(kTensorMapsAttr))
          op->setAttr(kTensorMapsAttr, maps);
        continue;
      }
      AttnShape s;
      bool forward = isa<kernel::AttentionFwdOp>(op);
      LogicalResult ok =
          forward ? checkShape(op, op->getOperand(0), op->getOperand(1),
                               op->getOperand(2),
                               cast<kernel::AttentionFwdOp>(op).getCuSeqlens(),
                               cast<kernel::AttentionFwdOp>(op).getCausal(),
                               cast<kernel::AttentionFwdOp>(op)
                                   .getScale()
                                   .convertToDouble(),
                               s)
                  : checkShape(op, op->getOperand(1), op->getOperand(2),
                               op->getOperand(3),
                               cast<kernel::AttentionBwdOp>(op).getCuSeqlens(),
                               cast<kernel::AttentionBwdOp>(op).getCausal(),
                               cast<kernel::AttentionBwdOp>(op)
                                   .getScale()
                                   .convertToDouble(),
                               s);
      for (Type t : op->getResultTypes())
        if (failed(ok))
          break;
        else if (auto rt = cast<RankedTensorType>(t);
                 !rt.getElementType().isBF16() && !rt.getElementType().isF32())
          ok = op->emitOpError("attention codegen writes bf16 results; got ")
               << rt.getElementType();
      if (failed(ok)) {
        refused.insert(key);
        if (!keepGoing)
          signalPassFailure();
        continue;
      }

      std::string sym = (forward ? "attention_fwd_" : "attention_bwd_") +
                        std::to_string(counter++);
      while (SymbolTable::lookupSymbolIn(moduleOp, sym))
        sym = (forward ? "attention_fwd_" : "attention_bwd_") +
              std::to_string(counter++);
      b.setInsertionPointToEnd(moduleOp.getBody());
      auto mod = gpu::GPUModuleOp::create(b, op->getLoc(), sym);
      LaunchList launches(b, sym);
      auto record = [&](StringRef fn, int64_t grid, int64_t block,
                        int64_t shared) {
        launches.add(fn, grid, block, shared);
      };
      int64_t workspaceBytes = 0;
      std::string why;
      if (forward && hopperForward && !hopperForwardCovers(s, why))
        op->emitRemark("the Hopper forward kernel does not cover this op (")
            << why << "); it keeps the mma.sync kernel";
      if (forward && hopperForward && why.empty()) {
        HopperFwdTiling t;
        sym = "attention_fwd_hopper_" + std::to_string(counter++);
        while (SymbolTable::lookupSymbolIn(moduleOp, sym))
          sym = "attention_fwd_hopper_" + std::to_string(counter++);
        SymbolTable::setSymbolName(mod, sym);
        LaunchList hopper(b, sym);
        int64_t shared = buildHopperForward(b, mod, sym, s, t, op->getLoc());
        hopper.add(sym, s.batch * s.qHeads * (s.seq / t.queryTile),
                   t.threads, shared);
        hopper.apply(op, 0, std::nullopt);
        SmallVector<Attribute> maps;
        for (int64_t operand = 0; operand < 3; ++operand)
          maps.push_back(b.getDictionaryAttr(
              {b.getNamedAttr("operand", b.getI64IntegerAttr(operand)),
               b.getNamedAttr("box_rows",
                              b.getI64IntegerAttr(operand ? t.keyTile
                                                          : t.queryTile)),
               b.getNamedAttr("box_columns", b.getI64IntegerAttr(kBlockCols)),
               b.getNamedAttr("swizzle_bytes", b.getI64IntegerAttr(kSwizzleRow))}));
        op->setAttr(kTensorMapsAttr, b.getArrayAttr(maps));
        built[key] = op;
        continue;
      }
      if (forward) {
        FwdTiling t;
        t.warps = fwdWarps;
        t.mTiles = fwdMTiles;
        if (s.seq % t.queryTile()) {
          op->emitOpError("sequence ")
              << s.seq << " is not a multiple of the query tile "
              << t.queryTile();
          mod.erase();
          if (!keepGoing)
            signalPassFailure();
          continue;
        }
        int64_t shared = buildForward(b, mod, sym, s, t, op->getLoc());
        record(sym, s.batch * s.qHeads * (s.seq / t.queryTile()), t.threads(),
               shared);
      } else {
        BwdTiling t;
        t.warps = bwdWarps;
        if (s.seq % t.keyTile()) {
          op->emitOpError("sequence ")
              << s.seq << " is not a multiple of the key tile "
              << t.keyTile();
          mod.erase();
          if (!keepGoing)
            signalPassFailure();
          continue;
        }
        BwdWorkspace ws(s);
        workspaceBytes = ws.words * 4;
        int64_t rows = s.batch * s.seq * s.qHeads;
        buildPrep(b, mod, sym + "_prep", s, op->getLoc());
        int64_t prepThreads = rows * prepLanes(s);
        record(sym + "_prep", (prepThreads + kPrepThreads - 1) / kPrepThreads,
               kPrepThreads, 0);
        std::string whyNot;
        if (hopperBackward && !hopperBackwardCovers(s, whyNot))
          op->emitRemark("the Hopper backward kernel does not cover this op (")
              << whyNot << "); it keeps the mma.sync kernel";
        if (hopperBackward && whyNot.empty()) {
          HopperBwdTiling h;
          std::string main = sym + "_hopper";
          int64_t shared = buildHopperBackward(b, mod, main, s, h, op->getLoc());
          record(main, s.batch * s.kvHeads * (s.seq / h.keyTile), h.threads,
                 shared);
          // dout and q in query tiles, k and v in key tiles; the main
          // launch (the second) takes them.
          SmallVector<Attribute> maps;
          for (int64_t operand = 0; operand < 4; ++operand)
            maps.push_back(b.getDictionaryAttr(
                {b.getNamedAttr("operand", b.getI64IntegerAttr(operand)),
                 b.getNamedAttr("launch", b.getI64IntegerAttr(1)),
                 b.getNamedAttr("box_rows",
                                b.getI64IntegerAttr(operand < 2 ? h.queryTile
                                                                : h.keyTile)),
                 b.getNamedAttr("box_columns", b.getI64IntegerAttr(kBlockCols)),
                 b.getNamedAttr("swizzle_bytes",
                                b.getI64IntegerAttr(kSwizzleRow))}));
          op->setAttr(kTensorMapsAttr, b.getArrayAttr(maps));
        } else {
          int64_t shared = buildBackward(b, mod, sym, s, t, op->getLoc());
          record(sym, s.batch * s.kvHeads * (s.seq / t.keyTile()), t.threads(),
                 shared);
        }
        int64_t groups = rows * s.headDim / 8;
        buildConvert(b, mod, sym + "_dq", s, /*tiledDq=*/whyNot.empty() && hopperBackward,
                     op->getLoc());
        record(sym + "_dq", (groups + kConvertThreads - 1) / kConvertThreads,
               kConvertThreads, 0);
      }
      launches.apply(op, workspaceBytes, std::nullopt);
      built[key] = op;
    }
  }
};

} // namespace
} // namespace octet::codegen
