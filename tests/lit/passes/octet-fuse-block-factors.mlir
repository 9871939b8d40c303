// RUN: %octet-opt %s --octet-fuse-block-factors | FileCheck %s

// fprop: the activation's 1x128 tiles and the weight's 128x128 blocks. Each
// quantize kernel writes its operand's factors in cuBLASLt's layout
// ([K/128, R] = 2 x 256 for the tiles; [R/128, ceil4(K/128)] = 2 x 4 for the
// blocks) and no longer yields the scales, which only the GEMM read; the
// GEMM takes the factors (rank 1).
// CHECK-LABEL: func.func @fprop
// CHECK: %[[X:.*]]:2 = kernel.fused "layers.0.block_quantize"
// CHECK: %{{.*}}, %[[XS:.*]] = fp8.block_quantize
// CHECK-NEXT: %[[XF:.*]] = fp8.block_factors %[[XS]] {block = array<i64: 1, 128>} : (tensor<256x2xf32>) -> tensor<512xf32>
// CHECK-NEXT: kernel.yield %{{.*}}, %[[XF]] : tensor<256x256xf8E4M3FN>, tensor<512xf32>
// CHECK: %[[W:.*]]:2 = kernel.fused "layers.0.block_quantize"
// CHECK: fp8.block_factors %{{.*}} {block = array<i64: 128, 128>} : (tensor<2x2xf32>) -> tensor<8xf32>
// CHECK: kernel.gemm %[[X]]#0, %[[W]]#0 scales(%[[X]]#1, %[[W]]#1) {{.*}} : (tensor<256x256xf8E4M3FN>, tensor<256x256xf8E4M3FN>, tensor<512xf32>, tensor<8xf32>) -> tensor<256x256xbf16>
func.func @fprop(%x: tensor<256x256xbf16>, %w: tensor<256x256xf32>) -> tensor<256x256xbf16> {
  %qx:2 = kernel.fused "layers.0.block_quantize" kind("elementwise") ins(%x : tensor<256x256xbf16>) {
  ^bb0(%a: tensor<256x256xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 1, 128>, dtype = f8E4M3FN, power_of_two} : (tensor<256x256xbf16>) -> (tensor<256x256xf8E4M3FN>, tensor<256x2xf32>)
    kernel.yield %q, %s : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  } {layer = 0 : i64, section = "forward"} : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  %qw:2 = kernel.fused "layers.0.block_quantize" kind("elementwise") ins(%w : tensor<256x256xf32>) {
  ^bb0(%a: tensor<256x256xf32>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 128>, dtype = f8E4M3FN, power_of_two} : (tensor<256x256xf32>) -> (tensor<256x256xf8E4M3FN>, tensor<2x2xf32>)
    kernel.yield %q, %s : tensor<256x256xf8E4M3FN>, tensor<2x2xf32>
  } {layer = 0 : i64, section = "forward"} : tensor<256x256xf8E4M3FN>, tensor<2x2xf32>
  %y = kernel.gemm %qx#0, %qw#0 scales(%qx#1, %qw#1) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, param = "layers.0.w", role = "fprop", transpose_b} : (tensor<256x256xf8E4M3FN>, tensor<256x256xf8E4M3FN>, tensor<256x2xf32>, tensor<2x2xf32>) -> tensor<256x256xbf16>
  return %y : tensor<256x256xbf16>
}

// wgrad: the forward quantizes the activation in 128x1 tiles, K-major
// through fp8.transpose, and saves it for the backward; the saved value is
// now the factors of the transposed scales. A scale that something else
// reads (here returned) stays a result beside its factors; two GEMMs of
// one scale share one factors result.
// CHECK-LABEL: func.func @saved
// CHECK: %[[T:.*]]:2 = kernel.fused "layers.0.block_quantize"
// CHECK: fp8.transpose
// CHECK-NEXT: %[[TF:.*]] = fp8.block_factors %{{.*}} {block = array<i64: 1, 128>} : (tensor<256x2xf32>) -> tensor<512xf32>
// CHECK-NEXT: kernel.yield %{{.*}}, %[[TF]] : tensor<256x256xf8E4M3FN>, tensor<512xf32>
// CHECK: %[[D:.*]]:3 = kernel.fused "layers.0.block_quantize"
// CHECK: fp8.block_factors
// CHECK-NOT: fp8.block_factors
// CHECK: kernel.yield %{{.*}} : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>, tensor<512xf32>
// CHECK: %[[XQ:.*]] = graph.save %[[T]]#0 : tensor<256x256xf8E4M3FN>
// CHECK-NEXT: %[[SF:.*]] = graph.save %[[T]]#1 : tensor<512xf32>
// CHECK-NOT: graph.save
// CHECK: kernel.gemm %[[D]]#0, %[[XQ]] scales(%[[D]]#2, %[[SF]])
// CHECK: kernel.gemm %[[D]]#0, %[[XQ]] scales(%[[D]]#2, %[[SF]])
// CHECK: return %{{.*}}, %{{.*}}, %[[D]]#1
func.func @saved(%x: tensor<256x256xbf16>, %dy: tensor<256x256xbf16>, %acc: tensor<256x256xf32>) -> (tensor<256x256xf32>, tensor<256x256xf32>, tensor<256x2xf32>) {
  %t:2 = kernel.fused "layers.0.block_quantize" kind("elementwise") ins(%x : tensor<256x256xbf16>) {
  ^bb0(%a: tensor<256x256xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 1>, dtype = f8E4M3FN, power_of_two} : (tensor<256x256xbf16>) -> (tensor<256x256xf8E4M3FN>, tensor<2x256xf32>)
    %qt, %st = fp8.transpose %q, %s {block = array<i64: 128, 1>} : (tensor<256x256xf8E4M3FN>, tensor<2x256xf32>) -> (tensor<256x256xf8E4M3FN>, tensor<256x2xf32>)
    kernel.yield %qt, %st : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  } {layer = 0 : i64, section = "forward"} : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  %d:2 = kernel.fused "layers.0.block_quantize" kind("elementwise") ins(%dy : tensor<256x256xbf16>) {
  ^bb0(%a: tensor<256x256xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 1>, dtype = f8E4M3FN, power_of_two} : (tensor<256x256xbf16>) -> (tensor<256x256xf8E4M3FN>, tensor<2x256xf32>)
    %qt, %st = fp8.transpose %q, %s {block = array<i64: 128, 1>} : (tensor<256x256xf8E4M3FN>, tensor<2x256xf32>) -> (tensor<256x256xf8E4M3FN>, tensor<256x2xf32>)
    kernel.yield %qt, %st : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  } {layer = 0 : i64, section = "backward"} : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  %xq = graph.save %t#0 : tensor<256x256xf8E4M3FN>
  %xs = graph.save %t#1 : tensor<256x2xf32>
  %dw = kernel.gemm %d#0, %xq scales(%d#1, %xs) accumulate(%acc) {a_block = array<i64: 1, 128>, b_block = array<i64: 1, 128>, param = "layers.0.w", role = "wgrad", transpose_b} : (tensor<256x256xf8E4M3FN>, tensor<256x256xf8E4M3FN>, tensor<256x2xf32>, tensor<256x2xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  %dw2 = kernel.gemm %d#0, %xq scales(%d#1, %xs) {a_block = array<i64: 1, 128>, b_block = array<i64: 1, 128>, param = "layers.0.w2", role = "wgrad", transpose_b} : (tensor<256x256xf8E4M3FN>, tensor<256x256xf8E4M3FN>, tensor<256x2xf32>, tensor<256x2xf32>) -> tensor<256x256xf32>
  return %dw, %dw2, %d#1 : tensor<256x256xf32>, tensor<256x256xf32>, tensor<256x2xf32>
}

// Scales that no quantize kernel of this function writes (an argument):
// the GEMM keeps quantize scales for both operands, and the bundle its
// factors launch.
// CHECK-LABEL: func.func @from_argument
// CHECK-NOT: fp8.block_factors
// CHECK: kernel.gemm {{.*}} : (tensor<256x256xf8E4M3FN>, tensor<256x256xf8E4M3FN>, tensor<256x2xf32>, tensor<2x2xf32>)
func.func @from_argument(%x: tensor<256x256xbf16>, %qw: tensor<256x256xf8E4M3FN>, %sw: tensor<2x2xf32>) -> tensor<256x256xbf16> {
  %qx:2 = kernel.fused "layers.0.block_quantize" kind("elementwise") ins(%x : tensor<256x256xbf16>) {
  ^bb0(%a: tensor<256x256xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 1, 128>, dtype = f8E4M3FN, power_of_two} : (tensor<256x256xbf16>) -> (tensor<256x256xf8E4M3FN>, tensor<256x2xf32>)
    kernel.yield %q, %s : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  } {layer = 0 : i64, section = "forward"} : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  %y = kernel.gemm %qx#0, %qw scales(%qx#1, %sw) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, param = "layers.0.w", role = "fprop", transpose_b} : (tensor<256x256xf8E4M3FN>, tensor<256x256xf8E4M3FN>, tensor<256x2xf32>, tensor<2x2xf32>) -> tensor<256x256xbf16>
  return %y : tensor<256x256xbf16>
}

// Scales that are not powers of two: 1 / scale rounds, and the GEMM on
// factors would no longer give the bits of the GEMM on scales; it keeps the
// scales (and the bundle its factors launch).
// CHECK-LABEL: func.func @not_power_of_two
// CHECK-NOT: fp8.block_factors
// CHECK: kernel.gemm {{.*}} : (tensor<256x256xf8E4M3FN>, tensor<256x256xf8E4M3FN>, tensor<256x2xf32>, tensor<2x2xf32>)
func.func @not_power_of_two(%x: tensor<256x256xbf16>, %w: tensor<256x256xf32>) -> tensor<256x256xbf16> {
  %qx:2 = kernel.fused "layers.0.block_quantize" kind("elementwise") ins(%x : tensor<256x256xbf16>) {
  ^bb0(%a: tensor<256x256xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 1, 128>, dtype = f8E4M3FN} : (tensor<256x256xbf16>) -> (tensor<256x256xf8E4M3FN>, tensor<256x2xf32>)
    kernel.yield %q, %s : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  } {layer = 0 : i64, section = "forward"} : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  %qw:2 = kernel.fused "layers.0.block_quantize" kind("elementwise") ins(%w : tensor<256x256xf32>) {
  ^bb0(%a: tensor<256x256xf32>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 128>, dtype = f8E4M3FN} : (tensor<256x256xf32>) -> (tensor<256x256xf8E4M3FN>, tensor<2x2xf32>)
    kernel.yield %q, %s : tensor<256x256xf8E4M3FN>, tensor<2x2xf32>
  } {layer = 0 : i64, section = "forward"} : tensor<256x256xf8E4M3FN>, tensor<2x2xf32>
  %y = kernel.gemm %qx#0, %qw#0 scales(%qx#1, %qw#1) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, param = "layers.0.w", role = "fprop", transpose_b} : (tensor<256x256xf8E4M3FN>, tensor<256x256xf8E4M3FN>, tensor<256x2xf32>, tensor<2x2xf32>) -> tensor<256x256xbf16>
  return %y : tensor<256x256xbf16>
}
