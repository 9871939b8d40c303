// RUN: %octet-opt %s --octet-lower-to-kernel --octet-fuse-epilogue | FileCheck %s
// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv --octet-precision="amax-history-len=4" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-epilogue | FileCheck %s --check-prefix=LLAMA

// GELU (tanh form) of a linear with bias: the bias and GELU epilogue.
// CHECK-LABEL: func.func @gelu_mlp
// CHECK: %[[X:.*]] = graph.reshape %{{.*}} : (tensor<2x8x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT: %[[Y:.*]] = kernel.gemm %[[X]], %{{.*}} bias(%{{.*}}) {epilogue = "gelu", {{.*}}role = "fprop"{{.*}}} : (tensor<16x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<16x128xf32>
// CHECK-NEXT: graph.reshape %[[Y]] : (tensor<16x128xf32>) -> tensor<2x8x128xf32>
// CHECK-NOT: graph.gelu
// CHECK: return
func.func @gelu_mlp(%x: tensor<2x8x64xf32>, %w: tensor<128x64xf32>, %b: tensor<128xf32>) -> tensor<2x8x128xf32> {
  %y = graph.linear %x, %w, %b {param = "layers.0.mlp.w_up"} : (tensor<2x8x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<2x8x128xf32>
  %g = graph.gelu %y {approximate = "tanh"} : tensor<2x8x128xf32>
  return %g : tensor<2x8x128xf32>
}

// The pre-activation is still read (saved for the backward): gelu_aux
// returns it beside the activation.
// CHECK-LABEL: func.func @gelu_saved
// CHECK: %[[G:.*]], %[[PRE:.*]] = kernel.gemm %{{.*}}, %{{.*}} bias(%{{.*}}) {epilogue = "gelu_aux"{{.*}}} : (tensor<16x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> (tensor<16x128xf32>, tensor<16x128xf32>)
// CHECK: graph.save %[[PRE]]
func.func @gelu_saved(%x: tensor<16x64xf32>, %w: tensor<128x64xf32>, %b: tensor<128xf32>) -> (tensor<16x128xf32>, tensor<16x128xf32>) {
  %y = graph.linear %x, %w, %b {param = "layers.0.mlp.w_up"} : (tensor<16x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<16x128xf32>
  %s = graph.save %y : tensor<16x128xf32>
  %g = graph.gelu %y {approximate = "tanh"} : tensor<16x128xf32>
  return %g, %s : tensor<16x128xf32>, tensor<16x128xf32>
}

// The exact (erf) GELU has no cuBLASLt epilogue: it stays a row kernel.
// CHECK-LABEL: func.func @gelu_erf
// CHECK: kernel.gemm {{.*}}epilogue = "bias"
// CHECK: kernel.fused "layers.0.gelu"
func.func @gelu_erf(%x: tensor<16x64xf32>, %w: tensor<128x64xf32>, %b: tensor<128xf32>) -> tensor<16x128xf32> {
  %y = graph.linear %x, %w, %b {param = "layers.0.mlp.w_up"} : (tensor<16x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<16x128xf32>
  %g = graph.gelu %y : tensor<16x128xf32>
  return %g : tensor<16x128xf32>
}

// Σ_rows dy rides on the wgrad GEMM that reads dyᵀ, and the add into the
// gradient accumulator becomes the accumulate operand.
// CHECK-LABEL: func.func @wgrad
// CHECK: %[[DW:.*]], %[[DB:.*]] = kernel.gemm %{{.*}}, %{{.*}} accumulate(%{{.*}}) {epilogue = "bias_grad", {{.*}}role = "wgrad"{{.*}}transpose_a} : (tensor<16x128xf32>, tensor<16x64xf32>, tensor<128x64xf32>) -> (tensor<128x64xf32>, tensor<128xf32>)
// CHECK-NOT: kernel.fused
// CHECK: return %[[DW]], %[[DB]]
func.func @wgrad(%dy: tensor<16x128xf32>, %x: tensor<16x64xf32>, %acc: tensor<128x64xf32>) -> (tensor<128x64xf32>, tensor<128xf32>) {
  %db = graph.bias_grad %dy : (tensor<16x128xf32>) -> tensor<128xf32>
  %dw = graph.matmul %dy, %x {transpose_a, role = "wgrad", param = "layers.0.mlp.w_up"} : (tensor<16x128xf32>, tensor<16x64xf32>) -> tensor<128x64xf32>
  %sum = graph.add %acc, %dw : tensor<128x64xf32>
  return %sum, %db : tensor<128x64xf32>, tensor<128xf32>
}

// In the FP8 train step every wgrad accumulates into its gradient variable.
// LLAMA-LABEL: func.func @train_microbatch
// LLAMA: kernel.gemm {{.*}} accumulate({{.*}}param = "layers.0.mlp.w_down", role = "wgrad"
// LLAMA: kernel.gemm {{.*}} accumulate({{.*}}param = "layers.0.mlp.w_gate_up", role = "wgrad"
// LLAMA: kernel.gemm {{.*}} accumulate({{.*}}param = "layers.0.attn.wo", role = "wgrad"
// LLAMA: kernel.gemm {{.*}} accumulate({{.*}}param = "layers.0.attn.wqkv", role = "wgrad"
