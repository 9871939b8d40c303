// octet-precision: FP8 GEMMs per recipe and per-layer policy.

#include "compiler/Transforms/Precision.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/Regex.h"

namespace octet {
#define GEN_PASS_DEF_OCTETPRECISION
#include "compiler/Transforms/PrecisionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

enum class Kind { Activation, Weight, Gradient };

const char *tagOf(Kind kind) {
  switch (kind) {
  case Kind::Activation:
    return "x";
  case Kind::Weight:
    return "w";
  case Kind::Gradient:
    return "dy";
  }
  llvm_unreachable("kind");
}

constexpr int64_t kTile = 128;

std::optional<int64_t> layerIndex(StringRef param) {
  static const llvm::Regex re("(^|\\.)layers\\.([0-9]+)(\\.|$)");
  SmallVector<StringRef, 4> groups;
  if (!re.match(param, &groups))
    return std::nullopt;
  int64_t index;
  if (groups[2].getAsInteger(10, index))
    return std::nullopt;
  return index;
}

// The GEMMs the policy speaks about: linears and matmuls that name a param.
StringAttr paramOf(Operation *op) {
  if (!isa<graph::LinearOp, graph::MatmulOp>(op))
    return {};
  return op->getAttrOfType<StringAttr>("param");
}

StringRef roleOf(Operation *op) {
  if (auto role = op->getAttrOfType<StringAttr>("role"))
    return role.getValue();
  return "fprop";
}

// Looks through the identity-like ops the autodiff pass puts between a
// variable and its uses, and the BF16 copy octet-bf16-activations makes.
Value stripIdentity(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<graph::SaveOp, graph::ReshapeOp, graph::CastOp>(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

bool isLoadOf(Value v, StringRef variable) {
  auto load = stripIdentity(v).getDefiningOp<graph::LoadOp>();
  return load && load.getVariable() == variable;
}

// FP8 weights are quantized from the F32 master weight, not from a BF16
// copy of it: one rounding instead of two, and no copy to keep.
Value masterWeight(Value w) {
  if (auto cast = w.getDefiningOp<graph::CastOp>())
    if (cast.getInput().getDefiningOp<graph::LoadOp>())
      return cast.getInput();
  return w;
}

struct Quantized {
  // `scale` is what the cast multiplies by; `scaleInv` (tensorwise only)
  // is 1 / scale, made beside it, which the GEMM multiplies by.
  Value data, scale, scaleInv;
  DenseI64ArrayAttr block; // null: tensorwise
  std::string name;
  // The wide tensor quantized (null for a copy read through a save).
  Value source;
  // The scale operand of the GEMMs that read this tensor: the inverse
  // (cuBLASLt's A and B scale pointers) or, blockwise, the block scales.
  Value gemmScale() const { return block ? scale : scaleInv; }
};

// Rewrites the FP8 GEMMs of one function.
class FunctionRewriter {
public:
  FunctionRewriter(ModuleOp module, func::FuncOp func, fp8::RecipeAttr recipe,
                   bool updateState, llvm::StringSet<> &usedNames)
      : module(module), func(func), recipe(recipe), updateState(updateState),
        b(func.getContext()), usedNames(usedNames) {}

  void rewrite(ArrayRef<Operation *> gemms);

private:
  ModuleOp module;
  func::FuncOp func;
  fp8::RecipeAttr recipe;
  bool updateState;
  OpBuilder b;
  llvm::StringSet<> &usedNames;
  // Per (value, block rows, block cols): one quantization serves every GEMM.
  DenseMap<std::tuple<Value, int64_t, int64_t>, Quantized> cache;
  DenseMap<std::pair<Value, Value>, std::pair<Value, Value>> savedPairs;
  DenseMap<Value, Value> flattened;
  // The quantized 2-D input of each param's fprop, for wgrad to reuse.
  llvm::StringMap<Quantized> fpropInputs;
  // fprops per parameter: a weight read by several (tied) is not one
  // activation's wgrad.
  llvm::StringMap<int> fpropCount;
  // Per param: the values used as the gradient operand of its dgrads.
  llvm::StringMap<llvm::SmallPtrSet<Value, 2>> dgradGrads;

  bool tensorwise() const {
    return recipe.getKind() != fp8::RecipeKind::blockwise;
  }
  Type fp8TypeOf(Kind kind) {
    MLIRContext *ctx = func.getContext();
    switch (kind) {
    case Kind::Activation:
      return recipe.activationType(ctx);
    case Kind::Weight:
      return recipe.weightType(ctx);
    case Kind::Gradient:
      return recipe.gradientType(ctx);
    }
    llvm_unreachable("kind");
  }
  ArrayAttr amaxGroups(Kind kind) {
    SmallVector<StringRef, 2> groups;
    if (recipe.getKind() == fp8::RecipeKind::delayed && kind != Kind::Weight)
      groups.push_back("data");
    groups.push_back("tensor");
    return b.getStrArrayAttr(groups);
  }
  void setInsertionAfterDef(Value v) {
    if (Operation *def = v.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(v).getOwner());
  }
  std::string uniqueName(StringRef base) {
    std::string name = base.str();
    for (int i = 1; usedNames.contains(name); ++i)
      name = (base + "." + Twine(i)).str();
    usedNames.insert(name);
    return name;
  }
  Value stateVariable(StringRef name, RankedTensorType type, StringRef init);
  Value to2d(Value v, int64_t rows, int64_t cols);
  Quantized quantize(Value v, Kind kind, int64_t contractionDim,
                     StringRef param);
  std::pair<Value, Value> saved(const Quantized &q);
  void rewriteLinear(graph::LinearOp op);
  void rewriteMatmul(graph::MatmulOp op);
  Value fp8Matmul(Location loc, Type resultType, const Quantized &a,
                  const Quantized &b, Value bias, bool ta, bool tb,
                  StringRef role, StringAttr param);
};

Value FunctionRewriter::stateVariable(StringRef name, RankedTensorType type,
                                      StringRef init) {
  if (!module.lookupSymbol(name)) {
    // Before the functions, in creation order, beside the other variables.
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(*module.getOps<func::FuncOp>().begin());
    graph::VariableOp::create(b, module.getLoc(), name, type, "state", init,
                              FloatAttr(), StringAttr());
  }
  return graph::LoadOp::create(b, func.getLoc(), type, name);
}

Value FunctionRewriter::to2d(Value v, int64_t rows, int64_t cols) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getRank() == 2)
    return v;
  Value &flat = flattened[v];
  if (flat)
    return flat;
  OpBuilder::InsertionGuard guard(b);
  setInsertionAfterDef(v);
  return flat = graph::ReshapeOp::create(
             b, v.getLoc(),
             RankedTensorType::get({rows, cols}, type.getElementType()), v);
}

Quantized FunctionRewriter::quantize(Value v, Kind kind, int64_t contractionDim,
                                     StringRef param) {
  SmallVector<int64_t, 2> block;
  if (!tensorwise()) {
    if (kind == Kind::Weight)
      block = {kTile, kTile};
    else if (contractionDim == 1)
      block = {1, kTile};
    else
      block = {kTile, 1};
  }
  auto key = std::make_tuple(v, block.empty() ? 0 : block[0],
                             block.empty() ? 0 : block[1]);
  auto it = cache.find(key);
  if (it != cache.end())
    return it->second;

  OpBuilder::InsertionGuard guard(b);
  setInsertionAfterDef(v);
  Location loc = v.getLoc();
  auto type = cast<RankedTensorType>(v.getType());
  Type fp8Type = fp8TypeOf(kind);
  auto qType = RankedTensorType::get(type.getShape(), fp8Type);
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  Quantized q;
  q.source = v;
  // Tiles along the token dimension (blockwise wgrad operands) are a second
  // quantization of the same tensor: ".t" tells them apart.
  bool byToken = !block.empty() && block[0] != 1 && kind != Kind::Weight;
  q.name = uniqueName((param + "." + tagOf(kind) + (byToken ? ".t" : "")).str());
  StringAttr tensorName = b.getStringAttr(q.name);
  TypeAttr dtype = TypeAttr::get(fp8Type);

  switch (recipe.getKind()) {
  case fp8::RecipeKind::delayed: {
    auto historyType =
        RankedTensorType::get({recipe.getAmaxHistoryLen()}, b.getF32Type());
    std::string base = "fp8." + q.name;
    Value history = stateVariable(base + ".amax_history", historyType, "zeros");
    Value scale = stateVariable(base + ".scale", scalar, "ones");
    // 1 / scale, kept in state beside the scale (both start at 1 and every
    // update writes both), so no kernel computes it before a GEMM.
    Value scaleInv = stateVariable(base + ".scale_inv", scalar, "ones");
    auto cast = fp8::QuantizeOp::create(b, loc, qType, scalar, v, scale,
                                        amaxGroups(kind));
    cast->setAttr("tensor", tensorName);
    q.data = cast.getResult();
    q.scale = scale;
    q.scaleInv = scaleInv;
    if (updateState) {
      auto update = fp8::ScaleUpdateOp::create(
          b, loc, historyType, scalar, scalar, history, cast.getAmax(), scale,
          recipe, dtype, b.getF32FloatAttr(1.0e-12f));
      graph::StoreOp::create(b, loc, update.getNewHistory(),
                             base + ".amax_history");
      graph::StoreOp::create(b, loc, update.getNewScale(), base + ".scale");
      graph::StoreOp::create(b, loc, update.getNewScaleInv(),
                             base + ".scale_inv");
    }
    break;
  }
  case fp8::RecipeKind::current: {
    Value amax = fp8::AmaxOp::create(b, loc, scalar, v, amaxGroups(kind));
    auto compute = fp8::ComputeScaleOp::create(
        b, loc, scalar, scalar, amax, dtype,
        b.getI64IntegerAttr(recipe.getMargin()), UnitAttr(),
        b.getF32FloatAttr(1.0e-12f));
    Value scale = compute.getResult();
    auto cast =
        fp8::QuantizeOp::create(b, loc, qType, scalar, v, scale, ArrayAttr());
    cast->setAttr("tensor", tensorName);
    q.data = cast.getResult();
    q.scale = scale;
    q.scaleInv = compute.getScaleInv();
    break;
  }
  case fp8::RecipeKind::blockwise: {
    auto scaleType = RankedTensorType::get(
        fp8::blockScaleShape(type.getShape(), block), b.getF32Type());
    q.block = b.getDenseI64ArrayAttr(block);
    auto cast = fp8::BlockQuantizeOp::create(
        b, loc, qType, scaleType, v, q.block, dtype,
        recipe.getPowerOfTwoScales() ? b.getUnitAttr() : UnitAttr(),
        b.getF32FloatAttr(1.0e-12f), ArrayAttr());
    cast->setAttr("tensor", tensorName);
    q.data = cast.getResult();
    q.scale = cast.getScales();
    break;
  }
  }
  cache[key] = q;
  return q;
}

// The quantized forward tensor and its GEMM scale as the backward reads
// them: through a graph.save, so the FP8 copy (not the wide one) is what
// stays alive.
std::pair<Value, Value> FunctionRewriter::saved(const Quantized &q) {
  auto key = std::make_pair(q.data, q.gemmScale());
  auto it = savedPairs.find(key);
  if (it != savedPairs.end())
    return it->second;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfter(q.data.getDefiningOp());
  Value data = graph::SaveOp::create(b, q.data.getLoc(), q.data.getType(),
                                     q.data);
  Value scale = graph::SaveOp::create(b, key.second.getLoc(),
                                      key.second.getType(), key.second);
  return savedPairs[key] = {data, scale};
}

Value FunctionRewriter::fp8Matmul(Location loc, Type resultType,
                                  const Quantized &a, const Quantized &bq,
                                  Value bias, bool ta, bool tb, StringRef role,
                                  StringAttr param) {
  auto mm = fp8::MatmulOp::create(
      b, loc, resultType, a.data, a.gemmScale(), bq.data, bq.gemmScale(),
      bias, ta, tb, a.block, bq.block, b.getStringAttr(role), param,
      /*inverse_scales=*/tensorwise());
  return mm.getResult();
}

void FunctionRewriter::rewriteLinear(graph::LinearOp op) {
  auto xType = cast<RankedTensorType>(op.getInput().getType());
  auto wType = cast<RankedTensorType>(op.getWeight().getType());
  auto yType = cast<RankedTensorType>(op.getResult().getType());
  int64_t n = wType.getDimSize(0), k = wType.getDimSize(1);
  int64_t m = xType.getNumElements() / k;
  StringRef param = op.getParamAttr().getValue();
  Value x2 = to2d(op.getInput(), m, k);
  Quantized qx = quantize(x2, Kind::Activation, 1, param);
  Quantized qw = quantize(masterWeight(op.getWeight()), Kind::Weight, 1, param);
  fpropInputs[param] = qx;
  ++fpropCount[param];
  b.setInsertionPoint(op);
  auto y2Type = RankedTensorType::get({m, n}, yType.getElementType());
  Value y = fp8Matmul(op.getLoc(), y2Type, qx, qw, op.getBias(), false, true,
                      "fprop", op.getParamAttr());
  if (yType.getRank() != 2)
    y = graph::ReshapeOp::create(b, op.getLoc(), yType, y);
  op.getResult().replaceAllUsesWith(y);
  op.erase();
}

void FunctionRewriter::rewriteMatmul(graph::MatmulOp op) {
  StringRef param = op.getParamAttr().getValue();
  StringRef role = roleOf(op);
  Value lhs = op.getLhs(), rhs = op.getRhs();
  bool ta = op.getTransposeA(), tb = op.getTransposeB();
  Kind lhsKind, rhsKind;
  if (role == "fprop" || role == "dgrad") {
    Kind other = role == "fprop" ? Kind::Activation : Kind::Gradient;
    bool lhsIsWeight = isLoadOf(lhs, param) && !isLoadOf(rhs, param);
    lhsKind = lhsIsWeight ? Kind::Weight : other;
    rhsKind = lhsIsWeight ? other : Kind::Weight;
  } else {
    // wgrad: the gradient is the operand its dgrad also reads.
    auto &grads = dgradGrads[param];
    bool rhsIsGrad = grads.contains(rhs) && !grads.contains(lhs);
    lhsKind = rhsIsGrad ? Kind::Activation : Kind::Gradient;
    rhsKind = rhsIsGrad ? Kind::Gradient : Kind::Activation;
  }
  auto quantizeOperand = [&](Value v, Kind kind, int64_t dim) -> Quantized {
    auto fprop = fpropInputs.find(param);
    if (kind == Kind::Activation && role == "wgrad" && tensorwise() &&
        fprop != fpropInputs.end() &&
        fprop->second.data.getType() ==
            RankedTensorType::get(cast<ShapedType>(v.getType()).getShape(),
                                  fp8TypeOf(Kind::Activation))) {
      auto [data, scaleInv] = saved(fprop->second);
      return {data, Value(), scaleInv, {}, fprop->second.name, Value()};
    }
    // Blockwise wgrad tiles run along the tokens, so wgrad cannot read
    // fprop's 1x128 copy; the forward quantizes fprop's input a second time
    // beside the first (octet-fuse-elementwise makes them one kernel that
    // reads the tensor once) and the backward reads that copy through a
    // save, rather than recomputing the wide activation (a norm, SwiGLU) or
    // keeping it to quantize there.
    if (kind == Kind::Activation && role == "wgrad" && !tensorwise() &&
        fprop != fpropInputs.end() && fpropCount.lookup(param) == 1 &&
        fprop->second.source &&
        fprop->second.source.getType() == v.getType()) {
      Quantized q = quantize(fprop->second.source, kind, dim, param);
      auto [data, scales] = saved(q);
      return {data, scales, Value(), q.block, q.name, Value()};
    }
    return quantize(kind == Kind::Weight ? masterWeight(v) : v, kind, dim,
                    param);
  };
  Quantized qa = quantizeOperand(lhs, lhsKind, ta ? 0 : 1);
  Quantized qb = quantizeOperand(rhs, rhsKind, tb ? 1 : 0);
  if (role == "fprop" && lhsKind == Kind::Activation) {
    fpropInputs[param] = qa;
    ++fpropCount[param];
  }
  b.setInsertionPoint(op);
  Value y = fp8Matmul(op.getLoc(), op.getResult().getType(), qa, qb, Value(),
                      ta, tb, role, op.getParamAttr());
  op.getResult().replaceAllUsesWith(y);
  op.erase();
}

void FunctionRewriter::rewrite(ArrayRef<Operation *> gemms) {
  for (Operation *op : gemms) {
    auto mm = dyn_cast<graph::MatmulOp>(op);
    if (!mm || roleOf(mm) != "dgrad")
      continue;
    StringRef param = mm.getParamAttr().getValue();
    Value grad = isLoadOf(mm.getLhs(), param) ? mm.getRhs() : mm.getLhs();
    dgradGrads[param].insert(grad);
  }
  for (Operation *op : gemms) {
    if (auto linear = dyn_cast<graph::LinearOp>(op))
      rewriteLinear(linear);
    else
      rewriteMatmul(cast<graph::MatmulOp>(op));
  }
  // The wide activations that wgrad no longer reads (saves, recomputed
  // norms) go away.
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation &op :
         llvm::make_early_inc_range(llvm::reverse(func.getBody().front())))
      if (isOpTriviallyDead(&op)) {
        op.erase();
        changed = true;
      }
  }
}

struct Decision {
  bool fp8 = true;
  std::string reason;
};

// Why a GEMM cannot take cuBLASLt's block-scaled FP8 form (every dimension
// a multiple of 128: the 1x128 tiles run along K, 128x128 blocks along N
// and K, and wgrad's tiles along the tokens); empty when it can. Such a
// GEMM stays in BF16 and the precision report says why, rather than
// padding every operand and its scales to the next multiple of 128.
std::string blockwiseMisfit(Operation *op) {
  auto shape = [&](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  };
  int64_t m, n, k;
  if (auto linear = dyn_cast<graph::LinearOp>(op)) {
    n = shape(linear.getWeight())[0];
    k = shape(linear.getWeight())[1];
    m = cast<RankedTensorType>(linear.getInput().getType()).getNumElements() /
        k;
  } else {
    auto mm = cast<graph::MatmulOp>(op);
    auto a = shape(mm.getLhs()), b = shape(mm.getRhs());
    m = mm.getTransposeA() ? a[1] : a[0];
    k = mm.getTransposeA() ? a[0] : a[1];
    n = mm.getTransposeB() ? b[0] : b[1];
  }
  for (auto [name, dim] : {std::make_pair("M", m), std::make_pair("N", n),
                           std::make_pair("K", k)})
    if (dim % kTile)
      return (Twine("blockwise needs ") + name + " = " + Twine(dim) +
              " a multiple of " + Twine(kTile))
          .str();
  return "";
}

class PrecisionPass : public octet::impl::OctetPrecisionBase<PrecisionPass> {
public:
  using OctetPrecisionBase::OctetPrecisionBase;

  void runOnOperation() override;

private:
  FailureOr<fp8::RecipeAttr> buildRecipe();
  FailureOr<llvm::StringMap<Decision>>
  decide(const llvm::MapVector<StringRef, std::optional<int64_t>> &params);
};

FailureOr<fp8::RecipeAttr> PrecisionPass::buildRecipe() {
  ModuleOp module = getOperation();
  auto kind = fp8::symbolizeRecipeKind(recipe);
  auto fmt = fp8::symbolizeFormatKind(format);
  auto algorithm = fp8::symbolizeAmaxAlgorithm(amaxAlgorithm);
  if (!kind)
    return module.emitError("octet-precision: recipe must be delayed, "
                            "current or blockwise; got '")
           << recipe << "'";
  if (!fmt)
    return module.emitError("octet-precision: format must be hybrid or "
                            "e4m3; got '")
           << format << "'";
  if (!algorithm)
    return module.emitError("octet-precision: amax-algorithm must be max or "
                            "most_recent; got '")
           << amaxAlgorithm << "'";
  auto emit = [&] { return module.emitError("octet-precision: "); };
  bool pow2 = powerOfTwoScales && *kind == fp8::RecipeKind::blockwise;
  if (failed(fp8::RecipeAttr::verify(emit, *kind, *fmt, amaxHistoryLen,
                                     *algorithm, margin, pow2)))
    return failure();
  if (powerOfTwoScales && !pow2)
    return module.emitError("octet-precision: power-of-two-scales applies "
                            "to the blockwise recipe only");
  return fp8::RecipeAttr::get(&getContext(), *kind, *fmt, amaxHistoryLen,
                              *algorithm, margin, pow2);
}

FailureOr<llvm::StringMap<Decision>> PrecisionPass::decide(
    const llvm::MapVector<StringRef, std::optional<int64_t>> &params) {
  ModuleOp module = getOperation();
  if (firstLayersBf16 < 0 || lastLayersBf16 < 0)
    return module.emitError("octet-precision: first-layers-bf16 and "
                            "last-layers-bf16 must be non-negative");
  int64_t layers = 0;
  for (auto &[param, layer] : params)
    if (layer)
      layers = std::max(layers, *layer + 1);

  std::vector<std::pair<std::string, llvm::GlobPattern>> globs;
  for (const std::string &text : bf16Patterns) {
    auto glob = llvm::GlobPattern::create(text);
    if (!glob) {
      module.emitError("octet-precision: bf16 pattern '")
          << text << "' is not a valid glob: "
          << llvm::toString(glob.takeError());
      return failure();
    }
    globs.emplace_back(text, std::move(*glob));
  }
  llvm::StringSet<> matched;
  llvm::StringMap<Decision> decisions;
  for (auto &[param, layer] : params) {
    Decision d;
    if (!layer && keepHeadBf16) {
      d = {false, "outside the layers"};
    } else if (layer && *layer < firstLayersBf16) {
      d = {false, "first " + std::to_string(firstLayersBf16) + " layers"};
    } else if (layer && *layer >= layers - lastLayersBf16) {
      d = {false, "last " + std::to_string(lastLayersBf16) + " layers"};
    }
    // A GEMM over a fused weight (fuse-qkv's wqkv, w_gate_up) answers to
    // the names of the parameters it was fused from too.
    SmallVector<StringRef, 4> names = {param};
    if (auto var = module.lookupSymbol<graph::VariableOp>(param))
      if (auto from = var->getAttrOfType<ArrayAttr>("fused_from"))
        for (Attribute name : from.getAsRange<StringAttr>())
          names.push_back(cast<StringAttr>(name).getValue());
    for (auto &[text, glob] : globs) {
      if (llvm::none_of(names, [&](StringRef n) { return glob.match(n); }))
        continue;
      matched.insert(text);
      if (d.fp8)
        d = {false, "pattern '" + text + "'"};
    }
    decisions[param] = d;
  }
  for (auto &[text, glob] : globs)
    if (!matched.contains(text)) {
      InFlightDiagnostic diag = module.emitError("octet-precision: bf16 pattern '")
                                << text << "' matches no parameter; the "
                                   "parameters are: ";
      bool first = true;
      for (auto &entry : params) {
        diag << (first ? "" : ", ") << entry.first;
        first = false;
      }
      return failure();
    }
  return decisions;
}

void PrecisionPass::runOnOperation() {
  ModuleOp module = getOperation();
  FailureOr<fp8::RecipeAttr> recipeAttr = buildRecipe();
  if (failed(recipeAttr))
    return signalPassFailure();

  llvm::MapVector<StringRef, std::optional<int64_t>> params;
  module.walk([&](Operation *op) {
    if (StringAttr param = paramOf(op))
      params.insert({param.getValue(), layerIndex(param.getValue())});
  });
  FailureOr<llvm::StringMap<Decision>> decisions = decide(params);
  if (failed(decisions))
    return signalPassFailure();

  llvm::StringSet<> evalNames;
  if (evalFunctions.empty())
    evalNames.insert("forward");
  for (const std::string &name : evalFunctions)
    evalNames.insert(name);

  llvm::StringSet<> usedNames;
  Builder builder(&getContext());
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    SmallVector<Operation *> gemms;
    for (Operation &op : func.getBody().front()) {
      StringAttr param = paramOf(&op);
      if (!param)
        continue;
      const Decision &d = (*decisions)[param.getValue()];
      std::string reason = d.reason;
      if (d.fp8 && recipeAttr->getKind() == fp8::RecipeKind::blockwise)
        reason = blockwiseMisfit(&op);
      if (d.fp8 && reason.empty())
        gemms.push_back(&op);
      else
        op.setAttr("bf16_reason", builder.getStringAttr(reason));
    }
    // Each function names its tensors afresh, so an eval function reads the
    // same state variables the train step writes.
    usedNames.clear();
    FunctionRewriter(module, func, *recipeAttr,
                     !evalNames.contains(func.getSymName()), usedNames)
        .rewrite(gemms);
  }
  module->setAttr("fp8.recipe", *recipeAttr);
}

//===----------------------------------------------------------------------===//
// Report
//===----------------------------------------------------------------------===//

std::string formatName(Type type) {
  if (isa<Float8E4M3FNType>(type))
    return "e4m3";
  if (isa<Float8E5M2Type>(type))
    return "e5m2";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

std::string recipeSummary(fp8::RecipeAttr recipe) {
  std::string text = fp8::stringifyRecipeKind(recipe.getKind()).str();
  switch (recipe.getKind()) {
  case fp8::RecipeKind::delayed:
    text += " (history " + std::to_string(recipe.getAmaxHistoryLen()) + ", " +
            fp8::stringifyAmaxAlgorithm(recipe.getAmaxAlgorithm()).str() +
            ", margin " + std::to_string(recipe.getMargin()) + ")";
    break;
  case fp8::RecipeKind::current:
    text += " (tensorwise, margin " + std::to_string(recipe.getMargin()) + ")";
    break;
  case fp8::RecipeKind::blockwise:
    text += recipe.getPowerOfTwoScales() ? " (1x128/128x128, 2^k scales)"
                                         : " (1x128/128x128)";
    break;
  }
  return text;
}

} // namespace

void octet::printPrecisionReport(ModuleOp module, llvm::raw_ostream &os) {
  auto recipe = module->getAttrOfType<fp8::RecipeAttr>("fp8.recipe");
  struct Row {
    std::string layer, param, role, inputs, recipe;
  };
  std::vector<Row> rows;
  llvm::StringSet<> seen;
  llvm::StringMap<size_t> firstSeen;
  module.walk([&](Operation *op) {
    auto param = op->getAttrOfType<StringAttr>("param");
    if (!param || !isa<graph::LinearOp, graph::MatmulOp, fp8::MatmulOp>(op))
      return;
    StringRef role = roleOf(op);
    if (!seen.insert((param.getValue() + "/" + role).str()).second)
      return;
    firstSeen.try_emplace(param.getValue(), firstSeen.size());
    Row row;
    std::optional<int64_t> layer = layerIndex(param.getValue());
    row.layer = layer ? std::to_string(*layer) : "-";
    row.param = param.str();
    row.role = role.str();
    auto elem = [&](unsigned i) {
      return formatName(
          cast<ShapedType>(op->getOperand(i).getType()).getElementType());
    };
    bool fp8 = isa<fp8::MatmulOp>(op);
    row.inputs = elem(0) + " x " + elem(fp8 ? 2 : 1);
    if (fp8)
      row.recipe = recipe ? recipeSummary(recipe) : "fp8";
    else if (auto reason = op->getAttrOfType<StringAttr>("bf16_reason"))
      row.recipe = "none: " + reason.str();
    else
      row.recipe = "none";
    rows.push_back(std::move(row));
  });
  // Layer by layer (the head last), each GEMM's fprop, dgrad, wgrad.
  auto key = [&](const Row &r) {
    int64_t layer = r.layer == "-" ? INT64_MAX : std::stoll(r.layer);
    int role = r.role == "fprop" ? 0 : r.role == "dgrad" ? 1 : 2;
    return std::make_tuple(layer, firstSeen.lookup(r.param), role);
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const Row &a, const Row &b) {
    return key(a) < key(b);
  });
  os << llvm::format("%-6s %-22s %-6s %-14s %s\n", "layer", "matmul", "role",
                     "inputs", "recipe");
  for (const Row &r : rows)
    os << llvm::format("%-6s %-22s %-6s %-14s %s\n", r.layer.c_str(),
                       r.param.c_str(), r.role.c_str(), r.inputs.c_str(),
                       r.recipe.c_str());
}
