// RUN: %octet-opt %s --octet-attention-to-gpu="hopper-forward=1 hopper-backward=1" | FileCheck %s
// A second run (octet-codegen's own) leaves the lowered ops alone.
// RUN: %octet-opt %s --octet-attention-to-gpu="hopper-forward=1 hopper-backward=1" --octet-codegen | FileCheck %s --check-prefix=PIPELINE
// The codegen pipeline's default (sm_90a) is the Hopper backward too; the
// pass without hopper-backward keeps the mma.sync one.
// RUN: %octet-opt %s --octet-codegen | FileCheck %s --check-prefix=PIPELINE
// RUN: %octet-opt %s --octet-attention-to-gpu="hopper-forward=1" | FileCheck %s --check-prefix=OFF
// PIPELINE: kernel.attention_bwd
// PIPELINE-SAME: @attention_bwd_{{[0-9]+}}_hopper
// PIPELINE: gpu.binary @attention_bwd_
// OFF: kernel.attention_bwd
// OFF-SAME: kernels = [@[[B:attention_bwd_[0-9]+]]::@[[B]]_prep, @[[B]]::@[[B]], @[[B]]::@[[B]]_dq]
// OFF-NOT: launch = 1
// OFF-NOT: _hopper

// The Hopper backward between the prep and `_dq` kernels: a CTA of 3
// warpgroups per 128-row key tile, kv head and batch row (2·2 = 4 CTAs);
// K and V (32 KiB each), two stages of a 64-row Q and dO (16 KiB each) and
// of lse, D and document bounds (1 KiB), two dSᵀ slots (16 KiB each), an
// f32 dQ tile per consumer warpgroup (64 rows of 256 bytes), the mbarriers
// and 1 KiB for alignment: 199720 bytes. The tensor maps of
// dout, q (64-row boxes), k and v (128-row boxes) go to the second launch.
// CHECK: func.func @gqa
// CHECK: kernel.attention_bwd
// CHECK-SAME: kernels = [@[[BWD:attention_bwd_[0-9]+]]::@[[BWD]]_prep, @[[BWD]]::@[[BWD]]_hopper, @[[BWD]]::@[[BWD]]_dq]
// CHECK-SAME: #kernel.launch<@[[BWD]]::@[[BWD]]_hopper, grid = 4, block = 384, shared_bytes = 199720>
// CHECK-SAME: tensor_maps = [{box_columns = 64 : i64, box_rows = 64 : i64, launch = 1 : i64, operand = 0 : i64, swizzle_bytes = 128 : i64}, {box_columns = 64 : i64, box_rows = 64 : i64, launch = 1 : i64, operand = 1 : i64, swizzle_bytes = 128 : i64}, {box_columns = 64 : i64, box_rows = 128 : i64, launch = 1 : i64, operand = 2 : i64, swizzle_bytes = 128 : i64}, {box_columns = 64 : i64, box_rows = 128 : i64, launch = 1 : i64, operand = 3 : i64, swizzle_bytes = 128 : i64}]
// CHECK: func.func @dh64
// CHECK: kernel.attention_bwd
// CHECK-SAME: #kernel.launch<@[[B64:attention_bwd_[0-9]+]]::@[[B64]]_hopper, grid = 3, block = 384, shared_bytes = 134184>
// CHECK: gpu.module @[[BWD]]
// CHECK: gpu.func @[[BWD]]_prep
// CHECK: llvm.func @[[BWD]]_hopper(%arg0: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}, %arg1: !llvm.ptr {{.*}}nvvm.grid_constant}, %arg2: !llvm.ptr {{.*}}nvvm.grid_constant}, %arg3: !llvm.ptr {{.*}}nvvm.grid_constant}, %arg4: !llvm.ptr<1>
// CHECK-SAME: nvvm.kernel, nvvm.maxntid = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32
// CHECK: nvvm.mbarrier.init
// CHECK: nvvm.fence.mbarrier.init
// The loader: K and V once (two 64-column boxes each), then per step Q and
// dO, and lse, D and the document bounds as plain bulk copies.
// CHECK: nvvm.setmaxregister  decrease 24
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg2
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg3
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0
// CHECK-COUNT-4: nvvm.cp.async.bulk.shared.cluster.global
// Warps 1 and 2 of the loader warpgroup: each consumer warpgroup's dQ
// writer, one bulk reduction of the whole 16 KiB tile a step between the
// named barriers "tile written" (waited here) and "tile read" (arrived).
// CHECK: nvvm.barrier.arrive id = %{{.*}} number_of_threads = %[[DQT:.*]]
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %[[DQT]]
// CHECK: cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], 16384;
// CHECK: nvvm.cp.async.bulk.commit.group
// CHECK: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK: nvvm.barrier.arrive id = %{{.*}} number_of_threads = %[[DQT]]
// CHECK: nvvm.cp.async.bulk.wait_group 0{{$}}
// The consumers: Sᵀ and dPᵀ from K-major descriptors, dV and dK with Pᵀ and
// dSᵀ in registers, dQ from MN-major dSᵀ and K, handed to the writer while
// dK (issued after dQ) is in flight. At head dim 128 dK stays in flight
// into the next step: its wait for Sᵀ frees the previous step's stage, and
// the loop ends without waiting; the wait after it comes before dK is read.
// CHECK: nvvm.setmaxregister  increase 240
// CHECK: nvvm.wgmma.mma_async
// CHECK-SAME: <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.mbarrier.arrive
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %{{.*}}
// CHECK-COUNT-8: <m = 64, n = 64, k = 16>, D[<f32>, {{<zero>|<one>}}], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %[[DQT]]
// CHECK: llvm.store %{{.*}} : vector<2xf32>
// CHECK: nvvm.barrier.arrive id = %{{.*}} number_of_threads = %[[DQT]]
// CHECK-NEXT: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-64: llvm.inline_asm has_side_effects "", "=f,0"
// CHECK-NOT: cp.reduce.async.bulk
// Head dim 64 (tiny-llama's): K and V 16 KiB, Q and dO stages 8 KiB; each
// consumer warpgroup's dQ takes all 64 columns over its own 64 keys (4
// k-steps), both adding into the same rows.
// CHECK: gpu.module @[[B64]]
// CHECK: llvm.func @[[B64]]_hopper
// CHECK: cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], 16384;
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// CHECK-COUNT-4: <m = 64, n = 64, k = 16>, D[<f32>, {{<zero>|<one>}}], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// CHECK-NOT: A[<bf16>, <one>, <col>]
// Its dK is waited for within the step.
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.mbarrier.arrive
// CHECK: scf.yield
func.func @gqa(%q: tensor<1x256x4x128xbf16>, %k: tensor<1x256x2x128xbf16>, %v: tensor<1x256x2x128xbf16>, %do: tensor<1x256x4x128xbf16>, %o: tensor<1x256x4x128xbf16>, %lse: tensor<1x4x256xf32>, %cu: tensor<3xi32>) -> (tensor<1x256x4x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>) {
  %dq, %dk, %dv = kernel.attention_bwd %do, %q, %k, %v, %o, %lse, %cu {causal, scale = 0.08838834764831845 : f64} : (tensor<1x256x4x128xbf16>, tensor<1x256x4x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x256x4x128xbf16>, tensor<1x4x256xf32>, tensor<3xi32>) -> (tensor<1x256x4x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>)
  return %dq, %dk, %dv : tensor<1x256x4x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>
}

func.func @dh64(%q: tensor<1x384x2x64xbf16>, %k: tensor<1x384x1x64xbf16>, %v: tensor<1x384x1x64xbf16>, %do: tensor<1x384x2x64xbf16>, %o: tensor<1x384x2x64xbf16>, %lse: tensor<1x2x384xf32>) -> (tensor<1x384x2x64xbf16>, tensor<1x384x1x64xbf16>, tensor<1x384x1x64xbf16>) {
  %dq, %dk, %dv = kernel.attention_bwd %do, %q, %k, %v, %o, %lse {scale = 0.125 : f64} : (tensor<1x384x2x64xbf16>, tensor<1x384x2x64xbf16>, tensor<1x384x1x64xbf16>, tensor<1x384x1x64xbf16>, tensor<1x384x2x64xbf16>, tensor<1x2x384xf32>) -> (tensor<1x384x2x64xbf16>, tensor<1x384x1x64xbf16>, tensor<1x384x1x64xbf16>)
  return %dq, %dk, %dv : tensor<1x384x2x64xbf16>, tensor<1x384x1x64xbf16>, tensor<1x384x1x64xbf16>
}
