// RUN: %octet-opt %s --octet-overwrite-gradients | FileCheck %s
// RUN: %octet-opt %s --octet-overwrite-gradients="microbatches=1" | FileCheck %s --check-prefix=ONE

// grad.w and grad.head are each made whole by one wgrad GEMM that reads the
// accumulator once (grad.head through its data-parallel all-reduce), and
// grad.chunks by a chain of wgrad GEMMs of its parameter, each accumulating
// into the one before (octet-chunk-lm-head's token chunks): they are
// written in a step's first microbatch (the chain's first GEMM), and the
// optimizer step no longer clears them. grad.norm has a kernel of its own
// as writer, grad.tied two GEMMs of different parameters, grad.late is read
// again after it is cleared, and grad.eval is read by @forward: each keeps
// its clearing store and its GEMM accumulates. Only grad.w, grad.head and
// grad.chunks become step-local (nothing kept between steps).
module {
  graph.variable @grad.w : tensor<16x8xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.head : tensor<8x8xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.norm : tensor<8xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.tied : tensor<8x8xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.late : tensor<8x8xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.eval : tensor<8x8xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.chunks : tensor<8x8xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.embed : tensor<16x8xf32> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%x: tensor<4x8xbf16>, %dy: tensor<4x8xbf16>, %dz: tensor<4x16xbf16>, %de: tensor<1x4x8xbf16>, %ids: tensor<1x4xi32>) -> tensor<f32> {
    %gw = graph.load @grad.w : tensor<16x8xf32>
    %w = kernel.gemm %dz, %x accumulate(%gw) {param = "w", role = "wgrad", transpose_a} : (tensor<4x16xbf16>, tensor<4x8xbf16>, tensor<16x8xf32>) -> tensor<16x8xf32>
    graph.store %w, @grad.w : tensor<16x8xf32>
    %gh = graph.load @grad.head : tensor<8x8xf32>
    %h = kernel.gemm %dy, %x accumulate(%gh) {param = "head", role = "wgrad", transpose_a} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %r = kernel.collective %h {comm_stream, group = "data", group_size = 2 : i64, kind = "all_reduce", last_microbatch, reduction = "sum"} : (tensor<8x8xf32>) -> tensor<8x8xf32>
    graph.store %r, @grad.head : tensor<8x8xf32>
    %gn = graph.load @grad.norm : tensor<8xf32>
    %n = kernel.fused "norm_grad" kind("row") ins(%gn : tensor<8xf32>) {
    ^bb0(%a: tensor<8xf32>):
      %s = graph.add %a, %a : tensor<8xf32>
      kernel.yield %s : tensor<8xf32>
    } : tensor<8xf32>
    graph.store %n, @grad.norm : tensor<8xf32>
    %gt = graph.load @grad.tied : tensor<8x8xf32>
    %t1 = kernel.gemm %dy, %x accumulate(%gt) {param = "tied", role = "wgrad", transpose_a} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %t2 = kernel.gemm %x, %dy accumulate(%t1) {param = "tied.other", role = "wgrad", transpose_a} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8x8xf32>) -> tensor<8x8xf32>
    graph.store %t2, @grad.tied : tensor<8x8xf32>
    %gl = graph.load @grad.late : tensor<8x8xf32>
    %l = kernel.gemm %dy, %x accumulate(%gl) {param = "late", role = "wgrad", transpose_a} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8x8xf32>) -> tensor<8x8xf32>
    graph.store %l, @grad.late : tensor<8x8xf32>
    %ge = graph.load @grad.eval : tensor<8x8xf32>
    %e = kernel.gemm %dy, %x accumulate(%ge) {param = "eval", role = "wgrad", transpose_a} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8x8xf32>) -> tensor<8x8xf32>
    graph.store %e, @grad.eval : tensor<8x8xf32>
    %gc = graph.load @grad.chunks : tensor<8x8xf32>
    %c1 = kernel.gemm %dy, %x accumulate(%gc) {param = "chunks", role = "wgrad", transpose_a} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %c2 = kernel.gemm %x, %dy accumulate(%c1) {param = "chunks", role = "wgrad", transpose_a} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8x8xf32>) -> tensor<8x8xf32>
    graph.store %c2, @grad.chunks : tensor<8x8xf32>
    %gemb = graph.load @grad.embed : tensor<16x8xf32>
    %emb = kernel.fused "embedding_grad" kind("row") ins(%de, %ids, %gemb : tensor<1x4x8xbf16>, tensor<1x4xi32>, tensor<16x8xf32>) {
    ^bb0(%a: tensor<1x4x8xbf16>, %i: tensor<1x4xi32>, %acc: tensor<16x8xf32>):
      %rows = graph.embedding_grad %a, %i : (tensor<1x4x8xbf16>, tensor<1x4xi32>) -> tensor<16x8xf32>
      %sum = graph.add %acc, %rows : tensor<16x8xf32>
      kernel.yield %sum : tensor<16x8xf32>
    } : tensor<16x8xf32>
    graph.store %emb, @grad.embed : tensor<16x8xf32>
    %loss = graph.fill {value = 1.0 : f64} : tensor<f32>
    return %loss : tensor<f32>
  }
  func.func @optimizer_step() -> tensor<8x8xf32> {
    %gw = graph.load @grad.w : tensor<16x8xf32>
    %z = graph.fill {value = 0.0 : f64} : tensor<8x8xf32>
    %zw = graph.fill {value = 0.0 : f64} : tensor<16x8xf32>
    %zn = graph.fill {value = 0.0 : f64} : tensor<8xf32>
    graph.store %zw, @grad.w : tensor<16x8xf32>
    graph.store %z, @grad.head : tensor<8x8xf32>
    graph.store %zn, @grad.norm : tensor<8xf32>
    graph.store %z, @grad.tied : tensor<8x8xf32>
    graph.store %z, @grad.late : tensor<8x8xf32>
    graph.store %z, @grad.chunks : tensor<8x8xf32>
    graph.store %z, @grad.eval : tensor<8x8xf32>
    graph.store %zw, @grad.embed : tensor<16x8xf32>
    %after = graph.load @grad.late : tensor<8x8xf32>
    return %after : tensor<8x8xf32>
  }
  func.func @forward() -> tensor<8x8xf32> {
    %ge = graph.load @grad.eval : tensor<8x8xf32>
    return %ge : tensor<8x8xf32>
  }
}

// CHECK: graph.variable @grad.w : tensor<16x8xf32> {init = "zeros", kind = "state", step_local}
// CHECK: graph.variable @grad.head : tensor<8x8xf32> {init = "zeros", kind = "state", step_local}
// CHECK: graph.variable @grad.norm : tensor<8xf32> {init = "zeros", kind = "state"}
// CHECK: graph.variable @grad.tied : tensor<8x8xf32> {init = "zeros", kind = "state"}
// CHECK: graph.variable @grad.late : tensor<8x8xf32> {init = "zeros", kind = "state"}
// CHECK: graph.variable @grad.eval : tensor<8x8xf32> {init = "zeros", kind = "state"}
// CHECK: graph.variable @grad.chunks : tensor<8x8xf32> {init = "zeros", kind = "state", step_local}
// CHECK-LABEL: func.func @train_microbatch
// CHECK: kernel.gemm {{.*}}accumulate(%{{.*}}) {first_microbatch_overwrites, param = "w"
// CHECK: kernel.gemm {{.*}}accumulate(%{{.*}}) {first_microbatch_overwrites, param = "head"
// CHECK: kernel.gemm {{.*}}accumulate(%{{.*}}) {param = "tied"
// CHECK: kernel.gemm {{.*}}accumulate(%{{.*}}) {param = "tied.other"
// CHECK: kernel.gemm {{.*}}accumulate(%{{.*}}) {param = "late"
// CHECK: kernel.gemm {{.*}}accumulate(%{{.*}}) {param = "eval"
// CHECK: kernel.gemm {{.*}}accumulate(%{{.*}}) {first_microbatch_overwrites, param = "chunks"
// CHECK: kernel.gemm {{.*}}accumulate(%{{.*}}) {param = "chunks"
// CHECK: kernel.fused "embedding_grad" kind("row") ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<1x4x8xbf16>, tensor<1x4xi32>, tensor<16x8xf32>)
// CHECK: graph.add
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NOT: graph.store {{.*}}@grad.w
// CHECK-NOT: graph.store {{.*}}@grad.head
// CHECK-NOT: graph.store {{.*}}@grad.chunks
// CHECK: graph.store %{{.*}}, @grad.norm
// CHECK-NEXT: graph.store %{{.*}}, @grad.tied
// CHECK-NEXT: graph.store %{{.*}}, @grad.late
// CHECK-NEXT: graph.store %{{.*}}, @grad.eval
// CHECK-NEXT: graph.store %{{.*}}, @grad.embed
// CHECK-NOT: graph.store
// CHECK: return

// One microbatch a step: the GEMMs' accumulators as above; grad.norm and
// grad.tied, which the optimizer clears and nothing else reads, are
// cleared at the start of the train program instead, just before their
// first access, and are step-local. grad.late (read after its clearing)
// and grad.eval (read by @forward) stay as they were. grad.embed, the
// embedding's scatter added to its accumulator, starts from zero in its own
// kernel: no clearing, no load.
// ONE: graph.variable @grad.w : tensor<16x8xf32> {init = "zeros", kind = "state", step_local}
// ONE: graph.variable @grad.head : tensor<8x8xf32> {init = "zeros", kind = "state", step_local}
// ONE: graph.variable @grad.norm : tensor<8xf32> {init = "zeros", kind = "state", step_local}
// ONE: graph.variable @grad.tied : tensor<8x8xf32> {init = "zeros", kind = "state", step_local}
// ONE: graph.variable @grad.late : tensor<8x8xf32> {init = "zeros", kind = "state"}
// ONE: graph.variable @grad.eval : tensor<8x8xf32> {init = "zeros", kind = "state"}
// ONE: graph.variable @grad.embed : tensor<16x8xf32> {init = "zeros", kind = "state", step_local}
// ONE-LABEL: func.func @train_microbatch
// ONE: kernel.gemm {{.*}}accumulate(%{{.*}}) {first_microbatch_overwrites, param = "w"
// ONE: kernel.gemm {{.*}}accumulate(%{{.*}}) {first_microbatch_overwrites, param = "head"
// ONE: %[[ZN:.*]] = graph.fill {value = 0.000000e+00 : f64} : tensor<8xf32>
// ONE-NEXT: graph.store %[[ZN]], @grad.norm : tensor<8xf32>
// ONE-NEXT: graph.load @grad.norm
// ONE: %[[ZT:.*]] = graph.fill {value = 0.000000e+00 : f64} : tensor<8x8xf32>
// ONE-NEXT: graph.store %[[ZT]], @grad.tied : tensor<8x8xf32>
// ONE-NEXT: graph.load @grad.tied
// ONE: kernel.gemm {{.*}}accumulate(%{{.*}}) {param = "tied"
// ONE: kernel.gemm {{.*}}accumulate(%{{.*}}) {param = "tied.other"
// ONE-NOT: graph.store {{.*}}@grad.late
// ONE: kernel.gemm {{.*}}accumulate(%{{.*}}) {param = "late"
// ONE-NOT: @grad.embed
// ONE: kernel.fused "embedding_grad" kind("row") ins(%{{.*}}, %{{.*}} : tensor<1x4x8xbf16>, tensor<1x4xi32>) {
// ONE-NEXT: ^bb0(%{{.*}}: tensor<1x4x8xbf16>, %{{.*}}: tensor<1x4xi32>):
// ONE-NEXT: %[[ROWS:.*]] = graph.embedding_grad
// ONE-NEXT: kernel.yield %[[ROWS]] : tensor<16x8xf32>
// ONE: graph.store %{{.*}}, @grad.embed
// ONE-LABEL: func.func @optimizer_step
// ONE-NOT: graph.store {{.*}}@grad.norm
// ONE-NOT: graph.store {{.*}}@grad.tied
// ONE-NOT: graph.store {{.*}}@grad.embed
// ONE: graph.store %{{.*}}, @grad.late
// ONE-NEXT: graph.store %{{.*}}, @grad.eval
// ONE-NOT: graph.store
// ONE: return
