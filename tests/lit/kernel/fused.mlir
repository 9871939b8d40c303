// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @norm_quant
func.func @norm_quant(%x: tensor<8x4096xbf16>, %r: tensor<8x4096xbf16>, %w: tensor<4096xbf16>, %s: tensor<f32>) -> (tensor<8x4096xbf16>, tensor<8x4096xf8E4M3FN>, tensor<f32>) {
  // CHECK: kernel.fused "layers.0.attn_norm" kind("row") ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<8x4096xbf16>, tensor<8x4096xbf16>, tensor<4096xbf16>, tensor<f32>) {
  // CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<8x4096xbf16>, %[[B:.*]]: tensor<8x4096xbf16>, %[[W:.*]]: tensor<4096xbf16>, %[[S:.*]]: tensor<f32>):
  // CHECK: graph.add %[[A]], %[[B]]
  // CHECK: graph.rms_norm
  // CHECK: fp8.quantize
  // CHECK: kernel.yield %{{.*}}, %{{.*}}, %{{.*}} : tensor<8x4096xbf16>, tensor<8x4096xf8E4M3FN>, tensor<f32>
  // CHECK-NEXT: } : tensor<8x4096xbf16>, tensor<8x4096xf8E4M3FN>, tensor<f32>
  %h, %q, %amax = kernel.fused "layers.0.attn_norm" kind("row") ins(%x, %r, %w, %s : tensor<8x4096xbf16>, tensor<8x4096xbf16>, tensor<4096xbf16>, tensor<f32>) {
  ^bb0(%a: tensor<8x4096xbf16>, %b: tensor<8x4096xbf16>, %c: tensor<4096xbf16>, %d: tensor<f32>):
    %sum = graph.add %a, %b : tensor<8x4096xbf16>
    %n = graph.rms_norm %sum, %c {eps = 1.0e-5 : f64} : (tensor<8x4096xbf16>, tensor<4096xbf16>) -> tensor<8x4096xbf16>
    %q8, %m = fp8.quantize %n, %d : (tensor<8x4096xbf16>, tensor<f32>) -> (tensor<8x4096xf8E4M3FN>, tensor<f32>)
    kernel.yield %sum, %q8, %m : tensor<8x4096xbf16>, tensor<8x4096xf8E4M3FN>, tensor<f32>
  } : tensor<8x4096xbf16>, tensor<8x4096xf8E4M3FN>, tensor<f32>
  return %h, %q, %amax : tensor<8x4096xbf16>, tensor<8x4096xf8E4M3FN>, tensor<f32>
}

// A multi-tensor kernel: independent groups over tensors of different shapes.
// CHECK-LABEL: func.func @adamw
// CHECK: kernel.fused "adamw" kind("multi_tensor")
// CHECK-COUNT-2: graph.adamw_update
func.func @adamw(%p0: tensor<64x32xf32>, %g0: tensor<64x32xbf16>, %m0: tensor<64x32xf32>, %v0: tensor<64x32xf32>,
                 %p1: tensor<32xf32>, %g1: tensor<32xbf16>, %m1: tensor<32xf32>, %v1: tensor<32xf32>,
                 %lr: tensor<f32>, %step: tensor<i64>, %gs: tensor<f32>) -> (tensor<64x32xf32>, tensor<32xf32>) {
  %r0, %r1 = kernel.fused "adamw" kind("multi_tensor") ins(%p0, %g0, %m0, %v0, %p1, %g1, %m1, %v1, %lr, %step, %gs : tensor<64x32xf32>, tensor<64x32xbf16>, tensor<64x32xf32>, tensor<64x32xf32>, tensor<32xf32>, tensor<32xbf16>, tensor<32xf32>, tensor<32xf32>, tensor<f32>, tensor<i64>, tensor<f32>) {
  ^bb0(%a0: tensor<64x32xf32>, %b0: tensor<64x32xbf16>, %c0: tensor<64x32xf32>, %d0: tensor<64x32xf32>,
       %a1: tensor<32xf32>, %b1: tensor<32xbf16>, %c1: tensor<32xf32>, %d1: tensor<32xf32>,
       %l: tensor<f32>, %t: tensor<i64>, %s: tensor<f32>):
    %bf0 = graph.cast %b0 : (tensor<64x32xbf16>) -> tensor<64x32xf32>
    %n0:3 = graph.adamw_update %a0, %bf0, %c0, %d0, %l, %t, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64} : (tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>)
    %bf1 = graph.cast %b1 : (tensor<32xbf16>) -> tensor<32xf32>
    %n1:3 = graph.adamw_update %a1, %bf1, %c1, %d1, %l, %t, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
    kernel.yield %n0#0, %n1#0 : tensor<64x32xf32>, tensor<32xf32>
  } : tensor<64x32xf32>, tensor<32xf32>
  return %r0, %r1 : tensor<64x32xf32>, tensor<32xf32>
}
