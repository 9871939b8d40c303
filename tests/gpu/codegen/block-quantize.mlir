// Blockwise FP8 quantization kernels (WholeOpKernel.cpp). Sides that are
// multiples of 128 take the 128 x 128-tile kernel: 1x128 tiles of a BF16
// activation (E4M3, power-of-two scales), 128x1 tiles of an f32 gradient
// written K-major only with its transposed scales (the wgrad operand: the
// fp8.transpose in the same launch), 128x1 tiles of BF16 in both layouts,
// 128x128 blocks of an f32 weight with the K-major copy (as the train step
// quantizes its weights) and of BF16 without, and a gradient's 1x128 and
// 128x1 quantizations from one read. Shapes that are not multiples of 128
// take the block-per-tile kernel and give partial last tiles (the kernels
// guard them; the compiler keeps such GEMMs in BF16, but the quantize op is
// defined for them). Tiles that compute their input from the kernel's
// (octet-fuse-swiglu-quantize): SwiGLU's gradient joined as [d_gate, d_up]
// in both tile shapes and layouts, and SwiGLU in 128x1 tiles written
// K-major, as the backward's wgrad operands are made. RMSNorm's output
// quantized after its row kernel (octet-fuse-norm-quantize): the residual
// add + norm with an f32 weight in both tile shapes and layouts, and a norm
// of a kernel input with a BF16 weight in 1x128 tiles; the tile kernel
// evaluates the norm from the stored input and the row kernel's 1/rms.
func.func @block_quantize(%x: tensor<256x384xbf16>, %dy: tensor<384x200xf32>, %g: tensor<300x256xf32>, %w: tensor<384x300xf32>, %dya: tensor<384x256xf32>, %xa: tensor<256x384xbf16>, %wa: tensor<256x384xf32>, %sdy: tensor<1x256x256xbf16>, %sg: tensor<1x256x256xbf16>, %su: tensor<1x256x256xbf16>, %nw: tensor<384xf32>, %nwb: tensor<256xbf16>) {
  %norm:5 = kernel.fused "add_rms_norm_tiles" kind("row") ins(%xa, %x, %nw : tensor<256x384xbf16>, tensor<256x384xbf16>, tensor<384xf32>) {
  ^bb0(%a: tensor<256x384xbf16>, %b: tensor<256x384xbf16>, %c: tensor<384xf32>):
    %h = graph.add %a, %b : tensor<256x384xbf16>
    %y = graph.rms_norm %h, %c {eps = 1.0e-5 : f64} : (tensor<256x384xbf16>, tensor<384xf32>) -> tensor<256x384xbf16>
    %q, %s = fp8.block_quantize %y {block = array<i64: 128, 1>, dtype = f8E4M3FN, power_of_two} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<2x384xf32>)
    %qt, %st = fp8.transpose %q, %s {block = array<i64: 128, 1>} : (tensor<256x384xf8E4M3FN>, tensor<2x384xf32>) -> (tensor<384x256xf8E4M3FN>, tensor<384x2xf32>)
    %r, %rs = fp8.block_quantize %y {block = array<i64: 1, 128>, dtype = f8E4M3FN, power_of_two} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<256x3xf32>)
    kernel.yield %h, %qt, %st, %r, %rs : tensor<256x384xbf16>, tensor<384x256xf8E4M3FN>, tensor<384x2xf32>, tensor<256x384xf8E4M3FN>, tensor<256x3xf32>
  } : tensor<256x384xbf16>, tensor<384x256xf8E4M3FN>, tensor<384x2xf32>, tensor<256x384xf8E4M3FN>, tensor<256x3xf32>
  %norm_input:2 = kernel.fused "rms_norm_input_tiles_1x128" kind("row") ins(%sdy, %nwb : tensor<1x256x256xbf16>, tensor<256xbf16>) {
  ^bb0(%a: tensor<1x256x256xbf16>, %c: tensor<256xbf16>):
    %y = graph.rms_norm %a, %c {eps = 1.0e-5 : f64} : (tensor<1x256x256xbf16>, tensor<256xbf16>) -> tensor<1x256x256xbf16>
    %y2 = graph.reshape %y : (tensor<1x256x256xbf16>) -> tensor<256x256xbf16>
    %r, %rs = fp8.block_quantize %y2 {block = array<i64: 1, 128>, dtype = f8E4M3FN} : (tensor<256x256xbf16>) -> (tensor<256x256xf8E4M3FN>, tensor<256x2xf32>)
    kernel.yield %r, %rs : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  } : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  %swiglu_grad:4 = kernel.fused "swiglu_grad_join_tiles" kind("elementwise") ins(%sdy, %sg, %su : tensor<1x256x256xbf16>, tensor<1x256x256xbf16>, tensor<1x256x256xbf16>) {
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
  %swiglu:2 = kernel.fused "swiglu_tiles_128x1_transposed" kind("elementwise") ins(%sg, %su : tensor<1x256x256xbf16>, tensor<1x256x256xbf16>) {
  ^bb0(%b: tensor<1x256x256xbf16>, %c: tensor<1x256x256xbf16>):
    %y = graph.swiglu %b, %c : tensor<1x256x256xbf16>
    %y2 = graph.reshape %y : (tensor<1x256x256xbf16>) -> tensor<256x256xbf16>
    %q, %s = fp8.block_quantize %y2 {block = array<i64: 128, 1>, dtype = f8E4M3FN, power_of_two} : (tensor<256x256xbf16>) -> (tensor<256x256xf8E4M3FN>, tensor<2x256xf32>)
    %qt, %st = fp8.transpose %q, %s {block = array<i64: 128, 1>} : (tensor<256x256xf8E4M3FN>, tensor<2x256xf32>) -> (tensor<256x256xf8E4M3FN>, tensor<256x2xf32>)
    kernel.yield %qt, %st : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  } : tensor<256x256xf8E4M3FN>, tensor<256x2xf32>
  %kmajor_tiles:2 = kernel.fused "tiles_128x1_transposed_aligned" kind("elementwise") ins(%dya : tensor<384x256xf32>) {
  ^bb0(%a: tensor<384x256xf32>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 1>, dtype = f8E5M2} : (tensor<384x256xf32>) -> (tensor<384x256xf8E5M2>, tensor<3x256xf32>)
    %qt, %st = fp8.transpose %q, %s {block = array<i64: 128, 1>} : (tensor<384x256xf8E5M2>, tensor<3x256xf32>) -> (tensor<256x384xf8E5M2>, tensor<256x3xf32>)
    kernel.yield %qt, %st : tensor<256x384xf8E5M2>, tensor<256x3xf32>
  } : tensor<256x384xf8E5M2>, tensor<256x3xf32>
  %both_tiles:4 = kernel.fused "tiles_128x1_both_layouts_aligned" kind("elementwise") ins(%xa : tensor<256x384xbf16>) {
  ^bb0(%a: tensor<256x384xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 1>, dtype = f8E4M3FN, power_of_two} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<2x384xf32>)
    %qt, %st = fp8.transpose %q, %s {block = array<i64: 128, 1>} : (tensor<256x384xf8E4M3FN>, tensor<2x384xf32>) -> (tensor<384x256xf8E4M3FN>, tensor<384x2xf32>)
    kernel.yield %q, %s, %qt, %st : tensor<256x384xf8E4M3FN>, tensor<2x384xf32>, tensor<384x256xf8E4M3FN>, tensor<384x2xf32>
  } : tensor<256x384xf8E4M3FN>, tensor<2x384xf32>, tensor<384x256xf8E4M3FN>, tensor<384x2xf32>
  %weight_blocks:4 = kernel.fused "blocks_128x128_transposed" kind("elementwise") ins(%wa : tensor<256x384xf32>) {
  ^bb0(%a: tensor<256x384xf32>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 128>, dtype = f8E4M3FN, power_of_two} : (tensor<256x384xf32>) -> (tensor<256x384xf8E4M3FN>, tensor<2x3xf32>)
    %qt, %st = fp8.transpose %q, %s {block = array<i64: 128, 128>} : (tensor<256x384xf8E4M3FN>, tensor<2x3xf32>) -> (tensor<384x256xf8E4M3FN>, tensor<3x2xf32>)
    kernel.yield %q, %s, %qt, %st : tensor<256x384xf8E4M3FN>, tensor<2x3xf32>, tensor<384x256xf8E4M3FN>, tensor<3x2xf32>
  } : tensor<256x384xf8E4M3FN>, tensor<2x3xf32>, tensor<384x256xf8E4M3FN>, tensor<3x2xf32>
  %bf16_blocks:2 = kernel.fused "blocks_128x128_bf16" kind("elementwise") ins(%xa : tensor<256x384xbf16>) {
  ^bb0(%a: tensor<256x384xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 128>, dtype = f8E4M3FN} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<2x3xf32>)
    kernel.yield %q, %s : tensor<256x384xf8E4M3FN>, tensor<2x3xf32>
  } : tensor<256x384xf8E4M3FN>, tensor<2x3xf32>
  %dual:4 = kernel.fused "tiles_1x128_and_128x1" kind("elementwise") ins(%xa : tensor<256x384xbf16>) {
  ^bb0(%a: tensor<256x384xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 1>, dtype = f8E4M3FN, power_of_two} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<2x384xf32>)
    %qt, %st = fp8.transpose %q, %s {block = array<i64: 128, 1>} : (tensor<256x384xf8E4M3FN>, tensor<2x384xf32>) -> (tensor<384x256xf8E4M3FN>, tensor<384x2xf32>)
    %r, %rs = fp8.block_quantize %a {block = array<i64: 1, 128>, dtype = f8E4M3FN, power_of_two} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<256x3xf32>)
    kernel.yield %qt, %st, %r, %rs : tensor<384x256xf8E4M3FN>, tensor<384x2xf32>, tensor<256x384xf8E4M3FN>, tensor<256x3xf32>
  } : tensor<384x256xf8E4M3FN>, tensor<384x2xf32>, tensor<256x384xf8E4M3FN>, tensor<256x3xf32>
  %tiles:2 = kernel.fused "tiles_1x128" kind("elementwise") ins(%x : tensor<256x384xbf16>) {
  ^bb0(%a: tensor<256x384xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 1, 128>, dtype = f8E4M3FN, power_of_two} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<256x3xf32>)
    kernel.yield %q, %s : tensor<256x384xf8E4M3FN>, tensor<256x3xf32>
  } : tensor<256x384xf8E4M3FN>, tensor<256x3xf32>
  %kmajor:2 = kernel.fused "tiles_128x1_transposed" kind("elementwise") ins(%dy : tensor<384x200xf32>) {
  ^bb0(%a: tensor<384x200xf32>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 1>, dtype = f8E5M2} : (tensor<384x200xf32>) -> (tensor<384x200xf8E5M2>, tensor<3x200xf32>)
    %qt, %st = fp8.transpose %q, %s {block = array<i64: 128, 1>} : (tensor<384x200xf8E5M2>, tensor<3x200xf32>) -> (tensor<200x384xf8E5M2>, tensor<200x3xf32>)
    kernel.yield %qt, %st : tensor<200x384xf8E5M2>, tensor<200x3xf32>
  } : tensor<200x384xf8E5M2>, tensor<200x3xf32>
  %both:4 = kernel.fused "tiles_128x1_both_layouts" kind("elementwise") ins(%g : tensor<300x256xf32>) {
  ^bb0(%a: tensor<300x256xf32>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 1>, dtype = f8E4M3FN, power_of_two} : (tensor<300x256xf32>) -> (tensor<300x256xf8E4M3FN>, tensor<3x256xf32>)
    %qt, %st = fp8.transpose %q, %s {block = array<i64: 128, 1>} : (tensor<300x256xf8E4M3FN>, tensor<3x256xf32>) -> (tensor<256x300xf8E4M3FN>, tensor<256x3xf32>)
    kernel.yield %q, %s, %qt, %st : tensor<300x256xf8E4M3FN>, tensor<3x256xf32>, tensor<256x300xf8E4M3FN>, tensor<256x3xf32>
  } : tensor<300x256xf8E4M3FN>, tensor<3x256xf32>, tensor<256x300xf8E4M3FN>, tensor<256x3xf32>
  %blocks:2 = kernel.fused "blocks_128x128" kind("elementwise") ins(%w : tensor<384x300xf32>) {
  ^bb0(%a: tensor<384x300xf32>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 128>, dtype = f8E4M3FN} : (tensor<384x300xf32>) -> (tensor<384x300xf8E4M3FN>, tensor<3x3xf32>)
    kernel.yield %q, %s : tensor<384x300xf8E4M3FN>, tensor<3x3xf32>
  } : tensor<384x300xf8E4M3FN>, tensor<3x3xf32>
  // The GEMM's dequantization factors written with the scales
  // (octet-fuse-block-factors): 1x128 tiles in cuBLASLt's VEC128 layout
  // with no scales kept, 128x128 blocks in BLK128x128 (a row of 3 blocks
  // padded to 4) beside their K-major copy's, the transposed 128x1 tiles'
  // factors, in the tile kernel, in the block-per-tile kernel, and after a
  // norm's row kernel.
  %tiles_factors:2 = kernel.fused "tiles_1x128_factors" kind("elementwise") ins(%x : tensor<256x384xbf16>) {
  ^bb0(%a: tensor<256x384xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 1, 128>, dtype = f8E4M3FN, power_of_two} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<256x3xf32>)
    %f = fp8.block_factors %s {block = array<i64: 1, 128>} : (tensor<256x3xf32>) -> tensor<768xf32>
    kernel.yield %q, %f : tensor<256x384xf8E4M3FN>, tensor<768xf32>
  } : tensor<256x384xf8E4M3FN>, tensor<768xf32>
  %weight_factors:4 = kernel.fused "blocks_128x128_transposed_factors" kind("elementwise") ins(%wa : tensor<256x384xf32>) {
  ^bb0(%a: tensor<256x384xf32>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 128>, dtype = f8E4M3FN} : (tensor<256x384xf32>) -> (tensor<256x384xf8E4M3FN>, tensor<2x3xf32>)
    %qt, %st = fp8.transpose %q, %s {block = array<i64: 128, 128>} : (tensor<256x384xf8E4M3FN>, tensor<2x3xf32>) -> (tensor<384x256xf8E4M3FN>, tensor<3x2xf32>)
    %f = fp8.block_factors %s {block = array<i64: 128, 128>} : (tensor<2x3xf32>) -> tensor<8xf32>
    %ft = fp8.block_factors %st {block = array<i64: 128, 128>} : (tensor<3x2xf32>) -> tensor<12xf32>
    kernel.yield %q, %f, %qt, %ft : tensor<256x384xf8E4M3FN>, tensor<8xf32>, tensor<384x256xf8E4M3FN>, tensor<12xf32>
  } : tensor<256x384xf8E4M3FN>, tensor<8xf32>, tensor<384x256xf8E4M3FN>, tensor<12xf32>
  %dual_factors:5 = kernel.fused "tiles_1x128_and_128x1_factors" kind("elementwise") ins(%xa : tensor<256x384xbf16>) {
  ^bb0(%a: tensor<256x384xbf16>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 1>, dtype = f8E4M3FN} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<2x384xf32>)
    %qt, %st = fp8.transpose %q, %s {block = array<i64: 128, 1>} : (tensor<256x384xf8E4M3FN>, tensor<2x384xf32>) -> (tensor<384x256xf8E4M3FN>, tensor<384x2xf32>)
    %ft = fp8.block_factors %st {block = array<i64: 1, 128>} : (tensor<384x2xf32>) -> tensor<768xf32>
    %r, %rs = fp8.block_quantize %a {block = array<i64: 1, 128>, dtype = f8E4M3FN} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<256x3xf32>)
    %fr = fp8.block_factors %rs {block = array<i64: 1, 128>} : (tensor<256x3xf32>) -> tensor<768xf32>
    kernel.yield %qt, %ft, %r, %rs, %fr : tensor<384x256xf8E4M3FN>, tensor<768xf32>, tensor<256x384xf8E4M3FN>, tensor<256x3xf32>, tensor<768xf32>
  } : tensor<384x256xf8E4M3FN>, tensor<768xf32>, tensor<256x384xf8E4M3FN>, tensor<256x3xf32>, tensor<768xf32>
  %both_factors:2 = kernel.fused "tiles_128x1_transposed_factors_untiled" kind("elementwise") ins(%g : tensor<300x256xf32>) {
  ^bb0(%a: tensor<300x256xf32>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 1>, dtype = f8E4M3FN} : (tensor<300x256xf32>) -> (tensor<300x256xf8E4M3FN>, tensor<3x256xf32>)
    %qt, %st = fp8.transpose %q, %s {block = array<i64: 128, 1>} : (tensor<300x256xf8E4M3FN>, tensor<3x256xf32>) -> (tensor<256x300xf8E4M3FN>, tensor<256x3xf32>)
    %ft = fp8.block_factors %st {block = array<i64: 1, 128>} : (tensor<256x3xf32>) -> tensor<768xf32>
    kernel.yield %qt, %ft : tensor<256x300xf8E4M3FN>, tensor<768xf32>
  } : tensor<256x300xf8E4M3FN>, tensor<768xf32>
  %blocks_factors:2 = kernel.fused "blocks_128x128_factors_untiled" kind("elementwise") ins(%w : tensor<384x300xf32>) {
  ^bb0(%a: tensor<384x300xf32>):
    %q, %s = fp8.block_quantize %a {block = array<i64: 128, 128>, dtype = f8E4M3FN} : (tensor<384x300xf32>) -> (tensor<384x300xf8E4M3FN>, tensor<3x3xf32>)
    %f = fp8.block_factors %s {block = array<i64: 128, 128>} : (tensor<3x3xf32>) -> tensor<12xf32>
    kernel.yield %q, %f : tensor<384x300xf8E4M3FN>, tensor<12xf32>
  } : tensor<384x300xf8E4M3FN>, tensor<12xf32>
  %norm_factors:5 = kernel.fused "add_rms_norm_tiles_factors" kind("row") ins(%xa, %x, %nw : tensor<256x384xbf16>, tensor<256x384xbf16>, tensor<384xf32>) {
  ^bb0(%a: tensor<256x384xbf16>, %b: tensor<256x384xbf16>, %c: tensor<384xf32>):
    %h = graph.add %a, %b : tensor<256x384xbf16>
    %y = graph.rms_norm %h, %c {eps = 1.0e-5 : f64} : (tensor<256x384xbf16>, tensor<384xf32>) -> tensor<256x384xbf16>
    %q, %s = fp8.block_quantize %y {block = array<i64: 128, 1>, dtype = f8E4M3FN, power_of_two} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<2x384xf32>)
    %qt, %st = fp8.transpose %q, %s {block = array<i64: 128, 1>} : (tensor<256x384xf8E4M3FN>, tensor<2x384xf32>) -> (tensor<384x256xf8E4M3FN>, tensor<384x2xf32>)
    %ft = fp8.block_factors %st {block = array<i64: 1, 128>} : (tensor<384x2xf32>) -> tensor<768xf32>
    %r, %rs = fp8.block_quantize %y {block = array<i64: 1, 128>, dtype = f8E4M3FN, power_of_two} : (tensor<256x384xbf16>) -> (tensor<256x384xf8E4M3FN>, tensor<256x3xf32>)
    %fr = fp8.block_factors %rs {block = array<i64: 1, 128>} : (tensor<256x3xf32>) -> tensor<768xf32>
    kernel.yield %h, %qt, %ft, %r, %fr : tensor<256x384xbf16>, tensor<384x256xf8E4M3FN>, tensor<768xf32>, tensor<256x384xf8E4M3FN>, tensor<768xf32>
  } : tensor<256x384xbf16>, tensor<384x256xf8E4M3FN>, tensor<768xf32>, tensor<256x384xf8E4M3FN>, tensor<768xf32>
  return
}
