// RUN: %octet-opt %s --octet-lower-to-kernel | FileCheck %s
// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-lower-to-kernel="data-parallel=2" | FileCheck %s --check-prefix=DP
// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-lower-to-kernel | FileCheck %s --check-prefix=DP1
// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-precision="recipe=delayed" --octet-lower-to-kernel="data-parallel=2" | FileCheck %s --check-prefix=DPFP8
// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-precision="recipe=current" --octet-lower-to-kernel="data-parallel=2" | FileCheck %s --check-prefix=DPCUR
// RUN: %octet-opt %s --octet-lower-to-kernel="data-parallel=2" | FileCheck %s --check-prefix=DPDATA

// With data parallelism and delayed FP8 scaling, every amax of the
// microbatch that asks for the data group (activations and gradients: 11
// of them) goes through one max all-reduce over the ranks, and the scale
// updates come after it, reading the reduced amaxes. The weights' amaxes
// (amax_reduce names the tensor group alone: the weights are replicated)
// are every rank's already and are read as they are.
// DPFP8-LABEL: func.func @train_microbatch
// DPFP8-NOT: fp8.scale_update
// DPFP8: %[[A:.*]]:11 = kernel.collective {{.*}}group = "data", group_size = 2 : i64, kind = "all_reduce"{{.*}}reduction = "max"
// DPFP8-NEXT: kernel.fused "layers.0.scale_update" kind("elementwise") ins(%{{.*}}, %[[A]]#0, %{{.*}} :
// DPFP8-LABEL: func.func @optimizer_step

// Current scaling keeps no scale state: each rank's scales fit the values
// it casts, and the precision pass asks for amaxes to agree over the tensor
// group only, so no amax crosses the data-parallel ranks.
// DPCUR-LABEL: func.func @train_microbatch
// DPCUR-NOT: reduction = "max"
// DPCUR: fp8.compute_scale
// DPCUR-NOT: reduction = "max"
// DPCUR-LABEL: func.func @optimizer_step

// An amax that asks for the data group (amax_reduce) is reduced right
// before the scale computed from it; one that does not is used as it is.
// DPDATA-LABEL: func.func @current_amax_reduce
// DPDATA: %[[A:.*]] = kernel.fused "amax"
// DPDATA: fp8.amax %{{.*}} {amax_reduce = ["data", "tensor"]}
// DPDATA: %[[R:.*]] = kernel.collective %[[A]] {group = "data", group_size = 2 : i64, kind = "all_reduce", {{.*}}reduction = "max"
// DPDATA-NEXT: kernel.fused "compute_scale" kind("elementwise") ins(%[[R]] : tensor<f32>)
// DPDATA: %[[B:.*]] = kernel.fused "amax"
// DPDATA: fp8.amax %{{.*}} {amax_reduce = ["tensor"]}
// DPDATA-NOT: kernel.collective
// DPDATA: kernel.fused "compute_scale" kind("elementwise") ins(%[[B]] : tensor<f32>)
// DPDATA-NOT: kernel.collective
// DPDATA-LABEL: return
func.func @current_amax_reduce(%x: tensor<16x64xf32>, %w: tensor<32x64xf32>) -> (tensor<f32>, tensor<f32>) {
  %ax = fp8.amax %x {amax_reduce = ["data", "tensor"]} : (tensor<16x64xf32>) -> tensor<f32>
  %sx, %sx_inv = fp8.compute_scale %ax {dtype = f8E4M3FN} : tensor<f32>
  %aw = fp8.amax %w {amax_reduce = ["tensor"]} : (tensor<32x64xf32>) -> tensor<f32>
  %sw, %sw_inv = fp8.compute_scale %aw {dtype = f8E4M3FN} : tensor<f32>
  return %sx, %sw : tensor<f32>, tensor<f32>
}

// A linear is a 2-D GEMM between reshape views; its bias is the epilogue.
// Every other compute op is a one-op fused kernel, tagged with its layer
// and section.
// CHECK-LABEL: func.func @mlp
// CHECK: %[[X:.*]] = graph.reshape %{{.*}} : (tensor<2x8x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT: %[[Y:.*]] = kernel.gemm %[[X]], %{{.*}} bias(%{{.*}}) {epilogue = "bias", layer = 0 : i64, param = "layers.0.mlp.w_up", role = "fprop", section = "eval", transpose_b} : (tensor<16x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<16x128xf32>
// CHECK-NEXT: %[[Y3:.*]] = graph.reshape %[[Y]] : (tensor<16x128xf32>) -> tensor<2x8x128xf32>
// CHECK-NEXT: kernel.fused "layers.0.silu" kind("elementwise") ins(%[[Y3]] : tensor<2x8x128xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<2x8x128xf32>):
// CHECK-NEXT: graph.silu %[[A]] : tensor<2x8x128xf32>
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: } {layer = 0 : i64, section = "eval"} : tensor<2x8x128xf32>
func.func @mlp(%x: tensor<2x8x64xf32>, %w: tensor<128x64xf32>, %b: tensor<128xf32>) -> tensor<2x8x128xf32> {
  %y = graph.linear %x, %w, %b {param = "layers.0.mlp.w_up"} : (tensor<2x8x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<2x8x128xf32>
  %s = graph.silu %y : tensor<2x8x128xf32>
  return %s : tensor<2x8x128xf32>
}

// A tensorwise FP8 GEMM takes its operands' inverse scales as the two
// factors cuBLASLt multiplies by (scales_inv); the K-major copy of an FP8
// tensor is a kernel.copy, its tensorwise scale passes through.
// CHECK-LABEL: func.func @fp8
// CHECK-SAME: (%{{.*}}: tensor<32x16xf8E5M2>, %[[IDY:.*]]: tensor<f32>, %{{.*}}: tensor<16x64xf8E4M3FN>, %[[IX:.*]]: tensor<f32>)
// CHECK: %[[QT:.*]] = kernel.copy %{{.*}} {layer = {{.*}}, section = "eval", transpose} : (tensor<16x64xf8E4M3FN>) -> tensor<64x16xf8E4M3FN>
// CHECK-NEXT: kernel.gemm %{{.*}}, %[[QT]] scales_inv(%[[IDY]], %[[IX]]) {layer = 1 : i64, param = "layers.1.mlp.w_down", role = "wgrad", section = "eval", transpose_b}
func.func @fp8(%dy: tensor<32x16xf8E5M2>, %idy: tensor<f32>, %x: tensor<16x64xf8E4M3FN>, %ix: tensor<f32>) -> tensor<32x64xf32> {
  %xt, %ixt = fp8.transpose %x, %ix : (tensor<16x64xf8E4M3FN>, tensor<f32>) -> (tensor<64x16xf8E4M3FN>, tensor<f32>)
  %dw = fp8.matmul %dy, %idy, %xt, %ixt {inverse_scales, transpose_b, role = "wgrad", param = "layers.1.mlp.w_down"} : (tensor<32x16xf8E5M2>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>) -> tensor<32x64xf32>
  return %dw : tensor<32x64xf32>
}

// Blockwise: the GEMM keeps both operands' block scales and their block
// shapes (1x128 tiles of x along K, 128x128 blocks of w); the transposed
// tiles of a wgrad operand are two copies, data and scales.
// CHECK-LABEL: func.func @blockwise
// CHECK: kernel.gemm %{{.*}}, %{{.*}} scales(%{{.*}}, %{{.*}}) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, layer = 0 : i64, param = "layers.0.mlp.w_up", role = "fprop", section = "eval", transpose_b} : (tensor<256x512xf8E4M3FN>, tensor<384x512xf8E4M3FN>, tensor<256x4xf32>, tensor<3x4xf32>) -> tensor<256x384xbf16>
// CHECK: %[[XT:.*]] = kernel.copy %{{.*}} {{{.*}}transpose} : (tensor<256x512xf8E4M3FN>) -> tensor<512x256xf8E4M3FN>
// CHECK-NEXT: %[[SXT:.*]] = kernel.copy %{{.*}} {{{.*}}transpose} : (tensor<2x512xf32>) -> tensor<512x2xf32>
// CHECK: kernel.gemm %{{.*}}, %[[XT]] scales(%{{.*}}, %[[SXT]]) {a_block = array<i64: 1, 128>, b_block = array<i64: 1, 128>, {{.*}}role = "wgrad"{{.*}}transpose_b}
func.func @blockwise(%x: tensor<256x512xf8E4M3FN>, %sx: tensor<256x4xf32>, %w: tensor<384x512xf8E4M3FN>, %sw: tensor<3x4xf32>, %xc: tensor<256x512xf8E4M3FN>, %sxc: tensor<2x512xf32>, %dyt: tensor<384x256xf8E4M3FN>, %sdyt: tensor<384x2xf32>) -> (tensor<256x384xbf16>, tensor<384x512xf32>) {
  %y = fp8.matmul %x, %sx, %w, %sw {transpose_b, a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, role = "fprop", param = "layers.0.mlp.w_up"} : (tensor<256x512xf8E4M3FN>, tensor<256x4xf32>, tensor<384x512xf8E4M3FN>, tensor<3x4xf32>) -> tensor<256x384xbf16>
  %xt, %sxt = fp8.transpose %xc, %sxc {block = array<i64: 128, 1>} : (tensor<256x512xf8E4M3FN>, tensor<2x512xf32>) -> (tensor<512x256xf8E4M3FN>, tensor<512x2xf32>)
  %dw = fp8.matmul %dyt, %sdyt, %xt, %sxt {transpose_b, a_block = array<i64: 1, 128>, b_block = array<i64: 1, 128>, role = "wgrad", param = "layers.0.mlp.w_up"} : (tensor<384x256xf8E4M3FN>, tensor<384x2xf32>, tensor<512x256xf8E4M3FN>, tensor<512x2xf32>) -> tensor<384x512xf32>
  return %y, %dw : tensor<256x384xbf16>, tensor<384x512xf32>
}

// The train step: attention kernels, forward and backward sections.
// DP-LABEL: func.func @train_microbatch
// DP: kernel.attention_fwd {{.*}}{causal, layer = 0 : i64, scale = 5.000000e-01 : f64, section = "forward"}
// DP: kernel.fused "cross_entropy" kind("row")
// DP: } {layer = -1 : i64, section = "forward"}
// DP: kernel.fused "cross_entropy_grad" kind("row")
// DP: } {layer = -1 : i64, section = "backward"}
// DP: kernel.attention_bwd {{.*}}section = "backward"
// The gradients' all-reduce is octet-reduce-gradients' (after fusion), so
// without FP8 amaxes to agree on this pass makes no collective.
// DP-NOT: kernel.collective
// DP1-NOT: kernel.collective
