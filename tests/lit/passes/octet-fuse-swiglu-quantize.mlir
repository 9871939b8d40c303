// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv --octet-precision="amax-history-len=4" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-swiglu-quantize | FileCheck %s

// Forward: silu(gate)·up, cast to FP8 for the down projection, with the
// K-major copy its wgrad reads.
// CHECK-LABEL: func.func @train_microbatch
// CHECK: kernel.fused "layers.0.swiglu" kind("elementwise")
// CHECK-NEXT: ^bb0
// CHECK-NEXT: graph.swiglu
// CHECK-NEXT: graph.reshape
// CHECK-NEXT: fp8.quantize {{.*}}tensor = "layers.0.mlp.w_down.x"
// CHECK-NEXT: fp8.transpose
// CHECK-NEXT: kernel.yield
// CHECK: kernel.gemm {{.*}}param = "layers.0.mlp.w_down", role = "fprop"

// Backward: d_gate and d_up concatenated for the fused gate/up GEMMs (one
// for dgrad, one for the wgrad's K-major operand) and cast to FP8.
// CHECK: kernel.fused "layers.0.swiglu_grad" kind("elementwise")
// CHECK-NEXT: ^bb0
// CHECK-NEXT: graph.swiglu_grad
// CHECK: graph.concat {{.*}}dim = 1
// CHECK: fp8.quantize
// CHECK: kernel.yield
// CHECK: kernel.gemm {{.*}}param = "layers.0.mlp.w_gate_up", role = "dgrad"
