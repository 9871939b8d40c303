#include "dialects/kernel/KernelDialect.h"

#include "dialects/common/Verify.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace octet;
using namespace octet::kernel;

#include "dialects/kernel/KernelDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/kernel/KernelAttrs.cpp.inc"

#include "dialects/kernel/KernelInterfaces.cpp.inc"

void KernelDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/kernel/KernelAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/kernel/KernelOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Launch contract
//===----------------------------------------------------------------------===//

// The limits of sm_90, the only target: dynamic shared memory a block may
// have, threads a block, blocks a portable cluster (larger ones need a
// non-portable launch attribute the runtime does not set).
static constexpr int64_t kMaxSharedBytes = 227 * 1024;
static constexpr int64_t kMaxBlockThreads = 1024;
static constexpr int64_t kMaxClusterBlocks = 8;
static constexpr int64_t kMaxGridBlocks = 0x7fffffff;

LogicalResult LaunchAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 SymbolRefAttr kernel, int64_t grid,
                                 int64_t block, int64_t sharedBytes,
                                 int64_t cluster, bool programmatic) {
  (void)programmatic;
  if (!kernel || kernel.getNestedReferences().size() != 1)
    return emitError() << "launch kernel must be @module::@function, got "
                       << kernel;
  if (grid < 1 || grid > kMaxGridBlocks)
    return emitError() << "launch grid must be 1 to " << kMaxGridBlocks
                       << " blocks, got " << grid;
  if (block < 1 || block > kMaxBlockThreads)
    return emitError() << "launch block must be 1 to " << kMaxBlockThreads
                       << " threads, got " << block;
  if (sharedBytes < 0 || sharedBytes > kMaxSharedBytes)
    return emitError() << "launch shared_bytes must be 0 to "
                       << kMaxSharedBytes << " (227 KiB, sm_90), got "
                       << sharedBytes;
  if (cluster < 1 || cluster > kMaxClusterBlocks)
    return emitError() << "launch cluster must be 1 to " << kMaxClusterBlocks
                       << " blocks, got " << cluster;
  if (grid % cluster)
    return emitError() << "launch cluster of " << cluster
                       << " blocks does not divide the grid of " << grid;
  return success();
}

// #kernel.launch<@m::@f, grid = G, block = B[, shared_bytes = S]
//                [, cluster = C][, programmatic]>
Attribute LaunchAttr::parse(AsmParser &parser, Type) {
  SMLoc at = parser.getCurrentLocation();
  SymbolRefAttr kernel;
  int64_t grid = 0, block = 0, sharedBytes = 0, cluster = 1;
  bool programmatic = false;
  if (parser.parseLess() || parser.parseAttribute(kernel) ||
      parser.parseComma() || parser.parseKeyword("grid") ||
      parser.parseEqual() || parser.parseInteger(grid) ||
      parser.parseComma() || parser.parseKeyword("block") ||
      parser.parseEqual() || parser.parseInteger(block))
    return {};
  while (succeeded(parser.parseOptionalComma())) {
    SMLoc fieldAt = parser.getCurrentLocation();
    StringRef field;
    if (parser.parseKeyword(&field))
      return {};
    if (field == "programmatic") {
      programmatic = true;
      continue;
    }
    int64_t *value = field == "shared_bytes" ? &sharedBytes
                     : field == "cluster"    ? &cluster
                                             : nullptr;
    if (!value) {
      parser.emitError(fieldAt, "unknown launch field '")
          << field << "' (shared_bytes, cluster or programmatic)";
      return {};
    }
    if (parser.parseEqual() || parser.parseInteger(*value))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(at); },
                    parser.getContext(), kernel, grid, block, sharedBytes,
                    cluster, programmatic);
}

void LaunchAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printer.printAttribute(getKernel());
  printer << ", grid = " << getGrid() << ", block = " << getBlock();
  if (getSharedBytes())
    printer << ", shared_bytes = " << getSharedBytes();
  if (getCluster() != 1)
    printer << ", cluster = " << getCluster();
  if (getProgrammatic())
    printer << ", programmatic";
  printer << ">";
}

LogicalResult kernel::verifyLaunchContract(Operation *op) {
  auto launched = cast<LaunchedOpInterface>(op);
  ArrayAttr launches = launched.getLaunchAttr();
  if (!launches) {
    if (launched.getKernelsAttr() || launched.getWorkspaceBytesAttr() ||
        launched.getZeroResultsAttr() || launched.getArgTable())
      return op->emitOpError("has kernels, workspace_bytes, zero_results or "
                             "arg_table but no launch");
    return success();
  }
  if (launches.empty())
    return op->emitOpError("has an empty launch list");
  SmallVector<Attribute> launchedKernels;
  for (LaunchAttr launch : launches.getAsRange<LaunchAttr>()) {
    if (failed(LaunchAttr::verify(
            [&] { return op->emitOpError(); }, launch.getKernel(),
            launch.getGrid(), launch.getBlock(), launch.getSharedBytes(),
            launch.getCluster(), launch.getProgrammatic())))
      return failure();
    launchedKernels.push_back(launch.getKernel());
  }
  if (ArrayAttr kernels = launched.getKernelsAttr();
      kernels && kernels.getValue() != ArrayRef<Attribute>(launchedKernels))
    return op->emitOpError("kernels ")
           << kernels << " must be the launches' kernels in launch order";
  if (int64_t bytes = launched.getWorkspaceBytesOrZero(); bytes % 4)
    return op->emitOpError("workspace_bytes ")
           << bytes << " is not a whole number of f32";
  int64_t previous = -1;
  for (int64_t i : launched.getZeroedResults()) {
    if (i < 0 || i >= (int64_t)op->getNumResults())
      return op->emitOpError("zero_results names result #")
             << i << " of " << op->getNumResults();
    if (i <= previous)
      return op->emitOpError("zero_results must be ascending and distinct");
    previous = i;
  }
  return success();
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
  bool blocks = getABlock() || getBBlock();
  if (fp8A && failed(verifyBlockScales(m, n, ka)))
    return failure();
  if (fp8A && !blocks && !getAScaleInv())
    return emitOpError("tensorwise FP8 operands need scales_inv(a_scale_inv, "
                       "b_scale_inv): the dequantization factors 1 / scale "
                       "that cuBLASLt multiplies by")
           << (getAScale() ? " (scales(...) are block scales, with a_block "
                             "and b_block)"
                           : "");
  if (fp8A && blocks && getAScaleInv())
    return emitOpError("block-scaled operands take scales(a_scale, b_scale) "
                       "per block, not scales_inv");
  if (!fp8A && (getAScale() || getAScaleInv()))
    return emitOpError("scales apply only to FP8 operands");
  if (!fp8A && failed(verifyBlockScales(m, n, ka)))
    return failure();
  if (isa<Float8E5M2Type>(a.getElementType()) &&
      isa<Float8E5M2Type>(b.getElementType()))
    return emitOpError("E5M2 x E5M2 has no FP8 GEMM on Hopper: one operand "
                       "must be E4M3");
  if (auto role = getRole())
    if (*role != "fprop" && *role != "dgrad" && *role != "wgrad")
      return emitOpError("role must be fprop, dgrad or wgrad; got '")
             << *role << "'";
  if (failed(expectShape(*this, "result", d, {m, n})))
    return failure();
  if (auto c = getC())
    if (failed(expectShape(*this, "accumulate operand",
                           cast<RankedTensorType>(c.getType()), {m, n})))
      return failure();
  // octet-overwrite-gradients: D = P in a step's first microbatch, D = P + C
  // in the later ones.
  if ((*this)->hasAttr("first_microbatch_overwrites") && !getC())
    return emitOpError("first_microbatch_overwrites needs an accumulate "
                       "operand: it says when to ignore it");
  StringRef epilogue = getEpilogueKind();
  if (epilogue != "none" && epilogue != "bias" && epilogue != "gelu" &&
      epilogue != "gelu_aux" && epilogue != "bias_grad")
    return emitOpError("epilogue must be bias, gelu, gelu_aux or bias_grad; "
                       "got '")
           << epilogue << "'";
  if (getBias()) {
    if (epilogue != "bias" && epilogue != "gelu" && epilogue != "gelu_aux")
      return emitOpError("a bias operand needs epilogue bias, gelu or "
                         "gelu_aux");
    if (failed(expectShape(*this, "bias",
                           cast<RankedTensorType>(getBias().getType()), {n})))
      return failure();
  } else if (epilogue == "bias") {
    return emitOpError("epilogue bias needs a bias operand");
  }
  size_t auxCount = getAux().size();
  if (epilogue == "gelu_aux") {
    if (auxCount != 1)
      return emitOpError("epilogue gelu_aux has one aux result (the "
                         "pre-activation); got ")
             << auxCount;
    return expectShape(*this, "aux result",
                       cast<RankedTensorType>(getAux()[0].getType()), {m, n});
  }
  if (epilogue == "bias_grad") {
    if (auxCount != 1)
      return emitOpError("epilogue bias_grad has one aux result (the bias "
                         "gradient); got ")
             << auxCount;
    return expectShape(*this, "aux result",
                       cast<RankedTensorType>(getAux()[0].getType()), {m});
  }
  if (auxCount)
    return emitOpError("only gelu_aux and bias_grad epilogues have aux "
                       "results");
  return success();
}

// Block scales: what cuBLASLt multiplies on sm_90 (1×128 tiles along K,
// 128×128 blocks), K-major, with no epilogue but accumulation.
LogicalResult GemmOp::verifyBlockScales(int64_t m, int64_t n, int64_t k) {
  auto aBlock = getABlock(), bBlock = getBBlock();
  auto rankOf = [](Value v) {
    return v ? cast<RankedTensorType>(v.getType()).getRank() : 0;
  };
  if (!aBlock && !bBlock) {
    if (rankOf(getAScale()) || rankOf(getBScale()))
      return emitOpError("ranked scales need a_block and b_block (block "
                         "scaling); tensorwise scales are rank 0");
    return success();
  }
  if (!aBlock || !bBlock || !getAScale())
    return emitOpError("block scaling needs FP8 operands with scales and "
                       "both a_block and b_block: cuBLASLt does not mix "
                       "tensorwise and block scales");
  if (getTransposeA() || !getTransposeB())
    return emitOpError("block-scaled operands must be K-major (transpose_b, "
                       "not transpose_a): the blocks run along K as stored");
  auto isTile = [](ArrayRef<int64_t> b) {
    return b.size() == 2 && b[0] == 1 && b[1] == 128;
  };
  auto isSquare = [](ArrayRef<int64_t> b) {
    return b.size() == 2 && b[0] == 128 && b[1] == 128;
  };
  for (auto [name, block] : {std::make_pair("a_block", *aBlock),
                             std::make_pair("b_block", *bBlock)})
    if (!isTile(block) && !isSquare(block))
      return emitOpError(name) << " must be [1, 128] (VEC128) or [128, 128] "
                                  "(BLK128x128), the block shapes cuBLASLt "
                                  "scales on sm_90";
  if (isSquare(*aBlock) && isSquare(*bBlock))
    return emitOpError("both operands in 128x128 blocks: cuBLASLt takes "
                       "128x128 blocks for one operand only");
  for (auto [name, dim] : {std::make_tuple("M", m), std::make_tuple("N", n),
                           std::make_tuple("K", k)})
    if (!ShapedType::isDynamic(dim) && dim % 128)
      return emitOpError("block-scaled GEMM needs ")
             << name << " a multiple of 128; got " << dim;
  auto rank = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getRank();
  };
  // Rank 1: cuBLASLt's dequantization factors (fp8.block_factors), read as
  // they are; rank 2: the quantize scales, turned into factors before the
  // call.
  bool factors = rank(getAScale()) == 1;
  if (factors != (rank(getBScale()) == 1))
    return emitOpError("a_scale and b_scale must both be quantize scales "
                       "(2-D) or both dequantization factors (1-D)");
  auto expectScale = [&](StringRef what, Value scale, Value data,
                         ArrayRef<int64_t> block) -> LogicalResult {
    auto shape = cast<RankedTensorType>(data.getType()).getShape();
    if (factors) {
      int64_t count = getDequantFactorCount(data == getB());
      return expectShape(*this, what, cast<RankedTensorType>(scale.getType()),
                         {count});
    }
    SmallVector<int64_t, 2> want;
    for (int i = 0; i < 2; ++i)
      want.push_back(ShapedType::isDynamic(shape[i])
                         ? ShapedType::kDynamic
                         : (shape[i] + block[i] - 1) / block[i]);
    return expectShape(*this, what, cast<RankedTensorType>(scale.getType()),
                       want);
  };
  if (failed(expectScale("a_scale", getAScale(), getA(), *aBlock)) ||
      failed(expectScale("b_scale", getBScale(), getB(), *bBlock)))
    return failure();
  if (getEpilogueKind() != "none" || getBias())
    return emitOpError("block-scaled GEMMs take no epilogue (got '")
           << getEpilogueKind() << "'): keep the bias and activation in "
                                   "the next kernel";
  return success();
}

// The operand's block and stored shape ([R, K]), for its factors' layout.
static std::pair<std::optional<ArrayRef<int64_t>>, ArrayRef<int64_t>>
blockAndShape(GemmOp gemm, bool operandB) {
  auto block = operandB ? gemm.getBBlock() : gemm.getABlock();
  Value data = operandB ? gemm.getB() : gemm.getA();
  return {block, cast<RankedTensorType>(data.getType()).getShape()};
}

int64_t GemmOp::getDequantFactorStride(bool operandB) {
  auto [block, shape] = blockAndShape(*this, operandB);
  if (!block)
    return 0;
  if ((*block)[0] == 1)
    return shape[0];
  return ((shape[1] + 127) / 128 + 3) / 4 * 4;
}

int64_t GemmOp::getDequantFactorCount(bool operandB) {
  auto [block, shape] = blockAndShape(*this, operandB);
  if (!block)
    return 0;
  int64_t rowsOfFactors =
      (*block)[0] == 1 ? (shape[1] + 127) / 128 : (shape[0] + 127) / 128;
  return rowsOfFactors * getDequantFactorStride(operandB);
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

bool FusedOp::isStoredZeroFill() {
  Block &body = getBodyBlock();
  if (getNumResults() != 1 || !getInputs().empty() ||
      body.getOperations().size() != 2 || getResult(0).use_empty())
    return false;
  // The graph dialect is not a dependency of this one: the fill and the
  // stores are matched by name.
  Operation &fill = body.front();
  auto value = fill.getAttrOfType<FloatAttr>("value");
  return fill.getName().getStringRef() == "graph.fill" && value &&
         value.getValue().isZero() &&
         body.getTerminator()->getOperand(0) == fill.getResult(0) &&
         llvm::all_of(getResult(0).getUsers(), [](Operation *user) {
           return user->getName().getStringRef() == "graph.store";
         });
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
  if (std::optional<ArrayRef<int64_t>> overwrites = getOverwrites()) {
    if (overwrites->size() != getNumResults())
      return emitOpError("overwrites has ")
             << overwrites->size() << " entries for " << getNumResults()
             << " results (one input index, or -1, per result)";
    for (auto [r, in] : llvm::enumerate(*overwrites)) {
      if (in == -1)
        continue;
      if (in < 0 || in >= int64_t(getInputs().size()))
        return emitOpError("overwrites: result #")
               << r << " names input #" << in << ", but the op has "
               << getInputs().size() << " inputs";
      auto input = cast<RankedTensorType>(getInputs()[in].getType());
      auto result = cast<RankedTensorType>(getResult(r).getType());
      if (input.getNumElements() * input.getElementTypeBitWidth() !=
          result.getNumElements() * result.getElementTypeBitWidth())
        return emitOpError("overwrites: result #")
               << r << " (" << result << ") is not the size of input #" << in
               << " (" << input << ") it would be written over";
      if (llvm::count(*overwrites, in) != 1)
        return emitOpError("overwrites: input #")
               << in << " is written over by more than one result";
    }
  }
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

// q [B, S, Hq, Dh], k and v [B, S, Hkv, Dh] with Hkv dividing Hq; lse
// [B, Hq, S].
static LogicalResult verifyAttentionShapes(Operation *op, Value q, Value k,
                                           Value v, Value out, Value lse) {
  auto qt = cast<RankedTensorType>(q.getType());
  auto kt = cast<RankedTensorType>(k.getType());
  auto vt = cast<RankedTensorType>(v.getType());
  if (failed(expectRank(op, "q", qt, 4)) ||
      failed(expectRank(op, "k", kt, 4)) ||
      failed(expectShape(op, "v", vt, kt.getShape())))
    return failure();
  int64_t b = qt.getDimSize(0), s = qt.getDimSize(1), hq = qt.getDimSize(2),
          dh = qt.getDimSize(3), hkv = kt.getDimSize(2);
  if (failed(expectShape(op, "k", kt, {b, s, hkv, dh})))
    return failure();
  if (hkv <= 0 || hq % hkv)
    return op->emitOpError("kv heads (")
           << hkv << ") must divide query heads (" << hq << ")";
  if (failed(expectShape(op, "output", cast<ShapedType>(out.getType()),
                         qt.getShape())))
    return failure();
  return expectShape(op, "lse", cast<ShapedType>(lse.getType()), {b, hq, s});
}

static int64_t attentionFlops(Value q, Value k, bool causal) {
  auto qt = cast<RankedTensorType>(q.getType());
  int64_t flops = 4 * qt.getDimSize(0) * qt.getDimSize(2) * qt.getDimSize(1) *
                  qt.getDimSize(1) * qt.getDimSize(3);
  return causal ? flops / 2 : flops;
}

LogicalResult AttentionFwdOp::verify() {
  return verifyAttentionShapes(*this, getQ(), getK(), getV(), getResult(),
                               getLse());
}

int64_t AttentionFwdOp::getFlops() {
  return attentionFlops(getQ(), getK(), getCausal());
}

LogicalResult AttentionBwdOp::verify() {
  if (failed(verifyAttentionShapes(*this, getQ(), getK(), getV(), getOut(),
                                   getLse())) ||
      failed(expectShape(*this, "grad", cast<ShapedType>(getGrad().getType()),
                         cast<ShapedType>(getQ().getType()).getShape())) ||
      failed(expectShape(*this, "q_grad",
                         cast<ShapedType>(getQGrad().getType()),
                         cast<ShapedType>(getQ().getType()).getShape())) ||
      failed(expectShape(*this, "k_grad",
                         cast<ShapedType>(getKGrad().getType()),
                         cast<ShapedType>(getK().getType()).getShape())))
    return failure();
  return expectShape(*this, "v_grad", cast<ShapedType>(getVGrad().getType()),
                     cast<ShapedType>(getV().getType()).getShape());
}

int64_t AttentionBwdOp::getFlops() {
  return attentionFlops(getQ(), getK(), getCausal()) * 5 / 2;
}

LogicalResult RankPartOp::verify() {
  int64_t size = getGroupSize();
  if (size < 1)
    return emitOpError("group_size must be at least 1; got ") << size;
  if (getGroup().empty())
    return emitOpError("needs a group name (data, tensor or pipeline)");
  auto it = cast<RankedTensorType>(getInput().getType());
  auto ot = cast<RankedTensorType>(getResult().getType());
  if (failed(expectSameElementType(*this, "result", ot, "operand", it)) ||
      failed(expectMinRank(*this, "operand", it, 1)))
    return failure();
  SmallVector<int64_t> expected(it.getShape());
  if (expected[0] % size)
    return emitOpError("dimension 0 (")
           << expected[0] << ") must divide into group_size " << size
           << " equal parts";
  expected[0] /= size;
  return expectShape(*this, "result", ot, expected);
}

LogicalResult CollectiveOp::verify() {
  StringRef kind = getKind();
  if (kind != "all_reduce" && kind != "reduce_scatter" && kind != "all_gather")
    return emitOpError("kind must be all_reduce, reduce_scatter or "
                       "all_gather; got '")
           << kind << "'";
  StringRef reduction = getReduction();
  if (reduction != "sum" && reduction != "avg" && reduction != "max")
    return emitOpError("reduction must be sum, avg or max; got '")
           << reduction << "'";
  int64_t size = getGroupSize();
  if (size < 1)
    return emitOpError("group_size must be at least 1; got ") << size;
  if (getGroup().empty())
    return emitOpError("needs a group name (data, tensor or pipeline)");
  if (getInputs().size() != getResults().size() || getInputs().empty())
    return emitOpError("needs one result per operand and at least one "
                       "operand; got ")
           << getInputs().size() << " operands and " << getResults().size()
           << " results";
  for (auto [in, out] : llvm::zip(getInputs(), getResults())) {
    auto it = cast<RankedTensorType>(in.getType());
    auto ot = cast<RankedTensorType>(out.getType());
    if (failed(expectSameElementType(*this, "result", ot, "operand", it)))
      return failure();
    SmallVector<int64_t> expected(it.getShape());
    if (getInPlace() && kind == "all_reduce")
      return emitOpError("in_place is a reduce_scatter's or an "
                         "all_gather's; an all_reduce keeps its shape");
    if (getInPlace() && kind == "reduce_scatter") {
      if (failed(expectMinRank(*this, "operand", it, 1)))
        return failure();
      if (expected[0] % size)
        return emitOpError("reduce_scatter needs dimension 0 (")
               << expected[0] << ") divisible by the group size " << size;
    } else if (kind != "all_reduce") {
      if (failed(expectMinRank(*this, "operand", it, 1)))
        return failure();
      if (kind == "reduce_scatter") {
        if (expected[0] % size)
          return emitOpError("reduce_scatter needs dimension 0 (")
                 << expected[0] << ") divisible by the group size " << size;
        expected[0] /= size;
      } else {
        expected[0] *= size;
      }
    }
    if (failed(expectShape(*this, "result", ot, expected)))
      return failure();
  }
  return success();
}
