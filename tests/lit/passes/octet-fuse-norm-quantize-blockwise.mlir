// RUN: %octet-opt %s --octet-fuse-norm-quantize | FileCheck %s

// Blockwise: the kernels that only block-quantize an RMSNorm's output (1x128
// tiles for fprop, 128x1 tiles and their K-major copy for wgrad; sides
// multiples of 128) join the residual add + norm kernel. The BF16 output is
// no longer a result; the residual stream is, since the tile kernel reads
// it back to evaluate the norm.
// CHECK-LABEL: func.func @forward
// CHECK: kernel.fused "layers.1.attn_norm" kind("row") ins(%arg0, %arg1, %arg2 :
// CHECK-NEXT: ^bb0
// CHECK-NEXT: graph.add
// CHECK-NEXT: graph.rms_norm
// CHECK: fp8.block_quantize {{.*}}block = array<i64: 128, 1>
// CHECK-NEXT: fp8.transpose
// CHECK: fp8.block_quantize {{.*}}block = array<i64: 1, 128>
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: } {{.*}} : tensor<1x256x256xbf16>, tensor<256x256xf8E4M3FN>, tensor<256x2xf32>, tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
// CHECK-NOT: kernel.copy
// CHECK: return
func.func @forward(%x: tensor<1x256x256xbf16>, %r: tensor<1x256x256xbf16>, %w: tensor<256xf32>) -> (tensor<1x256x256xbf16>, tensor<256x256xf8E4M3FN>, tensor<256x2xf32>, tensor<256x256xf8E4M3FN>, tensor<256x2xf32>) {
  %h = kernel.fused "layers.1.add" kind("elementwise") ins(%x, %r : tensor<1x256x256xbf16>, tensor<1x256x256xbf16>) {
  ^bb0(%a: tensor<1x256x256xbf16>, %b: tensor<1x256x256xbf16>):
    %s = graph.add %a, %b : tensor<1x256x256xbf16>
    kernel.yield %s : tensor<1x256x256xbf16>
  } {layer = 1 : i64, section = "forward"} : tensor<1x256x256xbf16>
  %n = kernel.fused "layers.1.attn_norm" kind("row") ins(%h, %w : tensor<1x256x256xbf16>, tensor<256xf32>) {
  ^bb0(%a: tensor<1x256x256xbf16>, %g: tensor<256xf32>):
    %y = graph.rms_norm %a, %g {eps = 1.0e-5 : f64} : (tensor<1x256x256xbf16>, tensor<256xf32>) -> tensor<1x256x256xbf16>
    kernel.yield %y : tensor<1x256x256xbf16>
  } {layer = 1 : i64, section = "forward"} : tensor<1x256x256xbf16>
  %n2 = graph.reshape %n : (tensor<1x256x256xbf16>) -> tensor<256x256xbf16>
  %t:2 = kernel.fused "layers.1.block_quantize" kind("elementwise") ins(%n2 : tensor<256x256xbf16>) {
  ^bb0(%a: tensor<256x256xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 1>, dtype = f8E4M3FN, tensor = "layers.1.attn.wqkv.x.t"} : (tensor<256x256xbf16>) -> (tensor<256x256xf8E4M3FN>, tensor<2x256xf32>)
    kernel.yield %q, %s : tensor<256x256xf8E4M3FN>, tensor<2x256xf32>
  } {layer = 1 : i64, section = "forward"} : tensor<256x256xf8E4M3FN>, tensor<2x256xf32>
  %tq = kernel.copy %t#0 {layer = 1 : i64, section = "forward", transpose} : (tensor<256x256xf8E4M3FN>) -> tensor<256x256xf8E4M3FN>
  %ts = kernel.copy %t#1 {layer = 1 : i64, section = "forward", transpose} : (tensor<2x256xf32>) -> tensor<256x2xf32>
  %f:2 = kernel.fused "layers.1.block_quantize" kind("elementwise") ins(%n2 : tensor<256x256xbf16>) {
  ^bb0(%a: tensor<256x256xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 1, 128>, dtype = f8E4M3FN, tensor = "layers.1.attn.wqkv.x"} : (tensor<256x256xbf16>) -> (tensor<256x256xf8E4M3FN>, tensor<256x2xf32>)
    kernel.yield %q, %s : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  } {layer = 1 : i64, section = "forward"} : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  return %h, %tq, %ts, %f#0, %f#1 : tensor<1x256x256xbf16>, tensor<256x256xf8E4M3FN>, tensor<256x2xf32>, tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
}

// A norm output read by anything else (here returned in BF16) keeps its
// kernel of its own quantizations.
// CHECK-LABEL: func.func @also_read
// CHECK: kernel.fused "layers.0.attn_norm" kind("row")
// CHECK-NOT: fp8.block_quantize
// CHECK: kernel.yield
// CHECK: kernel.fused "layers.0.block_quantize"
// CHECK: fp8.block_quantize
func.func @also_read(%x: tensor<256x256xbf16>, %w: tensor<256xf32>) -> (tensor<256x256xbf16>, tensor<256x256xf8E4M3FN>, tensor<256x2xf32>) {
  %n = kernel.fused "layers.0.attn_norm" kind("row") ins(%x, %w : tensor<256x256xbf16>, tensor<256xf32>) {
  ^bb0(%a: tensor<256x256xbf16>, %g: tensor<256xf32>):
    %y = graph.rms_norm %a, %g {eps = 1.0e-5 : f64} : (tensor<256x256xbf16>, tensor<256xf32>) -> tensor<256x256xbf16>
    kernel.yield %y : tensor<256x256xbf16>
  } {layer = 0 : i64, section = "forward"} : tensor<256x256xbf16>
  %f:2 = kernel.fused "layers.0.block_quantize" kind("elementwise") ins(%n : tensor<256x256xbf16>) {
  ^bb0(%a: tensor<256x256xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 1, 128>, dtype = f8E4M3FN, tensor = "layers.0.attn.wqkv.x"} : (tensor<256x256xbf16>) -> (tensor<256x256xf8E4M3FN>, tensor<256x2xf32>)
    kernel.yield %q, %s : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  } {layer = 0 : i64, section = "forward"} : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  return %n, %f#0, %f#1 : tensor<256x256xbf16>, tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
}

// A side that is not a multiple of 128 keeps the quantize kernel apart.
// CHECK-LABEL: func.func @partial_tiles
// CHECK: kernel.fused "layers.0.attn_norm" kind("row")
// CHECK-NOT: fp8.block_quantize
// CHECK: kernel.yield
// CHECK: kernel.fused "layers.0.block_quantize"
func.func @partial_tiles(%x: tensor<64x256xbf16>, %w: tensor<256xf32>) -> (tensor<64x256xf8E4M3FN>, tensor<64x2xf32>) {
  %n = kernel.fused "layers.0.attn_norm" kind("row") ins(%x, %w : tensor<64x256xbf16>, tensor<256xf32>) {
  ^bb0(%a: tensor<64x256xbf16>, %g: tensor<256xf32>):
    %y = graph.rms_norm %a, %g {eps = 1.0e-5 : f64} : (tensor<64x256xbf16>, tensor<256xf32>) -> tensor<64x256xbf16>
    kernel.yield %y : tensor<64x256xbf16>
  } {layer = 0 : i64, section = "forward"} : tensor<64x256xbf16>
  %f:2 = kernel.fused "layers.0.block_quantize" kind("elementwise") ins(%n : tensor<64x256xbf16>) {
  ^bb0(%a: tensor<64x256xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 1, 128>, dtype = f8E4M3FN, tensor = "layers.0.attn.wqkv.x"} : (tensor<64x256xbf16>) -> (tensor<64x256xf8E4M3FN>, tensor<64x2xf32>)
    kernel.yield %q, %s : tensor<64x256xf8E4M3FN>, tensor<64x2xf32>
  } {layer = 0 : i64, section = "forward"} : tensor<64x256xf8E4M3FN>, tensor<64x2xf32>
  return %f#0, %f#1 : tensor<64x256xf8E4M3FN>, tensor<64x2xf32>
}
