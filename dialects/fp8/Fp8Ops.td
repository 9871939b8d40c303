#ifndef OCTET_FP8_OPS_TD
#define OCTET_FP8_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Fp8_Dialect : Dialect {
  let name = "fp8";
  let cppNamespace = "::octet::fp8";
  let summary = "FP8 casts with explicit scales and amax bookkeeping";
  let description = [{
    Scales follow the multiply-before-cast convention: quantize computes
    q = saturate(x · scale) in the FP8 format, dequantize computes q / scale.
    Casts round to nearest even and saturate to the format's largest finite
    value, as the GPU's satfinite conversion does.

    A scale is always derived from an amax the same way (compute_scale,
    scale_update, block_quantize):
    scale = fp8_max / (max(amax, eps) · 2^margin), optionally rounded down
    to a power of two. The epsilon keeps an all-zero tensor from producing an
    infinite scale; a non-finite amax keeps the previous scale where there is
    one.
  }];
  let useDefaultAttributePrinterParser = 1;
}

class Fp8_Op<string mnemonic, list<Trait> traits = []>
    : Op<Fp8_Dialect, mnemonic, traits>;

defvar Fp8Tensor = TensorOf<[F8E4M3FN, F8E5M2]>;
defvar HighTensor = TensorOf<[F32, BF16, F16]>;
defvar ScalarF32 = 0DTensorOf<[F32]>;
defvar Fp8F32Tensor = TensorOf<[F32]>;
defvar Fp8Type = TypeAttrOf<AnyTypeOf<[F8E4M3FN, F8E5M2]>>;

//===----------------------------------------------------------------------===//
// Recipe
//===----------------------------------------------------------------------===//

def Fp8_RecipeKind : I32EnumAttr<"RecipeKind", "how FP8 scales are chosen", [
  I32EnumAttrCase<"delayed", 0>,
  I32EnumAttrCase<"current", 1>,
  I32EnumAttrCase<"blockwise", 2>]> {
  let cppNamespace = "::octet::fp8";
  let genSpecializedAttr = 0;
}

def Fp8_FormatKind : I32EnumAttr<"FormatKind", "which FP8 formats a recipe uses", [
  I32EnumAttrCase<"hybrid", 0>,
  I32EnumAttrCase<"e4m3", 1>]> {
  let cppNamespace = "::octet::fp8";
  let genSpecializedAttr = 0;
}

def Fp8_AmaxAlgorithm : I32EnumAttr<"AmaxAlgorithm", "how the amax history becomes one amax", [
  I32EnumAttrCase<"max", 0>,
  I32EnumAttrCase<"most_recent", 1>]> {
  let cppNamespace = "::octet::fp8";
  let genSpecializedAttr = 0;
}

class Fp8_DefaultEnum<EnumAttrInfo info, string value> : EnumParameter<info> {
  let defaultValue = value;
}

def Fp8_RecipeAttr : AttrDef<Fp8_Dialect, "Recipe"> {
  let mnemonic = "recipe";
  let summary = "an FP8 scaling recipe";
  let description = [{
    - `delayed`: each quantized tensor keeps an amax history of
      `amax_history_len` steps in state; the scale used in a step comes from
      the history before it (`amax_algorithm` max: the history's maximum,
      most_recent: the last amax), divided by 2^`margin`.
    - `current`: tensorwise; the scale comes from this step's amax.
    - `blockwise`: 1×128 tiles for activations and gradients, 128×128 blocks
      for weights, one FP32 scale per tile or block from its own amax;
      `power_of_two_scales` rounds each scale down to a power of two.
    `format` hybrid quantizes activations and weights to E4M3 and gradients
    to E5M2; e4m3 uses E4M3 for all three.

    ```mlir
    #fp8.recipe<kind = delayed, amax_history_len = 16, amax_algorithm = max>
    #fp8.recipe<kind = blockwise, format = e4m3, power_of_two_scales = true>
    ```
  }];
  let parameters = (ins
    EnumParameter<Fp8_RecipeKind>:$kind,
    Fp8_DefaultEnum<Fp8_FormatKind, "::octet::fp8::FormatKind::hybrid">:$format,
    DefaultValuedParameter<"int64_t", "1024">:$amax_history_len,
    Fp8_DefaultEnum<Fp8_AmaxAlgorithm, "::octet::fp8::AmaxAlgorithm::max">:$amax_algorithm,
    DefaultValuedParameter<"int64_t", "0">:$margin,
    DefaultValuedParameter<"bool", "false">:$power_of_two_scales);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    // The FP8 type of each tensor kind under this recipe's format.
    ::mlir::Type activationType(::mlir::MLIRContext *ctx) const;
    ::mlir::Type weightType(::mlir::MLIRContext *ctx) const;
    ::mlir::Type gradientType(::mlir::MLIRContext *ctx) const;
  }];
}

//===----------------------------------------------------------------------===//
// Tensorwise casts and amax
//===----------------------------------------------------------------------===//

def Fp8_QuantizeOp : Fp8_Op<"quantize", [Pure]> {
  let summary = "scale, cast to FP8 with saturation, and report the input's amax";
  let description = [{
    `amax_reduce` names the parallel groups ("data", "tensor") whose ranks
    must agree on this amax: a distributed step all-reduces it (max) over
    them before a scale is derived from it.
    ```mlir
    %q, %amax = fp8.quantize %x, %scale {amax_reduce = ["data", "tensor"]} : (tensor<16x64xbf16>, tensor<f32>) -> (tensor<16x64xf8E4M3FN>, tensor<f32>)
    ```
  }];
  let arguments = (ins HighTensor:$input, ScalarF32:$scale,
                   OptionalAttr<StrArrayAttr>:$amax_reduce);
  let results = (outs Fp8Tensor:$result, ScalarF32:$amax);
  let assemblyFormat = "$input `,` $scale attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Fp8_DequantizeOp : Fp8_Op<"dequantize", [Pure]> {
  let summary = "widen an FP8 tensor and divide by its scale";
  let description = [{
    ```mlir
    %x = fp8.dequantize %q, %scale : (tensor<16x64xf8E4M3FN>, tensor<f32>) -> tensor<16x64xbf16>
    ```
  }];
  let arguments = (ins Fp8Tensor:$input, ScalarF32:$scale);
  let results = (outs HighTensor:$result);
  let assemblyFormat = "$input `,` $scale attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Fp8_AmaxOp : Fp8_Op<"amax", [Pure]> {
  let summary = "largest absolute value of a tensor";
  let description = [{
    NaN propagates. `amax_reduce` is as for quantize.
    ```mlir
    %m = fp8.amax %x {amax_reduce = ["data"]} : (tensor<16x64xbf16>) -> tensor<f32>
    ```
  }];
  let arguments = (ins HighTensor:$input, OptionalAttr<StrArrayAttr>:$amax_reduce);
  let results = (outs ScalarF32:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Fp8_ComputeScaleOp : Fp8_Op<"compute_scale", [Pure, SameOperandsAndResultType]> {
  let summary = "scale from amax: fp8_max / (max(amax, eps) · 2^margin), elementwise, and its inverse";
  let description = [{
    The current-scaling recipe's scale: this step's amax in, the scale that
    maps it onto the format's largest finite value out. A non-finite amax
    gives scale 1 (there is no previous scale to keep); an all-zero tensor
    gives fp8_max / eps, finite. `scale_inv` is 1 / scale rounded to f32:
    the dequantization factor an FP8 GEMM multiplies by (`inverse_scales`
    on fp8.matmul), made where the scale is.

    Before (current recipe, tensorwise):
    ```mlir
    %y = graph.linear %x, %w {param = "layers.0.mlp.w1"} : ...
    ```
    After:
    ```mlir
    %ax = fp8.amax %x : (tensor<16x64xbf16>) -> tensor<f32>
    %sx, %ix = fp8.compute_scale %ax {dtype = f8E4M3FN} : tensor<f32>
    %qx, %ax2 = fp8.quantize %x, %sx : (tensor<16x64xbf16>, tensor<f32>) -> (tensor<16x64xf8E4M3FN>, tensor<f32>)
    ```
  }];
  let arguments = (ins Fp8F32Tensor:$amax, Fp8Type:$dtype,
                   DefaultValuedAttr<I64Attr, "0">:$margin,
                   UnitAttr:$power_of_two,
                   DefaultValuedAttr<F32Attr, "1.0e-12">:$eps);
  let results = (outs Fp8F32Tensor:$result, Fp8F32Tensor:$scale_inv);
  let assemblyFormat = "$amax attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Fp8_ScaleUpdateOp : Fp8_Op<"scale_update", [Pure]> {
  let summary = "delayed scaling: roll the amax history and derive next step's scale";
  let description = [{
    history [H] (newest first) → new history [amax, history[0 .. H-2]];
    the effective amax is the new history's maximum (`amax_algorithm` max)
    or `amax` itself (most_recent); the new scale is
    fp8_max(dtype) / (max(eff, eps) · 2^margin), rounded down to a power of
    two when the recipe asks. A non-finite effective amax keeps `scale`, so
    one overflowing step does not poison the state. H must equal the
    recipe's amax_history_len. `new_scale_inv` is 1 / new_scale rounded to
    f32, kept in state beside the scale: the dequantization factor the
    next step's FP8 GEMMs multiply by.

    Before: a delayed-scaled quantize reads its scale from state.
    ```mlir
    %s = graph.load @fp8.layers.0.mlp.w1.x.scale : tensor<f32>
    %q, %amax = fp8.quantize %x, %s : (tensor<16x64xbf16>, tensor<f32>) -> (tensor<16x64xf8E4M3FN>, tensor<f32>)
    ```
    After: the same step writes next step's history, scale and inverse.
    ```mlir
    %h = graph.load @fp8.layers.0.mlp.w1.x.amax_history : tensor<16xf32>
    %h2, %s2, %i2 = fp8.scale_update %h, %amax, %s {dtype = f8E4M3FN, recipe = #fp8.recipe<kind = delayed, amax_history_len = 16>} : (tensor<16xf32>, tensor<f32>, tensor<f32>) -> (tensor<16xf32>, tensor<f32>, tensor<f32>)
    graph.store %h2, @fp8.layers.0.mlp.w1.x.amax_history : tensor<16xf32>
    graph.store %s2, @fp8.layers.0.mlp.w1.x.scale : tensor<f32>
    graph.store %i2, @fp8.layers.0.mlp.w1.x.scale_inv : tensor<f32>
    ```
  }];
  let arguments = (ins TensorOf<[F32]>:$amax_history, ScalarF32:$amax,
                   ScalarF32:$scale, Fp8_RecipeAttr:$recipe, Fp8Type:$dtype,
                   DefaultValuedAttr<F32Attr, "1.0e-12">:$eps);
  let results = (outs TensorOf<[F32]>:$new_history, ScalarF32:$new_scale,
                      ScalarF32:$new_scale_inv);
  let assemblyFormat = "$amax_history `,` $amax `,` $scale attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Blockwise casts
//===----------------------------------------------------------------------===//

def Fp8_BlockQuantizeOp : Fp8_Op<"block_quantize", [Pure]> {
  let summary = "quantize a 2-D tensor with one FP32 scale per block";
  let description = [{
    `block` = [br, bc] tiles the input [R, C]; the scales are
    [ceil(R/br), ceil(C/bc)], each derived from its block's own amax as
    compute_scale does (edge blocks may be partial). Activations and
    gradients use 1×128 tiles along the GEMM's contraction dimension
    (128×1 on a tensor stored transposed), weights 128×128 blocks.

    Before:
    ```mlir
    %y = graph.linear %x, %w {param = "layers.0.mlp.w1"} : (tensor<16x256xbf16>, tensor<512x256xbf16>) -> tensor<16x512xbf16>
    ```
    After (blockwise recipe):
    ```mlir
    %qx, %sx = fp8.block_quantize %x {block = array<i64: 1, 128>, dtype = f8E4M3FN} : (tensor<16x256xbf16>) -> (tensor<16x256xf8E4M3FN>, tensor<16x2xf32>)
    %qw, %sw = fp8.block_quantize %w {block = array<i64: 128, 128>, dtype = f8E4M3FN} : (tensor<512x256xbf16>) -> (tensor<512x256xf8E4M3FN>, tensor<4x2xf32>)
    %y = fp8.matmul %qx, %sx, %qw, %sw {transpose_b, a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, role = "fprop", param = "layers.0.mlp.w1"} : (tensor<16x256xf8E4M3FN>, tensor<16x2xf32>, tensor<512x256xf8E4M3FN>, tensor<4x2xf32>) -> tensor<16x512xbf16>
    ```
  }];
  let arguments = (ins HighTensor:$input, DenseI64ArrayAttr:$block, Fp8Type:$dtype,
                   UnitAttr:$power_of_two,
                   DefaultValuedAttr<F32Attr, "1.0e-12">:$eps,
                   OptionalAttr<StrArrayAttr>:$amax_reduce);
  let results = (outs Fp8Tensor:$result, Fp8F32Tensor:$scales);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Fp8_BlockFactorsOp : Fp8_Op<"block_factors", [Pure]> {
  let summary = "a block-scaled GEMM operand's dequantization factors, in cuBLASLt's layout";
  let description = [{
    The scales [Rs, Ks] of an operand stored [R, K] (K-major) as the
    factors cuBLASLt multiplies by on sm_90 (bundle.proto GemmScaleMode):
    1 / scale, flat. `block` = [1, 128] (VEC128): [Ks, Rs], the Rs factors
    of one K tile contiguous. `block` = [128, 128] (BLK128x128): [Rs,
    ceil4(Ks)], the row stride rounded up to 4 factors, the padding 0.
    The quantize kernel that makes the scales writes these beside them
    (octet-fuse-block-factors), so that no launch runs between it and the
    GEMM.

    ```mlir
    %f = fp8.block_factors %s {block = array<i64: 1, 128>} : (tensor<16x2xf32>) -> tensor<32xf32>
    ```
  }];
  let arguments = (ins Fp8F32Tensor:$scales, DenseI64ArrayAttr:$block);
  let results = (outs Fp8F32Tensor:$factors);
  let assemblyFormat = "$scales attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // Factors for scales [rows, cols] in `block`'s layout, and the row
    // stride of that layout.
    static int64_t factorCount(int64_t rows, int64_t cols,
                               ::llvm::ArrayRef<int64_t> block);
    static int64_t factorStride(int64_t rows, int64_t cols,
                                ::llvm::ArrayRef<int64_t> block);
  }];
}

def Fp8_BlockDequantizeOp : Fp8_Op<"block_dequantize", [Pure]> {
  let summary = "widen a blockwise-quantized tensor, dividing each block by its scale";
  let description = [{
    ```mlir
    %x = fp8.block_dequantize %q, %s {block = array<i64: 1, 128>} : (tensor<16x256xf8E4M3FN>, tensor<16x2xf32>) -> tensor<16x256xbf16>
    ```
  }];
  let arguments = (ins Fp8Tensor:$input, Fp8F32Tensor:$scales, DenseI64ArrayAttr:$block);
  let results = (outs HighTensor:$result);
  let assemblyFormat = "$input `,` $scales attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// GEMM and layout
//===----------------------------------------------------------------------===//

def Fp8_MatmulOp : Fp8_Op<"matmul", [Pure]> {
  let summary = "scaled FP8 matrix product with a wide output";
  let description = [{
    op(a) [M, K] · op(b) [K, N] (+ bias [N]) → [M, N], computed as
    dequantize(a) · dequantize(b) with FP32 accumulation and one rounding to
    the result type. Scales are rank 0 (tensorwise) or, with `a_block` /
    `b_block`, one per block of the operand as stored. With
    `inverse_scales` (tensorwise only) the scale operands are the
    dequantization factors 1 / scale, rounded to f32 where the scales are
    made (fp8.compute_scale, fp8.scale_update), and the product is
    multiplied by their f32 product, as cuBLASLt applies its A and B scale
    pointers; octet-precision passes them so. `role` and `param`
    carry the GEMM's identity from the graph.matmul or graph.linear it
    replaces. E5M2 × E5M2 is rejected: Hopper has no such GEMM.

    Before (precision):
    ```mlir
    %y = graph.linear %x, %w {param = "layers.0.attn.wq"} : (tensor<16x64xbf16>, tensor<64x64xbf16>) -> tensor<16x64xbf16>
    ```
    After:
    ```mlir
    %qx, %ax = fp8.quantize %x, %sx : (tensor<16x64xbf16>, tensor<f32>) -> (tensor<16x64xf8E4M3FN>, tensor<f32>)
    %qw, %aw = fp8.quantize %w, %sw : (tensor<64x64xbf16>, tensor<f32>) -> (tensor<64x64xf8E4M3FN>, tensor<f32>)
    %y = fp8.matmul %qx, %ix, %qw, %iw {inverse_scales, transpose_b, role = "fprop", param = "layers.0.attn.wq"} : (tensor<16x64xf8E4M3FN>, tensor<f32>, tensor<64x64xf8E4M3FN>, tensor<f32>) -> tensor<16x64xbf16>
    ```
    (%ix, %iw: the scale_inv results beside %sx and %sw.)
  }];
  let arguments = (ins Fp8Tensor:$a, Fp8F32Tensor:$a_scale, Fp8Tensor:$b,
                   Fp8F32Tensor:$b_scale, Optional<HighTensor>:$bias,
                   UnitAttr:$transpose_a, UnitAttr:$transpose_b,
                   OptionalAttr<DenseI64ArrayAttr>:$a_block,
                   OptionalAttr<DenseI64ArrayAttr>:$b_block,
                   OptionalAttr<StrAttr>:$role, OptionalAttr<StrAttr>:$param,
                   UnitAttr:$inverse_scales);
  let results = (outs HighTensor:$result);
  let assemblyFormat = "$a `,` $a_scale `,` $b `,` $b_scale (`,` $bias^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Fp8_TransposeOp : Fp8_Op<"transpose", [Pure]> {
  let summary = "K-major copy of a quantized 2-D tensor, with its scales";
  let description = [{
    q [R, C] → [C, R]. Block scales transpose with the data and `block`
    swaps, so the copy dequantizes to the transpose of the original exactly;
    tensorwise scales (rank 0) pass through. The layout pass inserts these
    so every FP8 GEMM sees the TN form Hopper requires.

    Before (layout):
    ```mlir
    %dw = fp8.matmul %qdy, %sdy, %qx, %sx {transpose_a, role = "wgrad"} : (tensor<16x32xf8E5M2>, tensor<f32>, tensor<16x64xf8E4M3FN>, tensor<f32>) -> tensor<32x64xf32>
    ```
    After:
    ```mlir
    %qdyT, %sdyT = fp8.transpose %qdy, %sdy : (tensor<16x32xf8E5M2>, tensor<f32>) -> (tensor<32x16xf8E5M2>, tensor<f32>)
    %qxT, %sxT = fp8.transpose %qx, %sx : (tensor<16x64xf8E4M3FN>, tensor<f32>) -> (tensor<64x16xf8E4M3FN>, tensor<f32>)
    %dw = fp8.matmul %qdyT, %sdyT, %qxT, %sxT {transpose_b, role = "wgrad"} : (tensor<32x16xf8E5M2>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>) -> tensor<32x64xf32>
    ```
  }];
  let arguments = (ins Fp8Tensor:$input, Fp8F32Tensor:$scale,
                   OptionalAttr<DenseI64ArrayAttr>:$block);
  let results = (outs Fp8Tensor:$result, Fp8F32Tensor:$result_scale);
  let assemblyFormat = "$input `,` $scale attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif
