// RUN: %octet-opt %s --split-input-file --verify-diagnostics --octet-split-weight-gradients

// Only a module octet-split-stages cut.
// expected-error @+1 {{octet-split-weight-gradients: the module is not cut into pipeline chunks; run octet-split-stages first}}
module {
}

// -----

// The gradient sent back must not wait for a weight gradient.
module attributes {octet.pipeline_chunks = 1 : i64} {
  graph.variable @grad.w : tensor<4x4xf32> {init = "zeros", kind = "state"}
  func.func @stage0_backward(%x: tensor<4x4xf32>, %dy: tensor<4x4xf32>) -> tensor<4x4xf32> attributes {octet.stash_args = 1 : i64} {
    %acc = graph.load @grad.w : tensor<4x4xf32>
    %gw = kernel.gemm %dy, %x accumulate(%acc) {role = "wgrad", transpose_a} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    // expected-error @+1 {{octet-split-weight-gradients: the gradient @stage0_backward sends to the previous chunk is made by 'graph.add', which reads a weight gradient; ZB-H1 sends it before the weight gradients run}}
    %dx = graph.add %gw, %dy : tensor<4x4xf32>
    graph.store %gw, @grad.w : tensor<4x4xf32>
    return %dx : tensor<4x4xf32>
  }
}

// -----

// State written by B (a delayed scale) and read by W's cast would be read
// after later microbatches' B wrote it.
module attributes {octet.pipeline_chunks = 1 : i64} {
  graph.variable @grad.w : tensor<4x4xf32> {init = "zeros", kind = "state"}
  graph.variable @scale : tensor<4x4xf32> {init = "zeros", kind = "state"}
  func.func @stage0_backward(%x: tensor<4x4xf32>, %dy: tensor<4x4xf32>) -> tensor<4x4xf32> attributes {octet.stash_args = 1 : i64} {
    // expected-error @+1 {{octet-split-weight-gradients: @scale is written by the input-gradient half of @stage0_backward and read by the other, which runs after it under ZB-H1; only state each half keeps to itself can be split}}
    %s = graph.load @scale : tensor<4x4xf32>
    %dys = graph.add %dy, %s : tensor<4x4xf32>
    %s2 = graph.add %s, %dy : tensor<4x4xf32>
    graph.store %s2, @scale : tensor<4x4xf32>
    %acc = graph.load @grad.w : tensor<4x4xf32>
    %xs = graph.add %x, %s : tensor<4x4xf32>
    %gw = kernel.gemm %dys, %xs accumulate(%acc) {role = "wgrad", transpose_a} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    graph.store %gw, @grad.w : tensor<4x4xf32>
    return %dys : tensor<4x4xf32>
  }
}
