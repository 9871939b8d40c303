// RUN: %octet-opt %s --octet-fused-to-gpu | FileCheck %s
// RUN: %octet-opt %s --octet-fused-to-gpu | FileCheck %s --check-prefix=MORE
// RUN: %octet-opt %s --octet-fused-to-gpu | FileCheck %s --check-prefix=GRAD
// RUN: %octet-opt %s --octet-fused-to-gpu | FileCheck %s --check-prefix=NARROW
// RUN: %octet-opt %s --octet-fused-to-gpu="num-sms=1 row-blocks-per-sm=2" | FileCheck %s --check-prefix=PERSIST
// RUN: %octet-opt %s --octet-fused-to-gpu="num-sms=1" | FileCheck %s --check-prefix=MULTI
// RUN: %octet-opt %s --octet-fused-to-gpu="num-sms=1 multi-tensor-blocks-per-sm=0" | FileCheck %s --check-prefix=SLICES
// RUN: %octet-opt %s --octet-fused-to-gpu="num-sms=1" | FileCheck %s --check-prefix=ADAMW

// A row kernel: one block per row, 8-element vectors, a shuffle reduction,
// one atomic per block for the amax.
// CHECK: module attributes {gpu.container_module}
// CHECK-LABEL: func.func @forward
// CHECK: kernel.fused "attn norm" kind("row")
// CHECK: } {kernels = [@attn_norm::@attn_norm]
// CHECK-SAME: launch = [#kernel.launch<@attn_norm::@attn_norm, grid = 4, block = 32>]
// CHECK-SAME: workspace_bytes = 0
// CHECK-SAME: zero_results = array<i64: 1>
// Persistent row kernels: 2 blocks loop over the 4 rows, loading the next
// row (scf.if) before computing this one; the amax is carried.
// PERSIST-LABEL: func.func @forward
// PERSIST: launch = [#kernel.launch<@attn_norm::@attn_norm, grid = 2, block = 32>]
// PERSIST: gpu.func @attn_norm(
// PERSIST-SAME: nvvm.minctasm = 2
// PERSIST: scf.for
// PERSIST: scf.if
// PERSIST: vector.load
// PERSIST: gpu.barrier
// PERSIST: memref.atomic_rmw maxu
func.func @forward(%x: tensor<4x256xbf16>, %w: tensor<256xbf16>, %s: tensor<f32>) -> (tensor<4x256xf8E4M3FN>, tensor<f32>) {
  %q, %m = kernel.fused "attn norm" kind("row") ins(%x, %w, %s : tensor<4x256xbf16>, tensor<256xbf16>, tensor<f32>) {
  ^bb0(%a: tensor<4x256xbf16>, %b: tensor<256xbf16>, %c: tensor<f32>):
    %n = graph.rms_norm %a, %b {eps = 1.0e-5 : f64} : (tensor<4x256xbf16>, tensor<256xbf16>) -> tensor<4x256xbf16>
    %q8, %amax = fp8.quantize %n, %c : (tensor<4x256xbf16>, tensor<f32>) -> (tensor<4x256xf8E4M3FN>, tensor<f32>)
    kernel.yield %q8, %amax : tensor<4x256xf8E4M3FN>, tensor<f32>
  } : tensor<4x256xf8E4M3FN>, tensor<f32>
  return %q, %m : tensor<4x256xf8E4M3FN>, tensor<f32>
}

// Column sums (the weight gradient) go through per-block partial rows and a
// second kernel, launched as the row kernel's programmatic dependent.
// CHECK-LABEL: func.func @backward
// CHECK: } {kernels = [@norm_bwd::@norm_bwd, @norm_bwd::@norm_bwd_colsum]
// CHECK-SAME: launch = [#kernel.launch<@norm_bwd::@norm_bwd, grid = 4, block = 32>, #kernel.launch<@norm_bwd::@norm_bwd_colsum, grid = 8, block = 256, programmatic>]
// CHECK-SAME: workspace_bytes = 4096
func.func @backward(%dy: tensor<4x256xbf16>, %x: tensor<4x256xbf16>, %w: tensor<256xbf16>) -> (tensor<4x256xbf16>, tensor<256xf32>) {
  %dx, %dw = kernel.fused "norm_bwd" kind("row") ins(%dy, %x, %w : tensor<4x256xbf16>, tensor<4x256xbf16>, tensor<256xbf16>) {
  ^bb0(%a: tensor<4x256xbf16>, %b: tensor<4x256xbf16>, %c: tensor<256xbf16>):
    %g, %gw = graph.rms_norm_grad %a, %b, %c {eps = 1.0e-5 : f64} : (tensor<4x256xbf16>, tensor<4x256xbf16>, tensor<256xbf16>) -> (tensor<4x256xbf16>, tensor<256xf32>)
    kernel.yield %g, %gw : tensor<4x256xbf16>, tensor<256xf32>
  } : tensor<4x256xbf16>, tensor<256xf32>
  return %dx, %dw : tensor<4x256xbf16>, tensor<256xf32>
}


// A multi-tensor kernel: by default 2 blocks per multiprocessor loop over
// each large tensor's slices of 256 threads x 8 elements (a chunk each),
// prefetching the next; a tensor of one slice gets one block. The FP8
// cast's amax is carried through the loop: one atomic per block. The
// kernel takes the argument table: a block finds its tensor in the segment
// table (a binary search of the first blocks) and runs its class's code
// (the weight decay differs here, so two classes) with the record's sizes
// and argument table entries (class, blocks, rows, elements, entries).
// MULTI-LABEL: func.func @optimizer
// MULTI: {arg_table, kernels = [@adamw::@adamw], launch = [#kernel.launch<@adamw::@adamw, grid = 3, block = 256>]
// MULTI: memref.global "private" constant @segment_records : memref<28xi64> = dense<[0, 2, 8, 16384, 0, 1, 2, 3, 12, 13, 14, 4, 15, 16, 1, 1, 1, 256, 8, 9, 10, 11, 17, 18, 19, 0, 0, 0]>
// MULTI: memref.global "private" constant @segment_starts : memref<2xi64> = dense<[0, 2]>
// MULTI: gpu.func @adamw(%{{.*}}: memref<20xi64, 1>)
// MULTI-SAME: nvvm.minctasm = 2
// MULTI: scf.for {{.*}} -> (index, index)
// MULTI: scf.if
// MULTI: builtin.unrealized_conversion_cast {{.*}} to memref<?xf32, 1>
// MULTI: scf.for
// MULTI: memref.atomic_rmw maxu
// MULTI: scf.if
// MULTI: scf.for
// MULTI: gpu.return
// AdamW divides only once a thread: the step size lr / (1 - beta1^t) and
// 1 / sqrt(1 - beta2^t), each 1 - beta^t an expm1. An element takes a sqrt
// and an approximate reciprocal.
// ADAMW-LABEL: gpu.func @adamw(
// ADAMW: math.expm1
// ADAMW-NEXT: arith.negf
// ADAMW-NEXT: arith.divf {{.*}} : f32
// ADAMW: math.expm1
// ADAMW: math.sqrt {{.*}} : f32
// ADAMW: arith.divf {{.*}} : f32
// ADAMW-NOT: arith.divf
// ADAMW: math.sqrt {{.*}} : vector<8xf32>
// ADAMW-NOT: arith.divf
// ADAMW-COUNT-8: nvvm.rcp.approx.ftz.f
// ADAMW-NOT: arith.divf
// ADAMW: memref.atomic_rmw maxu
// With no looping, a block per slice of 2 chunks: 16384 / 4096 + 1; the
// only loop is the search.
// SLICES-LABEL: func.func @optimizer
// SLICES: launch = [#kernel.launch<@adamw::@adamw, grid = 5, block = 256>]
// SLICES: gpu.func @adamw(
// SLICES: scf.for {{.*}} -> (index, index)
// SLICES-NOT: scf.for
// SLICES: gpu.return
func.func @optimizer(%p: tensor<16x1024xf32>, %g: tensor<16x1024xf32>, %m: tensor<16x1024xf32>, %v: tensor<16x1024xf32>, %s: tensor<f32>, %lr: tensor<f32>, %step: tensor<i64>, %clip: tensor<f32>, %w: tensor<256xf32>, %wg: tensor<256xf32>, %wm: tensor<256xf32>, %wv: tensor<256xf32>) {
  %r:8 = kernel.fused "adamw" kind("multi_tensor") ins(%p, %g, %m, %v, %s, %lr, %step, %clip, %w, %wg, %wm, %wv : tensor<16x1024xf32>, tensor<16x1024xf32>, tensor<16x1024xf32>, tensor<16x1024xf32>, tensor<f32>, tensor<f32>, tensor<i64>, tensor<f32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>) {
  ^bb0(%a: tensor<16x1024xf32>, %b: tensor<16x1024xf32>, %c: tensor<16x1024xf32>, %d: tensor<16x1024xf32>, %e: tensor<f32>, %f: tensor<f32>, %h: tensor<i64>, %i: tensor<f32>, %j: tensor<256xf32>, %k: tensor<256xf32>, %l: tensor<256xf32>, %n: tensor<256xf32>):
    %np, %nm, %nv = graph.adamw_update %a, %b, %c, %d, %f, %h, %i {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64} : (tensor<16x1024xf32>, tensor<16x1024xf32>, tensor<16x1024xf32>, tensor<16x1024xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<16x1024xf32>, tensor<16x1024xf32>, tensor<16x1024xf32>)
    %q, %amax = fp8.quantize %np, %e : (tensor<16x1024xf32>, tensor<f32>) -> (tensor<16x1024xf8E4M3FN>, tensor<f32>)
    %wp, %wm2, %wv2 = graph.adamw_update %j, %k, %l, %n, %f, %h, %i {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>)
    kernel.yield %np, %nm, %nv, %q, %amax, %wp, %wm2, %wv2 : tensor<16x1024xf32>, tensor<16x1024xf32>, tensor<16x1024xf32>, tensor<16x1024xf8E4M3FN>, tensor<f32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>
  } : tensor<16x1024xf32>, tensor<16x1024xf32>, tensor<16x1024xf32>, tensor<16x1024xf8E4M3FN>, tensor<f32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>
  return
}

// A zero tensor that only graph.store reads is a memset of each variable
// (the bundle's clears): no kernel.
// CHECK-LABEL: func.func @clear
// CHECK: kernel.fused "zeros"
// CHECK-NOT: kernels =
// CHECK: graph.store
graph.variable @grad.w : tensor<8x1024xf32> {init = "zeros", kind = "state"}
func.func @clear() {
  %z = kernel.fused "zeros" kind("elementwise") {
    %f = graph.fill {value = 0.0 : f64} : tensor<8x1024xf32>
    kernel.yield %f : tensor<8x1024xf32>
  } : tensor<8x1024xf32>
  graph.store %z, @grad.w : tensor<8x1024xf32>
  return
}

// A kernel named like another symbol of the module gets its own name.
// CHECK-LABEL: func.func @clash
// CHECK: kernels = [@clash_2::@clash_2]
func.func @clash(%x: tensor<4x256xf32>) -> tensor<4x256xf32> {
  %y = kernel.fused "clash" kind("elementwise") ins(%x : tensor<4x256xf32>) {
  ^bb0(%a: tensor<4x256xf32>):
    %s = graph.silu %a : tensor<4x256xf32>
    kernel.yield %s : tensor<4x256xf32>
  } : tensor<4x256xf32>
  return %y : tensor<4x256xf32>
}

// CHECK: gpu.module @attn_norm
// CHECK: gpu.func @attn_norm(%{{.*}}: memref<1024xbf16, 1>, %{{.*}}: memref<256xbf16, 1>, %{{.*}}: memref<1xf32, 1>, %{{.*}}: memref<1024xf8E4M3FN, 1>, %{{.*}}: memref<1xi32, 1>) workgroup(%{{.*}} : memref<128xf32, 3> {llvm.align = 16 : i64}) kernel
// CHECK-SAME: known_block_size = array<i32: 32, 1, 1>
// CHECK: vector.load {{.*}} {alignment = 16 : i64} : memref<1024xbf16, 1>, vector<8xbf16>
// CHECK: gpu.shuffle xor
// CHECK: arith.truncf {{.*}} : vector<8xf32> to vector<8xf8E4M3FN>
// CHECK: vector.store {{.*}} {alignment = 8 : i64} : memref<1024xf8E4M3FN, 1>, vector<8xf8E4M3FN>
// CHECK: memref.atomic_rmw maxu
// The row kernel lets its dependent launch start at once; the column sums
// wait for the row kernel's results, then a warp loads 8 of its partial rows
// at once, adds them in order, then the rows left over one at a time.
// CHECK: gpu.module @norm_bwd
// CHECK: gpu.func @norm_bwd(
// CHECK-NEXT: "griddepcontrol.launch_dependents;"
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: gpu.func @norm_bwd_colsum(
// CHECK-NEXT: "griddepcontrol.wait;", "~{memory}"
// CHECK: scf.for
// CHECK-COUNT-8: memref.load
// CHECK-COUNT-8: arith.addf
// CHECK: scf.yield
// CHECK: scf.for
// CHECK: memref.load
// CHECK: arith.addf
// CHECK: scf.yield

// A trailing FP8 transpose runs as a second launch (a thread per output
// byte); the tensorwise scale passes through.
// MORE-LABEL: func.func @quantize_transpose
// MORE: launch = [#kernel.launch<@qt::@qt, grid = 1, block = {{[0-9]+}}>, #kernel.launch<@qt::@qt_transpose, grid = 3, block = 256, programmatic>]
func.func @quantize_transpose(%x: tensor<2x256xbf16>, %s: tensor<f32>) -> (tensor<2x256xf8E4M3FN>, tensor<256x2xf8E4M3FN>, tensor<f32>) {
  %q, %qt, %st = kernel.fused "qt" kind("elementwise") ins(%x, %s : tensor<2x256xbf16>, tensor<f32>) {
  ^bb0(%a: tensor<2x256xbf16>, %b: tensor<f32>):
    %r, %amax = fp8.quantize %a, %b : (tensor<2x256xbf16>, tensor<f32>) -> (tensor<2x256xf8E4M3FN>, tensor<f32>)
    %t, %ts = fp8.transpose %r, %b : (tensor<2x256xf8E4M3FN>, tensor<f32>) -> (tensor<256x2xf8E4M3FN>, tensor<f32>)
    kernel.yield %r, %t, %ts : tensor<2x256xf8E4M3FN>, tensor<256x2xf8E4M3FN>, tensor<f32>
  } : tensor<2x256xf8E4M3FN>, tensor<256x2xf8E4M3FN>, tensor<f32>
  return %q, %qt, %st : tensor<2x256xf8E4M3FN>, tensor<256x2xf8E4M3FN>, tensor<f32>
}

// Slices along the row pick whole chunks: the block narrows to 32 threads
// (a 256-element span) so that the offset 256 starts a chunk.
// MORE-LABEL: func.func @head_split
// MORE: launch = [#kernel.launch<@split::@split, grid = 4, block = 32>]
// Two launches of one region with the same body share one gpu.module.
// MORE: kernel.fused "split again"
// MORE: launch = [#kernel.launch<@split::@split, grid = 4, block = 32>]
func.func @head_split(%x: tensor<4x512xbf16>) -> (tensor<4x256xbf16>, tensor<4x256xbf16>) {
  %a = kernel.fused "split" kind("row") ins(%x : tensor<4x512xbf16>) {
  ^bb0(%in: tensor<4x512xbf16>):
    %s = graph.slice %in {dim = 1 : i64, offset = 256 : i64} : (tensor<4x512xbf16>) -> tensor<4x256xbf16>
    %y = graph.silu %s : tensor<4x256xbf16>
    kernel.yield %y : tensor<4x256xbf16>
  } : tensor<4x256xbf16>
  %b = kernel.fused "split again" kind("row") ins(%x : tensor<4x512xbf16>) {
  ^bb0(%in: tensor<4x512xbf16>):
    %s = graph.slice %in {dim = 1 : i64, offset = 256 : i64} : (tensor<4x512xbf16>) -> tensor<4x256xbf16>
    %y = graph.silu %s : tensor<4x256xbf16>
    kernel.yield %y : tensor<4x256xbf16>
  } : tensor<4x256xbf16>
  return %a, %b : tensor<4x256xbf16>, tensor<4x256xbf16>
}

// Pieces at 128 elements (64-wide heads) are below the 8-element layout's
// smallest span (32 threads x 8): the kernel takes 4-element accesses.
// NARROW-LABEL: func.func @narrow_join
// NARROW: launch = [#kernel.launch<@join::@join, grid = 4, block = 32>]
// NARROW: gpu.func @join(
// NARROW: vector.load {{.*}} : memref<512xf32, 1>, vector<4xf32>
// NARROW: vector.store {{.*}} : memref<1024xf32, 1>, vector<4xf32>
func.func @narrow_join(%k: tensor<4x128xf32>, %v: tensor<4x128xf32>) -> tensor<4x256xf32> {
  %y = kernel.fused "join" kind("row") ins(%k, %v : tensor<4x128xf32>, tensor<4x128xf32>) {
  ^bb0(%a: tensor<4x128xf32>, %b: tensor<4x128xf32>):
    %c = graph.concat %a, %b {dim = 1 : i64} : (tensor<4x128xf32>, tensor<4x128xf32>) -> tensor<4x256xf32>
    %s = graph.silu %c : tensor<4x256xf32>
    kernel.yield %s : tensor<4x256xf32>
  } : tensor<4x256xf32>
  return %y : tensor<4x256xf32>
}

// Cross-entropy: a block of 1024 threads per token reads the vocabulary row
// once, in 16-byte pieces (4 f32, 4 a thread per loop step), for its max and
// sum of exponentials together (a masked token's row is not read: scf.if),
// into per-token partials; then one block adds them in order (8 + 8 floats
// of workspace).
// MORE-LABEL: func.func @loss
// MORE: launch = [#kernel.launch<@ce::@ce_0_rows, grid = 8, block = 1024>, #kernel.launch<@ce::@ce_0, grid = 1, block = 256>]
// MORE-SAME: workspace_bytes = 64
// MORE: gpu.module @ce
// MORE: gpu.func @ce_0_rows
// MORE: scf.if
// MORE: scf.for
// MORE-COUNT-4: vector.load {{.*}} : memref<8192xf32, 1>, vector<4xf32>
// MORE: ex2.approx.ftz.f32
// MORE: gpu.barrier
// MORE-NOT: vector.load
// MORE: math.log
// MORE-NOT: vector.load
// MORE: gpu.func @ce_0(
func.func @loss(%z: tensor<8x1024xf32>, %l: tensor<8xi32>, %m: tensor<8xf32>) -> tensor<f32> {
  %y = kernel.fused "ce" kind("row") ins(%z, %l, %m : tensor<8x1024xf32>, tensor<8xi32>, tensor<8xf32>) {
  ^bb0(%a: tensor<8x1024xf32>, %b: tensor<8xi32>, %c: tensor<8xf32>):
    %loss = graph.cross_entropy %a, %b, %c : (tensor<8x1024xf32>, tensor<8xi32>, tensor<8xf32>) -> tensor<f32>
    kernel.yield %loss : tensor<f32>
  } : tensor<f32>
  return %y : tensor<f32>
}

// A chunk of a batch (`over` the batch's mask, octet-chunk-lm-head): the
// second kernel sums the chunk's partials (8) but divides by the sum of the
// batch's 24 mask values.
// MORE: gpu.func @cec_0(
// MORE-SAME: %[[BATCH:[a-z0-9]+]]: memref<24xf32, 1>, %{{[a-z0-9]+}}: memref<1xf32, 1>, %[[WS:[a-z0-9]+]]: memref<16xf32, 1>)
// MORE: scf.for %{{.*}} = %{{.*}} to %c8
// MORE: memref.load %[[WS]]
// MORE: scf.for %{{.*}} = %{{.*}} to %c24
// MORE-NEXT: memref.load %[[BATCH]]
func.func @chunk_loss(%z: tensor<8x1024xf32>, %l: tensor<8xi32>, %m: tensor<8xf32>, %batch: tensor<24xf32>) -> tensor<f32> {
  %y = kernel.fused "cec" kind("row") ins(%z, %l, %m, %batch : tensor<8x1024xf32>, tensor<8xi32>, tensor<8xf32>, tensor<24xf32>) {
  ^bb0(%a: tensor<8x1024xf32>, %b: tensor<8xi32>, %c: tensor<8xf32>, %d: tensor<24xf32>):
    %loss = graph.cross_entropy %a, %b, %c over %d : (tensor<8x1024xf32>, tensor<8xi32>, tensor<8xf32>, tensor<24xf32>) -> tensor<f32>
    kernel.yield %loss : tensor<f32>
  } : tensor<f32>
  return %y : tensor<f32>
}

// The gradient, written over the logits: one read of the row for its max
// and sum of exponentials, then one read and write of the row (16-byte
// pieces of 8 bf16; the vocabulary, 1001, is no multiple of 8, so each row's
// elements before its first 16-byte boundary and after its last piece go one
// at a time); a masked token's row is only written (zeros).
// GRAD-LABEL: func.func @loss_grad
// GRAD: launch = [#kernel.launch<@ceg::@ceg_0_count, grid = 1, block = 256>, #kernel.launch<@ceg::@ceg_0, grid = 8, block = 1024>]
// GRAD-SAME: overwrites = array<i64: 1>
// GRAD: gpu.func @ceg_0(
// GRAD: scf.if
// GRAD: scf.for
// GRAD-COUNT-4: vector.load {{.*}} : memref<8008xbf16, 1>, vector<8xbf16>
// GRAD-NOT: vector.store
// GRAD: gpu.barrier
// GRAD-NOT: vector.load
// GRAD: math.log
// GRAD: scf.for
// GRAD-COUNT-4: vector.load {{.*}} : memref<8008xbf16, 1>, vector<8xbf16>
// GRAD-NOT: vector.load
// GRAD-COUNT-4: vector.store {{.*}} : memref<8008xbf16, 1>, vector<8xbf16>
// GRAD-NOT: vector.load
// GRAD: memref.store {{.*}} : memref<8008xbf16, 1>
// GRAD: } else {
// GRAD-NOT: vector.load
// GRAD: scf.for
// GRAD-NOT: vector.load
// GRAD-COUNT-4: vector.store {{.*}} : memref<8008xbf16, 1>, vector<8xbf16>
// GRAD-NOT: vector.load
// GRAD: gpu.return
func.func @loss_grad(%d: tensor<f32>, %z: tensor<8x1001xbf16>, %l: tensor<8xi32>, %m: tensor<8xf32>) -> tensor<8x1001xbf16> {
  %y = kernel.fused "ceg" kind("row") ins(%d, %z, %l, %m : tensor<f32>, tensor<8x1001xbf16>, tensor<8xi32>, tensor<8xf32>) {
  ^bb0(%a: tensor<f32>, %b: tensor<8x1001xbf16>, %c: tensor<8xi32>, %e: tensor<8xf32>):
    %g = graph.cross_entropy_grad %a, %b, %c, %e : (tensor<f32>, tensor<8x1001xbf16>, tensor<8xi32>, tensor<8xf32>) -> tensor<8x1001xbf16>
    kernel.yield %g : tensor<8x1001xbf16>
  } {overwrites = array<i64: 1>} : tensor<8x1001xbf16>
  return %y : tensor<8x1001xbf16>
}
