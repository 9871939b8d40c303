// RUN: %octet-opt %s --split-input-file --octet-shard-optimizer="data-parallel=2" | FileCheck %s
// RUN: %octet-opt %s --split-input-file --octet-shard-optimizer="data-parallel=2 shard-cast-weights=0" | FileCheck %s --check-prefix=FP8
// RUN: %octet-opt %s --split-input-file --octet-shard-optimizer="data-parallel=2" | FileCheck %s --check-prefix=PARTS
// RUN: %octet-opt %s --split-input-file --octet-shard-optimizer | FileCheck %s --check-prefix=NONE
// RUN: %octet-opt %s --split-input-file --octet-shard-optimizer="data-parallel=2" | FileCheck %s --check-prefix=CURRENT

// Two parameters, one gradient bucket (as octet-reduce-gradients leaves
// it). Sharded over two ranks: the bucket is reduce-scattered in place;
// the optimizer reads each rank's half of the parameters and gradients,
// keeps half of each moment, all-gathers the new halves into the
// parameters on the communication stream, and joins the ranks' gradient
// norms.
module {
  graph.variable @w : tensor<16x8xf32> {init = "normal", init_std = 2.000000e-02 : f64, kind = "weight"}
  graph.variable @n : tensor<8xf32> {init = "ones", kind = "norm"}
  graph.variable @grad.w : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_m.w : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_v.w : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.n : tensor<8xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_m.n : tensor<8xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_v.n : tensor<8xf32> {init = "zeros", kind = "state"}
  graph.variable @optimizer.step : tensor<i64> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%x: tensor<4x8xbf16>, %dz: tensor<4x16xbf16>) -> tensor<f32> {
    %gw = graph.load @grad.w : tensor<16x8xf32>
    %gn = graph.load @grad.n : tensor<8xf32>
    %w = kernel.gemm %dz, %x accumulate(%gw) {layer = 0 : i64, param = "w", role = "wgrad", section = "backward", transpose_a} : (tensor<4x16xbf16>, tensor<4x8xbf16>, tensor<16x8xf32>) -> tensor<16x8xf32>
    %n = kernel.fused "layers.0.norm_grad" kind("row") ins(%gn : tensor<8xf32>) {
    ^bb0(%a: tensor<8xf32>):
      %r = graph.add %a, %a : tensor<8xf32>
      kernel.yield %r : tensor<8xf32>
    } {layer = 0 : i64, section = "backward"} : tensor<8xf32>
    %s:2 = kernel.collective %w, %n {comm_stream, group = "data", group_size = 2 : i64, kind = "all_reduce", last_microbatch, layer = 0 : i64, reduction = "sum", section = "backward"} : (tensor<16x8xf32>, tensor<8xf32>) -> (tensor<16x8xf32>, tensor<8xf32>)
    graph.store %s#0, @grad.w : tensor<16x8xf32>
    graph.store %s#1, @grad.n : tensor<8xf32>
    %loss = graph.fill {value = 1.0 : f64} : tensor<f32>
    return %loss : tensor<f32>
  }
  func.func @optimizer_step() -> (tensor<f32> {graph.name = "grad_norm"}) {
    %p = graph.load @w : tensor<16x8xf32>
    %m = graph.load @adam_m.w : tensor<16x8xf32>
    %v = graph.load @adam_v.w : tensor<16x8xf32>
    %pn = graph.load @n : tensor<8xf32>
    %mn = graph.load @adam_m.n : tensor<8xf32>
    %vn = graph.load @adam_v.n : tensor<8xf32>
    %g = graph.load @grad.w : tensor<16x8xf32>
    %gn = graph.load @grad.n : tensor<8xf32>
    %step0 = graph.load @optimizer.step : tensor<i64>
    %step = kernel.fused "increment" kind("elementwise") ins(%step0 : tensor<i64>) {
    ^bb0(%a: tensor<i64>):
      %r = graph.increment %a : tensor<i64>
      kernel.yield %r : tensor<i64>
    } {layer = -1 : i64, section = "optimizer"} : tensor<i64>
    %lr = kernel.fused "lr_schedule" kind("elementwise") ins(%step : tensor<i64>) {
    ^bb0(%a: tensor<i64>):
      %r = graph.lr_schedule %a {lr = 1.000000e-02 : f64, min_lr_ratio = 1.000000e-01 : f64, total_steps = 3 : i64, warmup_steps = 1 : i64} : (tensor<i64>) -> tensor<f32>
      kernel.yield %r : tensor<f32>
    } {layer = -1 : i64, section = "optimizer"} : tensor<f32>
    %norm = kernel.fused "global_norm" kind("elementwise") ins(%g, %gn : tensor<16x8xf32>, tensor<8xf32>) {
    ^bb0(%a: tensor<16x8xf32>, %b: tensor<8xf32>):
      %r = graph.global_norm %a, %b : (tensor<16x8xf32>, tensor<8xf32>) -> tensor<f32>
      kernel.yield %r : tensor<f32>
    } {layer = -1 : i64, section = "optimizer"} : tensor<f32>
    %mult = kernel.fused "clip_scale" kind("elementwise") ins(%norm : tensor<f32>) {
    ^bb0(%a: tensor<f32>):
      %r = graph.clip_scale %a {max_norm = 1.000000e+00 : f64} : tensor<f32>
      kernel.yield %r : tensor<f32>
    } {layer = -1 : i64, section = "optimizer"} : tensor<f32>
    %u:6 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins(%p, %g, %m, %v, %lr, %step, %mult, %pn, %gn, %mn, %vn : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
    ^bb0(%a0: tensor<16x8xf32>, %a1: tensor<16x8xf32>, %a2: tensor<16x8xf32>, %a3: tensor<16x8xf32>, %a4: tensor<f32>, %a5: tensor<i64>, %a6: tensor<f32>, %a7: tensor<8xf32>, %a8: tensor<8xf32>, %a9: tensor<8xf32>, %a10: tensor<8xf32>):
      %p1, %m1, %v1 = graph.adamw_update %a0, %a1, %a2, %a3, %a4, %a5, %a6 {beta1 = 9.000000e-01 : f64, beta2 = 9.500000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
      %p2, %m2, %v2 = graph.adamw_update %a7, %a8, %a9, %a10, %a4, %a5, %a6 {beta1 = 9.000000e-01 : f64, beta2 = 9.500000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
      kernel.yield %p1, %m1, %v1, %p2, %m2, %v2 : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
    } {layer = -1 : i64, section = "optimizer"} : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
    graph.store %step, @optimizer.step : tensor<i64>
    graph.store %u#0, @w : tensor<16x8xf32>
    graph.store %u#1, @adam_m.w : tensor<16x8xf32>
    graph.store %u#2, @adam_v.w : tensor<16x8xf32>
    graph.store %u#3, @n : tensor<8xf32>
    graph.store %u#4, @adam_m.n : tensor<8xf32>
    graph.store %u#5, @adam_v.n : tensor<8xf32>
    return %norm : tensor<f32>
  }
}

// The moments hold this rank's half of dimension 0; the parameters stay whole.
// CHECK: graph.variable @w : tensor<16x8xf32>
// CHECK: graph.variable @adam_m.w : tensor<8x8xf32> {data_shards = 2 : i64
// CHECK: graph.variable @adam_v.w : tensor<8x8xf32> {data_shards = 2 : i64
// CHECK: graph.variable @adam_m.n : tensor<4xf32> {data_shards = 2 : i64
// CHECK: graph.variable @adam_v.n : tensor<4xf32> {data_shards = 2 : i64
// CHECK-LABEL: func.func @train_microbatch
// CHECK: kernel.collective %{{.*}}, %{{.*}} {comm_stream, group = "data", group_size = 2 : i64, in_place, kind = "reduce_scatter", last_microbatch, {{.*}}} : (tensor<16x8xf32>, tensor<8xf32>) -> (tensor<16x8xf32>, tensor<8xf32>)
// CHECK-LABEL: func.func @optimizer_step
// CHECK: %[[P:.*]] = graph.load @w : tensor<16x8xf32>
// CHECK-NEXT: %[[PP:.*]] = kernel.rank_part %[[P]] {group = "data", group_size = 2 : i64} : tensor<16x8xf32> -> tensor<8x8xf32>
// CHECK: graph.load @adam_m.w : tensor<8x8xf32>
// CHECK: %[[G:.*]] = graph.load @grad.w : tensor<16x8xf32>
// CHECK-NEXT: %[[GP:.*]] = kernel.rank_part %[[G]] {{.*}} -> tensor<8x8xf32>
// CHECK: %[[MINE:.*]] = kernel.fused "global_norm" kind("elementwise") ins(%[[GP]], %{{.*}} : tensor<8x8xf32>, tensor<4xf32>)
// CHECK: %[[ONE:.*]] = graph.reshape %[[MINE]] : (tensor<f32>) -> tensor<1xf32>
// CHECK-NEXT: %[[ALL:.*]] = kernel.collective %[[ONE]] {group = "data", group_size = 2 : i64, kind = "all_gather"{{.*}}} : (tensor<1xf32>) -> tensor<2xf32>
// CHECK-NEXT: %[[NORM:.*]] = kernel.fused "global_norm" kind("elementwise") ins(%[[ALL]] : tensor<2xf32>)
// CHECK: graph.global_norm %{{.*}} : (tensor<2xf32>) -> tensor<f32>
// CHECK: kernel.fused "clip_scale" kind("elementwise") ins(%[[NORM]] : tensor<f32>)
// CHECK: %[[U:.*]]:6 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins(%[[PP]], %[[GP]], {{.*}} : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK: graph.adamw_update {{.*}} -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>)
// CHECK: %[[W:.*]]:2 = kernel.collective %[[U]]#0, %[[U]]#3 {comm_stream, group = "data", group_size = 2 : i64, in_place, kind = "all_gather", {{.*}}} : (tensor<8x8xf32>, tensor<4xf32>) -> (tensor<16x8xf32>, tensor<8xf32>)
// CHECK: graph.store %[[W]]#0, @w : tensor<16x8xf32>
// CHECK: graph.store %[[U]]#1, @adam_m.w : tensor<8x8xf32>
// CHECK: graph.store %[[W]]#1, @n : tensor<8xf32>
// CHECK: return %[[NORM]] : tensor<f32>

// One rank: nothing changes.
// NONE-NOT: kernel.rank_part
// NONE: kind = "all_reduce"
// NONE-NOT: kernel.rank_part

// -----

// Under an FP8 recipe the AdamW kernel also casts the weight it updates
// (octet-fuse-adamw). A rank updates its half. With shard-cast-weights=0
// (what pipeline layouts get) the cast leaves the kernel and reads the
// all-gathered whole weight, so every rank writes the whole FP8 copy, its
// K-major copy and its amax.
// FP8: graph.variable @fp8w.w.amax
// FP8: func.func @optimizer_step
// FP8: %[[PART:.*]] = kernel.rank_part %{{.*}} {group = "data", group_size = 2 : i64} : tensor<16x8xf32> -> tensor<8x8xf32>
// FP8: %[[NEW:.*]]:3 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins(%[[PART]],
// FP8-NOT: fp8.quantize
// FP8: kernel.yield
// FP8: %[[WHOLE:.*]] = kernel.collective %[[NEW]]#0 {comm_stream, {{.*}}in_place, kind = "all_gather"{{.*}} : (tensor<8x8xf32>) -> tensor<16x8xf32>
// FP8: %[[CAST:.*]]:3 = kernel.fused "optimizer.fp8_weights" kind("elementwise") ins(%[[WHOLE]], %{{.*}} : tensor<16x8xf32>, tensor<f32>)
// FP8: fp8.quantize
// FP8: fp8.transpose
// FP8: graph.store %[[CAST]]#0, @fp8w.w : tensor<16x8xf8E4M3FN>
// FP8: graph.store %[[CAST]]#1, @fp8w.w.t : tensor<8x16xf8E4M3FN>
// FP8: graph.store %[[CAST]]#2, @fp8w.w.amax : tensor<f32>
// FP8: graph.store %[[WHOLE]], @w : tensor<16x8xf32>
//
// By default (shard-cast-weights) a weight whose cast reads only the new
// weight and a state scale (delayed scaling) keeps its f32 master sharded:
// @w holds the rank's half, AdamW reads and writes it as it is, the cast
// quantizes that half right after the update, the FP8 halves are gathered
// in place, their amaxes' maximum taken over the ranks, and the K-major
// copy made from the gathered one at the end.
// PARTS: graph.variable @w : tensor<8x8xf32> {data_shards = 2 : i64
// PARTS: func.func @optimizer_step
// PARTS: %[[P:.*]] = graph.load @w : tensor<8x8xf32>
// PARTS-NOT: kernel.rank_part %[[P]]
// PARTS: %[[NEW:.*]]:3 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins(%[[P]],
// PARTS: %[[CAST:.*]]:2 = kernel.fused "optimizer.fp8_weights" kind("elementwise") ins(%[[NEW]]#0, %[[SCALE:.*]] : tensor<8x8xf32>, tensor<f32>)
// PARTS-NEXT: ^bb0
// PARTS-NEXT: fp8.quantize {{.*}} -> (tensor<8x8xf8E4M3FN>, tensor<f32>)
// PARTS-NEXT: kernel.yield
// PARTS-NEXT: }
// PARTS-NEXT: %[[GATHERED:.*]] = kernel.collective %[[CAST]]#0 {comm_stream, {{.*}}in_place, kind = "all_gather"{{.*}} : (tensor<8x8xf8E4M3FN>) -> tensor<16x8xf8E4M3FN>
// PARTS-NEXT: %[[AMAX:.*]] = kernel.collective %[[CAST]]#1 {comm_stream, {{.*}}kind = "all_reduce"{{.*}}reduction = "max"
// PARTS-DAG: graph.store %[[GATHERED]], @fp8w.w : tensor<16x8xf8E4M3FN>
// PARTS-DAG: graph.store %[[AMAX]], @fp8w.w.amax : tensor<f32>
// PARTS-DAG: graph.store %[[NEW]]#0, @w : tensor<8x8xf32>
// PARTS: %[[T:.*]] = kernel.fused "optimizer.fp8_weight_kmajor" kind("elementwise") ins(%[[GATHERED]], %[[SCALE]] : tensor<16x8xf8E4M3FN>, tensor<f32>)
// PARTS-NEXT: ^bb0
// PARTS-NEXT: fp8.transpose
// PARTS: graph.store %[[T]], @fp8w.w.t : tensor<8x16xf8E4M3FN>
// PARTS-NEXT: return
module {
  graph.variable @w : tensor<16x8xf32> {init = "normal", init_std = 2.000000e-02 : f64, kind = "weight"}
  graph.variable @grad.w : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_m.w : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_v.w : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @fp8.w.scale : tensor<f32> {init = "ones", kind = "state"}
  graph.variable @fp8w.w : tensor<16x8xf8E4M3FN> {init = "zeros", kind = "state"}
  graph.variable @fp8w.w.t : tensor<8x16xf8E4M3FN> {init = "zeros", kind = "state"}
  graph.variable @fp8w.w.amax : tensor<f32> {init = "zeros", kind = "state"}
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
    %scale = graph.load @fp8.w.scale : tensor<f32>
    %u:6 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins(%p, %g, %m, %v, %lr, %step, %mult, %scale : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>, tensor<f32>) {
    ^bb0(%a0: tensor<16x8xf32>, %a1: tensor<16x8xf32>, %a2: tensor<16x8xf32>, %a3: tensor<16x8xf32>, %a4: tensor<f32>, %a5: tensor<i64>, %a6: tensor<f32>, %a7: tensor<f32>):
      %p1, %m1, %v1 = graph.adamw_update %a0, %a1, %a2, %a3, %a4, %a5, %a6 {beta1 = 9.000000e-01 : f64, beta2 = 9.500000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
      %q, %amax = fp8.quantize %p1, %a7 {tensor = "w.w"} : (tensor<16x8xf32>, tensor<f32>) -> (tensor<16x8xf8E4M3FN>, tensor<f32>)
      %qt, %qs = fp8.transpose %q, %a7 : (tensor<16x8xf8E4M3FN>, tensor<f32>) -> (tensor<8x16xf8E4M3FN>, tensor<f32>)
      kernel.yield %p1, %m1, %v1, %q, %qt, %amax : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf8E4M3FN>, tensor<8x16xf8E4M3FN>, tensor<f32>
    } {layer = -1 : i64, section = "optimizer"} : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf8E4M3FN>, tensor<8x16xf8E4M3FN>, tensor<f32>
    graph.store %u#3, @fp8w.w : tensor<16x8xf8E4M3FN>
    graph.store %u#4, @fp8w.w.t : tensor<8x16xf8E4M3FN>
    graph.store %u#5, @fp8w.w.amax : tensor<f32>
    graph.store %u#0, @w : tensor<16x8xf32>
    graph.store %u#1, @adam_m.w : tensor<16x8xf32>
    graph.store %u#2, @adam_v.w : tensor<16x8xf32>
    return
  }
}

// -----

// Two gradient buckets (two reduce-scatters) and FP8 weights: one AdamW
// kernel per bucket, the larger bucket's first, each followed by its
// all-gather on the communication stream; the casts of the whole weights
// come after every AdamW kernel, so the compute stream never waits for a
// gather before the last update, and in the gathers' order, so that the
// first cast waits for the first gather.
// FP8: func.func @optimizer_step
// FP8: %[[A1:.*]]:3 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins({{.*}} : tensor<8x8xf32>,
// FP8-NOT: fp8.quantize
// FP8: graph.adamw_update {{.*}} -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>)
// FP8-NEXT: kernel.yield
// FP8: %[[G1:.*]] = kernel.collective %[[A1]]#0 {comm_stream, {{.*}}kind = "all_gather"{{.*}} : (tensor<8x8xf32>) -> tensor<16x8xf32>
// FP8: %[[A2:.*]]:3 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins({{.*}} : tensor<4x8xf32>,
// FP8: graph.adamw_update {{.*}} -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
// FP8-NEXT: kernel.yield
// FP8: %[[G2:.*]] = kernel.collective %[[A2]]#0 {comm_stream, {{.*}}kind = "all_gather"{{.*}} : (tensor<4x8xf32>) -> tensor<8x8xf32>
// FP8: kernel.fused "optimizer.fp8_weights" kind("elementwise") ins(%[[G1]], %{{.*}} : tensor<16x8xf32>, tensor<f32>)
// FP8: kernel.fused "optimizer.fp8_weights" kind("elementwise") ins(%[[G2]], %{{.*}} : tensor<8x8xf32>, tensor<f32>)
// FP8: graph.store %[[G1]], @w : tensor<16x8xf32>
// FP8: graph.store %[[G2]], @u : tensor<8x8xf32>
module {
  graph.variable @w : tensor<16x8xf32> {init = "normal", init_std = 2.000000e-02 : f64, kind = "weight"}
  graph.variable @u : tensor<8x8xf32> {init = "normal", init_std = 2.000000e-02 : f64, kind = "weight"}
  graph.variable @grad.w : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.u : tensor<8x8xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_m.w : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_v.w : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_m.u : tensor<8x8xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_v.u : tensor<8x8xf32> {init = "zeros", kind = "state"}
  graph.variable @fp8.w.scale : tensor<f32> {init = "ones", kind = "state"}
  graph.variable @fp8.u.scale : tensor<f32> {init = "ones", kind = "state"}
  graph.variable @fp8w.w : tensor<16x8xf8E4M3FN> {init = "zeros", kind = "state"}
  graph.variable @fp8w.u : tensor<8x8xf8E4M3FN> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%g: tensor<16x8xf32>, %h: tensor<8x8xf32>) {
    %s = kernel.collective %g {comm_stream, group = "data", group_size = 2 : i64, kind = "all_reduce", last_microbatch, reduction = "sum"} : (tensor<16x8xf32>) -> tensor<16x8xf32>
    graph.store %s, @grad.w : tensor<16x8xf32>
    %t = kernel.collective %h {comm_stream, group = "data", group_size = 2 : i64, kind = "all_reduce", last_microbatch, reduction = "sum"} : (tensor<8x8xf32>) -> tensor<8x8xf32>
    graph.store %t, @grad.u : tensor<8x8xf32>
    return
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<i64>, %mult: tensor<f32>) {
    %p = graph.load @w : tensor<16x8xf32>
    %m = graph.load @adam_m.w : tensor<16x8xf32>
    %v = graph.load @adam_v.w : tensor<16x8xf32>
    %g = graph.load @grad.w : tensor<16x8xf32>
    %pu = graph.load @u : tensor<8x8xf32>
    %mu = graph.load @adam_m.u : tensor<8x8xf32>
    %vu = graph.load @adam_v.u : tensor<8x8xf32>
    %gu = graph.load @grad.u : tensor<8x8xf32>
    %scale = graph.load @fp8.w.scale : tensor<f32>
    %scaleu = graph.load @fp8.u.scale : tensor<f32>
    %r:8 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins(%p, %g, %m, %v, %lr, %step, %mult, %scale, %pu, %gu, %mu, %vu, %scaleu : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>, tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<f32>) {
    ^bb0(%a0: tensor<16x8xf32>, %a1: tensor<16x8xf32>, %a2: tensor<16x8xf32>, %a3: tensor<16x8xf32>, %a4: tensor<f32>, %a5: tensor<i64>, %a6: tensor<f32>, %a7: tensor<f32>, %b0: tensor<8x8xf32>, %b1: tensor<8x8xf32>, %b2: tensor<8x8xf32>, %b3: tensor<8x8xf32>, %b7: tensor<f32>):
      %p1, %m1, %v1 = graph.adamw_update %a0, %a1, %a2, %a3, %a4, %a5, %a6 {beta1 = 9.000000e-01 : f64, beta2 = 9.500000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
      %q, %amax = fp8.quantize %p1, %a7 {tensor = "w.w"} : (tensor<16x8xf32>, tensor<f32>) -> (tensor<16x8xf8E4M3FN>, tensor<f32>)
      %p2, %m2, %v2 = graph.adamw_update %b0, %b1, %b2, %b3, %a4, %a5, %a6 {beta1 = 9.000000e-01 : f64, beta2 = 9.500000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64} : (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>)
      %qu, %amaxu = fp8.quantize %p2, %b7 {tensor = "u.w"} : (tensor<8x8xf32>, tensor<f32>) -> (tensor<8x8xf8E4M3FN>, tensor<f32>)
      kernel.yield %p1, %m1, %v1, %q, %p2, %m2, %v2, %qu : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf8E4M3FN>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf8E4M3FN>
    } {layer = -1 : i64, section = "optimizer"} : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf8E4M3FN>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf8E4M3FN>
    graph.store %r#3, @fp8w.w : tensor<16x8xf8E4M3FN>
    graph.store %r#7, @fp8w.u : tensor<8x8xf8E4M3FN>
    graph.store %r#0, @w : tensor<16x8xf32>
    graph.store %r#1, @adam_m.w : tensor<16x8xf32>
    graph.store %r#2, @adam_v.w : tensor<16x8xf32>
    graph.store %r#4, @u : tensor<8x8xf32>
    graph.store %r#5, @adam_m.u : tensor<8x8xf32>
    graph.store %r#6, @adam_v.u : tensor<8x8xf32>
    return
  }
}

// -----

// The same, with the smaller weight's update first in the kernel: the
// casts still come in the gathers' order (the larger bucket's first),
// whatever order the weights had.
// FP8: func.func @optimizer_step
// FP8: %[[B1:.*]]:3 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins({{.*}} : tensor<8x8xf32>,
// FP8: %[[H1:.*]] = kernel.collective %[[B1]]#0 {comm_stream, {{.*}}kind = "all_gather"{{.*}} : (tensor<8x8xf32>) -> tensor<16x8xf32>
// FP8: %[[B2:.*]]:3 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins({{.*}} : tensor<4x8xf32>,
// FP8: %[[H2:.*]] = kernel.collective %[[B2]]#0 {comm_stream, {{.*}}kind = "all_gather"{{.*}} : (tensor<4x8xf32>) -> tensor<8x8xf32>
// FP8: kernel.fused "optimizer.fp8_weights" kind("elementwise") ins(%[[H1]], %{{.*}} : tensor<16x8xf32>, tensor<f32>)
// FP8: kernel.fused "optimizer.fp8_weights" kind("elementwise") ins(%[[H2]], %{{.*}} : tensor<8x8xf32>, tensor<f32>)
module {
  graph.variable @w : tensor<16x8xf32> {init = "normal", init_std = 2.000000e-02 : f64, kind = "weight"}
  graph.variable @u : tensor<8x8xf32> {init = "normal", init_std = 2.000000e-02 : f64, kind = "weight"}
  graph.variable @grad.w : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.u : tensor<8x8xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_m.w : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_v.w : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_m.u : tensor<8x8xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_v.u : tensor<8x8xf32> {init = "zeros", kind = "state"}
  graph.variable @fp8.w.scale : tensor<f32> {init = "ones", kind = "state"}
  graph.variable @fp8.u.scale : tensor<f32> {init = "ones", kind = "state"}
  graph.variable @fp8w.w : tensor<16x8xf8E4M3FN> {init = "zeros", kind = "state"}
  graph.variable @fp8w.u : tensor<8x8xf8E4M3FN> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%g: tensor<16x8xf32>, %h: tensor<8x8xf32>) {
    %s = kernel.collective %g {comm_stream, group = "data", group_size = 2 : i64, kind = "all_reduce", last_microbatch, reduction = "sum"} : (tensor<16x8xf32>) -> tensor<16x8xf32>
    graph.store %s, @grad.w : tensor<16x8xf32>
    %t = kernel.collective %h {comm_stream, group = "data", group_size = 2 : i64, kind = "all_reduce", last_microbatch, reduction = "sum"} : (tensor<8x8xf32>) -> tensor<8x8xf32>
    graph.store %t, @grad.u : tensor<8x8xf32>
    return
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<i64>, %mult: tensor<f32>) {
    %p = graph.load @w : tensor<16x8xf32>
    %m = graph.load @adam_m.w : tensor<16x8xf32>
    %v = graph.load @adam_v.w : tensor<16x8xf32>
    %g = graph.load @grad.w : tensor<16x8xf32>
    %pu = graph.load @u : tensor<8x8xf32>
    %mu = graph.load @adam_m.u : tensor<8x8xf32>
    %vu = graph.load @adam_v.u : tensor<8x8xf32>
    %gu = graph.load @grad.u : tensor<8x8xf32>
    %scale = graph.load @fp8.w.scale : tensor<f32>
    %scaleu = graph.load @fp8.u.scale : tensor<f32>
    %r:8 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins(%p, %g, %m, %v, %lr, %step, %mult, %scale, %pu, %gu, %mu, %vu, %scaleu : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>, tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<f32>) {
    ^bb0(%a0: tensor<16x8xf32>, %a1: tensor<16x8xf32>, %a2: tensor<16x8xf32>, %a3: tensor<16x8xf32>, %a4: tensor<f32>, %a5: tensor<i64>, %a6: tensor<f32>, %a7: tensor<f32>, %b0: tensor<8x8xf32>, %b1: tensor<8x8xf32>, %b2: tensor<8x8xf32>, %b3: tensor<8x8xf32>, %b7: tensor<f32>):
      %p2, %m2, %v2 = graph.adamw_update %b0, %b1, %b2, %b3, %a4, %a5, %a6 {beta1 = 9.000000e-01 : f64, beta2 = 9.500000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64} : (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>)
      %qu, %amaxu = fp8.quantize %p2, %b7 {tensor = "u.w"} : (tensor<8x8xf32>, tensor<f32>) -> (tensor<8x8xf8E4M3FN>, tensor<f32>)
      %p1, %m1, %v1 = graph.adamw_update %a0, %a1, %a2, %a3, %a4, %a5, %a6 {beta1 = 9.000000e-01 : f64, beta2 = 9.500000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
      %q, %amax = fp8.quantize %p1, %a7 {tensor = "w.w"} : (tensor<16x8xf32>, tensor<f32>) -> (tensor<16x8xf8E4M3FN>, tensor<f32>)
      kernel.yield %p1, %m1, %v1, %q, %p2, %m2, %v2, %qu : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf8E4M3FN>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf8E4M3FN>
    } {layer = -1 : i64, section = "optimizer"} : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf8E4M3FN>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf8E4M3FN>
    graph.store %r#3, @fp8w.w : tensor<16x8xf8E4M3FN>
    graph.store %r#7, @fp8w.u : tensor<8x8xf8E4M3FN>
    graph.store %r#0, @w : tensor<16x8xf32>
    graph.store %r#1, @adam_m.w : tensor<16x8xf32>
    graph.store %r#2, @adam_v.w : tensor<16x8xf32>
    graph.store %r#4, @u : tensor<8x8xf32>
    graph.store %r#5, @adam_m.u : tensor<8x8xf32>
    graph.store %r#6, @adam_v.u : tensor<8x8xf32>
    return
  }
}

// -----

// A BF16 cache (octet-fuse-adamw's bf16w.<param>): the f32 master stays
// sharded, the rank casts its half to BF16 right after the update, and the
// BF16 halves are all-gathered in place into the cache: 2 bytes an element
// instead of the f32 parameter's 4.
// PARTS: graph.variable @v : tensor<8x8xf32> {data_shards = 2 : i64
// PARTS: func.func @optimizer_step
// PARTS: %[[V:.*]] = graph.load @v : tensor<8x8xf32>
// PARTS: %[[NEWV:.*]]:3 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins(%[[V]],
// PARTS: %[[HALF:.*]] = kernel.fused "optimizer.bf16_weights" kind("elementwise") ins(%[[NEWV]]#0 : tensor<8x8xf32>)
// PARTS-NEXT: ^bb0
// PARTS-NEXT: graph.cast {{.*}} : (tensor<8x8xf32>) -> tensor<8x8xbf16>
// PARTS: %[[CACHED:.*]] = kernel.collective %[[HALF]] {comm_stream, {{.*}}in_place, kind = "all_gather"{{.*}} : (tensor<8x8xbf16>) -> tensor<16x8xbf16>
// PARTS-DAG: graph.store %[[CACHED]], @bf16w.v : tensor<16x8xbf16>
// PARTS-DAG: graph.store %[[NEWV]]#0, @v : tensor<8x8xf32>
// PARTS-LABEL: func.func @cache_weights
// PARTS: %[[INIT:.*]] = kernel.fused "optimizer.bf16_weights" kind("elementwise") ins(%{{.*}} : tensor<8x8xf32>)
// PARTS: kernel.collective %[[INIT]] {comm_stream, {{.*}}in_place, kind = "all_gather"{{.*}} : (tensor<8x8xbf16>) -> tensor<16x8xbf16>
module attributes {octet.init_functions = ["cache_weights"]} {
  graph.variable @v : tensor<16x8xf32> {init = "normal", init_std = 2.000000e-02 : f64, kind = "weight"}
  graph.variable @grad.v : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_m.v : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @adam_v.v : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @bf16w.v : tensor<16x8xbf16> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%g: tensor<16x8xf32>) {
    %s = kernel.collective %g {comm_stream, group = "data", group_size = 2 : i64, kind = "all_reduce", last_microbatch, reduction = "sum"} : (tensor<16x8xf32>) -> tensor<16x8xf32>
    graph.store %s, @grad.v : tensor<16x8xf32>
    return
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<i64>, %mult: tensor<f32>) {
    %p = graph.load @v : tensor<16x8xf32>
    %m = graph.load @adam_m.v : tensor<16x8xf32>
    %v = graph.load @adam_v.v : tensor<16x8xf32>
    %g = graph.load @grad.v : tensor<16x8xf32>
    %u:4 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins(%p, %g, %m, %v, %lr, %step, %mult : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) {
    ^bb0(%a0: tensor<16x8xf32>, %a1: tensor<16x8xf32>, %a2: tensor<16x8xf32>, %a3: tensor<16x8xf32>, %a4: tensor<f32>, %a5: tensor<i64>, %a6: tensor<f32>):
      %p1, %m1, %v1 = graph.adamw_update %a0, %a1, %a2, %a3, %a4, %a5, %a6 {beta1 = 9.000000e-01 : f64, beta2 = 9.500000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
      %c = graph.cast %p1 : (tensor<16x8xf32>) -> tensor<16x8xbf16>
      kernel.yield %p1, %m1, %v1, %c : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xbf16>
    } {layer = -1 : i64, section = "optimizer"} : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xbf16>
    graph.store %u#3, @bf16w.v : tensor<16x8xbf16>
    graph.store %u#0, @v : tensor<16x8xf32>
    graph.store %u#1, @adam_m.v : tensor<16x8xf32>
    graph.store %u#2, @adam_v.v : tensor<16x8xf32>
    return
  }
  func.func @cache_weights() {
    %p = graph.load @v : tensor<16x8xf32>
    %c = kernel.fused "optimizer.bf16_weights" kind("elementwise") ins(%p : tensor<16x8xf32>) {
    ^bb0(%a0: tensor<16x8xf32>):
      %b = graph.cast %a0 : (tensor<16x8xf32>) -> tensor<16x8xbf16>
      kernel.yield %b : tensor<16x8xbf16>
    } {layer = -1 : i64, section = "init"} : tensor<16x8xbf16>
    graph.store %c, @bf16w.v : tensor<16x8xbf16>
    return
  }
}

// -----

// Current scaling (the scale made from the weight's amax in the step):
// the f32 master stays sharded too. Each rank takes the amax of its half
// right after the AdamW kernel, one all-reduce (max) per AdamW kernel
// joins the halves' amaxes (the whole's) before that kernel's gathers, the
// scale is made from it as before, the rank quantizes its half with that
// scale, the FP8 halves are gathered in place, and the K-major copy is
// transposed from the gathered one at the end. @cache_weights does the
// same with one all-reduce for its weights.
// CURRENT-LABEL: graph.variable @fp8w.w.scale_inv
// CURRENT: graph.variable @w : tensor<8x8xf32> {data_shards = 2 : i64
// CURRENT-LABEL: func.func @optimizer_step
// CURRENT: %[[P:.*]] = graph.load @w : tensor<8x8xf32>
// CURRENT-NOT: kernel.rank_part %[[P]]
// CURRENT: %[[NEW:.*]]:3 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins(%[[P]],
// CURRENT-NOT: fp8.amax
// CURRENT: kernel.yield
// CURRENT-NEXT: }
// CURRENT-NEXT: %[[AMAX:.*]] = kernel.fused "optimizer.fp8_weight_amax" kind("elementwise") ins(%[[NEW]]#0 : tensor<8x8xf32>)
// CURRENT-NEXT: ^bb0
// CURRENT-NEXT: fp8.amax {{.*}} : (tensor<8x8xf32>) -> tensor<f32>
// CURRENT-NEXT: kernel.yield
// CURRENT-NEXT: }
// CURRENT-NEXT: %[[JOINED:.*]] = kernel.collective %[[AMAX]] {comm_stream, {{.*}}kind = "all_reduce"{{.*}}reduction = "max"{{.*}} : (tensor<f32>) -> tensor<f32>
// CURRENT-NEXT: %[[SCALE:.*]]:2 = kernel.fused "optimizer.fp8_weight_scale" kind("elementwise") ins(%[[JOINED]] : tensor<f32>)
// CURRENT-NEXT: ^bb0
// CURRENT-NEXT: fp8.compute_scale
// CURRENT-NEXT: kernel.yield
// CURRENT-NEXT: }
// CURRENT-NEXT: %[[CAST:.*]] = kernel.fused "optimizer.fp8_weights" kind("elementwise") ins(%[[NEW]]#0, %[[SCALE]]#0 : tensor<8x8xf32>, tensor<f32>)
// CURRENT-NEXT: ^bb0
// CURRENT-NEXT: fp8.quantize {{.*}} -> (tensor<8x8xf8E4M3FN>, tensor<f32>)
// CURRENT-NEXT: kernel.yield %{{[^,]*}} : tensor<8x8xf8E4M3FN>
// CURRENT-NEXT: }
// CURRENT-NEXT: %[[GATHERED:.*]] = kernel.collective %[[CAST]] {comm_stream, {{.*}}in_place, kind = "all_gather"{{.*}} : (tensor<8x8xf8E4M3FN>) -> tensor<16x8xf8E4M3FN>
// CURRENT-NOT: fp8.amax
// CURRENT-NOT: kind = "all_gather"
// CURRENT-DAG: graph.store %[[GATHERED]], @fp8w.w : tensor<16x8xf8E4M3FN>
// CURRENT-DAG: graph.store %[[SCALE]]#0, @fp8w.w.scale : tensor<f32>
// CURRENT-DAG: graph.store %[[SCALE]]#1, @fp8w.w.scale_inv : tensor<f32>
// CURRENT-DAG: graph.store %[[NEW]]#0, @w : tensor<8x8xf32>
// CURRENT: %[[T:.*]] = kernel.fused "optimizer.fp8_weight_kmajor" kind("elementwise") ins(%[[GATHERED]], %[[SCALE]]#0 : tensor<16x8xf8E4M3FN>, tensor<f32>)
// CURRENT-NEXT: ^bb0
// CURRENT-NEXT: fp8.transpose
// CURRENT: graph.store %[[T]], @fp8w.w.t : tensor<8x16xf8E4M3FN>
// CURRENT-NEXT: return
// CURRENT-LABEL: func.func @cache_weights
// CURRENT-NEXT: %[[IP:.*]] = graph.load @w : tensor<8x8xf32>
// CURRENT-NEXT: %[[IA:.*]] = kernel.fused "optimizer.fp8_weight_amax" kind("elementwise") ins(%[[IP]] : tensor<8x8xf32>)
// CURRENT: %[[IJ:.*]] = kernel.collective %[[IA]] {comm_stream, {{.*}}kind = "all_reduce"{{.*}}reduction = "max"
// CURRENT-NEXT: %[[IS:.*]]:2 = kernel.fused "optimizer.fp8_weight_scale" kind("elementwise") ins(%[[IJ]] : tensor<f32>)
// CURRENT: %[[IC:.*]] = kernel.fused "optimizer.fp8_weights" kind("elementwise") ins(%[[IP]], %[[IS]]#0 : tensor<8x8xf32>, tensor<f32>)
// CURRENT: %[[IG:.*]] = kernel.collective %[[IC]] {comm_stream, {{.*}}in_place, kind = "all_gather"{{.*}} : (tensor<8x8xf8E4M3FN>) -> tensor<16x8xf8E4M3FN>
// CURRENT-NEXT: kernel.fused "optimizer.fp8_weight_kmajor" kind("elementwise") ins(%[[IG]], %[[IS]]#0 : tensor<16x8xf8E4M3FN>, tensor<f32>)
// CURRENT-NOT: fp8.amax
// CURRENT: return
module attributes {octet.init_functions = ["cache_weights"]} {
  graph.variable @fp8w.w : tensor<16x8xf8E4M3FN> {init = "zeros", kind = "state"}
  graph.variable @fp8w.w.t : tensor<8x16xf8E4M3FN> {init = "zeros", kind = "state"}
  graph.variable @fp8w.w.scale : tensor<f32> {init = "ones", kind = "state"}
  graph.variable @fp8w.w.scale_inv : tensor<f32> {init = "ones", kind = "state"}
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
      %amax = fp8.amax %p1 {amax_reduce = ["tensor"]} : (tensor<16x8xf32>) -> tensor<f32>
      kernel.yield %p1, %m1, %v1, %amax : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>
    } {layer = -1 : i64, section = "optimizer"} : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>
    %sc:2 = kernel.fused "optimizer.fp8_weight_scale" kind("elementwise") ins(%u#3 : tensor<f32>) {
    ^bb0(%a0: tensor<f32>):
      %s, %si = fp8.compute_scale %a0 {dtype = f8E4M3FN} : tensor<f32>
      kernel.yield %s, %si : tensor<f32>, tensor<f32>
    } {layer = -1 : i64, section = "optimizer"} : tensor<f32>, tensor<f32>
    %c:2 = kernel.fused "optimizer.fp8_weights" kind("elementwise") ins(%u#0, %sc#0 : tensor<16x8xf32>, tensor<f32>) {
    ^bb0(%a0: tensor<16x8xf32>, %a1: tensor<f32>):
      %q, %qa = fp8.quantize %a0, %a1 {tensor = "w.w"} : (tensor<16x8xf32>, tensor<f32>) -> (tensor<16x8xf8E4M3FN>, tensor<f32>)
      %qt, %qs = fp8.transpose %q, %a1 : (tensor<16x8xf8E4M3FN>, tensor<f32>) -> (tensor<8x16xf8E4M3FN>, tensor<f32>)
      kernel.yield %q, %qt : tensor<16x8xf8E4M3FN>, tensor<8x16xf8E4M3FN>
    } {layer = -1 : i64, section = "optimizer"} : tensor<16x8xf8E4M3FN>, tensor<8x16xf8E4M3FN>
    graph.store %c#0, @fp8w.w : tensor<16x8xf8E4M3FN>
    graph.store %c#1, @fp8w.w.t : tensor<8x16xf8E4M3FN>
    graph.store %sc#0, @fp8w.w.scale : tensor<f32>
    graph.store %sc#1, @fp8w.w.scale_inv : tensor<f32>
    graph.store %u#0, @w : tensor<16x8xf32>
    graph.store %u#1, @adam_m.w : tensor<16x8xf32>
    graph.store %u#2, @adam_v.w : tensor<16x8xf32>
    return
  }
  func.func @cache_weights() {
    %p = graph.load @w : tensor<16x8xf32>
    %a = kernel.fused "optimizer.fp8_weight_amax" kind("elementwise") ins(%p : tensor<16x8xf32>) {
    ^bb0(%a0: tensor<16x8xf32>):
      %r = fp8.amax %a0 {amax_reduce = ["tensor"]} : (tensor<16x8xf32>) -> tensor<f32>
      kernel.yield %r : tensor<f32>
    } {layer = -1 : i64, section = "init"} : tensor<f32>
    %sc:2 = kernel.fused "optimizer.fp8_weight_scale" kind("elementwise") ins(%a : tensor<f32>) {
    ^bb0(%a0: tensor<f32>):
      %s, %si = fp8.compute_scale %a0 {dtype = f8E4M3FN} : tensor<f32>
      kernel.yield %s, %si : tensor<f32>, tensor<f32>
    } {layer = -1 : i64, section = "init"} : tensor<f32>, tensor<f32>
    %c:2 = kernel.fused "optimizer.fp8_weights" kind("elementwise") ins(%p, %sc#0 : tensor<16x8xf32>, tensor<f32>) {
    ^bb0(%a0: tensor<16x8xf32>, %a1: tensor<f32>):
      %q, %qa = fp8.quantize %a0, %a1 {tensor = "w.w"} : (tensor<16x8xf32>, tensor<f32>) -> (tensor<16x8xf8E4M3FN>, tensor<f32>)
      %qt, %qs = fp8.transpose %q, %a1 : (tensor<16x8xf8E4M3FN>, tensor<f32>) -> (tensor<8x16xf8E4M3FN>, tensor<f32>)
      kernel.yield %q, %qt : tensor<16x8xf8E4M3FN>, tensor<8x16xf8E4M3FN>
    } {layer = -1 : i64, section = "init"} : tensor<16x8xf8E4M3FN>, tensor<8x16xf8E4M3FN>
    graph.store %c#0, @fp8w.w : tensor<16x8xf8E4M3FN>
    graph.store %c#1, @fp8w.w.t : tensor<8x16xf8E4M3FN>
    graph.store %sc#0, @fp8w.w.scale : tensor<f32>
    graph.store %sc#1, @fp8w.w.scale_inv : tensor<f32>
    return
  }
}
