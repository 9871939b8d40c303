// RUN: %octet-opt %s --octet-fused-to-gpu | FileCheck %s

// A block-scaled GEMM's dequantization factors (fp8.block_factors, joined
// by octet-fuse-block-factors) are written by the quantize kernel where it
// writes each scale: 1 / scale at cuBLASLt's place, the scales themselves
// only where the kernel yields them. The tile kernel's 1x128 tiles: the
// first thread of each tile row writes its factor at [K tile, row] of the
// VEC128 layout ([3, 256] here); no launch of its own.
// CHECK: kernel.fused "tiles_factors"
// CHECK: launch = [#kernel.launch<@tiles_factors::@tiles_factors_0, grid = 6, block = 256>]
// CHECK: kernel.fused "blocks_factors"
// CHECK: launch = [#kernel.launch<@blocks_factors::@blocks_factors_0, grid = 9, block = 256>]
// CHECK-LABEL: gpu.func @tiles_factors_0(
// CHECK-SAME: %{{[a-z0-9]+}}: memref<98304xbf16, 1>, %{{[a-z0-9]+}}: memref<98304xf8E4M3FN, 1>, %[[F:[a-z0-9]+]]: memref<768xf32, 1>)
// CHECK: scf.if
// CHECK: %[[KB:.*]] = arith.muli %{{.*}}, %c256 : index
// CHECK-NEXT: %[[AT:.*]] = arith.addi %[[KB]], %{{.*}} : index
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[INV:.*]] = arith.divf %[[ONE]], %{{.*}} : f32
// CHECK-NEXT: memref.store %[[INV]], %[[F]][%[[AT]]] : memref<768xf32, 1>
// The block-per-tile kernel's 128x128 blocks (a tensor of partial tiles):
// thread 0 of each block writes the scale and its factor at [row block,
// K block] of the BLK128x128 layout, rows of 3 padded to 4, and the last
// block of a row writes the padding (0).
// CHECK-LABEL: gpu.func @blocks_factors_0(
// CHECK-SAME: %{{[a-z0-9]+}}: memref<115200xf32, 1>, %{{[a-z0-9]+}}: memref<115200xf8E4M3FN, 1>, %[[S:[a-z0-9]+]]: memref<9xf32, 1>, %[[BF:[a-z0-9]+]]: memref<12xf32, 1>)
// CHECK: memref.store %{{.*}}, %[[S]][%{{.*}}] : memref<9xf32, 1>
// CHECK: arith.divf
// CHECK-NEXT: memref.store %{{.*}}, %[[BF]][%{{.*}}] : memref<12xf32, 1>
// CHECK: arith.cmpi eq, %{{.*}}, %c2{{.*}} : index
// CHECK-NEXT: scf.if
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: memref.store %[[ZERO]], %[[BF]][%{{.*}}] : memref<12xf32, 1>
func.func @f(%x: tensor<256x384xbf16>, %w: tensor<384x300xf32>) -> (tensor<256x384xf8E4M3FN>, tensor<768xf32>, tensor<384x300xf8E4M3FN>, tensor<3x3xf32>, tensor<12xf32>) {
  %t:2 = kernel.fused "tiles_factors" kind("elementwise") ins(%x : tensor<256x384xbf16>) {
  ^bb0(%a: tensor<256x384xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 1, 128>, dtype = f8E4M3FN, power_of_two} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<256x3xf32>)
    %f = fp8.block_factors %s {block = array<i64: 1, 128>} : (tensor<256x3xf32>) -> tensor<768xf32>
    kernel.yield %q, %f : tensor<256x384xf8E4M3FN>, tensor<768xf32>
  } : tensor<256x384xf8E4M3FN>, tensor<768xf32>
  %b:3 = kernel.fused "blocks_factors" kind("elementwise") ins(%w : tensor<384x300xf32>) {
  ^bb0(%a: tensor<384x300xf32>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 128>, dtype = f8E4M3FN} : (tensor<384x300xf32>) -> (tensor<384x300xf8E4M3FN>, tensor<3x3xf32>)
    %f = fp8.block_factors %s {block = array<i64: 128, 128>} : (tensor<3x3xf32>) -> tensor<12xf32>
    kernel.yield %q, %s, %f : tensor<384x300xf8E4M3FN>, tensor<3x3xf32>, tensor<12xf32>
  } : tensor<384x300xf8E4M3FN>, tensor<3x3xf32>, tensor<12xf32>
  return %t#0, %t#1, %b#0, %b#1, %b#2 : tensor<256x384xf8E4M3FN>, tensor<768xf32>, tensor<384x300xf8E4M3FN>, tensor<3x3xf32>, tensor<12xf32>
}
