// octet-fuse-epilogue: bias, GELU, bias-grad and gradient accumulation into
// cuBLASLt GEMM epilogues.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

namespace octet {
#define GEN_PASS_DEF_OCTETFUSEEPILOGUE
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

// A copy of `gemm` with another epilogue, bias, accumulator or aux results.
kernel::GemmOp rebuild(kernel::GemmOp gemm, StringRef epilogue, Value c,
                       TypeRange aux) {
  OpBuilder b(gemm);
  auto created = kernel::GemmOp::create(
      b, gemm.getLoc(), gemm.getResult().getType(), aux, gemm.getA(),
      gemm.getB(), gemm.getAScale(), gemm.getBScale(), gemm.getAScaleInv(),
      gemm.getBScaleInv(), gemm.getBias(), c,
      gemm.getTransposeA(), gemm.getTransposeB(), gemm.getRoleAttr(),
      gemm.getParamAttr(),
      epilogue == "none" ? StringAttr() : b.getStringAttr(epilogue),
      gemm.getABlockAttr(), gemm.getBBlockAttr());
  for (StringRef attr : {"layer", "section"})
    if (Attribute a = gemm->getAttr(attr))
      created->setAttr(attr, a);
  return created;
}

// The value `v` of the body of `fused`, as the block argument for input
// `outer`, or null.
Value argFor(kernel::FusedOp fused, Value outer) {
  for (auto [in, arg] :
       llvm::zip(fused.getInputs(), fused.getBodyBlock().getArguments()))
    if (in == outer)
      return arg;
  return nullptr;
}

// D + C: the add kernel reads the GEMM's output (its only use) and a tensor
// of the same type defined before the GEMM. cuBLASLt adds C before a GELU
// epilogue, so only epilogues that leave D linear take it.
bool fuseAccumulate(kernel::GemmOp gemm) {
  Value d = gemm.getResult();
  StringRef epilogue = gemm.getEpilogueKind();
  if (gemm.getC() || !d.hasOneUse() ||
      (epilogue != "none" && epilogue != "bias" && epilogue != "bias_grad"))
    return false;
  auto add = dyn_cast<kernel::FusedOp>(*d.getUsers().begin());
  if (!add || !fusion::bodyOnly(add, {"graph.add"}) ||
      add.getBodyBlock().getOperations().size() != 2 ||
      add.getInputs().size() != 2)
    return false;
  Value other = add.getInputs()[0] == d ? add.getInputs()[1]
                                        : add.getInputs()[0];
  if (other == d || other.getType() != d.getType())
    return false;
  if (Operation *def = other.getDefiningOp())
    if (def->getBlock() == gemm->getBlock() && !def->isBeforeInBlock(gemm))
      return false;
  kernel::GemmOp fused =
      rebuild(gemm, gemm.getEpilogueKind(), other, gemm.getAux().getTypes());
  add->getResult(0).replaceAllUsesWith(fused.getResult());
  gemm.getAux().replaceAllUsesWith(fused.getAux());
  add.erase();
  gemm.erase();
  return true;
}

// gelu(D [+ bias]) in the epilogue, with the pre-activation as aux when
// anything else reads it.
kernel::GemmOp fuseGelu(kernel::GemmOp gemm) {
  StringRef epilogue = gemm.getEpilogueKind();
  // cuBLASLt's block-scaled GEMMs take no epilogue.
  if ((epilogue != "none" && epilogue != "bias") || gemm.getC() ||
      gemm.getABlock())
    return nullptr;
  Value d = gemm.getResult();
  // The GELU kernel reads D directly or through one reshape.
  for (Operation *user : d.getUsers()) {
    Value seen = d;
    Operation *consumer = user;
    if (auto reshape = dyn_cast<graph::ReshapeOp>(user)) {
      if (!reshape->hasOneUse())
        continue;
      seen = reshape;
      consumer = *reshape->getUsers().begin();
    }
    auto fused = dyn_cast<kernel::FusedOp>(consumer);
    if (!fused || !fusion::bodyOnly(fused, {"graph.gelu"}) ||
        fused.getBodyBlock().getOperations().size() != 2)
      continue;
    auto gelu = *fused.getBodyBlock().getOps<graph::GeluOp>().begin();
    // cuBLASLt's GELU epilogue is the tanh form.
    if (gelu.getApproximate() != "tanh" || gelu.getInput() != argFor(fused, seen))
      continue;
    bool needAux = !d.hasOneUse() || (seen != d && !seen.hasOneUse());
    kernel::GemmOp created =
        rebuild(gemm, needAux ? "gelu_aux" : "gelu", gemm.getC(),
                needAux ? TypeRange(d.getType()) : TypeRange());
    Value act = created.getResult();
    if (seen != d) {
      OpBuilder b(fused);
      act = graph::ReshapeOp::create(b, fused.getLoc(), seen.getType(), act);
    }
    fused->getResult(0).replaceAllUsesWith(act);
    fused.erase();
    if (seen != d && seen.use_empty())
      seen.getDefiningOp()->erase();
    if (needAux)
      d.replaceAllUsesWith(created.getAux()[0]);
    gemm.erase();
    return created;
  }
  return nullptr;
}

// Σ_rows dy, where a wgrad GEMM reads dy as op(a) = dyᵀ.
kernel::GemmOp fuseBiasGrad(kernel::GemmOp gemm) {
  if (gemm.getRole() != "wgrad" || !gemm.getTransposeA() ||
      gemm.getEpilogueKind() != "none" || gemm.getABlock())
    return nullptr;
  Value a = gemm.getA();
  // The bias_grad kernel reads dy as the GEMM does or before its flattening.
  SmallVector<Value> forms = {a};
  if (auto reshape = a.getDefiningOp<graph::ReshapeOp>())
    forms.push_back(reshape.getInput());
  for (Value form : forms)
    for (Operation *user : form.getUsers()) {
      auto fused = dyn_cast<kernel::FusedOp>(user);
      if (!fused || !fusion::bodyOnly(fused, {"graph.bias_grad"}) ||
          fused.getInputs().size() != 1)
        continue;
      auto type = cast<RankedTensorType>(fused->getResult(0).getType());
      if (type != cast<RankedTensorType>(gemm.getResult().getType())
                      .clone({cast<RankedTensorType>(gemm.getResult().getType())
                                  .getDimSize(0)}))
        continue;
      // The bias gradient will be defined at the GEMM: its readers must
      // come after it.
      if (llvm::any_of(fused->getUsers(), [&](Operation *reader) {
            return reader->getBlock() == gemm->getBlock() &&
                   reader->isBeforeInBlock(gemm);
          }))
        continue;
      kernel::GemmOp created =
          rebuild(gemm, "bias_grad", gemm.getC(), TypeRange(type));
      gemm.getResult().replaceAllUsesWith(created.getResult());
      fused->getResult(0).replaceAllUsesWith(created.getAux()[0]);
      fused.erase();
      gemm.erase();
      return created;
    }
  return nullptr;
}

struct FuseEpilogue
    : public octet::impl::OctetFuseEpilogueBase<FuseEpilogue> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      fusion::normalizeStateAccess(func);
      SmallVector<kernel::GemmOp> gemms(
          func.getBody().front().getOps<kernel::GemmOp>());
      for (kernel::GemmOp gemm : gemms) {
        // Each rewrite replaces the GEMM; continue on the replacement.
        if (kernel::GemmOp next = fuseGelu(gemm))
          gemm = next;
        if (kernel::GemmOp next = fuseBiasGrad(gemm))
          gemm = next;
        fuseAccumulate(gemm);
      }
    }
  }
};

} // namespace
