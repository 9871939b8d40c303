// octet-fuse-adamw: every AdamW update of a function in one multi-tensor
// kernel, with the FP8 or BF16 cast of the updated weights for the next
// step. The
// zeroing of the gradient accumulators stays out: a stored zero tensor is a
// memset of the accumulator (plan::isStoredZeroFill), which moves half the
// bytes of a kernel writing zeros that are then copied.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"
#include "dialects/graph/WeightCache.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace octet {
#define GEN_PASS_DEF_OCTETFUSEADAMW
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

constexpr StringLiteral kInitFunction = "cache_weights";

// A step function's FP8 cast of a weight: a one-op quantize kernel of a
// loaded parameter, and the K-major copies of the result. Delayed scaling
// loads the scale from state (`scale` names the variable); current scaling
// computes it in the step, from the weight's own amax: a one-op
// fp8.compute_scale kernel (`scaleKernel`) of a one-op fp8.amax kernel
// (`amaxKernel`) of the same parameter.
struct WeightCast {
  kernel::FusedOp kernel;
  fp8::QuantizeOp quantize;
  StringRef param, scale;
  SmallVector<kernel::CopyOp> transposes;
  kernel::FusedOp scaleKernel, amaxKernel;
  bool current() const { return static_cast<bool>(scaleKernel); }
  fp8::ComputeScaleOp computeScale() {
    return *scaleKernel.getBodyBlock().getOps<fp8::ComputeScaleOp>().begin();
  }
  fp8::AmaxOp amax() {
    return *amaxKernel.getBodyBlock().getOps<fp8::AmaxOp>().begin();
  }
};

// The one op of a one-op kernel, if it is an `OpT`.
template <typename OpT> OpT onlyOp(kernel::FusedOp fused) {
  if (!fused || fused.getBodyBlock().getOperations().size() != 2)
    return OpT();
  return dyn_cast<OpT>(fused.getBodyBlock().front());
}

// The variable `value` (an input of `fused`, seen from its body) is loaded
// from, if any.
std::optional<StringRef> loadedVariable(kernel::FusedOp fused, Value value) {
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg || arg.getOwner() != &fused.getBodyBlock())
    return std::nullopt;
  auto load =
      fused.getInputs()[arg.getArgNumber()].getDefiningOp<graph::LoadOp>();
  if (!load)
    return std::nullopt;
  return load.getVariable();
}

std::optional<WeightCast> matchWeightCast(kernel::FusedOp fused,
                                          const llvm::StringSet<> &params) {
  if (!fusion::bodyOnly(fused, {"fp8.quantize"}) ||
      fused.getBodyBlock().getOperations().size() != 2)
    return std::nullopt;
  auto quantize = *fused.getBodyBlock().getOps<fp8::QuantizeOp>().begin();
  // Tensorwise scales only: a blockwise weight cast is a different kernel.
  if (cast<RankedTensorType>(quantize.getScale().getType()).getRank() != 0)
    return std::nullopt;
  auto param = loadedVariable(fused, quantize.getInput());
  if (!param || !params.contains(*param))
    return std::nullopt;
  WeightCast wc{fused, quantize, *param, {}, {}, {}, {}};
  if (auto variable = loadedVariable(fused, quantize.getScale())) {
    wc.scale = *variable;
  } else {
    // Current scaling: the scale from this weight's amax, each a kernel of
    // its own that nothing else reads.
    auto arg = dyn_cast<BlockArgument>(quantize.getScale());
    if (!arg || arg.getOwner() != &fused.getBodyBlock())
      return std::nullopt;
    Value scale = fused.getInputs()[arg.getArgNumber()];
    auto scaleKernel = scale.getDefiningOp<kernel::FusedOp>();
    auto compute = onlyOp<fp8::ComputeScaleOp>(scaleKernel);
    if (!compute || !isa<BlockArgument>(compute.getAmax()))
      return std::nullopt;
    auto amaxKernel = scaleKernel.getInputs()[0].getDefiningOp<kernel::FusedOp>();
    auto amax = onlyOp<fp8::AmaxOp>(amaxKernel);
    if (!amax || !amaxKernel->hasOneUse() ||
        loadedVariable(amaxKernel, amax.getInput()) != param)
      return std::nullopt;
    wc.scaleKernel = scaleKernel;
    wc.amaxKernel = amaxKernel;
  }
  for (Operation *user : fused->getResult(0).getUsers()) {
    auto copy = dyn_cast<kernel::CopyOp>(user);
    if (copy && copy.getTranspose())
      wc.transposes.push_back(copy);
  }
  if (wc.transposes.size() > 1)
    return std::nullopt;
  return wc;
}

// A step function's reader of a parameter that needs it in BF16 only: a
// one-op kernel casting the loaded parameter to BF16 (what a BF16 GEMM
// reads), or an embedding kernel whose BF16 rows are rounded from it. Either
// reads the BF16 cast as well: a BF16 value widened and rounded again is
// itself.
enum class Bf16Reader { None, Cast, Embedding };

Bf16Reader bf16ReaderOf(kernel::FusedOp fused, Value load) {
  if (!fused)
    return Bf16Reader::None;
  Block &body = fused.getBodyBlock();
  SmallVector<BlockArgument> args;
  for (OpOperand &use : load.getUses())
    if (use.getOwner() == fused.getOperation())
      args.push_back(body.getArgument(use.getOperandNumber()));
  auto isBf16 = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType().isBF16();
  };
  if (auto cast = onlyOp<graph::CastOp>(fused);
      cast && args.size() == 1 && cast.getInput() == args[0] &&
      isBf16(cast.getResult()))
    return Bf16Reader::Cast;
  bool embedding = !args.empty();
  for (BlockArgument arg : args)
    for (OpOperand &use : arg.getUses()) {
      auto lookup = dyn_cast<graph::EmbeddingOp>(use.getOwner());
      embedding &= lookup && use.getOperandNumber() == 0 &&
                   isBf16(lookup.getResult());
    }
  return embedding ? Bf16Reader::Embedding : Bf16Reader::None;
}

struct FuseAdamW : public octet::impl::OctetFuseAdamWBase<FuseAdamW> {
  using OctetFuseAdamWBase::OctetFuseAdamWBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (auto optimizer = module.lookupSymbol<func::FuncOp>("optimizer_step");
        optimizer && !optimizer.isExternal() &&
        !module.lookupSymbol(kInitFunction))
      moveWeightCasts(module, optimizer);
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      fusion::normalizeStateAccess(func);
      batch(func);
    }
  }

  // Every AdamW update and weight cast of `func`, as one multi-tensor
  // kernel.
  void batch(func::FuncOp func) {
    SmallVector<kernel::FusedOp> members;
    for (kernel::FusedOp fused : fusion::fusedOps(func))
      if (fusion::bodyOnly(fused, {"graph.adamw_update"}) ||
          fused->hasAttr("octet.weight_cast"))
        members.push_back(fused);
    for (kernel::FusedOp fused : members)
      fused->removeAttr("octet.weight_cast");
    if (members.size() < 2)
      return;
    kernel::FusedOp batch = members.front();
    for (kernel::FusedOp next : ArrayRef(members).drop_front())
      if (auto merged = fusion::mergeFused(batch, next, "optimizer.adamw",
                                           "multi_tensor"))
        batch = merged;
      else
        batch = next;
    batch->setAttr("layer", OpBuilder(batch).getI64IntegerAttr(-1));
  }

  // Builds, before `before`, the kernels that cast `weight` as `wc` does
  // (delayed: with the scale in variable `wc.scale`; current: with the
  // scale of its amax), and stores the FP8 weight, its K-major copy and its
  // amax (delayed) or scale and inverse scale (current) in the fp8w.*
  // variables.
  void emitCast(OpBuilder &b, Operation *before, WeightCast &wc,
                Value weight) {
    b.setInsertionPoint(before);
    Location loc = wc.kernel.getLoc();
    Value scale, scaleInv;
    if (wc.current()) {
      // The amax joins the multi-tensor kernel (`octet.weight_cast`): taken
      // while AdamW writes the weight. The scale and the cast wait for all
      // of it, in kernels of their own after that one.
      kernel::FusedOp amax = oneOpKernel(b, wc.amax(), {weight},
                                         "optimizer.fp8_weight_amax");
      amax->setAttr("octet.weight_cast", b.getUnitAttr());
      kernel::FusedOp scales =
          oneOpKernel(b, wc.computeScale(), {amax->getResult(0)},
                      "optimizer.fp8_weight_scale");
      scale = scales->getResult(0);
      scaleInv = scales->getResult(1);
    } else {
      scale = graph::LoadOp::create(b, loc, wc.quantize.getScale().getType(),
                                    wc.scale);
    }
    SmallVector<Type> types = {wc.quantize.getResult().getType()};
    if (!wc.transposes.empty())
      types.push_back(wc.transposes.front().getResult().getType());
    if (!wc.current())
      types.push_back(wc.quantize.getAmax().getType());
    auto fused = kernel::FusedOp::create(b, loc, types,
                                         ValueRange{weight, scale},
                                         "optimizer.fp8_weights", "elementwise");
    Block &body = fused.getBodyBlock();
    OpBuilder inner = OpBuilder::atBlockEnd(&body);
    IRMapping map;
    map.map(wc.quantize.getInput(), body.getArgument(0));
    map.map(wc.quantize.getScale(), body.getArgument(1));
    auto quantize = cast<fp8::QuantizeOp>(inner.clone(*wc.quantize, map));
    SmallVector<Value> yields = {quantize.getResult()};
    if (!wc.transposes.empty())
      yields.push_back(fp8::TransposeOp::create(
                           inner, loc, types[1], body.getArgument(1).getType(),
                           quantize.getResult(), body.getArgument(1),
                           DenseI64ArrayAttr())
                           .getResult());
    if (!wc.current())
      yields.push_back(quantize.getAmax());
    kernel::YieldOp::create(inner, loc, yields);
    fused->setAttr("layer", b.getI64IntegerAttr(-1));
    fused->setAttr("section", b.getStringAttr("optimizer"));
    if (!wc.current())
      fused->setAttr("octet.weight_cast", b.getUnitAttr());
    SmallVector<std::string> names = stateNames(wc);
    for (auto [result, name] : llvm::zip(fused->getResults(), names))
      graph::StoreOp::create(b, loc, result, name);
    if (wc.current()) {
      graph::StoreOp::create(b, loc, scale, names[names.size() - 2]);
      graph::StoreOp::create(b, loc, scaleInv, names.back());
    }
  }

  // A kernel of one op like `like`, on `inputs`, in the optimizer section.
  kernel::FusedOp oneOpKernel(OpBuilder &b, Operation *like,
                              ValueRange inputs, StringRef name) {
    Location loc = like->getLoc();
    auto fused = kernel::FusedOp::create(b, loc, like->getResultTypes(),
                                         inputs, name, "elementwise");
    OpBuilder inner = OpBuilder::atBlockEnd(&fused.getBodyBlock());
    IRMapping map;
    map.map(like->getOperands(), fused.getBodyBlock().getArguments());
    Operation *clone = inner.clone(*like, map);
    kernel::YieldOp::create(inner, loc, clone->getResults());
    fused->setAttr("layer", b.getI64IntegerAttr(-1));
    fused->setAttr("section", b.getStringAttr("optimizer"));
    return fused;
  }

  // The state a moved cast writes: the FP8 weight, its K-major copy, and
  // its amax (delayed: the next scale update reads it) or its scale and
  // inverse scale (current: the cast in the eval step reads the one, the
  // GEMMs the other).
  static SmallVector<std::string> stateNames(WeightCast &wc) {
    std::string prefix = ("fp8w." + wc.param).str();
    SmallVector<std::string> names = {prefix};
    if (!wc.transposes.empty())
      names.push_back(prefix + ".t");
    if (wc.current()) {
      names.push_back(prefix + ".scale");
      names.push_back(prefix + ".scale_inv");
    } else {
      names.push_back(prefix + ".amax");
    }
    return names;
  }

  void moveWeightCasts(ModuleOp module, func::FuncOp optimizer) {
    // The parameters the optimizer writes, with the value it writes.
    llvm::StringMap<graph::StoreOp> updates;
    llvm::StringSet<> params;
    for (auto store : optimizer.getBody().front().getOps<graph::StoreOp>()) {
      auto var = module.lookupSymbol<graph::VariableOp>(store.getVariable());
      if (var && var.isTrainable()) {
        updates[store.getVariable()] = store;
        params.insert(store.getVariable());
      }
    }
    // The casts of the step functions, one per parameter: a parameter cast
    // two ways (another scale or format) keeps its casts where they are.
    llvm::MapVector<StringRef, SmallVector<WeightCast>> casts;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func == optimizer || func.isExternal())
        continue;
      for (kernel::FusedOp fused : fusion::fusedOps(func))
        if (auto wc = matchWeightCast(fused, params))
          casts[wc->param].push_back(*wc);
    }
    OpBuilder b(module.getContext());
    b.setInsertionPointToEnd(module.getBody());
    auto init = func::FuncOp::create(b, module.getLoc(), kInitFunction,
                                     b.getFunctionType({}, {}));
    Block *initBody = init.addEntryBlock();
    b.setInsertionPointToEnd(initBody);
    auto initReturn = func::ReturnOp::create(b, module.getLoc());
    bool any = false;
    for (auto &[param, list] : casts) {
      // The eval step needs no K-major copy; the train step does.
      WeightCast &first = *llvm::max_element(
          list, [](WeightCast &a, WeightCast &b) {
            return a.transposes.size() < b.transposes.size();
          });
      bool sameEverywhere = llvm::all_of(list, [&](WeightCast &c) {
        return c.scale == first.scale && c.current() == first.current() &&
               (!c.current() || c.computeScale()->getAttrDictionary() ==
                                    first.computeScale()->getAttrDictionary()) &&
               c.quantize.getResult().getType() ==
                   first.quantize.getResult().getType();
      });
      if (!sameEverywhere)
        continue;
      any = true;
      declareVariables(module, first);
      graph::StoreOp update = updates.lookup(param);
      emitCast(b, update, first, update.getValue());
      b.setInsertionPoint(initReturn);
      Value weight = graph::LoadOp::create(
          b, module.getLoc(), first.quantize.getInput().getType(), param);
      emitCast(b, initReturn, first, weight);
      for (WeightCast &wc : list)
        replaceByLoads(wc);
    }
    if (bf16Caches || bf16GemmCaches)
      for (auto &[param, readers] :
           bf16Readers(module, optimizer, params, casts)) {
        // Where nothing gathers the cache it pays only where it replaces a
        // cast: an embedding kernel alone reads a few rows of the table.
        if (!bf16Caches && llvm::none_of(readers, [](kernel::FusedOp reader) {
              return static_cast<bool>(onlyOp<graph::CastOp>(reader));
            }))
          continue;
        any = true;
        cacheBf16(module, b, updates.lookup(param), initReturn, param,
                  readers);
      }
    if (!any) {
      init.erase();
      return;
    }
    // Init kernels belong to no step; the multi-tensor marker is for the
    // optimizer only.
    init.walk([](kernel::FusedOp f) {
      f->removeAttr("octet.weight_cast");
      f->setAttr("section", StringAttr::get(f.getContext(), "init"));
    });
    module->setAttr("octet.init_functions",
                    b.getStrArrayAttr({kInitFunction}));
  }

  // The parameters with FP8 casts of their own left out, those whose every
  // reader in the step functions needs them in BF16 only, with those
  // readers (in program order).
  llvm::MapVector<StringRef, SmallVector<kernel::FusedOp>>
  bf16Readers(ModuleOp module, func::FuncOp optimizer,
              const llvm::StringSet<> &params,
              const llvm::MapVector<StringRef, SmallVector<WeightCast>> &fp8) {
    llvm::MapVector<StringRef, SmallVector<kernel::FusedOp>> readers;
    llvm::StringSet<> refused;
    module.walk([&](graph::LoadOp load) {
      StringRef param = load.getVariable();
      if (!params.contains(param) || fp8.contains(param) ||
          refused.contains(param) ||
          load->getParentOfType<func::FuncOp>() == optimizer)
        return;
      for (Operation *user : load->getUsers()) {
        auto fused = dyn_cast<kernel::FusedOp>(user);
        if (bf16ReaderOf(fused, load.getResult()) == Bf16Reader::None) {
          refused.insert(param);
          readers.erase(param);
          return;
        }
        if (!llvm::is_contained(readers[param], fused))
          readers[param].push_back(fused);
      }
    });
    return readers;
  }

  // `bf16w.<param>`: the BF16 cast of the new weight, made by the optimizer
  // kernel as it updates the weight (and by the init function from the
  // initial one), read by `readers` instead of casting the f32 weight each
  // time: a cast kernel's result becomes the cache's load, an embedding
  // kernel reads its rows from the cache.
  void cacheBf16(ModuleOp module, OpBuilder &b, graph::StoreOp update,
                 Operation *initReturn, StringRef param,
                 ArrayRef<kernel::FusedOp> readers) {
    Location loc = update.getLoc();
    auto weight = cast<RankedTensorType>(update.getValue().getType());
    auto cacheType = weight.clone(b.getBF16Type());
    std::string name = (graph::kBf16WeightCachePrefix + param).str();
    {
      OpBuilder vb = OpBuilder::atBlockBegin(module.getBody());
      if (auto vars = llvm::to_vector(module.getOps<graph::VariableOp>());
          !vars.empty())
        vb.setInsertionPointAfter(vars.back());
      graph::VariableOp::create(vb, loc, name, cacheType, "state", "zeros",
                                FloatAttr(), StringAttr());
    }
    auto emit = [&](Operation *before, Value from, StringRef section) {
      b.setInsertionPoint(before);
      auto fused = kernel::FusedOp::create(b, loc, TypeRange{cacheType},
                                           ValueRange{from},
                                           "optimizer.bf16_weights",
                                           "elementwise");
      OpBuilder inner = OpBuilder::atBlockEnd(&fused.getBodyBlock());
      Value cast = graph::CastOp::create(inner, loc, cacheType,
                                         fused.getBodyBlock().getArgument(0));
      kernel::YieldOp::create(inner, loc, cast);
      fused->setAttr("layer", b.getI64IntegerAttr(-1));
      fused->setAttr("section", b.getStringAttr(section));
      graph::StoreOp::create(b, loc, fused->getResult(0), name);
      return fused;
    };
    emit(update, update.getValue(), "optimizer")
        ->setAttr("octet.weight_cast", b.getUnitAttr());
    b.setInsertionPoint(initReturn);
    Value initial = graph::LoadOp::create(b, loc, weight, param);
    emit(initReturn, initial, "init");
    for (kernel::FusedOp reader : readers) {
      OpBuilder rb(reader);
      Value cache = graph::LoadOp::create(rb, loc, cacheType, name);
      if (onlyOp<graph::CastOp>(reader)) {
        reader->getResult(0).replaceAllUsesWith(cache);
        eraseUnused(reader);
        continue;
      }
      for (OpOperand &operand : reader->getOpOperands()) {
        auto load = operand.get().getDefiningOp<graph::LoadOp>();
        if (!load || load.getVariable() != param)
          continue;
        operand.set(cache);
        reader.getBodyBlock()
            .getArgument(operand.getOperandNumber())
            .setType(cacheType);
        if (load->use_empty())
          load->erase();
      }
    }
  }

  void declareVariables(ModuleOp module, WeightCast &wc) {
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    if (auto last = llvm::to_vector(module.getOps<graph::VariableOp>());
        !last.empty())
      b.setInsertionPointAfter(last.back());
    SmallVector<Type> types = {wc.quantize.getResult().getType()};
    if (!wc.transposes.empty())
      types.push_back(wc.transposes.front().getResult().getType());
    // f32 scalars: the amax, or the scale and its inverse.
    types.push_back(wc.quantize.getAmax().getType());
    if (wc.current())
      types.push_back(wc.quantize.getAmax().getType());
    for (auto [name, type] : llvm::zip_equal(stateNames(wc), types))
      graph::VariableOp::create(b, module.getLoc(), name,
                                cast<RankedTensorType>(type), "state", "zeros",
                                FloatAttr(), StringAttr());
  }

  // The step reads what the optimizer (or the init function) wrote.
  void replaceByLoads(WeightCast &wc) {
    OpBuilder b(wc.kernel);
    Location loc = wc.kernel.getLoc();
    std::string prefix = ("fp8w." + wc.param).str();
    auto load = [&](const std::string &name, Value old) {
      if (old.use_empty())
        return;
      Value v = graph::LoadOp::create(b, loc, old.getType(), name);
      old.replaceAllUsesWith(v);
    };
    for (kernel::CopyOp copy : wc.transposes) {
      load(prefix + ".t", copy.getResult());
      copy.erase();
    }
    load(prefix, wc.kernel->getResult(0));
    if (wc.current()) {
      // The GEMMs read the inverse scale the optimizer stored; the amax of
      // the quantize itself has no reader under current scaling.
      b.setInsertionPoint(wc.scaleKernel);
      load(prefix + ".scale", wc.scaleKernel->getResult(0));
      load(prefix + ".scale_inv", wc.scaleKernel->getResult(1));
    } else {
      load(prefix + ".amax", wc.kernel->getResult(1));
    }
    eraseUnused(wc.kernel);
    if (wc.current())
      eraseUnused(wc.scaleKernel);
  }

  // Erases `op` and then what computed its operands, as far as nothing
  // else reads them (the step's amax and scale kernels and weight loads).
  static void eraseUnused(Operation *op) {
    SmallVector<Operation *> work = {op};
    while (!work.empty()) {
      Operation *next = work.pop_back_val();
      if (!next->use_empty())
        continue;
      llvm::SetVector<Operation *> defs;
      for (Value input : next->getOperands())
        if (Operation *def = input.getDefiningOp())
          defs.insert(def);
      next->erase();
      work.append(defs.begin(), defs.end());
    }
  }
};

} // namespace
