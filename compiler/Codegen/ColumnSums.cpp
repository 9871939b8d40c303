//===- ColumnSums.cpp - Weight gradients' column sums --------------------===//
//
// The launch after a row kernel with column sums (norm weight and bias
// gradients): the row kernel's blocks wrote one partial row each to the
// workspace; here a block owns 32 columns, its 8 warps take every 8th
// partial row (8 loads at once) and warp 0 adds the 8 sums in order, so
// that the result does not depend on scheduling. An accumulated gradient
// (acc + dweight) adds its accumulator here. With trailing transposes the
// column sums' blocks open the transpose launch.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/RowKernelBuilder.h"
#include "compiler/Codegen/TransposeKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace octet::codegen {

gpu::GPUFuncOp
RowKernelBuilder::buildColumnSumAndTransposes(gpu::GPUModuleOp mod,
                                              StringRef name, int64_t &grid) {
  static_assert(kColumnSumThreads == kTransposeThreads,
                "one block size for both");
  OpBuilder::InsertionGuard guard(b);
  gpu::GPUFuncOp func = createFollowingKernel(mod, name, kTransposeThreads,
                                              {columnSumSharedType()});
  Value block = blockId();
  int64_t sumBlocks = columnSumBlocks();
  Value summing = cmpI(arith::CmpIPredicate::ult, block, idx(sumBlocks));
  auto ifOp = scf::IfOp::create(b, loc, summing, /*withElseRegion=*/true);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  emitColumnSums(func, block);
  b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  grid = sumBlocks + emitTransposes(func, nullptr, sumBlocks);
  return func;
}

MemRefType RowKernelBuilder::columnSumSharedType() {
  return MemRefType::get({kColumnSumThreads}, f32, MemRefLayoutAttrInterface(),
                         b.getI64IntegerAttr(kSharedSpace));
}

int64_t RowKernelBuilder::columnSumBlocks() {
  int64_t blocks = 0;
  for (Value v :
       cast<kernel::YieldOp>(fused.getBodyBlock().getTerminator()).getValues())
    if (plan.columnSumOf(v))
      blocks += ceilDiv(numElements(v.getType()), kWarp);
  return blocks;
}

gpu::GPUFuncOp RowKernelBuilder::buildColumnSum(gpu::GPUModuleOp mod,
                                                StringRef name) {
  OpBuilder::InsertionGuard guard(b);
  gpu::GPUFuncOp func = createFollowingKernel(mod, name, kColumnSumThreads,
                                              {columnSumSharedType()});
  emitColumnSums(func, blockId());
  return func;
}

void RowKernelBuilder::emitColumnSums(gpu::GPUFuncOp func, Value block) {
  Block &body = fused.getBodyBlock();
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  Value ws = func.getArgument(func.getFunctionType().getNumInputs() - 1);
  Value sums = func.getWorkgroupAttributions().front();
  Value t = threadId();
  Value lane = remUI(t, idx(kWarp));
  Value group = divUI(t, idx(kWarp));
  // A block owns 32 columns; its warps split the partial rows (warp g adds
  // rows g, g + 8, ...), then warp 0 adds the 8 group sums in group order.
  // The order is fixed, so the result does not depend on scheduling, and a
  // column has 8 loads in flight instead of one chain through the L2.
  SmallVector<std::pair<Value, unsigned>> outputs;
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    if (plan.columnSumOf(v))
      outputs.push_back({v, body.getNumArguments() + i});
  SmallVector<int64_t> starts;
  int64_t next = 0;
  for (auto [v, arg] : outputs) {
    starts.push_back(next);
    next += ceilDiv(numElements(v.getType()), kWarp);
  }
  emitDispatch(starts, 0, starts.size(), block, [&](int64_t o, Value local) {
    auto [v, argNo] = outputs[o];
    Value sum = plan.columnSumOf(v);
    int64_t len = numElements(v.getType());
    int64_t partials = plan.workspaceRows.lookup(sum);
    Value col = addI(mulI(local, idx(kWarp)), lane);
    Value inside = cmpI(arith::CmpIPredicate::ult, col, idx(len));
    Value first = addI(idx(plan.workspaceOffset.lookup(sum)), col);
    Value partial;
    {
      OpBuilder::InsertionGuard g2(b);
      auto ifOp = scf::IfOp::create(b, loc, TypeRange{f32}, inside, true);
      b.setInsertionPointToStart(ifOp.thenBlock());
      auto partialAt = [&](Value g) {
        Value at = addI(first, mulI(g, idx(len)));
        return load(ws, at);
      };
      // This warp's rows in chunks of kColumnSumUnroll, loaded together
      // and added in order (the bits do not change): one load at a time
      // through the L2 left the kernel latency-bound (llama3-8b RMSNorm
      // backward: 264 partial rows, 33 a warp, 6.1 us on an H100).
      Value rows = divUI(subI(idx(partials + kColumnSumGroups - 1), group),
                         idx(kColumnSumGroups));
      Value chunks = divUI(rows, idx(kColumnSumUnroll));
      auto unrolled = scf::ForOp::create(
          b, loc, idx(0), chunks, idx(1), ValueRange{f32c(0.0)},
          [&](OpBuilder &, Location, Value c, ValueRange acc) {
            Value base =
                addI(group, mulI(c, idx(kColumnSumUnroll * kColumnSumGroups)));
            SmallVector<Value> xs;
            for (int64_t u = 0; u < kColumnSumUnroll; ++u)
              xs.push_back(partialAt(addI(base, idx(u * kColumnSumGroups))));
            Value total = acc[0];
            for (Value x : xs)
              total = addF(total, x);
            scf::YieldOp::create(b, loc, ValueRange{total});
          });
      Value rest =
          addI(group, mulI(chunks, idx(kColumnSumUnroll * kColumnSumGroups)));
      auto loop = scf::ForOp::create(
          b, loc, rest, idx(partials), idx(kColumnSumGroups),
          ValueRange{unrolled.getResult(0)},
          [&](OpBuilder &, Location, Value g, ValueRange acc) {
            scf::YieldOp::create(b, loc,
                                 ValueRange{addF(acc[0], partialAt(g))});
          });
      scf::YieldOp::create(b, loc, loop.getResult(0));
      b.setInsertionPointToStart(ifOp.elseBlock());
      scf::YieldOp::create(b, loc, ValueRange{f32c(0.0)});
      partial = ifOp.getResult(0);
    }
    store(partial, sums, t);
    barrier();
    Value firstGroup = cmpI(arith::CmpIPredicate::eq, group, idx(0));
    Value write = andI(firstGroup, inside);
    OpBuilder::InsertionGuard g2(b);
    auto ifOp = scf::IfOp::create(b, loc, write, false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    Value total = load(sums, lane);
    for (int64_t g = 1; g < kColumnSumGroups; ++g)
      total = addF(total, load(sums, addI(lane, idx(g * kWarp))));
    Type elem = cast<RankedTensorType>(v.getType()).getElementType();
    if (sum != v) {
      // The column sum is rounded to its type before the add, as the
      // interpreter does op by op.
      Type sumElem = cast<RankedTensorType>(sum.getType()).getElementType();
      BlockArgument acc = plan.accumulated.lookup(v).second;
      Value prior = loadScalar(
          func.getArgument(acc.getArgNumber()),
          cast<RankedTensorType>(acc.getType()).getElementType(), col);
      total = addF(prior, roundTo(total, sumElem));
    }
    Value out = fromF32(total, elem);
    store(out, func.getArgument(argNo), col);
  });
}

} // namespace octet::codegen
