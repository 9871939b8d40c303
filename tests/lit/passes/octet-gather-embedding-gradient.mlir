// RUN: %octet-opt %s --split-input-file --octet-gather-embedding-gradient="data-parallel=2" | FileCheck %s
// RUN: %octet-opt %s --split-input-file --octet-gather-embedding-gradient="data-parallel=2" --octet-reduce-gradients="data-parallel=2" | FileCheck %s --check-prefix=BUCKETS
// RUN: %octet-opt %s --split-input-file --octet-gather-embedding-gradient | FileCheck %s --check-prefix=NONE
// RUN: %octet-opt %s --split-input-file --octet-gather-embedding-gradient="data-parallel=2 microbatches=6" | FileCheck %s --check-prefix=GATHER
// RUN: %octet-opt %s --split-input-file --octet-gather-embedding-gradient="data-parallel=2 microbatches=3 sharded-optimizer=true" | FileCheck %s --check-prefix=GATHER
// RUN: %octet-opt %s --split-input-file --octet-gather-embedding-gradient="data-parallel=2 microbatches=7" | FileCheck %s --check-prefix=NONE
// RUN: %octet-opt %s --split-input-file --octet-gather-embedding-gradient="data-parallel=2 microbatches=4 sharded-optimizer=true" | FileCheck %s --check-prefix=NONE

// An untied embedding (as the parallelize stage gets it): the LM head's
// wgrad, a layer's wgrad, then the embedding's gradient kernel, which
// alone makes @grad.embed. At data 2 its rows (the output gradient, BF16,
// and the token ids, int32) are all-gathered along dimension 0 right before
// it (one call each), every microbatch (no last_microbatch), on the compute stream (no
// comm_stream); the kernel scatter-adds both ranks' 2x4 rows, and its store
// is marked as the data group's sum.
module {
  graph.variable @grad.embed : tensor<32x8xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.head : tensor<32x8xf32> {init = "zeros", kind = "state"}
  graph.variable @grad.w : tensor<8x8xf32> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%tokens: tensor<2x4xi32>, %x: tensor<8x8xbf16>, %dlogits: tensor<8x32xbf16>, %dy: tensor<8x8xbf16>) -> tensor<f32> {
    %ge = graph.load @grad.embed : tensor<32x8xf32>
    %gh = graph.load @grad.head : tensor<32x8xf32>
    %gw = graph.load @grad.w : tensor<8x8xf32>
    %h = kernel.gemm %dlogits, %x accumulate(%gh) {layer = -1 : i64, param = "lm_head", role = "wgrad", section = "backward", transpose_a} : (tensor<8x32xbf16>, tensor<8x8xbf16>, tensor<32x8xf32>) -> tensor<32x8xf32>
    graph.store %h, @grad.head : tensor<32x8xf32>
    %w = kernel.gemm %dy, %x accumulate(%gw) {layer = 0 : i64, param = "w", role = "wgrad", section = "backward", transpose_a} : (tensor<8x8xbf16>, tensor<8x8xbf16>, tensor<8x8xf32>) -> tensor<8x8xf32>
    graph.store %w, @grad.w : tensor<8x8xf32>
    %d = graph.reshape %dy : (tensor<8x8xbf16>) -> tensor<2x4x8xbf16>
    %e = kernel.fused "embedding_grad" kind("row") ins(%d, %tokens, %ge : tensor<2x4x8xbf16>, tensor<2x4xi32>, tensor<32x8xf32>) {
    ^bb0(%a: tensor<2x4x8xbf16>, %t: tensor<2x4xi32>, %acc: tensor<32x8xf32>):
      %g = graph.embedding_grad %a, %t : (tensor<2x4x8xbf16>, tensor<2x4xi32>) -> tensor<32x8xf32>
      %s = graph.add %acc, %g : tensor<32x8xf32>
      kernel.yield %s : tensor<32x8xf32>
    } {layer = -1 : i64, section = "backward"} : tensor<32x8xf32>
    graph.store %e, @grad.embed : tensor<32x8xf32>
    %loss = graph.fill {value = 1.0 : f64} : tensor<f32>
    return %loss : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_microbatch
// CHECK-SAME: %[[TOK:[^:]*]]: tensor<2x4xi32>
// CHECK: %[[D:.*]] = graph.reshape
// CHECK-NEXT: %[[IDS:.*]] = kernel.collective %[[TOK]] {group = "data", group_size = 2 : i64, kind = "all_gather", layer = -1 : i64, section = "backward"} : (tensor<2x4xi32>) -> tensor<4x4xi32>
// CHECK-NEXT: %[[ROWS:.*]] = kernel.collective %[[D]] {group = "data", group_size = 2 : i64, kind = "all_gather", layer = -1 : i64, section = "backward"} : (tensor<2x4x8xbf16>) -> tensor<4x4x8xbf16>
// CHECK-NEXT: %[[E:.*]] = kernel.fused "embedding_grad" kind("row") ins(%[[ROWS]], %[[IDS]], %{{.*}} : tensor<4x4x8xbf16>, tensor<4x4xi32>, tensor<32x8xf32>)
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<4x4x8xbf16>, %{{.*}}: tensor<4x4xi32>, %{{.*}}: tensor<32x8xf32>):
// CHECK-NEXT: graph.embedding_grad {{.*}} : (tensor<4x4x8xbf16>, tensor<4x4xi32>) -> tensor<32x8xf32>
// CHECK: graph.store %[[E]], @grad.embed {summed_over_data}
// CHECK-NOT: kernel.collective

// Then octet-reduce-gradients: the head's and the layer's accumulators make
// the only bucket, reduced after the layer's wgrad; the embedding's is in no
// bucket, and no collective follows its kernel.
// BUCKETS-LABEL: func.func @train_microbatch
// BUCKETS: %[[W:.*]] = kernel.gemm {{.*}}param = "w"
// BUCKETS-NEXT: %[[B:.*]]:2 = kernel.collective %{{.*}}, %[[W]] {comm_stream, {{.*}}kind = "all_reduce", last_microbatch{{.*}}} : (tensor<32x8xf32>, tensor<8x8xf32>)
// BUCKETS: kernel.collective {{.*}}kind = "all_gather"{{.*}} : (tensor<2x4xi32>)
// BUCKETS-NEXT: kernel.collective {{.*}}kind = "all_gather"{{.*}} : (tensor<2x4x8xbf16>)
// BUCKETS-NEXT: %[[E:.*]] = kernel.fused "embedding_grad"
// BUCKETS: graph.store %[[E]], @grad.embed {summed_over_data}
// BUCKETS-NOT: kernel.collective
// BUCKETS: return

// Bytes a rank sends a step: the rows are 2x4x8 BF16 and 2x4 int32, 160 B,
// which each of the 2 ranks all-gathers every microbatch, against the
// 32x8 f32 table (1024 B) all-reduced (2048 B) or reduce-scattered (1024 B)
// once a step. Gathered up to 6 microbatches a rank (2 x 6 x 160 <= 2048),
// 3 with the optimizer sharded (2 x 3 x 160 <= 1024); past that, and at
// data 1 (the default), nothing changes.
// GATHER-LABEL: func.func @train_microbatch
// GATHER: kernel.collective {{.*}}kind = "all_gather"
// GATHER: graph.store {{.*}}, @grad.embed {summed_over_data}
// NONE-LABEL: func.func @train_microbatch
// NONE-NOT: kernel.collective
// NONE-NOT: summed_over_data
// NONE: return

// -----

// A tied embedding: @grad.embed also takes the LM head's dense wgrad, which
// each rank has for its own rows only; it reaches the embedding's kernel
// through that GEMM. Left alone: no gather, and the buckets reduce it.
module {
  graph.variable @grad.embed : tensor<32x8xf32> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%tokens: tensor<2x4xi32>, %x: tensor<8x8xbf16>, %dlogits: tensor<8x32xbf16>, %dy: tensor<2x4x8xbf16>) -> tensor<f32> {
    %ge = graph.load @grad.embed : tensor<32x8xf32>
    %h = kernel.gemm %dlogits, %x accumulate(%ge) {layer = -1 : i64, param = "embed", role = "wgrad", section = "backward", transpose_a} : (tensor<8x32xbf16>, tensor<8x8xbf16>, tensor<32x8xf32>) -> tensor<32x8xf32>
    %e = kernel.fused "embedding_grad" kind("row") ins(%dy, %tokens, %h : tensor<2x4x8xbf16>, tensor<2x4xi32>, tensor<32x8xf32>) {
    ^bb0(%a: tensor<2x4x8xbf16>, %t: tensor<2x4xi32>, %acc: tensor<32x8xf32>):
      %g = graph.embedding_grad %a, %t : (tensor<2x4x8xbf16>, tensor<2x4xi32>) -> tensor<32x8xf32>
      %s = graph.add %acc, %g : tensor<32x8xf32>
      kernel.yield %s : tensor<32x8xf32>
    } {layer = -1 : i64, section = "backward"} : tensor<32x8xf32>
    graph.store %e, @grad.embed : tensor<32x8xf32>
    %loss = graph.fill {value = 1.0 : f64} : tensor<f32>
    return %loss : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_microbatch
// CHECK-NOT: kernel.collective
// CHECK: kernel.fused "embedding_grad" kind("row") ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x8xbf16>, tensor<2x4xi32>, tensor<32x8xf32>)
// CHECK-NOT: summed_over_data
// CHECK: return

// BUCKETS-LABEL: func.func @train_microbatch
// BUCKETS-NOT: all_gather
// BUCKETS: %[[E:.*]] = kernel.fused "embedding_grad"
// BUCKETS-NEXT: ^bb0
// BUCKETS: %[[R:.*]] = kernel.collective %[[E]] {comm_stream, {{.*}}kind = "all_reduce", last_microbatch
// BUCKETS-NEXT: graph.store %[[R]], @grad.embed : tensor<32x8xf32>

// -----

// A tied embedding as the fusion passes leave it: the LM head's wgrad is an
// input of the embedding's kernel, which adds it and the embedding gradient
// to the accumulator. Left alone too.
module {
  graph.variable @grad.embed : tensor<32x8xf32> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%tokens: tensor<2x4xi32>, %x: tensor<8x8xbf16>, %dlogits: tensor<8x32xbf16>, %dy: tensor<2x4x8xbf16>) -> tensor<f32> {
    %h = kernel.gemm %dlogits, %x {layer = -1 : i64, param = "embed", role = "wgrad", section = "backward", transpose_a} : (tensor<8x32xbf16>, tensor<8x8xbf16>) -> tensor<32x8xf32>
    %ge = graph.load @grad.embed : tensor<32x8xf32>
    %e = kernel.fused "embedding_grad" kind("row") ins(%dy, %tokens, %h, %ge : tensor<2x4x8xbf16>, tensor<2x4xi32>, tensor<32x8xf32>, tensor<32x8xf32>) {
    ^bb0(%a: tensor<2x4x8xbf16>, %t: tensor<2x4xi32>, %head: tensor<32x8xf32>, %acc: tensor<32x8xf32>):
      %g = graph.embedding_grad %a, %t : (tensor<2x4x8xbf16>, tensor<2x4xi32>) -> tensor<32x8xf32>
      %d = graph.add %acc, %head : tensor<32x8xf32>
      %s = graph.add %d, %g : tensor<32x8xf32>
      kernel.yield %s : tensor<32x8xf32>
    } {layer = -1 : i64, section = "backward"} : tensor<32x8xf32>
    graph.store %e, @grad.embed : tensor<32x8xf32>
    %loss = graph.fill {value = 1.0 : f64} : tensor<f32>
    return %loss : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_microbatch
// CHECK-NOT: kernel.collective
// CHECK: kernel.fused "embedding_grad" kind("row") ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x8xbf16>, tensor<2x4xi32>, tensor<32x8xf32>, tensor<32x8xf32>)
// CHECK-NOT: summed_over_data
// CHECK: return
