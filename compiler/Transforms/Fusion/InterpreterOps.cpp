#include "compiler/Transforms/Fusion/InterpreterOps.h"

#include "compiler/Interpreter/Interpreter.h"
#include "dialects/fp8/Fp8Dialect.h"
#include "dialects/graph/GraphDialect.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"

#include <mutex>

using namespace mlir;

namespace octet::fusion {
namespace {

using interp::ExecContext;
using interp::Tensor;

llvm::Error fail(Operation *op, const llvm::Twine &message) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << op->getName() << " at " << op->getLoc() << ": " << message;
  return llvm::make_error<llvm::StringError>(text,
                                             llvm::inconvertibleErrorCode());
}

// Runs ops that `build` creates in a scratch function over the op's operands
// and returns its results, so kernel ops reuse the interpreter's graph ops.
llvm::Error runAs(Operation *op, ExecContext &ctx,
                  llvm::function_ref<SmallVector<Value>(OpBuilder &,
                                                        ValueRange)>
                      build) {
  MLIRContext *mlir = op->getContext();
  OpBuilder b(mlir);
  OwningOpRef<ModuleOp> scratch = ModuleOp::create(b.getUnknownLoc());
  b.setInsertionPointToEnd(scratch->getBody());
  auto type = b.getFunctionType(op->getOperandTypes(), op->getResultTypes());
  auto func = func::FuncOp::create(b, op->getLoc(), "body", type);
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToEnd(entry);
  SmallVector<Value> results = build(b, entry->getArguments());
  func::ReturnOp::create(b, op->getLoc(), results);
  // Taken, not copied: the nested run then frees each operand after its
  // last use inside the body (a multi-tensor optimizer step holds one
  // parameter's old and new state at a time, not the whole model's).
  std::vector<Tensor> args;
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    args.push_back(ctx.takeOperand(op, i));
  interp::Interpreter interpreter(*scratch);
  auto out = interpreter.run("body", std::move(args), ctx.variables());
  if (!out)
    return out.takeError();
  for (auto [i, t] : llvm::enumerate(*out))
    ctx.setResult(op, i, std::move(t));
  return llvm::Error::success();
}

llvm::Error runFused(Operation *op, ExecContext &ctx) {
  auto fused = cast<kernel::FusedOp>(op);
  return runAs(op, ctx, [&](OpBuilder &b, ValueRange args) {
    IRMapping map;
    Block &body = fused.getBodyBlock();
    for (auto [arg, v] : llvm::zip(body.getArguments(), args))
      map.map(arg, v);
    for (Operation &inner : body.without_terminator())
      b.clone(inner, map);
    SmallVector<Value> results;
    for (Value v : body.getTerminator()->getOperands())
      results.push_back(map.lookup(v));
    return results;
  });
}

// Row-major strides: outer = product of dims before `dim`, inner = after.
void split(const std::vector<int64_t> &shape, int64_t dim, int64_t &outer,
           int64_t &inner) {
  outer = inner = 1;
  for (int64_t i = 0; i < dim; ++i)
    outer *= shape[i];
  for (size_t i = dim + 1; i < shape.size(); ++i)
    inner *= shape[i];
}

llvm::Error runSlice(Operation *op, ExecContext &ctx) {
  auto slice = cast<graph::SliceOp>(op);
  const Tensor &x = ctx.operand(op, 0);
  auto type = cast<RankedTensorType>(slice.getType());
  Tensor out(x.dtype(), std::vector<int64_t>(type.getShape()));
  int64_t outer, inner, dim = slice.getDim();
  split(x.shape(), dim, outer, inner);
  int64_t n = type.getDimSize(dim), full = x.dim(dim);
  int64_t off = slice.getOffset();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n * inner; ++j) {
      int64_t src = (o * full + off) * inner + j, dst = o * n * inner + j;
      if (isFloat(x.dtype()))
        out.f()[dst] = x.f()[src];
      else
        out.i()[dst] = x.i()[src];
    }
  ctx.setResult(op, 0, std::move(out));
  return llvm::Error::success();
}

llvm::Error runConcat(Operation *op, ExecContext &ctx) {
  auto concat = cast<graph::ConcatOp>(op);
  auto type = cast<RankedTensorType>(concat.getType());
  int64_t dim = concat.getDim();
  const Tensor &first = ctx.operand(op, 0);
  Tensor out(first.dtype(), std::vector<int64_t>(type.getShape()));
  int64_t outer, inner;
  split(out.shape(), dim, outer, inner);
  int64_t total = type.getDimSize(dim), at = 0;
  for (unsigned k = 0; k < op->getNumOperands(); ++k) {
    const Tensor &x = ctx.operand(op, k);
    int64_t n = x.dim(dim);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < n * inner; ++j) {
        int64_t src = o * n * inner + j, dst = (o * total + at) * inner + j;
        if (isFloat(x.dtype()))
          out.f()[dst] = x.f()[src];
        else
          out.i()[dst] = x.i()[src];
      }
    at += n;
  }
  ctx.setResult(op, 0, std::move(out));
  return llvm::Error::success();
}

llvm::Error runCollective(Operation *op, ExecContext &ctx) {
  auto c = cast<kernel::CollectiveOp>(op);
  if (c.getGroupSize() != 1)
    return fail(op, "the interpreter runs one rank; a group of " +
                        llvm::Twine(c.getGroupSize()) +
                        " ranks needs the runtime");
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    ctx.setResult(op, i, ctx.operand(op, i));
  return llvm::Error::success();
}

} // namespace

void registerFusionInterpreterOps() {
  static std::once_flag once;
  std::call_once(once, [] {
    interp::registerOpHandler("kernel.fused", runFused);
    interp::registerOpHandler("graph.slice", runSlice);
    interp::registerOpHandler("graph.concat", runConcat);
    interp::registerOpHandler("kernel.collective", runCollective);
    interp::registerOpHandler(
        "kernel.attention_fwd", [](Operation *op, ExecContext &ctx) {
          auto a = cast<kernel::AttentionFwdOp>(op);
          return runAs(op, ctx, [&](OpBuilder &b, ValueRange args) {
            auto g = graph::AttentionOp::create(
                b, op->getLoc(), op->getResult(0).getType(),
                op->getResult(1).getType(), args[0], args[1], args[2],
                args.size() > 3 ? args[3] : Value(), a.getCausalAttr(),
                a.getScaleAttr());
            return SmallVector<Value>(g->getResults());
          });
        });
    interp::registerOpHandler(
        "kernel.attention_bwd", [](Operation *op, ExecContext &ctx) {
          auto a = cast<kernel::AttentionBwdOp>(op);
          return runAs(op, ctx, [&](OpBuilder &b, ValueRange args) {
            auto g = graph::AttentionGradOp::create(
                b, op->getLoc(), op->getResult(0).getType(),
                op->getResult(1).getType(), op->getResult(2).getType(),
                args[0], args[1], args[2], args[3], args[4], args[5],
                args.size() > 6 ? args[6] : Value(), a.getCausalAttr(),
                a.getScaleAttr());
            return SmallVector<Value>(g->getResults());
          });
        });
  });
}

void expandGemmEpilogues(ModuleOp module) {
  SmallVector<kernel::GemmOp> gemms;
  module.walk([&](kernel::GemmOp g) {
    if (g.getEpilogue() || g.getC() || g.getBias() || g.getAScale())
      gemms.push_back(g);
  });
  for (kernel::GemmOp g : gemms) {
    OpBuilder b(g);
    Location loc = g.getLoc();
    Type type = g.getResult().getType();
    Value product;
    if (g.getAScale()) {
      product = fp8::MatmulOp::create(
          b, loc, type, g.getA(), g.getAScale(), g.getB(), g.getBScale(),
          g.getBias(), g.getTransposeA(), g.getTransposeB(),
          DenseI64ArrayAttr(), DenseI64ArrayAttr(), g.getRoleAttr(),
          g.getParamAttr());
    } else if (g.getBias()) {
      // D = A·Bᵀ + bias is a linear (the only form with a bias here).
      product = graph::LinearOp::create(b, loc, type, g.getA(), g.getB(),
                                        g.getBias(), g.getParamAttr());
    } else {
      product = graph::MatmulOp::create(b, loc, type, g.getA(), g.getB(),
                                        g.getTransposeA(), g.getTransposeB(),
                                        g.getRoleAttr(), g.getParamAttr());
    }
    StringRef epilogue = g.getEpilogueKind();
    Value pre = product, result = product;
    if (epilogue == "gelu" || epilogue == "gelu_aux")
      result = graph::GeluOp::create(b, loc, type, product,
                                     b.getStringAttr("tanh"));
    if (g.getC())
      result = graph::AddOp::create(b, loc, type, result, g.getC());
    g.getResult().replaceAllUsesWith(result);
    if (epilogue == "gelu_aux")
      g.getAux()[0].replaceAllUsesWith(pre);
    if (epilogue == "bias_grad")
      g.getAux()[0].replaceAllUsesWith(graph::BiasGradOp::create(
          b, loc, g.getAux()[0].getType(), g.getA()));
    g.erase();
  }
}

} // namespace octet::fusion
