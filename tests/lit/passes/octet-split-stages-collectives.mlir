// RUN: %octet-opt %s --split-input-file --octet-split-stages="layer-split=1,1,1" | FileCheck %s

// Pipeline x data: octet-reduce-gradients filled its buckets in the
// backward's order, blind to the chunks, so the first bucket holds the
// gradients of layers 2 and 1, which run on different pipeline ranks. The
// cut gives each chunk's backward its own collective over the data group,
// with its own gradients in the bucket's order, right after the op that
// makes the last of them, and every attribute of the bucket's (the
// last_microbatch and comm_stream placement); the stores follow. The
// second bucket, all of chunk 0's, goes there whole.
module {
  graph.variable @grad.a : tensor<4xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.b : tensor<4xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.c : tensor<4xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.c2 : tensor<4xf32> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%x: tensor<4xf32> {graph.name = "tokens"}) -> (tensor<4xf32> {graph.name = "loss"}) {
    %ga = graph.load @grad.a : tensor<4xf32>
    %gb = graph.load @grad.b : tensor<4xf32>
    %gc = graph.load @grad.c : tensor<4xf32>
    %gc2 = graph.load @grad.c2 : tensor<4xf32>
    %a = graph.add %x, %x {layer = 0 : i64, section = "forward"} : tensor<4xf32>
    %b = graph.add %a, %a {layer = 1 : i64, section = "forward"} : tensor<4xf32>
    %c = graph.add %b, %b {layer = 2 : i64, section = "forward"} : tensor<4xf32>
    %dc = graph.add %c, %c {layer = 2 : i64, section = "backward"} : tensor<4xf32>
    %wc = graph.add %gc, %dc {layer = 2 : i64, section = "backward"} : tensor<4xf32>
    %wc2 = graph.add %gc2, %dc {layer = 2 : i64, section = "backward"} : tensor<4xf32>
    %db = graph.add %dc, %b {layer = 1 : i64, section = "backward"} : tensor<4xf32>
    %wb = graph.add %gb, %db {layer = 1 : i64, section = "backward"} : tensor<4xf32>
    %r:3 = kernel.collective %wc2, %wb, %wc {comm_stream, group = "data", group_size = 2 : i64, kind = "all_reduce", last_microbatch, layer = 1 : i64, reduction = "sum", section = "backward"} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    graph.store %r#0, @grad.c2 : tensor<4xf32>
    graph.store %r#1, @grad.b : tensor<4xf32>
    graph.store %r#2, @grad.c : tensor<4xf32>
    %da = graph.add %db, %a {layer = 0 : i64, section = "backward"} : tensor<4xf32>
    %wa = graph.add %ga, %da {layer = 0 : i64, section = "backward"} : tensor<4xf32>
    %r2 = kernel.collective %wa {comm_stream, group = "data", group_size = 2 : i64, kind = "all_reduce", last_microbatch, layer = 0 : i64, reduction = "sum", section = "backward"} : (tensor<4xf32>) -> tensor<4xf32>
    graph.store %r2, @grad.a : tensor<4xf32>
    return %c : tensor<4xf32>
  }
}

// CHECK-LABEL: func.func @stage0_backward
// CHECK: %[[GA:.*]] = graph.load @grad.a
// CHECK-NEXT: %[[WA:.*]] = graph.add %[[GA]], %{{.*}} {layer = 0 : i64, section = "backward"}
// CHECK-NEXT: %[[RA:.*]] = kernel.collective %[[WA]] {comm_stream, group = "data", group_size = 2 : i64, kind = "all_reduce", last_microbatch, layer = 0 : i64, section = "backward"} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: graph.store %[[RA]], @grad.a
// CHECK-NEXT: return
// CHECK-LABEL: func.func @stage1_backward
// CHECK: %[[DB:.*]] = graph.add %{{.*}}, %{{.*}} {layer = 1 : i64, section = "backward"}
// CHECK-NEXT: %[[GB:.*]] = graph.load @grad.b
// CHECK-NEXT: %[[WB:.*]] = graph.add %[[GB]], %[[DB]] {layer = 1 : i64, section = "backward"}
// CHECK-NEXT: %[[RB:.*]] = kernel.collective %[[WB]] {comm_stream, group = "data", group_size = 2 : i64, kind = "all_reduce", last_microbatch, layer = 1 : i64, section = "backward"} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: graph.store %[[RB]], @grad.b
// CHECK-NEXT: return
// CHECK-LABEL: func.func @stage2_backward
// CHECK: %[[GC:.*]] = graph.load @grad.c :
// CHECK-NEXT: %[[WC:.*]] = graph.add %[[GC]], %{{.*}} {layer = 2 : i64, section = "backward"}
// CHECK-NEXT: %[[GC2:.*]] = graph.load @grad.c2
// CHECK-NEXT: %[[WC2:.*]] = graph.add %[[GC2]], %{{.*}} {layer = 2 : i64, section = "backward"}
// CHECK-NEXT: %[[RC:.*]]:2 = kernel.collective %[[WC2]], %[[WC]] {comm_stream, group = "data", group_size = 2 : i64, kind = "all_reduce", last_microbatch, layer = 2 : i64, section = "backward"}
// CHECK-NEXT: graph.store %[[RC]]#0, @grad.c2
// CHECK-NEXT: graph.store %[[RC]]#1, @grad.c
// CHECK-NEXT: return
// CHECK-NOT: kernel.collective

// -----

// A collective of a step argument alone (octet-gather-embedding-gradient's
// all-gather of the token ids): no op makes it, so the collective's own
// section and layer place it, with the kernel that reads what it gathers,
// in the first chunk's backward (layer -1 after the layers' backward).
module {
  graph.variable @grad.e : tensor<8xf32> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%x: tensor<4xf32> {graph.name = "tokens"}) -> (tensor<4xf32> {graph.name = "loss"}) {
    %ge = graph.load @grad.e : tensor<8xf32>
    %a = graph.add %x, %x {layer = 0 : i64, section = "forward"} : tensor<4xf32>
    %b = graph.add %a, %a {layer = 1 : i64, section = "forward"} : tensor<4xf32>
    %c = graph.add %b, %b {layer = 2 : i64, section = "forward"} : tensor<4xf32>
    %dc = graph.add %c, %c {layer = 2 : i64, section = "backward"} : tensor<4xf32>
    %db = graph.add %dc, %b {layer = 1 : i64, section = "backward"} : tensor<4xf32>
    %da = graph.add %db, %a {layer = 0 : i64, section = "backward"} : tensor<4xf32>
    %xs = kernel.collective %x {group = "data", group_size = 2 : i64, kind = "all_gather", layer = -1 : i64, section = "backward"} : (tensor<4xf32>) -> tensor<8xf32>
    %ds = kernel.collective %da {group = "data", group_size = 2 : i64, kind = "all_gather", layer = -1 : i64, section = "backward"} : (tensor<4xf32>) -> tensor<8xf32>
    %p = graph.add %xs, %ds {layer = -1 : i64, section = "backward"} : tensor<8xf32>
    %we = graph.add %ge, %p {layer = -1 : i64, section = "backward"} : tensor<8xf32>
    graph.store %we, @grad.e {summed_over_data} : tensor<8xf32>
    return %c : tensor<4xf32>
  }
}

// CHECK-LABEL: func.func @stage0_backward
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {graph.name = "tokens"}
// CHECK: %[[DA:.*]] = graph.add %{{.*}}, %{{.*}} {layer = 0 : i64, section = "backward"}
// CHECK: %[[XS:.*]] = kernel.collective %[[X]] {group = "data", group_size = 2 : i64, kind = "all_gather", layer = -1 : i64, section = "backward"} : (tensor<4xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[DS:.*]] = kernel.collective %[[DA]] {{.*}}kind = "all_gather"
// CHECK-NEXT: graph.add %[[XS]], %[[DS]]
// CHECK: graph.store {{.*}}, @grad.e {summed_over_data}
// CHECK-LABEL: func.func @stage1_backward
// CHECK-NOT: kernel.collective
// CHECK-LABEL: func.func @stage2_backward
// CHECK-NOT: kernel.collective
// CHECK: return
