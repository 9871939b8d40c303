// RUN: %octet-opt %s --octet-fused-to-gpu -split-input-file -verify-diagnostics

func.func @no_lowering(%x: tensor<4x256xf32>, %w: tensor<256x256xf32>) -> tensor<4x256xf32> {
  %y = kernel.fused "mm" kind("row") ins(%x, %w : tensor<4x256xf32>, tensor<256x256xf32>) {
  ^bb0(%a: tensor<4x256xf32>, %b: tensor<256x256xf32>):
    // expected-error @below {{has no GPU lowering in octet-fused-to-gpu}}
    %m = graph.matmul %a, %b : (tensor<4x256xf32>, tensor<256x256xf32>) -> tensor<4x256xf32>
    kernel.yield %m : tensor<4x256xf32>
  } : tensor<4x256xf32>
  return %y : tensor<4x256xf32>
}

// -----

func.func @ragged(%x: tensor<2x25xf32>) -> tensor<2x25xf32> {
  // expected-error @below {{has a row, piece or tensor length with a common divisor of 50; GPU codegen needs a multiple of 4 elements}}
  %y = kernel.fused "odd" kind("elementwise") ins(%x : tensor<2x25xf32>) {
  ^bb0(%a: tensor<2x25xf32>):
    %s = graph.silu %a : tensor<2x25xf32>
    kernel.yield %s : tensor<2x25xf32>
  } : tensor<2x25xf32>
  return %y : tensor<2x25xf32>
}

// -----

func.func @long_row(%x: tensor<2x200000xf32>, %w: tensor<200000xf32>) -> tensor<2x200000xf32> {
  %y = kernel.fused "long" kind("row") ins(%x, %w : tensor<2x200000xf32>, tensor<200000xf32>) {
  ^bb0(%a: tensor<2x200000xf32>, %b: tensor<200000xf32>):
    // expected-error @below {{row of 200000 elements is too long for a register-resident row kernel}}
    %n = graph.rms_norm %a, %b {eps = 1.0e-5 : f64} : (tensor<2x200000xf32>, tensor<200000xf32>) -> tensor<2x200000xf32>
    kernel.yield %n : tensor<2x200000xf32>
  } : tensor<2x200000xf32>
  return %y : tensor<2x200000xf32>
}

// -----

// The global norm's kernel looks its tensors up in an argument table of the
// region's buffers: it takes a region of its own.
func.func @norm_not_alone(%g: tensor<1024xf32>) -> (tensor<f32>, tensor<f32>) {
  %n:2 = kernel.fused "norm_clip" kind("elementwise") ins(%g : tensor<1024xf32>) {
  ^bb0(%a: tensor<1024xf32>):
    // expected-error @below {{must be the only op of its kernel.fused region: its kernel reads the tensors through an argument table}}
    %r = graph.global_norm %a : (tensor<1024xf32>) -> tensor<f32>
    %c = graph.clip_scale %r {max_norm = 1.000000e+00 : f64} : tensor<f32>
    kernel.yield %r, %c : tensor<f32>, tensor<f32>
  } : tensor<f32>, tensor<f32>
  return %n#0, %n#1 : tensor<f32>, tensor<f32>
}

// -----

// A block-quantized tensor computed in the kernel by an op the tile kernel
// does not evaluate.
func.func @tiles_of_silu(%x: tensor<128x128xbf16>) -> (tensor<128x128xf8E4M3FN>, tensor<128x1xf32>) {
  %q:2 = kernel.fused "silu_tiles" kind("elementwise") ins(%x : tensor<128x128xbf16>) {
  ^bb0(%a: tensor<128x128xbf16>):
    // expected-error @below {{computes a block-quantized tensor in the kernel; the tile kernel evaluates only SwiGLU, its gradient, an RMSNorm of a tensor in memory after the row kernel that kept its rows' 1/rms, reshapes that keep the last dimension and joins of pieces 128 wide}}
    %s = graph.silu %a : tensor<128x128xbf16>
    %r, %rs = fp8.block_quantize %s {block = array<i64: 1, 128>, dtype = f8E4M3FN} : (tensor<128x128xbf16>) -> (tensor<128x128xf8E4M3FN>, tensor<128x1xf32>)
    kernel.yield %r, %rs : tensor<128x128xf8E4M3FN>, tensor<128x1xf32>
  } : tensor<128x128xf8E4M3FN>, tensor<128x1xf32>
  return %q#0, %q#1 : tensor<128x128xf8E4M3FN>, tensor<128x1xf32>
}

// -----

// An RMSNorm whose input is computed in the kernel and not stored: the tile
// kernel after the row kernel would have nothing to evaluate it from.
func.func @norm_of_unstored(%x: tensor<128x128xbf16>, %r: tensor<128x128xbf16>, %w: tensor<128xf32>) -> (tensor<128x128xf8E4M3FN>, tensor<128x1xf32>) {
  %q:2 = kernel.fused "norm_tiles" kind("row") ins(%x, %r, %w : tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<128xf32>) {
  ^bb0(%a: tensor<128x128xbf16>, %b: tensor<128x128xbf16>, %c: tensor<128xf32>):
    %h = graph.add %a, %b : tensor<128x128xbf16>
    // expected-error @below {{computes a block-quantized tensor in the kernel}}
    %y = graph.rms_norm %h, %c {eps = 1.0e-5 : f64} : (tensor<128x128xbf16>, tensor<128xf32>) -> tensor<128x128xbf16>
    %r1, %rs = fp8.block_quantize %y {block = array<i64: 1, 128>, dtype = f8E4M3FN} : (tensor<128x128xbf16>) -> (tensor<128x128xf8E4M3FN>, tensor<128x1xf32>)
    kernel.yield %r1, %rs : tensor<128x128xf8E4M3FN>, tensor<128x1xf32>
  } : tensor<128x128xf8E4M3FN>, tensor<128x1xf32>
  return %q#0, %q#1 : tensor<128x128xf8E4M3FN>, tensor<128x1xf32>
}

// -----

// A computed tensor with a partial tile: only the 128 x 128 tile kernel
// evaluates what it quantizes.
func.func @partial_tiles(%g: tensor<64x128xbf16>, %u: tensor<64x128xbf16>) -> (tensor<64x128xf8E4M3FN>, tensor<64x1xf32>) {
  %q:2 = kernel.fused "swiglu_partial" kind("elementwise") ins(%g, %u : tensor<64x128xbf16>, tensor<64x128xbf16>) {
  ^bb0(%a: tensor<64x128xbf16>, %b: tensor<64x128xbf16>):
    %s = graph.swiglu %a, %b : tensor<64x128xbf16>
    // expected-error @below {{quantizes a tensor computed in the kernel, which needs the 128 x 128 tile kernel}}
    %r, %rs = fp8.block_quantize %s {block = array<i64: 1, 128>, dtype = f8E4M3FN} : (tensor<64x128xbf16>) -> (tensor<64x128xf8E4M3FN>, tensor<64x1xf32>)
    kernel.yield %r, %rs : tensor<64x128xf8E4M3FN>, tensor<64x1xf32>
  } : tensor<64x128xf8E4M3FN>, tensor<64x1xf32>
  return %q#0, %q#1 : tensor<64x128xf8E4M3FN>, tensor<64x1xf32>
}

// -----

// An FP8 LM head's gradient kernel writes the cast gradient itself: a cast
// whose FP8 tensor is not a kernel result (only its transpose is) has no
// lowering.
func.func @ce_grad_fp8_unstored(%g: tensor<f32>, %z: tensor<8x1024xbf16>, %l: tensor<8xi32>, %m: tensor<8xf32>, %s: tensor<f32>) -> tensor<1024x8xf8E5M2> {
  %r = kernel.fused "cross_entropy_grad" kind("row") ins(%g, %z, %l, %m, %s : tensor<f32>, tensor<8x1024xbf16>, tensor<8xi32>, tensor<8xf32>, tensor<f32>) {
  ^bb0(%a: tensor<f32>, %b: tensor<8x1024xbf16>, %c: tensor<8xi32>, %d: tensor<8xf32>, %e: tensor<f32>):
    // expected-error @below {{is cast to FP8, but the FP8 tensor is not a kernel result}}
    %dz = graph.cross_entropy_grad %a, %b, %c, %d : (tensor<f32>, tensor<8x1024xbf16>, tensor<8xi32>, tensor<8xf32>) -> tensor<8x1024xbf16>
    %q, %amax = fp8.quantize %dz, %e : (tensor<8x1024xbf16>, tensor<f32>) -> (tensor<8x1024xf8E5M2>, tensor<f32>)
    %qt, %st = fp8.transpose %q, %e : (tensor<8x1024xf8E5M2>, tensor<f32>) -> (tensor<1024x8xf8E5M2>, tensor<f32>)
    kernel.yield %qt : tensor<1024x8xf8E5M2>
  } : tensor<1024x8xf8E5M2>
  return %r : tensor<1024x8xf8E5M2>
}

// -----

// A K-major cast whose row-major FP8 tensor is no result, of a shape the
// quantizing transpose launch does not take (not whole 64 x 64 tiles):
// nothing would write the bytes a transpose launch reads, so the
// transpose has no lowering.
func.func @kmajor_cast_partial_tiles(%x: tensor<48x32xf32>, %s: tensor<f32>) -> tensor<32x48xf8E4M3FN> {
  %qt = kernel.fused "kc" kind("elementwise") ins(%x, %s : tensor<48x32xf32>, tensor<f32>) {
  ^bb0(%a: tensor<48x32xf32>, %b: tensor<f32>):
    %r, %amax = fp8.quantize %a, %b : (tensor<48x32xf32>, tensor<f32>) -> (tensor<48x32xf8E4M3FN>, tensor<f32>)
    // expected-error @below {{has no GPU lowering in octet-fused-to-gpu}}
    %t, %ts = fp8.transpose %r, %b : (tensor<48x32xf8E4M3FN>, tensor<f32>) -> (tensor<32x48xf8E4M3FN>, tensor<f32>)
    kernel.yield %t : tensor<32x48xf8E4M3FN>
  } : tensor<32x48xf8E4M3FN>
  return %qt : tensor<32x48xf8E4M3FN>
}
