// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// The launch contract codegen records (kernel.fused and attention):
// fields at their default (no dynamic shared memory, no cluster, not
// programmatic) are not printed.

// CHECK-LABEL: func.func @norm_bwd
// CHECK: kernel.fused "norm_bwd" kind("row")
// CHECK: } {kernels = [@norm_bwd::@norm_bwd, @norm_bwd::@norm_bwd_colsum], launch = [#kernel.launch<@norm_bwd::@norm_bwd, grid = 4, block = 32>, #kernel.launch<@norm_bwd::@norm_bwd_colsum, grid = 8, block = 256, programmatic>], workspace_bytes = 1024 : i64, zero_results = array<i64: 1>} : tensor<4x64xf32>, tensor<f32>
func.func @norm_bwd(%x: tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<f32>) {
  %y, %m = kernel.fused "norm_bwd" kind("row") ins(%x : tensor<4x64xf32>) {
  ^bb0(%a: tensor<4x64xf32>):
    %s = graph.silu %a : tensor<4x64xf32>
    %amax = fp8.amax %s : (tensor<4x64xf32>) -> tensor<f32>
    kernel.yield %s, %amax : tensor<4x64xf32>, tensor<f32>
  } {kernels = [@norm_bwd::@norm_bwd, @norm_bwd::@norm_bwd_colsum],
     launch = [#kernel.launch<@norm_bwd::@norm_bwd, grid = 4, block = 32>,
               #kernel.launch<@norm_bwd::@norm_bwd_colsum, grid = 8, block = 256, programmatic>],
     workspace_bytes = 1024 : i64, zero_results = array<i64: 1>} : tensor<4x64xf32>, tensor<f32>
  return %y, %m : tensor<4x64xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @clustered
// CHECK: launch = [#kernel.launch<@nqt::@nqt, grid = 4, block = 1024, shared_bytes = 205352, cluster = 2>]
func.func @clustered(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %y = kernel.fused "nqt" kind("row") ins(%x : tensor<4x64xf32>) {
  ^bb0(%a: tensor<4x64xf32>):
    %s = graph.silu %a : tensor<4x64xf32>
    kernel.yield %s : tensor<4x64xf32>
  } {launch = [#kernel.launch<@nqt::@nqt, grid = 4, block = 1024, cluster = 2, shared_bytes = 205352>]} : tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// CHECK-LABEL: func.func @attention
// CHECK: kernel.attention_fwd
// CHECK-SAME: launch = [#kernel.launch<@attention_fwd_0::@attention_fwd_0, grid = 16, block = 128, shared_bytes = 65536>]
// CHECK-SAME: workspace_bytes = 0 : i64
func.func @attention(%q: tensor<1x128x4x64xbf16>, %k: tensor<1x128x2x64xbf16>, %v: tensor<1x128x2x64xbf16>) -> (tensor<1x128x4x64xbf16>, tensor<1x4x128xf32>) {
  %o, %lse = kernel.attention_fwd %q, %k, %v {causal, scale = 0.125 : f64, kernels = [@attention_fwd_0::@attention_fwd_0], launch = [#kernel.launch<@attention_fwd_0::@attention_fwd_0, grid = 16, block = 128, shared_bytes = 65536>], workspace_bytes = 0 : i64} : (tensor<1x128x4x64xbf16>, tensor<1x128x2x64xbf16>, tensor<1x128x2x64xbf16>) -> (tensor<1x128x4x64xbf16>, tensor<1x4x128xf32>)
  return %o, %lse : tensor<1x128x4x64xbf16>, tensor<1x4x128xf32>
}
