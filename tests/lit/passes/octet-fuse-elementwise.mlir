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

// Two blockwise quantizations of one tensor (a gradient's 128x1 tiles,
// K-major, for wgrad and its 1x128 tiles for dgrad) become one kernel that
// reads the tensor once; a quantization of another tensor stays apart.
// SLICE-LABEL: func.func @block_quantizes
// SLICE: %[[Q:.*]]:4 = kernel.fused "dgrad" kind("elementwise") ins(%[[DY:.*]] : tensor<256x384xbf16>) {
// SLICE-NEXT: ^bb0(%[[A:.*]]: tensor<256x384xbf16>):
// SLICE-NEXT: fp8.block_quantize %[[A]] {block = array<i64: 128, 1>
// SLICE-NEXT: fp8.transpose
// SLICE-NEXT: fp8.block_quantize %[[A]] {block = array<i64: 1, 128>
// SLICE-NEXT: kernel.yield
// SLICE: kernel.fused "other" kind("elementwise") ins(%{{.*}} : tensor<256x384xbf16>)
// SLICE-NOT: kernel.fused
// SLICE: return
func.func @block_quantizes(%dy: tensor<256x384xbf16>, %x: tensor<256x384xbf16>) -> (tensor<384x256xf8E4M3FN>, tensor<384x2xf32>, tensor<256x384xf8E4M3FN>, tensor<256x3xf32>, tensor<256x384xf8E4M3FN>, tensor<256x3xf32>) {
  %t:2 = kernel.fused "wgrad" kind("elementwise") ins(%dy : tensor<256x384xbf16>) {
  ^bb0(%a: tensor<256x384xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 1>, dtype = f8E4M3FN} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<2x384xf32>)
    %qt, %st = fp8.transpose %q, %s {block = array<i64: 128, 1>} : (tensor<256x384xf8E4M3FN>, tensor<2x384xf32>) -> (tensor<384x256xf8E4M3FN>, tensor<384x2xf32>)
    kernel.yield %qt, %st : tensor<384x256xf8E4M3FN>, tensor<384x2xf32>
  } : tensor<384x256xf8E4M3FN>, tensor<384x2xf32>
  %r:2 = kernel.fused "dgrad" kind("elementwise") ins(%dy : tensor<256x384xbf16>) {
  ^bb0(%a: tensor<256x384xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 1, 128>, dtype = f8E4M3FN} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<256x3xf32>)
    kernel.yield %q, %s : tensor<256x384xf8E4M3FN>, tensor<256x3xf32>
  } : tensor<256x384xf8E4M3FN>, tensor<256x3xf32>
  %o:2 = kernel.fused "other" kind("elementwise") ins(%x : tensor<256x384xbf16>) {
  ^bb0(%a: tensor<256x384xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 1, 128>, dtype = f8E4M3FN} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<256x3xf32>)
    kernel.yield %q, %s : tensor<256x384xf8E4M3FN>, tensor<256x3xf32>
  } : tensor<256x384xf8E4M3FN>, tensor<256x3xf32>
  return %t#0, %t#1, %r#0, %r#1, %o#0, %o#1 : tensor<384x256xf8E4M3FN>, tensor<384x2xf32>, tensor<256x384xf8E4M3FN>, tensor<256x3xf32>, tensor<256x384xf8E4M3FN>, tensor<256x3xf32>
}

// Two elementwise kernels that read the same tensors and do not depend on
// each other (the backward's SwiGLU recomputed for w_down's wgrad and the
// SwiGLU gradient, after w_down's dgrad) become one kernel that reads gate
// and up once, where the first stood: the wgrad GEMM reads its result and
// comes after. A kernel of another layer or section stays apart, and so
// does one that reads what the other makes through a GEMM.
// SLICE-LABEL: func.func @siblings
// SLICE: %[[M:.*]]:3 = kernel.fused "layers.0.swiglu_grad" kind("elementwise") ins(%arg0, %arg1, %arg2 : tensor<8x6xbf16>, tensor<8x6xbf16>, tensor<8x6xbf16>) {
// SLICE-NEXT: ^bb0(%[[G:.*]]: tensor<8x6xbf16>, %[[U:.*]]: tensor<8x6xbf16>, %[[DH:.*]]: tensor<8x6xbf16>):
// SLICE-NEXT: graph.swiglu %[[G]], %[[U]] {recomputed}
// SLICE-NEXT: graph.swiglu_grad %[[DH]], %[[G]], %[[U]]
// SLICE-NEXT: kernel.yield
// SLICE-NEXT: } {layer = 0 : i64, section = "backward"}
// SLICE-NEXT: %[[W:.*]] = kernel.gemm %arg3, %[[M]]#0
// SLICE-NEXT: kernel.fused "layers.1.swiglu" kind("elementwise")
// SLICE: kernel.fused "layers.0.silu" kind("elementwise") ins(%arg0, %[[W]] :
// SLICE: return
func.func @siblings(%gate: tensor<8x6xbf16>, %up: tensor<8x6xbf16>, %dh: tensor<8x6xbf16>, %dy: tensor<8x4xbf16>) -> (tensor<4x6xf32>, tensor<8x6xbf16>, tensor<8x6xbf16>, tensor<8x6xbf16>, tensor<8x6xbf16>) {
  %h = kernel.fused "layers.0.swiglu" kind("elementwise") ins(%gate, %up : tensor<8x6xbf16>, tensor<8x6xbf16>) {
  ^bb0(%g: tensor<8x6xbf16>, %u: tensor<8x6xbf16>):
    %r = graph.swiglu %g, %u {recomputed} : tensor<8x6xbf16>
    kernel.yield %r : tensor<8x6xbf16>
  } {layer = 0 : i64, section = "backward"} : tensor<8x6xbf16>
  %w = kernel.gemm %dy, %h {layer = 0 : i64, role = "wgrad", section = "backward", transpose_a} : (tensor<8x4xbf16>, tensor<8x6xbf16>) -> tensor<4x6xf32>
  %other = kernel.fused "layers.1.swiglu" kind("elementwise") ins(%gate, %up : tensor<8x6xbf16>, tensor<8x6xbf16>) {
  ^bb0(%g: tensor<8x6xbf16>, %u: tensor<8x6xbf16>):
    %r = graph.swiglu %g, %u : tensor<8x6xbf16>
    kernel.yield %r : tensor<8x6xbf16>
  } {layer = 1 : i64, section = "backward"} : tensor<8x6xbf16>
  %d:2 = kernel.fused "layers.0.swiglu_grad" kind("elementwise") ins(%dh, %gate, %up : tensor<8x6xbf16>, tensor<8x6xbf16>, tensor<8x6xbf16>) {
  ^bb0(%x: tensor<8x6xbf16>, %g: tensor<8x6xbf16>, %u: tensor<8x6xbf16>):
    %dg, %du = graph.swiglu_grad %x, %g, %u : tensor<8x6xbf16>
    kernel.yield %dg, %du : tensor<8x6xbf16>, tensor<8x6xbf16>
  } {layer = 0 : i64, section = "backward"} : tensor<8x6xbf16>, tensor<8x6xbf16>
  %later = kernel.fused "layers.0.silu" kind("elementwise") ins(%gate, %w : tensor<8x6xbf16>, tensor<4x6xf32>) {
  ^bb0(%g: tensor<8x6xbf16>, %ww: tensor<4x6xf32>):
    %r = graph.silu %g : tensor<8x6xbf16>
    kernel.yield %r : tensor<8x6xbf16>
  } {layer = 0 : i64, section = "backward"} : tensor<8x6xbf16>
  return %w, %d#0, %d#1, %other, %later : tensor<4x6xf32>, tensor<8x6xbf16>, tensor<8x6xbf16>, tensor<8x6xbf16>, tensor<8x6xbf16>
}
