//===- TransposeKernel.cpp - FP8 transpose launches ----------------------===//
//
// A byte tensor is transposed in 64 x 64 tiles, a block per tile. Each of
// the 256 threads reads a 4 x 4 byte square (four 4-byte reads, a warp
// covering two 64-byte row pieces per read), turns it over in registers and
// writes its four columns as words into the shared tile, which holds the
// tile already transposed; after a barrier each thread reads four words of
// it and writes them as 4-byte pieces of output rows. Shared memory thus
// moves words only, never single bytes. The shared rows are padded by a
// word so that the column writes of a warp fall on 16 banks (two threads a
// bank) rather than all on one.
//
// A copy may also quantize: each thread then reads its square from the
// wider source (four 4-element reads), casts it to FP8, writes the rows of
// the row-major FP8 result and turns them over as above. One launch then
// reads the source once and writes both layouts, where a row kernel and a
// transpose launch write the FP8 tensor, read it back and write it again.
// The quantized tensor may also be a join along the row: of inputs, some
// through a RoPE (a block per 64-row, head-wide unit, both halves of a
// rotated pair in one thread), or of an elementwise op's results (a block
// per 64 x 64 tile of every result, its operands read once).
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/TransposeKernel.h"

#include "compiler/Codegen/Emitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;

namespace octet::codegen {
namespace {

constexpr unsigned kSharedSpace = 3;
// Tile side in bytes (rows and columns alike).
constexpr int64_t kTile = 64;
// Side of the square a thread turns over: one 4-byte word per row.
constexpr int64_t kSquare = 4;
constexpr int64_t kSquaresPerSide = kTile / kSquare;
// Words per row of the shared (transposed) tile, one of them padding.
constexpr int64_t kSharedRowWords = kSquaresPerSide + 1;
static_assert(kSquaresPerSide * kSquaresPerSide == kTransposeThreads,
              "a thread per square of the tile");

bool isTiled(const TransposeCopy &c) {
  auto type = cast<MemRefType>(c.to.getType());
  return type.getElementType().getIntOrFloatBitWidth() == 8 &&
         c.rows % kTile == 0 && c.cols % kTile == 0;
}

constexpr int64_t kWarps = kTransposeThreads / kWarp;

// A quantizing copy of pieces goes in units of kTile rows and two tiles'
// columns, a block per unit: a RoPE head, whose rotated pairs of elements
// are then in one thread's two squares.
constexpr int64_t kUnit = 2 * kTile;
static_assert(kUnit == kRopeTileHead, "a RoPE head is a unit");
constexpr int64_t kTileBytes = kTile * kSharedRowWords * kSquare;

// A join of an elementwise op's results: the width of each.
int64_t resultWidth(const TransposeCopy &c) {
  return cast<MemRefType>(c.operands.front().getType()).getNumElements() /
         c.rows;
}

// Shared tiles a block of the copy turns over at once.
int64_t tilesFor(const TransposeCopy &c) {
  if (c.evaluate)
    return c.cols / resultWidth(c);
  return c.pieces.empty() ? 1 : kUnit / kTile;
}

int64_t blocksFor(const TransposeCopy &c) {
  if (c.evaluate)
    return (c.rows / kTile) * (resultWidth(c) / kTile);
  if (!c.pieces.empty())
    return (c.rows / kTile) * (c.cols / kUnit);
  if (isTiled(c))
    return (c.rows / kTile) * (c.cols / kTile);
  return (c.rows * c.cols + kTransposeThreads - 1) / kTransposeThreads;
}

class TransposeEmitter : public Emitter {
public:
  TransposeEmitter(OpBuilder &b, Location loc) : Emitter(b, loc) {}

  void emitTiled(const TransposeCopy &c, Value tile, Value shared);
  // Four elements of `source` [*, cols] at (row, col), as stored.
  Value loadRaw(Value source, Value row, int64_t cols, Value col);
  // Rows firstRow.. of a square (f32) cast to FP8, written to the row-major
  // result at `col` and returned; their largest magnitude joins amaxPartial.
  SmallVector<Value, 4> quantizeRows(const TransposeCopy &c,
                                     ArrayRef<Value> values, Value firstRow,
                                     Value col);
  VectorType f32Vector() { return VectorType::get({kSquare}, b.getF32Type()); }
  // Where block `tile` of a grid `across` blocks wide (each `step` columns
  // of kTile rows) puts this thread's square.
  struct Square {
    Value row0, col0;           // the block's first row and column
    Value squareRow, squareCol; // the square's place in the tile
    Value firstRow, col;        // its first row and column in the tensor
  };
  Square placeSquare(Value tile, int64_t across, int64_t step);
  // A unit of a quantizing copy of pieces.
  void emitPieces(const TransposeCopy &c, Value block, Value shared);
  // A tile of every result of a quantizing copy of an op's results.
  void emitResults(const TransposeCopy &c, Value block, Value shared);
  // The four rows of a square (FP8 words) into the shared tile at
  // `sharedBase` (bytes), transposed.
  void turnOver(ArrayRef<Value> rows, Value squareRow, Value squareCol,
                Value shared, Value sharedBase);
  // The shared tile at `sharedBase` out as kTile rows of `c.to` from
  // column row0, row col0 on.
  void writeTransposed(const TransposeCopy &c, Value shared, Value sharedBase,
                       Value row0, Value col0, Value squareRow,
                       Value squareCol);
  void emitElementwise(const TransposeCopy &c, Value block);
  // Block maximum of `x` (every thread's), then one atomic into `amax`.
  void emitBlockAmax(Value x, Value amax, Value shared);

  Value thread;
  // This thread's largest |source| so far (quantizing copies).
  Value amaxPartial;
};

void TransposeEmitter::emitBlockAmax(Value x, Value amax, Value shared) {
  ReductionScratch scratch;
  scratch.shared = shared;
  scratch.warps = kWarps;
  scratch.tid = thread;
  // Warps in order: the same bits whatever the order they finished in.
  blockMaxInThread0(*this, scratch, x, [&](Value m) {
    atomicMaxU(bitcast(b.getI32Type(), m), amax, idx(0));
  });
}

TransposeEmitter::Square TransposeEmitter::placeSquare(Value tile,
                                                      int64_t across,
                                                      int64_t step) {
  Square q;
  q.row0 = mulI(divUI(tile, idx(across)), kTile);
  q.col0 = mulI(remUI(tile, idx(across)), step);
  // Consecutive threads take consecutive words of a row: coalesced reads
  // and coalesced writes.
  q.squareCol = remUI(thread, idx(kSquaresPerSide));
  q.squareRow = divUI(thread, idx(kSquaresPerSide));
  q.firstRow = addI(q.row0, mulI(q.squareRow, kSquare));
  q.col = addI(q.col0, mulI(q.squareCol, kSquare));
  return q;
}

void TransposeEmitter::emitTiled(const TransposeCopy &c, Value tile,
                                 Value shared) {
  Type elem = cast<MemRefType>(c.to.getType()).getElementType();
  auto wordType = VectorType::get({kSquare}, elem);
  int64_t tileCols = c.cols / kTile;
  // The last rows first: they are the ones the row kernel before this
  // launch wrote last, the likeliest to be still in L2.
  tile = subI(idx(blocksFor(c) - 1), tile);
  auto [row0, col0, squareRow, squareCol, firstRow, readCol] =
      placeSquare(tile, tileCols, kTile);

  // Read the square: its rows, a word each (or quantize them from the
  // source and write them to the row-major result).
  SmallVector<Value, kSquare> rows;
  if (c.source) {
    SmallVector<Value, kSquare> wideRows;
    for (int64_t i = 0; i < kSquare; ++i)
      wideRows.push_back(
          toF32(loadRaw(c.source, addI(firstRow, idx(i)), c.cols, readCol)));
    rows = quantizeRows(c, wideRows, firstRow, readCol);
  } else {
    for (int64_t i = 0; i < kSquare; ++i) {
      Value at = addI(mulI(addI(firstRow, idx(i)), c.cols), readCol);
      rows.push_back(vload(wordType, c.from, at, kSquare));
    }
  }
  turnOver(rows, squareRow, squareCol, shared, idx(0));
  barrier();
  writeTransposed(c, shared, idx(0), row0, col0, squareRow, squareCol);
}

Value TransposeEmitter::loadRaw(Value source, Value row, int64_t cols,
                                Value col) {
  Type wide = cast<MemRefType>(source.getType()).getElementType();
  return vload(VectorType::get({kSquare}, wide), source,
               addI(mulI(row, cols), col),
               kSquare * wide.getIntOrFloatBitWidth() / 8);
}

SmallVector<Value, 4> TransposeEmitter::quantizeRows(const TransposeCopy &c,
                                                     ArrayRef<Value> values,
                                                     Value firstRow, Value col) {
  Type elem = cast<MemRefType>(c.to.getType()).getElementType();
  auto wordType = VectorType::get({kSquare}, elem);
  Value scale = broadcast(f32Vector(), load(c.scale, idx(0)));
  SmallVector<Value, kSquare> rows;
  for (auto [i, x] : llvm::enumerate(values)) {
    Value m = reduceMaximumF(absF(x));
    amaxPartial = amaxPartial ? Value(maximumF(amaxPartial, m)) : m;
    Value q = fromF32(mulF(x, scale), elem);
    Value at = addI(mulI(addI(firstRow, idx(i)), c.cols), col);
    if (c.from)
      vstore(q, c.from, at, kSquare);
    rows.push_back(q);
  }
  return rows;
}

void TransposeEmitter::turnOver(ArrayRef<Value> rows, Value squareRow,
                                Value squareCol, Value shared,
                                Value sharedBase) {
  auto sharedWordType = VectorType::get({kSquare}, b.getIntegerType(8));
  // Column k of the square gathers byte k of every row.
  Value upper =
      shuffle(rows[0], rows[1], ArrayRef<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  Value lower =
      shuffle(rows[2], rows[3], ArrayRef<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  for (int64_t k = 0; k < kSquare; ++k) {
    Value column =
        shuffle(upper, lower, ArrayRef<int64_t>{k, 4 + k, 8 + k, 12 + k});
    // Shared row = tile column, word = square row.
    Value sharedRow = addI(mulI(squareCol, kSquare), idx(k));
    Value at =
        addI(sharedBase,
             mulI(addI(mulI(sharedRow, kSharedRowWords), squareRow), kSquare));
    vstore(vector::BitCastOp::create(b, loc, sharedWordType, column), shared,
           at, kSquare);
  }
}

void TransposeEmitter::writeTransposed(const TransposeCopy &c, Value shared,
                                       Value sharedBase, Value row0, Value col0,
                                       Value squareRow, Value squareCol) {
  Type elem = cast<MemRefType>(c.to.getType()).getElementType();
  auto wordType = VectorType::get({kSquare}, elem);
  auto sharedWordType = VectorType::get({kSquare}, b.getIntegerType(8));
  // The output rows (tile columns), kSquaresPerSide threads a row.
  Value outCol = addI(row0, mulI(squareCol, kSquare));
  for (int64_t p = 0; p < kSquare; ++p) {
    Value sharedRow = addI(squareRow, idx(p * kSquaresPerSide));
    Value at =
        addI(sharedBase,
             mulI(addI(mulI(sharedRow, kSharedRowWords), squareCol), kSquare));
    Value word = vector::BitCastOp::create(
        b, loc, wordType, vload(sharedWordType, shared, at, kSquare));
    Value out = addI(mulI(addI(col0, sharedRow), c.rows), outCol);
    vstore(word, c.to, out, kSquare);
  }
}

void TransposeEmitter::emitPieces(const TransposeCopy &c, Value block,
                                  Value shared) {
  Square at = placeSquare(block, c.cols / kUnit, kUnit);
  Value row0 = at.row0, col0 = at.col0, firstRow = at.firstRow;
  Value squareRow = at.squareRow, squareCol = at.squareCol;
  Value squareAt = mulI(squareCol, kSquare);
  auto approx = [&](StringRef op, Value x) {
    return asmOp(f32, (op + ".approx.ftz.f32 $0, $1;").str(), "=f,f", {x});
  };
  // The rotation's products may fuse into fma, as in the row kernels.
  Emitter contracting(b, loc);
  contracting.contract = true;

  // cos and sin of a row's angles at this thread's four frequencies:
  // position x inverse frequency (f32, as the row kernels compute it),
  // reduced by 2pi in three parts (Cody-Waite: k < 2^13 keeps k·C1 exact;
  // about 3e-7 for positions below 10^5), then cos.approx / sin.approx (at
  // most 2^-20.5 absolute on [-pi, pi], PTX ISA). Two SFU instructions a
  // pair where libdevice's cosf/sinf (Payne-Hanek reduction) take about a
  // hundred instructions each; the row kernels amortise those over a
  // token's heads in a shared table, which a block of one head cannot.
  double twoPi = 2 * M_PI;
  float c1 = 6.28125f; // 201/32: 8 significant bits
  float c2 = (float)(twoPi - c1);
  float c3 = (float)(twoPi - c1 - (double)c2);
  auto cosSin = [&](ArrayRef<Value> freqs, int64_t i) {
    Value pos = toF32(load(c.positions, addI(firstRow, idx(i))));
    Value cos = splat(f32Vector(), 0.0);
    Value sin = cos;
    for (int64_t k = 0; k < kSquare; ++k) {
      Value angle = mulF(pos, freqs[k]);
      Value turns = math::RoundEvenOp::create(
          b, loc, mulF(angle, f32c((float)(1 / twoPi))));
      Value minusTurns = negF(turns);
      Value r = angle;
      for (float part : {c1, c2, c3})
        r = fma(minusTurns, f32c(part), r);
      cos = insert(approx("cos", r), cos, k);
      sin = insert(approx("sin", r), sin, k);
    }
    return std::pair(cos, sin);
  };

  // The unit of piece p: both tiles' squares read, rotated if the piece is,
  // quantized (row-major result written) and turned over into the two
  // shared tiles.
  auto emitUnit = [&](const TransposePiece &p) {
    Value local = subI(at.col, idx(p.col0));
    SmallVector<Value, kSquare> halves[2];
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < kSquare; ++i)
        halves[h].push_back(
            toF32(loadRaw(p.source, addI(firstRow, idx(i)), p.width,
                          addI(local, idx(h * kTile)))));
    if (p.invFreq) {
      // rotate-half: first half x·cos − x₂·sin, second half x·cos + x₁·sin;
      // the inverse rotates by −angle.
      Value firstSign = splat(f32Vector(), p.inverse ? 1.0 : -1.0);
      Value secondSign = splat(f32Vector(), p.inverse ? -1.0 : 1.0);
      auto rotate = [&](Value x, Value sign, Value partner, Value cos,
                        Value sin) -> Value {
        Emitter &e = contracting;
        Value y = e.addF(e.mulF(x, cos), e.mulF(e.mulF(sign, partner), sin));
        if (p.roundTo)
          y = roundTo(y, p.roundTo);
        return y;
      };
      // This thread's four frequencies serve its four rows.
      SmallVector<Value, kSquare> freqs;
      for (int64_t k = 0; k < kSquare; ++k)
        freqs.push_back(load(p.invFreq, addI(squareAt, idx(k))));
      for (int64_t i = 0; i < kSquare; ++i) {
        auto [cos, sin] = cosSin(freqs, i);
        Value x1 = halves[0][i], x2 = halves[1][i];
        halves[0][i] = rotate(x1, firstSign, x2, cos, sin);
        halves[1][i] = rotate(x2, secondSign, x1, cos, sin);
      }
    }
    for (int64_t h = 0; h < 2; ++h) {
      SmallVector<Value, kSquare> rows =
          quantizeRows(c, halves[h], firstRow, addI(at.col, idx(h * kTile)));
      turnOver(rows, squareRow, squareCol, shared, idx(h * kTileBytes));
    }
  };

  // The unit's piece: a chain of tests on its column, uniform in the block;
  // each test yields the thread's amax so far.
  auto dispatch = [&](auto &self, size_t i) -> void {
    const TransposePiece &p = c.pieces[i];
    if (i + 1 == c.pieces.size())
      return emitUnit(p);
    Value here = cmpI(arith::CmpIPredicate::ult, col0, idx(p.col0 + p.width));
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{f32}, here,
                                  /*withElseRegion=*/true);
    Value before = amaxPartial;
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      emitUnit(p);
      scf::YieldOp::create(b, loc, amaxPartial);
      amaxPartial = before;
      b.setInsertionPointToStart(ifOp.elseBlock());
      self(self, i + 1);
      scf::YieldOp::create(b, loc, amaxPartial);
    }
    amaxPartial = ifOp.getResult(0);
  };
  amaxPartial = f32c(0);
  dispatch(dispatch, 0);
  barrier();
  for (int64_t h = 0; h < 2; ++h)
    writeTransposed(c, shared, idx(h * kTileBytes), row0,
                    addI(col0, idx(h * kTile)), squareRow, squareCol);
}

void TransposeEmitter::emitResults(const TransposeCopy &c, Value block,
                                   Value shared) {
  int64_t width = resultWidth(c), results = c.cols / width;
  auto [row0, col0, squareRow, squareCol, firstRow, col] =
      placeSquare(block, width / kTile, kTile);
  // Every operand's square is read before anything is computed.
  SmallVector<SmallVector<Value, kSquare>> operands;
  for (Value operand : c.operands) {
    operands.emplace_back();
    for (int64_t i = 0; i < kSquare; ++i)
      operands.back().push_back(
          loadRaw(operand, addI(firstRow, idx(i)), width, col));
  }
  SmallVector<SmallVector<Value, kSquare>> values(results);
  for (int64_t i = 0; i < kSquare; ++i) {
    SmallVector<Value> at;
    for (auto &rows : operands)
      at.push_back(toF32(rows[i]));
    SmallVector<Value> out = c.evaluate(at);
    assert((int64_t)out.size() == results && "a value per result");
    for (int64_t r = 0; r < results; ++r)
      values[r].push_back(out[r]);
  }
  for (int64_t r = 0; r < results; ++r) {
    SmallVector<Value, kSquare> rows =
        quantizeRows(c, values[r], firstRow, addI(col, idx(r * width)));
    turnOver(rows, squareRow, squareCol, shared, idx(r * kTileBytes));
  }
  barrier();
  for (int64_t r = 0; r < results; ++r)
    writeTransposed(c, shared, idx(r * kTileBytes), row0,
                    addI(col0, idx(r * width)), squareRow, squareCol);
}

// A thread per output element, reading down a column: for scales and
// shapes that are not whole tiles (small tensors).
void TransposeEmitter::emitElementwise(const TransposeCopy &c, Value block) {
  Value out = addI(mulI(block, kTransposeThreads), thread);
  Value inside = cmpI(arith::CmpIPredicate::ult, out, idx(c.rows * c.cols));
  OpBuilder::InsertionGuard guard(b);
  auto ifOp = scf::IfOp::create(b, loc, inside, false);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  Value col = divUI(out, idx(c.rows));
  Value row = remUI(out, idx(c.rows));
  Value x = load(c.from, addI(mulI(row, c.cols), col));
  store(x, c.to, out);
}

} // namespace

bool canQuantizeInTranspose(int64_t rows, int64_t cols) {
  return rows % kTile == 0 && cols % kTile == 0;
}

bool canQuantizeResultsInTranspose(int64_t rows, ArrayRef<int64_t> widths) {
  return rows % kTile == 0 && !widths.empty() && widths.front() % kTile == 0 &&
         llvm::all_equal(widths);
}

bool canQuantizePiecesInTranspose(int64_t rows, ArrayRef<int64_t> widths) {
  return rows % kTile == 0 && llvm::all_of(widths, [](int64_t w) {
           return w > 0 && w % kUnit == 0;
         });
}

int64_t emitTransposeCopies(OpBuilder &b, Location loc, gpu::GPUFuncOp func,
                            ArrayRef<TransposeCopy> copies, int64_t firstBlock,
                            function_ref<void(size_t, TransposeCopy &)> bind) {
  Value shared, amaxShared;
  if (llvm::any_of(copies, [](const TransposeCopy &c) { return c.amax; })) {
    auto type = MemRefType::get({kWarps}, b.getF32Type(),
                                MemRefLayoutAttrInterface(),
                                b.getI64IntegerAttr(kSharedSpace));
    amaxShared = func.addWorkgroupAttribution(type, loc);
  }
  int64_t tiles = 0;
  for (const TransposeCopy &c : copies)
    if (isTiled(c) || c.evaluate || !c.pieces.empty())
      tiles = std::max(tiles, tilesFor(c));
  if (tiles) {
    // Bytes of any FP8 type, held as i8: moved as they are, never converted.
    // Units of pieces or results turn several tiles over at once.
    auto type = MemRefType::get(
        {tiles * kTileBytes}, b.getIntegerType(8),
        MemRefLayoutAttrInterface(), b.getI64IntegerAttr(kSharedSpace));
    shared = func.addWorkgroupAttribution(type, loc);
    func.setWorkgroupAttributionAttr(func.getNumWorkgroupAttributions() - 1,
                                     b.getStringAttr("llvm.align"),
                                     b.getI64IntegerAttr(kSquare));
  }
  TransposeEmitter e(b, loc);
  e.thread = e.threadId();
  Value block = e.subI(e.blockId(), e.idx(firstBlock));

  // Copy i takes blocks [start, start + blocksFor(i)): a chain of tests on
  // the block id, uniform within a block (the tiled copy has a barrier).
  OpBuilder::InsertionGuard guard(b);
  int64_t start = 0;
  for (size_t i = 0; i < copies.size(); ++i) {
    TransposeCopy c = copies[i];
    int64_t end = start + blocksFor(c);
    Value local = e.subI(block, e.idx(start));
    auto emitCase = [&] {
      if (bind)
        bind(i, c);
      assert((!c.source || isTiled(c)) &&
             "a quantizing copy needs whole tiles (canQuantizeInTranspose)");
      assert((c.pieces.empty() ||
              canQuantizePiecesInTranspose(
                  c.rows, llvm::map_to_vector(c.pieces, [](auto &p) {
                    return p.width;
                  }))) &&
             "pieces need whole units (canQuantizePiecesInTranspose)");
      e.amaxPartial = Value();
      if (c.evaluate)
        e.emitResults(c, local, shared);
      else if (!c.pieces.empty())
        e.emitPieces(c, local, shared);
      else if (!isTiled(c))
        return e.emitElementwise(c, local);
      else
        e.emitTiled(c, local, shared);
      if (c.amax)
        e.emitBlockAmax(e.amaxPartial, c.amax, amaxShared);
    };
    if (i + 1 == copies.size()) {
      emitCase();
    } else {
      Value here = e.cmpI(arith::CmpIPredicate::ult, block, e.idx(end));
      auto ifOp = scf::IfOp::create(b, loc, here, /*withElseRegion=*/true);
      b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
      emitCase();
      b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
    }
    start = end;
  }
  return start;
}

} // namespace octet::codegen
