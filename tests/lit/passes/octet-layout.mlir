// RUN: %octet-opt %s --octet-layout | FileCheck %s
// After the pass every FP8 GEMM is in TN form (no transpose_a, transpose_b set).
// RUN: %octet-opt %s --octet-layout | FileCheck %s --check-prefix=TN

// TN-NOT: transpose_a
// TN-NOT: fp8.matmul {{.*}}"} :

// CHECK-LABEL: func.func @tensorwise
func.func @tensorwise(%x: tensor<16x64xf32>, %w: tensor<128x64xf32>, %dy: tensor<16x128xf32>, %s: tensor<f32>) -> (tensor<16x128xf32>, tensor<16x64xf32>, tensor<128x64xf32>) {
  %qx, %ax = fp8.quantize %x, %s : (tensor<16x64xf32>, tensor<f32>) -> (tensor<16x64xf8E4M3FN>, tensor<f32>)
  %qxs = graph.save %qx : tensor<16x64xf8E4M3FN>
  %ss = graph.save %s : tensor<f32>
  %qw, %aw = fp8.quantize %w, %s : (tensor<128x64xf32>, tensor<f32>) -> (tensor<128x64xf8E4M3FN>, tensor<f32>)
  %qdy, %ady = fp8.quantize %dy, %s : (tensor<16x128xf32>, tensor<f32>) -> (tensor<16x128xf8E5M2>, tensor<f32>)
  %y = fp8.matmul %qx, %s, %qw, %s {transpose_b, role = "fprop"} : (tensor<16x64xf8E4M3FN>, tensor<f32>, tensor<128x64xf8E4M3FN>, tensor<f32>) -> tensor<16x128xf32>
  // dgrad reads W [N, K] as its K-major B: a copy of W transposed, made
  // right after W's quantize.
  %dx = fp8.matmul %qdy, %s, %qw, %s {role = "dgrad"} : (tensor<16x128xf8E5M2>, tensor<f32>, tensor<128x64xf8E4M3FN>, tensor<f32>) -> tensor<16x64xf32>
  // wgrad: dy transposed for A; x, saved in the forward, is transposed
  // before the save so the K-major copy is what the backward keeps.
  %dw = fp8.matmul %qdy, %s, %qxs, %ss {transpose_a, role = "wgrad"} : (tensor<16x128xf8E5M2>, tensor<f32>, tensor<16x64xf8E4M3FN>, tensor<f32>) -> tensor<128x64xf32>
  return %y, %dx, %dw : tensor<16x128xf32>, tensor<16x64xf32>, tensor<128x64xf32>
}
// CHECK: %[[QX:.*]], %{{.*}} = fp8.quantize
// CHECK-NEXT: %[[XT:.*]], %[[XTS:.*]] = fp8.transpose %[[QX]], %{{.*}} : (tensor<16x64xf8E4M3FN>, tensor<f32>) -> (tensor<64x16xf8E4M3FN>, tensor<f32>)
// The row-major saves are gone.
// CHECK-NEXT: %[[XTSAVED:.*]] = graph.save %[[XT]] : tensor<64x16xf8E4M3FN>
// CHECK-NEXT: %[[XTSSAVED:.*]] = graph.save %[[XTS]] : tensor<f32>
// CHECK-NEXT: %[[QW:.*]], %{{.*}} = fp8.quantize
// CHECK-NEXT: %[[WT:.*]], %[[WTS:.*]] = fp8.transpose %[[QW]], %{{.*}} : (tensor<128x64xf8E4M3FN>, tensor<f32>) -> (tensor<64x128xf8E4M3FN>, tensor<f32>)
// CHECK-NEXT: %[[QDY:.*]], %{{.*}} = fp8.quantize
// CHECK-NEXT: %[[DYT:.*]], %[[DYTS:.*]] = fp8.transpose %[[QDY]], %{{.*}} : (tensor<16x128xf8E5M2>, tensor<f32>) -> (tensor<128x16xf8E5M2>, tensor<f32>)
// Already in TN form: untouched.
// CHECK-NEXT: fp8.matmul %[[QX]], %{{.*}}, %[[QW]], %{{.*}} {role = "fprop", transpose_b}
// CHECK: fp8.matmul %[[QDY]], %{{.*}}, %[[WT]], %[[WTS]] {role = "dgrad", transpose_b} : (tensor<16x128xf8E5M2>, tensor<f32>, tensor<64x128xf8E4M3FN>, tensor<f32>) -> tensor<16x64xf32>
// CHECK: fp8.matmul %[[DYT]], %[[DYTS]], %[[XTSAVED]], %[[XTSSAVED]] {role = "wgrad", transpose_b} : (tensor<128x16xf8E5M2>, tensor<f32>, tensor<64x16xf8E4M3FN>, tensor<f32>) -> tensor<128x64xf32>

// Block scales transpose with the data and the block shape swaps: 128x1
// tiles along tokens become 1x128 tiles along K.
// CHECK-LABEL: func.func @blockwise
func.func @blockwise(%x: tensor<256x64xf32>, %dy: tensor<256x128xf32>) -> (tensor<128x64xf32>, tensor<128x64xf32>) {
  %qx, %sx = fp8.block_quantize %x {block = array<i64: 128, 1>, dtype = f8E4M3FN} : (tensor<256x64xf32>) -> (tensor<256x64xf8E4M3FN>, tensor<2x64xf32>)
  %qdy, %sdy = fp8.block_quantize %dy {block = array<i64: 128, 1>, dtype = f8E5M2} : (tensor<256x128xf32>) -> (tensor<256x128xf8E5M2>, tensor<2x128xf32>)
  // CHECK: fp8.block_quantize
  // CHECK-NEXT: %[[XT:.*]], %[[XTS:.*]] = fp8.transpose %{{.*}}, %{{.*}} {block = array<i64: 128, 1>} : (tensor<256x64xf8E4M3FN>, tensor<2x64xf32>) -> (tensor<64x256xf8E4M3FN>, tensor<64x2xf32>)
  // CHECK-NEXT: fp8.block_quantize
  // CHECK-NEXT: %[[DT:.*]], %[[DTS:.*]] = fp8.transpose %{{.*}}, %{{.*}} {block = array<i64: 128, 1>} : (tensor<256x128xf8E5M2>, tensor<2x128xf32>) -> (tensor<128x256xf8E5M2>, tensor<128x2xf32>)
  // CHECK: fp8.matmul %[[DT]], %[[DTS]], %[[XT]], %[[XTS]] {a_block = array<i64: 1, 128>, b_block = array<i64: 1, 128>, role = "wgrad", transpose_b}
  %dw = fp8.matmul %qdy, %sdy, %qx, %sx {transpose_a, a_block = array<i64: 128, 1>, b_block = array<i64: 128, 1>, role = "wgrad"} : (tensor<256x128xf8E5M2>, tensor<2x128xf32>, tensor<256x64xf8E4M3FN>, tensor<2x64xf32>) -> tensor<128x64xf32>
  // One copy per value serves every GEMM.
  // CHECK-NOT: fp8.transpose
  // CHECK: fp8.matmul %[[DT]], %[[DTS]], %[[XT]], %[[XTS]]
  %dw2 = fp8.matmul %qdy, %sdy, %qx, %sx {transpose_a, a_block = array<i64: 128, 1>, b_block = array<i64: 128, 1>, role = "wgrad"} : (tensor<256x128xf8E5M2>, tensor<2x128xf32>, tensor<256x64xf8E4M3FN>, tensor<2x64xf32>) -> tensor<128x64xf32>
  return %dw, %dw2 : tensor<128x64xf32>, tensor<128x64xf32>
}
