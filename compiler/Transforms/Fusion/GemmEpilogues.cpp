#include "compiler/Transforms/Fusion/GemmEpilogues.h"

#include "dialects/fp8/Fp8Dialect.h"
#include "dialects/graph/GraphDialect.h"
#include "dialects/kernel/KernelDialect.h"

using namespace mlir;

namespace octet::fusion {

void expandGemmEpilogues(ModuleOp module) {
  SmallVector<kernel::GemmOp> gemms;
  module.walk([&](kernel::GemmOp g) {
    // Graph ops know no microbatches: a GEMM that writes in a step's first
    // one (octet-overwrite-gradients) stays for the interpreter to run.
    if (g->hasAttr("first_microbatch_overwrites"))
      return;
    if (g.getEpilogue() || g.getC() || g.getBias() || g.getAScale() ||
        g.getAScaleInv())
      gemms.push_back(g);
  });
  for (kernel::GemmOp g : gemms) {
    OpBuilder b(g);
    Location loc = g.getLoc();
    Type type = g.getResult().getType();
    Value product;
    if (g.getAScale() || g.getAScaleInv()) {
      bool inverse = static_cast<bool>(g.getAScaleInv());
      product = fp8::MatmulOp::create(
          b, loc, type, g.getA(), inverse ? g.getAScaleInv() : g.getAScale(),
          g.getB(), inverse ? g.getBScaleInv() : g.getBScale(), g.getBias(),
          g.getTransposeA(), g.getTransposeB(), g.getABlockAttr(),
          g.getBBlockAttr(), g.getRoleAttr(), g.getParamAttr(), inverse);
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
