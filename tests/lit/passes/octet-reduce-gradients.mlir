// RUN: %octet-opt %s --octet-reduce-gradients="data-parallel=2 bucket-elements=100" | FileCheck %s
// RUN: %octet-opt %s --octet-reduce-gradients="data-parallel=2" | FileCheck %s --check-prefix=ONE
// RUN: %octet-opt %s --octet-reduce-gradients | FileCheck %s --check-prefix=NONE

// The backward makes the head's gradient first (64 elements), then the
// layer's weight (128) and norm (8). With buckets of at least 100 elements
// the head's and the weight's make the first bucket, reduced right after the
// weight's GEMM while the norm's kernel runs; the norm's is the second, after
// the first. Each is marked to run in the last microbatch only, on the
// communication stream, and the stores (moved after their bucket where
// they came before it) store the sums.
module {
  graph.variable @grad.head : tensor<8x8xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.w : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.norm : tensor<8xf32> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%x: tensor<4x8xbf16>, %dy: tensor<4x8xbf16>, %dz: tensor<4x16xbf16>) -> tensor<f32> {
    %gh = graph.load @grad.head : tensor<8x8xf32>
    %gw = graph.load @grad.w : tensor<16x8xf32>
    %gn = graph.load @grad.norm : tensor<8xf32>
    %h = kernel.gemm %dy, %x accumulate(%gh) {layer = -1 : i64, param = "head", role = "wgrad", section = "backward", transpose_a} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8x8xf32>) -> tensor<8x8xf32>
    graph.store %h, @grad.head : tensor<8x8xf32>
    %w = kernel.gemm %dz, %x accumulate(%gw) {layer = 0 : i64, param = "w", role = "wgrad", section = "backward", transpose_a} : (tensor<4x16xbf16>, tensor<4x8xbf16>, tensor<16x8xf32>) -> tensor<16x8xf32>
    %n = kernel.fused "layers.0.norm_grad" kind("row") ins(%gn : tensor<8xf32>) {
    ^bb0(%a: tensor<8xf32>):
      %r = graph.add %a, %a : tensor<8xf32>
      kernel.yield %r : tensor<8xf32>
    } {layer = 0 : i64, section = "backward"} : tensor<8xf32>
    %loss = graph.fill {value = 1.0 : f64} : tensor<f32>
    graph.store %n, @grad.norm : tensor<8xf32>
    graph.store %w, @grad.w : tensor<16x8xf32>
    return %loss : tensor<f32>
  }
  func.func @optimizer_step() {
    %g = graph.load @grad.w : tensor<16x8xf32>
    return
  }
}

// CHECK-LABEL: func.func @train_microbatch
// CHECK: %[[W:.*]] = kernel.gemm {{.*}}param = "w"
// CHECK-NEXT: %[[B1:.*]]:2 = kernel.collective %{{.*}}, %[[W]] {comm_stream, group = "data", group_size = 2 : i64, kind = "all_reduce", last_microbatch, layer = 0 : i64, section = "backward"} : (tensor<8x8xf32>, tensor<16x8xf32>)
// CHECK-NEXT: graph.store %[[B1]]#0, @grad.head
// CHECK-NEXT: %[[N:.*]] = kernel.fused "layers.0.norm_grad"
// CHECK: %[[B2:.*]] = kernel.collective %[[N]] {comm_stream, {{.*}}last_microbatch{{.*}}} : (tensor<8xf32>)
// CHECK: graph.store %[[B2]], @grad.norm
// CHECK-NEXT: graph.store %[[B1]]#1, @grad.w
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NOT: kernel.collective

// The default bucket (40M elements) holds all three: one all-reduce after
// the last gradient is made.
// ONE-LABEL: func.func @train_microbatch
// ONE: kernel.fused "layers.0.norm_grad"
// ONE: kernel.collective {{.*}} : (tensor<8x8xf32>, tensor<16x8xf32>, tensor<8xf32>)
// ONE-NOT: kernel.collective

// One rank: nothing to reduce.
// NONE-NOT: kernel.collective
