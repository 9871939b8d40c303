// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv --octet-precision="amax-history-len=4" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-adamw --octet-step-local-kmajor-weights | FileCheck %s

// Delayed scaling: the K-major copies are no longer state; the row-major
// FP8 weights and their amaxes are.
// CHECK-NOT: graph.variable @fp8w.{{.*}}.t :
// CHECK: graph.variable @fp8w.layers.0.mlp.w_down : tensor<16x24xf8E4M3FN>
// CHECK-NOT: graph.variable @fp8w.{{.*}}.t :
// CHECK-LABEL: func.func @train_microbatch
// CHECK-NOT: graph.load @fp8w.{{.*}}.t :
// Each dgrad GEMM reads a transpose of the row-major cache, loaded and
// transposed right before it, with the GEMM's own inverse scale.
// CHECK: kernel.gemm {{.*}}param = "layers.0.mlp.w_down", role = "fprop"
// CHECK: %[[W:.*]] = graph.load @fp8w.layers.0.mlp.w_down : tensor<16x24xf8E4M3FN>
// CHECK-NEXT: %[[T:.*]] = kernel.fused "layers.0.mlp.w_down.kmajor" kind("elementwise") ins(%[[W]], %[[S:.*]] : tensor<16x24xf8E4M3FN>, tensor<f32>) {
// CHECK-NEXT: ^bb0(%[[A0:.*]]: tensor<16x24xf8E4M3FN>, %[[A1:.*]]: tensor<f32>):
// CHECK-NEXT: %[[Q:.*]], %{{.*}} = fp8.transpose %[[A0]], %[[A1]] : (tensor<16x24xf8E4M3FN>, tensor<f32>) -> (tensor<24x16xf8E4M3FN>, tensor<f32>)
// CHECK-NEXT: kernel.yield %[[Q]] : tensor<24x16xf8E4M3FN>
// CHECK-NEXT: } {layer = 0 : i64, section = "backward"} : tensor<24x16xf8E4M3FN>
// CHECK-NEXT: kernel.gemm %{{.*}}, %[[T]] scales_inv(%{{.*}}, %[[S]]) {{.*}}param = "layers.0.mlp.w_down", role = "dgrad"
// CHECK: kernel.fused "layers.0.mlp.w_gate_up.kmajor"
// CHECK-NEXT: ^bb0
// CHECK-NEXT: fp8.transpose
// CHECK: kernel.gemm {{.*}}param = "layers.0.mlp.w_gate_up", role = "dgrad"
// CHECK: kernel.fused "layers.0.attn.wo.kmajor"
// CHECK: kernel.gemm {{.*}}param = "layers.0.attn.wo", role = "dgrad"
// CHECK: kernel.fused "layers.0.attn.wqkv.kmajor"
// CHECK: kernel.gemm {{.*}}param = "layers.0.attn.wqkv", role = "dgrad"
// The optimizer's multi-tensor kernel and @cache_weights cast, but no
// longer transpose.
// CHECK-LABEL: func.func @optimizer_step
// CHECK: kernel.fused "optimizer.adamw" kind("multi_tensor")
// CHECK-NOT: fp8.transpose
// CHECK: fp8.quantize {{.*}}tensor = "layers.0.attn.wqkv.w"
// CHECK-NOT: fp8.transpose
// CHECK: graph.store {{.*}}, @fp8w.layers.0.attn.wqkv :
// CHECK-NEXT: graph.store {{.*}}, @fp8w.layers.0.attn.wqkv.amax :
// CHECK-LABEL: func.func @cache_weights()
// CHECK-NOT: fp8.transpose
// CHECK: graph.store {{.*}}, @fp8w.layers.0.mlp.w_down :
// CHECK-NEXT: graph.store {{.*}}, @fp8w.layers.0.mlp.w_down.amax :
// CHECK-NOT: fp8.transpose

// Current scaling: the same, the optimizer's cast kernels without their
// transposes.
// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv --octet-precision="recipe=current" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-adamw --octet-step-local-kmajor-weights | FileCheck %s --check-prefix=CUR
// CUR-NOT: graph.variable @fp8w.{{.*}}.t :
// CUR-LABEL: func.func @train_microbatch
// CUR-NOT: graph.load @fp8w.{{.*}}.t :
// CUR: %[[S:.*]] = graph.load @fp8w.layers.0.attn.wqkv.scale_inv : tensor<f32>
// CUR: kernel.gemm {{.*}}param = "layers.0.attn.wqkv", role = "fprop"
// CUR: %[[W:.*]] = graph.load @fp8w.layers.0.attn.wqkv : tensor<32x16xf8E4M3FN>
// CUR-NEXT: %[[T:.*]] = kernel.fused "layers.0.attn.wqkv.kmajor" kind("elementwise") ins(%[[W]], %[[S]] :
// CUR: kernel.gemm %{{.*}}, %[[T]] scales_inv(%{{.*}}, %[[S]]) {{.*}}param = "layers.0.attn.wqkv", role = "dgrad"
// CUR-LABEL: func.func @optimizer_step
// CUR: kernel.fused "optimizer.fp8_weights" kind("elementwise")
// CUR-NEXT: ^bb0
// CUR-NEXT: fp8.quantize {{.*}}tensor = "layers.0.attn.wqkv.w"
// CUR-NEXT: kernel.yield
// CUR: graph.store {{.*}}, @fp8w.layers.0.attn.wqkv :
// CUR-NEXT: graph.store {{.*}}, @fp8w.layers.0.attn.wqkv.scale :
// CUR-LABEL: func.func @cache_weights()
// CUR-NOT: fp8.transpose

// RUN: %octet-opt %s --octet-step-local-kmajor-weights | FileCheck %s --check-prefix=ONE

// @w: ZeRO-1's copy, a kernel of its own transposing the gathered row-major
// cache, goes with its kernel. @v: a copy read by a kernel other than a
// GEMM stays state. @u: a copy that is no transpose of what is stored to
// the row-major cache stays state.
// ONE-NOT: graph.variable @fp8w.w.t
// ONE: graph.variable @fp8w.v.t
// ONE-NOT: graph.variable @fp8w.w.t
// ONE: graph.variable @fp8w.u.t
// ONE-NOT: graph.variable @fp8w.w.t
// ONE-LABEL: func.func @train_microbatch
// ONE: %[[V:.*]] = graph.load @fp8w.v.t
// ONE-NEXT: %[[U:.*]] = graph.load @fp8w.u.t
// ONE: %[[W:.*]] = graph.load @fp8w.w :
// ONE-NEXT: %[[T:.*]] = kernel.fused "w.kmajor"
// ONE: kernel.gemm %arg0, %[[T]] scales_inv(%arg1, %arg2) {role = "dgrad", transpose_b}
// ONE: kernel.fused "reads_v" kind("elementwise") ins(%[[V]] :
// ONE: kernel.gemm %arg0, %[[U]]
// ONE-LABEL: func.func @optimizer_step
// ONE: %[[G:.*]] = kernel.collective
// ONE-NOT: kernel.fused "optimizer.fp8_weight_kmajor" kind("elementwise") ins(%[[G]]
// ONE: graph.store %[[G]], @fp8w.w :
// ONE-NOT: @fp8w.w.t
// ONE: graph.store %{{.*}}, @fp8w.v.t
// ONE: graph.store %{{.*}}, @fp8w.u.t
module {
  graph.variable @fp8w.w : tensor<64x32xf8E4M3FN> {init = "zeros", kind = "state"}
  graph.variable @fp8w.w.t : tensor<32x64xf8E4M3FN> {init = "zeros", kind = "state"}
  graph.variable @fp8w.v : tensor<64x32xf8E4M3FN> {init = "zeros", kind = "state"}
  graph.variable @fp8w.v.t : tensor<32x64xf8E4M3FN> {init = "zeros", kind = "state"}
  graph.variable @fp8w.u : tensor<64x32xf8E4M3FN> {init = "zeros", kind = "state"}
  graph.variable @fp8w.u.t : tensor<32x64xf8E4M3FN> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%dy: tensor<16x64xf8E5M2>, %sdy: tensor<f32>, %sw: tensor<f32>) -> (tensor<16x32xbf16>, tensor<32x64xf8E4M3FN>, tensor<16x32xbf16>) {
    %wt = graph.load @fp8w.w.t : tensor<32x64xf8E4M3FN>
    %vt = graph.load @fp8w.v.t : tensor<32x64xf8E4M3FN>
    %ut = graph.load @fp8w.u.t : tensor<32x64xf8E4M3FN>
    %dx = kernel.gemm %dy, %wt scales_inv(%sdy, %sw) {role = "dgrad", transpose_b} : (tensor<16x64xf8E5M2>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xbf16>
    %c = kernel.fused "reads_v" kind("elementwise") ins(%vt : tensor<32x64xf8E4M3FN>) {
    ^bb0(%a: tensor<32x64xf8E4M3FN>):
      kernel.yield %a : tensor<32x64xf8E4M3FN>
    } : tensor<32x64xf8E4M3FN>
    %du = kernel.gemm %dy, %ut scales_inv(%sdy, %sw) {role = "dgrad", transpose_b} : (tensor<16x64xf8E5M2>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xbf16>
    return %dx, %c, %du : tensor<16x32xbf16>, tensor<32x64xf8E4M3FN>, tensor<16x32xbf16>
  }
  func.func @optimizer_step(%part: tensor<32x32xf8E4M3FN>, %s: tensor<f32>, %v: tensor<64x32xf8E4M3FN>, %other: tensor<64x32xf8E4M3FN>) {
    %g = kernel.collective %part {comm_stream, group = "data", group_size = 2 : i64, in_place, kind = "all_gather", reduction = "sum"} : (tensor<32x32xf8E4M3FN>) -> tensor<64x32xf8E4M3FN>
    %t = kernel.fused "optimizer.fp8_weight_kmajor" kind("elementwise") ins(%g, %s : tensor<64x32xf8E4M3FN>, tensor<f32>) {
    ^bb0(%a0: tensor<64x32xf8E4M3FN>, %a1: tensor<f32>):
      %q, %qs = fp8.transpose %a0, %a1 : (tensor<64x32xf8E4M3FN>, tensor<f32>) -> (tensor<32x64xf8E4M3FN>, tensor<f32>)
      kernel.yield %q : tensor<32x64xf8E4M3FN>
    } : tensor<32x64xf8E4M3FN>
    %vt = kernel.fused "optimizer.fp8_weight_kmajor" kind("elementwise") ins(%v, %s : tensor<64x32xf8E4M3FN>, tensor<f32>) {
    ^bb0(%a0: tensor<64x32xf8E4M3FN>, %a1: tensor<f32>):
      %q, %qs = fp8.transpose %a0, %a1 : (tensor<64x32xf8E4M3FN>, tensor<f32>) -> (tensor<32x64xf8E4M3FN>, tensor<f32>)
      kernel.yield %q : tensor<32x64xf8E4M3FN>
    } : tensor<32x64xf8E4M3FN>
    %ut = kernel.fused "optimizer.fp8_weight_kmajor" kind("elementwise") ins(%other, %s : tensor<64x32xf8E4M3FN>, tensor<f32>) {
    ^bb0(%a0: tensor<64x32xf8E4M3FN>, %a1: tensor<f32>):
      %q, %qs = fp8.transpose %a0, %a1 : (tensor<64x32xf8E4M3FN>, tensor<f32>) -> (tensor<32x64xf8E4M3FN>, tensor<f32>)
      kernel.yield %q : tensor<32x64xf8E4M3FN>
    } : tensor<32x64xf8E4M3FN>
    graph.store %g, @fp8w.w : tensor<64x32xf8E4M3FN>
    graph.store %t, @fp8w.w.t : tensor<32x64xf8E4M3FN>
    graph.store %v, @fp8w.v : tensor<64x32xf8E4M3FN>
    graph.store %vt, @fp8w.v.t : tensor<32x64xf8E4M3FN>
    graph.store %v, @fp8w.u : tensor<64x32xf8E4M3FN>
    graph.store %ut, @fp8w.u.t : tensor<32x64xf8E4M3FN>
    return
  }
}

// GEMMs that read one load share one copy, made before the first: the
// dgrads of an FP8 head in token chunks (train.precision.lm_head_fp8,
// octet-chunk-lm-head) read the whole weight each.
// RUN: rm -rf %t && mkdir -p %t
// RUN: sed -e 's/    margin: 0/    margin: 0\n    lm_head_fp8: true/' -e 's/  log_interval: 10/  log_interval: 10\n  codegen { lm_head_chunk_tokens: 256 }/' %examples/tiny-llama.pbtxt > %t/chunked-head.pbtxt
// RUN: %octet compile %t/chunked-head.pbtxt --dump-ir=kmajor-weights | FileCheck %s --check-prefix=SHARED
// SHARED-LABEL: func.func @train_microbatch
// SHARED: %[[T:.*]] = kernel.fused "lm_head.kmajor" kind("elementwise")
// SHARED: kernel.gemm %{{.*}}, %[[T]] {{.*}}param = "lm_head", role = "dgrad"
// SHARED-NOT: kernel.fused "lm_head.kmajor"
// SHARED: kernel.gemm %{{.*}}, %[[T]] {{.*}}param = "lm_head", role = "dgrad"
// SHARED-NOT: kernel.fused "lm_head.kmajor"
// SHARED: kernel.gemm %{{.*}}, %[[T]] {{.*}}param = "lm_head", role = "dgrad"
// SHARED-NOT: kernel.fused "lm_head.kmajor"
// SHARED: kernel.gemm %{{.*}}, %[[T]] {{.*}}param = "lm_head", role = "dgrad"
// SHARED-NOT: kernel.fused "lm_head.kmajor"
// SHARED-LABEL: func.func @optimizer_step
