//===- RowTransposes.cpp - The FP8 transposes of a row kernel's region ---===//
//
// An FP8 result that the region also transposes ([R, C] -> [C, R], the
// K-major copy a weight-gradient GEMM reads) runs as a launch after the row
// kernel (TransposeKernel.h), which reads the tensor back; when the region
// only quantizes an input (or a join of inputs, some through a RoPE, or the
// results of one elementwise op) and transposes the result, that launch
// does the quantize itself and no row kernel runs (quantizeInTranspose).
// With transpose-tile-rows > 0 the row kernel writes the transpose itself
// when its rows are the kernel's: a block then takes tiles of that many
// consecutive rows, gathers its columns' bytes of the tile and writes each
// column's run of the transposed tensor at once (emitTiledRows). That is
// off by default: its column runs are 16 bytes, half a sector each, and it
// measured slower on an H100 (Pipeline.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/RowKernelBuilder.h"
#include "compiler/Codegen/TransposeKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <numeric>

using namespace mlir;

namespace octet::codegen {

fp8::QuantizeOp RowKernelBuilder::quantizeInTranspose() {
  inTransposePieces.clear();
  inTransposeOp = nullptr;
  inTransposeResults.clear();
  inTransposeSource = nullptr;
  auto fail = [&]() -> fp8::QuantizeOp {
    inTransposeOp = nullptr;
    inTransposeResults.clear();
    inTransposeSource = nullptr;
    return nullptr;
  };
  if (plan.transposes.size() != 1)
    return fail();
  fp8::TransposeOp t = plan.transposes.front();
  auto q = t.getInput().getDefiningOp<fp8::QuantizeOp>();
  if (!q || !isa<BlockArgument>(q.getScale()) ||
      numElements(q.getScale().getType()) != 1 ||
      numElements(t.getScale().getType()) != 1)
    return fail();
  auto type = cast<RankedTensorType>(q.getInput().getType());
  if (type.getRank() != 2)
    return fail();
  int64_t rows = type.getDimSize(0);
  // The K-major layout must be a result; the row-major one the launch
  // writes as it goes where it is one too (a weight's K-major cast keeps
  // only its transpose).
  auto yield = cast<kernel::YieldOp>(fused.getBodyBlock().getTerminator());
  if (!llvm::is_contained(yield.getValues(), t.getResult()))
    return fail();
  // An input, as it is or through reshapes (views of its one buffer), and
  // nothing else in the region (under current scaling the producer wrote
  // it with its amax; this launch casts it with the scale derived since).
  Value source = q.getInput();
  llvm::SmallPtrSet<Operation *, 4> views;
  while (auto r = source.getDefiningOp<graph::ReshapeOp>()) {
    views.insert(r);
    source = r.getInput();
  }
  if (auto input = dyn_cast<BlockArgument>(source)) {
    bool onlyCast = llvm::all_of(
        fused.getBodyBlock().without_terminator(), [&](Operation &op) {
          return &op == q.getOperation() || &op == t.getOperation() ||
                 (views.contains(&op) &&
                  !llvm::is_contained(yield.getValues(), op.getResult(0)));
        });
    if (plan.segments.size() != 1 || !onlyCast ||
        !canQuantizeInTranspose(rows, type.getDimSize(1)))
      return fail();
    inTransposeSource = input;
    return q;
  }

  // A join: every op of the region is the join, the quantize, the
  // transpose, or on the way from an input to the join (reshapes, RoPEs),
  // used once.
  auto concat = q.getInput().getDefiningOp<graph::ConcatOp>();
  if (!concat || concat.getDim() != 1 || !concat->hasOneUse())
    return fail();
  llvm::SmallPtrSet<Operation *, 16> covered{concat, q, t, yield};
  SmallVector<JoinPiece> pieces;
  SmallVector<int64_t> widths;
  int64_t col0 = 0;
  for (Value operand : concat.getInputs()) {
    int64_t width = cast<RankedTensorType>(operand.getType()).getDimSize(1);
    Value v = operand;
    auto usedOnce = [&](Value x) {
      covered.insert(x.getDefiningOp());
      return x.hasOneUse();
    };
    while (auto r = v.getDefiningOp<graph::ReshapeOp>()) {
      if (!usedOnce(v))
        return fail();
      v = r.getInput();
    }
    JoinPiece piece{nullptr, col0, width, nullptr};
    if (auto op = v.getDefiningOp<graph::SwigluGradOp>()) {
      if (!usedOnce(v) || (inTransposeOp && inTransposeOp != op) ||
          !llvm::all_of(op->getOperands(), [&](Value x) {
            return isa<BlockArgument>(x) &&
                   numElements(x.getType()) == rows * width;
          }))
        return fail();
      inTransposeOp = op;
      inTransposeResults.push_back(v);
      widths.push_back(width);
      col0 += width;
      continue;
    }
    if (auto rope = v.getDefiningOp<graph::RopeOp>()) {
      auto in = cast<RankedTensorType>(rope.getInput().getType());
      if (!usedOnce(v) || !isa<BlockArgument>(rope.getInput()) ||
          !isa<BlockArgument>(rope.getPositions()) ||
          in.getShape().back() != kRopeTileHead ||
          in.getNumElements() /
                  (in.getShape().back() * in.getShape().end()[-2]) !=
              rows ||
          numElements(rope.getPositions().getType()) != rows)
        return fail();
      for (const JoinPiece &other : pieces)
        if (other.rope && !sameRopeAngles(other.rope, rope))
          return fail();
      piece.rope = rope;
      v = rope.getInput();
    }
    auto input = dyn_cast<BlockArgument>(v);
    if (!input)
      return fail();
    piece.input = input;
    pieces.push_back(piece);
    widths.push_back(width);
    col0 += width;
  }
  for (Operation &op : fused.getBodyBlock())
    if (!covered.contains(&op))
      return fail();
  if (inTransposeOp) {
    // Every piece a result of the op, each result once, all as wide.
    if (!pieces.empty() ||
        inTransposeResults.size() != inTransposeOp->getNumResults() ||
        !canQuantizeResultsInTranspose(rows, widths))
      return fail();
    return q;
  }
  if (!canQuantizePiecesInTranspose(rows, widths))
    return fail();
  inTransposePieces = std::move(pieces);
  return q;
}

SmallVector<Value>
RowKernelBuilder::evaluateInTranspose(ArrayRef<Value> operands) {
  // The op as the row kernels emit it, on four elements a value instead of
  // a chunk (the same arithmetic and roundings).
  int64_t savedVec = vec;
  VectorType savedType = vecType;
  vec = cast<VectorType>(operands.front().getType()).getNumElements();
  vecType = VectorType::get({vec}, f32);
  for (auto [operand, x] : llvm::zip(inTransposeOp->getOperands(), operands)) {
    Val val;
    val.chunks = {x};
    vals[operand] = val;
  }
  const Segment *seg = nullptr;
  for (const Segment &s : plan.segments)
    if (llvm::is_contained(s.ops, inTransposeOp))
      seg = &s;
  assert(seg && "the op is planned");
  SmallVector<Value> accs;
  DenseMap<Value, int> accIdx;
  LogicalResult emitted = emitOp(*seg, inTransposeOp, accs, accIdx);
  assert(succeeded(emitted) && "an elementwise op emits");
  (void)emitted;
  SmallVector<Value> results;
  for (Value r : inTransposeResults)
    results.push_back(chunksOf(r).front());
  vec = savedVec;
  vecType = savedType;
  return results;
}

gpu::GPUFuncOp RowKernelBuilder::buildTransposes(gpu::GPUModuleOp mod,
                                                 StringRef name, int64_t &grid,
                                                 fp8::QuantizeOp quantize) {
  OpBuilder::InsertionGuard guard(b);
  gpu::GPUFuncOp func = createFollowingKernel(mod, name, kTransposeThreads, {});
  grid = emitTransposes(func, quantize, 0);
  return func;
}

int64_t RowKernelBuilder::emitTransposes(gpu::GPUFuncOp func,
                                         fp8::QuantizeOp quantize,
                                         int64_t firstBlock) {
  // Copies [R, C] → [C, R]; a tensorwise scale passes through as a 1×1 one,
  // block scales transpose with the data.
  // A copy's buffers. With the argument table they are read again where
  // the copy's blocks start (bind), and these first reads are dead.
  auto buffersOf = [&](Value from, Value to, TransposeCopy &copy) {
    copy.from = mem(from);
    copy.to = mem(to);
    if (!quantize || from != quantize.getResult())
      return;
    copy.scale = mem(quantize.getScale());
    copy.amax = mem(quantize.getAmax());
    copy.operands.clear();
    if (inTransposeOp)
      for (Value operand : inTransposeOp->getOperands())
        copy.operands.push_back(mem(operand));
    else if (inTransposePieces.empty())
      copy.source = mem(inTransposeSource);
    for (auto [piece, p] : llvm::zip(copy.pieces, inTransposePieces)) {
      piece.source = mem(p.input);
      if (p.rope)
        copy.positions = mem(p.rope.getPositions());
    }
  };
  SmallVector<std::pair<Value, Value>> sources;
  SmallVector<TransposeCopy> copies;
  for (fp8::TransposeOp t : plan.transposes) {
    for (auto [from, to] : {std::pair(t.getInput(), t.getResult()),
                            std::pair(t.getScale(), t.getResultScale())}) {
      // A result nobody reads is not a kernel result: nothing to write.
      if (!inMemory(to))
        continue;
      auto type = cast<RankedTensorType>(from.getType());
      int64_t rows = type.getRank() == 2 ? type.getDimSize(0) : 1;
      int64_t cols = type.getNumElements() / rows;
      TransposeCopy copy{Value(), Value(), rows, cols};
      if (quantize && from == quantize.getResult()) {
        if (inTransposeOp)
          copy.evaluate = [this](ArrayRef<Value> operands) {
            return evaluateInTranspose(operands);
          };
        for (const JoinPiece &p : inTransposePieces) {
          TransposePiece piece{Value(), p.col0, p.width};
          if (graph::RopeOp rope = p.rope) {
            piece.invFreq = ropeTable(rope);
            piece.inverse = rope.getInverse();
            piece.roundTo = getElementTypeOrSelf(rope.getResult().getType());
          }
          copy.pieces.push_back(piece);
        }
      }
      buffersOf(from, to, copy);
      sources.push_back({from, to});
      copies.push_back(copy);
    }
  }
  auto bind = [&](size_t i, TransposeCopy &copy) {
    buffersOf(sources[i].first, sources[i].second, copy);
  };
  return emitTransposeCopies(b, loc, func, copies, firstBlock,
                             argTable ? function_ref<void(size_t,
                                                          TransposeCopy &)>(
                                            bind)
                                      : nullptr);
}

// Each thread gathers, for every column c it owns of a transposed input,
// the bytes of kRegisterTileRows rows in a vector<8 x fp8> that shifts by
// one each row (the newest byte last: two byte permutes a row), so that
// after a group of rows byte j is the group's row j. Every full group but
// the tile's last is parked in shared memory, in a slot of this thread's
// own (no barrier; a warp stores 256 consecutive bytes). After the tile the
// column's TR bytes, consecutive in the transposed [C, R] tensor, go out as
// one 16-byte store (TR = 16: the parked group, then the registers).
void RowKernelBuilder::emitTiledRows(const Segment &seg, Value localBlock,
                                     SmallVector<Value> &accs) {
  int64_t tileRows = seg.tileRows;
  int64_t tiles = seg.rows / tileRows;
  int64_t span = plan.threads * vec;
  int64_t groups = tileRows / kRegisterTileRows;
  Type i8 = b.getIntegerType(8);
  auto groupType = VectorType::get({kRegisterTileRows}, i8);
  auto parkedType = [&](Type elem) {
    return VectorType::get({kRegisterTileRows}, elem);
  };
  // Gathering vectors, in (transpose, chunk, lane) order.
  struct Column {
    fp8::TransposeOp transpose;
    int64_t chunk, lane;
    Type elem;
  };
  SmallVector<Column> columns;
  SmallVector<Value> gatherInits;
  for (fp8::TransposeOp t : seg.tiled) {
    Type elem = cast<RankedTensorType>(t.getInput().getType()).getElementType();
    Value zero = zeros(parkedType(elem));
    for (int64_t c = 0, e = ceilDiv(seg.length.lookup(t.getInput()), span);
         c < e; ++c)
      for (int64_t lane = 0; lane < vec; ++lane) {
        columns.push_back({t, c, lane, elem});
        gatherInits.push_back(zero);
      }
  }
  // Column k's group g: parked at ((g·columns + k)·threads + tid)·8.
  auto parkOffset = [&](Value group, int64_t k) {
    Value slot = addI(mulI(group, idx((int64_t)columns.size())), idx(k));
    return addI(mulI(slot, idx(plan.threads * kRegisterTileRows)),
                mulI(tid, idx(kRegisterTileRows)));
  };
  size_t numAccs = accs.size();
  SmallVector<Value> carried = accs;
  SmallVector<Value> firstRaw = loadRow(seg, mulI(localBlock, idx(tileRows)));
  size_t numRaw = firstRaw.size();
  llvm::append_range(carried, firstRaw);
  auto tileLoop = scf::ForOp::create(
      b, loc, localBlock, idx(tiles), idx(seg.blocks), carried,
      [&](OpBuilder &, Location, Value tile, ValueRange tileIter) {
        Value firstRow = mulI(tile, idx(tileRows));
        // The row after a tile's last is the first of the block's next
        // tile; past the block's last there is none.
        Value nextTileRow = mulI(addI(tile, idx(seg.blocks)), idx(tileRows));
        SmallVector<Value> rowInits(tileIter.begin(), tileIter.end());
        llvm::append_range(rowInits, gatherInits);
        auto rowLoop = scf::ForOp::create(
            b, loc, idx(0), idx(tileRows), idx(1), rowInits,
            [&](OpBuilder &, Location, Value i, ValueRange iter) {
              Value row = addI(firstRow, i);
              Value last = cmpI(arith::CmpIPredicate::eq, i, idx(tileRows - 1));
              Value next = select(last, nextTileRow, addI(row, idx(1)));
              Value more = cmpI(arith::CmpIPredicate::ult, next, idx(seg.rows));
              ValueRange raw = iter.slice(numAccs, numRaw);
              auto ifOp = scf::IfOp::create(b, loc, raw.getTypes(), more,
                                            /*withElseRegion=*/true);
              {
                OpBuilder::InsertionGuard guard(b);
                b.setInsertionPointToStart(ifOp.thenBlock());
                scf::YieldOp::create(b, loc, loadRow(seg, next));
                b.setInsertionPointToStart(ifOp.elseBlock());
                // Past the block's last row: the values are never read.
                scf::YieldOp::create(b, loc, raw);
              }
              DenseMap<Value, SmallVector<Value>> stored;
              int slotsBefore = reduction.next;
              SmallVector<Value> out =
                  emitRow(seg, row, iter.take_front(numAccs), raw, &stored);
              // The next row's reductions (or RoPE angles) reuse the shared
              // slots; a row without either (a quantize) needs no barrier.
              if (reduction.next != slotsBefore || plan.ropeHalf)
                barrier();
              llvm::append_range(out, ifOp.getResults());
              SmallVector<int64_t> mask;
              for (int64_t j = 1; j < kRegisterTileRows; ++j)
                mask.push_back(j);
              mask.push_back(0); // replaced by the new byte's lane below
              SmallVector<Value> gathered;
              for (auto [k, col] : llvm::enumerate(columns)) {
                mask.back() = kRegisterTileRows + col.lane;
                Value chunk = stored[col.transpose.getInput()][col.chunk];
                gathered.push_back(
                    shuffle(iter[numAccs + numRaw + k], chunk, mask));
              }
              if (groups > 1) {
                // A full group that is not the tile's last: park it.
                Value inGroup = remUI(i, idx(kRegisterTileRows));
                Value park =
                    andI(cmpI(arith::CmpIPredicate::eq, inGroup,
                              idx(kRegisterTileRows - 1)),
                         cmpI(arith::CmpIPredicate::ne, i, idx(tileRows - 1)));
                OpBuilder::InsertionGuard guard(b);
                auto parkIf = scf::IfOp::create(b, loc, park, false);
                b.setInsertionPoint(parkIf.thenBlock()->getTerminator());
                Value group = divUI(i, idx(kRegisterTileRows));
                for (auto [k, g] : llvm::enumerate(gathered))
                  vstore(bitcast(groupType, g), parked, parkOffset(group, k),
                         kRegisterTileRows);
              }
              llvm::append_range(out, gathered);
              scf::YieldOp::create(b, loc, out);
            });
        // The rows stay a loop: their trip count is known, and ptxas may
        // unroll it and keep several rows in registers beside the gathered
        // bytes (it did when the whole tile was in registers: 109 a thread
        // for a quantize where 57 did a row at a time).
        rowLoop->setAttr("loop_annotation",
                         LLVM::LoopAnnotationAttr::get(
                             b.getContext(), /*disableNonforced=*/nullptr,
                             /*vectorize=*/nullptr, /*interleave=*/nullptr,
                             LLVM::LoopUnrollAttr::get(
                                 b.getContext(),
                                 /*disable=*/b.getBoolAttr(true), nullptr,
                                 nullptr, nullptr, nullptr, nullptr, nullptr),
                             nullptr, nullptr, nullptr, nullptr, nullptr,
                             nullptr, nullptr, nullptr, nullptr, nullptr, {}));
        // The tile's columns: bytes [firstRow, firstRow + TR) of row c of
        // the transposed tensor, the parked groups first.
        for (auto [k, col] : llvm::enumerate(columns)) {
          Value in = col.transpose.getInput();
          if (!inMemory(col.transpose.getResult()))
            continue;
          int64_t len = seg.length.lookup(in);
          Value bytes = rowLoop.getResult(numAccs + numRaw + k);
          for (int64_t g = groups - 2; g >= 0; --g) {
            Value group = vload(groupType, parked, parkOffset(idx(g), k),
                                kRegisterTileRows);
            Value earlier = bitcast(parkedType(col.elem), group);
            int64_t have = cast<VectorType>(bytes.getType()).getNumElements();
            SmallVector<int64_t> join(kRegisterTileRows + have);
            std::iota(join.begin(), join.end(), 0);
            bytes = shuffle(earlier, bytes, join);
          }
          Value column = addI(chunkBase(col.chunk), idx(col.lane));
          Value off = addI(mulI(column, idx(seg.rows)), firstRow);
          storeNarrow(mem(col.transpose.getResult()), off,
                      chunkValid(seg, len, col.chunk, Value()), bytes);
        }
        scf::YieldOp::create(b, loc,
                             rowLoop.getResults().take_front(numAccs + numRaw));
      });
  accs.assign(tileLoop.getResults().begin(),
              tileLoop.getResults().begin() + numAccs);
}

} // namespace octet::codegen
