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

// SwiGLU's gradient joined as [d_gate, d_up] and quantized in 1x128 and
// 128x1 tiles, the BF16 join never stored: the tiles load dy, gate and up
// (8 16-byte rows each, all before any is used), pick their piece of the
// join by a branch that every thread of a tile takes alike, and compute
// sigmoid through ex2.approx and rcp.approx as the row kernels do. Two
// blocks a multiprocessor, as for a stored input.
// CHECK-LABEL: gpu.func @swiglu_grad_0(
// CHECK-SAME: %[[DY:[a-z0-9]+]]: memref<65536xbf16, 1>, %[[G:[a-z0-9]+]]: memref<65536xbf16, 1>, %[[U:[a-z0-9]+]]: memref<65536xbf16, 1>, %{{.*}}: memref<131072xf8E4M3FN, 1>
// CHECK-SAME: nvvm.minctasm = 2 : i32
// CHECK: scf.if %{{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK-COUNT-8: vector.load %[[DY]][%{{.*}}] {alignment = 16 : i64} : memref<65536xbf16, 1>, vector<8xbf16>
// CHECK-COUNT-8: vector.load %[[G]][%{{.*}}] {alignment = 16 : i64} : memref<65536xbf16, 1>, vector<8xbf16>
// CHECK-COUNT-8: vector.load %[[U]][%{{.*}}] {alignment = 16 : i64} : memref<65536xbf16, 1>, vector<8xbf16>
// CHECK: ex2.approx.ftz.f32
// CHECK: nvvm.rcp.approx.ftz.f
// CHECK: } else {
// CHECK-COUNT-8: vector.load %[[DY]]
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32
// CHECK: gpu.return
func.func @sg(%dy: tensor<1x256x256xbf16>, %g: tensor<1x256x256xbf16>, %u: tensor<1x256x256xbf16>) {
  %r:4 = kernel.fused "swiglu_grad" kind("elementwise") ins(%dy, %g, %u : tensor<1x256x256xbf16>, tensor<1x256x256xbf16>, tensor<1x256x256xbf16>) {
  ^bb0(%a: tensor<1x256x256xbf16>, %b: tensor<1x256x256xbf16>, %c: tensor<1x256x256xbf16>):
    %dg, %du = graph.swiglu_grad %a, %b, %c : tensor<1x256x256xbf16>
    %du2 = graph.reshape %du : (tensor<1x256x256xbf16>) -> tensor<256x256xbf16>
    %dg2 = graph.reshape %dg : (tensor<1x256x256xbf16>) -> tensor<256x256xbf16>
    %j = graph.concat %dg2, %du2 {dim = 1 : i64} : (tensor<256x256xbf16>, tensor<256x256xbf16>) -> tensor<256x512xbf16>
    %q, %s = fp8.block_quantize %j {block = array<i64: 128, 1>, dtype = f8E4M3FN, power_of_two} : (tensor<256x512xbf16>) -> (tensor<256x512xf8E4M3FN>, tensor<2x512xf32>)
    %qt, %st = fp8.transpose %q, %s {block = array<i64: 128, 1>} : (tensor<256x512xf8E4M3FN>, tensor<2x512xf32>) -> (tensor<512x256xf8E4M3FN>, tensor<512x2xf32>)
    %r, %rs = fp8.block_quantize %j {block = array<i64: 1, 128>, dtype = f8E4M3FN, power_of_two} : (tensor<256x512xbf16>) -> (tensor<256x512xf8E4M3FN>, tensor<256x4xf32>)
    kernel.yield %qt, %st, %r, %rs : tensor<512x256xf8E4M3FN>, tensor<512x2xf32>, tensor<256x512xf8E4M3FN>, tensor<256x4xf32>
  } : tensor<512x256xf8E4M3FN>, tensor<512x2xf32>, tensor<256x512xf8E4M3FN>, tensor<256x4xf32>
  return
}
