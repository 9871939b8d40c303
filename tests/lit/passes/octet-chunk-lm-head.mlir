// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-precision="amax-history-len=4" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-epilogue --octet-chunk-lm-head="chunk-tokens=4" | FileCheck %s
// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-precision="amax-history-len=4" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-epilogue --octet-chunk-lm-head="chunk-tokens=8" | FileCheck %s --check-prefix=WHOLE
// RUN: not %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-precision="amax-history-len=4" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-epilogue --octet-chunk-lm-head="chunk-tokens=3" 2>&1 | FileCheck %s --check-prefix=NODIVISOR

// The tied head of 8 tokens in 2 chunks of 4: per chunk the fprop GEMM of
// 4 rows of x, the loss and its gradient over the whole batch's mask, the
// dgrad (4 rows of dx) and the wgrad, accumulating into the previous
// chunk's; the chunks' losses are added and dx is their concatenation.
// CHECK-LABEL: func.func @train_microbatch
// CHECK-NOT: tensor<8x32xf32>
// CHECK: %[[LABELS:.*]] = graph.reshape %arg1 : (tensor<2x4xi32>) -> tensor<1x8xi32>
// CHECK: %[[MASK:.*]] = graph.reshape %arg2 : (tensor<2x4xf32>) -> tensor<1x8xf32>
// CHECK: %[[X0:.*]] = graph.slice %[[X:.*]] {dim = 0 : i64, offset = 0 : i64} : (tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK: %[[Z0:.*]] = kernel.gemm %[[X0]], %[[W:.*]] {{{.*}}param = "embed", role = "fprop"{{.*}}} : (tensor<4x16xf32>, tensor<32x16xf32>) -> tensor<4x32xf32>
// CHECK: %[[Y0:.*]] = graph.slice %[[LABELS]] {dim = 1 : i64, offset = 0 : i64}
// CHECK: %[[M0:.*]] = graph.slice %[[MASK]] {dim = 1 : i64, offset = 0 : i64}
// CHECK: %[[L0:.*]] = kernel.fused "cross_entropy" kind("row") ins(%{{.*}}, %[[Y0]], %[[M0]], %arg2 :
// CHECK: graph.cross_entropy %{{.*}}, %{{.*}}, %{{.*}} over %{{.*}} : (tensor<1x4x32xf32>, tensor<1x4xi32>, tensor<1x4xf32>, tensor<2x4xf32>) -> tensor<f32>
// CHECK: kernel.fused "cross_entropy_grad" kind("row") ins(%{{.*}}, %{{.*}}, %[[Y0]], %[[M0]], %arg2 :
// CHECK: graph.cross_entropy_grad {{.*}} over %{{.*}} : (tensor<f32>, tensor<1x4x32xf32>, tensor<1x4xi32>, tensor<1x4xf32>, tensor<2x4xf32>) -> tensor<1x4x32xf32>
// CHECK: %[[DX0:.*]] = kernel.gemm %[[G0:.*]], %[[W]] {{{.*}}role = "dgrad"{{.*}}} : (tensor<4x32xf32>, tensor<32x16xf32>) -> tensor<4x16xf32>
// The wgrad reads the forward's normalized input: the backward's
// recomputation of the final norm is gone.
// CHECK: %[[DW0:.*]] = kernel.gemm %[[G0]], %[[X0]] {{{.*}}role = "wgrad"{{.*}}transpose_a} : (tensor<4x32xf32>, tensor<4x16xf32>) -> tensor<32x16xf32>
// CHECK: %[[X1:.*]] = graph.slice %[[X]] {dim = 0 : i64, offset = 4 : i64}
// CHECK: kernel.gemm %[[X1]], %[[W]] {{.*}}role = "fprop"
// CHECK: %[[L1:.*]] = kernel.fused "cross_entropy"
// CHECK: %[[DX1:.*]] = kernel.gemm %{{.*}}, %[[W]] {{{.*}}role = "dgrad"
// CHECK: %[[DW1:.*]] = kernel.gemm %{{.*}}, %[[X1]] accumulate(%[[DW0]]) {{{.*}}role = "wgrad"
// CHECK: %[[LOSS:.*]] = kernel.fused "lm_head.loss" kind("elementwise") ins(%[[L0]], %[[L1]] : tensor<f32>, tensor<f32>)
// CHECK: graph.add
// CHECK: %[[DX:.*]] = graph.concat %[[DX0]], %[[DX1]] {dim = 0 : i64} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
// CHECK: graph.reshape %[[DX]]
// CHECK-NOT: graph.rms_norm {{.*}}recomputed
// CHECK: kernel.fused "add" kind("elementwise") ins(%[[DW1]], %{{.*}} : tensor<32x16xf32>, tensor<32x16xf32>)
// CHECK: return %[[LOSS]]

// A head of no more tokens than a chunk stays whole.
// WHOLE-LABEL: func.func @train_microbatch
// WHOLE-NOT: over
// WHOLE: kernel.gemm {{.*}}role = "fprop"{{.*}} -> tensor<8x32xf32>
// WHOLE-NOT: graph.concat

// NODIVISOR: error: octet-chunk-lm-head: no chunk of at most 3 tokens, a multiple of 4, divides the head's 8 tokens

// The head in FP8 (keep-head-bf16=false; the tied head here), 2 chunks of 4
// tokens: per chunk the fprop on the chunk's rows of the quantized input,
// the loss, the gradient kernel that casts the gradient to E5M2 (the
// step's delayed scale, the whole batch's count) and transposes it, the
// dgrad, a K-major copy of the chunk's input and the wgrad into the previous
// chunk's. The gradient's amax is the largest of the chunks'; the
// backward's whole K-major copy of the input is gone.
// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-precision="amax-history-len=4 keep-head-bf16=false" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-epilogue --octet-fuse-norm-quantize --octet-fuse-elementwise --canonicalize --octet-chunk-lm-head="chunk-tokens=4" | FileCheck %s --check-prefix=FP8
// FP8-LABEL: func.func @train_microbatch
// FP8-NOT: tensor<8x32xf8E5M2>
// FP8: %[[X0:.*]] = graph.slice %[[X:.*]] {dim = 0 : i64, offset = 0 : i64} : (tensor<8x16xf8E4M3FN>) -> tensor<4x16xf8E4M3FN>
// FP8: %[[Z0:.*]] = kernel.gemm %[[X0]], %[[W:[^ ]*]] scales_inv(%[[SX:.*]], %[[SW:.*]]) {{{.*}}param = "embed", role = "fprop"{{.*}}} : (tensor<4x16xf8E4M3FN>, tensor<32x16xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<4x32xf32>
// FP8: %[[L0:.*]] = kernel.fused "cross_entropy" kind("row")
// FP8: %[[G0:.*]]:3 = kernel.fused "cross_entropy_grad" kind("row") ins({{.*}}, %[[SDY:[^ ]*]] : tensor<f32>, tensor<1x4x32xf32>, tensor<1x4xi32>, tensor<1x4xf32>, tensor<2x4xf32>, tensor<f32>)
// FP8: graph.cross_entropy_grad {{.*}} over
// FP8: fp8.quantize {{.*}} {amax_reduce = ["data", "tensor"], tensor = "embed.dy"} : (tensor<4x32xf32>, tensor<f32>) -> (tensor<4x32xf8E5M2>, tensor<f32>)
// FP8: fp8.transpose {{.*}} -> (tensor<32x4xf8E5M2>, tensor<f32>)
// FP8: %[[DX0:.*]] = kernel.gemm %[[G0]]#0, %[[WT:[^ ]*]] scales_inv({{.*}}) {{{.*}}role = "dgrad"{{.*}}} : (tensor<4x32xf8E5M2>, tensor<16x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<4x16xf32>
// FP8: %[[XT0:.*]] = kernel.fused "lm_head.x.kmajor" kind("elementwise") ins(%[[X0]], %[[SXW:[^ ]*]] :
// FP8: fp8.transpose {{.*}} : (tensor<4x16xf8E4M3FN>, tensor<f32>) -> (tensor<16x4xf8E4M3FN>, tensor<f32>)
// FP8: %[[DW0:.*]] = kernel.gemm %[[G0]]#2, %[[XT0]] scales_inv({{.*}}, %[[SXW]]) {{{.*}}role = "wgrad"{{.*}}} : (tensor<32x4xf8E5M2>, tensor<16x4xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32x16xf32>
// FP8: %[[X1:.*]] = graph.slice %[[X]] {dim = 0 : i64, offset = 4 : i64}
// FP8: kernel.gemm %[[X1]], %[[W]] scales_inv(%[[SX]], %[[SW]]) {{.*}}role = "fprop"
// FP8: %[[G1:.*]]:3 = kernel.fused "cross_entropy_grad" kind("row") ins({{.*}}, %[[SDY]] :
// FP8: %[[DX1:.*]] = kernel.gemm %[[G1]]#0, %[[WT]] {{.*}}role = "dgrad"
// FP8: %[[XT1:.*]] = kernel.fused "lm_head.x.kmajor" kind("elementwise") ins(%[[X1]], %[[SXW]] :
// FP8: kernel.gemm %[[G1]]#2, %[[XT1]] scales_inv({{.*}}) accumulate(%[[DW0]]) {{{.*}}role = "wgrad"
// FP8: kernel.fused "lm_head.loss" kind("elementwise")
// FP8: %[[AMAX:.*]] = kernel.fused "lm_head.dy.amax" kind("elementwise") ins(%[[G0]]#1, %[[G1]]#1 : tensor<f32>, tensor<f32>)
// FP8: graph.concat {{.*}} -> tensor<2xf32>
// FP8: fp8.amax {{.*}} {amax_reduce = ["data", "tensor"]} : (tensor<2xf32>) -> tensor<f32>
// FP8: graph.concat %[[DX0]], %[[DX1]] {dim = 0 : i64} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
// FP8: kernel.fused "rms_norm_grad" kind("row")
// FP8-NOT: recomputed
// FP8: kernel.yield
// FP8: kernel.fused "fp8.scale_updates" kind("multi_tensor") ins({{.*}}, %[[AMAX]], {{.*}}) {
