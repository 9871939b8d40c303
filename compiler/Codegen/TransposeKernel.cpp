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
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/TransposeKernel.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

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
  auto type = cast<MemRefType>(c.from.getType());
  return type.getElementType().getIntOrFloatBitWidth() == 8 &&
         c.rows % kTile == 0 && c.cols % kTile == 0;
}

constexpr int64_t kWarpSize = 32;
constexpr int64_t kWarps = kTransposeThreads / kWarpSize;

int64_t blocksFor(const TransposeCopy &c) {
  if (isTiled(c))
    return (c.rows / kTile) * (c.cols / kTile);
  return (c.rows * c.cols + kTransposeThreads - 1) / kTransposeThreads;
}

class TransposeEmitter {
public:
  TransposeEmitter(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  void emitTiled(const TransposeCopy &c, Value tile, Value shared);
  void emitElementwise(const TransposeCopy &c, Value block);
  // Block maximum of `x` (every thread's), then one atomic into `amax`.
  void emitBlockAmax(Value x, Value amax, Value shared);

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value mul(Value x, int64_t y) { return mul(x, idx(y)); }

  OpBuilder &b;
  Location loc;
  Value thread;
  // This thread's largest |source| so far (quantizing copies).
  Value amaxPartial;
};

void TransposeEmitter::emitBlockAmax(Value x, Value amax, Value shared) {
  Type i32 = b.getI32Type();
  Value width = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(kWarpSize));
  for (int64_t off = kWarpSize / 2; off >= 1; off /= 2) {
    Value o = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(off));
    Value other = gpu::ShuffleOp::create(b, loc, x, o, width,
                                         gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    x = arith::MaximumFOp::create(b, loc, x, other);
  }
  Value lane = arith::RemUIOp::create(b, loc, thread, idx(kWarpSize));
  Value warp = arith::DivUIOp::create(b, loc, thread, idx(kWarpSize));
  {
    OpBuilder::InsertionGuard guard(b);
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane,
                                        idx(0));
    auto ifOp = scf::IfOp::create(b, loc, first, false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    memref::StoreOp::create(b, loc, x, shared, ValueRange{warp});
  }
  gpu::BarrierOp::create(b, loc);
  OpBuilder::InsertionGuard guard(b);
  Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, thread,
                                      idx(0));
  auto ifOp = scf::IfOp::create(b, loc, first, false);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  // Warps in order: the same bits whatever the order they finished in.
  Value m = memref::LoadOp::create(b, loc, shared, ValueRange{idx(0)});
  for (int64_t w = 1; w < kWarps; ++w)
    m = arith::MaximumFOp::create(
        b, loc, m, memref::LoadOp::create(b, loc, shared, ValueRange{idx(w)}));
  Value bits = arith::BitcastOp::create(b, loc, i32, m);
  memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::maxu, bits, amax,
                              ValueRange{idx(0)});
}

void TransposeEmitter::emitTiled(const TransposeCopy &c, Value tile,
                                 Value shared) {
  Type elem = cast<MemRefType>(c.from.getType()).getElementType();
  auto wordType = VectorType::get({kSquare}, elem);
  auto sharedWordType = VectorType::get({kSquare}, b.getIntegerType(8));
  llvm::MaybeAlign wordAlign(kSquare);
  int64_t tileCols = c.cols / kTile;
  // The last rows first: they are the ones the row kernel before this
  // launch wrote last, the likeliest to be still in L2.
  tile = arith::SubIOp::create(b, loc, idx(blocksFor(c) - 1), tile);
  Value row0 = mul(arith::DivUIOp::create(b, loc, tile, idx(tileCols)), kTile);
  Value col0 = mul(arith::RemUIOp::create(b, loc, tile, idx(tileCols)), kTile);
  // Consecutive threads take consecutive words of a row: coalesced reads
  // here and coalesced writes below.
  Value squareCol =
      arith::RemUIOp::create(b, loc, thread, idx(kSquaresPerSide));
  Value squareRow =
      arith::DivUIOp::create(b, loc, thread, idx(kSquaresPerSide));

  // Read the square: its rows, a word each (or quantize them from the
  // source and write them to the row-major result).
  Value firstRow = add(row0, mul(squareRow, kSquare));
  Value readCol = add(col0, mul(squareCol, kSquare));
  SmallVector<Value, kSquare> rows;
  if (c.source) {
    Type wide = cast<MemRefType>(c.source.getType()).getElementType();
    auto wideType = VectorType::get({kSquare}, wide);
    auto f32Type = VectorType::get({kSquare}, b.getF32Type());
    Value scale = vector::BroadcastOp::create(
        b, loc, f32Type,
        memref::LoadOp::create(b, loc, c.scale, ValueRange{idx(0)}));
    SmallVector<Value, kSquare> wideRows;
    for (int64_t i = 0; i < kSquare; ++i) {
      Value at = add(mul(add(firstRow, idx(i)), c.cols), readCol);
      wideRows.push_back(vector::LoadOp::create(
          b, loc, wideType, c.source, ValueRange{at}, false,
          llvm::MaybeAlign(kSquare * wide.getIntOrFloatBitWidth() / 8)));
    }
    for (int64_t i = 0; i < kSquare; ++i) {
      Value x = wideRows[i];
      if (!wide.isF32())
        x = arith::ExtFOp::create(b, loc, f32Type, x);
      Value m = vector::ReductionOp::create(
          b, loc, vector::CombiningKind::MAXIMUMF,
          math::AbsFOp::create(b, loc, x));
      amaxPartial = amaxPartial
                        ? Value(arith::MaximumFOp::create(b, loc, amaxPartial, m))
                        : m;
      Value q = arith::TruncFOp::create(
          b, loc, wordType, arith::MulFOp::create(b, loc, x, scale));
      Value at = add(mul(add(firstRow, idx(i)), c.cols), readCol);
      vector::StoreOp::create(b, loc, q, c.from, ValueRange{at}, false,
                              wordAlign);
      rows.push_back(q);
    }
  } else {
    for (int64_t i = 0; i < kSquare; ++i) {
      Value at = add(mul(add(firstRow, idx(i)), c.cols), readCol);
      rows.push_back(vector::LoadOp::create(b, loc, wordType, c.from,
                                            ValueRange{at}, false, wordAlign));
    }
  }
  // Turn it over: column k of the square gathers byte k of every row.
  Value upper = vector::ShuffleOp::create(
      b, loc, rows[0], rows[1], ArrayRef<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  Value lower = vector::ShuffleOp::create(
      b, loc, rows[2], rows[3], ArrayRef<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  for (int64_t k = 0; k < kSquare; ++k) {
    Value column = vector::ShuffleOp::create(
        b, loc, upper, lower, ArrayRef<int64_t>{k, 4 + k, 8 + k, 12 + k});
    // Shared row = tile column, word = square row.
    Value sharedRow = add(mul(squareCol, kSquare), idx(k));
    Value at = mul(add(mul(sharedRow, kSharedRowWords), squareRow), kSquare);
    vector::StoreOp::create(
        b, loc, vector::BitCastOp::create(b, loc, sharedWordType, column),
        shared, ValueRange{at}, false, wordAlign);
  }
  gpu::BarrierOp::create(b, loc);

  // Write the output rows (tile columns), kSquaresPerSide threads a row.
  Value outCol = add(row0, mul(squareCol, kSquare));
  for (int64_t p = 0; p < kSquare; ++p) {
    Value sharedRow = add(squareRow, idx(p * kSquaresPerSide));
    Value at = mul(add(mul(sharedRow, kSharedRowWords), squareCol), kSquare);
    Value word = vector::BitCastOp::create(
        b, loc, wordType,
        vector::LoadOp::create(b, loc, sharedWordType, shared, ValueRange{at},
                               false, wordAlign));
    Value out = add(mul(add(col0, sharedRow), c.rows), outCol);
    vector::StoreOp::create(b, loc, word, c.to, ValueRange{out}, false,
                            wordAlign);
  }
}

// A thread per output element, reading down a column: for scales and
// shapes that are not whole tiles (small tensors).
void TransposeEmitter::emitElementwise(const TransposeCopy &c, Value block) {
  Value out = add(mul(block, kTransposeThreads), thread);
  Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, out,
                                       idx(c.rows * c.cols));
  OpBuilder::InsertionGuard guard(b);
  auto ifOp = scf::IfOp::create(b, loc, inside, false);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  Value col = arith::DivUIOp::create(b, loc, out, idx(c.rows));
  Value row = arith::RemUIOp::create(b, loc, out, idx(c.rows));
  Value x = memref::LoadOp::create(b, loc, c.from,
                                   ValueRange{add(mul(row, c.cols), col)});
  memref::StoreOp::create(b, loc, x, c.to, ValueRange{out});
}

} // namespace

bool canQuantizeInTranspose(int64_t rows, int64_t cols) {
  return rows % kTile == 0 && cols % kTile == 0;
}

int64_t emitTransposeCopies(OpBuilder &b, Location loc, gpu::GPUFuncOp func,
                            ArrayRef<TransposeCopy> copies) {
  Value shared, amaxShared;
  if (llvm::any_of(copies, [](const TransposeCopy &c) { return c.amax; })) {
    auto type = MemRefType::get({kWarps}, b.getF32Type(),
                                MemRefLayoutAttrInterface(),
                                b.getI64IntegerAttr(kSharedSpace));
    amaxShared = func.addWorkgroupAttribution(type, loc);
  }
  if (llvm::any_of(copies, isTiled)) {
    // Bytes of any FP8 type, held as i8: moved as they are, never converted.
    auto type = MemRefType::get(
        {kTile * kSharedRowWords * kSquare}, b.getIntegerType(8),
        MemRefLayoutAttrInterface(), b.getI64IntegerAttr(kSharedSpace));
    shared = func.addWorkgroupAttribution(type, loc);
    func.setWorkgroupAttributionAttr(func.getNumWorkgroupAttributions() - 1,
                                     b.getStringAttr("llvm.align"),
                                     b.getI64IntegerAttr(kSquare));
  }
  TransposeEmitter e(b, loc);
  e.thread = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value blockId = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);

  // Copy i takes blocks [start, start + blocksFor(i)): a chain of tests on
  // the block id, uniform within a block (the tiled copy has a barrier).
  OpBuilder::InsertionGuard guard(b);
  int64_t start = 0;
  for (size_t i = 0; i < copies.size(); ++i) {
    const TransposeCopy &c = copies[i];
    int64_t end = start + blocksFor(c);
    Value local = arith::SubIOp::create(b, loc, blockId, e.idx(start));
    auto emitCase = [&] {
      assert((!c.source || isTiled(c)) &&
             "a quantizing copy needs whole tiles (canQuantizeInTranspose)");
      if (!isTiled(c)) {
        e.emitElementwise(c, local);
        return;
      }
      e.amaxPartial = Value();
      e.emitTiled(c, local, shared);
      if (c.amax)
        e.emitBlockAmax(e.amaxPartial, c.amax, amaxShared);
    };
    if (i + 1 == copies.size()) {
      emitCase();
    } else {
      Value here = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                         blockId, e.idx(end));
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
