#include "dialects/kernel/KernelDialect.h"

#include "dialects/common/Verify.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace octet;
using namespace octet::kernel;

#include "dialects/kernel/KernelDialect.cpp.inc"

void KernelDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/kernel/KernelOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "dialects/kernel/KernelOps.cpp.inc"

static bool isFp8(Type t) { return isa<Float8E4M3FNType, Float8E5M2Type>(t); }

LogicalResult GemmOp::verify() {
  auto a = cast<RankedTensorType>(getA().getType());
  auto b = cast<RankedTensorType>(getB().getType());
  auto d = cast<RankedTensorType>(getResult().getType());
  if (failed(expectRank(*this, "a", a, 2)) ||
      failed(expectRank(*this, "b", b, 2)) ||
      failed(expectRank(*this, "result", d, 2)))
    return failure();
  int64_t m = getTransposeA() ? a.getDimSize(1) : a.getDimSize(0);
  int64_t ka = getTransposeA() ? a.getDimSize(0) : a.getDimSize(1);
  int64_t kb = getTransposeB() ? b.getDimSize(1) : b.getDimSize(0);
  int64_t n = getTransposeB() ? b.getDimSize(0) : b.getDimSize(1);
  if (!sameDim(ka, kb))
    return emitOpError("contraction dimensions differ: a gives K = ")
           << ka << ", b gives K = " << kb;
  bool fp8A = isFp8(a.getElementType()), fp8B = isFp8(b.getElementType());
  if (fp8A != fp8B)
    return emitOpError("a and b must both be FP8 or both be wider; got ")
           << a.getElementType() << " and " << b.getElementType();
  if (fp8A && (!getAScale() || !getBScale()))
    return emitOpError("FP8 operands need scales(a_scale, b_scale)");
  if (!fp8A && getAScale())
    return emitOpError("scales apply only to FP8 operands");
  if (isa<Float8E5M2Type>(a.getElementType()) &&
      isa<Float8E5M2Type>(b.getElementType()))
    return emitOpError("E5M2 x E5M2 has no FP8 GEMM on Hopper: one operand "
                       "must be E4M3");
  if (auto role = getRole())
    if (*role != "fprop" && *role != "dgrad" && *role != "wgrad")
      return emitOpError("role must be fprop, dgrad or wgrad; got '")
             << *role << "'";
  return expectShape(*this, "result", d, {m, n});
}

int64_t GemmOp::getFlops() {
  auto a = cast<RankedTensorType>(getA().getType());
  auto d = cast<RankedTensorType>(getResult().getType());
  int64_t k = getTransposeA() ? a.getDimSize(0) : a.getDimSize(1);
  return 2 * d.getDimSize(0) * d.getDimSize(1) * k;
}

LogicalResult CopyOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getResult().getType());
  if (failed(expectSameElementType(*this, "result", out, "input", in)))
    return failure();
  if (!getTranspose())
    return expectShape(*this, "result", out, in.getShape());
  if (failed(expectRank(*this, "input", in, 2)))
    return failure();
  return expectShape(*this, "result", out,
                     {in.getDimSize(1), in.getDimSize(0)});
}

void FusedOp::build(OpBuilder &builder, OperationState &state,
                    TypeRange resultTypes, ValueRange inputs, StringRef name,
                    StringRef kind) {
  state.addOperands(inputs);
  state.addAttribute(getNameAttrName(state.name), builder.getStringAttr(name));
  state.addAttribute(getKindAttrName(state.name), builder.getStringAttr(kind));
  state.addTypes(resultTypes);
  Region *body = state.addRegion();
  Block *block = new Block();
  for (Value input : inputs)
    block->addArgument(input.getType(), state.location);
  body->push_back(block);
}

LogicalResult FusedOp::verify() {
  StringRef kind = getKind();
  if (kind != "row" && kind != "elementwise" && kind != "multi_tensor")
    return emitOpError("kind must be row, elementwise or multi_tensor; got '")
           << kind << "'";
  if (getName().empty())
    return emitOpError("needs a non-empty name (it names the GPU kernel)");
  Block &block = getBodyBlock();
  if (block.getNumArguments() != getInputs().size())
    return emitOpError("body takes ")
           << block.getNumArguments() << " arguments but the op has "
           << getInputs().size() << " inputs";
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(block.getArgumentTypes(), getInputs())))
    if (std::get<0>(pair) != std::get<1>(pair).getType())
      return emitOpError("body argument #")
             << i << " has type " << std::get<0>(pair) << " but input #" << i
             << " is " << std::get<1>(pair).getType();
  auto yield = cast<YieldOp>(block.getTerminator());
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yields ")
           << yield.getValues().size()
           << " values whose types differ from the op's results";
  for (Operation &op : block.without_terminator()) {
    StringRef dialect = op.getDialect() ? op.getDialect()->getNamespace() : "";
    // State access and nested kernels have no meaning inside one kernel: the
    // body must be a pure function of the operands.
    StringRef name = op.getName().getStringRef();
    if ((dialect != "graph" && dialect != "fp8") || name == "graph.variable" ||
        name == "graph.load" || name == "graph.store")
      return op.emitOpError("cannot be fused into a kernel: a kernel.fused "
                            "body holds only graph and fp8 tensor ops");
  }
  return success();
}
