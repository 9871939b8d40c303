// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv --octet-precision="amax-history-len=4" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-elementwise | FileCheck %s
// RUN: %octet-opt %s --octet-fuse-elementwise | FileCheck %s --check-prefix=SLICE

// CHECK-LABEL: func.func @train_microbatch
// An FP8 cast writes its K-major copy itself.
// CHECK: kernel.fused "layers.0.quantize" kind("elementwise")
// CHECK-NEXT: ^bb0
// CHECK-NEXT: fp8.quantize
// CHECK-NEXT: fp8.transpose
// CHECK-NEXT: kernel.yield
// CHECK-NOT: kernel.copy

// The scale bookkeeping of delayed scaling: one multi-tensor kernel after
// the amaxes are known.
// CHECK: kernel.fused "fp8.scale_updates" kind("multi_tensor")
// CHECK-NEXT: ^bb0
// CHECK-NEXT: fp8.scale_update
// CHECK-NEXT: fp8.scale_update

// The gradient accumulation of the embedding table joins the kernel that
// computes the gradient.
// CHECK: kernel.fused "embedding_grad" kind("row")
// CHECK-NEXT: ^bb0
// CHECK-NEXT: graph.embedding_grad
// CHECK-NEXT: graph.add
// CHECK-NEXT: graph.add
// CHECK-NEXT: kernel.yield
// CHECK-NOT: fp8.scale_update
// CHECK-LABEL: func.func @optimizer_step

// A slice that is one contiguous run of its input (outer dimensions 1)
// stays a view; a strided one (the halves of each row of a fused gate/up
// GEMM) gets a kernel, since a kernel reading it in place would read whole
// rows. Here it folds into the kernel that consumes it.
// SLICE-LABEL: func.func @slices
// SLICE: %[[C:.*]] = graph.slice %{{.*}} {dim = 1 : i64, offset = 4 : i64} : (tensor<1x8x6xf32>) -> tensor<1x4x6xf32>
// SLICE-NEXT: %[[S:.*]] = kernel.fused "silu" kind("elementwise") ins(%{{.*}} : tensor<2x8x6xf32>) {
// SLICE-NEXT: ^bb0(%[[A:.*]]: tensor<2x8x6xf32>):
// SLICE-NEXT: %[[H:.*]] = graph.slice %[[A]] {dim = 2 : i64, offset = 3 : i64} : (tensor<2x8x6xf32>) -> tensor<2x8x3xf32>
// SLICE-NEXT: graph.silu %[[H]]
// SLICE: return %[[C]], %[[S]]
func.func @slices(%a: tensor<1x8x6xf32>, %b: tensor<2x8x6xf32>) -> (tensor<1x4x6xf32>, tensor<2x8x3xf32>) {
  %c = graph.slice %a {dim = 1 : i64, offset = 4 : i64} : (tensor<1x8x6xf32>) -> tensor<1x4x6xf32>
  %s = graph.slice %b {dim = 2 : i64, offset = 3 : i64} : (tensor<2x8x6xf32>) -> tensor<2x8x3xf32>
  %y = kernel.fused "silu" kind("elementwise") ins(%s : tensor<2x8x3xf32>) {
  ^bb0(%x: tensor<2x8x3xf32>):
    %z = graph.silu %x : tensor<2x8x3xf32>
    kernel.yield %z : tensor<2x8x3xf32>
  } : tensor<2x8x3xf32>
  return %c, %y : tensor<1x4x6xf32>, tensor<2x8x3xf32>
}
