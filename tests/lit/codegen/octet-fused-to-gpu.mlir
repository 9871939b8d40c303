// RUN: %octet-opt %s --octet-fused-to-gpu | FileCheck %s

// A row kernel: one block per row, 8-element vectors, a shuffle reduction,
// one atomic per block for the amax.
// CHECK: module attributes {gpu.container_module}
// CHECK-LABEL: func.func @forward
// CHECK: kernel.fused "attn norm" kind("row")
// CHECK: } {kernels = [@attn_norm::@attn_norm]
// CHECK-SAME: launch = [{block = 32 : i64, grid = 4 : i64, kernel = @attn_norm::@attn_norm}]
// CHECK-SAME: workspace_bytes = 0
// CHECK-SAME: zero_results = array<i64: 1>
func.func @forward(%x: tensor<4x256xbf16>, %w: tensor<256xbf16>, %s: tensor<f32>) -> (tensor<4x256xf8E4M3FN>, tensor<f32>) {
  %q, %m = kernel.fused "attn norm" kind("row") ins(%x, %w, %s : tensor<4x256xbf16>, tensor<256xbf16>, tensor<f32>) {
  ^bb0(%a: tensor<4x256xbf16>, %b: tensor<256xbf16>, %c: tensor<f32>):
    %n = graph.rms_norm %a, %b {eps = 1.0e-5 : f64} : (tensor<4x256xbf16>, tensor<256xbf16>) -> tensor<4x256xbf16>
    %q8, %amax = fp8.quantize %n, %c : (tensor<4x256xbf16>, tensor<f32>) -> (tensor<4x256xf8E4M3FN>, tensor<f32>)
    kernel.yield %q8, %amax : tensor<4x256xf8E4M3FN>, tensor<f32>
  } : tensor<4x256xf8E4M3FN>, tensor<f32>
  return %q, %m : tensor<4x256xf8E4M3FN>, tensor<f32>
}

// Column sums (the weight gradient) go through per-block partial rows and a
// second kernel.
// CHECK-LABEL: func.func @backward
// CHECK: } {kernels = [@norm_bwd::@norm_bwd, @norm_bwd::@norm_bwd_colsum]
// CHECK-SAME: workspace_bytes = 4096
func.func @backward(%dy: tensor<4x256xbf16>, %x: tensor<4x256xbf16>, %w: tensor<256xbf16>) -> (tensor<4x256xbf16>, tensor<256xf32>) {
  %dx, %dw = kernel.fused "norm_bwd" kind("row") ins(%dy, %x, %w : tensor<4x256xbf16>, tensor<4x256xbf16>, tensor<256xbf16>) {
  ^bb0(%a: tensor<4x256xbf16>, %b: tensor<4x256xbf16>, %c: tensor<256xbf16>):
    %g, %gw = graph.rms_norm_grad %a, %b, %c {eps = 1.0e-5 : f64} : (tensor<4x256xbf16>, tensor<4x256xbf16>, tensor<256xbf16>) -> (tensor<4x256xbf16>, tensor<256xf32>)
    kernel.yield %g, %gw : tensor<4x256xbf16>, tensor<256xf32>
  } : tensor<4x256xbf16>, tensor<256xf32>
  return %dx, %dw : tensor<4x256xbf16>, tensor<256xf32>
}


// A kernel named like another symbol of the module gets its own name.
// CHECK-LABEL: func.func @clash
// CHECK: kernels = [@clash_2::@clash_2]
func.func @clash(%x: tensor<4x256xf32>) -> tensor<4x256xf32> {
  %y = kernel.fused "clash" kind("elementwise") ins(%x : tensor<4x256xf32>) {
  ^bb0(%a: tensor<4x256xf32>):
    %s = graph.silu %a : tensor<4x256xf32>
    kernel.yield %s : tensor<4x256xf32>
  } : tensor<4x256xf32>
  return %y : tensor<4x256xf32>
}

// CHECK: gpu.module @attn_norm
// CHECK: gpu.func @attn_norm(%{{.*}}: memref<1024xbf16, 1>, %{{.*}}: memref<256xbf16, 1>, %{{.*}}: memref<1xf32, 1>, %{{.*}}: memref<1024xf8E4M3FN, 1>, %{{.*}}: memref<1xi32, 1>) workgroup(%{{.*}} : memref<64xf32, 3> {llvm.align = 16 : i64}) kernel
// CHECK-SAME: known_block_size = array<i32: 32, 1, 1>
// CHECK: vector.load {{.*}} {alignment = 16 : i64} : memref<1024xbf16, 1>, vector<8xbf16>
// CHECK: gpu.shuffle xor
// CHECK: arith.truncf {{.*}} : vector<8xf32> to vector<8xf8E4M3FN>
// CHECK: vector.store {{.*}} {alignment = 8 : i64} : memref<1024xf8E4M3FN, 1>, vector<8xf8E4M3FN>
// CHECK: memref.atomic_rmw maxu
// CHECK: gpu.module @norm_bwd
// CHECK: gpu.func @norm_bwd(
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: gpu.func @norm_bwd_colsum(
// CHECK: scf.for
