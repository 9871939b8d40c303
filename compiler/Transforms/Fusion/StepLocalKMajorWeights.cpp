// octet-step-local-kmajor-weights: the K-major copy of an FP8 weight cache
// (`fp8w.<param>.t`) is made in the step, by a transpose of the row-major
// cache right before the GEMM that reads it, instead of being written by
// the optimizer and kept from step to step. The backward's dgrad GEMMs are
// its only readers, and the activations peak as the backward starts, when
// every persistent K-major copy would sit there unread. GEMMs that read one
// load (a chunked FP8 head's dgrads) share one copy.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"
#include "dialects/graph/WeightCache.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace octet {
#define GEN_PASS_DEF_OCTETSTEPLOCALKMAJORWEIGHTS
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

// The cache and its K-major copy, and the state ops that touch the copy.
struct KMajorCache {
  graph::VariableOp rowMajor, kMajor;
  SmallVector<graph::StoreOp> stores;
  SmallVector<graph::LoadOp> loads;
};

// True if `value` is stored to `variable` (by a store in its own function).
bool isStoredTo(Value value, StringRef variable) {
  return llvm::any_of(value.getUsers(), [&](Operation *user) {
    auto store = dyn_cast<graph::StoreOp>(user);
    return store && store.getVariable() == variable;
  });
}

// True if `stored` is a kernel's tensorwise fp8.transpose of what the same
// function stores to `rowMajor`: either the kernel's own row-major result
// (the optimizer's cast) or an input of the kernel (ZeRO-1's transpose of
// the gathered copy). Then the row-major cache holds the same bytes, and
// transposing it again in the step gives the copy exactly.
bool isTransposeOfStored(Value stored, StringRef rowMajor) {
  auto result = dyn_cast<OpResult>(stored);
  auto fused = result ? dyn_cast<kernel::FusedOp>(result.getOwner()) : nullptr;
  if (!fused)
    return false;
  auto yield = cast<kernel::YieldOp>(fused.getBodyBlock().getTerminator());
  auto transpose =
      yield.getValues()[result.getResultNumber()].getDefiningOp<fp8::TransposeOp>();
  if (!transpose || transpose.getBlock() ||
      cast<RankedTensorType>(transpose.getScale().getType()).getRank() != 0)
    return false;
  Value input = transpose.getInput();
  if (auto arg = dyn_cast<BlockArgument>(input))
    return arg.getOwner() == &fused.getBodyBlock() &&
           isStoredTo(fused.getInputs()[arg.getArgNumber()], rowMajor);
  for (auto [i, yielded] : llvm::enumerate(yield.getValues()))
    if (yielded == input && isStoredTo(fused->getResult(i), rowMajor))
      return true;
  return false;
}

struct StepLocalKMajorWeights
    : public octet::impl::OctetStepLocalKMajorWeightsBase<
          StepLocalKMajorWeights> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::MapVector<StringRef, KMajorCache> caches;
    for (auto var : module.getOps<graph::VariableOp>()) {
      StringRef name = var.getSymName();
      if (!graph::isKMajorCache(name))
        continue;
      auto rowMajor = module.lookupSymbol<graph::VariableOp>(
          name.drop_back(graph::kKMajorCacheSuffix.size()));
      if (!rowMajor || !isTransposed(rowMajor.getType(), var.getType()))
        continue;
      caches[name] = {rowMajor, var, {}, {}};
    }
    if (caches.empty())
      return;
    module.walk([&](Operation *op) {
      if (auto store = dyn_cast<graph::StoreOp>(op))
        if (auto it = caches.find(store.getVariable()); it != caches.end())
          it->second.stores.push_back(store);
      if (auto load = dyn_cast<graph::LoadOp>(op))
        if (auto it = caches.find(load.getVariable()); it != caches.end())
          it->second.loads.push_back(load);
    });
    // The optimizer's multi-tensor kernel writes many copies: it loses
    // their results once, after every copy has gone.
    llvm::SetVector<kernel::FusedOp> writers;
    for (auto &[name, cache] : caches)
      if (canMakeInStep(cache))
        makeInStep(cache, writers);
    for (kernel::FusedOp writer : writers)
      fusion::dropUnread(writer);
  }

  static bool isTransposed(RankedTensorType a, RankedTensorType b) {
    return a.getRank() == 2 && b.getRank() == 2 &&
           a.getElementType() == b.getElementType() &&
           a.getDimSize(0) == b.getDimSize(1) &&
           a.getDimSize(1) == b.getDimSize(0);
  }

  // Every write of the copy is a transpose of the row-major cache written
  // beside it, and every reader is an FP8 GEMM, whose inverse scale for the
  // copy goes with the step's transpose (a tensorwise scale passes through
  // a transpose unchanged). Anything else keeps its persistent copy.
  static bool canMakeInStep(KMajorCache &cache) {
    if (cache.stores.empty())
      return false;
    StringRef rowMajor = cache.rowMajor.getSymName();
    for (graph::StoreOp store : cache.stores)
      if (!isTransposeOfStored(store.getValue(), rowMajor))
        return false;
    for (graph::LoadOp load : cache.loads)
      for (OpOperand &use : load->getUses()) {
        auto gemm = dyn_cast<kernel::GemmOp>(use.getOwner());
        if (!gemm || gemm->getBlock() != load->getBlock() ||
            !fusion::tensorwiseScaleInv(gemm, use))
          return false;
      }
    return true;
  }

  void makeInStep(KMajorCache &cache,
                  llvm::SetVector<kernel::FusedOp> &writers) {
    StringRef rowMajor = cache.rowMajor.getSymName();
    // Short: a module's name pads to 32 columns in `octet inspect`.
    std::string kernelName =
        (*graph::weightCacheRest(rowMajor) + ".kmajor").str();
    for (graph::LoadOp load : cache.loads) {
      // One copy for every GEMM of the load, made before the first: the
      // dgrads of a head split over token chunks (octet-chunk-lm-head)
      // read the whole weight each.
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : load->getUses())
        uses.push_back(&use);
      llvm::sort(uses, [](OpOperand *x, OpOperand *y) {
        return x->getOwner()->isBeforeInBlock(y->getOwner());
      });
      Value shared;
      for (OpOperand *usePtr : uses) {
        OpOperand &use = *usePtr;
        if (shared) {
          use.set(shared);
          continue;
        }
        auto gemm = cast<kernel::GemmOp>(use.getOwner());
        Value scaleInv = fusion::tensorwiseScaleInv(gemm, use);
        Location loc = gemm.getLoc();
        OpBuilder b(gemm);
        // Loaded here, not at the function's top: a pipeline's backward
        // chunk then reads the cache itself rather than a stashed value.
        Value weight =
            graph::LoadOp::create(b, loc, cache.rowMajor.getType(), rowMajor);
        Type kMajorType = use.get().getType();
        auto fused = kernel::FusedOp::create(
            b, loc, TypeRange{kMajorType}, ValueRange{weight, scaleInv},
            kernelName, "elementwise");
        for (StringRef attr : {"layer", "section"})
          if (Attribute value = gemm->getAttr(attr))
            fused->setAttr(attr, value);
        Block &body = fused.getBodyBlock();
        OpBuilder inner = OpBuilder::atBlockEnd(&body);
        auto transpose = fp8::TransposeOp::create(
            inner, loc, TypeRange{kMajorType, scaleInv.getType()},
            body.getArgument(0), body.getArgument(1), DenseI64ArrayAttr());
        kernel::YieldOp::create(inner, loc, transpose.getResult());
        use.set(fused->getResult(0));
        shared = fused->getResult(0);
      }
      load.erase();
    }
    for (graph::StoreOp store : cache.stores) {
      writers.insert(cast<kernel::FusedOp>(store.getValue().getDefiningOp()));
      store.erase();
    }
    cache.kMajor.erase();
  }
};

} // namespace
