// Cross-entropy and its gradient at the shapes that take the kernels'
// every path (compiler/Codegen/WholeOpKernel.cpp, VocabRow): a block of
// 1024 threads per token reading the row in 16-byte pieces (8 bf16, 4 f32),
// 4 pieces a thread per loop step.
// - Vocabulary 1001 in bf16 and 1003 in f32 (no multiple of the piece):
//   each row starts at another misalignment, so its head before the first
//   16-byte boundary and its tail are read one element at a time.
// - Vocabulary 50176 in bf16 (a multiple of 8): 6272 pieces a row, so the
//   loop takes two steps and the second has pieces past the row.
// - Vocabulary 7 in bf16: a row shorter than a piece, all of it single
//   elements (no piece at all in most rows).
// - The loss mask zeroes about a tenth of the tokens (their rows are not
//   read); the gradient-only regions get labels outside the row (-100 and
//   the width) for one token in 16, which the gradient ignores; chunks of a
//   batch divide by the batch mask's count (`over`).
func.func @cross_entropy(%z_odd: tensor<2x24x1001xbf16>, %l_odd: tensor<2x24xi32>, %m_odd: tensor<2x24xf32>, %gz_odd: tensor<2x24x1001xbf16>, %gl_odd: tensor<2x24xi32>, %gm_odd: tensor<2x24xf32>, %dloss: tensor<f32>, %z_even: tensor<16x50176xbf16>, %l_even: tensor<16xi32>, %m_even: tensor<16xf32>, %batch: tensor<48xf32>, %gz_even: tensor<16x50176xbf16>, %gl_even: tensor<16xi32>, %gm_even: tensor<16xf32>, %z_tiny: tensor<4x7xbf16>, %l_tiny: tensor<4xi32>, %m_tiny: tensor<4xf32>, %z_f32: tensor<3x8x1003xf32>, %l_f32: tensor<3x8xi32>, %m_f32: tensor<3x8xf32>) {
  %loss_odd = kernel.fused "ce_bf16_1001" kind("row") ins(%z_odd, %l_odd, %m_odd : tensor<2x24x1001xbf16>, tensor<2x24xi32>, tensor<2x24xf32>) {
  ^bb0(%z: tensor<2x24x1001xbf16>, %l: tensor<2x24xi32>, %m: tensor<2x24xf32>):
    %loss = graph.cross_entropy %z, %l, %m : (tensor<2x24x1001xbf16>, tensor<2x24xi32>, tensor<2x24xf32>) -> tensor<f32>
    kernel.yield %loss : tensor<f32>
  } : tensor<f32>
  %dz_odd = kernel.fused "ce_grad_bf16_1001" kind("row") ins(%dloss, %gz_odd, %gl_odd, %gm_odd : tensor<f32>, tensor<2x24x1001xbf16>, tensor<2x24xi32>, tensor<2x24xf32>) {
  ^bb0(%g: tensor<f32>, %z: tensor<2x24x1001xbf16>, %l: tensor<2x24xi32>, %m: tensor<2x24xf32>):
    %dz = graph.cross_entropy_grad %g, %z, %l, %m : (tensor<f32>, tensor<2x24x1001xbf16>, tensor<2x24xi32>, tensor<2x24xf32>) -> tensor<2x24x1001xbf16>
    kernel.yield %dz : tensor<2x24x1001xbf16>
  } : tensor<2x24x1001xbf16>
  %loss_even = kernel.fused "ce_bf16_50176" kind("row") ins(%z_even, %l_even, %m_even, %batch : tensor<16x50176xbf16>, tensor<16xi32>, tensor<16xf32>, tensor<48xf32>) {
  ^bb0(%z: tensor<16x50176xbf16>, %l: tensor<16xi32>, %m: tensor<16xf32>, %b: tensor<48xf32>):
    %loss = graph.cross_entropy %z, %l, %m over %b : (tensor<16x50176xbf16>, tensor<16xi32>, tensor<16xf32>, tensor<48xf32>) -> tensor<f32>
    kernel.yield %loss : tensor<f32>
  } : tensor<f32>
  %dz_even = kernel.fused "ce_grad_bf16_50176" kind("row") ins(%dloss, %gz_even, %gl_even, %gm_even, %batch : tensor<f32>, tensor<16x50176xbf16>, tensor<16xi32>, tensor<16xf32>, tensor<48xf32>) {
  ^bb0(%g: tensor<f32>, %z: tensor<16x50176xbf16>, %l: tensor<16xi32>, %m: tensor<16xf32>, %b: tensor<48xf32>):
    %dz = graph.cross_entropy_grad %g, %z, %l, %m over %b : (tensor<f32>, tensor<16x50176xbf16>, tensor<16xi32>, tensor<16xf32>, tensor<48xf32>) -> tensor<16x50176xbf16>
    kernel.yield %dz : tensor<16x50176xbf16>
  } : tensor<16x50176xbf16>
  %tiny:2 = kernel.fused "ce_bf16_7" kind("row") ins(%z_tiny, %l_tiny, %m_tiny, %dloss : tensor<4x7xbf16>, tensor<4xi32>, tensor<4xf32>, tensor<f32>) {
  ^bb0(%z: tensor<4x7xbf16>, %l: tensor<4xi32>, %m: tensor<4xf32>, %g: tensor<f32>):
    %loss = graph.cross_entropy %z, %l, %m : (tensor<4x7xbf16>, tensor<4xi32>, tensor<4xf32>) -> tensor<f32>
    %dz = graph.cross_entropy_grad %g, %z, %l, %m : (tensor<f32>, tensor<4x7xbf16>, tensor<4xi32>, tensor<4xf32>) -> tensor<4x7xbf16>
    kernel.yield %loss, %dz : tensor<f32>, tensor<4x7xbf16>
  } : tensor<f32>, tensor<4x7xbf16>
  %f32:2 = kernel.fused "ce_f32_1003" kind("row") ins(%z_f32, %l_f32, %m_f32, %dloss : tensor<3x8x1003xf32>, tensor<3x8xi32>, tensor<3x8xf32>, tensor<f32>) {
  ^bb0(%z: tensor<3x8x1003xf32>, %l: tensor<3x8xi32>, %m: tensor<3x8xf32>, %g: tensor<f32>):
    %loss = graph.cross_entropy %z, %l, %m : (tensor<3x8x1003xf32>, tensor<3x8xi32>, tensor<3x8xf32>) -> tensor<f32>
    %dz = graph.cross_entropy_grad %g, %z, %l, %m : (tensor<f32>, tensor<3x8x1003xf32>, tensor<3x8xi32>, tensor<3x8xf32>) -> tensor<3x8x1003xf32>
    kernel.yield %loss, %dz : tensor<f32>, tensor<3x8x1003xf32>
  } : tensor<f32>, tensor<3x8x1003xf32>
  return
}
