// RUN: %octet-opt %s --split-input-file --octet-reduce-gradients="data-parallel=2" | FileCheck %s
// RUN: %octet-opt %s --split-input-file --octet-reduce-gradients | FileCheck %s --check-prefix=NONE

// Delayed scaling: the amax all-reduce octet-lower-to-kernel placed in the
// backward, before the scale update and its stores, goes on the
// communication stream right after its amax is made (ahead of the bucket
// made later); the update and its stores move to the program's end, after
// the backward's kernels and the bucket's all-reduce.
// CHECK-LABEL: func.func @train_microbatch
// CHECK: kernel.gemm {{.*}}role = "dgrad"
// CHECK-NEXT: %[[A:.*]] = graph.fill
// CHECK-NEXT: %[[MAX:.*]] = kernel.collective %[[A]] {comm_stream, group = "data", group_size = 2 : i64, kind = "all_reduce", reduction = "max"} : (tensor<f32>) -> tensor<f32>
// CHECK-NEXT: %[[W:.*]] = kernel.gemm {{.*}}role = "wgrad"
// CHECK-NEXT: %[[B:.*]] = kernel.collective %[[W]] {comm_stream, {{.*}}kind = "all_reduce", last_microbatch
// CHECK-NEXT: graph.store %[[B]], @grad.w
// CHECK: %[[UP:.*]]:2 = kernel.fused "fp8.scale_updates" kind("multi_tensor") ins(%{{.*}}, %[[MAX]], %{{.*}} :
// CHECK-NEXT: ^bb0
// CHECK-NEXT: fp8.scale_update
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: graph.store %[[UP]]#0, @fp8.x.amax_history
// CHECK-NEXT: graph.store %[[UP]]#1, @fp8.x.scale
// CHECK-NEXT: return
module {
  graph.variable @grad.w : tensor<8x8xf32> {init = "zeros", kind = "state"}
  graph.variable @fp8.x.amax_history : tensor<4xf32> {init = "zeros", kind = "state"}
  graph.variable @fp8.x.scale : tensor<f32> {init = "ones", kind = "state"}
  func.func @train_microbatch(%x: tensor<4x8xbf16>, %dy: tensor<4x8xbf16>) -> tensor<f32> {
    %gw = graph.load @grad.w : tensor<8x8xf32>
    %hist = graph.load @fp8.x.amax_history : tensor<4xf32>
    %scale = graph.load @fp8.x.scale : tensor<f32>
    %dx = kernel.gemm %dy, %x {layer = 0 : i64, param = "w", role = "dgrad", section = "backward", transpose_b} : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x4xbf16>
    %amax = graph.fill {value = 2.0 : f64} : tensor<f32>
    %w = kernel.gemm %dy, %x accumulate(%gw) {layer = 0 : i64, param = "w", role = "wgrad", section = "backward", transpose_a} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %m = kernel.collective %amax {group = "data", group_size = 2 : i64, kind = "all_reduce", reduction = "max"} : (tensor<f32>) -> tensor<f32>
    %u:2 = kernel.fused "fp8.scale_updates" kind("multi_tensor") ins(%hist, %m, %scale : tensor<4xf32>, tensor<f32>, tensor<f32>) {
    ^bb0(%h: tensor<4xf32>, %a: tensor<f32>, %s: tensor<f32>):
      %nh, %ns, %ni = fp8.scale_update %h, %a, %s {dtype = f8E4M3FN, recipe = #fp8.recipe<kind = delayed, amax_history_len = 4>} : (tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<f32>, tensor<f32>)
      kernel.yield %nh, %ns : tensor<4xf32>, tensor<f32>
    } {layer = -1 : i64, section = "backward"} : tensor<4xf32>, tensor<f32>
    graph.store %u#0, @fp8.x.amax_history : tensor<4xf32>
    graph.store %u#1, @fp8.x.scale : tensor<f32>
    graph.store %w, @grad.w : tensor<8x8xf32>
    %loss = graph.fill {value = 1.0 : f64} : tensor<f32>
    return %loss : tensor<f32>
  }
}

// One rank: nothing moves.
// NONE-LABEL: func.func @train_microbatch
// NONE: kernel.collective %{{.*}} {group = "data", group_size = 2 : i64, kind = "all_reduce", reduction = "max"}
// NONE-NEXT: kernel.fused "fp8.scale_updates"

// -----

// A program that loads the scale state again after the update stores it
// keeps the all-reduce where it is, on the compute stream.
// CHECK-LABEL: func.func @train_microbatch
// CHECK: kernel.collective %{{.*}} {group = "data", group_size = 2 : i64, kind = "all_reduce", reduction = "max"}
// CHECK-NEXT: kernel.fused "fp8.scale_updates"
module {
  graph.variable @grad.w : tensor<8x8xf32> {init = "zeros", kind = "state"}
  graph.variable @fp8.x.amax_history : tensor<4xf32> {init = "zeros", kind = "state"}
  graph.variable @fp8.x.scale : tensor<f32> {init = "ones", kind = "state"}
  func.func @train_microbatch(%x: tensor<4x8xbf16>, %dy: tensor<4x8xbf16>, %amax: tensor<f32>) -> tensor<f32> {
    %gw = graph.load @grad.w : tensor<8x8xf32>
    %hist = graph.load @fp8.x.amax_history : tensor<4xf32>
    %scale = graph.load @fp8.x.scale : tensor<f32>
    %m = kernel.collective %amax {group = "data", group_size = 2 : i64, kind = "all_reduce", reduction = "max"} : (tensor<f32>) -> tensor<f32>
    %u:2 = kernel.fused "fp8.scale_updates" kind("multi_tensor") ins(%hist, %m, %scale : tensor<4xf32>, tensor<f32>, tensor<f32>) {
    ^bb0(%h: tensor<4xf32>, %a: tensor<f32>, %s: tensor<f32>):
      %nh, %ns, %ni = fp8.scale_update %h, %a, %s {dtype = f8E4M3FN, recipe = #fp8.recipe<kind = delayed, amax_history_len = 4>} : (tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<f32>, tensor<f32>)
      kernel.yield %nh, %ns : tensor<4xf32>, tensor<f32>
    } {layer = -1 : i64, section = "backward"} : tensor<4xf32>, tensor<f32>
    graph.store %u#0, @fp8.x.amax_history : tensor<4xf32>
    graph.store %u#1, @fp8.x.scale : tensor<f32>
    %again = graph.load @fp8.x.scale : tensor<f32>
    %w = kernel.gemm %dy, %x accumulate(%gw) {layer = 0 : i64, param = "w", role = "wgrad", section = "backward", transpose_a} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8x8xf32>) -> tensor<8x8xf32>
    graph.store %w, @grad.w : tensor<8x8xf32>
    return %again : tensor<f32>
  }
}
