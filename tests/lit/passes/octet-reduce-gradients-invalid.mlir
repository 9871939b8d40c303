// RUN: %octet-opt %s --octet-reduce-gradients="data-parallel=2" -verify-diagnostics

// A kernel that reads a gradient after its all-reduce has started would see
// the sum being made in its memory.
module {
  graph.variable @grad.w : tensor<16x8xf32> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%x: tensor<4x8xbf16>, %dz: tensor<4x16xbf16>) -> tensor<16x8xf32> {
    %gw = graph.load @grad.w : tensor<16x8xf32>
    %w = kernel.gemm %dz, %x accumulate(%gw) {layer = 0 : i64, param = "w", role = "wgrad", section = "backward", transpose_a} : (tensor<4x16xbf16>, tensor<4x8xbf16>, tensor<16x8xf32>) -> tensor<16x8xf32>
    graph.store %w, @grad.w : tensor<16x8xf32>
    // expected-error @below {{reads the gradient stored into @grad.w after its data-parallel all-reduce starts}}
    return %w : tensor<16x8xf32>
  }
}
