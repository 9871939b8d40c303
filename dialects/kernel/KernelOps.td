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

def Kernel_FusedOp : Kernel_Op<"fused", [Pure, IsolatedFromAbove,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "whole-tensor graph and fp8 ops that run as one GPU kernel";
  let description = [{
    The body is ordinary graph and fp8 ops on whole tensors, so the reference
    interpreter runs it unchanged; codegen turns it into one launch (two where
    a column reduction needs a finishing pass). Block arguments are the
    operands, in order; `kernel.yield` returns the results.

    `kind` says how the work is spread over the GPU:
    - `row`: one block per row (a token); row reductions (norms) stay in the
      block, whole-tensor reductions (amax) take one atomic per block.
    - `elementwise`: no reductions along a row; rows are regrouped freely.
    - `multi_tensor`: independent groups of ops over tensors of different
      shapes (the AdamW update of every parameter) in one launch.

    Codegen (octet-fused-to-gpu) records the kernels it built in `kernels`,
    and the launch shape and the scratch bytes the runtime provides.

    ```mlir
    %h, %q, %amax = kernel.fused "layers.0.attn_norm" kind("row")
        ins(%x, %r, %w, %s : tensor<8x4096xbf16>, tensor<8x4096xbf16>,
            tensor<4096xbf16>, tensor<f32>) {
    ^bb0(%a: tensor<8x4096xbf16>, %b: tensor<8x4096xbf16>,
         %c: tensor<4096xbf16>, %d: tensor<f32>):
      %sum = graph.add %a, %b : tensor<8x4096xbf16>
      %n = graph.rms_norm %sum, %c {eps = 1.0e-5 : f64} : (tensor<8x4096xbf16>, tensor<4096xbf16>) -> tensor<8x4096xbf16>
      %q8, %m = fp8.quantize %n, %d : (tensor<8x4096xbf16>, tensor<f32>) -> (tensor<8x4096xf8E4M3FN>, tensor<f32>)
      kernel.yield %sum, %q8, %m : tensor<8x4096xbf16>, tensor<8x4096xf8E4M3FN>, tensor<f32>
    } : tensor<8x4096xbf16>, tensor<8x4096xf8E4M3FN>, tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, StrAttr:$name,
                   StrAttr:$kind,
                   OptionalAttr<SymbolRefArrayAttr>:$kernels);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $name `kind` `(` $kind `)` (`ins` `(` $inputs^ `:` type($inputs) `)`)?
    $body attr-dict `:` type($results)
  }];
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    // Creates the body block with one argument per input and no terminator.
    OpBuilder<(ins "::mlir::TypeRange":$resultTypes, "::mlir::ValueRange":$inputs,
                   "::llvm::StringRef":$name, "::llvm::StringRef":$kind)>
  ];
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
  }];
}

def Kernel_YieldOp : Kernel_Op<"yield", [Pure, Terminator,
    HasParent<"FusedOp">]> {
  let summary = "results of a kernel.fused body";
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{ /* no values */ }]>];
}

#endif
