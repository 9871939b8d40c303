// RUN: %octet-opt %s --octet-fused-to-gpu=num-sms=4 | FileCheck %s
// RUN: %octet-opt %s --octet-fused-to-gpu="num-sms=4 cluster-norm-transpose=false" | FileCheck %s --check-prefix=OFF

// RMSNorm + FP8 quantize + transpose as one launch of 2-block clusters
// (NormTransposeKernel.h). 320 rows are 5 bands of 64; num-sms=4 gives 2
// clusters (grid 4) of 1024 threads. Shared memory: the band's half of the
// columns (64 x 2048 bytes, 32 bytes of padding every 16 rows), the weight
// (16 KB), 7 row slots of 8 KB, 9 mbarriers, the row groups' partial sums
// and the warps' maxima: 205352 bytes. The amax (result 1) is zeroed
// before the launch.
// CHECK: launch = [#kernel.launch<@nqt::@nqt, grid = 4, block = 1024, shared_bytes = 205352, cluster = 2>], workspace_bytes = 0 : i64, zero_results = array<i64: 1>}
// A row of 256 columns is too short for 4 warps of 256-column chunks: the
// row kernel and the transpose launch, as before.
// CHECK: launch = [#kernel.launch<@short::@short, grid = 64, block = 32>, #kernel.launch<@short::@short_transpose, grid = 5, block = 256, programmatic>]
// OFF: launch = [#kernel.launch<@nqt::@nqt, grid = 320, block = {{[0-9]+}}>, #kernel.launch<@nqt::@nqt_transpose, grid = {{[0-9]+}}, block = 256, programmatic>]
// OFF-NOT: cluster =

// The kernel: global pointers, one block a multiprocessor.
// CHECK: llvm.mlir.global external @octet_norm_transpose_smem() {addr_space = 3 : i32, alignment = 128 : i64} : !llvm.array<0 x i8>
// CHECK: gpu.func @nqt(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>) kernel attributes {known_block_size = array<i32: 1024, 1, 1>, nvvm.maxntid = array<i32: 1024, 1, 1>, nvvm.minctasm = 1 : i32}
// CHECK: %cluster_ctarank
// Thread 0 sets up the band's `ready` (one arrival and its bytes), `free`
// (an arrival from each block of the cluster) and a barrier per row slot,
// then starts the first rows' bulk copies (8 KB each).
// CHECK: mbarrier.init.shared::cta.b64 [$0], $1;{{.*}} %c1_i32
// CHECK: mbarrier.init.shared::cta.b64 [$0], $1;{{.*}} %c2_i32
// CHECK: fence.mbarrier_init.release.cluster;
// CHECK: mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;{{.*}} %c131072_i32
// CHECK: fence.proxy.async.shared::cta;
// CHECK: cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], $2, [$3];
// CHECK: barrier.cluster.arrive.release.aligned;
// Row warps: wait for the slot, sum squares over the group behind a named
// barrier, refill the slot, take the row's 1/rms, wait until the band
// buffers are free, then normalize, quantize (round to nearest even, saturating), store the row and
// push each chunk into the block that transposes its columns.
// CHECK: mbarrier.try_wait.parity.shared::cta.b64
// CHECK: bar.sync $0, $1;
// CHECK: cp.async.bulk.shared::cluster.global
// CHECK: math.sqrt
// CHECK: mbarrier.try_wait.parity.shared::cta.b64
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: cvt.rn.satfinite.e4m3x2.f32
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 8 : i64} : vector<2xi32>, !llvm.ptr<1>
// CHECK: mapa.shared::cluster.u32
// CHECK: st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32
// Transposer warps: wait for the band, turn 4 x 4 byte squares, write
// 16-byte runs, re-arm `ready` and arrive on every block's `free`.
// CHECK: mbarrier.try_wait.parity.shared::cta.b64
// CHECK: prmt.b32 $0, $1, $2, 0x40;
// CHECK: prmt.b32 $0, $1, $2, 0x5410;
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK: mbarrier.arrive.shared::cluster.b64 _, [$0];
// The block's amax: one atomic max; block 0 passes the scale through.
// CHECK: barrier.cluster.arrive.release.aligned;
// CHECK: red.global.max.u32
// CHECK: gpu.func @short(

func.func @cluster(%x: tensor<1x320x4096xbf16>, %w: tensor<4096xf32>, %s: tensor<f32>, %xs: tensor<64x256xbf16>, %ws: tensor<256xf32>) {
  %a:4 = kernel.fused "nqt" kind("row") ins(%x, %w, %s : tensor<1x320x4096xbf16>, tensor<4096xf32>, tensor<f32>) {
  ^bb0(%i0: tensor<1x320x4096xbf16>, %i1: tensor<4096xf32>, %i2: tensor<f32>):
    %n0 = graph.rms_norm %i0, %i1 {eps = 1.0e-5 : f64} : (tensor<1x320x4096xbf16>, tensor<4096xf32>) -> tensor<1x320x4096xbf16>
    %n2 = graph.reshape %n0 : (tensor<1x320x4096xbf16>) -> tensor<320x4096xbf16>
    %q, %m = fp8.quantize %n2, %i2 : (tensor<320x4096xbf16>, tensor<f32>) -> (tensor<320x4096xf8E4M3FN>, tensor<f32>)
    %t, %ts = fp8.transpose %q, %i2 : (tensor<320x4096xf8E4M3FN>, tensor<f32>) -> (tensor<4096x320xf8E4M3FN>, tensor<f32>)
    kernel.yield %q, %m, %t, %ts : tensor<320x4096xf8E4M3FN>, tensor<f32>, tensor<4096x320xf8E4M3FN>, tensor<f32>
  } : tensor<320x4096xf8E4M3FN>, tensor<f32>, tensor<4096x320xf8E4M3FN>, tensor<f32>
  %b:4 = kernel.fused "short" kind("row") ins(%xs, %ws, %s : tensor<64x256xbf16>, tensor<256xf32>, tensor<f32>) {
  ^bb0(%i0: tensor<64x256xbf16>, %i1: tensor<256xf32>, %i2: tensor<f32>):
    %n0 = graph.rms_norm %i0, %i1 {eps = 1.0e-5 : f64} : (tensor<64x256xbf16>, tensor<256xf32>) -> tensor<64x256xbf16>
    %q, %m = fp8.quantize %n0, %i2 : (tensor<64x256xbf16>, tensor<f32>) -> (tensor<64x256xf8E4M3FN>, tensor<f32>)
    %t, %ts = fp8.transpose %q, %i2 : (tensor<64x256xf8E4M3FN>, tensor<f32>) -> (tensor<256x64xf8E4M3FN>, tensor<f32>)
    kernel.yield %q, %m, %t, %ts : tensor<64x256xf8E4M3FN>, tensor<f32>, tensor<256x64xf8E4M3FN>, tensor<f32>
  } : tensor<64x256xf8E4M3FN>, tensor<f32>, tensor<256x64xf8E4M3FN>, tensor<f32>
  return
}
