// octet-bf16-activations: the train step's activations and activation
// gradients in BF16; variables, parameter gradients and scalars in F32.

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

namespace octet {
#define GEN_PASS_DEF_OCTETBF16ACTIVATIONS
#include "compiler/Transforms/Passes.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;
using namespace octet::graph;

namespace {

Type elementOf(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type ? type.getElementType() : Type();
}

// Retypes the ops of one function in program order, so every operand has
// its final type when its user is reached.
class Retyper {
public:
  explicit Retyper(MLIRContext *ctx)
      : b(ctx), bf16(BFloat16Type::get(ctx)), f32(Float32Type::get(ctx)) {}

  LogicalResult run(func::FuncOp func) {
    for (Operation &op :
         llvm::make_early_inc_range(func.getBody().front().getOperations()))
      if (failed(retype(&op, func)))
        return failure();
    return success();
  }

private:
  OpBuilder b;
  Type bf16, f32;
  // One cast per (value, element type) serves every user.
  DenseMap<std::pair<Value, Type>, Value> casts;

  // Placed before its first user, which ops are visited in order of, not
  // after the definition: a weight is loaded early, and its copy (1 GB for
  // a 128K-vocabulary LM head) should live only from its first GEMM on.
  Value castTo(Value v, Type element, Operation *user) {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getElementType() == element)
      return v;
    Value &cached = casts[{v, element}];
    if (cached)
      return cached;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(user);
    return cached = CastOp::create(b, v.getLoc(), type.clone(element), v);
  }

  void castOperand(Operation *op, unsigned index, Type element) {
    op->setOperand(index, castTo(op->getOperand(index), element, op));
  }

  // GEMM and attention operands: the tensor cores read BF16 pairs.
  void narrowOperand(Operation *op, unsigned index) {
    if (elementOf(op->getOperand(index)) == f32)
      castOperand(op, index, bf16);
  }

  void setElement(Value result, Type element) {
    auto type = cast<RankedTensorType>(result.getType());
    result.setType(type.clone(element));
  }

  void narrowResult(Value result) {
    if (elementOf(result) == f32)
      setElement(result, bf16);
  }

  // Same-typed elementwise ops: F32 if any float operand is F32 (a
  // parameter gradient sum stays F32), else the operands' type.
  void joinOperands(Operation *op) {
    Type joined;
    for (Value v : op->getOperands()) {
      Type e = elementOf(v);
      if (!e || !isa<FloatType>(e))
        continue;
      if (!joined || e == f32)
        joined = e;
    }
    if (!joined)
      return;
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      if (Type e = elementOf(op->getOperand(i)); e && isa<FloatType>(e))
        castOperand(op, i, joined);
    for (Value r : op->getResults())
      if (elementOf(r) && isa<FloatType>(elementOf(r)))
        setElement(r, joined);
  }

  LogicalResult retype(Operation *op, func::FuncOp func);
};

LogicalResult Retyper::retype(Operation *op, func::FuncOp func) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      // State, scalars and the optimizer: F32 by rule.
      .Case<LoadOp, FillOp, IncrementOp, LrScheduleOp, GlobalNormOp,
            ClipScaleOp, AdamWUpdateOp, CrossEntropyOp, EmbeddingGradOp,
            BiasGradOp, CastOp>([](Operation *) { return success(); })
      .Case([&](StoreOp store) {
        auto var = SymbolTable::lookupNearestSymbolFrom<VariableOp>(
            store, store.getVariableAttr());
        if (var)
          castOperand(store, 0, var.getTensorType().getElementType());
        return success();
      })
      .Case([&](func::ReturnOp ret) {
        for (auto [i, type] :
             llvm::enumerate(func.getFunctionType().getResults()))
          if (auto tensor = dyn_cast<RankedTensorType>(type))
            castOperand(ret, i, tensor.getElementType());
        return success();
      })
      .Case([&](LinearOp linear) {
        for (unsigned i = 0; i < linear->getNumOperands(); ++i)
          narrowOperand(linear, i);
        narrowResult(linear.getResult());
        return success();
      })
      .Case([&](MatmulOp mm) {
        narrowOperand(mm, 0);
        narrowOperand(mm, 1);
        // A weight's gradient is accumulated and fed to AdamW in F32.
        if (mm.getRole() != "wgrad")
          narrowResult(mm.getResult());
        return success();
      })
      .Case([&](EmbeddingOp e) {
        // The gather reads the F32 table and rounds each row it copies.
        narrowResult(e.getResult());
        return success();
      })
      .Case<RMSNormOp, LayerNormOp, RopeOp>([&](Operation *norm) {
        narrowResult(norm->getResult(0));
        return success();
      })
      .Case([&](AttentionOp a) {
        for (unsigned i = 0; i < 3; ++i)
          narrowOperand(a, i);
        narrowResult(a.getResult());
        return success();
      })
      .Case([&](AttentionGradOp a) {
        for (unsigned i = 0; i < 5; ++i)
          narrowOperand(a, i);
        for (Value r : a->getResults())
          narrowResult(r);
        return success();
      })
      .Case<RMSNormGradOp, LayerNormGradOp>([&](Operation *g) {
        // Weight and bias gradients are column sums: F32.
        narrowResult(g->getResult(0));
        return success();
      })
      .Case([&](CrossEntropyGradOp g) {
        setElement(g.getResult(), elementOf(g.getLogits()));
        return success();
      })
      .Case<ReshapeOp, SaveOp, SliceOp>([&](Operation *view) {
        setElement(view->getResult(0), elementOf(view->getOperand(0)));
        return success();
      })
      .Case<AddOp, MulOp, SwigluOp, SiluOp, GeluOp, SiluGradOp, GeluGradOp,
            SwigluGradOp, ConcatOp>([&](Operation *elementwise) {
        joinOperands(elementwise);
        return success();
      })
      .Default([&](Operation *other) -> LogicalResult {
        return other->emitOpError(
            "octet-bf16-activations has no element type rule for this op; "
            "run the pass on the train step autodiff builds, before "
            "octet-precision");
      });
}

struct Bf16ActivationsPass
    : public octet::impl::OctetBf16ActivationsBase<Bf16ActivationsPass> {
  using OctetBf16ActivationsBase::OctetBf16ActivationsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (activationDtype == "f32")
      return;
    if (activationDtype != "bf16") {
      module.emitError("octet-bf16-activations: activation-dtype must be "
                       "\"bf16\" or \"f32\"; got '")
          << activationDtype << "'";
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      Retyper retyper(&getContext());
      if (failed(retyper.run(func)))
        return signalPassFailure();
    }
  }
};

} // namespace
