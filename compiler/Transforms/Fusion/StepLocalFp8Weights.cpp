// octet-step-local-fp8-weights: an FP8 weight (`fp8w.<param>`) is cast from
// its f32 master in the step, right before each GEMM that reads it, instead
// of being written by the optimizer and kept from step to step; the K-major
// copy a dgrad GEMM reads is cast and transposed from the master in one
// kernel. At the activations' peak (the start of the backward) every
// persistent FP8 weight sat in memory unread between its forward and
// backward readers.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"
#include "dialects/graph/WeightCache.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace octet {
#define GEN_PASS_DEF_OCTETSTEPLOCALFP8WEIGHTS
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

// A write of the cache: a kernel's tensorwise fp8.quantize of the parameter
// as the same function leaves it, with a scale `scale` (a value of that
// function) that the step can read again from `scaleVariable`.
struct Writer {
  graph::StoreOp store;
  kernel::FusedOp kernel;
  fp8::QuantizeOp quantize;
  Value scale;
  // The variable the function stores `scale` into, if any (current
  // scaling's `fp8w.<param>.scale`); empty: the scale is copied into
  // `fp8w.<param>.cast_scale` (delayed scaling's scale from state, which
  // the step's scale update moves on after each microbatch).
  StringRef scaleVariable;
};

// A read of the cache: a GEMM operand (the forward's fprop), or the
// K-major transpose octet-step-local-kmajor-weights put before a dgrad
// GEMM.
struct Reader {
  OpOperand *use;
  kernel::FusedOp transpose;
};

struct Fp8Cache {
  graph::VariableOp cache, param;
  SmallVector<Writer> writers;
  SmallVector<graph::LoadOp> loads;
  SmallVector<Reader> readers;
};

Block *bodyOf(Operation *op) {
  return &op->getParentOfType<func::FuncOp>().getBody().front();
}

Block *bodyOf(Value value) {
  Operation *parent = value.getParentBlock()->getParentOp();
  auto func = dyn_cast<func::FuncOp>(parent);
  return func ? &func.getBody().front() : bodyOf(parent);
}

SmallVector<graph::StoreOp> storesTo(Block *body, StringRef variable) {
  SmallVector<graph::StoreOp> stores;
  body->walk([&](graph::StoreOp s) {
    if (s.getVariable() == variable)
      stores.push_back(s);
  });
  return stores;
}

// The outer value a body value of `fused` stands for: the input behind a
// block argument, or the result that yields it.
Value outerValue(kernel::FusedOp fused, Value inner) {
  Block &body = fused.getBodyBlock();
  if (auto arg = dyn_cast<BlockArgument>(inner))
    return arg.getOwner() == &body ? fused.getInputs()[arg.getArgNumber()]
                                   : Value();
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    if (v == inner)
      return fused->getResult(i);
  return Value();
}

// True if `weight` is what the function leaves in `param`: the value of
// its one store there, or a load of it in a function that stores none.
bool isFinalValueOf(Value weight, StringRef param) {
  if (!weight)
    return false;
  SmallVector<graph::StoreOp> stores = storesTo(bodyOf(weight), param);
  if (auto load = weight.getDefiningOp<graph::LoadOp>())
    return load.getVariable() == param && stores.empty();
  return stores.size() == 1 && stores.front().getValue() == weight;
}

std::optional<Writer> matchWriter(graph::StoreOp store, StringRef param) {
  auto result = dyn_cast<OpResult>(store.getValue());
  auto fused = result ? dyn_cast<kernel::FusedOp>(result.getOwner()) : nullptr;
  if (!fused || !result.hasOneUse())
    return std::nullopt;
  auto yield = cast<kernel::YieldOp>(fused.getBodyBlock().getTerminator());
  Value yielded = yield.getValues()[result.getResultNumber()];
  auto quantize = yielded.getDefiningOp<fp8::QuantizeOp>();
  if (!quantize || quantize->getBlock() != &fused.getBodyBlock() ||
      !quantize.getResult().hasOneUse() ||
      cast<RankedTensorType>(quantize.getScale().getType()).getRank() != 0)
    return std::nullopt;
  if (!isFinalValueOf(outerValue(fused, quantize.getInput()), param))
    return std::nullopt;
  auto scaleArg = dyn_cast<BlockArgument>(quantize.getScale());
  if (!scaleArg || scaleArg.getOwner() != &fused.getBodyBlock())
    return std::nullopt;
  Writer w{store, fused, quantize, fused.getInputs()[scaleArg.getArgNumber()],
           {}};
  for (Operation *user : w.scale.getUsers())
    if (auto s = dyn_cast<graph::StoreOp>(user);
        s && s->getBlock() == store->getBlock())
      w.scaleVariable = s.getVariable();
  return w;
}

// The K-major kernel octet-step-local-kmajor-weights makes: one
// tensorwise fp8.transpose of its first input, yielded alone.
bool isKMajorTranspose(kernel::FusedOp fused, OpOperand &use) {
  if (!fused || use.getOperandNumber() != 0 ||
      fused->getNumResults() != 1 ||
      fused.getBodyBlock().getOperations().size() != 2)
    return false;
  Block &body = fused.getBodyBlock();
  auto transpose = dyn_cast<fp8::TransposeOp>(body.front());
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  return transpose && !transpose.getBlock() &&
         transpose.getInput() == body.getArgument(0) &&
         yield.getValues()[0] == transpose.getResult();
}

// Inputs of `fused` its body no longer reads.
void dropUnreadInputs(kernel::FusedOp fused) {
  if (fused.getOverwrites())
    return;
  Block &body = fused.getBodyBlock();
  for (int i = int(body.getNumArguments()) - 1; i >= 0; --i)
    if (body.getArgument(i).use_empty()) {
      fused->eraseOperand(i);
      body.eraseArgument(i);
    }
}

// `fused` without the results nothing reads, the body ops only those
// needed, and the inputs only those read; erased if nothing reads any
// result.
void dropUnread(kernel::FusedOp fused) {
  kernel::FusedOp rebuilt = fusion::dropUnread(fused);
  if (!rebuilt)
    return;
  dropUnreadInputs(rebuilt);
  // octet-fuse-adamw's cast kernel (delayed scaling's, at init) now takes
  // the weight's amax alone, as current scaling's amax kernel does.
  if (rebuilt.getName() == "optimizer.fp8_weights" &&
      rebuilt.getBodyBlock().getOps<fp8::QuantizeOp>().empty())
    rebuilt.setName("optimizer.fp8_weight_amax");
}

struct StepLocalFp8Weights
    : public octet::impl::OctetStepLocalFp8WeightsBase<StepLocalFp8Weights> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::MapVector<StringRef, Fp8Cache> caches;
    for (auto var : module.getOps<graph::VariableOp>()) {
      StringRef name = var.getSymName();
      if (!name.starts_with(graph::kFp8WeightCachePrefix))
        continue;
      auto param = module.lookupSymbol<graph::VariableOp>(
          name.drop_front(graph::kFp8WeightCachePrefix.size()));
      if (!param || !param.isTrainable() ||
          param.getType().getShape() != var.getType().getShape())
        continue;
      caches[name] = {var, param, {}, {}, {}};
    }
    if (caches.empty())
      return;
    llvm::StringMap<SmallVector<graph::StoreOp>> stores;
    module.walk([&](Operation *op) {
      if (auto store = dyn_cast<graph::StoreOp>(op))
        if (auto it = caches.find(store.getVariable()); it != caches.end())
          stores[store.getVariable()].push_back(store);
      if (auto load = dyn_cast<graph::LoadOp>(op))
        if (auto it = caches.find(load.getVariable()); it != caches.end())
          it->second.loads.push_back(load);
    });
    // The optimizer's multi-tensor kernel casts many weights: it loses
    // their results once, after every cast has gone.
    llvm::SetVector<kernel::FusedOp> writers;
    for (auto &[name, cache] : caches)
      if (match(cache, stores[name]))
        makeInStep(module, cache, writers);
    for (kernel::FusedOp writer : writers)
      dropUnread(writer);
  }

  // Every write of the cache casts the parameter as its function leaves
  // it, with a scale every writer keeps alike, and every read is a GEMM's
  // operand (with a tensorwise inverse scale) or a K-major transpose, in a
  // function that does not write the cache. Anything else keeps its cache.
  static bool match(Fp8Cache &cache, ArrayRef<graph::StoreOp> stores) {
    if (stores.empty())
      return false;
    StringRef param = cache.param.getSymName();
    for (graph::StoreOp store : stores) {
      std::optional<Writer> w = matchWriter(store, param);
      if (!w || w->scaleVariable != (cache.writers.empty()
                                         ? w->scaleVariable
                                         : cache.writers.front().scaleVariable))
        return false;
      cache.writers.push_back(*w);
    }
    StringRef name = cache.cache.getSymName();
    for (graph::LoadOp load : cache.loads) {
      if (!storesTo(bodyOf(load.getOperation()), name).empty())
        return false;
      for (OpOperand &use : load->getUses()) {
        Operation *user = use.getOwner();
        if (user->getBlock() != load->getBlock())
          return false;
        if (auto gemm = dyn_cast<kernel::GemmOp>(user)) {
          if (!fusion::tensorwiseScaleInv(gemm, use))
            return false;
          cache.readers.push_back({&use, nullptr});
          continue;
        }
        auto fused = dyn_cast<kernel::FusedOp>(user);
        if (!isKMajorTranspose(fused, use))
          return false;
        cache.readers.push_back({&use, fused});
      }
    }
    return true;
  }

  void makeInStep(ModuleOp module, Fp8Cache &cache,
                  llvm::SetVector<kernel::FusedOp> &writers) {
    StringRef cacheName = cache.cache.getSymName();
    StringRef param = cache.param.getSymName();
    std::string scaleVariable = cache.writers.front().scaleVariable.str();
    if (scaleVariable.empty()) {
      scaleVariable = (cacheName + graph::kCastScaleSuffix).str();
      OpBuilder vb(cache.cache);
      vb.setInsertionPointAfter(cache.cache);
      graph::VariableOp::create(
          vb, cache.cache.getLoc(), scaleVariable,
          cast<RankedTensorType>(cache.writers.front().scale.getType()),
          "state", "zeros", FloatAttr(), StringAttr());
      for (Writer &w : cache.writers) {
        OpBuilder b(w.store);
        graph::StoreOp::create(b, w.store.getLoc(), w.scale, scaleVariable);
      }
    }
    fp8::QuantizeOp like = cache.writers.front().quantize;
    auto scaleType = cast<RankedTensorType>(like.getScale().getType());
    // Short: a module's name pads to 32 columns in `octet inspect`.
    std::string rest = (*graph::weightCacheRest(cacheName)).str();
    for (Reader &reader : cache.readers) {
      Operation *user = reader.use->getOwner();
      Location loc = user->getLoc();
      OpBuilder b(user);
      // Loaded here, not at the function's top, as the K-major copies are:
      // the master's and the scale's reads belong to this kernel.
      Value weight = graph::LoadOp::create(b, loc, cache.param.getType(), param);
      Value scale = graph::LoadOp::create(b, loc, scaleType, scaleVariable);
      Type resultType = reader.transpose
                            ? reader.transpose->getResult(0).getType()
                            : reader.use->get().getType();
      auto fused = kernel::FusedOp::create(
          b, loc, TypeRange{resultType}, ValueRange{weight, scale},
          rest + (reader.transpose ? ".kmajor" : ".fp8"), "elementwise");
      for (StringRef attr : {"layer", "section"})
        if (Attribute value = user->getAttr(attr))
          fused->setAttr(attr, value);
      Block &body = fused.getBodyBlock();
      OpBuilder inner = OpBuilder::atBlockEnd(&body);
      auto quantize = fp8::QuantizeOp::create(
          inner, loc, TypeRange{like.getResult().getType(), scaleType},
          body.getArgument(0), body.getArgument(1), like.getAmaxReduceAttr());
      quantize->setDiscardableAttrs(like->getDiscardableAttrDictionary());
      Value result = quantize.getResult();
      if (reader.transpose)
        result = fp8::TransposeOp::create(inner, loc,
                                          TypeRange{resultType, scaleType},
                                          result, body.getArgument(1),
                                          DenseI64ArrayAttr())
                     .getResult();
      kernel::YieldOp::create(inner, loc, result);
      if (reader.transpose) {
        reader.transpose->getResult(0).replaceAllUsesWith(fused->getResult(0));
        reader.transpose.erase();
      } else {
        reader.use->set(fused->getResult(0));
      }
    }
    for (graph::LoadOp load : cache.loads)
      load.erase();
    for (Writer &w : cache.writers) {
      // The amax a delayed-scaling step records for the weight stays the
      // writer's: the same f32 weight's, without the cast.
      if (!w.quantize.getAmax().use_empty()) {
        OpBuilder b(w.quantize);
        auto amax = fp8::AmaxOp::create(b, w.quantize.getLoc(),
                                        w.quantize.getAmax().getType(),
                                        w.quantize.getInput(),
                                        w.quantize.getAmaxReduceAttr());
        amax->setDiscardableAttrs(w.quantize->getDiscardableAttrDictionary());
        w.quantize.getAmax().replaceAllUsesWith(amax.getResult());
      }
      writers.insert(w.kernel);
      w.store.erase();
    }
    cache.cache.erase();
  }
};

} // namespace
