// The cross-entropy gradient of an FP8 LM head (train.precision.lm_head_fp8):
// the gradient kernel writes the logits gradient cast to E5M2 with the
// delayed scale, its amax (one atomic max a block), and a transpose launch
// after it the K-major copy the wgrad GEMM reads
// (compiler/Codegen/WholeOpKernel.cpp, fp8LogitsGradOf).
// - Vocabulary 1001 in bf16 (no multiple of the 16-byte piece): each row
//   starts at another misalignment, read and written one element at a time
//   before the first boundary and after the last whole piece; 48 tokens,
//   so the transpose is copied an element per thread.
// - Vocabulary 50176 in bf16 over 64 tokens (whole 64 x 64 tiles: the
//   tiled transpose), dividing by a batch's mask count (`over`, a chunk of
//   the head).
// - Vocabulary 1003 in f32 (activation_dtype "f32"), no transpose.
// The scale puts the label elements (about -1 / tokens) past E5M2's
// largest finite value, so the cast saturates there; the mask zeroes about
// a tenth of the tokens and labels outside the row occur one token in 16.
func.func @cross_entropy_fp8(%dloss: tensor<f32>, %z_odd: tensor<2x24x1001xbf16>, %l_odd: tensor<2x24xi32>, %m_odd: tensor<2x24xf32>, %s_odd: tensor<f32>, %z_even: tensor<64x50176xbf16>, %l_even: tensor<64xi32>, %m_even: tensor<64xf32>, %batch: tensor<128xf32>, %s_even: tensor<f32>, %z_f32: tensor<24x1003xf32>, %l_f32: tensor<24xi32>, %m_f32: tensor<24xf32>, %s_f32: tensor<f32>) {
  %odd:4 = kernel.fused "ce_grad_fp8_1001" kind("row") ins(%dloss, %z_odd, %l_odd, %m_odd, %s_odd : tensor<f32>, tensor<2x24x1001xbf16>, tensor<2x24xi32>, tensor<2x24xf32>, tensor<f32>) {
  ^bb0(%g: tensor<f32>, %z: tensor<2x24x1001xbf16>, %l: tensor<2x24xi32>, %m: tensor<2x24xf32>, %s: tensor<f32>):
    %dz = graph.cross_entropy_grad %g, %z, %l, %m : (tensor<f32>, tensor<2x24x1001xbf16>, tensor<2x24xi32>, tensor<2x24xf32>) -> tensor<2x24x1001xbf16>
    %dz2 = graph.reshape %dz : (tensor<2x24x1001xbf16>) -> tensor<48x1001xbf16>
    %q, %amax = fp8.quantize %dz2, %s {amax_reduce = ["data", "tensor"], tensor = "lm_head.dy"} : (tensor<48x1001xbf16>, tensor<f32>) -> (tensor<48x1001xf8E5M2>, tensor<f32>)
    %qt, %st = fp8.transpose %q, %s : (tensor<48x1001xf8E5M2>, tensor<f32>) -> (tensor<1001x48xf8E5M2>, tensor<f32>)
    kernel.yield %q, %amax, %qt, %st : tensor<48x1001xf8E5M2>, tensor<f32>, tensor<1001x48xf8E5M2>, tensor<f32>
  } : tensor<48x1001xf8E5M2>, tensor<f32>, tensor<1001x48xf8E5M2>, tensor<f32>
  %even:4 = kernel.fused "ce_grad_fp8_50176" kind("row") ins(%dloss, %z_even, %l_even, %m_even, %batch, %s_even : tensor<f32>, tensor<64x50176xbf16>, tensor<64xi32>, tensor<64xf32>, tensor<128xf32>, tensor<f32>) {
  ^bb0(%g: tensor<f32>, %z: tensor<64x50176xbf16>, %l: tensor<64xi32>, %m: tensor<64xf32>, %b: tensor<128xf32>, %s: tensor<f32>):
    %dz = graph.cross_entropy_grad %g, %z, %l, %m over %b : (tensor<f32>, tensor<64x50176xbf16>, tensor<64xi32>, tensor<64xf32>, tensor<128xf32>) -> tensor<64x50176xbf16>
    %q, %amax = fp8.quantize %dz, %s {amax_reduce = ["data", "tensor"], tensor = "lm_head.dy"} : (tensor<64x50176xbf16>, tensor<f32>) -> (tensor<64x50176xf8E5M2>, tensor<f32>)
    %qt, %st = fp8.transpose %q, %s : (tensor<64x50176xf8E5M2>, tensor<f32>) -> (tensor<50176x64xf8E5M2>, tensor<f32>)
    kernel.yield %q, %amax, %qt, %st : tensor<64x50176xf8E5M2>, tensor<f32>, tensor<50176x64xf8E5M2>, tensor<f32>
  } : tensor<64x50176xf8E5M2>, tensor<f32>, tensor<50176x64xf8E5M2>, tensor<f32>
  %f32:2 = kernel.fused "ce_grad_fp8_f32_1003" kind("row") ins(%dloss, %z_f32, %l_f32, %m_f32, %s_f32 : tensor<f32>, tensor<24x1003xf32>, tensor<24xi32>, tensor<24xf32>, tensor<f32>) {
  ^bb0(%g: tensor<f32>, %z: tensor<24x1003xf32>, %l: tensor<24xi32>, %m: tensor<24xf32>, %s: tensor<f32>):
    %dz = graph.cross_entropy_grad %g, %z, %l, %m : (tensor<f32>, tensor<24x1003xf32>, tensor<24xi32>, tensor<24xf32>) -> tensor<24x1003xf32>
    %q, %amax = fp8.quantize %dz, %s {amax_reduce = ["data", "tensor"], tensor = "lm_head.dy"} : (tensor<24x1003xf32>, tensor<f32>) -> (tensor<24x1003xf8E5M2>, tensor<f32>)
    kernel.yield %q, %amax : tensor<24x1003xf8E5M2>, tensor<f32>
  } : tensor<24x1003xf8E5M2>, tensor<f32>
  return
}
