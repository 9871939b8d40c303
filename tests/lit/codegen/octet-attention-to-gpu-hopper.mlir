// RUN: %octet-opt %s --octet-attention-to-gpu=hopper-forward=1 | FileCheck %s
// A second run (octet-codegen's own) leaves the lowered ops alone.
// RUN: %octet-opt %s --octet-attention-to-gpu=hopper-forward=1 --octet-attention-to-gpu | FileCheck %s
// The codegen pipeline (sm_90a) turns hopper-forward on; an explicit earlier
// run with it off keeps the mma.sync forward.
// RUN: %octet-opt %s --octet-codegen | FileCheck %s --check-prefix=PIPELINE
// RUN: %octet-opt %s --octet-attention-to-gpu=hopper-forward=0 --octet-codegen | FileCheck %s --check-prefix=OFF
// PIPELINE: kernel.attention_fwd
// PIPELINE-SAME: kernels = [@attention_fwd_hopper_{{[0-9]+}}::@attention_fwd_hopper_{{[0-9]+}}]
// PIPELINE-SAME: tensor_maps = [
// PIPELINE: gpu.binary @attention_fwd_hopper_
// OFF: kernel.attention_fwd
// OFF-SAME: kernels = [@attention_fwd_{{[0-9]+}}::@attention_fwd_{{[0-9]+}}]
// OFF-NOT: tensor_maps
// OFF-NOT: attention_fwd_hopper

// The Hopper forward: a CTA of 3 warpgroups per 128-row query tile, head and
// batch row (4·2 = 8 CTAs); Q and two stages of K and V (128 rows of 128
// bf16 each: 160 KiB), the mbarriers and 1 KiB for alignment. The tensor
// maps of q, k and v go before the buffers, recorded on the op; the
// backward keeps the mma.sync kernels.
// CHECK-LABEL: func.func @gqa
// CHECK: kernel.attention_fwd
// CHECK-SAME: kernels = [@[[FWD:attention_fwd_hopper_[0-9]+]]::@[[FWD]]]
// CHECK-SAME: launch = [#kernel.launch<@[[FWD]]::@[[FWD]], grid = 8, block = 384, shared_bytes = 164936>]
// CHECK-SAME: tensor_maps = [{box_columns = 64 : i64, box_rows = 128 : i64, operand = 0 : i64, swizzle_bytes = 128 : i64}, {box_columns = 64 : i64, box_rows = 128 : i64, operand = 1 : i64, swizzle_bytes = 128 : i64}, {box_columns = 64 : i64, box_rows = 128 : i64, operand = 2 : i64, swizzle_bytes = 128 : i64}]
// CHECK: kernel.attention_bwd
// CHECK-SAME: kernels = [@attention_bwd_{{[0-9]+}}::@attention_bwd_{{[0-9]+}}_prep
// CHECK-NOT: tensor_maps
// CHECK: gpu.module @[[FWD]]
// CHECK: llvm.func @[[FWD]](%arg0: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}, %arg1: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}, %arg2: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}, %arg3: !llvm.ptr<1>
// CHECK-SAME: gpu.kernel
// CHECK-SAME: nvvm.kernel, nvvm.maxntid = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32
// CHECK: nvvm.mbarrier.init
// CHECK: nvvm.fence.mbarrier.init
// The loader: registers given back, q's two 64-column boxes, then k and v.
// CHECK: nvvm.setmaxregister  decrease 24
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg2
// The consumers: Q·Kᵀ from descriptors, P·V with P in registers.
// CHECK: nvvm.setmaxregister  increase 240
// CHECK: nvvm.wgmma.mma_async
// CHECK-SAME: <m = 64, n = 128, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
func.func @gqa(%q: tensor<1x256x4x128xbf16>, %k: tensor<1x256x2x128xbf16>, %v: tensor<1x256x2x128xbf16>, %do: tensor<1x256x4x128xbf16>, %cu: tensor<3xi32>) -> (tensor<1x256x4x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>) {
  %o, %lse = kernel.attention_fwd %q, %k, %v, %cu {causal, scale = 0.08838834764831845 : f64} : (tensor<1x256x4x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>, tensor<3xi32>) -> (tensor<1x256x4x128xbf16>, tensor<1x4x256xf32>)
  %dq, %dk, %dv = kernel.attention_bwd %do, %q, %k, %v, %o, %lse, %cu {causal, scale = 0.08838834764831845 : f64} : (tensor<1x256x4x128xbf16>, tensor<1x256x4x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x256x4x128xbf16>, tensor<1x4x256xf32>, tensor<3xi32>) -> (tensor<1x256x4x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>)
  return %dq, %dk, %dv : tensor<1x256x4x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>
}
