#ifndef OCTET_CODEGEN_PASSES_TD
#define OCTET_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def FusedToGpu : Pass<"octet-fused-to-gpu", "mlir::ModuleOp"> {
  let summary = "build one gpu.func kernel per kernel.fused region";
  let description = [{
    Every `kernel.fused` op gets a `gpu.module` holding its kernel, built from
    scf/arith/vector/math/gpu ops with shapes fixed at compile time. The
    region stays (it is still what the interpreter runs); the op gains its
    launch contract (kernel::LaunchedOpInterface): `kernels`, a `launch` list
    of `#kernel.launch` (grid, block per kernel), `workspace_bytes` and
    `zero_results` (amax results accumulated with atomics: the caller zeroes
    them before the launch).

    Each thread keeps 8-element vectors of a row in registers (16-byte loads
    for bf16), row sums and maxima go through warp shuffles and one shared
    memory exchange, a whole-tensor amax costs one atomic per block, and
    column sums (weight gradients of norms) go to per-block partial rows that
    a second kernel adds up in a fixed order.

    Before:
    ```mlir
    %y = kernel.fused "act" kind("row") ins(%x : tensor<4x256xbf16>) {
    ^bb0(%a: tensor<4x256xbf16>):
      %s = graph.silu %a : tensor<4x256xbf16>
      kernel.yield %s : tensor<4x256xbf16>
    } : tensor<4x256xbf16>
    ```
    After (abridged):
    ```mlir
    module attributes {gpu.container_module} {
      gpu.module @act {
        gpu.func @act(%arg0: memref<1024xbf16, 1>, %arg1: memref<1024xbf16, 1>)
            workgroup(%red: memref<32xf32, 3>) kernel { ... }
      }
      // kernel.fused "act" gains kernels = [@act::@act] and
      // launch = [#kernel.launch<@act::@act, grid = 4, block = 32>].
    }
    ```
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect",
                           "mlir::arith::ArithDialect", "mlir::math::MathDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::vector::VectorDialect",
                           "mlir::LLVM::LLVMDialect", "mlir::NVVM::NVVMDialect"];
  let options = [
    Option<"numSMs", "num-sms", "int64_t", "132",
           "multiprocessors of the target GPU (sizes grids that loop over rows)">,
    Option<"columnBlocksPerSM", "column-blocks-per-sm", "int64_t", "2",
           "blocks per multiprocessor for kernels that sum columns">,
    Option<"hopperBackward", "hopper-backward", "bool", "false",
           "backward ops the Hopper kernel covers get it between the prep "
           "and `_dq` kernels (wgmma, TMA, warp-specialised, dQ added by "
           "bulk reductions; tensor maps recorded in `tensor_maps` for the "
           "main launch); the others keep the mma.sync kernel. Spec "
           "train.codegen.attention_backward: \"hopper\"">,
    Option<"keepGoing", "keep-going", "bool", "false",
           "report a region that cannot be lowered and go on with the others "
           "(the pass still succeeds; such regions get no `launch`)">,
    Option<"rowBytesInFlight", "row-bytes-in-flight", "int64_t", "128",
           "bytes of row inputs a thread loads at once in row kernels "
           "(2 to 8 chunks a thread; half that in blocks looping over rows)">,
    Option<"rowBlocksPerSM", "row-blocks-per-sm", "int64_t", "0",
           "persistent row kernels: this many blocks per multiprocessor "
           "loop over the rows, prefetching the next (0: a block per row)">,
    Option<"multiTensorBlocksPerSM", "multi-tensor-blocks-per-sm", "int64_t",
           "2",
           "multi-tensor kernels (AdamW): this many blocks per multiprocessor "
           "loop over each tensor's slices, prefetching the next (0: a block "
           "per slice)">,
    Option<"flatBlocksPerSM", "flat-blocks-per-sm", "int64_t", "0",
           "the same for the other elementwise kernels over flattened "
           "tensors">,
    Option<"flatChunks", "flat-chunks", "int64_t", "0",
           "8-element chunks a thread holds per flattened tensor slice "
           "(0: 1 where blocks loop, else 2, or 4 for one narrow input)">,
    Option<"transposeTileRows", "transpose-tile-rows", "int64_t", "0",
           "FP8 transposes of a row kernel's results: rows a block takes at "
           "a time to write them itself (a multiple of 8; 0: a launch of "
           "their own after the row kernel, which measured faster)">,
    Option<"clusterNormTranspose", "cluster-norm-transpose", "bool", "true",
           "RMSNorm + FP8 quantize + transpose regions as one launch of "
           "2-block clusters that hand each other the FP8 bytes through "
           "distributed shared memory (sm_90; false: a row kernel and a "
           "transpose launch)">,
  ];
}

def AttentionToGpu : Pass<"octet-attention-to-gpu", "mlir::ModuleOp"> {
  let summary = "flash-attention kernels for kernel.attention_fwd / kernel.attention_bwd";
  let description = [{
    Every attention op gets a `gpu.module` of bf16 tensor-core kernels
    (mma.sync m16n8k16 with f32 accumulation, ldmatrix from swizzled shared
    memory, cp.async copies) specialised to its shapes, causality, scale and
    cu_seqlens length; ops with the same signature share one module. The op
    keeps its semantics (the interpreter still runs it) and gains `kernels`,
    `launch` (a `#kernel.launch` per kernel: 1-D `grid`, `block`, dynamic
    `shared_bytes`) and `workspace_bytes`. Arguments of every launch, in
    order: the op's operands, its results, then the workspace when
    `workspace_bytes` > 0.

    Forward: a CTA per (query tile, query head, batch row), online softmax
    in registers in the exp2 domain with the scale folded in, K and V tiles
    alternating through cp.async so that one loads while the other is used.
    Backward: `_prep` (D = rowsum(dO∘O), zeroes the f32 dQ accumulator,
    document bounds per token), the main kernel (a CTA per key tile and kv
    head: dK, dV in registers over every query tile of the group's heads, dQ
    through f32 atomics) and `_dq` (accumulator · scale → bf16).

    Before:
    ```mlir
    %o, %lse = kernel.attention_fwd %q, %k, %v {causal, scale = 0.125 : f64} : (tensor<1x128x4x64xbf16>, tensor<1x128x2x64xbf16>, tensor<1x128x2x64xbf16>) -> (tensor<1x128x4x64xbf16>, tensor<1x4x128xf32>)
    ```
    After (abridged):
    ```mlir
    gpu.module @attention_fwd_0 { gpu.func @attention_fwd_0(%q: !llvm.ptr<1>, ...) kernel { ... nvvm.mma.sync ... } }
    // kernel.attention_fwd gains kernels = [@attention_fwd_0::@attention_fwd_0],
    // workspace_bytes = 0 and a launch list: grid = 4, block = 128,
    // shared_bytes = 32768 for that kernel.
    ```
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect",
                           "mlir::arith::ArithDialect", "mlir::math::MathDialect",
                           "mlir::NVVM::NVVMDialect", "mlir::LLVM::LLVMDialect",
                           "mlir::vector::VectorDialect"];
  let options = [
    Option<"fwdWarps", "fwd-warps", "int64_t", "4", "warps per forward CTA">,
    Option<"fwdMTiles", "fwd-m-tiles", "int64_t", "2",
           "16-row MMA tiles per forward warp (query tile = 16 · warps · m-tiles)">,
    Option<"bwdWarps", "bwd-warps", "int64_t", "4",
           "warps per backward CTA (16 key rows each; query tile of as many rows)">,
    Option<"hopperForward", "hopper-forward", "bool", "false",
           "forward ops the Hopper kernel covers get it (wgmma, TMA, "
           "warp-specialised; tensor maps as grid constants, recorded in "
           "`tensor_maps`); the others keep the mma.sync kernel. The codegen "
           "pipeline turns it on for sm_90a (spec "
           "train.codegen.attention_forward)">,
    Option<"hopperBackward", "hopper-backward", "bool", "false",
           "backward ops the Hopper kernel covers get it between the prep "
           "and `_dq` kernels (wgmma, TMA, warp-specialised, dQ added by "
           "bulk reductions; tensor maps recorded in `tensor_maps` for the "
           "main launch); the others keep the mma.sync kernel. Spec "
           "train.codegen.attention_backward: \"hopper\"">,
    Option<"keepGoing", "keep-going", "bool", "false",
           "report an op that cannot be lowered and go on with the others "
           "(the pass still succeeds; such ops get no `launch`)">,
  ];
}

def LowerFp8Casts : Pass<"octet-lower-fp8-casts", "mlir::gpu::GPUModuleOp"> {
  let summary = "lower arith.truncf / arith.extf with FP8 types to NVVM conversions";
  let description = [{
    MLIR 22 has no NVVM lowering for FP8 casts. Narrowing becomes
    `nvvm.convert.f32x2.to.f8x2` with round-to-nearest-even and satfinite
    (`cvt.rn.satfinite.e4m3x2.f32`), two elements per instruction; widening
    goes through `nvvm.convert.f8x2.to.f16x2`, which is exact.

    Before:
    ```mlir
    %q = arith.truncf %v : vector<8xf32> to vector<8xf8E4M3FN>
    ```
    After (per pair of elements):
    ```mlir
    %p = nvvm.convert.f32x2.to.f8x2 %hi, %lo {rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>} : vector<2xi8> (f8E4M3FN)
    ```
  }];
  let dependentDialects = ["mlir::NVVM::NVVMDialect", "mlir::vector::VectorDialect",
                           "mlir::arith::ArithDialect"];
}

def EmitPtx : Pass<"octet-emit-ptx", "mlir::ModuleOp"> {
  let summary = "write each gpu.binary's PTX (and a cubin, where ptxas exists) to a folder";
  let description = [{
    Runs after `gpu-module-to-binary{format=isa}`. Writes `<module>.ptx` for
    every `gpu.binary`, `<module>.cubin` assembled by ptxas (-arch=sm_90a)
    when ptxas is found, and `kernels.json`, which lists for every
    `kernel.fused` its kernels, launch shapes and argument buffers. The IR
    is left unchanged.
  }];
  let options = [
    Option<"dir", "dir", "std::string", "\"\"", "output folder (created if missing)">,
    Option<"ptxas", "ptxas", "std::string", "\"\"",
           "ptxas to assemble cubins with; empty: look on PATH and in CUDA_HOME, "
           "'none': write PTX only">,
  ];
}

#endif
