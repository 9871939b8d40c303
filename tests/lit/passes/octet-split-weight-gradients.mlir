// RUN: %octet-opt %s --octet-split-weight-gradients | FileCheck %s

// One chunk's backward: the output gradient %dys feeds the dgrad GEMM (the
// gradient sent back) and the wgrad GEMM; %xr, a recomputed input only the
// wgrad GEMM reads, goes with it; the norm-like accumulation into @grad.n
// reads %dys and stays with the input gradient. B returns %dys after the
// gradient edge (the weight stash); W takes B's arguments and the stash,
// loads its own accumulator and weight-gradient input, and stores.
module attributes {octet.pipeline_chunks = 1 : i64} {
  graph.variable @w : tensor<4x4xf32> {init = "zeros", kind = "weight"}
  graph.variable @grad.w : tensor<4x4xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.n : tensor<4x4xf32> {init = "zeros", kind = "state"}
  func.func @stage0_backward(%t: tensor<4x4xf32> {graph.name = "tokens"}, %x: tensor<4x4xf32>, %dy: tensor<4x4xf32>) -> tensor<4x4xf32> attributes {octet.phase = "backward", octet.stage = 0 : i64, octet.stash_args = 1 : i64} {
    %dys = graph.add %dy, %dy {layer = 0 : i64, section = "backward"} : tensor<4x4xf32>
    %w = graph.load @w : tensor<4x4xf32>
    %dx = kernel.gemm %dys, %w {layer = 0 : i64, role = "dgrad", section = "backward"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %saved = graph.save %x : tensor<4x4xf32>
    %xr = graph.add %saved, %saved {layer = 0 : i64, section = "backward"} : tensor<4x4xf32>
    %acc = graph.load @grad.w : tensor<4x4xf32>
    %gw = kernel.gemm %dys, %xr accumulate(%acc) {first_microbatch_overwrites, layer = 0 : i64, role = "wgrad", section = "backward", transpose_a} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %n = graph.load @grad.n : tensor<4x4xf32>
    %gn = graph.add %n, %dys {layer = 0 : i64, section = "backward"} : tensor<4x4xf32>
    graph.store %gw, @grad.w : tensor<4x4xf32>
    graph.store %gn, @grad.n : tensor<4x4xf32>
    return %dx : tensor<4x4xf32>
  }
}

// CHECK-NOT: @stage0_backward
// CHECK-LABEL: func.func @stage0_input_gradient
// CHECK-SAME: (%{{.*}}: tensor<4x4xf32> {graph.name = "tokens"}, %{{.*}}: tensor<4x4xf32>, %[[DY:.*]]: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
// CHECK-SAME: octet.phase = "input_gradient", octet.stage = 0 : i64, octet.stash_args = 1 : i64, octet.weight_stash_results = 1 : i64
// CHECK-NEXT: %[[DYS:.*]] = graph.add %[[DY]], %[[DY]]
// CHECK-NEXT: %[[W:.*]] = graph.load @w
// CHECK-NEXT: %[[DX:.*]] = kernel.gemm %[[DYS]], %[[W]] {{.*}}role = "dgrad"
// CHECK-NEXT: %[[N:.*]] = graph.load @grad.n
// CHECK-NEXT: %[[GN:.*]] = graph.add %[[N]], %[[DYS]]
// CHECK-NEXT: graph.store %[[GN]], @grad.n
// CHECK-NEXT: return %[[DX]], %[[DYS]]
// CHECK-LABEL: func.func @stage0_weight_gradient
// CHECK-SAME: (%{{.*}}: tensor<4x4xf32> {graph.name = "tokens"}, %[[X:[^:]*]]: tensor<4x4xf32>, %{{[^:]*}}: tensor<4x4xf32>, %[[SDYS:[^:]*]]: tensor<4x4xf32>)
// CHECK-SAME: octet.phase = "weight_gradient", octet.stage = 0 : i64, octet.stash_args = 1 : i64, octet.weight_stash_args = 1 : i64
// CHECK-NEXT: %[[SAVED:.*]] = graph.save %[[X]]
// CHECK-NEXT: %[[XR:.*]] = graph.add %[[SAVED]], %[[SAVED]]
// CHECK-NEXT: %[[ACC:.*]] = graph.load @grad.w
// CHECK-NEXT: %[[GW:.*]] = kernel.gemm %[[SDYS]], %[[XR]] accumulate(%[[ACC]]) {{.*}}role = "wgrad"
// CHECK-NEXT: graph.store %[[GW]], @grad.w
// CHECK-NEXT: return
// CHECK-NEXT: }
