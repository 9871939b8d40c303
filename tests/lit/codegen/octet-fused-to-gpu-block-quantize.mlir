// RUN: %octet-opt %s --octet-fused-to-gpu | FileCheck %s

// Blockwise FP8 quantization of a tensor whose sides are multiples of 128:
// one launch of 128 x 128 tiles, a block of 256 threads each (2 x 3 tiles
// here), whatever quantizations of the tensor the kernel holds. Each
// thread reads its 8 x 8 square as 8 16-byte rows; the 128x1 tiles fold
// their column maxima over the warp's two row groups (a shuffle by 16) and
// the 8 warps (shared memory), the 1x128 tiles over a tile row's 16 threads
// (shuffles by 1, 2, 4, 8). The K-major copy goes through a shared
// 128 x 128-byte tile, written as 8-byte columns and read back as 16-byte
// pieces of output rows.
// CHECK: kernel.fused "dual"
// CHECK: launch = [#kernel.launch<@dual::@dual_0, grid = 6, block = 256>]
// A tensor of partial tiles keeps the block-per-tile kernel.
// CHECK: kernel.fused "partial"
// CHECK: launch = [#kernel.launch<@partial::@partial_0, grid = 9, block = 256>]
// CHECK-LABEL: gpu.func @dual_0(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<98304xbf16, 1>, %[[QT:[a-z0-9]+]]: memref<98304xf8E4M3FN, 1>, %[[ST:[a-z0-9]+]]: memref<768xf32, 1>, %[[Q:[a-z0-9]+]]: memref<98304xf8E4M3FN, 1>, %[[S:[a-z0-9]+]]: memref<768xf32, 1>)
// CHECK-SAME: workgroup(%{{.*}} : memref<32xf32, 3>, %[[MAXIMA:[a-z0-9]+]] : memref<1024xf32, 3> {llvm.align = 16 : i64}, %[[SCALES:[a-z0-9]+]] : memref<128xf32, 3> {llvm.align = 16 : i64}, %[[TILE:[a-z0-9]+]] : memref<16384xi8, 3> {llvm.align = 16 : i64})
// CHECK-COUNT-8: vector.load %[[X]][%{{.*}}] {alignment = 16 : i64} : memref<98304xbf16, 1>, vector<8xbf16>
// CHECK-COUNT-8: gpu.shuffle  xor %{{.*}}, %c16_i32
// CHECK: vector.store %{{.*}}, %[[MAXIMA]]
// CHECK: gpu.barrier
// CHECK: memref.store %{{.*}}, %[[SCALES]]
// CHECK: memref.store %{{.*}}, %[[ST]]
// CHECK: gpu.barrier
// CHECK: vector.load %[[SCALES]]
// CHECK-COUNT-8: vector.store %{{.*}}, %[[TILE]][%{{.*}}] {alignment = 8 : i64} : memref<16384xi8, 3>, vector<8xi8>
// CHECK: gpu.barrier
// CHECK-COUNT-4: vector.store %{{.*}}, %[[QT]][%{{.*}}] {alignment = 16 : i64} : memref<98304xf8E4M3FN, 1>, vector<16xf8E4M3FN>
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c8_i32
// CHECK: memref.store %{{.*}}, %[[S]]
// CHECK: vector.store %{{.*}}, %[[Q]][%{{.*}}] {alignment = 8 : i64} : memref<98304xf8E4M3FN, 1>, vector<8xf8E4M3FN>
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
func.func @bq(%x: tensor<256x384xbf16>, %w: tensor<384x300xf32>) {
  %dual:4 = kernel.fused "dual" kind("elementwise") ins(%x : tensor<256x384xbf16>) {
  ^bb0(%a: tensor<256x384xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 1>, dtype = f8E4M3FN, power_of_two} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<2x384xf32>)
    %qt, %st = fp8.transpose %q, %s {block = array<i64: 128, 1>} : (tensor<256x384xf8E4M3FN>, tensor<2x384xf32>) -> (tensor<384x256xf8E4M3FN>, tensor<384x2xf32>)
    %r, %rs = fp8.block_quantize %a {block = array<i64: 1, 128>, dtype = f8E4M3FN, power_of_two} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<256x3xf32>)
    kernel.yield %qt, %st, %r, %rs : tensor<384x256xf8E4M3FN>, tensor<384x2xf32>, tensor<256x384xf8E4M3FN>, tensor<256x3xf32>
  } : tensor<384x256xf8E4M3FN>, tensor<384x2xf32>, tensor<256x384xf8E4M3FN>, tensor<256x3xf32>
  %blocks:2 = kernel.fused "partial" kind("elementwise") ins(%w : tensor<384x300xf32>) {
  ^bb0(%a: tensor<384x300xf32>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 128>, dtype = f8E4M3FN} : (tensor<384x300xf32>) -> (tensor<384x300xf8E4M3FN>, tensor<3x3xf32>)
    kernel.yield %q, %s : tensor<384x300xf8E4M3FN>, tensor<3x3xf32>
  } : tensor<384x300xf8E4M3FN>, tensor<3x3xf32>
  return
}
