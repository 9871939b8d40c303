// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv --octet-precision="amax-history-len=4" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-adamw | FileCheck %s

// Next step's FP8 weights, their K-major copies and amaxes are state the
// optimizer writes and an init function fills once.
// CHECK: module attributes {{{.*}}octet.init_functions = ["fp8_weight_init"]}
// CHECK-DAG: graph.variable @fp8w.layers.0.attn.wqkv : tensor<32x16xf8E4M3FN> {init = "zeros", kind = "state"}
// CHECK-DAG: graph.variable @fp8w.layers.0.attn.wqkv.t : tensor<16x32xf8E4M3FN> {init = "zeros", kind = "state"}
// CHECK-DAG: graph.variable @fp8w.layers.0.attn.wqkv.amax : tensor<f32> {init = "zeros", kind = "state"}
// CHECK-DAG: graph.variable @fp8w.layers.0.mlp.w_down : tensor<16x24xf8E4M3FN>

// The train step casts no weight: it loads the cast ones.
// CHECK-LABEL: func.func @train_microbatch
// CHECK-NOT: tensor = "layers.0.attn.wqkv.w"
// CHECK: graph.load @fp8w.layers.0.attn.wqkv.t : tensor<16x32xf8E4M3FN>
// CHECK-NOT: tensor = "layers.0.attn.wqkv.w"
// CHECK: kernel.gemm {{.*}}param = "layers.0.attn.wqkv", role = "fprop"
// CHECK-NOT: tensor = "layers.0.attn.wqkv.w"
// CHECK-LABEL: func.func @optimizer_step

// One multi-tensor kernel: every update, the zeroing of the accumulators
// and the weight casts with the scales the next step reads.
// CHECK: kernel.fused "optimizer.adamw" kind("multi_tensor")
// CHECK: graph.adamw_update
// CHECK: fp8.quantize {{.*}}tensor = "layers.0.attn.wqkv.w"
// CHECK-NEXT: fp8.transpose
// CHECK: kernel.yield
// CHECK-NOT: kernel.fused
// CHECK: graph.store {{.*}}, @fp8w.layers.0.attn.wqkv :
// CHECK: graph.store {{.*}}, @fp8w.layers.0.attn.wqkv.t :
// CHECK: graph.store {{.*}}, @fp8w.layers.0.attn.wqkv.amax :

// CHECK-LABEL: func.func @fp8_weight_init()
// CHECK: graph.load @layers.0.mlp.w_down : tensor<16x24xf32>
// CHECK: kernel.fused "optimizer.fp8_weights"
// CHECK: fp8.quantize {{.*}}tensor = "layers.0.mlp.w_down.w"
// CHECK: graph.store {{.*}}, @fp8w.layers.0.mlp.w_down :
