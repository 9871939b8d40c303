// RUN: %octet-opt %s --octet-recompute-kmajor --canonicalize | FileCheck %s

// SwiGLU's K-major FP8 copy for w_down's wgrad: the SwiGLU gradient kernel
// reads the saved gate and up, so it casts the copy again with the same
// state-loaded scale, the wgrad moves after it, and the forward kernel no
// longer writes the copy (nor is it saved). The kernel also yields the
// row-major cast, which codegen's transpose launch reads from memory.
// CHECK-LABEL: func.func @swiglu
// CHECK: %[[SCALE:.*]] = graph.load @fp8.layers.0.mlp.w_down.x.scale
// CHECK: %[[F:.*]]:4 = kernel.fused "layers.0.swiglu" kind("elementwise") ins(%arg0, %[[SCALE]] :
// CHECK-NOT: fp8.transpose
// CHECK: kernel.yield %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<128x64xbf16>, tensor<128x64xbf16>, tensor<128x64xf8E4M3FN>, tensor<f32>
// CHECK: %[[G:.*]] = graph.save %[[F]]#0
// CHECK: %[[U:.*]] = graph.save %[[F]]#1
// CHECK-NOT: graph.save
// CHECK: %[[B:.*]]:3 = kernel.fused "layers.0.swiglu_grad" kind("elementwise") ins(%[[SCALE]], %[[U]], %[[G]], %arg1 :
// CHECK-NEXT: ^bb0(%[[S2:.*]]: tensor<f32>, %[[U2:.*]]: tensor<128x64xbf16>, %[[G2:.*]]: tensor<128x64xbf16>,
// CHECK-NEXT: %[[Y:.*]] = graph.swiglu %[[G2]], %[[U2]]
// CHECK-NEXT: %[[Q:.*]], %{{.*}} = fp8.quantize %[[Y]], %[[S2]] {recomputed, tensor = "layers.0.mlp.w_down.x"}
// CHECK-NEXT: %[[QT:.*]], %{{.*}} = fp8.transpose %[[Q]], %[[S2]]
// CHECK-NEXT: graph.swiglu_grad
// CHECK: kernel.yield %[[QT]], %{{.*}}, %[[Q]] : tensor<64x128xf8E4M3FN>, tensor<128x128xbf16>, tensor<128x64xf8E4M3FN>
// CHECK: kernel.gemm %arg3, %[[B]]#0 scales_inv(%{{.*}}, %{{.*}}) accumulate(%arg4) {{.*}}role = "wgrad"
// CHECK: return %[[B]]#1
graph.variable @fp8.layers.0.mlp.w_down.x.scale : tensor<f32> {init = "ones", kind = "state"}
graph.variable @fp8.layers.0.mlp.w_down.x.scale_inv : tensor<f32> {init = "ones", kind = "state"}
func.func @swiglu(%gu: tensor<128x128xbf16>, %dh: tensor<128x64xbf16>, %dscale: tensor<f32>, %dyT: tensor<32x128xf8E5M2>, %acc: tensor<32x64xf32>) -> (tensor<128x128xbf16>, tensor<32x64xf32>, tensor<128x64xf8E4M3FN>, tensor<f32>) {
  %scale = graph.load @fp8.layers.0.mlp.w_down.x.scale : tensor<f32>
  %inv = graph.load @fp8.layers.0.mlp.w_down.x.scale_inv : tensor<f32>
  %f:6 = kernel.fused "layers.0.swiglu" kind("elementwise") ins(%gu, %scale : tensor<128x128xbf16>, tensor<f32>) {
  ^bb0(%a0: tensor<128x128xbf16>, %a1: tensor<f32>):
    %g = graph.slice %a0 {dim = 1 : i64, offset = 0 : i64} : (tensor<128x128xbf16>) -> tensor<128x64xbf16>
    %u = graph.slice %a0 {dim = 1 : i64, offset = 64 : i64} : (tensor<128x128xbf16>) -> tensor<128x64xbf16>
    %y = graph.swiglu %g, %u : tensor<128x64xbf16>
    %q, %m = fp8.quantize %y, %a1 {amax_reduce = ["data", "tensor"], tensor = "layers.0.mlp.w_down.x"} : (tensor<128x64xbf16>, tensor<f32>) -> (tensor<128x64xf8E4M3FN>, tensor<f32>)
    %qt, %s = fp8.transpose %q, %a1 : (tensor<128x64xf8E4M3FN>, tensor<f32>) -> (tensor<64x128xf8E4M3FN>, tensor<f32>)
    kernel.yield %g, %u, %q, %m, %qt, %s : tensor<128x64xbf16>, tensor<128x64xbf16>, tensor<128x64xf8E4M3FN>, tensor<f32>, tensor<64x128xf8E4M3FN>, tensor<f32>
  } : tensor<128x64xbf16>, tensor<128x64xbf16>, tensor<128x64xf8E4M3FN>, tensor<f32>, tensor<64x128xf8E4M3FN>, tensor<f32>
  %gs = graph.save %f#0 : tensor<128x64xbf16>
  %us = graph.save %f#1 : tensor<128x64xbf16>
  %qts = graph.save %f#4 : tensor<64x128xf8E4M3FN>
  %dw = kernel.gemm %dyT, %qts scales_inv(%dscale, %inv) accumulate(%acc) {param = "layers.0.mlp.w_down", role = "wgrad", transpose_b} : (tensor<32x128xf8E5M2>, tensor<64x128xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  %b = kernel.fused "layers.0.swiglu_grad" kind("elementwise") ins(%dh, %gs, %us : tensor<128x64xbf16>, tensor<128x64xbf16>, tensor<128x64xbf16>) {
  ^bb0(%a0: tensor<128x64xbf16>, %a1: tensor<128x64xbf16>, %a2: tensor<128x64xbf16>):
    %gg, %ug = graph.swiglu_grad %a0, %a1, %a2 : tensor<128x64xbf16>
    %c = graph.concat %gg, %ug {dim = 1 : i64} : (tensor<128x64xbf16>, tensor<128x64xbf16>) -> tensor<128x128xbf16>
    kernel.yield %c : tensor<128x128xbf16>
  } : tensor<128x128xbf16>
  return %b, %dw, %f#2, %f#3 : tensor<128x128xbf16>, tensor<32x64xf32>, tensor<128x64xf8E4M3FN>, tensor<f32>
}

// A scale that is no state load (under current scaling it comes from the
// step's own amax) is not repeated: the copy stays saved.
// CHECK-LABEL: func.func @computed_scale
// CHECK: fp8.transpose
// CHECK: %[[QTS:.*]] = graph.save %{{.*}}#3
// CHECK: kernel.gemm %arg4, %[[QTS]]
func.func @computed_scale(%gu: tensor<128x128xbf16>, %scale: tensor<f32>, %dh: tensor<128x64xbf16>, %dscale: tensor<f32>, %dyT: tensor<32x128xf8E5M2>, %acc: tensor<32x64xf32>) -> (tensor<128x128xbf16>, tensor<32x64xf32>, tensor<128x64xf8E4M3FN>) {
  %f:4 = kernel.fused "layers.0.swiglu" kind("elementwise") ins(%gu, %scale : tensor<128x128xbf16>, tensor<f32>) {
  ^bb0(%a0: tensor<128x128xbf16>, %a1: tensor<f32>):
    %g = graph.slice %a0 {dim = 1 : i64, offset = 0 : i64} : (tensor<128x128xbf16>) -> tensor<128x64xbf16>
    %u = graph.slice %a0 {dim = 1 : i64, offset = 64 : i64} : (tensor<128x128xbf16>) -> tensor<128x64xbf16>
    %y = graph.swiglu %g, %u : tensor<128x64xbf16>
    %q, %m = fp8.quantize %y, %a1 : (tensor<128x64xbf16>, tensor<f32>) -> (tensor<128x64xf8E4M3FN>, tensor<f32>)
    %qt, %s = fp8.transpose %q, %a1 : (tensor<128x64xf8E4M3FN>, tensor<f32>) -> (tensor<64x128xf8E4M3FN>, tensor<f32>)
    kernel.yield %g, %u, %q, %qt : tensor<128x64xbf16>, tensor<128x64xbf16>, tensor<128x64xf8E4M3FN>, tensor<64x128xf8E4M3FN>
  } : tensor<128x64xbf16>, tensor<128x64xbf16>, tensor<128x64xf8E4M3FN>, tensor<64x128xf8E4M3FN>
  %gs = graph.save %f#0 : tensor<128x64xbf16>
  %us = graph.save %f#1 : tensor<128x64xbf16>
  %qts = graph.save %f#3 : tensor<64x128xf8E4M3FN>
  %dw = kernel.gemm %dyT, %qts scales_inv(%dscale, %dscale) accumulate(%acc) {role = "wgrad", transpose_b} : (tensor<32x128xf8E5M2>, tensor<64x128xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  %b = kernel.fused "layers.0.swiglu_grad" kind("elementwise") ins(%dh, %gs, %us : tensor<128x64xbf16>, tensor<128x64xbf16>, tensor<128x64xbf16>) {
  ^bb0(%a0: tensor<128x64xbf16>, %a1: tensor<128x64xbf16>, %a2: tensor<128x64xbf16>):
    %gg, %ug = graph.swiglu_grad %a0, %a1, %a2 : tensor<128x64xbf16>
    %c = graph.concat %gg, %ug {dim = 1 : i64} : (tensor<128x64xbf16>, tensor<128x64xbf16>) -> tensor<128x128xbf16>
    kernel.yield %c : tensor<128x128xbf16>
  } : tensor<128x128xbf16>
  return %b, %dw, %f#2 : tensor<128x128xbf16>, tensor<32x64xf32>, tensor<128x64xf8E4M3FN>
}

// An RMSNorm's K-major FP8 copy for the wgrad of the GEMM it feeds: the
// norm's backward kernel reads the saved norm input (here the residual sum
// the forward kernel yields) and the weight (a state load), so it
// normalises again and casts with the same state-loaded scale; the wgrad
// moves after it and the forward kernel no longer writes the copy.
// CHECK-LABEL: func.func @norm
// CHECK: %[[W:.*]] = graph.load @layers.0.mlp_norm
// CHECK: %[[SCALE:.*]] = graph.load @fp8.layers.0.mlp.w_gate_up.x.scale
// CHECK: %[[F:.*]]:3 = kernel.fused "layers.0.rms_norm" kind("row") ins(%arg0, %arg1, %[[W]], %[[SCALE]] :
// CHECK-NOT: fp8.transpose
// CHECK: kernel.yield %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x64x128xbf16>, tensor<128x128xf8E4M3FN>, tensor<f32>
// CHECK: %[[X:.*]] = graph.save %[[F]]#0
// CHECK-NOT: graph.save
// CHECK: %[[B:.*]]:4 = kernel.fused "layers.0.rms_norm_grad" kind("row") ins(%[[SCALE]], %[[W]], %[[X]], %arg2, %arg3 :
// CHECK-NEXT: ^bb0(%[[S2:[^:]*]]: tensor<f32>, %[[W2:[^:]*]]: tensor<128xf32>, %[[X2:[^:]*]]: tensor<2x64x128xbf16>,
// CHECK-NEXT: %[[N:.*]] = graph.rms_norm %[[X2]], %[[W2]] {eps = 1.000000e-05 : f64}
// CHECK-NEXT: %[[NR:.*]] = graph.reshape %[[N]]
// CHECK-NEXT: %[[Q:.*]], %{{.*}} = fp8.quantize %[[NR]], %[[S2]] {recomputed, tensor = "layers.0.mlp.w_gate_up.x"}
// CHECK-NEXT: %[[QT:.*]], %{{.*}} = fp8.transpose %[[Q]], %[[S2]]
// CHECK-NEXT: graph.rms_norm_grad
// CHECK: kernel.yield %[[QT]], %{{.*}}, %{{.*}}, %[[Q]] : tensor<128x128xf8E4M3FN>, tensor<2x64x128xbf16>, tensor<128xf32>, tensor<128x128xf8E4M3FN>
// CHECK: kernel.gemm %arg4, %[[B]]#0 scales_inv(%{{.*}}, %{{.*}}) accumulate(%arg5) {{.*}}role = "wgrad"
// CHECK: return %[[B]]#1
graph.variable @layers.0.mlp_norm : tensor<128xf32> {init = "ones", kind = "norm"}
graph.variable @fp8.layers.0.mlp.w_gate_up.x.scale : tensor<f32> {init = "ones", kind = "state"}
graph.variable @fp8.layers.0.mlp.w_gate_up.x.scale_inv : tensor<f32> {init = "ones", kind = "state"}
func.func @norm(%h: tensor<2x64x128xbf16>, %o: tensor<2x64x128xbf16>, %dx: tensor<2x64x128xbf16>, %dw: tensor<128xf32>, %dyT: tensor<256x128xf8E5M2>, %acc: tensor<256x128xf32>, %dscale: tensor<f32>) -> (tensor<2x64x128xbf16>, tensor<256x128xf32>, tensor<128xf32>, tensor<128x128xf8E4M3FN>, tensor<f32>) {
  %w = graph.load @layers.0.mlp_norm : tensor<128xf32>
  %scale = graph.load @fp8.layers.0.mlp.w_gate_up.x.scale : tensor<f32>
  %inv = graph.load @fp8.layers.0.mlp.w_gate_up.x.scale_inv : tensor<f32>
  %f:5 = kernel.fused "layers.0.rms_norm" kind("row") ins(%h, %o, %w, %scale : tensor<2x64x128xbf16>, tensor<2x64x128xbf16>, tensor<128xf32>, tensor<f32>) {
  ^bb0(%a0: tensor<2x64x128xbf16>, %a1: tensor<2x64x128xbf16>, %a2: tensor<128xf32>, %a3: tensor<f32>):
    %x = graph.add %a0, %a1 : tensor<2x64x128xbf16>
    %n = graph.rms_norm %x, %a2 {eps = 1.000000e-05 : f64} : (tensor<2x64x128xbf16>, tensor<128xf32>) -> tensor<2x64x128xbf16>
    %r = graph.reshape %n : (tensor<2x64x128xbf16>) -> tensor<128x128xbf16>
    %q, %m = fp8.quantize %r, %a3 {amax_reduce = ["data", "tensor"], tensor = "layers.0.mlp.w_gate_up.x"} : (tensor<128x128xbf16>, tensor<f32>) -> (tensor<128x128xf8E4M3FN>, tensor<f32>)
    %qt, %s = fp8.transpose %q, %a3 : (tensor<128x128xf8E4M3FN>, tensor<f32>) -> (tensor<128x128xf8E4M3FN>, tensor<f32>)
    kernel.yield %x, %q, %m, %qt, %s : tensor<2x64x128xbf16>, tensor<128x128xf8E4M3FN>, tensor<f32>, tensor<128x128xf8E4M3FN>, tensor<f32>
  } : tensor<2x64x128xbf16>, tensor<128x128xf8E4M3FN>, tensor<f32>, tensor<128x128xf8E4M3FN>, tensor<f32>
  %xs = graph.save %f#0 : tensor<2x64x128xbf16>
  %qts = graph.save %f#3 : tensor<128x128xf8E4M3FN>
  %g = kernel.gemm %dyT, %qts scales_inv(%dscale, %inv) accumulate(%acc) {param = "layers.0.mlp.w_gate_up", role = "wgrad", transpose_b} : (tensor<256x128xf8E5M2>, tensor<128x128xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<256x128xf32>) -> tensor<256x128xf32>
  %b:2 = kernel.fused "layers.0.rms_norm_grad" kind("row") ins(%dx, %xs, %w, %dw : tensor<2x64x128xbf16>, tensor<2x64x128xbf16>, tensor<128xf32>, tensor<128xf32>) {
  ^bb0(%a0: tensor<2x64x128xbf16>, %a1: tensor<2x64x128xbf16>, %a2: tensor<128xf32>, %a3: tensor<128xf32>):
    %ig, %wg = graph.rms_norm_grad %a0, %a1, %a2 {eps = 1.000000e-05 : f64} : (tensor<2x64x128xbf16>, tensor<2x64x128xbf16>, tensor<128xf32>) -> (tensor<2x64x128xbf16>, tensor<128xf32>)
    %acc2 = graph.add %a3, %wg : tensor<128xf32>
    kernel.yield %ig, %acc2 : tensor<2x64x128xbf16>, tensor<128xf32>
  } : tensor<2x64x128xbf16>, tensor<128xf32>
  return %b#0, %g, %b#1, %f#1, %f#2 : tensor<2x64x128xbf16>, tensor<256x128xf32>, tensor<128xf32>, tensor<128x128xf8E4M3FN>, tensor<f32>
}

// The attention output's K-major FP8 copy for wo's wgrad: the forward casts
// a reshape of the attention output, which is saved for the attention
// backward (no kernel.fused reads it there), so a kernel of its own casts
// the saved output again, through the same reshape and with the same
// state-loaded scale, just before the wgrad; it yields the row-major cast
// too (its transpose launch writes both).
// CHECK-LABEL: func.func @attention_output
// CHECK: %[[SCALE:.*]] = graph.load @fp8.layers.0.attn.wo.x.scale
// CHECK: %[[O:.*]] = graph.save %arg0 : tensor<2x64x2x64xbf16>
// CHECK: kernel.fused "layers.0.quantize" kind("elementwise")
// CHECK-NOT: fp8.transpose
// CHECK: kernel.yield %{{.*}}, %{{.*}} : tensor<128x128xf8E4M3FN>, tensor<f32>
// CHECK-NOT: graph.save
// CHECK: %[[C:.*]]:2 = kernel.fused "layers.0.quantize" kind("elementwise") ins(%[[SCALE]], %[[O]] : tensor<f32>, tensor<2x64x2x64xbf16>) {
// CHECK-NEXT: ^bb0(%[[S2:[^:]*]]: tensor<f32>, %[[O2:[^:]*]]: tensor<2x64x2x64xbf16>):
// CHECK-NEXT: %[[R:.*]] = graph.reshape %[[O2]] : (tensor<2x64x2x64xbf16>) -> tensor<128x128xbf16>
// CHECK-NEXT: %[[Q:.*]], %{{.*}} = fp8.quantize %[[R]], %[[S2]] {recomputed, tensor = "layers.0.attn.wo.x"}
// CHECK-NEXT: %[[QT:.*]], %{{.*}} = fp8.transpose %[[Q]], %[[S2]]
// CHECK-NEXT: kernel.yield %[[QT]], %[[Q]] : tensor<128x128xf8E4M3FN>, tensor<128x128xf8E4M3FN>
// CHECK-NEXT: } {layer = 0 : i64, section = "backward"}
// CHECK-NEXT: kernel.gemm %arg1, %[[C]]#0 {{.*}}role = "wgrad"
// CHECK: return %{{.*}}, %[[O]]
graph.variable @fp8.layers.0.attn.wo.x.scale : tensor<f32> {init = "ones", kind = "state"}
graph.variable @fp8.layers.0.attn.wo.x.scale_inv : tensor<f32> {init = "ones", kind = "state"}
func.func @attention_output(%out: tensor<2x64x2x64xbf16>, %dyT: tensor<128x128xf8E5M2>, %acc: tensor<128x128xf32>, %dscale: tensor<f32>) -> (tensor<128x128xf32>, tensor<2x64x2x64xbf16>, tensor<128x128xf8E4M3FN>, tensor<f32>) {
  %scale = graph.load @fp8.layers.0.attn.wo.x.scale : tensor<f32>
  %inv = graph.load @fp8.layers.0.attn.wo.x.scale_inv : tensor<f32>
  %os = graph.save %out : tensor<2x64x2x64xbf16>
  %r1 = graph.reshape %out : (tensor<2x64x2x64xbf16>) -> tensor<2x64x128xbf16>
  %r2 = graph.reshape %r1 : (tensor<2x64x128xbf16>) -> tensor<128x128xbf16>
  %f:4 = kernel.fused "layers.0.quantize" kind("elementwise") ins(%r2, %scale : tensor<128x128xbf16>, tensor<f32>) {
  ^bb0(%a0: tensor<128x128xbf16>, %a1: tensor<f32>):
    %q, %m = fp8.quantize %a0, %a1 {amax_reduce = ["data", "tensor"], tensor = "layers.0.attn.wo.x"} : (tensor<128x128xbf16>, tensor<f32>) -> (tensor<128x128xf8E4M3FN>, tensor<f32>)
    %qt, %s = fp8.transpose %q, %a1 : (tensor<128x128xf8E4M3FN>, tensor<f32>) -> (tensor<128x128xf8E4M3FN>, tensor<f32>)
    kernel.yield %q, %m, %qt, %s : tensor<128x128xf8E4M3FN>, tensor<f32>, tensor<128x128xf8E4M3FN>, tensor<f32>
  } {layer = 0 : i64, section = "forward"} : tensor<128x128xf8E4M3FN>, tensor<f32>, tensor<128x128xf8E4M3FN>, tensor<f32>
  %qts = graph.save %f#2 : tensor<128x128xf8E4M3FN>
  %g = kernel.gemm %dyT, %qts scales_inv(%dscale, %inv) accumulate(%acc) {layer = 0 : i64, param = "layers.0.attn.wo", role = "wgrad", section = "backward", transpose_b} : (tensor<128x128xf8E5M2>, tensor<128x128xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<128x128xf32>) -> tensor<128x128xf32>
  return %g, %os, %f#0, %f#1 : tensor<128x128xf32>, tensor<2x64x2x64xbf16>, tensor<128x128xf8E4M3FN>, tensor<f32>
}
