// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv --octet-precision="amax-history-len=4" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-elementwise | FileCheck %s

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
