// RUN: %octet-opt %s --octet-attention-to-gpu | FileCheck %s

// Forward: a CTA of 4 warps per (128-row query tile, head, batch row), so
// 2·4·(256/128) = 16 CTAs; 64 KiB of dynamic shared memory (Q 128 rows, K and
// V 64 rows, of 128 bf16). Backward: the prep kernel (16 threads per token
// and head, 8 elements each: 2·256·4·16 / 128 = 256 blocks), the main kernel (a CTA per 64-row key tile and kv head: 2·2·4;
// K and V, two stages of Q, dO, lse and D, and dSᵀ: 105 KiB) and the dQ
// conversion (8 elements per thread).
// CHECK-LABEL: func.func @gqa
// CHECK: kernel.attention_fwd
// CHECK-SAME: kernels = [@attention_fwd_0::@attention_fwd_0]
// CHECK-SAME: launch = [#kernel.launch<@attention_fwd_0::@attention_fwd_0, grid = 16, block = 128, shared_bytes = 65536>]
// CHECK-SAME: workspace_bytes = 0
// CHECK: kernel.attention_bwd
// CHECK-SAME: kernels = [@attention_bwd_1::@attention_bwd_1_prep, @attention_bwd_1::@attention_bwd_1, @attention_bwd_1::@attention_bwd_1_dq]
// CHECK-SAME: launch = [#kernel.launch<@attention_bwd_1::@attention_bwd_1_prep, grid = 256, block = 128>, #kernel.launch<@attention_bwd_1::@attention_bwd_1, grid = 16, block = 128, shared_bytes = 107520>, #kernel.launch<@attention_bwd_1::@attention_bwd_1_dq, grid = 128, block = 256>]
// The workspace: the f32 dQ accumulator (2·256·4·128 words) and D (2·4·256).
// CHECK-SAME: workspace_bytes = 1056768
func.func @gqa(%q: tensor<2x256x4x128xbf16>, %k: tensor<2x256x2x128xbf16>, %v: tensor<2x256x2x128xbf16>, %do: tensor<2x256x4x128xbf16>) -> (tensor<2x256x4x128xbf16>, tensor<2x256x2x128xbf16>, tensor<2x256x2x128xbf16>) {
  %o, %lse = kernel.attention_fwd %q, %k, %v {causal, scale = 0.08838834764831845 : f64} : (tensor<2x256x4x128xbf16>, tensor<2x256x2x128xbf16>, tensor<2x256x2x128xbf16>) -> (tensor<2x256x4x128xbf16>, tensor<2x4x256xf32>)
  %dq, %dk, %dv = kernel.attention_bwd %do, %q, %k, %v, %o, %lse {causal, scale = 0.08838834764831845 : f64} : (tensor<2x256x4x128xbf16>, tensor<2x256x4x128xbf16>, tensor<2x256x2x128xbf16>, tensor<2x256x2x128xbf16>, tensor<2x256x4x128xbf16>, tensor<2x4x256xf32>) -> (tensor<2x256x4x128xbf16>, tensor<2x256x2x128xbf16>, tensor<2x256x2x128xbf16>)
  return %dq, %dk, %dv : tensor<2x256x4x128xbf16>, tensor<2x256x2x128xbf16>, tensor<2x256x2x128xbf16>
}

// Documents: with cu_seqlens the workspace also holds each token's document
// bounds: 2·256·4·64 + 2·4·256 + 2 · 2·256 words.
// CHECK-LABEL: func.func @documents
// CHECK: kernel.attention_fwd
// CHECK-SAME: workspace_bytes = 0
// CHECK: kernel.attention_bwd
// CHECK-SAME: workspace_bytes = 536576
func.func @documents(%q: tensor<2x256x4x64xbf16>, %k: tensor<2x256x4x64xbf16>, %v: tensor<2x256x4x64xbf16>, %do: tensor<2x256x4x64xbf16>, %cu: tensor<5xi32>) -> (tensor<2x256x4x64xbf16>, tensor<2x256x4x64xbf16>, tensor<2x256x4x64xbf16>) {
  %o, %lse = kernel.attention_fwd %q, %k, %v, %cu {scale = 0.125 : f64} : (tensor<2x256x4x64xbf16>, tensor<2x256x4x64xbf16>, tensor<2x256x4x64xbf16>, tensor<5xi32>) -> (tensor<2x256x4x64xbf16>, tensor<2x4x256xf32>)
  %dq, %dk, %dv = kernel.attention_bwd %do, %q, %k, %v, %o, %lse, %cu {scale = 0.125 : f64} : (tensor<2x256x4x64xbf16>, tensor<2x256x4x64xbf16>, tensor<2x256x4x64xbf16>, tensor<2x256x4x64xbf16>, tensor<2x256x4x64xbf16>, tensor<2x4x256xf32>, tensor<5xi32>) -> (tensor<2x256x4x64xbf16>, tensor<2x256x4x64xbf16>, tensor<2x256x4x64xbf16>)
  return %dq, %dk, %dv : tensor<2x256x4x64xbf16>, tensor<2x256x4x64xbf16>, tensor<2x256x4x64xbf16>
}

// The kernels: tensor-core products, ldmatrix (transposed for V), cp.async
// copies into dynamic shared memory, exp2 with the scale folded in.
// CHECK: gpu.module @attention_fwd_0
// CHECK: llvm.mlir.global external @octet_attention_smem() {addr_space = 3 : i32, alignment = 128 : i64} : !llvm.array<0 x i8>
// CHECK: gpu.func @attention_fwd_0(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>) kernel
// CHECK: nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// CHECK: scf.for
// CHECK: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>
// CHECK: nvvm.mma.sync
// CHECK: ex2.approx.ftz.f32
// CHECK: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<col>
// CHECK: gpu.module @attention_bwd_1
// CHECK: gpu.func @attention_bwd_1_prep
// CHECK: gpu.func @attention_bwd_1(
// CHECK: red.global.add.v2.f32
// CHECK: gpu.func @attention_bwd_1_dq
