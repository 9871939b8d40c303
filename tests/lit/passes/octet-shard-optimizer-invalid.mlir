// RUN: %octet-opt %s --split-input-file --octet-shard-optimizer="data-parallel=2" -verify-diagnostics

// A parameter whose dimension 0 does not divide into the ranks' parts
// cannot be sharded; the error names it and the fix.
module {
  graph.variable @grad.n : tensor<7xf32> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%g: tensor<7xf32>) -> tensor<7xf32> {
    // expected-error @below {{@grad.n has dimension 0 of 7, which does not divide into 2 equal data-parallel shards}}
    %s = kernel.collective %g {comm_stream, group = "data", group_size = 2 : i64, kind = "all_reduce", last_microbatch, reduction = "sum"} : (tensor<7xf32>) -> tensor<7xf32>
    graph.store %s, @grad.n : tensor<7xf32>
    return %g : tensor<7xf32>
  }
  func.func @optimizer_step() {
    return
  }
}

// -----

// An optimizer kernel that computes from its updates what is not a function
// of one updated weight (here of a moment, which a rank holds in part) is
// not sharded.
module {
  graph.variable @w : tensor<16x8xf32> {init = "normal", init_std = 2.000000e-02 : f64, kind = "weight"}
  graph.variable @grad.w : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_m.w : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_v.w : tensor<16x8xf32> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%g: tensor<16x8xf32>) {
    %s = kernel.collective %g {comm_stream, group = "data", group_size = 2 : i64, kind = "all_reduce", last_microbatch, reduction = "sum"} : (tensor<16x8xf32>) -> tensor<16x8xf32>
    graph.store %s, @grad.w : tensor<16x8xf32>
    return
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<i64>, %mult: tensor<f32>) {
    %p = graph.load @w : tensor<16x8xf32>
    %m = graph.load @adam_m.w : tensor<16x8xf32>
    %v = graph.load @adam_v.w : tensor<16x8xf32>
    %g = graph.load @grad.w : tensor<16x8xf32>
    %u:4 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins(%p, %g, %m, %v, %lr, %step, %mult : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) {
    ^bb0(%a0: tensor<16x8xf32>, %a1: tensor<16x8xf32>, %a2: tensor<16x8xf32>, %a3: tensor<16x8xf32>, %a4: tensor<f32>, %a5: tensor<i64>, %a6: tensor<f32>):
      %p1, %m1, %v1 = graph.adamw_update %a0, %a1, %a2, %a3, %a4, %a5, %a6 {beta1 = 9.000000e-01 : f64, beta2 = 9.500000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
      // expected-error @below {{neither an AdamW update nor a cast of one updated weight}}
      %c = graph.cast %m1 : (tensor<16x8xf32>) -> tensor<16x8xbf16>
      kernel.yield %p1, %m1, %v1, %c : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xbf16>
    } {layer = -1 : i64, section = "optimizer"} : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xbf16>
    graph.store %u#0, @w : tensor<16x8xf32>
    return
  }
}
