// RUN: %octet-opt %s --octet-fused-to-gpu | FileCheck %s

// The launches come first (in the functions), the kernels after them (in
// the GPU modules).

// A transpose of FP8 bytes whose sides are whole 64-byte tiles: a block per
// tile (2 x 3 here), then a thread per element for the tensorwise scale (one
// block). Each thread reads four 4-byte rows of a 4 x 4 square, turns it over
// with shuffles, writes its columns as words into the padded shared tile
// (64 rows of 17 words), and after a barrier writes four 4-byte pieces of
// output rows.
// CHECK: func.func @tiled_transpose
// CHECK: {block = 256 : i64, grid = 7 : i64, kernel = @tq::@tq_transpose}
func.func @tiled_transpose(%x: tensor<128x192xbf16>, %s: tensor<f32>) -> (tensor<128x192xf8E4M3FN>, tensor<192x128xf8E4M3FN>, tensor<f32>) {
  %q, %qt, %st = kernel.fused "tq" kind("elementwise") ins(%x, %s : tensor<128x192xbf16>, tensor<f32>) {
  ^bb0(%a: tensor<128x192xbf16>, %b: tensor<f32>):
    %r, %amax = fp8.quantize %a, %b : (tensor<128x192xbf16>, tensor<f32>) -> (tensor<128x192xf8E4M3FN>, tensor<f32>)
    %t, %ts = fp8.transpose %r, %b : (tensor<128x192xf8E4M3FN>, tensor<f32>) -> (tensor<192x128xf8E4M3FN>, tensor<f32>)
    kernel.yield %r, %t, %ts : tensor<128x192xf8E4M3FN>, tensor<192x128xf8E4M3FN>, tensor<f32>
  } : tensor<128x192xf8E4M3FN>, tensor<192x128xf8E4M3FN>, tensor<f32>
  return %q, %qt, %st : tensor<128x192xf8E4M3FN>, tensor<192x128xf8E4M3FN>, tensor<f32>
}

// A side that is not a whole tile (2 rows) keeps the copy a thread per
// output element, and no shared tile.
// CHECK: func.func @untiled_transpose
// CHECK: {block = 256 : i64, grid = 3 : i64, kernel = @qs::@qs_transpose}
// CHECK: gpu.func @tq_transpose
// CHECK-SAME: workgroup(%{{.*}} : memref<4352xi8, 3> {llvm.align = 4 : i64})
// CHECK-COUNT-4: vector.load {{.*}} {alignment = 4 : i64} : memref<24576xf8E4M3FN, 1>, vector<4xf8E4M3FN>
// CHECK: vector.shuffle {{.*}} [0, 1, 2, 3, 4, 5, 6, 7] : vector<4xf8E4M3FN>, vector<4xf8E4M3FN>
// CHECK: vector.shuffle {{.*}} [0, 1, 2, 3, 4, 5, 6, 7] : vector<4xf8E4M3FN>, vector<4xf8E4M3FN>
// CHECK: vector.shuffle {{.*}} [0, 4, 8, 12] : vector<8xf8E4M3FN>, vector<8xf8E4M3FN>
// CHECK: vector.store {{.*}} {alignment = 4 : i64} : memref<4352xi8, 3>, vector<4xi8>
// CHECK: vector.shuffle {{.*}} [3, 7, 11, 15] : vector<8xf8E4M3FN>, vector<8xf8E4M3FN>
// CHECK: gpu.barrier
// CHECK-COUNT-4: vector.store {{.*}} {alignment = 4 : i64} : memref<24576xf8E4M3FN, 1>, vector<4xf8E4M3FN>
// CHECK: } else {
// CHECK: memref.load {{.*}} : memref<1xf32, 1>
// CHECK: memref.store {{.*}} : memref<1xf32, 1>
// CHECK: gpu.func @qs_transpose({{[^)]*}}) kernel attributes
// CHECK-NOT: vector.load
// CHECK: memref.load {{.*}} : memref<512xf8E4M3FN, 1>
func.func @untiled_transpose(%x: tensor<2x256xbf16>, %s: tensor<f32>) -> (tensor<2x256xf8E4M3FN>, tensor<256x2xf8E4M3FN>, tensor<f32>) {
  %q, %qt, %st = kernel.fused "qs" kind("elementwise") ins(%x, %s : tensor<2x256xbf16>, tensor<f32>) {
  ^bb0(%a: tensor<2x256xbf16>, %b: tensor<f32>):
    %r, %amax = fp8.quantize %a, %b : (tensor<2x256xbf16>, tensor<f32>) -> (tensor<2x256xf8E4M3FN>, tensor<f32>)
    %t, %ts = fp8.transpose %r, %b : (tensor<2x256xf8E4M3FN>, tensor<f32>) -> (tensor<256x2xf8E4M3FN>, tensor<f32>)
    kernel.yield %r, %t, %ts : tensor<2x256xf8E4M3FN>, tensor<256x2xf8E4M3FN>, tensor<f32>
  } : tensor<2x256xf8E4M3FN>, tensor<256x2xf8E4M3FN>, tensor<f32>
  return %q, %qt, %st : tensor<2x256xf8E4M3FN>, tensor<256x2xf8E4M3FN>, tensor<f32>
}
