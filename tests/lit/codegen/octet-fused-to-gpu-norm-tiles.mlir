// RUN: %octet-opt %s --octet-fused-to-gpu | FileCheck %s

// Residual add + RMSNorm whose output the region block-quantizes
// (octet-fuse-norm-quantize, blockwise): the row kernel stores the residual
// stream and each row's 1/rms (into the workspace, a float a row) but not
// the norm's output; its programmatic dependent, the 128 x 128 tile kernel
// (2 x 3 tiles here), waits for it, reads the stored residual stream as
// 8 16-byte rows a thread, evaluates (x · 1/rms) · w on them and writes
// the 128x1 tiles K-major and the 1x128 tiles from the one read.
// CHECK: kernel.yield
// CHECK-NEXT: kernels = [@attn_norm::@attn_norm, @attn_norm::@attn_norm_tiles_0]
// CHECK-SAME: #kernel.launch<@attn_norm::@attn_norm_tiles_0, grid = 6, block = 256, programmatic>
// CHECK-SAME: workspace_bytes = 1024
// CHECK-LABEL: gpu.func @attn_norm(
// CHECK-SAME: memref<384xf32, 1>, %[[H:[a-z0-9]+]]: memref<98304xbf16, 1>, %{{.*}}: memref<98304xf8E4M3FN, 1>, %{{.*}}: memref<768xf32, 1>, %{{.*}}: memref<98304xf8E4M3FN, 1>, %{{.*}}: memref<768xf32, 1>, %[[WS:[a-z0-9]+]]: memref<256xf32, 1>)
// CHECK: griddepcontrol.launch_dependents
// CHECK: memref.store %{{.*}}, %[[WS]]
// CHECK: vector.store %{{.*}}, %[[H]]
// CHECK-NOT: f8E4M3FN, 1>, vector
// CHECK: gpu.return
// CHECK-LABEL: gpu.func @attn_norm_tiles_0(
// CHECK-SAME: memref<384xf32, 1>, %[[H2:[a-z0-9]+]]: memref<98304xbf16, 1>, %[[QT:[a-z0-9]+]]: memref<98304xf8E4M3FN, 1>, %{{.*}}: memref<768xf32, 1>, %[[Q:[a-z0-9]+]]: memref<98304xf8E4M3FN, 1>, %{{.*}}: memref<768xf32, 1>, %[[WS2:[a-z0-9]+]]: memref<256xf32, 1>)
// CHECK-NEXT: griddepcontrol.wait
// CHECK-COUNT-8: vector.load %[[H2]][%{{.*}}] {alignment = 16 : i64} : memref<98304xbf16, 1>, vector<8xbf16>
// CHECK: vector.load %{{.*}} : memref<384xf32, 1>, vector<4xf32>
// CHECK: memref.load %[[WS2]]
// CHECK: arith.mulf
// CHECK-NEXT: arith.mulf
// CHECK: vector.store %{{.*}}, %[[QT]][%{{.*}}] {alignment = 16 : i64}
// CHECK: vector.store %{{.*}}, %[[Q]][%{{.*}}] {alignment = 8 : i64}
// CHECK: gpu.return
func.func @nt(%x: tensor<1x256x384xbf16>, %r: tensor<1x256x384xbf16>, %w: tensor<384xf32>) {
  %n:5 = kernel.fused "attn_norm" kind("row") ins(%x, %r, %w : tensor<1x256x384xbf16>, tensor<1x256x384xbf16>, tensor<384xf32>) {
  ^bb0(%a: tensor<1x256x384xbf16>, %b: tensor<1x256x384xbf16>, %g: tensor<384xf32>):
    %h = graph.add %a, %b : tensor<1x256x384xbf16>
    %y = graph.rms_norm %h, %g {eps = 1.0e-5 : f64} : (tensor<1x256x384xbf16>, tensor<384xf32>) -> tensor<1x256x384xbf16>
    %y2 = graph.reshape %y : (tensor<1x256x384xbf16>) -> tensor<256x384xbf16>
    %q, %s = fp8.block_quantize %y2 {block = array<i64: 128, 1>, dtype = f8E4M3FN, power_of_two} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<2x384xf32>)
    %qt, %st = fp8.transpose %q, %s {block = array<i64: 128, 1>} : (tensor<256x384xf8E4M3FN>, tensor<2x384xf32>) -> (tensor<384x256xf8E4M3FN>, tensor<384x2xf32>)
    %r1, %rs = fp8.block_quantize %y2 {block = array<i64: 1, 128>, dtype = f8E4M3FN, power_of_two} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<256x3xf32>)
    kernel.yield %h, %qt, %st, %r1, %rs : tensor<1x256x384xbf16>, tensor<384x256xf8E4M3FN>, tensor<384x2xf32>, tensor<256x384xf8E4M3FN>, tensor<256x3xf32>
  } : tensor<1x256x384xbf16>, tensor<384x256xf8E4M3FN>, tensor<384x2xf32>, tensor<256x384xf8E4M3FN>, tensor<256x3xf32>
  return
}
