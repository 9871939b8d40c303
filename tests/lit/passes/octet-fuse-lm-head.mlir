// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-precision="amax-history-len=4" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-lm-head | FileCheck %s
// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-precision="amax-history-len=4" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-lm-head | FileCheck %s --check-prefix=RECOMPUTE

// The tied head's fprop, the loss, its gradient and the head's dgrad and
// wgrad: one kernel over token chunks; no GEMM of the head is left and no
// kernel yields logits.
// CHECK-LABEL: func.func @train_microbatch
// CHECK-NOT: kernel.gemm {{.*}}param = "embed"
// CHECK: %[[K:.*]]:3 = kernel.fused "lm_head_cross_entropy" kind("row") ins(%[[X:.*]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<8x16xf32>, tensor<32x16xf32>, tensor<2x4xi32>, tensor<2x4xf32>, tensor<f32>)
// CHECK-NEXT: ^bb0(%[[XA:.*]]: tensor<8x16xf32>,
// CHECK-NEXT: graph.matmul {{.*}}{param = "embed", role = "fprop", transpose_b} : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
// CHECK-NEXT: graph.reshape
// CHECK-NEXT: graph.cross_entropy
// CHECK-NEXT: graph.cross_entropy_grad
// CHECK-NEXT: graph.reshape
// CHECK-NEXT: graph.matmul {{.*}}{param = "embed", role = "dgrad"}
// The wgrad reads the forward's normalized input, so the backward's
// recomputation of the final norm is gone.
// CHECK-NEXT: graph.matmul %{{.*}}, %[[XA]] {param = "embed", role = "wgrad", transpose_a}
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: } {chunk_rows = 8 : i64, layer = -1 : i64, section = "forward"} : tensor<f32>, tensor<8x16xf32>, tensor<32x16xf32>
// CHECK-NOT: kernel.gemm {{.*}}param = "embed"
// CHECK-NOT: tensor<8x32xf32>
// CHECK-NOT: tensor<2x4x32xf32>
// CHECK: return %[[K]]#0

// RECOMPUTE-LABEL: func.func @train_microbatch
// RECOMPUTE-NOT: graph.rms_norm {{.*}}recomputed
// RECOMPUTE-LABEL: func.func @optimizer_step
