// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @epilogues
func.func @epilogues(%x: tensor<16x64xf32>, %w: tensor<128x64xf32>, %b: tensor<128xf32>, %acc: tensor<128x64xf32>, %dy: tensor<16x128xf32>) -> (tensor<16x128xf32>, tensor<16x128xf32>, tensor<128x64xf32>, tensor<128xf32>) {
  // CHECK: kernel.gemm %{{.*}}, %{{.*}} bias(%{{.*}}) {epilogue = "gelu_aux", transpose_b} : (tensor<16x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> (tensor<16x128xf32>, tensor<16x128xf32>)
  %g, %pre = kernel.gemm %x, %w bias(%b) {transpose_b, epilogue = "gelu_aux"} : (tensor<16x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> (tensor<16x128xf32>, tensor<16x128xf32>)
  // CHECK: kernel.gemm %{{.*}}, %{{.*}} accumulate(%{{.*}}) {epilogue = "bias_grad", role = "wgrad", transpose_a} : (tensor<16x128xf32>, tensor<16x64xf32>, tensor<128x64xf32>) -> (tensor<128x64xf32>, tensor<128xf32>)
  %dw, %db = kernel.gemm %dy, %x accumulate(%acc) {transpose_a, role = "wgrad", epilogue = "bias_grad"} : (tensor<16x128xf32>, tensor<16x64xf32>, tensor<128x64xf32>) -> (tensor<128x64xf32>, tensor<128xf32>)
  return %g, %pre, %dw, %db : tensor<16x128xf32>, tensor<16x128xf32>, tensor<128x64xf32>, tensor<128xf32>
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<1x8x4x16xbf16>, %k: tensor<1x8x2x16xbf16>, %v: tensor<1x8x2x16xbf16>, %do: tensor<1x8x4x16xbf16>) -> (tensor<1x8x4x16xbf16>, tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>) {
  // CHECK: kernel.attention_fwd %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f64} : (tensor<1x8x4x16xbf16>, tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>) -> (tensor<1x8x4x16xbf16>, tensor<1x4x8xf32>)
  %o, %lse = kernel.attention_fwd %q, %k, %v {causal, scale = 0.25 : f64} : (tensor<1x8x4x16xbf16>, tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>) -> (tensor<1x8x4x16xbf16>, tensor<1x4x8xf32>)
  // CHECK: kernel.attention_bwd %{{.*}} {causal, scale = 2.500000e-01 : f64}
  %dq, %dk, %dv = kernel.attention_bwd %do, %q, %k, %v, %o, %lse {causal, scale = 0.25 : f64} : (tensor<1x8x4x16xbf16>, tensor<1x8x4x16xbf16>, tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>, tensor<1x8x4x16xbf16>, tensor<1x4x8xf32>) -> (tensor<1x8x4x16xbf16>, tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>)
  return %dq, %dk, %dv : tensor<1x8x4x16xbf16>, tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>
}

// CHECK-LABEL: func.func @collectives
func.func @collectives(%g: tensor<64x32xf32>, %b: tensor<32xf32>) -> (tensor<64x32xf32>, tensor<32xf32>, tensor<8x32xf32>, tensor<64x32xf32>) {
  // CHECK: kernel.collective %{{.*}}, %{{.*}} {group = "data", group_size = 8 : i64, kind = "all_reduce", reduction = "avg"} : (tensor<64x32xf32>, tensor<32xf32>) -> (tensor<64x32xf32>, tensor<32xf32>)
  %r0, %r1 = kernel.collective %g, %b {kind = "all_reduce", group = "data", group_size = 8 : i64, reduction = "avg"} : (tensor<64x32xf32>, tensor<32xf32>) -> (tensor<64x32xf32>, tensor<32xf32>)
  // CHECK: kernel.collective %{{.*}} {group = "data", group_size = 8 : i64, kind = "reduce_scatter"} : (tensor<64x32xf32>) -> tensor<8x32xf32>
  %s = kernel.collective %g {kind = "reduce_scatter", group = "data", group_size = 8 : i64} : (tensor<64x32xf32>) -> tensor<8x32xf32>
  // CHECK: kernel.collective %{{.*}} {group = "data", group_size = 8 : i64, kind = "all_gather"} : (tensor<8x32xf32>) -> tensor<64x32xf32>
  %a = kernel.collective %s {kind = "all_gather", group = "data", group_size = 8 : i64} : (tensor<8x32xf32>) -> tensor<64x32xf32>
  return %r0, %r1, %s, %a : tensor<64x32xf32>, tensor<32xf32>, tensor<8x32xf32>, tensor<64x32xf32>
}
