// RUN: %octet-opt %s --octet-fuse-swiglu-quantize | FileCheck %s

// Blockwise: the kernels that only block-quantize SwiGLU's output or its
// gradient's join (sides multiples of 128) join the kernel that computes
// it, with their K-major copies; the BF16 tensor is no longer a result.
// CHECK-LABEL: func.func @backward
// CHECK: kernel.fused "layers.0.swiglu" kind("elementwise") ins(%arg1, %arg2 :
// CHECK-NEXT: ^bb0
// CHECK-NEXT: graph.swiglu
// CHECK-NEXT: graph.reshape
// CHECK-NEXT: fp8.block_quantize {{.*}}block = array<i64: 128, 1>
// CHECK-NEXT: fp8.transpose
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: } {{.*}} : tensor<512x128xf8E4M3FN>, tensor<512x1xf32>
// CHECK: kernel.fused "layers.0.swiglu_grad" kind("elementwise") ins(%arg0, %arg1, %arg2 :
// CHECK-NEXT: ^bb0
// CHECK-NEXT: graph.swiglu_grad
// CHECK: graph.concat {{.*}}dim = 1
// CHECK-NEXT: fp8.block_quantize {{.*}}block = array<i64: 128, 1>
// CHECK-NEXT: fp8.transpose
// CHECK-NEXT: fp8.block_quantize {{.*}}block = array<i64: 1, 128>
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: } {{.*}} : tensor<1024x128xf8E4M3FN>, tensor<1024x1xf32>, tensor<128x1024xf8E4M3FN>, tensor<128x8xf32>
// CHECK-NOT: kernel.copy
// CHECK: return
func.func @backward(%dy: tensor<1x128x512xbf16>, %gate: tensor<1x128x512xbf16>, %up: tensor<1x128x512xbf16>) -> (tensor<512x128xf8E4M3FN>, tensor<512x1xf32>, tensor<1024x128xf8E4M3FN>, tensor<1024x1xf32>, tensor<128x1024xf8E4M3FN>, tensor<128x8xf32>) {
  %y = kernel.fused "layers.0.swiglu" kind("elementwise") ins(%gate, %up : tensor<1x128x512xbf16>, tensor<1x128x512xbf16>) {
  ^bb0(%g: tensor<1x128x512xbf16>, %u: tensor<1x128x512xbf16>):
    %s = graph.swiglu %g, %u {recomputed} : tensor<1x128x512xbf16>
    kernel.yield %s : tensor<1x128x512xbf16>
  } {layer = 0 : i64, section = "backward"} : tensor<1x128x512xbf16>
  %y2 = graph.reshape %y : (tensor<1x128x512xbf16>) -> tensor<128x512xbf16>
  %yq:2 = kernel.fused "layers.0.block_quantize" kind("elementwise") ins(%y2 : tensor<128x512xbf16>) {
  ^bb0(%a: tensor<128x512xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 1>, dtype = f8E4M3FN, power_of_two, tensor = "layers.0.mlp.w_down.x.t"} : (tensor<128x512xbf16>) -> (tensor<128x512xf8E4M3FN>, tensor<1x512xf32>)
    kernel.yield %q, %s : tensor<128x512xf8E4M3FN>, tensor<1x512xf32>
  } {layer = 0 : i64, section = "backward"} : tensor<128x512xf8E4M3FN>, tensor<1x512xf32>
  %yt = kernel.copy %yq#0 {layer = 0 : i64, section = "backward", transpose} : (tensor<128x512xf8E4M3FN>) -> tensor<512x128xf8E4M3FN>
  %yst = kernel.copy %yq#1 {layer = 0 : i64, section = "backward", transpose} : (tensor<1x512xf32>) -> tensor<512x1xf32>
  %d:2 = kernel.fused "layers.0.swiglu_grad" kind("elementwise") ins(%dy, %gate, %up : tensor<1x128x512xbf16>, tensor<1x128x512xbf16>, tensor<1x128x512xbf16>) {
  ^bb0(%a: tensor<1x128x512xbf16>, %g: tensor<1x128x512xbf16>, %u: tensor<1x128x512xbf16>):
    %dg, %du = graph.swiglu_grad %a, %g, %u : tensor<1x128x512xbf16>
    kernel.yield %dg, %du : tensor<1x128x512xbf16>, tensor<1x128x512xbf16>
  } {layer = 0 : i64, section = "backward"} : tensor<1x128x512xbf16>, tensor<1x128x512xbf16>
  %du2 = graph.reshape %d#1 : (tensor<1x128x512xbf16>) -> tensor<128x512xbf16>
  %dg2 = graph.reshape %d#0 : (tensor<1x128x512xbf16>) -> tensor<128x512xbf16>
  %j = kernel.fused "layers.0.concat" kind("elementwise") ins(%dg2, %du2 : tensor<128x512xbf16>, tensor<128x512xbf16>) {
  ^bb0(%a: tensor<128x512xbf16>, %b: tensor<128x512xbf16>):
    %c = graph.concat %a, %b {dim = 1 : i64} : (tensor<128x512xbf16>, tensor<128x512xbf16>) -> tensor<128x1024xbf16>
    kernel.yield %c : tensor<128x1024xbf16>
  } {layer = 0 : i64, section = "backward"} : tensor<128x1024xbf16>
  %jt:2 = kernel.fused "layers.0.block_quantize" kind("elementwise") ins(%j : tensor<128x1024xbf16>) {
  ^bb0(%a: tensor<128x1024xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 1>, dtype = f8E4M3FN, power_of_two, tensor = "layers.0.mlp.w_gate_up.dy.t"} : (tensor<128x1024xbf16>) -> (tensor<128x1024xf8E4M3FN>, tensor<1x1024xf32>)
    kernel.yield %q, %s : tensor<128x1024xf8E4M3FN>, tensor<1x1024xf32>
  } {layer = 0 : i64, section = "backward"} : tensor<128x1024xf8E4M3FN>, tensor<1x1024xf32>
  %qt = kernel.copy %jt#0 {layer = 0 : i64, section = "backward", transpose} : (tensor<128x1024xf8E4M3FN>) -> tensor<1024x128xf8E4M3FN>
  %st = kernel.copy %jt#1 {layer = 0 : i64, section = "backward", transpose} : (tensor<1x1024xf32>) -> tensor<1024x1xf32>
  %jr:2 = kernel.fused "layers.0.block_quantize" kind("elementwise") ins(%j : tensor<128x1024xbf16>) {
  ^bb0(%a: tensor<128x1024xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 1, 128>, dtype = f8E4M3FN, power_of_two, tensor = "layers.0.mlp.w_gate_up.dy"} : (tensor<128x1024xbf16>) -> (tensor<128x1024xf8E4M3FN>, tensor<128x8xf32>)
    kernel.yield %q, %s : tensor<128x1024xf8E4M3FN>, tensor<128x8xf32>
  } {layer = 0 : i64, section = "backward"} : tensor<128x1024xf8E4M3FN>, tensor<128x8xf32>
  return %yt, %yst, %qt, %st, %jr#0, %jr#1 : tensor<512x128xf8E4M3FN>, tensor<512x1xf32>, tensor<1024x128xf8E4M3FN>, tensor<1024x1xf32>, tensor<128x1024xf8E4M3FN>, tensor<128x8xf32>
}

// The BF16 tensor is kept where something else reads it (here the
// function's result), and a side not a multiple of 128 keeps the tiles'
// own kernel: the quantizations stay apart.
// CHECK-LABEL: func.func @kept
// CHECK: kernel.fused "layers.0.swiglu"
// CHECK-NEXT: ^bb0
// CHECK-NEXT: graph.swiglu
// CHECK-NEXT: kernel.yield
// CHECK: kernel.fused "layers.0.block_quantize"
// CHECK: kernel.fused "layers.0.swiglu"
// CHECK-NEXT: ^bb0
// CHECK-NEXT: graph.swiglu
// CHECK-NEXT: kernel.yield
// CHECK: kernel.fused "layers.0.block_quantize"
func.func @kept(%gate: tensor<1x128x512xbf16>, %up: tensor<1x128x512xbf16>, %g2: tensor<1x64x512xbf16>, %u2: tensor<1x64x512xbf16>) -> (tensor<1x128x512xbf16>, tensor<128x512xf8E4M3FN>, tensor<128x4xf32>, tensor<64x512xf8E4M3FN>, tensor<64x4xf32>) {
  %y = kernel.fused "layers.0.swiglu" kind("elementwise") ins(%gate, %up : tensor<1x128x512xbf16>, tensor<1x128x512xbf16>) {
  ^bb0(%g: tensor<1x128x512xbf16>, %u: tensor<1x128x512xbf16>):
    %s = graph.swiglu %g, %u : tensor<1x128x512xbf16>
    kernel.yield %s : tensor<1x128x512xbf16>
  } {layer = 0 : i64, section = "forward"} : tensor<1x128x512xbf16>
  %y2 = graph.reshape %y : (tensor<1x128x512xbf16>) -> tensor<128x512xbf16>
  %yq:2 = kernel.fused "layers.0.block_quantize" kind("elementwise") ins(%y2 : tensor<128x512xbf16>) {
  ^bb0(%a: tensor<128x512xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 1, 128>, dtype = f8E4M3FN, power_of_two} : (tensor<128x512xbf16>) -> (tensor<128x512xf8E4M3FN>, tensor<128x4xf32>)
    kernel.yield %q, %s : tensor<128x512xf8E4M3FN>, tensor<128x4xf32>
  } {layer = 0 : i64, section = "forward"} : tensor<128x512xf8E4M3FN>, tensor<128x4xf32>
  %z = kernel.fused "layers.0.swiglu" kind("elementwise") ins(%g2, %u2 : tensor<1x64x512xbf16>, tensor<1x64x512xbf16>) {
  ^bb0(%g: tensor<1x64x512xbf16>, %u: tensor<1x64x512xbf16>):
    %s = graph.swiglu %g, %u : tensor<1x64x512xbf16>
    kernel.yield %s : tensor<1x64x512xbf16>
  } {layer = 0 : i64, section = "forward"} : tensor<1x64x512xbf16>
  %z2 = graph.reshape %z : (tensor<1x64x512xbf16>) -> tensor<64x512xbf16>
  %zq:2 = kernel.fused "layers.0.block_quantize" kind("elementwise") ins(%z2 : tensor<64x512xbf16>) {
  ^bb0(%a: tensor<64x512xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 1, 128>, dtype = f8E4M3FN, power_of_two} : (tensor<64x512xbf16>) -> (tensor<64x512xf8E4M3FN>, tensor<64x4xf32>)
    kernel.yield %q, %s : tensor<64x512xf8E4M3FN>, tensor<64x4xf32>
  } {layer = 0 : i64, section = "forward"} : tensor<64x512xf8E4M3FN>, tensor<64x4xf32>
  return %y, %yq#0, %yq#1, %zq#0, %zq#1 : tensor<1x128x512xbf16>, tensor<128x512xf8E4M3FN>, tensor<128x4xf32>, tensor<64x512xf8E4M3FN>, tensor<64x4xf32>
}
