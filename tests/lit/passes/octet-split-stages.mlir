// RUN: %octet-opt %s --octet-split-stages="layer-split=1,1" | FileCheck %s
// RUN: %octet-opt %s --octet-split-stages | FileCheck %s --check-prefix=NONE

// Two layers, one a chunk. The first chunk's forward sends %a (the second
// chunk's input) and keeps nothing: its backward reads only the gradient
// edge. The second chunk's forward (with the loss, an op of no layer after
// them) receives %a, returns the loss first, then stashes what its
// backward reads: %a again (through the save), %b and the loss. Its
// backward sends %da back. The stores go with the values they write, each
// function loads its own accumulator, and the one-rank step is gone.
module {
  graph.variable @grad.a : tensor<4xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.b : tensor<4xf32> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%x: tensor<4xf32> {graph.name = "tokens"}) -> (tensor<4xf32> {graph.name = "loss"}) {
    %ga = graph.load @grad.a : tensor<4xf32>
    %gb = graph.load @grad.b : tensor<4xf32>
    %a = graph.add %x, %x {layer = 0 : i64, section = "forward"} : tensor<4xf32>
    %s = graph.save %a : tensor<4xf32>
    %b = graph.add %a, %a {layer = 1 : i64, section = "forward"} : tensor<4xf32>
    %loss = graph.add %b, %b {layer = -1 : i64, section = "forward"} : tensor<4xf32>
    %db = graph.add %b, %loss {layer = -1 : i64, section = "backward"} : tensor<4xf32>
    %da = graph.add %db, %s {layer = 1 : i64, section = "backward"} : tensor<4xf32>
    %wb = graph.add %gb, %da {layer = 1 : i64, section = "backward"} : tensor<4xf32>
    %wa = graph.add %ga, %da {layer = 0 : i64, section = "backward"} : tensor<4xf32>
    graph.store %wb, @grad.b : tensor<4xf32>
    graph.store %wa, @grad.a : tensor<4xf32>
    return %loss : tensor<4xf32>
  }
}

// CHECK: module attributes {octet.pipeline_chunks = 2 : i64}
// CHECK-NOT: @train_microbatch
// CHECK-LABEL: func.func @stage0_forward(%{{.*}}: tensor<4xf32> {graph.name = "tokens"}) -> tensor<4xf32>
// CHECK-SAME: octet.edge_results = 1 : i64, octet.phase = "forward", octet.stage = 0 : i64
// CHECK-NEXT: %[[A:.*]] = graph.add %arg0, %arg0
// CHECK-NEXT: return %[[A]]
// CHECK-LABEL: func.func @stage0_backward
// CHECK-SAME: (%{{.*}}: tensor<4xf32> {graph.name = "tokens"}, %[[DA:.*]]: tensor<4xf32>)
// CHECK-SAME: octet.phase = "backward", octet.stage = 0 : i64, octet.stash_args = 0 : i64
// CHECK-NEXT: %[[GA:.*]] = graph.load @grad.a
// CHECK-NEXT: %[[WA:.*]] = graph.add %[[GA]], %[[DA]]
// CHECK-NEXT: graph.store %[[WA]], @grad.a
// CHECK-NEXT: return
// CHECK-LABEL: func.func @stage1_forward
// CHECK-SAME: (%{{.*}}: tensor<4xf32> {graph.name = "tokens"}, %[[A1:.*]]: tensor<4xf32>) -> (tensor<4xf32> {graph.name = "loss"}, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-SAME: octet.edge_results = 0 : i64, octet.phase = "forward", octet.stage = 1 : i64
// CHECK-NEXT: %[[B:.*]] = graph.add %[[A1]], %[[A1]]
// CHECK-NEXT: %[[L:.*]] = graph.add %[[B]], %[[B]]
// CHECK-NEXT: return %[[L]], %[[A1]], %[[B]], %[[L]]
// CHECK-LABEL: func.func @stage1_backward
// CHECK-SAME: (%{{.*}}: tensor<4xf32> {graph.name = "tokens"}, %[[SA:[^:]*]]: tensor<4xf32>, %[[SB:[^:]*]]: tensor<4xf32>, %[[SL:[^:]*]]: tensor<4xf32>) -> tensor<4xf32>
// CHECK-SAME: octet.stash_args = 3 : i64
// CHECK-NEXT: %[[DB:.*]] = graph.add %[[SB]], %[[SL]]
// CHECK-NEXT: %[[SAVE:.*]] = graph.save %[[SA]]
// CHECK-NEXT: %[[DA1:.*]] = graph.add %[[DB]], %[[SAVE]]
// CHECK-NEXT: %[[GB:.*]] = graph.load @grad.b
// CHECK-NEXT: %[[WB:.*]] = graph.add %[[GB]], %[[DA1]]
// CHECK-NEXT: graph.store %[[WB]], @grad.b
// CHECK-NEXT: return %[[DA1]]

// Without a split the step is left as it is.
// NONE: func.func @train_microbatch
// NONE-NOT: @stage0_forward
