// octet-bf16-gradients: the weight gradients that wgrad GEMMs make, and
// their accumulators, in BF16 (train.precision.grad_dtype "bf16").
//
// Half the bytes of every such accumulator, and of the data-parallel
// reduce-scatter or all-reduce of it. Exact as designed only when the GEMM
// alone writes its accumulator in a step (one microbatch a step, the GEMM
// overwriting it: octet-overwrite-gradients): the accumulator then holds one
// rounding of the f32 GEMM result, where a sum over microbatches would be
// rounded at each one. The spec check refuses several microbatches a step;
// the pass itself converts only accumulators with exactly one writer per
// microbatch, a wgrad GEMM, and leaves the others f32 (norm, bias and
// embedding gradients, a tied head's, and a head that octet-chunk-lm-head
// will accumulate over token chunks).

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringMap.h"

namespace octet {
#define GEN_PASS_DEF_OCTETBF16GRADIENTS
#include "compiler/Transforms/Passes.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;
using namespace octet::graph;

namespace {

constexpr StringLiteral kTrainFunction = "train_microbatch";

struct Accesses {
  SmallVector<LoadOp> loads;
  SmallVector<StoreOp> stores;
};

// Every load and store of each variable, per function.
llvm::StringMap<llvm::DenseMap<Operation *, Accesses>>
accessesOf(ModuleOp module) {
  llvm::StringMap<llvm::DenseMap<Operation *, Accesses>> out;
  for (auto func : module.getOps<func::FuncOp>())
    func.walk([&](Operation *op) {
      if (auto load = dyn_cast<LoadOp>(op))
        out[load.getVariable()][func].loads.push_back(load);
      else if (auto store = dyn_cast<StoreOp>(op))
        out[store.getVariable()][func].stores.push_back(store);
    });
  return out;
}

// The wgrad GEMM whose result is the only thing `train` adds to the
// accumulator: `load` feeds only an add with the GEMM's result, and the
// add's one reader is `store`.
MatmulOp soleWgrad(LoadOp load, StoreOp store) {
  if (!load->hasOneUse())
    return {};
  auto add = dyn_cast<AddOp>(*load->getUsers().begin());
  if (!add || !add->hasOneUse() || *add->getUsers().begin() != store)
    return {};
  Value other =
      add.getLhs() == load.getResult() ? add.getRhs() : add.getLhs();
  auto wgrad = other.getDefiningOp<MatmulOp>();
  if (!wgrad || !wgrad->hasOneUse() || wgrad.getRole() != "wgrad" ||
      other.getType() != load.getType())
    return {};
  return wgrad;
}

// The parameter of the LM head when octet-chunk-lm-head will split its
// wgrad over chunks of tokens (more than `chunkTokens` of them).
std::optional<StringRef> chunkedHead(func::FuncOp train, int64_t chunkTokens) {
  if (chunkTokens <= 0)
    return std::nullopt;
  std::optional<StringRef> head;
  train.walk([&](CrossEntropyOp ce) {
    Value logits = ce.getLogits();
    while (auto reshape = logits.getDefiningOp<ReshapeOp>())
      logits = reshape.getInput();
    Operation *def = logits.getDefiningOp();
    auto param = def ? def->getAttrOfType<StringAttr>("param") : StringAttr();
    if (!param)
      return;
    auto input = cast<RankedTensorType>(def->getOperand(0).getType());
    int64_t tokens = input.getNumElements() / input.getShape().back();
    if (tokens > chunkTokens)
      head = param.getValue();
  });
  return head;
}

struct Bf16GradientsPass
    : public octet::impl::OctetBf16GradientsBase<Bf16GradientsPass> {
  using OctetBf16GradientsBase::OctetBf16GradientsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto train = module.lookupSymbol<func::FuncOp>(kTrainFunction);
    if (!train || train.isExternal())
      return;
    std::optional<StringRef> head = chunkedHead(train, headChunkTokens);
    auto accesses = accessesOf(module);
    Type bf16 = BFloat16Type::get(&getContext());
    for (auto var : module.getOps<VariableOp>()) {
      StringRef name = var.getSymName();
      if (!name.starts_with("grad.") ||
          var.getTensorType().getElementType() == bf16)
        continue;
      auto found = accesses.find(name);
      if (found == accesses.end())
        continue;
      if (failed(convert(var, train, found->second, head)))
        continue;
      ++converted;
    }
  }

  // Makes `var` BF16 if its one writer per microbatch is a wgrad GEMM and
  // the other functions only read it into the gradient norm and AdamW or
  // store zeros into it; fails, changing nothing, otherwise.
  LogicalResult convert(VariableOp var, func::FuncOp train,
                        const llvm::DenseMap<Operation *, Accesses> &uses,
                        std::optional<StringRef> head) {
    auto inTrain = uses.find(train);
    if (inTrain == uses.end() || inTrain->second.loads.size() != 1 ||
        inTrain->second.stores.size() != 1)
      return failure();
    MatmulOp wgrad =
        soleWgrad(inTrain->second.loads[0], inTrain->second.stores[0]);
    if (!wgrad || (head && wgrad.getParam() == *head))
      return failure();
    for (auto &[func, access] : uses) {
      if (func == train)
        continue;
      for (LoadOp load : access.loads)
        for (OpOperand &use : load->getUses()) {
          auto adam = dyn_cast<AdamWUpdateOp>(use.getOwner());
          if (!isa<GlobalNormOp>(use.getOwner()) &&
              !(adam && use.getOperandNumber() ==
                            adam.getGradMutable().getOperandNumber()))
            return failure();
        }
      for (StoreOp store : access.stores) {
        auto fill = store.getValue().getDefiningOp<FillOp>();
        if (!fill || !fill.getValue().isZero())
          return failure();
      }
    }

    auto narrow = [](Value v) {
      auto type = cast<RankedTensorType>(v.getType());
      v.setType(type.clone(BFloat16Type::get(v.getContext())));
    };
    var.setType(var.getTensorType().clone(BFloat16Type::get(&getContext())));
    narrow(wgrad.getResult());
    StoreOp trainStore = inTrain->second.stores[0];
    narrow(trainStore.getValue());
    for (auto &[func, access] : uses) {
      for (LoadOp load : access.loads)
        narrow(load.getResult());
      if (func == train)
        continue;
      // Zeros of the accumulator's own type; a fill other stores share
      // stays as it is.
      for (StoreOp store : access.stores) {
        auto fill = store.getValue().getDefiningOp<FillOp>();
        OpBuilder b(store);
        auto zero = FillOp::create(b, fill.getLoc(), var.getTensorType(),
                                   fill.getValueAttr());
        store.getValueMutable().assign(zero);
        if (fill->use_empty())
          fill.erase();
      }
    }
    return success();
  }
};

} // namespace
