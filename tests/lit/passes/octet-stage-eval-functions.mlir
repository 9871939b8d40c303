// RUN: %octet-opt %s --octet-split-stages="layer-split=1,1" --octet-stage-eval-functions | FileCheck %s
// RUN: not %octet-opt %s --octet-stage-eval-functions 2>&1 | FileCheck %s --check-prefix=UNCUT

// Delayed scaling's scale state, cut into two chunks as in
// octet-split-stages-fp8.mlir: chunk 0's forward casts with @x0.scale,
// stashes a copy of it for its backward, and updates it (the scale-update
// kernel and its store); its quantize kernel also makes a transposed copy
// only the backward reads. Its evaluation forward keeps the cast and the
// edge, and drops the store, the update, the stash copy and the unread
// kernel result. Chunk 1's forward writes nothing: it gets none, and
// evaluation runs it as it is.
module {
  graph.variable @x0.scale : tensor<4xf32> {init = "ones", kind = "state"}
  graph.variable @dy1.scale : tensor<4xf32> {init = "ones", kind = "state"}
  graph.variable @grad.a : tensor<4xf32> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%x: tensor<4xf32> {graph.name = "tokens"}) -> (tensor<4xf32> {graph.name = "loss"}) {
    %xs = graph.load @x0.scale : tensor<4xf32>
    %dys = graph.load @dy1.scale : tensor<4xf32>
    %q:2 = kernel.fused "layers.0.quantize" kind("elementwise") ins(%x, %xs : tensor<4xf32>, tensor<4xf32>) {
    ^bb0(%v: tensor<4xf32>, %s: tensor<4xf32>):
      %m = graph.mul %v, %s : tensor<4xf32>
      %t = graph.add %m, %m : tensor<4xf32>
      kernel.yield %m, %t : tensor<4xf32>, tensor<4xf32>
    } {layer = 0 : i64, section = "forward"} : tensor<4xf32>, tensor<4xf32>
    %ax = graph.add %q#0, %q#0 {layer = 0 : i64, section = "forward"} : tensor<4xf32>
    %b = graph.add %q#0, %q#0 {layer = 1 : i64, section = "forward"} : tensor<4xf32>
    %db = graph.mul %b, %dys {layer = 1 : i64, section = "backward"} : tensor<4xf32>
    %ady = graph.add %db, %db {layer = 1 : i64, section = "backward"} : tensor<4xf32>
    %da = graph.mul %db, %xs {layer = 0 : i64, section = "backward"} : tensor<4xf32>
    %dat = graph.mul %da, %q#1 {layer = 0 : i64, section = "backward"} : tensor<4xf32>
    %new:2 = kernel.fused "fp8.scale_updates" kind("multi_tensor") ins(%ax, %xs, %ady, %dys : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
    ^bb0(%a0: tensor<4xf32>, %s0: tensor<4xf32>, %a1: tensor<4xf32>, %s1: tensor<4xf32>):
      %n0 = graph.add %a0, %s0 : tensor<4xf32>
      %n1 = graph.add %a1, %s1 : tensor<4xf32>
      kernel.yield %n0, %n1 : tensor<4xf32>, tensor<4xf32>
    } {layer = -1 : i64, section = "backward"} : tensor<4xf32>, tensor<4xf32>
    graph.store %new#0, @x0.scale : tensor<4xf32>
    graph.store %new#1, @dy1.scale : tensor<4xf32>
    graph.store %dat, @grad.a : tensor<4xf32>
    return %b : tensor<4xf32>
  }
}

// CHECK-LABEL: func.func @stage0_forward
// CHECK: graph.store {{.*}} @x0.scale
// CHECK-LABEL: func.func @stage0_eval
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {graph.name = "tokens"}) -> tensor<4xf32>
// CHECK-SAME: octet.edge_results = 1 : i64, octet.phase = "eval", octet.stage = 0 : i64
// CHECK-NEXT: %[[XS:.*]] = graph.load @x0.scale
// CHECK-NEXT: %[[Q:.*]] = kernel.fused "layers.0.quantize" kind("elementwise") ins(%[[X]], %[[XS]] :
// CHECK-NEXT: ^bb0(%[[V:[^:]*]]: tensor<4xf32>, %[[S:[^:]*]]: tensor<4xf32>):
// CHECK-NEXT: %[[M:.*]] = graph.mul %[[V]], %[[S]]
// CHECK-NEXT: kernel.yield %[[M]] : tensor<4xf32>
// CHECK-NEXT: } {layer = 0 : i64, section = "forward"} : tensor<4xf32>
// CHECK-NEXT: return %[[Q]] : tensor<4xf32>
// CHECK-NEXT: }
// CHECK-LABEL: func.func @stage0_backward
// CHECK-LABEL: func.func @stage1_forward
// CHECK-NOT: graph.store
// CHECK-LABEL: func.func @stage1_backward
// CHECK-NOT: @stage1_eval

// UNCUT: octet-stage-eval-functions: the module is not cut into pipeline chunks; run octet-split-stages first
