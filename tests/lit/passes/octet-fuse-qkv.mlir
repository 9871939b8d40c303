// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv | FileCheck %s
// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv | FileCheck %s --check-prefix=GEMMS

// One variable per group, rows in order, with the map back to the parts;
// the gradient accumulator and the AdamW moments are merged the same way.
// CHECK-DAG: graph.variable @layers.0.attn.wqkv : tensor<32x16xf32> {fused_from = ["layers.0.attn.wq", "layers.0.attn.wk", "layers.0.attn.wv"], init = "normal", init_std = 2.000000e-02 : f64, kind = "weight", split = array<i64: 16, 8, 8>}
// CHECK-DAG: graph.variable @layers.0.mlp.w_gate_up : tensor<48x16xf32> {fused_from = ["layers.0.mlp.w_gate", "layers.0.mlp.w_up"], {{.*}}split = array<i64: 24, 24>}
// CHECK-DAG: graph.variable @grad.layers.0.attn.wqkv : tensor<32x16xf32> {fused_from = ["grad.layers.0.attn.wq", "grad.layers.0.attn.wk", "grad.layers.0.attn.wv"]
// CHECK-DAG: graph.variable @adam_m.layers.0.mlp.w_gate_up : tensor<48x16xf32>
// CHECK-DAG: graph.variable @adam_v.layers.0.attn.wqkv : tensor<32x16xf32>
// CHECK-NOT: graph.variable @layers.0.attn.wq :
// CHECK-NOT: graph.variable @layers.0.mlp.w_up :

// CHECK-LABEL: func.func @train_microbatch
// CHECK: %[[QKV:.*]] = graph.linear %{{.*}}, %{{.*}} {param = "layers.0.attn.wqkv"} : (tensor<2x4x16xf32>, tensor<32x16xf32>) -> tensor<2x4x32xf32>
// CHECK-NEXT: graph.slice %[[QKV]] {dim = 2 : i64, offset = 0 : i64} : (tensor<2x4x32xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: graph.slice %[[QKV]] {dim = 2 : i64, offset = 16 : i64} : (tensor<2x4x32xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: graph.slice %[[QKV]] {dim = 2 : i64, offset = 24 : i64} : (tensor<2x4x32xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[GU:.*]] = graph.linear %{{.*}}, %{{.*}} {param = "layers.0.mlp.w_gate_up"} : (tensor<2x4x16xf32>, tensor<48x16xf32>) -> tensor<2x4x48xf32>
// CHECK-LABEL: func.func @optimizer_step
// CHECK: graph.adamw_update {{.*}} : (tensor<32x16xf32>,

// One dgrad and one wgrad matmul per fused weight.
// GEMMS-LABEL: func.func @train_microbatch
// GEMMS-COUNT-1: graph.matmul {{.*}}param = "layers.0.mlp.w_gate_up", role = "dgrad"
// GEMMS-NOT: param = "layers.0.mlp.w_up"
// GEMMS: graph.matmul {{.*}}param = "layers.0.attn.wqkv", role = "dgrad"
// GEMMS-NOT: graph.matmul {{.*}}param = "layers.0.attn.wqkv", role = "dgrad"
// GEMMS-NOT: param = "layers.0.attn.wq"
// GEMMS-LABEL: func.func @optimizer_step
