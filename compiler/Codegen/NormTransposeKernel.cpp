// The clustered RMSNorm + FP8 quantize + transpose kernel.
//
// A cluster of kCluster blocks (one a multiprocessor: the shared memory
// below is most of it) owns a band of kBand rows at a time; the clusters
// are persistent and deal the bands out in turn. Block `rank` of a cluster
// normalizes rows [rank·32, rank·32 + 32) of the band and transposes columns
// [rank·C/2, rank·C/2 + C/2) of it:
//  * x rows stream into shared memory with cp.async.bulk, a slot and an
//    mbarrier per row group, each group refilling its slot with its next
//    row once every warp of it holds the row in registers;
//  * a row group is kWarpsPerRow warps, each holding C/4 columns; their
//    partial sums of squares meet in shared memory behind a named barrier;
//    they write the FP8 row and push each warp's 256-byte chunk with
//    st.async into the band buffer of the block that transposes those
//    columns, completing bytes on that block's `ready` mbarrier;
//  * kTransposeWarps warps wait for the band (`ready`), turn 4x4 byte
//    squares with byte permutes and write the transposed tensor in 16-byte
//    runs, then arrive on every block's `free` mbarrier, which the row
//    warps wait for before they push the next band.
// mbarriers and st.async, not cluster barriers, order the hand-over: a
// release cluster barrier waits for the block's global stores as well.
// Measured slower on an H100: 32-row bands with two band buffers a block,
// so that the row warps fill one while the transposer drains the other
// (76.6-77.4% of copy against 82.1-82.9% in the same run; the
// transposer's column runs are then 32 bytes).
//
// On an H100 the hand-written form of this design (bench/prototypes/
// norm_transpose_cluster.cu) ran the llama3-8b input norm (8192 x 4096) at
// 81.8-82.3% of copy bandwidth, where the row kernel and the transpose
// launch reach 68.8%; the variants measured on the way are in its header.

#include "compiler/Codegen/NormTransposeKernel.h"

#include "compiler/Codegen/Emitter.h"

#include "dialects/fp8/Fp8Dialect.h"
#include "dialects/graph/GraphDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;

namespace octet::codegen {
namespace {

constexpr int64_t kCluster = 2;
constexpr int64_t kBand = 64;
constexpr int64_t kRowsPerBlock = kBand / kCluster;
constexpr int64_t kWarpsPerRow = 4;
constexpr int64_t kRowGroups = 7;
constexpr int64_t kTransposeWarps = 4;
constexpr int64_t kRowWarps = kRowGroups * kWarpsPerRow;
constexpr int64_t kThreads = (kRowWarps + kTransposeWarps) * 32;
// Columns a warp stores as one piece: 32 lanes of 8.
constexpr int64_t kChunk = 256;
// Shared memory a block may have on sm_90 (227 KiB).
constexpr int64_t kMaxShared = 227 * 1024;
// Band buffer rows are padded by this many bytes every 16 rows, so that the
// transposer's 16 rows of a 4-byte column fall in distinct bank groups.
constexpr int64_t kPad = 32;

// The matched region.
struct NormTranspose {
  BlockArgument x, weight, scale;
  Type normType, fp8Type;
  double eps = 0;
  int64_t rows = 0, cols = 0;
  int64_t quantized = -1, amax = -1, transposed = -1, passedScale = -1;
};

std::optional<NormTranspose> match(kernel::FusedOp fused) {
  Block &body = fused.getBodyBlock();
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  NormTranspose m;
  graph::RMSNormOp norm;
  fp8::QuantizeOp quantize;
  fp8::TransposeOp transpose;
  Value normed;
  for (Operation &op : body.without_terminator()) {
    if (auto n = dyn_cast<graph::RMSNormOp>(op); n && !norm) {
      norm = n;
      normed = n.getResult();
    } else if (auto r = dyn_cast<graph::ReshapeOp>(op);
               r && normed && r.getInput() == normed && !quantize) {
      normed = r.getResult();
    } else if (auto q = dyn_cast<fp8::QuantizeOp>(op);
               q && normed && q.getInput() == normed && !quantize) {
      quantize = q;
    } else if (auto t = dyn_cast<fp8::TransposeOp>(op);
               t && quantize && t.getInput() == quantize.getResult() &&
               !transpose) {
      transpose = t;
    } else {
      return std::nullopt;
    }
  }
  if (!transpose || transpose.getScale() != quantize.getScale())
    return std::nullopt;
  m.x = dyn_cast<BlockArgument>(norm.getInput());
  m.weight = dyn_cast<BlockArgument>(norm.getWeight());
  m.scale = dyn_cast<BlockArgument>(quantize.getScale());
  if (!m.x || !m.weight || !m.scale)
    return std::nullopt;
  auto xType = cast<RankedTensorType>(m.x.getType());
  auto wType = cast<RankedTensorType>(m.weight.getType());
  auto sType = cast<RankedTensorType>(m.scale.getType());
  auto qType = cast<RankedTensorType>(quantize.getResult().getType());
  if (!xType.getElementType().isBF16() || !wType.getElementType().isF32() ||
      !sType.getElementType().isF32() || sType.getNumElements() != 1 ||
      qType.getRank() != 2 || !xType.hasStaticShape())
    return std::nullopt;
  m.rows = qType.getDimSize(0);
  m.cols = qType.getDimSize(1);
  m.normType = getElementTypeOrSelf(norm.getResult().getType());
  m.fp8Type = qType.getElementType();
  m.eps = norm.getEps().convertToDouble();
  if (xType.getShape().back() != m.cols || wType.getNumElements() != m.cols ||
      !(m.normType.isBF16() || m.normType.isF32()) ||
      !isa<Float8E4M3FNType, Float8E5M2Type>(m.fp8Type))
    return std::nullopt;
  // Only the quantized tensor, its amax, its transpose and the scale leave.
  for (auto [i, v] : llvm::enumerate(yield.getValues())) {
    int64_t *slot = v == quantize.getResult()       ? &m.quantized
                    : v == quantize.getAmax()       ? &m.amax
                    : v == transpose.getResult()    ? &m.transposed
                    : v == transpose.getResultScale() ? &m.passedScale
                                                      : nullptr;
    if (!slot || *slot >= 0)
      return std::nullopt;
    *slot = i;
  }
  // The amax may stay inside: under current scaling the scale came from
  // the producer's amax, and this launch only casts.
  if (m.quantized < 0 || m.transposed < 0)
    return std::nullopt;
  return m;
}

// Shared memory of a block, in bytes from the base.
struct Layout {
  int64_t cols, half, bandBytes, weight, ring, slotBytes, bars, sums, maxima,
      total;
  explicit Layout(int64_t cols) : cols(cols) {
    half = cols / kCluster;
    bandBytes = kBand * half + (kBand / 16) * kPad;
    weight = bandBytes;
    ring = weight + cols * 4;
    slotBytes = cols * 2;
    bars = ring + kRowGroups * slotBytes; // ready, free, full[kRowGroups]
    sums = bars + 8 * (2 + kRowGroups);   // [group][parity][warp] floats
    maxima = sums + kRowGroups * 2 * kWarpsPerRow * 4;
    total = maxima + 32 * 4;
  }
};

bool fits(const NormTranspose &m) {
  int64_t chunksPerWarp = m.cols / (kWarpsPerRow * kChunk);
  return m.rows % kBand == 0 && m.cols % (kWarpsPerRow * kChunk) == 0 &&
         chunksPerWarp >= 1 && chunksPerWarp <= 8 &&
         (m.cols / kCluster) % (kTransposeWarps * 32) == 0 &&
         Layout(m.cols).total <= kMaxShared &&
         m.rows * m.cols * 2 < std::numeric_limits<int32_t>::max();
}

// The PTX of the hand-over, over 32-bit shared addresses.
struct Sync {
  Emitter &e;
  void init(Value bar, int64_t count) {
    e.asmVoid("mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}",
              {bar, e.i32c(count)});
  }
  // Arrives once, raising the bytes the phase waits for by `bytes`.
  void expect(Value bar, int64_t bytes) {
    e.asmVoid("mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;",
              "r,r,~{memory}", {bar, e.i32c(bytes)});
  }
  // Spins until the phase of `parity` has completed.
  void wait(Value bar, Value parity) {
    e.asmVoid("{\n.reg .pred done;\nwait_again:\n"
              "mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n"
              "@!done bra wait_again;\n}",
              "r,r,~{memory}", {bar, parity});
  }
  // `local` (a shared::cta address) in block `rank` of the cluster.
  Value remote(Value local, Value rank) {
    return e.asmOp(e.i32, "mapa.shared::cluster.u32 $0, $1, $2;", "=r,r,r",
                   {local, rank});
  }
  // Arrives on an mbarrier of any block of the cluster. Release at CTA
  // scope (PTX's default) orders the arriving block's own shared reads,
  // all the hand-over needs; at cluster scope ptxas adds a MEMBAR.GPU, a
  // wait for the transposer's global stores, before each arrival (H100:
  // 80.4-80.8% of copy that way, 82.1-82.9% this way, in one run).
  void arriveRemote(Value bar) {
    e.asmVoid("mbarrier.arrive.shared::cluster.b64 _, [$0];", "r,~{memory}",
              {bar});
  }
  void pushAsync(Value to, Value lo, Value hi, Value bar) {
    e.asmVoid("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 "
              "[$0], {$1, $2}, [$3];",
              "r,r,r,r,~{memory}", {to, lo, hi, bar});
  }
  void bulkCopy(Value to, Value from, int64_t bytes, Value bar) {
    e.asmVoid("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
              "bytes [$0], [$1], $2, [$3];",
              "r,l,r,r,~{memory}", {to, from, e.i32c(bytes), bar});
  }
  void namedBarrier(Value id, int64_t threads) {
    e.asmVoid("bar.sync $0, $1;", "r,r,~{memory}", {id, e.i32c(threads)});
  }
  void clusterBarrier() {
    e.asmVoid("barrier.cluster.arrive.release.aligned;\n"
              "barrier.cluster.wait.acquire.aligned;",
              "~{memory}", {});
  }
};

class Builder {
public:
  // `args`: the kernel's arguments, the region's inputs then its results.
  Builder(Emitter &e, const NormTranspose &m, const Layout &l, int64_t clusters,
          ArrayRef<Value> args, unsigned numInputs, Value smem)
      : e(e), sync{e}, m(m), l(l), clusters(clusters),
        bands(m.rows / kBand), chunksPerWarp(m.cols / (kWarpsPerRow * kChunk)),
        smem(smem), x(args[m.x.getArgNumber()]),
        weight(args[m.weight.getArgNumber()]),
        scale(args[m.scale.getArgNumber()]),
        results(args.drop_front(numInputs)) {}

  void build() {
    out = results[m.quantized];
    outT = results[m.transposed];
    if (m.amax >= 0)
      amaxOut = results[m.amax];
    Value tid = e.threadId32();
    warp = e.shRUI(tid, 5);
    lane = e.andI(tid, 31);
    rank = e.asmOp(e.i32, "mov.u32 $0, %cluster_ctarank;", "=r", {});
    cluster = e.divUI(e.blockId32(), kCluster);
    // Bands cluster, cluster + clusters, ...
    iters = e.divUI(e.addI(e.subI(e.i32c(bands), cluster), clusters - 1), clusters);
    rowsHere = e.mulI(iters, kRowsPerBlock);
    base = LLVM::PtrToIntOp::create(e.b, e.loc, e.i32, smem);
    ready = e.addI(base, l.bars);
    freed = e.addI(base, l.bars + 8);

    e.ifThen(e.cmpI(arith::CmpIPredicate::eq, tid, e.i32c(0)), [&] {
      sync.init(ready, 1);
      sync.init(freed, kCluster);
      for (int64_t g = 0; g < kRowGroups; ++g)
        sync.init(slotBar(e.i32c(g)), 1);
      e.asmVoid("fence.mbarrier_init.release.cluster;", "~{memory}", {});
      sync.expect(ready, kBand * l.half);
      e.asmVoid("fence.proxy.async.shared::cta;", "~{memory}", {});
      e.forLoop(e.i32c(0), e.minSI(e.i32c(kRowGroups), rowsHere), 1, {},
              [&](Value q, ValueRange) {
                issueRow(q);
                return SmallVector<Value>{};
              });
    });
    // The norm weight, in shared memory for every row.
    for (int64_t first = 0; first < m.cols / 4; first += kThreads) {
      Value i = e.addI(tid, first);
      auto copy = [&] {
        Type v4 = VectorType::get({4}, e.f32);
        Value w = e.loadPtr(v4, e.gep(weight, v4, i), 16);
        e.storePtr(w, smemAt(e.addI(e.i32c(l.weight), e.shLI(i, 4))), 16);
      };
      if (first + kThreads <= m.cols / 4)
        copy();
      else
        e.ifThen(e.cmpI(arith::CmpIPredicate::slt, i, e.i32c(m.cols / 4)),
                 copy);
    }
    e.barrier();
    // Every block's mbarriers are initialized before any block uses them.
    sync.clusterBarrier();

    auto split = scf::IfOp::create(
        e.b, e.loc, TypeRange{e.f32},
        e.cmpI(arith::CmpIPredicate::slt, warp, e.i32c(kRowWarps)), true);
    {
      OpBuilder::InsertionGuard guard(e.b);
      e.b.setInsertionPointToStart(split.thenBlock());
      scf::YieldOp::create(e.b, e.loc, rowWarps());
      e.b.setInsertionPointToStart(split.elseBlock());
      transposeWarps(e.subI(tid, e.i32c(kRowWarps * 32)));
      scf::YieldOp::create(e.b, e.loc, e.f32c(0.0));
    }
    // No block leaves while another may still push into it.
    sync.clusterBarrier();
    if (m.amax >= 0)
      blockAmax(split.getResult(0), tid);
    if (m.passedScale >= 0)
      e.ifThen(
          e.andI(e.cmpI(arith::CmpIPredicate::eq, tid, e.i32c(0)),
                 e.cmpI(arith::CmpIPredicate::eq, e.blockId32(), e.i32c(0))),
          [&] { e.storePtr(e.loadPtr(e.f32, scale), results[m.passedScale]); });
  }

private:
  Emitter &e;
  Sync sync;
  const NormTranspose &m;
  const Layout &l;
  int64_t clusters, bands, chunksPerWarp;
  Value smem, x, weight, scale;
  ArrayRef<Value> results;
  Value out, outT, amaxOut;
  Value warp, lane, rank, cluster, iters, rowsHere, base, ready, freed;

  Value smemAt(Value offset) { return e.smemAt(smem, offset); }
  Value slotBar(Value group) {
    return e.addI(e.addI(base, l.bars + 16), e.shLI(group, 3));
  }
  Value slot(Value group) {
    return e.addI(e.mulI(group, l.slotBytes), l.ring);
  }
  // The row of the tensor that the block's q-th row is.
  Value rowOf(Value q) {
    Value i = e.divUI(q, kRowsPerBlock), j = e.remUI(q, kRowsPerBlock);
    Value band = e.addI(cluster, e.mulI(i, clusters));
    return e.addI(e.addI(e.mulI(band, kBand), e.mulI(rank, kRowsPerBlock)), j);
  }
  void issueRow(Value q) {
    Value group = e.remUI(q, kRowGroups);
    Value bar = slotBar(group);
    Value from = e.gep(x, e.b.getI8Type(), e.mulI(rowOf(q), m.cols * 2));
    sync.expect(bar, l.slotBytes);
    sync.bulkCopy(e.addI(base, slot(group)), from, l.slotBytes, bar);
  }

  // Eight bf16 in four words as f32, in column order.
  SmallVector<Value> unpack(ArrayRef<Value> words) {
    SmallVector<Value> f;
    for (Value w : words) {
      Value lo = e.shLI(w, 16);
      Value hi = e.andI(w, -65536); // 0xffff0000
      f.push_back(e.bitcast(e.f32, lo));
      f.push_back(e.bitcast(e.f32, hi));
    }
    return f;
  }
  // Four f32 to FP8 bytes (round to nearest even, saturating), the first
  // in the low byte.
  Value pack4(ArrayRef<Value> v) {
    StringRef text = isa<Float8E4M3FNType>(m.fp8Type)
                         ? "cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;"
                         : "cvt.rn.satfinite.e5m2x2.f32 $0, $1, $2;";
    Type i16 = e.b.getI16Type();
    Value lo = e.asmOp(i16, text, "=h,f,f", {v[1], v[0]});
    Value hi = e.asmOp(i16, text, "=h,f,f", {v[3], v[2]});
    lo = arith::ExtUIOp::create(e.b, e.loc, e.i32, lo);
    hi = arith::ExtUIOp::create(e.b, e.loc, e.i32, hi);
    return e.orI(lo, e.shLI(hi, 16));
  }
  Value rowWarps() {
    Value group = e.divUI(warp, kWarpsPerRow), part = e.remUI(warp, kWarpsPerRow);
    Value scaleV = e.loadPtr(e.f32, scale);
    Type v4 = VectorType::get({4}, e.i32);
    Type v4f = VectorType::get({4}, e.f32);
    Type v2 = VectorType::get({2}, e.i32);
    return e.forLoop(
        group, rowsHere, kRowGroups, {e.f32c(0.0)},
        [&](Value q, ValueRange carried) {
          Value amax = carried[0];
          Value i = e.divUI(q, kRowsPerBlock), j = e.remUI(q, kRowsPerBlock);
          Value round = e.divUI(q, kRowGroups);
          Value row = rowOf(q);
          sync.wait(slotBar(group), e.andI(round, 1));
          Value slotAt = slot(group);
          SmallVector<SmallVector<Value>> xs;
          Value ss = e.f32c(0.0);
          for (int64_t cc = 0; cc < chunksPerWarp; ++cc) {
            Value chunk = e.addI(e.mulI(part, chunksPerWarp), cc);
            Value at = e.addI(slotAt, e.shLI(e.addI(e.shLI(chunk, 5), lane), 4));
            Value words = e.loadPtr(v4, smemAt(at), 16);
            SmallVector<Value> w;
            for (int64_t k = 0; k < 4; ++k)
              w.push_back(e.extract(words, k));
            xs.push_back(unpack(w));
            for (Value f : xs.back())
              ss = e.fma(f, f, ss);
          }
          ss = warpSum(e, ss);
          // The group's partial sums, double-buffered by round.
          Value sumAt = e.addI(
              e.i32c(l.sums),
              e.shLI(e.addI(e.mulI(e.addI(e.mulI(group, 2), e.andI(round, 1)),
                                kWarpsPerRow),
                          part),
                    2));
          e.ifThen(e.cmpI(arith::CmpIPredicate::eq, lane, e.i32c(0)),
                   [&] { e.storePtr(ss, smemAt(sumAt)); });
          sync.namedBarrier(e.addI(group, 2), kWarpsPerRow * 32);
          Value total = e.f32c(0.0);
          Value groupSums = e.subI(sumAt, e.shLI(part, 2));
          for (int64_t p = 0; p < kWarpsPerRow; ++p)
            total = e.addF(total,
                           e.loadPtr(e.f32, smemAt(e.addI(groupSums, p * 4))));
          // Every warp of the group holds its part: refill the slot.
          Value next = e.addI(q, kRowGroups);
          e.ifThen(e.andI(e.cmpI(arith::CmpIPredicate::eq, e.orI(part, lane),
                                 e.i32c(0)),
                          e.cmpI(arith::CmpIPredicate::slt, next, rowsHere)),
                   [&] { issueRow(next); });
          Value meanSq = e.divF(total, e.f32c((double)m.cols));
          Value inv = e.divF(e.f32c(1.0),
                             e.sqrt(e.addF(meanSq, e.f32c(m.eps))));
          // The band buffers are free once every block has transposed the
          // previous band.
          e.ifThen(e.cmpI(arith::CmpIPredicate::sgt, i, e.i32c(0)),
                   [&] { sync.wait(freed, e.andI(e.addI(i, -1), 1)); });
          Value bandRow = e.addI(e.mulI(rank, kRowsPerBlock), j);
          Value bandRowAt = e.addI(e.mulI(bandRow, l.half),
                                  e.mulI(e.shRUI(bandRow, 4), kPad));
          for (int64_t cc = 0; cc < chunksPerWarp; ++cc) {
            Value chunk = e.addI(e.mulI(part, chunksPerWarp), cc);
            Value colBase = e.shLI(chunk, 8);
            Value col = e.addI(colBase, e.shLI(lane, 3));
            Value wAt = e.addI(e.i32c(l.weight), e.shLI(col, 2));
            Value w0 = e.loadPtr(v4f, smemAt(wAt), 16);
            Value w1 = e.loadPtr(v4f, smemAt(e.addI(wAt, 16)), 16);
            SmallVector<Value> q8;
            for (int64_t k = 0; k < 8; ++k) {
              Value w = e.extract(k < 4 ? w0 : w1, k % 4);
              Value y = e.mulF(e.mulF(xs[cc][k], inv), w);
              if (m.normType.isBF16())
                y = e.roundTo(y, e.bf16);
              amax = e.maximumF(amax, e.absF(y));
              q8.push_back(e.mulF(y, scaleV));
            }
            Value lo = pack4(ArrayRef<Value>(q8).take_front(4));
            Value hi = pack4(ArrayRef<Value>(q8).drop_front(4));
            Value pair = vector::FromElementsOp::create(
                e.b, e.loc, v2, ValueRange{lo, hi});
            e.storePtr(pair,
                    e.gep(out, e.b.getI8Type(), e.addI(e.mulI(row, m.cols),
                                                         col)),
                    8);
            Value dest = e.divUI(colBase, l.half);
            Value within = e.addI(e.remUI(colBase, l.half), e.shLI(lane, 3));
            sync.pushAsync(sync.remote(e.addI(base, e.addI(bandRowAt, within)),
                                       dest),
                           lo, hi, sync.remote(ready, dest));
          }
          return SmallVector<Value>{amax};
        })[0];
  }

  void transposeWarps(Value t) {
    constexpr int64_t threads = kTransposeWarps * 32;
    Type v4 = VectorType::get({4}, e.i32);
    e.forLoop(e.i32c(0), iters, 1, {}, [&](Value i, ValueRange) {
      Value band = e.addI(cluster, e.mulI(i, clusters));
      sync.wait(ready, e.andI(i, 1));
      e.forLoop(e.i32c(0), e.i32c(l.half / threads), 1, {}, [&](Value it,
                                                            ValueRange) {
        // 16 rows (quarter g of the band) by 4 columns a thread.
        Value unit = e.addI(e.mulI(it, threads), t);
        Value g = e.andI(unit, 3);
        Value col = e.shLI(e.shRUI(unit, 2), 2);
        Value at = e.addI(e.mulI(g, 16 * l.half + kPad), col);
        SmallVector<Value> words;
        for (int64_t r = 0; r < 16; ++r)
          words.push_back(e.loadPtr(e.i32, smemAt(e.addI(at, r * l.half)), 4));
        auto perm = [&](Value a, Value b2, StringRef sel) {
          return e.asmOp(e.i32, ("prmt.b32 $0, $1, $2, " + sel + ";").str(),
                         "=r,r,r", {a, b2});
        };
        static const char *const pick[4] = {"0x40", "0x51", "0x62", "0x73"};
        for (int64_t k = 0; k < 4; ++k) {
          SmallVector<Value> column;
          for (int64_t gg = 0; gg < 4; ++gg) {
            Value lo = perm(words[4 * gg], words[4 * gg + 1], pick[k]);
            Value hi = perm(words[4 * gg + 2], words[4 * gg + 3], pick[k]);
            column.push_back(perm(lo, hi, "0x5410"));
          }
          Value run = vector::FromElementsOp::create(e.b, e.loc, v4, column);
          Value outRow =
              e.addI(e.addI(e.mulI(rank, l.half), col), k);
          Value offset = e.addI(e.addI(e.mulI(outRow, m.rows),
                                     e.mulI(band, kBand)),
                               e.shLI(g, 4));
          e.storePtr(run,
                  e.gep(outT, e.b.getI8Type(), offset),
                  16);
        }
        return SmallVector<Value>{};
      });
      sync.namedBarrier(e.i32c(1), threads);
      e.ifThen(e.cmpI(arith::CmpIPredicate::eq, t, e.i32c(0)), [&] {
        e.ifThen(e.cmpI(arith::CmpIPredicate::slt, e.addI(i, 1), iters),
                 [&] { sync.expect(ready, kBand * l.half); });
        for (int64_t r = 0; r < kCluster; ++r)
          sync.arriveRemote(sync.remote(freed, e.i32c(r)));
      });
      return SmallVector<Value>{};
    });
  }

  // The block's largest |y| into the amax result: one atomic max of the
  // float bits (non-negative, or NaN).
  void blockAmax(Value amax, Value tid) {
    ReductionScratch scratch;
    scratch.shared = smem;
    scratch.byteOffset = l.maxima;
    scratch.warps = kThreads / kWarp;
    scratch.lane = lane;
    scratch.warp = warp;
    scratch.tid = tid;
    blockMaxInThread0(e, scratch, amax, [&](Value most) {
      e.asmVoid("red.global.max.u32 [$0], $1;", "l,r,~{memory}",
                {amaxOut, e.bitcast(e.i32, most)});
    });
  }
};

} // namespace

std::optional<ClusterLaunch> buildNormTranspose(OpBuilder &b,
                                                gpu::GPUModuleOp mod,
                                                StringRef name,
                                                kernel::FusedOp fused,
                                                int64_t numSMs) {
  std::optional<NormTranspose> m = match(fused);
  if (!m || !fits(*m) || numSMs < kCluster)
    return std::nullopt;
  Layout layout(m->cols);
  int64_t clusters = std::min(m->rows / kBand, numSMs / kCluster);
  unsigned numInputs = fused.getBodyBlock().getNumArguments();
  unsigned numResults = fused->getNumResults();
  gpu::GPUFuncOp f =
      makeKernel(b, mod, name, numInputs + numResults, kThreads, fused.getLoc());
  // One block a multiprocessor, 1024 threads: 64 registers a thread.
  f->setAttr("nvvm.maxntid", b.getDenseI32ArrayAttr({(int32_t)kThreads, 1, 1}));
  f->setAttr("nvvm.minctasm", b.getI32IntegerAttr(1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(f.getBody().front().getTerminator());
  Emitter e(b, fused.getLoc());
  SmallVector<Value> args(f.getArguments().begin(), f.getArguments().end());
  Value smem = sharedBase(e, mod, "octet_norm_transpose_smem");
  Builder(e, *m, layout, clusters, args, numInputs, smem).build();
  ClusterLaunch launch;
  launch.grid = clusters * kCluster;
  launch.block = kThreads;
  launch.sharedBytes = layout.total;
  launch.cluster = kCluster;
  launch.amaxResult = m->amax;
  return launch;
}

} // namespace octet::codegen
