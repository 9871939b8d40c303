// Blockwise FP8 quantization kernels (WholeOpKernel.cpp: a block of
// threads per tile): 1x128 tiles of a BF16 activation (E4M3, power-of-two
// scales), 128x1 tiles of an f32 gradient written K-major only with its
// transposed scales (the wgrad operand: the fp8.transpose in the same
// launch), the same tiles kept in both layouts, and 128x128 blocks of an
// f32 weight (plain scales). Shapes that are not multiples of 128 give
// partial last tiles (the kernels guard them; the compiler keeps such
// GEMMs in BF16, but the quantize op is defined for them).
func.func @block_quantize(%x: tensor<256x384xbf16>, %dy: tensor<384x200xf32>, %g: tensor<300x256xf32>, %w: tensor<384x300xf32>) {
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
  return
}
