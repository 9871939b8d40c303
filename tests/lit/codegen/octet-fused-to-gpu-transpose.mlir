// RUN: %octet-opt %s --octet-fused-to-gpu=transpose-tile-rows=16 | FileCheck %s
// RUN: %octet-opt %s --octet-fused-to-gpu | FileCheck %s --check-prefix=TILES
// RUN: %octet-opt %s --octet-fused-to-gpu | FileCheck %s --check-prefix=KMAJOR
// RUN: %octet-opt %s --octet-fused-to-gpu=transpose-tile-rows=32 | FileCheck %s --check-prefix=ROWS32
// RUN: not %octet-opt %s --octet-fused-to-gpu=transpose-tile-rows=12 2>&1 | FileCheck %s --check-prefix=BAD

// The launches come first (in the functions), the kernels after them (in
// the GPU modules).

// A transpose of an FP8 result whose rows are the kernel's rows, 16 of them
// a tile (transpose-tile-rows): the row kernel writes it itself, a block
// per tile of 16 rows (8 here) and no launch after it. A thread gathers the
// bytes of each of its 8 columns, 8 rows at a time, in a vector that shifts
// by a byte a row; it parks the first 8 in shared memory (its own slots:
// 8 columns x 32 threads x 8 bytes), and after the tile's last row writes
// each column's 16 bytes with one store. A quantize reduces nothing over the
// block, so its rows need no barrier. The tensorwise scale is copied by
// thread 0 of block 0. Threads past the row's end (192 = 24 threads x 8)
// store nothing.
// CHECK: func.func @tiled_transpose
// CHECK: launch = [#kernel.launch<@tq::@tq, grid = 8, block = 32>]
// CHECK: func.func @untiled_transpose
// CHECK: #kernel.launch<@qs::@qs_transpose, grid = 3, block = 256, programmatic>
// CHECK-LABEL: gpu.func @tq(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<24576xbf16, 1>, %[[S:[a-z0-9]+]]: memref<1xf32, 1>, %[[Q:[a-z0-9]+]]: memref<24576xf8E4M3FN, 1>, %[[T:[a-z0-9]+]]: memref<24576xf8E4M3FN, 1>, %[[TS:[a-z0-9]+]]: memref<1xf32, 1>)
// CHECK-SAME: workgroup(%{{.*}} : memref<128xf32, 3> {llvm.align = 16 : i64}, %[[PARK:[a-z0-9]+]] : memref<2048xi8, 3> {llvm.align = 16 : i64})
// CHECK: scf.if
// CHECK: %[[SCALE:.*]] = memref.load %[[S]]
// CHECK: memref.store %[[SCALE]], %[[TS]]
// CHECK: scf.for {{.*}} -> (f32, vector<8xbf16>) {
// CHECK: scf.for {{.*}} -> (f32, vector<8xbf16>, vector<8xf8E4M3FN>, vector<8xf8E4M3FN>, vector<8xf8E4M3FN>, vector<8xf8E4M3FN>, vector<8xf8E4M3FN>, vector<8xf8E4M3FN>, vector<8xf8E4M3FN>, vector<8xf8E4M3FN>) {
// CHECK: vector.load %[[X]]
// CHECK: %[[ROW:.*]] = arith.truncf {{.*}} : vector<8xf32> to vector<8xf8E4M3FN>
// CHECK: vector.store %[[ROW]], %[[Q]]
// CHECK-NOT: gpu.barrier
// CHECK: %[[FIRST:.*]] = vector.shuffle %{{.*}}, %[[ROW]] [1, 2, 3, 4, 5, 6, 7, 8] : vector<8xf8E4M3FN>, vector<8xf8E4M3FN>
// CHECK: vector.shuffle %{{.*}}, %[[ROW]] [1, 2, 3, 4, 5, 6, 7, 15] : vector<8xf8E4M3FN>, vector<8xf8E4M3FN>
// CHECK: scf.if
// CHECK: %[[BITS:.*]] = arith.bitcast %[[FIRST]] : vector<8xf8E4M3FN> to vector<8xi8>
// CHECK-NEXT: vector.store %[[BITS]], %[[PARK]]{{.*}} {alignment = 8 : i64} : memref<2048xi8, 3>, vector<8xi8>
// CHECK-COUNT-7: vector.store {{.*}}, %[[PARK]]
// CHECK: } {loop_annotation = #loop_annotation}
// CHECK: %[[PARKED:.*]] = vector.load %[[PARK]]
// CHECK-NEXT: %[[EARLIER:.*]] = arith.bitcast %[[PARKED]] : vector<8xi8> to vector<8xf8E4M3FN>
// CHECK-NEXT: %[[COLUMN:.*]] = vector.shuffle %[[EARLIER]], %{{.*}}#2 [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
// CHECK: scf.if
// CHECK-NEXT: vector.store %[[COLUMN]], %[[T]][{{.*}}] {alignment = 16 : i64} : memref<24576xf8E4M3FN, 1>, vector<16xf8E4M3FN>
// CHECK-COUNT-7: vector.store {{.*}}, %[[T]][{{.*}}] {alignment = 16 : i64} : memref<24576xf8E4M3FN, 1>, vector<16xf8E4M3FN>
// CHECK: gpu.return

// By default (transpose-tile-rows=0) a kernel that only quantizes a tensor
// and transposes the result is one launch: a block per 64 x 64 tile (2 x 3
// here) reads its thread's 4 x 4 square of the bf16 input (four 4-element
// reads), casts it to FP8, writes those rows of the row-major result and
// turns them over as the plain transpose below does; a thread per element
// copies the tensorwise scale (one block). No row kernel runs.
// TILES: func.func @tiled_transpose
// TILES: launch = [#kernel.launch<@tq::@tq_transpose, grid = 7, block = 256>]
// TILES: func.func @untiled_transpose
// TILES: #kernel.launch<@qs::@qs_transpose, grid = 3, block = 256, programmatic>
// TILES: func.func @scaled_transpose
// TILES: launch = [#kernel.launch<@sq::@sq, grid = 3, block = 256>, #kernel.launch<@sq::@sq_transpose, grid = 7, block = 256, programmatic>]
// TILES: func.func @quantize_amax_transpose
// TILES: launch = [#kernel.launch<@qa::@qa_transpose, grid = 3, block = 256>], workspace_bytes = 0 : i64, zero_results = array<i64: 1>
// TILES: func.func @kmajor_cast
// TILES: launch = [#kernel.launch<@kc::@kc_transpose, grid = 2, block = 256>]
// TILES: func.func @rope_join_transpose
// TILES: launch = [#kernel.launch<@rj::@rj_transpose, grid = 9, block = 256>], workspace_bytes = 0 : i64, zero_results = array<i64: 1>
// TILES: func.func @rope_join_small_heads
// TILES: launch = [#kernel.launch<@rs::@rs, grid = 64, block = 32>, #kernel.launch<@rs::@rs_transpose, grid = 5, block = 256, programmatic>]
// TILES: func.func @norm_grad_transpose
// TILES: launch = [#kernel.launch<@ngt::@ngt, grid = 128, block = 32>, #kernel.launch<@ngt::@ngt_colsum_transpose, grid = 17, block = 256, programmatic>]
// TILES: func.func @swiglu_grad_transpose
// TILES: launch = [#kernel.launch<@sgt::@sgt_transpose, grid = 5, block = 256>], workspace_bytes = 0 : i64, zero_results = array<i64: 1>
// TILES-LABEL: gpu.func @tq_transpose(
// TILES-SAME: %[[X:[a-z0-9]+]]: memref<24576xbf16, 1>, %[[S:[a-z0-9]+]]: memref<1xf32, 1>, %[[Q:[a-z0-9]+]]: memref<24576xf8E4M3FN, 1>, %[[T:[a-z0-9]+]]: memref<24576xf8E4M3FN, 1>
// TILES-SAME: workgroup(%[[TILE:[a-z0-9]+]] : memref<4352xi8, 3> {llvm.align = 4 : i64})
// TILES-COUNT-4: vector.load %[[X]]{{.*}} {alignment = 8 : i64} : memref<24576xbf16, 1>, vector<4xbf16>
// TILES: %[[ROW:.*]] = arith.truncf {{.*}} : vector<4xf32> to vector<4xf8E4M3FN>
// TILES: vector.store %[[ROW]], %[[Q]]{{.*}} {alignment = 4 : i64} : memref<24576xf8E4M3FN, 1>, vector<4xf8E4M3FN>
// TILES-COUNT-3: vector.store {{.*}}, %[[Q]]
// TILES: vector.shuffle %[[ROW]], {{.*}} [0, 1, 2, 3, 4, 5, 6, 7] : vector<4xf8E4M3FN>, vector<4xf8E4M3FN>
// TILES: vector.shuffle {{.*}} [0, 4, 8, 12] : vector<8xf8E4M3FN>, vector<8xf8E4M3FN>
// TILES: vector.store {{.*}}, %[[TILE]]{{.*}} : memref<4352xi8, 3>, vector<4xi8>
// TILES: gpu.barrier
// TILES-COUNT-4: vector.store {{.*}}, %[[T]]{{.*}} {alignment = 4 : i64} : memref<24576xf8E4M3FN, 1>, vector<4xf8E4M3FN>
// TILES-NOT: atomic_rmw
// TILES: } else {
// TILES: memref.load {{.*}} : memref<1xf32, 1>
// TILES: memref.store {{.*}} : memref<1xf32, 1>

// A kernel that does more than quantize keeps its row kernel, and the
// transposes run as a launch of their own: each thread reads four 4-byte
// rows of a 4 x 4 square of the FP8 result, turns it over with shuffles,
// writes its columns as words into the padded shared tile (64 rows of 17
// words), and after a barrier writes four 4-byte pieces of output rows.
// TILES-LABEL: gpu.func @sq_transpose(
// TILES-SAME: workgroup(%{{.*}} : memref<4352xi8, 3> {llvm.align = 4 : i64})
// TILES-COUNT-4: vector.load {{.*}} {alignment = 4 : i64} : memref<24576xf8E4M3FN, 1>, vector<4xf8E4M3FN>
// TILES: vector.shuffle {{.*}} [0, 1, 2, 3, 4, 5, 6, 7] : vector<4xf8E4M3FN>, vector<4xf8E4M3FN>
// TILES: vector.shuffle {{.*}} [0, 1, 2, 3, 4, 5, 6, 7] : vector<4xf8E4M3FN>, vector<4xf8E4M3FN>
// TILES: vector.shuffle {{.*}} [0, 4, 8, 12] : vector<8xf8E4M3FN>, vector<8xf8E4M3FN>
// TILES: vector.store {{.*}} {alignment = 4 : i64} : memref<4352xi8, 3>, vector<4xi8>
// TILES: vector.shuffle {{.*}} [3, 7, 11, 15] : vector<8xf8E4M3FN>, vector<8xf8E4M3FN>
// TILES: gpu.barrier
// TILES-COUNT-4: vector.store {{.*}} {alignment = 4 : i64} : memref<24576xf8E4M3FN, 1>, vector<4xf8E4M3FN>

// With the amax a result (zeroed before the launch: zero_results), each
// thread keeps the largest |x| of its square (f32 input here, no widening),
// the block takes the maximum of its warps' (a butterfly, then a shared
// slot a warp, read in warp order by thread 0) and adds it with one atomic.
// TILES-LABEL: gpu.func @qa_transpose(
// TILES-SAME: %[[AMAX:[a-z0-9]+]]: memref<1xi32, 1>
// TILES-SAME: workgroup(%[[WARPMAX:[a-z0-9]+]] : memref<8xf32, 3>
// TILES-COUNT-4: vector.load {{.*}} : memref<8192xf32, 1>, vector<4xf32>
// TILES-NOT: arith.extf
// TILES: vector.reduction <maximumf>
// TILES: arith.truncf {{.*}} : vector<4xf32> to vector<4xf8E5M2>
// TILES: gpu.barrier
// TILES: gpu.shuffle  xor
// TILES: memref.store {{.*}}, %[[WARPMAX]]
// TILES: gpu.barrier
// TILES-COUNT-8: memref.load %[[WARPMAX]]
// TILES: memref.atomic_rmw maxu {{.*}}, %[[AMAX]]

// A join of RoPE'd q and k heads and v: a block per unit of 64 rows and a
// head's 128 columns (2 bands x 4 units + the scale's block). A q unit
// reads both halves of its squares (8 four-element reads), rotates each
// pair with cos/sin of its angle (Cody-Waite reduction, then the SFU),
// rounds to bf16 as the RoPE result is, quantizes, writes the row-major
// rows and turns both tiles over; the plain v unit only quantizes.
// TILES-LABEL: gpu.func @rj_transpose(
// TILES-SAME: %[[K:[a-z0-9]+]]: memref<16384xbf16, 1>, %[[P:[a-z0-9]+]]: memref<128xi32, 1>, %[[Q:[a-z0-9]+]]: memref<32768xbf16, 1>, %[[V:[a-z0-9]+]]: memref<16384xbf16, 1>
// TILES-SAME: %[[OUT:[a-z0-9]+]]: memref<65536xf8E5M2, 1>, %[[AM:[a-z0-9]+]]: memref<1xi32, 1>, %[[OUTT:[a-z0-9]+]]: memref<65536xf8E5M2, 1>
// TILES-SAME: workgroup(%{{.*}} : memref<8xf32, 3>, %[[TILES2:[a-z0-9]+]] : memref<8704xi8, 3>
// TILES: scf.if {{.*}} -> (f32) {
// TILES-COUNT-8: vector.load %[[Q]]{{.*}} {alignment = 8 : i64} : memref<32768xbf16, 1>, vector<4xbf16>
// TILES: memref.load %[[P]]
// TILES: math.roundeven
// TILES-COUNT-3: math.fma
// TILES: llvm.inline_asm "cos.approx.ftz.f32 $0, $1;"
// TILES: llvm.inline_asm "sin.approx.ftz.f32 $0, $1;"
// TILES: arith.truncf {{.*}} : vector<4xf32> to vector<4xbf16>
// TILES: arith.truncf {{.*}} : vector<4xf32> to vector<4xf8E5M2>
// TILES: vector.store {{.*}}, %[[OUT]]
// TILES: vector.store {{.*}}, %[[TILES2]]
// TILES: } else {
// TILES: scf.if {{.*}} -> (f32) {
// TILES-COUNT-8: vector.load %[[K]]
// TILES: llvm.inline_asm "cos.approx.ftz.f32 $0, $1;"
// TILES: } else {
// TILES-COUNT-8: vector.load %[[V]]
// TILES-NOT: llvm.inline_asm
// TILES: arith.truncf {{.*}} : vector<4xf32> to vector<4xf8E5M2>
// TILES: gpu.barrier
// TILES-COUNT-8: vector.store {{.*}}, %[[OUTT]]{{.*}} {alignment = 4 : i64} : memref<65536xf8E5M2, 1>, vector<4xf8E5M2>
// TILES: memref.atomic_rmw maxu {{.*}}, %[[AM]]

// The weight gradient's column sums take the first 8 blocks of the launch
// after the row kernel, the transpose (8 tiles and the scale) the rest.
// TILES-LABEL: gpu.func @ngt_colsum_transpose(
// TILES-SAME: workgroup(%[[SUMS:[a-z0-9]+]] : memref<256xf32, 3>, %[[TILE:[a-z0-9]+]] : memref<4352xi8, 3>
// TILES: %[[B:.*]] = gpu.block_id x
// TILES: %[[SUMMING:.*]] = arith.cmpi ult, %[[B]], %c8
// TILES: scf.if %[[SUMMING]] {
// TILES: memref.store {{.*}}, %[[SUMS]]
// TILES: } else {
// TILES: %[[B2:.*]] = gpu.block_id x
// TILES: arith.subi %[[B2]], %c8
// TILES: vector.store {{.*}}, %[[TILE]]

// A block per tile of both SwiGLU gradients (2 bands x 2 tiles + the
// scale's block): the three operands' squares read once, the gradient
// computed as the row kernels compute it (the sigmoid through ex2/rcp),
// both results quantized, their rows written and both tiles turned over.
// TILES-LABEL: gpu.func @sgt_transpose(
// TILES-SAME: %[[DY:[a-z0-9]+]]: memref<16384xbf16, 1>, %[[G:[a-z0-9]+]]: memref<16384xbf16, 1>, %[[U:[a-z0-9]+]]: memref<16384xbf16, 1>, %{{.*}}: memref<1xf32, 1>, %[[OUT:[a-z0-9]+]]: memref<32768xf8E5M2, 1>
// TILES-SAME: %[[OUTT:[a-z0-9]+]]: memref<32768xf8E5M2, 1>
// TILES-SAME: workgroup(%{{.*}} : memref<8xf32, 3>, %[[TILES3:[a-z0-9]+]] : memref<8704xi8, 3>
// TILES-COUNT-4: vector.load %[[DY]]
// TILES-COUNT-4: vector.load %[[G]]
// TILES-COUNT-4: vector.load %[[U]]
// TILES: llvm.inline_asm "ex2.approx.ftz.f32 $0, $1;"
// TILES: arith.truncf {{.*}} : vector<4xf32> to vector<4xbf16>
// TILES-COUNT-8: vector.store {{.*}}, %[[OUT]]
// TILES: vector.store {{.*}}, %[[TILES3]]
// TILES: gpu.barrier
// TILES-COUNT-8: vector.store {{.*}}, %[[OUTT]]

// 32-row tiles: three groups of 8 parked (8 columns x 32 threads x 24
// bytes), then a full 32-byte sector a column.
// ROWS32: launch = [#kernel.launch<@tq::@tq, grid = 4, block = 32>]
// ROWS32: gpu.func @tq(
// ROWS32-SAME: memref<6144xi8, 3>
// ROWS32: vector.shuffle {{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] : vector<8xf8E4M3FN>, vector<24xf8E4M3FN>
// ROWS32: vector.store {{.*}} {alignment = 16 : i64} : memref<24576xf8E4M3FN, 1>, vector<32xf8E4M3FN>

// BAD: transpose-tile-rows must be 0 or a multiple of 8, not 12
func.func @tiled_transpose(%x: tensor<128x192xbf16>, %s: tensor<f32>) -> (tensor<128x192xf8E4M3FN>, tensor<192x128xf8E4M3FN>, tensor<f32>) {
  %q, %qt, %st = kernel.fused "tq" kind("elementwise") ins(%x, %s : tensor<128x192xbf16>, tensor<f32>) {
  ^bb0(%a: tensor<128x192xbf16>, %b: tensor<f32>):
    %r, %amax = fp8.quantize %a, %b : (tensor<128x192xbf16>, tensor<f32>) -> (tensor<128x192xf8E4M3FN>, tensor<f32>)
    %t, %ts = fp8.transpose %r, %b : (tensor<128x192xf8E4M3FN>, tensor<f32>) -> (tensor<192x128xf8E4M3FN>, tensor<f32>)
    kernel.yield %r, %t, %ts : tensor<128x192xf8E4M3FN>, tensor<192x128xf8E4M3FN>, tensor<f32>
  } : tensor<128x192xf8E4M3FN>, tensor<192x128xf8E4M3FN>, tensor<f32>
  return %q, %qt, %st : tensor<128x192xf8E4M3FN>, tensor<192x128xf8E4M3FN>, tensor<f32>
}

// Rows that are not a whole tile (2 here) keep the transpose a launch of its
// own, a thread per output element: no shared tile.
// CHECK-LABEL: gpu.func @qs_transpose({{[^)]*}}) kernel attributes
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

// A kernel that adds before it quantizes: a row kernel and a transpose
// launch.
func.func @scaled_transpose(%x: tensor<128x192xbf16>, %s: tensor<f32>) -> (tensor<128x192xf8E4M3FN>, tensor<192x128xf8E4M3FN>, tensor<f32>) {
  %q, %qt, %st = kernel.fused "sq" kind("elementwise") ins(%x, %s : tensor<128x192xbf16>, tensor<f32>) {
  ^bb0(%a: tensor<128x192xbf16>, %b: tensor<f32>):
    %y = graph.add %a, %a : tensor<128x192xbf16>
    %r, %amax = fp8.quantize %y, %b : (tensor<128x192xbf16>, tensor<f32>) -> (tensor<128x192xf8E4M3FN>, tensor<f32>)
    %t, %ts = fp8.transpose %r, %b : (tensor<128x192xf8E4M3FN>, tensor<f32>) -> (tensor<192x128xf8E4M3FN>, tensor<f32>)
    kernel.yield %r, %t, %ts : tensor<128x192xf8E4M3FN>, tensor<192x128xf8E4M3FN>, tensor<f32>
  } : tensor<128x192xf8E4M3FN>, tensor<192x128xf8E4M3FN>, tensor<f32>
  return %q, %qt, %st : tensor<128x192xf8E4M3FN>, tensor<192x128xf8E4M3FN>, tensor<f32>
}

// A quantize with an amax result, from f32 (the optimizer's FP8 weight
// copies are this kind).
func.func @quantize_amax_transpose(%x: tensor<64x128xf32>, %s: tensor<f32>) -> (tensor<64x128xf8E5M2>, tensor<f32>, tensor<128x64xf8E5M2>, tensor<f32>) {
  %q, %m, %qt, %st = kernel.fused "qa" kind("elementwise") ins(%x, %s : tensor<64x128xf32>, tensor<f32>) {
  ^bb0(%a: tensor<64x128xf32>, %b: tensor<f32>):
    %r, %amax = fp8.quantize %a, %b : (tensor<64x128xf32>, tensor<f32>) -> (tensor<64x128xf8E5M2>, tensor<f32>)
    %t, %ts = fp8.transpose %r, %b : (tensor<64x128xf8E5M2>, tensor<f32>) -> (tensor<128x64xf8E5M2>, tensor<f32>)
    kernel.yield %r, %amax, %t, %ts : tensor<64x128xf8E5M2>, tensor<f32>, tensor<128x64xf8E5M2>, tensor<f32>
  } : tensor<64x128xf8E5M2>, tensor<f32>, tensor<128x64xf8E5M2>, tensor<f32>
  return %q, %m, %qt, %st : tensor<64x128xf8E5M2>, tensor<f32>, tensor<128x64xf8E5M2>, tensor<f32>
}

// A weight's K-major cast (octet-step-local-fp8-weights): the f32 master
// quantized and transposed, the row-major FP8 tensor no result. The one
// launch reads the master's squares, casts them and writes the turned-over
// tiles alone: no row-major store.
// KMAJOR-LABEL: gpu.func @kc_transpose(
// KMAJOR-SAME: %[[KX:[a-z0-9]+]]: memref<8192xf32, 1>, %[[KS:[a-z0-9]+]]: memref<1xf32, 1>, %[[KT:[a-z0-9]+]]: memref<8192xf8E4M3FN, 1>)
// KMAJOR-COUNT-4: vector.load %[[KX]]{{.*}} : memref<8192xf32, 1>, vector<4xf32>
// KMAJOR-NOT: vector.store {{.*}}, %[[KX]]
// KMAJOR: arith.truncf {{.*}} : vector<4xf32> to vector<4xf8E4M3FN>
// KMAJOR-NOT: memref<8192xf8E4M3FN, 1>, vector<4xf8E4M3FN>
// KMAJOR: gpu.barrier
// KMAJOR-COUNT-4: vector.store {{.*}}, %[[KT]]{{.*}} {alignment = 4 : i64} : memref<8192xf8E4M3FN, 1>, vector<4xf8E4M3FN>
// KMAJOR: gpu.return
func.func @kmajor_cast(%x: tensor<64x128xf32>, %s: tensor<f32>) -> tensor<128x64xf8E4M3FN> {
  %qt = kernel.fused "kc" kind("elementwise") ins(%x, %s : tensor<64x128xf32>, tensor<f32>) {
  ^bb0(%a: tensor<64x128xf32>, %b: tensor<f32>):
    %r, %amax = fp8.quantize %a, %b : (tensor<64x128xf32>, tensor<f32>) -> (tensor<64x128xf8E4M3FN>, tensor<f32>)
    %t, %ts = fp8.transpose %r, %b : (tensor<64x128xf8E4M3FN>, tensor<f32>) -> (tensor<128x64xf8E4M3FN>, tensor<f32>)
    kernel.yield %t : tensor<128x64xf8E4M3FN>
  } : tensor<128x64xf8E4M3FN>
  return %qt : tensor<128x64xf8E4M3FN>
}

// RoPE backward of q and k, joined with v along the row, quantized and
// transposed (the wqkv input gradient): one launch of head-wide units.
func.func @rope_join_transpose(%k: tensor<1x128x1x128xbf16>, %pos: tensor<1x128xi32>, %q: tensor<1x128x2x128xbf16>, %v: tensor<128x128xbf16>, %s: tensor<f32>) -> (tensor<128x512xf8E5M2>, tensor<f32>, tensor<512x128xf8E5M2>, tensor<f32>) {
  %q8, %m, %qt, %st = kernel.fused "rj" kind("elementwise") ins(%k, %pos, %q, %v, %s : tensor<1x128x1x128xbf16>, tensor<1x128xi32>, tensor<1x128x2x128xbf16>, tensor<128x128xbf16>, tensor<f32>) {
  ^bb0(%a: tensor<1x128x1x128xbf16>, %p: tensor<1x128xi32>, %b: tensor<1x128x2x128xbf16>, %c: tensor<128x128xbf16>, %sc: tensor<f32>):
    %rk = graph.rope %a, %p {inverse, theta = 5.000000e+05 : f64} : (tensor<1x128x1x128xbf16>, tensor<1x128xi32>) -> tensor<1x128x1x128xbf16>
    %rq = graph.rope %b, %p {inverse, theta = 5.000000e+05 : f64} : (tensor<1x128x2x128xbf16>, tensor<1x128xi32>) -> tensor<1x128x2x128xbf16>
    %k1 = graph.reshape %rk : (tensor<1x128x1x128xbf16>) -> tensor<1x128x128xbf16>
    %k2 = graph.reshape %k1 : (tensor<1x128x128xbf16>) -> tensor<128x128xbf16>
    %q2 = graph.reshape %rq : (tensor<1x128x2x128xbf16>) -> tensor<128x256xbf16>
    %cat = graph.concat %q2, %k2, %c {dim = 1 : i64} : (tensor<128x256xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>) -> tensor<128x512xbf16>
    %r, %am = fp8.quantize %cat, %sc : (tensor<128x512xbf16>, tensor<f32>) -> (tensor<128x512xf8E5M2>, tensor<f32>)
    %t, %ts = fp8.transpose %r, %sc : (tensor<128x512xf8E5M2>, tensor<f32>) -> (tensor<512x128xf8E5M2>, tensor<f32>)
    kernel.yield %r, %am, %t, %ts : tensor<128x512xf8E5M2>, tensor<f32>, tensor<512x128xf8E5M2>, tensor<f32>
  } : tensor<128x512xf8E5M2>, tensor<f32>, tensor<512x128xf8E5M2>, tensor<f32>
  return %q8, %m, %qt, %st : tensor<128x512xf8E5M2>, tensor<f32>, tensor<512x128xf8E5M2>, tensor<f32>
}

// Heads of 64 (half a tile) are not units: the row kernel rotates them and
// the transpose is a launch of its own.
func.func @rope_join_small_heads(%q: tensor<1x64x2x64xbf16>, %pos: tensor<1x64xi32>, %v: tensor<64x128xbf16>, %s: tensor<f32>) -> (tensor<64x256xf8E5M2>, tensor<256x64xf8E5M2>, tensor<f32>) {
  %q8, %qt, %st = kernel.fused "rs" kind("elementwise") ins(%q, %pos, %v, %s : tensor<1x64x2x64xbf16>, tensor<1x64xi32>, tensor<64x128xbf16>, tensor<f32>) {
  ^bb0(%b: tensor<1x64x2x64xbf16>, %p: tensor<1x64xi32>, %c: tensor<64x128xbf16>, %sc: tensor<f32>):
    %rq = graph.rope %b, %p {inverse, theta = 1.000000e+04 : f64} : (tensor<1x64x2x64xbf16>, tensor<1x64xi32>) -> tensor<1x64x2x64xbf16>
    %q2 = graph.reshape %rq : (tensor<1x64x2x64xbf16>) -> tensor<64x128xbf16>
    %cat = graph.concat %q2, %c {dim = 1 : i64} : (tensor<64x128xbf16>, tensor<64x128xbf16>) -> tensor<64x256xbf16>
    %r, %am = fp8.quantize %cat, %sc : (tensor<64x256xbf16>, tensor<f32>) -> (tensor<64x256xf8E5M2>, tensor<f32>)
    %t, %ts = fp8.transpose %r, %sc : (tensor<64x256xf8E5M2>, tensor<f32>) -> (tensor<256x64xf8E5M2>, tensor<f32>)
    kernel.yield %r, %t, %ts : tensor<64x256xf8E5M2>, tensor<256x64xf8E5M2>, tensor<f32>
  } : tensor<64x256xf8E5M2>, tensor<256x64xf8E5M2>, tensor<f32>
  return %q8, %qt, %st : tensor<64x256xf8E5M2>, tensor<256x64xf8E5M2>, tensor<f32>
}

// A norm gradient whose FP8 input gradient is also transposed: the column
// sums of the weight gradient and the transpose share the launch after the
// row kernel (column sums' blocks first).
func.func @norm_grad_transpose(%dy: tensor<128x256xbf16>, %x: tensor<128x256xbf16>, %w: tensor<256xf32>, %s: tensor<f32>) -> (tensor<256xf32>, tensor<128x256xf8E5M2>, tensor<f32>, tensor<256x128xf8E5M2>, tensor<f32>) {
  %dw, %q, %m, %t, %ts = kernel.fused "ngt" kind("row") ins(%dy, %x, %w, %s : tensor<128x256xbf16>, tensor<128x256xbf16>, tensor<256xf32>, tensor<f32>) {
  ^bb0(%a: tensor<128x256xbf16>, %b: tensor<128x256xbf16>, %c: tensor<256xf32>, %sc: tensor<f32>):
    %dx, %g = graph.rms_norm_grad %a, %b, %c {eps = 1.000000e-05 : f64} : (tensor<128x256xbf16>, tensor<128x256xbf16>, tensor<256xf32>) -> (tensor<128x256xbf16>, tensor<256xf32>)
    %r, %am = fp8.quantize %dx, %sc : (tensor<128x256xbf16>, tensor<f32>) -> (tensor<128x256xf8E5M2>, tensor<f32>)
    %tr, %trs = fp8.transpose %r, %sc : (tensor<128x256xf8E5M2>, tensor<f32>) -> (tensor<256x128xf8E5M2>, tensor<f32>)
    kernel.yield %g, %r, %am, %tr, %trs : tensor<256xf32>, tensor<128x256xf8E5M2>, tensor<f32>, tensor<256x128xf8E5M2>, tensor<f32>
  } : tensor<256xf32>, tensor<128x256xf8E5M2>, tensor<f32>, tensor<256x128xf8E5M2>, tensor<f32>
  return %dw, %q, %m, %t, %ts : tensor<256xf32>, tensor<128x256xf8E5M2>, tensor<f32>, tensor<256x128xf8E5M2>, tensor<f32>
}

// SwiGLU's gradient, gate and up joined, quantized and transposed: a block
// per 64 x 64 tile of both results (read the three operands' squares once,
// compute both, write both tiles' rows and turn both over).
func.func @swiglu_grad_transpose(%dy: tensor<1x128x128xbf16>, %g: tensor<1x128x128xbf16>, %u: tensor<1x128x128xbf16>, %s: tensor<f32>) -> (tensor<128x256xf8E5M2>, tensor<f32>, tensor<256x128xf8E5M2>, tensor<f32>) {
  %q8, %m, %qt, %st = kernel.fused "sgt" kind("elementwise") ins(%dy, %g, %u, %s : tensor<1x128x128xbf16>, tensor<1x128x128xbf16>, tensor<1x128x128xbf16>, tensor<f32>) {
  ^bb0(%a: tensor<1x128x128xbf16>, %b: tensor<1x128x128xbf16>, %c: tensor<1x128x128xbf16>, %sc: tensor<f32>):
    %gg, %ug = graph.swiglu_grad %a, %b, %c : tensor<1x128x128xbf16>
    %u2 = graph.reshape %ug : (tensor<1x128x128xbf16>) -> tensor<128x128xbf16>
    %g2 = graph.reshape %gg : (tensor<1x128x128xbf16>) -> tensor<128x128xbf16>
    %cat = graph.concat %g2, %u2 {dim = 1 : i64} : (tensor<128x128xbf16>, tensor<128x128xbf16>) -> tensor<128x256xbf16>
    %r, %am = fp8.quantize %cat, %sc : (tensor<128x256xbf16>, tensor<f32>) -> (tensor<128x256xf8E5M2>, tensor<f32>)
    %t, %ts = fp8.transpose %r, %sc : (tensor<128x256xf8E5M2>, tensor<f32>) -> (tensor<256x128xf8E5M2>, tensor<f32>)
    kernel.yield %r, %am, %t, %ts : tensor<128x256xf8E5M2>, tensor<f32>, tensor<256x128xf8E5M2>, tensor<f32>
  } : tensor<128x256xf8E5M2>, tensor<f32>, tensor<256x128xf8E5M2>, tensor<f32>
  return %q8, %m, %qt, %st : tensor<128x256xf8E5M2>, tensor<f32>, tensor<256x128xf8E5M2>, tensor<f32>
}
