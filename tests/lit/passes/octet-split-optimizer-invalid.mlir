// RUN: %octet-opt %s --octet-split-optimizer="ranks=2" --split-input-file --verify-diagnostics

// A variable both ranks' chunks read (tied embeddings) has no one owner.
module attributes {octet.pipeline_chunks = 2 : i64} {
  graph.variable @w : tensor<4xf32> {init = "ones", kind = "norm"}
  func.func @stage0_forward() {
    %w = graph.load @w : tensor<4xf32>
    return
  }
  func.func @stage0_backward() {
    return
  }
  func.func @stage1_forward() {
    // expected-error @+1 {{@w is used by chunks on pipeline ranks 0 and 1}}
    %w = graph.load @w : tensor<4xf32>
    return
  }
  func.func @stage1_backward() {
    return
  }
  func.func @optimizer_step() {
    return
  }
}

// -----

// Three chunks do not go round two ranks.
// expected-error @+1 {{3 pipeline chunks do not divide into 2 ranks}}
module attributes {octet.pipeline_chunks = 3 : i64} {
  func.func @optimizer_step() {
    return
  }
}
