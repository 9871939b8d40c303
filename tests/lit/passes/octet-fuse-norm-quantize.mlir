// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv --octet-precision="amax-history-len=4" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-norm-quantize | FileCheck %s

// Forward: the attention norm with the FP8 cast of its output for the QKV
// GEMM, its amax and the K-major copy the wgrad reads.
// CHECK-LABEL: func.func @train_microbatch
// CHECK: kernel.fused "layers.0.rms_norm" kind("row")
// CHECK-NEXT: ^bb0
// CHECK-NEXT: graph.rms_norm
// CHECK-NEXT: graph.reshape
// CHECK-NEXT: fp8.quantize {{.*}}tensor = "layers.0.attn.wqkv.x"
// CHECK-NEXT: fp8.transpose
// CHECK-NEXT: kernel.yield

// The MLP norm also takes in the residual add that makes its input.
// CHECK: kernel.fused "layers.0.rms_norm" kind("row")
// CHECK-NEXT: ^bb0
// CHECK-NEXT: graph.add
// CHECK-NEXT: graph.rms_norm
// CHECK-NEXT: graph.reshape
// CHECK-NEXT: fp8.quantize {{.*}}tensor = "layers.0.mlp.w_gate_up.x"
// CHECK-NEXT: fp8.transpose
// CHECK-NEXT: kernel.yield

// Backward: the norm gradient with the residual-gradient add, the norm
// weight's gradient accumulation and the FP8 cast of the sum.
// CHECK: kernel.fused "layers.0.rms_norm_grad" kind("row")
// CHECK-NEXT: ^bb0
// CHECK-NEXT: graph.rms_norm_grad
// CHECK-NEXT: graph.add
// CHECK-NEXT: graph.add
// CHECK-NEXT: graph.reshape
// CHECK-NEXT: fp8.quantize
// CHECK-NEXT: fp8.transpose
// CHECK-NEXT: kernel.yield
