#ifndef OCTET_FP8_OPS_TD
#define OCTET_FP8_OPS_TD

include "mlir/IR/OpBase.td"
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
  }];
}

class Fp8_Op<string mnemonic, list<Trait> traits = []>
    : Op<Fp8_Dialect, mnemonic, traits>;

defvar Fp8Tensor = TensorOf<[F8E4M3FN, F8E5M2]>;
defvar HighTensor = TensorOf<[F32, BF16, F16]>;
defvar ScalarF32 = 0DTensorOf<[F32]>;

def Fp8_QuantizeOp : Fp8_Op<"quantize", [Pure]> {
  let summary = "scale, cast to FP8 with saturation, and report the input's amax";
  let description = [{
    ```mlir
    %q, %amax = fp8.quantize %x, %scale : (tensor<16x64xbf16>, tensor<f32>) -> (tensor<16x64xf8E4M3FN>, tensor<f32>)
    ```
  }];
  let arguments = (ins HighTensor:$input, ScalarF32:$scale);
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
    ```mlir
    %m = fp8.amax %x : (tensor<16x64xbf16>) -> tensor<f32>
    ```
  }];
  let arguments = (ins HighTensor:$input);
  let results = (outs ScalarF32:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

#endif
