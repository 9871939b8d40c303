// octet-fuse-adamw: every AdamW update of a function in one multi-tensor
// kernel, with the FP8 cast of the updated weights for the next step. The
// zeroing of the gradient accumulators stays out: a stored zero tensor is a
// memset of the accumulator (plan::isStoredZeroFill), which moves half the
// bytes of a kernel writing zeros that are then copied.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

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

constexpr StringLiteral kInitFunction = "fp8_weight_init";

// A step function's FP8 cast of a weight: a one-op quantize kernel of a
// loaded parameter with a scale loaded from state, and the K-major copies
// of the result.
struct WeightCast {
  kernel::FusedOp kernel;
  fp8::QuantizeOp quantize;
  StringRef param, scale;
  SmallVector<kernel::CopyOp> transposes;
};

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
  auto scale = loadedVariable(fused, quantize.getScale());
  if (!param || !scale || !params.contains(*param))
    return std::nullopt;
  WeightCast wc{fused, quantize, *param, *scale, {}};
  for (Operation *user : fused->getResult(0).getUsers()) {
    auto copy = dyn_cast<kernel::CopyOp>(user);
    if (copy && copy.getTranspose())
      wc.transposes.push_back(copy);
  }
  if (wc.transposes.size() > 1)
    return std::nullopt;
  return wc;
}

struct FuseAdamW : public octet::impl::OctetFuseAdamWBase<FuseAdamW> {
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

  // Builds, before `before`, the kernel that casts `weight` with the scale
  // in variable `wc.scale` as `cast` does, and stores the FP8 weight, its
  // K-major copy and its amax in the fp8w.* variables.
  void emitCast(OpBuilder &b, Operation *before, WeightCast &wc,
                Value weight) {
    b.setInsertionPoint(before);
    Location loc = wc.kernel.getLoc();
    Value scale = graph::LoadOp::create(
        b, loc, wc.quantize.getScale().getType(), wc.scale);
    SmallVector<Type> types = {wc.quantize.getResult().getType()};
    if (!wc.transposes.empty())
      types.push_back(wc.transposes.front().getResult().getType());
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
    yields.push_back(quantize.getAmax());
    kernel::YieldOp::create(inner, loc, yields);
    fused->setAttr("layer", b.getI64IntegerAttr(-1));
    fused->setAttr("section", b.getStringAttr("optimizer"));
    fused->setAttr("octet.weight_cast", b.getUnitAttr());
    std::string prefix = ("fp8w." + wc.param).str();
    SmallVector<std::string> names = {prefix};
    if (!wc.transposes.empty())
      names.push_back(prefix + ".t");
    names.push_back(prefix + ".amax");
    for (auto [result, name] : llvm::zip(fused->getResults(), names))
      graph::StoreOp::create(b, loc, result, name);
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
        return c.scale == first.scale &&
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

  void declareVariables(ModuleOp module, WeightCast &wc) {
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    if (auto last = llvm::to_vector(module.getOps<graph::VariableOp>());
        !last.empty())
      b.setInsertionPointAfter(last.back());
    std::string prefix = ("fp8w." + wc.param).str();
    auto declare = [&](const std::string &name, Type type) {
      graph::VariableOp::create(b, module.getLoc(), name,
                                cast<RankedTensorType>(type), "state", "zeros",
                                FloatAttr(), StringAttr());
    };
    declare(prefix, wc.quantize.getResult().getType());
    if (!wc.transposes.empty())
      declare(prefix + ".t", wc.transposes.front().getResult().getType());
    declare(prefix + ".amax", wc.quantize.getAmax().getType());
  }

  // The step reads what the optimizer (or the init function) wrote.
  void replaceByLoads(WeightCast &wc) {
    OpBuilder b(wc.kernel);
    Location loc = wc.kernel.getLoc();
    std::string prefix = ("fp8w." + wc.param).str();
    auto load = [&](const std::string &name, Value old) {
      Value v = graph::LoadOp::create(b, loc, old.getType(), name);
      old.replaceAllUsesWith(v);
    };
    for (kernel::CopyOp copy : wc.transposes) {
      load(prefix + ".t", copy.getResult());
      copy.erase();
    }
    load(prefix, wc.kernel->getResult(0));
    load(prefix + ".amax", wc.kernel->getResult(1));
    llvm::SetVector<Value> inputs(wc.kernel.getInputs().begin(),
                                  wc.kernel.getInputs().end());
    wc.kernel.erase();
    for (Value input : inputs)
      if (input.use_empty())
        if (Operation *def = input.getDefiningOp())
          def->erase();
  }
};

} // namespace
