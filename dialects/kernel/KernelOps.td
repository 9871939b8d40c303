#ifndef OCTET_KERNEL_OPS_TD
#define OCTET_KERNEL_OPS_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Kernel_Dialect : Dialect {
  let name = "kernel";
  let cppNamespace = "::octet::kernel";
  let summary = "What the runtime executes: GEMM calls, attention, fused kernels, collectives";
  let useDefaultAttributePrinterParser = 1;
}

def Kernel_LaunchAttr : AttrDef<Kernel_Dialect, "Launch"> {
  let mnemonic = "launch";
  let summary = "one launch of a kernel that codegen generated";
  let description = [{
    `kernel` is `@module::@function` of a gpu.module that codegen built;
    the launch runs `grid` blocks of `block` threads (x only), with
    `shared_bytes` of dynamic shared memory (0: none; past 48 KiB the
    runtime raises the kernel's limit), in thread block clusters of
    `cluster` blocks along x (1: none). `programmatic`: the launch may be
    scheduled while the launch before it still runs (programmatic stream
    serialization); its kernel waits for that launch (griddepcontrol.wait)
    before it reads anything. Fields at their default are not printed.

    ```mlir
    #kernel.launch<@norm_bwd::@norm_bwd_colsum, grid = 8, block = 256, programmatic>
    #kernel.launch<@nqt::@nqt, grid = 4, block = 1024, shared_bytes = 205352, cluster = 2>
    ```

    Verified: grid at least 1 (at most 2^31 - 1), block 1 to 1024,
    shared_bytes 0 to 227 KiB (sm_90), cluster 1 to 8 (the portable
    cluster size) and a divisor of grid.
  }];
  let parameters = (ins
    "::mlir::SymbolRefAttr":$kernel,
    "int64_t":$grid,
    "int64_t":$block,
    DefaultValuedParameter<"int64_t", "0">:$shared_bytes,
    DefaultValuedParameter<"int64_t", "1">:$cluster,
    DefaultValuedParameter<"bool", "false">:$programmatic);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Kernel_LaunchArrayAttr
    : TypedArrayAttrBase<Kernel_LaunchAttr, "kernel launches, in order">;

def Kernel_LaunchedOpInterface : OpInterface<"LaunchedOpInterface"> {
  let cppNamespace = "::octet::kernel";
  let description = [{
    An op that codegen lowers to launches of generated kernels (kernel.fused,
    attention). Codegen records the launch contract on it, the runtime's
    whole view of the op:
    - `kernels`: the kernels built, in launch order;
    - `launch`: the launches (#kernel.launch), run in order on one stream
      with the same arguments: a pointer per operand, per result, then an
      f32 workspace when `workspace_bytes` > 0; with `arg_table`, one
      pointer to a device table of those operand and result addresses
      (8 bytes each, in that order) instead of them, then the workspace;
    - `workspace_bytes`: the scratch the runtime provides (a multiple of 4);
    - `zero_results`: the results the kernels accumulate into with atomics
      (amax), which the runtime zeroes before the first launch;
    - `arg_table`: the launches take the argument table above. A kernel of
      hundreds of tensors (a model's optimizer step, its FP8 scale
      updates) would pass more parameters than a launch holds (32764
      bytes, PTX), and its tensors of the same kind share one piece of
      code that looks their addresses up.
    An op without `launch` has no code (codegen refused it, or did not run).
  }];
  let methods = [
    InterfaceMethod<"The kernels built, in launch order (null before codegen).",
      "::mlir::ArrayAttr", "getKernelsAttr">,
    InterfaceMethod<"The launches, #kernel.launch each (null before codegen).",
      "::mlir::ArrayAttr", "getLaunchAttr">,
    InterfaceMethod<"The workspace bytes, when set.",
      "::mlir::IntegerAttr", "getWorkspaceBytesAttr">,
    InterfaceMethod<"The results zeroed before the first launch, when set.",
      "::mlir::DenseI64ArrayAttr", "getZeroResultsAttr">,
    InterfaceMethod<"", "void", "setKernelsAttr",
      (ins "::mlir::ArrayAttr":$kernels)>,
    InterfaceMethod<"", "void", "setLaunchAttr",
      (ins "::mlir::ArrayAttr":$launches)>,
    InterfaceMethod<"", "void", "setWorkspaceBytesAttr",
      (ins "::mlir::IntegerAttr":$bytes)>,
    InterfaceMethod<"", "void", "setZeroResultsAttr",
      (ins "::mlir::DenseI64ArrayAttr":$results)>,
    InterfaceMethod<"Whether the launches take the argument table.",
      "bool", "getArgTable">,
    InterfaceMethod<"", "void", "setArgTable", (ins "bool":$table)>
  ];
  let extraSharedClassDeclaration = [{
    // Whether codegen gave the op code.
    bool hasLaunches() { return bool($_op.getLaunchAttr()); }
    // The launches, in order (none before codegen).
    auto getLaunches() {
      ::mlir::ArrayAttr launches = $_op.getLaunchAttr();
      return (launches ? launches : ::mlir::ArrayAttr::get($_op->getContext(), {}))
          .template getAsRange<::octet::kernel::LaunchAttr>();
    }
    // The workspace bytes (0 when unset).
    int64_t getWorkspaceBytesOrZero() {
      ::mlir::IntegerAttr bytes = $_op.getWorkspaceBytesAttr();
      return bytes ? bytes.getInt() : 0;
    }
    // The results zeroed before the first launch (none when unset).
    ::llvm::ArrayRef<int64_t> getZeroedResults() {
      ::mlir::DenseI64ArrayAttr zeroed = $_op.getZeroResultsAttr();
      return zeroed ? zeroed.asArrayRef() : ::llvm::ArrayRef<int64_t>();
    }
  }];
  let verify = [{ return ::octet::kernel::verifyLaunchContract($_op); }];
}

// The launch contract's attributes (LaunchedOpInterface), on every op that
// implements it.
defvar LaunchContract = (ins
    OptionalAttr<SymbolRefArrayAttr>:$kernels,
    OptionalAttr<Kernel_LaunchArrayAttr>:$launch,
    OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$workspace_bytes,
    OptionalAttr<DenseI64ArrayAttr>:$zero_results,
    UnitAttr:$arg_table);

class Kernel_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kernel_Dialect, mnemonic, traits>;

defvar GemmOperand = TensorOf<[F32, BF16, F16, F8E4M3FN, F8E5M2]>;

def Kernel_GemmOp : Kernel_Op<"gemm", [Pure, AttrSizedOperandSegments]> {
  let summary = "one cuBLASLt matrix product: D = op(A) · op(B) with optional scales";
  let description = [{
    op(a) [M, K] · op(b) [K, N] → [M, N]. Tensorwise FP8 operands carry
    their dequantization factors, `scales_inv(a_scale_inv, b_scale_inv)`:
    1 / scale of each operand's quantize scale, rank 0; the product is
    multiplied by their f32 product, which is what cuBLASLt does with its A
    and B scale pointers (each points at its factor, no kernel combines
    them first). `role` (fprop, dgrad, wgrad) and `param` keep the GEMM's
    identity for reports and the precision policy. `flops` is 2·M·N·K.
    ```mlir
    %d = kernel.gemm %a, %b scales_inv(%ia, %ib) {transpose_b, role = "fprop", param = "layers.0.mlp.w1"} : (tensor<16x64xf8E4M3FN>, tensor<128x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x128xbf16>
    ```

    Block-scaled FP8 (the blockwise recipe): with `a_block` / `b_block`,
    `scales(a_scale, b_scale)` give each operand one f32 per block of the
    operand as stored, in
    the fp8 dialect's layout (`fp8.block_quantize`: [rows / br, cols / bc],
    row-major, the quantize scales), and each block is divided by its own
    scale before the product. cuBLASLt on sm_90 multiplies 1×128 tiles
    along K (VEC128_32F) or 128×128 blocks (BLK128x128_32F) only, K-major
    (transpose_b, not transpose_a), every dimension a multiple of 128, not
    both operands in 128×128 blocks, no epilogue but accumulation:
    ```mlir
    %d = kernel.gemm %x, %w scales(%sx, %sw) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, transpose_b, role = "fprop"} : (tensor<256x512xf8E4M3FN>, tensor<384x512xf8E4M3FN>, tensor<256x4xf32>, tensor<3x4xf32>) -> tensor<256x384xbf16>
    ```
    The scales may instead be both operands' dequantization factors as
    cuBLASLt reads them (rank 1, fp8.block_factors, which the quantize
    kernels write: octet-fuse-block-factors); each block is then
    multiplied by its factor, and the bundle runs no kernel before the
    call:
    ```mlir
    %d = kernel.gemm %x, %w scales(%fx, %fw) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, transpose_b, role = "fprop"} : (tensor<256x512xf8E4M3FN>, tensor<384x512xf8E4M3FN>, tensor<1024xf32>, tensor<12xf32>) -> tensor<256x384xbf16>
    ```

    The cuBLASLt epilogue, applied to P = op(a)·op(b) (scaled) before the
    single rounding to the result type:
    - `accumulate(%c)`: D = P + C (beta = 1), C of the result's shape.
      Gradient accumulation into a wgrad accumulator rides on it.
    - `bias(%bias)` with epilogue `bias`: D = P + bias[N] (per column).
    - epilogue `gelu` (with or without bias): D = gelu(P [+ bias]), tanh form.
    - epilogue `gelu_aux`: as gelu, and the pre-activation is the one aux
      result (what the backward's gelu_grad reads).
    - epilogue `bias_grad`: D = P, and aux = Σ over the contraction
      dimension of op(a), shape [M]: the bias gradient of a wgrad GEMM
      whose op(a) is dyᵀ.

    Before (octet-fuse-epilogue):
    ```mlir
    %y = kernel.gemm %x, %w bias(%b) {transpose_b, epilogue = "bias"} : (tensor<16x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<16x128xf32>
    %g = kernel.fused "gelu" kind("elementwise") ins(%y : tensor<16x128xf32>) { ... graph.gelu ... }
    ```
    After:
    ```mlir
    %g, %pre = kernel.gemm %x, %w bias(%b) {transpose_b, epilogue = "gelu_aux"} : (tensor<16x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> (tensor<16x128xf32>, tensor<16x128xf32>)
    ```
  }];
  let arguments = (ins GemmOperand:$a, GemmOperand:$b,
                   Optional<TensorOf<[F32]>>:$a_scale,
                   Optional<TensorOf<[F32]>>:$b_scale,
                   Optional<0DTensorOf<[F32]>>:$a_scale_inv,
                   Optional<0DTensorOf<[F32]>>:$b_scale_inv,
                   Optional<TensorOf<[F32, BF16, F16]>>:$bias,
                   Optional<TensorOf<[F32, BF16, F16]>>:$c,
                   UnitAttr:$transpose_a, UnitAttr:$transpose_b,
                   OptionalAttr<StrAttr>:$role, OptionalAttr<StrAttr>:$param,
                   OptionalAttr<StrAttr>:$epilogue,
                   OptionalAttr<DenseI64ArrayAttr>:$a_block,
                   OptionalAttr<DenseI64ArrayAttr>:$b_block);
  let results = (outs TensorOf<[F32, BF16, F16]>:$result,
                      Variadic<TensorOf<[F32, BF16, F16]>>:$aux);
  let assemblyFormat = [{
    $a `,` $b (`scales` `(` $a_scale^ `,` $b_scale `)`)?
    (`scales_inv` `(` $a_scale_inv^ `,` $b_scale_inv `)`)? (`bias` `(` $bias^ `)`)?
    (`accumulate` `(` $c^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getFlops();
    ::mlir::LogicalResult verifyBlockScales(int64_t m, int64_t n, int64_t k);
    // The f32 dequantization factors cuBLASLt reads for operand a (or b)
    // of a block-scaled GEMM, in its layout (bundle.proto GemmScaleMode):
    // [K/128, R] for 1x128 tiles, [R/128, ceil4(K/128)] for 128x128
    // blocks, of the operand stored [R, K]; 0 without block scales.
    int64_t getDequantFactorCount(bool operandB);
    // The row stride of those factors: R for 1x128 tiles, ceil4(K/128)
    // for 128x128 blocks.
    int64_t getDequantFactorStride(bool operandB);
    // The epilogue's name, "none" when unset.
    ::llvm::StringRef getEpilogueKind() {
      return getEpilogue() ? *getEpilogue() : ::llvm::StringRef("none");
    }
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
    SingleBlockImplicitTerminator<"YieldOp">,
    Kernel_LaunchedOpInterface]> {
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

    Codegen (octet-fused-to-gpu) records the launch contract
    (LaunchedOpInterface): the kernels it built, their launches, the scratch
    bytes the runtime provides and the results it zeroes first.

    `overwrites` (one entry per result: an input's index, or -1) writes a
    result over the bytes of an input that nothing reads afterwards, so the
    two need one buffer (octet-overwrite-logits: the cross-entropy
    gradient over the logits). Codegen accepts it only where its lowering
    reads each element before it writes it, and the memory plan refuses it
    when a later op reads the input.

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
  let arguments = !con((ins Variadic<AnyRankedTensor>:$inputs, StrAttr:$name,
                        StrAttr:$kind,
                        OptionalAttr<DenseI64ArrayAttr>:$overwrites),
                       LaunchContract);
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
    // Whether the body only yields one zero-filled tensor and only
    // graph.store reads it (cleared gradient accumulators): the stores are
    // memsets of the variables, and the kernel never runs.
    bool isStoredZeroFill();
  }];
}

def Kernel_YieldOp : Kernel_Op<"yield", [Pure, Terminator,
    HasParent<"FusedOp">]> {
  let summary = "results of a kernel.fused body";
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{ /* no values */ }]>];
}

def Kernel_AttentionFwdOp : Kernel_Op<"attention_fwd", [Pure,
    Kernel_LaunchedOpInterface]> {
  let summary = "flash-attention forward: output and row log-sum-exp";
  let description = [{
    The generated flash-attention kernel; semantics are graph.attention's
    (causal, GQA, document masks from `cu_seqlens`). `layer` names the
    transformer layer for reports.

    Before (octet-lower-to-kernel):
    ```mlir
    %o, %lse = graph.attention %q, %k, %v {causal, scale = 0.125 : f64} : (tensor<1x8x4x64xbf16>, tensor<1x8x2x64xbf16>, tensor<1x8x2x64xbf16>) -> (tensor<1x8x4x64xbf16>, tensor<1x4x8xf32>)
    ```
    After:
    ```mlir
    %o, %lse = kernel.attention_fwd %q, %k, %v {causal, scale = 0.125 : f64, layer = 0 : i64} : (tensor<1x8x4x64xbf16>, tensor<1x8x2x64xbf16>, tensor<1x8x2x64xbf16>) -> (tensor<1x8x4x64xbf16>, tensor<1x4x8xf32>)
    ```
  }];
  let arguments = !con((ins TensorOf<[F32, BF16, F16]>:$q,
                        TensorOf<[F32, BF16, F16]>:$k,
                        TensorOf<[F32, BF16, F16]>:$v,
                        Optional<TensorOf<[I32]>>:$cu_seqlens, UnitAttr:$causal,
                        F64Attr:$scale), LaunchContract);
  let results = (outs TensorOf<[F32, BF16, F16]>:$result, TensorOf<[F32]>:$lse);
  let assemblyFormat = "$q `,` $k `,` $v (`,` $cu_seqlens^)? attr-dict `:` functional-type(operands, results)";
  let builders = [
    // Before codegen: no launch contract yet.
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Type":$lse,
                   "::mlir::Value":$q, "::mlir::Value":$k, "::mlir::Value":$v,
                   "::mlir::Value":$cu_seqlens, "::mlir::UnitAttr":$causal,
                   "::mlir::FloatAttr":$scale), [{
      build($_builder, $_state, result, lse, q, k, v, cu_seqlens, causal,
            scale, /*kernels=*/nullptr, /*launch=*/nullptr,
            /*workspace_bytes=*/nullptr, /*zero_results=*/nullptr);
    }]>
  ];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // 4·B·Hq·S²·Dh, halved when causal.
    int64_t getFlops();
  }];
}

def Kernel_AttentionBwdOp : Kernel_Op<"attention_bwd", [Pure,
    Kernel_LaunchedOpInterface]> {
  let summary = "flash-attention backward: dq, dk, dv from the saved output and lse";
  let description = [{
    Semantics are graph.attention_grad's.
    ```mlir
    %dq, %dk, %dv = kernel.attention_bwd %do, %q, %k, %v, %o, %lse {causal, scale = 0.125 : f64} : (tensor<1x8x4x64xbf16>, tensor<1x8x4x64xbf16>, tensor<1x8x2x64xbf16>, tensor<1x8x2x64xbf16>, tensor<1x8x4x64xbf16>, tensor<1x4x8xf32>) -> (tensor<1x8x4x64xbf16>, tensor<1x8x2x64xbf16>, tensor<1x8x2x64xbf16>)
    ```
  }];
  let arguments = !con((ins TensorOf<[F32, BF16, F16]>:$grad,
                        TensorOf<[F32, BF16, F16]>:$q,
                        TensorOf<[F32, BF16, F16]>:$k,
                        TensorOf<[F32, BF16, F16]>:$v,
                        TensorOf<[F32, BF16, F16]>:$out, TensorOf<[F32]>:$lse,
                        Optional<TensorOf<[I32]>>:$cu_seqlens, UnitAttr:$causal,
                        F64Attr:$scale), LaunchContract);
  let results = (outs TensorOf<[F32, BF16, F16]>:$q_grad,
                      TensorOf<[F32, BF16, F16]>:$k_grad,
                      TensorOf<[F32, BF16, F16]>:$v_grad);
  let assemblyFormat = "$grad `,` $q `,` $k `,` $v `,` $out `,` $lse (`,` $cu_seqlens^)? attr-dict `:` functional-type(operands, results)";
  let builders = [
    // Before codegen: no launch contract yet.
    OpBuilder<(ins "::mlir::Type":$q_grad, "::mlir::Type":$k_grad,
                   "::mlir::Type":$v_grad, "::mlir::Value":$grad,
                   "::mlir::Value":$q, "::mlir::Value":$k, "::mlir::Value":$v,
                   "::mlir::Value":$out, "::mlir::Value":$lse,
                   "::mlir::Value":$cu_seqlens, "::mlir::UnitAttr":$causal,
                   "::mlir::FloatAttr":$scale), [{
      build($_builder, $_state, q_grad, k_grad, v_grad, grad, q, k, v, out,
            lse, cu_seqlens, causal, scale, /*kernels=*/nullptr,
            /*launch=*/nullptr, /*workspace_bytes=*/nullptr,
            /*zero_results=*/nullptr);
    }]>
  ];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The recomputed scores, dV, dP, dS·K and dSᵀ·Q: 2.5× the forward's.
    int64_t getFlops();
  }];
}

def Kernel_CollectiveOp : Kernel_Op<"collective", []> {
  let summary = "an NCCL collective over a parallel group, bucketed over several tensors";
  let description = [{
    `kind` is all_reduce, reduce_scatter or all_gather; `group` names the
    parallel group (data, tensor, pipeline) and `group_size` its ranks;
    `reduction` is sum, avg or max. Each operand is one tensor of the bucket
    (one NCCL call over a contiguous buffer); result i belongs to operand i:
    all_reduce keeps the shape, reduce_scatter divides dimension 0 by the
    group size, all_gather multiplies it. A group of size 1 is the identity.

    `last_microbatch`: the collective runs only in the microbatch that
    completes the step's gradient accumulation; in the others its results
    are its inputs (the gradient sums of a step are reduced once).
    `comm_stream`: the bundle issues it on the communication stream, after
    an event of the kernel that made its last input, so compute goes on
    while it runs; the program's end joins the streams.
    `in_place` (reduce_scatter only): each result keeps its operand's shape
    and buffer; this rank's part of dimension 0 (kernel.rank_part) holds the
    reduction and the other parts keep this rank's own values, as NCCL
    leaves an in-place reduce-scatter's send buffer. Only the rank's part
    may be read afterwards (octet-shard-optimizer reads nothing else).
    `in_place` on an all_gather: each operand is written in this rank's
    part of dimension 0 of its result's buffer (the memory plan places it
    there), so NCCL gathers with sendbuff = recvbuff + rank × the part's
    bytes and nothing else holds the part (octet-shard-optimizer's gathers
    of the updated parameters: the AdamW kernel writes the rank's part of
    the parameter's slot).

    Example (octet-reduce-gradients, data=8): a gradient bucket summed while
    the backward goes on.
    ```mlir
    %g = kernel.collective %g0 {comm_stream, group = "data", group_size = 8 : i64, kind = "all_reduce", last_microbatch, reduction = "sum"} : (tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, StrAttr:$kind,
                   StrAttr:$group, I64Attr:$group_size,
                   DefaultValuedAttr<StrAttr, "\"sum\"">:$reduction,
                   UnitAttr:$last_microbatch, UnitAttr:$comm_stream,
                   UnitAttr:$in_place);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kernel_RankPartOp : Kernel_Op<"rank_part", [Pure]> {
  let summary = "this rank's part of dimension 0 of a tensor";
  let description = [{
    Dimension 0 of the operand cut into `group_size` equal parts; the result
    is the part of this rank's index in `group` (a view: on the GPU, the
    operand's buffer at index × the part's bytes). The sharded optimizer
    (octet-shard-optimizer) reads its parameters' and gradients' shards so.
    ```mlir
    %shard = kernel.rank_part %w {group = "data", group_size = 2 : i64} : tensor<64x16xf32> -> tensor<32x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, StrAttr:$group,
                   I64Attr:$group_size);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

#endif
