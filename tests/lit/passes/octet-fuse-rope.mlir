// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv --octet-precision="amax-history-len=4" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-rope | FileCheck %s

// Forward: RoPE of q and k in one kernel that reads the QKV GEMM's output
// and splits the heads itself.
// CHECK-LABEL: func.func @train_microbatch
// CHECK: %[[QKV:.*]] = kernel.gemm {{.*}}param = "layers.0.attn.wqkv", role = "fprop"
// CHECK: kernel.fused "layers.0.rope_qk" kind("elementwise") ins(%{{.*}}, %[[QKV]] : tensor<2x4xi32>, tensor<8x32xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: graph.reshape
// CHECK-NEXT: graph.slice {{.*}}offset = 16
// CHECK-NEXT: graph.slice {{.*}}offset = 0
// CHECK-NEXT: graph.reshape
// CHECK-NEXT: graph.reshape
// CHECK-NEXT: graph.rope
// CHECK-NEXT: graph.rope
// CHECK-NEXT: kernel.yield

// Backward: the inverse RoPE of dq and dk in one kernel.
// CHECK: kernel.attention_bwd
// CHECK: kernel.fused "layers.0.rope_qkv_bwd" kind("elementwise")
// CHECK-NEXT: ^bb0
// CHECK-NEXT: graph.rope {{.*}}inverse
// CHECK-NEXT: graph.rope {{.*}}inverse
