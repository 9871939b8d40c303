// RUN: %octet-opt %s --octet-split-optimizer="ranks=2" | FileCheck %s

// FP8 weight casts (current scaling): the chunks read @fp8w.w0 and
// @fp8w.w1, not the f32 parameters, so each parameter goes with its cast's
// rank, and every fp8w.<param>* variable with it. A rank's optimizer step
// drops what kernels compute from the other rank's parameter: its AdamW
// update, its amax in the amax kernel, its scale in the scale kernel
// (computed from that amax), and its cast kernel whole. The init function
// becomes one per rank, each of its own casts, and the module lists them.
module attributes {octet.init_functions = ["cache_weights"], octet.pipeline_chunks = 2 : i64} {
  graph.variable @fp8w.w0 : tensor<4xf32> {init = "zeros", kind = "state"}
  graph.variable @fp8w.w0.scale : tensor<4xf32> {init = "zeros", kind = "state"}
  graph.variable @fp8w.w1 : tensor<4xf32> {init = "zeros", kind = "state"}
  graph.variable @fp8w.w1.scale : tensor<4xf32> {init = "zeros", kind = "state"}
  graph.variable @w0 : tensor<4xf32> {init = "ones", kind = "norm"}
  graph.variable @w1 : tensor<4xf32> {init = "ones", kind = "norm"}
  graph.variable @grad.w0 : tensor<4xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.w1 : tensor<4xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_m.w0 : tensor<4xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_v.w0 : tensor<4xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_m.w1 : tensor<4xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_v.w1 : tensor<4xf32> {init = "zeros", kind = "state"}
  graph.variable @optimizer.step : tensor<i64> {init = "zeros", kind = "state"}
  func.func @stage0_forward() {
    %w = graph.load @fp8w.w0 : tensor<4xf32>
    return
  }
  func.func @stage0_backward() {
    %g = graph.load @grad.w0 : tensor<4xf32>
    graph.store %g, @grad.w0 : tensor<4xf32>
    return
  }
  func.func @stage1_forward() {
    %w = graph.load @fp8w.w1 : tensor<4xf32>
    return
  }
  func.func @stage1_backward() {
    %g = graph.load @grad.w1 : tensor<4xf32>
    graph.store %g, @grad.w1 : tensor<4xf32>
    return
  }
  func.func @optimizer_step() -> (tensor<f32> {graph.name = "grad_norm"}, tensor<f32> {graph.name = "lr"}) {
    %p0 = graph.load @w0 : tensor<4xf32>
    %m0 = graph.load @adam_m.w0 : tensor<4xf32>
    %v0 = graph.load @adam_v.w0 : tensor<4xf32>
    %g0 = graph.load @grad.w0 : tensor<4xf32>
    %p1 = graph.load @w1 : tensor<4xf32>
    %m1 = graph.load @adam_m.w1 : tensor<4xf32>
    %v1 = graph.load @adam_v.w1 : tensor<4xf32>
    %g1 = graph.load @grad.w1 : tensor<4xf32>
    %step = graph.load @optimizer.step : tensor<i64>
    %next = kernel.fused "increment" kind("elementwise") ins(%step : tensor<i64>) {
    ^bb0(%a: tensor<i64>):
      %r = graph.increment %a : tensor<i64>
      kernel.yield %r : tensor<i64>
    } {layer = -1 : i64, section = "optimizer"} : tensor<i64>
    %lr = kernel.fused "lr_schedule" kind("elementwise") ins(%next : tensor<i64>) {
    ^bb0(%a: tensor<i64>):
      %r = graph.lr_schedule %a {lr = 1.0e-02 : f64, min_lr_ratio = 1.0e-01 : f64, total_steps = 3 : i64, warmup_steps = 1 : i64} : (tensor<i64>) -> tensor<f32>
      kernel.yield %r : tensor<f32>
    } {layer = -1 : i64, section = "optimizer"} : tensor<f32>
    %norm = kernel.fused "global_norm" kind("elementwise") ins(%g0, %g1 : tensor<4xf32>, tensor<4xf32>) {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
      %r = graph.global_norm %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
      kernel.yield %r : tensor<f32>
    } {layer = -1 : i64, section = "optimizer"} : tensor<f32>
    %clip = kernel.fused "clip_scale" kind("elementwise") ins(%norm : tensor<f32>) {
    ^bb0(%a: tensor<f32>):
      %r = graph.clip_scale %a {max_norm = 1.0 : f64} : tensor<f32>
      kernel.yield %r : tensor<f32>
    } {layer = -1 : i64, section = "optimizer"} : tensor<f32>
    %zero = kernel.fused "fill" kind("elementwise") {
      %r = graph.fill {value = 0.0 : f64} : tensor<4xf32>
      kernel.yield %r : tensor<4xf32>
    } {layer = -1 : i64, section = "optimizer"} : tensor<4xf32>
    %new:6 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins(%p0, %g0, %m0, %v0, %lr, %next, %clip, %p1, %g1, %m1, %v1 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>, tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
    ^bb0(%a0: tensor<4xf32>, %a1: tensor<4xf32>, %a2: tensor<4xf32>, %a3: tensor<4xf32>, %a4: tensor<f32>, %a5: tensor<i64>, %a6: tensor<f32>, %a7: tensor<4xf32>, %a8: tensor<4xf32>, %a9: tensor<4xf32>, %a10: tensor<4xf32>):
      %q0, %n0, %s0 = graph.adamw_update %a0, %a1, %a2, %a3, %a4, %a5, %a6 {beta1 = 9.0e-01 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      %q1, %n1, %s1 = graph.adamw_update %a7, %a8, %a9, %a10, %a4, %a5, %a6 {beta1 = 9.0e-01 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      kernel.yield %q0, %n0, %s0, %q1, %n1, %s1 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
    } {layer = -1 : i64, section = "optimizer"} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
    %amax:2 = kernel.fused "optimizer.fp8_weight_amax" kind("multi_tensor") ins(%new#0, %new#3 : tensor<4xf32>, tensor<4xf32>) {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
      %ra = graph.add %a, %a : tensor<4xf32>
      %rb = graph.add %b, %b : tensor<4xf32>
      kernel.yield %ra, %rb : tensor<4xf32>, tensor<4xf32>
    } {layer = -1 : i64, section = "optimizer"} : tensor<4xf32>, tensor<4xf32>
    %scales:2 = kernel.fused "fp8.scale_updates" kind("multi_tensor") ins(%amax#0, %amax#1 : tensor<4xf32>, tensor<4xf32>) {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
      %ra = graph.add %a, %a : tensor<4xf32>
      %rb = graph.add %b, %b : tensor<4xf32>
      kernel.yield %ra, %rb : tensor<4xf32>, tensor<4xf32>
    } {layer = -1 : i64, section = "optimizer"} : tensor<4xf32>, tensor<4xf32>
    %cast0 = kernel.fused "optimizer.fp8_weights" kind("elementwise") ins(%new#0 : tensor<4xf32>) {
    ^bb0(%a: tensor<4xf32>):
      %r = graph.add %a, %a : tensor<4xf32>
      kernel.yield %r : tensor<4xf32>
    } {layer = -1 : i64, section = "optimizer"} : tensor<4xf32>
    %cast1 = kernel.fused "optimizer.fp8_weights" kind("elementwise") ins(%new#3 : tensor<4xf32>) {
    ^bb0(%a: tensor<4xf32>):
      %r = graph.add %a, %a : tensor<4xf32>
      kernel.yield %r : tensor<4xf32>
    } {layer = -1 : i64, section = "optimizer"} : tensor<4xf32>
    graph.store %cast0, @fp8w.w0 : tensor<4xf32>
    graph.store %scales#0, @fp8w.w0.scale : tensor<4xf32>
    graph.store %cast1, @fp8w.w1 : tensor<4xf32>
    graph.store %scales#1, @fp8w.w1.scale : tensor<4xf32>
    graph.store %next, @optimizer.step : tensor<i64>
    graph.store %new#0, @w0 : tensor<4xf32>
    graph.store %new#1, @adam_m.w0 : tensor<4xf32>
    graph.store %new#2, @adam_v.w0 : tensor<4xf32>
    graph.store %zero, @grad.w0 : tensor<4xf32>
    graph.store %new#3, @w1 : tensor<4xf32>
    graph.store %new#4, @adam_m.w1 : tensor<4xf32>
    graph.store %new#5, @adam_v.w1 : tensor<4xf32>
    graph.store %zero, @grad.w1 : tensor<4xf32>
    return %norm, %lr : tensor<f32>, tensor<f32>
  }
  func.func @cache_weights() {
    %p0 = graph.load @w0 : tensor<4xf32>
    %p1 = graph.load @w1 : tensor<4xf32>
    %amax:2 = kernel.fused "optimizer.fp8_weight_amax" kind("multi_tensor") ins(%p0, %p1 : tensor<4xf32>, tensor<4xf32>) {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
      %ra = graph.add %a, %a : tensor<4xf32>
      %rb = graph.add %b, %b : tensor<4xf32>
      kernel.yield %ra, %rb : tensor<4xf32>, tensor<4xf32>
    } {layer = -1 : i64, section = "optimizer"} : tensor<4xf32>, tensor<4xf32>
    graph.store %amax#0, @fp8w.w0.scale : tensor<4xf32>
    graph.store %amax#1, @fp8w.w1.scale : tensor<4xf32>
    return
  }
}

// CHECK: module attributes {octet.init_functions = ["rank0_cache_weights", "rank1_cache_weights"]
// CHECK-DAG: graph.variable @fp8w.w0.scale {{.*}}pipeline_rank = 0
// CHECK-DAG: graph.variable @fp8w.w1 {{.*}}pipeline_rank = 1
// CHECK-DAG: graph.variable @w0 {{.*}}pipeline_rank = 0
// CHECK-DAG: graph.variable @adam_m.w1 {{.*}}pipeline_rank = 1
// CHECK-LABEL: func.func @rank0_optimizer_step
// CHECK-NOT: @w1
// CHECK: graph.adamw_update
// CHECK-NOT: graph.adamw_update
// CHECK: kernel.fused "optimizer.fp8_weight_amax" {{.*}}ins(%{{[^,]*}} : tensor<4xf32>)
// CHECK: kernel.fused "fp8.scale_updates" {{.*}}ins(%{{[^,]*}} : tensor<4xf32>)
// CHECK: kernel.fused "optimizer.fp8_weights"
// CHECK-NOT: kernel.fused "optimizer.fp8_weights"
// CHECK: graph.store {{.*}} @fp8w.w0
// CHECK: graph.store {{.*}} @fp8w.w0.scale
// CHECK-NOT: @fp8w.w1
// CHECK-NOT: @w1
// CHECK-LABEL: func.func @rank1_optimizer_step
// CHECK-NOT: @fp8w.w0
// CHECK: graph.store {{.*}} @fp8w.w1.scale
// CHECK-LABEL: func.func @rank0_cache_weights
// CHECK-NOT: @w1
// CHECK: graph.store {{.*}} @fp8w.w0.scale
// CHECK-NEXT: return
// CHECK-LABEL: func.func @rank1_cache_weights
// CHECK-NOT: @w0
// CHECK: graph.store {{.*}} @fp8w.w1.scale
// CHECK-NEXT: return
// CHECK-NOT: func.func @cache_weights
