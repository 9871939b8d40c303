// RUN: %octet-opt %s --octet-recompute-cast | FileCheck %s

// A norm's output that only the cast reads: the cast kernel computes the
// norm again from the residual stream the producer stores anyway (2 B an
// element read again, against 4 B written and read), and the producer keeps
// only the residual and the amax.
// CHECK-LABEL: func.func @norm
// CHECK: %[[P:.*]]:2 = kernel.fused "rms_norm" kind("row") ins(%arg0, %arg1, %arg2 :
// CHECK: %[[H:.*]] = graph.add
// CHECK: %[[N:.*]] = graph.rms_norm %[[H]]
// CHECK: %[[NR:.*]] = graph.reshape %[[N]]
// CHECK: %[[A:.*]] = fp8.amax %[[NR]]
// CHECK: kernel.yield %[[H]], %[[A]] : tensor<2x64x256xbf16>, tensor<f32>
// CHECK: %[[S:.*]] = kernel.fused "compute_scale" kind("elementwise") ins(%[[P]]#1 : tensor<f32>)
// CHECK: kernel.fused "quantize" kind("row") ins(%arg2, %[[P]]#0, %[[S]] : tensor<256xf32>, tensor<2x64x256xbf16>, tensor<f32>)
// CHECK-NEXT: ^bb0(%[[W:.*]]: tensor<256xf32>, %[[H2:.*]]: tensor<2x64x256xbf16>, %[[S2:.*]]: tensor<f32>):
// CHECK-NEXT: %[[N2:.*]] = graph.rms_norm %[[H2]], %[[W]]
// CHECK-NEXT: %[[R:.*]] = graph.reshape %[[N2]]
// CHECK-NEXT: fp8.quantize %[[R]], %[[S2]]
// CHECK-NEXT: fp8.transpose
func.func @norm(%r: tensor<2x64x256xbf16>, %d: tensor<2x64x256xbf16>, %w: tensor<256xf32>) -> (tensor<2x64x256xbf16>, tensor<128x256xf8E4M3FN>, tensor<256x128xf8E4M3FN>) {
  %p:3 = kernel.fused "rms_norm" kind("row") ins(%r, %d, %w : tensor<2x64x256xbf16>, tensor<2x64x256xbf16>, tensor<256xf32>) {
  ^bb0(%a0: tensor<2x64x256xbf16>, %a1: tensor<2x64x256xbf16>, %a2: tensor<256xf32>):
    %h = graph.add %a0, %a1 : tensor<2x64x256xbf16>
    %n = graph.rms_norm %h, %a2 {eps = 1.0e-5 : f64} : (tensor<2x64x256xbf16>, tensor<256xf32>) -> tensor<2x64x256xbf16>
    %n2 = graph.reshape %n : (tensor<2x64x256xbf16>) -> tensor<128x256xbf16>
    %m = fp8.amax %n2 : (tensor<128x256xbf16>) -> tensor<f32>
    kernel.yield %h, %n, %m : tensor<2x64x256xbf16>, tensor<2x64x256xbf16>, tensor<f32>
  } : tensor<2x64x256xbf16>, tensor<2x64x256xbf16>, tensor<f32>
  %s = kernel.fused "compute_scale" kind("elementwise") ins(%p#2 : tensor<f32>) {
  ^bb0(%a: tensor<f32>):
    %c, %c_inv = fp8.compute_scale %a {dtype = f8E4M3FN} : tensor<f32>
    kernel.yield %c : tensor<f32>
  } : tensor<f32>
  %q:2 = kernel.fused "quantize" kind("elementwise") ins(%s, %p#1 : tensor<f32>, tensor<2x64x256xbf16>) {
  ^bb0(%a0: tensor<f32>, %a1: tensor<2x64x256xbf16>):
    %x = graph.reshape %a1 : (tensor<2x64x256xbf16>) -> tensor<128x256xbf16>
    %q8, %qm = fp8.quantize %x, %a0 : (tensor<128x256xbf16>, tensor<f32>) -> (tensor<128x256xf8E4M3FN>, tensor<f32>)
    %t8, %ts = fp8.transpose %q8, %a0 : (tensor<128x256xf8E4M3FN>, tensor<f32>) -> (tensor<256x128xf8E4M3FN>, tensor<f32>)
    kernel.yield %q8, %t8 : tensor<128x256xf8E4M3FN>, tensor<256x128xf8E4M3FN>
  } : tensor<128x256xf8E4M3FN>, tensor<256x128xf8E4M3FN>
  return %p#0, %q#0, %q#1 : tensor<2x64x256xbf16>, tensor<128x256xf8E4M3FN>, tensor<256x128xf8E4M3FN>
}

// SwiGLU reads 4 B (gate and up) an element of its 2 B output: as many as
// the write and read it would save. The cast reads the product.
// CHECK-LABEL: func.func @swiglu
// CHECK: %[[P:.*]]:2 = kernel.fused "swiglu"
// CHECK: kernel.fused "quantize" kind("elementwise") ins(%{{.*}}, %[[P]]#0 :
// CHECK-NEXT: ^bb0
// CHECK-NEXT: fp8.quantize
func.func @swiglu(%g: tensor<128x512xbf16>, %u: tensor<128x512xbf16>) -> tensor<128x512xf8E4M3FN> {
  %p:2 = kernel.fused "swiglu" kind("elementwise") ins(%g, %u : tensor<128x512xbf16>, tensor<128x512xbf16>) {
  ^bb0(%a0: tensor<128x512xbf16>, %a1: tensor<128x512xbf16>):
    %y = graph.swiglu %a0, %a1 : tensor<128x512xbf16>
    %m = fp8.amax %y : (tensor<128x512xbf16>) -> tensor<f32>
    kernel.yield %y, %m : tensor<128x512xbf16>, tensor<f32>
  } : tensor<128x512xbf16>, tensor<f32>
  %s = kernel.fused "compute_scale" kind("elementwise") ins(%p#1 : tensor<f32>) {
  ^bb0(%a: tensor<f32>):
    %c, %c_inv = fp8.compute_scale %a {dtype = f8E4M3FN} : tensor<f32>
    kernel.yield %c : tensor<f32>
  } : tensor<f32>
  %q = kernel.fused "quantize" kind("elementwise") ins(%s, %p#0 : tensor<f32>, tensor<128x512xbf16>) {
  ^bb0(%a0: tensor<f32>, %a1: tensor<128x512xbf16>):
    %q8, %qm = fp8.quantize %a1, %a0 : (tensor<128x512xbf16>, tensor<f32>) -> (tensor<128x512xf8E4M3FN>, tensor<f32>)
    kernel.yield %q8 : tensor<128x512xf8E4M3FN>
  } : tensor<128x512xf8E4M3FN>
  return %q : tensor<128x512xf8E4M3FN>
}

// A norm output something else reads too (saved for the backward) is
// written anyway: the cast reads it. A norm gradient (its weight gradient
// sums over all rows) is not evaluated twice.
// CHECK-LABEL: func.func @kept
// CHECK: %[[P:.*]]:2 = kernel.fused "rms_norm"
// CHECK: graph.save %[[P]]#0
// CHECK: kernel.fused "quantize" kind("elementwise") ins(%{{.*}}, %[[P]]#0 :
// CHECK: %[[G:.*]]:3 = kernel.fused "rms_norm_grad"
// CHECK: kernel.fused "quantize" kind("elementwise") ins(%{{.*}}, %[[G]]#1 :
func.func @kept(%x: tensor<128x256xbf16>, %w: tensor<256xf32>, %dy: tensor<128x256xbf16>) -> (tensor<128x256xbf16>, tensor<128x256xf8E4M3FN>, tensor<256xf32>, tensor<128x256xf8E5M2>) {
  %p:2 = kernel.fused "rms_norm" kind("row") ins(%x, %w : tensor<128x256xbf16>, tensor<256xf32>) {
  ^bb0(%a0: tensor<128x256xbf16>, %a1: tensor<256xf32>):
    %n = graph.rms_norm %a0, %a1 {eps = 1.0e-5 : f64} : (tensor<128x256xbf16>, tensor<256xf32>) -> tensor<128x256xbf16>
    %m = fp8.amax %n : (tensor<128x256xbf16>) -> tensor<f32>
    kernel.yield %n, %m : tensor<128x256xbf16>, tensor<f32>
  } : tensor<128x256xbf16>, tensor<f32>
  %saved = graph.save %p#0 : tensor<128x256xbf16>
  %s = kernel.fused "compute_scale" kind("elementwise") ins(%p#1 : tensor<f32>) {
  ^bb0(%a: tensor<f32>):
    %c, %c_inv = fp8.compute_scale %a {dtype = f8E4M3FN} : tensor<f32>
    kernel.yield %c : tensor<f32>
  } : tensor<f32>
  %q = kernel.fused "quantize" kind("elementwise") ins(%s, %p#0 : tensor<f32>, tensor<128x256xbf16>) {
  ^bb0(%a0: tensor<f32>, %a1: tensor<128x256xbf16>):
    %q8, %qm = fp8.quantize %a1, %a0 : (tensor<128x256xbf16>, tensor<f32>) -> (tensor<128x256xf8E4M3FN>, tensor<f32>)
    kernel.yield %q8 : tensor<128x256xf8E4M3FN>
  } : tensor<128x256xf8E4M3FN>
  %g:3 = kernel.fused "rms_norm_grad" kind("row") ins(%dy, %x, %w : tensor<128x256xbf16>, tensor<128x256xbf16>, tensor<256xf32>) {
  ^bb0(%a0: tensor<128x256xbf16>, %a1: tensor<128x256xbf16>, %a2: tensor<256xf32>):
    %dx, %dw = graph.rms_norm_grad %a0, %a1, %a2 {eps = 1.0e-5 : f64} : (tensor<128x256xbf16>, tensor<128x256xbf16>, tensor<256xf32>) -> (tensor<128x256xbf16>, tensor<256xf32>)
    %m = fp8.amax %dx : (tensor<128x256xbf16>) -> tensor<f32>
    kernel.yield %dw, %dx, %m : tensor<256xf32>, tensor<128x256xbf16>, tensor<f32>
  } : tensor<256xf32>, tensor<128x256xbf16>, tensor<f32>
  %gs = kernel.fused "compute_scale" kind("elementwise") ins(%g#2 : tensor<f32>) {
  ^bb0(%a: tensor<f32>):
    %c, %c_inv = fp8.compute_scale %a {dtype = f8E5M2} : tensor<f32>
    kernel.yield %c : tensor<f32>
  } : tensor<f32>
  %gq = kernel.fused "quantize" kind("elementwise") ins(%gs, %g#1 : tensor<f32>, tensor<128x256xbf16>) {
  ^bb0(%a0: tensor<f32>, %a1: tensor<128x256xbf16>):
    %q8, %qm = fp8.quantize %a1, %a0 : (tensor<128x256xbf16>, tensor<f32>) -> (tensor<128x256xf8E5M2>, tensor<f32>)
    kernel.yield %q8 : tensor<128x256xf8E5M2>
  } : tensor<128x256xf8E5M2>
  return %saved, %q, %g#0, %gq : tensor<128x256xbf16>, tensor<128x256xf8E4M3FN>, tensor<256xf32>, tensor<128x256xf8E5M2>
}
