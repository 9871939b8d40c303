//===- WholeOpBlockQuantize.cpp - Blockwise FP8 quantization kernels -----===//
//
// The whole-op kernels' blockwise FP8 quantization: a block of threads per
// 1x128, 128x1 or 128x128 tile, or, for tensors whose sides are multiples
// of 128, one kernel of 128 x 128 tiles that writes every quantization and
// transposed copy of its input, also after a norm's row kernel
// (buildNormTileKernels, WholeOpKernel.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/WholeOpKernel.h"

#include "compiler/Codegen/Emitter.h"
#include "compiler/Codegen/KernelPlan.h"
#include "compiler/Codegen/Launches.h"
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

#include <optional>

using namespace mlir;

namespace octet::codegen {
namespace detail {

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

namespace {

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

} // namespace

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

} // namespace detail

using detail::WholeOpBuilder;

LogicalResult buildNormTileKernels(kernel::FusedOp fused, OpBuilder &b,
                                   gpu::GPUModuleOp mod, StringRef sym,
                                   LaunchList &launches,
                                   const DenseMap<Value, int64_t> &inverseAt,
                                   int64_t workspaceFloats) {
  WholeOpBuilder builder(fused, b);
  return builder.buildNormTiles(mod, sym, launches, inverseAt,
                                workspaceFloats);
}

} // namespace octet::codegen
