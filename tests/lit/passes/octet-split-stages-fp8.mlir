// RUN: %octet-opt %s --octet-split-stages="layer-split=1,1" | FileCheck %s

// Delayed scaling's scale state: the step reads @x0.scale (layer 0's
// forward casts with it, its backward reads it again) and @dy1.scale
// (layer 1's backward), and one multi-tensor kernel after the last amax
// updates both. The kernel becomes one per part: the x update where its
// amax is made (chunk 0's forward), the dy update in chunk 1's backward.
// Chunk 0's forward loads @x0.scale before it writes it and stashes the
// value (a copy) for its backward, which reads what the forward read. The
// copy is made right after the load: on the GPU a load names the
// variable's bytes, which the scale update overwrites.
module {
  graph.variable @x0.scale : tensor<4xf32> {init = "ones", kind = "state"}
  graph.variable @dy1.scale : tensor<4xf32> {init = "ones", kind = "state"}
  graph.variable @grad.a : tensor<4xf32> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%x: tensor<4xf32> {graph.name = "tokens"}) -> (tensor<4xf32> {graph.name = "loss"}) {
    %xs = graph.load @x0.scale : tensor<4xf32>
    %dys = graph.load @dy1.scale : tensor<4xf32>
    %a = graph.mul %x, %xs {layer = 0 : i64, section = "forward"} : tensor<4xf32>
    %ax = graph.add %a, %a {layer = 0 : i64, section = "forward"} : tensor<4xf32>
    %b = graph.add %a, %a {layer = 1 : i64, section = "forward"} : tensor<4xf32>
    %db = graph.mul %b, %dys {layer = 1 : i64, section = "backward"} : tensor<4xf32>
    %ady = graph.add %db, %db {layer = 1 : i64, section = "backward"} : tensor<4xf32>
    %da = graph.mul %db, %xs {layer = 0 : i64, section = "backward"} : tensor<4xf32>
    %new:2 = kernel.fused "fp8.scale_updates" kind("multi_tensor") ins(%ax, %xs, %ady, %dys : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
    ^bb0(%a0: tensor<4xf32>, %s0: tensor<4xf32>, %a1: tensor<4xf32>, %s1: tensor<4xf32>):
      %n0 = graph.add %a0, %s0 : tensor<4xf32>
      %n1 = graph.add %a1, %s1 : tensor<4xf32>
      kernel.yield %n0, %n1 : tensor<4xf32>, tensor<4xf32>
    } {layer = -1 : i64, section = "backward"} : tensor<4xf32>, tensor<4xf32>
    graph.store %new#0, @x0.scale : tensor<4xf32>
    graph.store %new#1, @dy1.scale : tensor<4xf32>
    graph.store %da, @grad.a : tensor<4xf32>
    return %b : tensor<4xf32>
  }
}

// CHECK-LABEL: func.func @stage0_forward
// CHECK-NEXT: %[[XS:.*]] = graph.load @x0.scale
// CHECK-NEXT: %[[COPY:.*]] = kernel.copy %[[XS]]
// CHECK-NEXT: %[[A:.*]] = graph.mul %arg0, %[[XS]]
// CHECK-NEXT: %[[AX:.*]] = graph.add %[[A]], %[[A]]
// CHECK-NEXT: %[[NEW:.*]] = kernel.fused "fp8.scale_updates" kind("multi_tensor") ins(%[[AX]], %[[XS]] :
// CHECK: section = "forward"
// CHECK-NOT: @dy1
// CHECK: graph.store %[[NEW]], @x0.scale
// CHECK-NEXT: return %[[A]], %[[COPY]]
// CHECK-LABEL: func.func @stage0_backward
// CHECK-SAME: %[[SXS:[^:]*]]: tensor<4xf32>, %[[DB:[^:]*]]: tensor<4xf32>)
// CHECK-NOT: graph.load
// CHECK: graph.mul %[[DB]], %[[SXS]]
// CHECK-LABEL: func.func @stage1_forward
// CHECK-NOT: scale_updates
// CHECK-LABEL: func.func @stage1_backward
// CHECK: %[[DYS:.*]] = graph.load @dy1.scale
// CHECK: kernel.fused "fp8.scale_updates" kind("multi_tensor") ins(%{{[^,]*}}, %[[DYS]] :
// CHECK-NOT: @x0.scale
// CHECK: graph.store {{.*}} @dy1.scale
