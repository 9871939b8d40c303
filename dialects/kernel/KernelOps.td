#ifndef OCTET_KERNEL_OPS_TD
#define OCTET_KERNEL_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Kernel_Dialect : Dialect {
  let name = "kernel";
  let cppNamespace = "::octet::kernel";
  let summary = "What the runtime executes: GEMM calls, attention, fused kernels, collectives";
}

class Kernel_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kernel_Dialect, mnemonic, traits>;

defvar GemmOperand = TensorOf<[F32, BF16, F16, F8E4M3FN, F8E5M2]>;

def Kernel_GemmOp : Kernel_Op<"gemm", [Pure, AttrSizedOperandSegments]> {
  let summary = "one cuBLASLt matrix product: D = op(A) · op(B) with optional scales";
  let description = [{
    op(a) [M, K] · op(b) [K, N] → [M, N]. FP8 operands carry their scales
    (a_scale, b_scale are the quantize scales: the product is divided by
    both). `role` (fprop, dgrad, wgrad) and `param` keep the GEMM's identity
    for reports and the precision policy. `flops` is 2·M·N·K.
    ```mlir
    %d = kernel.gemm %a, %b scales(%sa, %sb) {transpose_b, role = "fprop", param = "layers.0.mlp.w1"} : (tensor<16x64xf8E4M3FN>, tensor<128x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x128xbf16>
    ```
  }];
  let arguments = (ins GemmOperand:$a, GemmOperand:$b,
                   Optional<0DTensorOf<[F32]>>:$a_scale,
                   Optional<0DTensorOf<[F32]>>:$b_scale,
                   UnitAttr:$transpose_a, UnitAttr:$transpose_b,
                   OptionalAttr<StrAttr>:$role, OptionalAttr<StrAttr>:$param);
  let results = (outs TensorOf<[F32, BF16, F16]>:$result);
  let assemblyFormat = [{
    $a `,` $b (`scales` `(` $a_scale^ `,` $b_scale `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getFlops();
  }];
}

def Kernel_CopyOp : Kernel_Op<"copy", [Pure]> {
  let summary = "device-to-device copy, optionally transposing a 2-D tensor";
  let description = [{
    ```mlir
    %t = kernel.copy %x {transpose} : (tensor<16x64xf8E4M3FN>) -> tensor<64x16xf8E4M3FN>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, UnitAttr:$transpose);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif
