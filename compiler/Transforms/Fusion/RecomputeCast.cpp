// octet-recompute-cast: under current scaling, a cast kernel recomputes the
// tensor it casts from the producer's inputs where that moves fewer bytes
// than the producer writing the tensor and the cast reading it back.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace octet {
#define GEN_PASS_DEF_OCTETRECOMPUTECAST
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

// Ops a cast kernel may evaluate again: elementwise ones and the row-local
// norms. Not the norm gradients (their weight gradients are column sums
// over all rows) nor anything that writes state.
constexpr StringRef kRecomputable[] = {
    "graph.add",       "graph.mul",       "graph.cast",      "graph.silu",
    "graph.gelu",      "graph.swiglu",    "graph.silu_grad", "graph.gelu_grad",
    "graph.swiglu_grad", "graph.rope",    "graph.reshape",   "graph.slice",
    "graph.concat",    "graph.rms_norm",  "graph.layer_norm"};

int64_t bytesOf(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getNumElements() *
         std::max<int64_t>(1, t.getElementTypeBitWidth() / 8);
}

// What the cast kernel would compute again: the ops of `producer` that
// make `inner` (a value of its body), from the producer's inputs or from
// values it writes anyway (other results), and those outer values.
struct Cone {
  SmallVector<Operation *> ops; // in body order
  llvm::SetVector<Value> inputs; // outer values
  DenseMap<Value, Value> innerOf; // outer input → the body value it stands for
};

std::optional<Cone> coneOf(kernel::FusedOp producer, Value inner) {
  Block &body = producer.getBodyBlock();
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  Cone cone;
  llvm::SmallPtrSet<Operation *, 16> seen;
  SmallVector<Value> work = {inner};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      Value outer = producer.getInputs()[arg.getArgNumber()];
      cone.inputs.insert(outer);
      cone.innerOf[outer] = v;
      continue;
    }
    // A value the producer stores anyway is read back, not recomputed.
    if (v != inner)
      if (auto it = llvm::find(yield.getValues(), v);
          it != yield.getValues().end()) {
        Value outer = producer->getResult(it - yield.getValues().begin());
        cone.inputs.insert(outer);
        cone.innerOf[outer] = v;
        continue;
      }
    Operation *op = v.getDefiningOp();
    if (!llvm::is_contained(kRecomputable, op->getName().getStringRef()))
      return std::nullopt;
    if (!seen.insert(op).second)
      continue;
    llvm::append_range(work, op->getOperands());
  }
  for (Operation &op : body)
    if (seen.contains(&op))
      cone.ops.push_back(&op);
  return cone;
}

// The kernel's input the quantize reads, through views, if the kernel
// does nothing but cast it (and transpose the result).
std::optional<unsigned> castOnlyInput(kernel::FusedOp fused) {
  if (fused.getKind() == "multi_tensor" ||
      !fusion::bodyOnly(fused,
                        {"fp8.quantize", "fp8.transpose", "graph.reshape"}))
    return std::nullopt;
  auto quantizes = fused.getBodyBlock().getOps<fp8::QuantizeOp>();
  if (std::distance(quantizes.begin(), quantizes.end()) != 1)
    return std::nullopt;
  Value source = (*quantizes.begin()).getInput();
  while (auto reshape = source.getDefiningOp<graph::ReshapeOp>())
    source = reshape.getInput();
  auto arg = dyn_cast<BlockArgument>(source);
  if (!arg)
    return std::nullopt;
  return arg.getArgNumber();
}

struct RecomputeCast
    : public octet::impl::OctetRecomputeCastBase<RecomputeCast> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      for (kernel::FusedOp castKernel : fusion::fusedOps(func))
        recompute(castKernel);
    }
  }

  void recompute(kernel::FusedOp castKernel) {
    std::optional<unsigned> index = castOnlyInput(castKernel);
    if (!index)
      return;
    auto x = dyn_cast<OpResult>(castKernel.getInputs()[*index]);
    auto producer =
        x ? dyn_cast<kernel::FusedOp>(x.getOwner()) : kernel::FusedOp();
    // Only the cast reads the tensor: else it is written anyway, and the
    // recomputation would only add reads.
    if (!producer || producer.getKind() == "multi_tensor" || !x.hasOneUse())
      return;
    Value inner = producer.getBodyBlock().getTerminator()->getOperand(
        x.getResultNumber());
    std::optional<Cone> cone = coneOf(producer, inner);
    if (!cone)
      return;
    // Written once and read once (2 · x) against the cone's inputs read
    // again.
    int64_t again = 0;
    for (Value v : cone->inputs)
      again += bytesOf(v);
    if (again >= 2 * bytesOf(x))
      return;

    // The cone as a kernel of its own right before the cast, merged into it.
    OpBuilder b(castKernel);
    auto copy = kernel::FusedOp::create(b, producer.getLoc(), x.getType(),
                                        cone->inputs.getArrayRef(),
                                        castKernel.getName(), "elementwise");
    Block &body = copy.getBodyBlock();
    IRMapping map;
    for (auto [outer, arg] : llvm::zip(cone->inputs, body.getArguments()))
      map.map(cone->innerOf.lookup(outer), arg);
    OpBuilder innerBuilder = OpBuilder::atBlockEnd(&body);
    for (Operation *op : cone->ops)
      innerBuilder.clone(*op, map);
    kernel::YieldOp::create(innerBuilder, producer.getLoc(), map.lookup(inner));
    copy.setKindAttr(b.getStringAttr(fusion::kindForBody(body)));
    for (StringRef attr : {"layer", "section"})
      if (Attribute a = castKernel->getAttr(attr))
        copy->setAttr(attr, a);
    castKernel->setOperand(*index, copy.getResult(0));
    if (!fusion::mergeFused(copy, castKernel, castKernel.getName())) {
      // Cannot happen (the copy sits right before the cast), but leave the
      // step as it was rather than half changed.
      castKernel->setOperand(*index, x);
      copy.erase();
      return;
    }
    fusion::dropUnusedResults(producer);
  }
};

} // namespace
