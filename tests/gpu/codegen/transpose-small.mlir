// Regions whose FP8 results are transposed ([R, C] -> [C, R], the K-major
// copy a weight-gradient GEMM reads) by the row kernel itself: a block takes
// 16 rows at a time (octet-fused-to-gpu's transpose-tile-rows) and writes
// each of its columns' 16 bytes at once. The llama3-8b shapes at 32 tokens
// (two tiles): RMSNorm and a quantize of a kernel input (a flattened
// segment given rows), the residual add before the norm, and the norm
// gradient with its weight-gradient column sum (blocks that loop over the
// tiles; this file is compiled with num-sms=1 so that one block takes
// several); a row of 192 (threads past its end); two transposes in one
// segment (SwiGLU's gradients).
func.func @transposes(%x: tensor<1x32x4096xbf16>, %res: tensor<1x32x4096xbf16>, %w: tensor<4096xf32>, %s: tensor<f32>, %x2: tensor<32x4096xbf16>, %dy: tensor<1x64x4096xbf16>, %xg: tensor<1x64x4096xbf16>, %acc: tensor<4096xf32>, %dres: tensor<1x64x4096xbf16>, %n: tensor<64x192xbf16>, %gd: tensor<32x256xbf16>, %gg: tensor<32x256xbf16>, %gu: tensor<32x256xbf16>) {
  %a:4 = kernel.fused "norm_q_t" kind("row") ins(%x, %w, %s : tensor<1x32x4096xbf16>, tensor<4096xf32>, tensor<f32>) {
  ^bb0(%i0: tensor<1x32x4096xbf16>, %i1: tensor<4096xf32>, %i2: tensor<f32>):
    %n0 = graph.rms_norm %i0, %i1 {eps = 1.0e-5 : f64} : (tensor<1x32x4096xbf16>, tensor<4096xf32>) -> tensor<1x32x4096xbf16>
    %n2 = graph.reshape %n0 : (tensor<1x32x4096xbf16>) -> tensor<32x4096xbf16>
    %q, %m = fp8.quantize %n2, %i2 : (tensor<32x4096xbf16>, tensor<f32>) -> (tensor<32x4096xf8E4M3FN>, tensor<f32>)
    %t, %ts = fp8.transpose %q, %i2 : (tensor<32x4096xf8E4M3FN>, tensor<f32>) -> (tensor<4096x32xf8E4M3FN>, tensor<f32>)
    kernel.yield %q, %m, %t, %ts : tensor<32x4096xf8E4M3FN>, tensor<f32>, tensor<4096x32xf8E4M3FN>, tensor<f32>
  } : tensor<32x4096xf8E4M3FN>, tensor<f32>, tensor<4096x32xf8E4M3FN>, tensor<f32>
  %b:4 = kernel.fused "q_t" kind("elementwise") ins(%x2, %s : tensor<32x4096xbf16>, tensor<f32>) {
  ^bb0(%i0: tensor<32x4096xbf16>, %i1: tensor<f32>):
    %q, %m = fp8.quantize %i0, %i1 : (tensor<32x4096xbf16>, tensor<f32>) -> (tensor<32x4096xf8E4M3FN>, tensor<f32>)
    %t, %ts = fp8.transpose %q, %i1 : (tensor<32x4096xf8E4M3FN>, tensor<f32>) -> (tensor<4096x32xf8E4M3FN>, tensor<f32>)
    kernel.yield %q, %m, %t, %ts : tensor<32x4096xf8E4M3FN>, tensor<f32>, tensor<4096x32xf8E4M3FN>, tensor<f32>
  } : tensor<32x4096xf8E4M3FN>, tensor<f32>, tensor<4096x32xf8E4M3FN>, tensor<f32>
  %c:5 = kernel.fused "add_norm_q_t" kind("row") ins(%x, %res, %w, %s : tensor<1x32x4096xbf16>, tensor<1x32x4096xbf16>, tensor<4096xf32>, tensor<f32>) {
  ^bb0(%i0: tensor<1x32x4096xbf16>, %i1: tensor<1x32x4096xbf16>, %i2: tensor<4096xf32>, %i3: tensor<f32>):
    %h = graph.add %i0, %i1 : tensor<1x32x4096xbf16>
    %n0 = graph.rms_norm %h, %i2 {eps = 1.0e-5 : f64} : (tensor<1x32x4096xbf16>, tensor<4096xf32>) -> tensor<1x32x4096xbf16>
    %n2 = graph.reshape %n0 : (tensor<1x32x4096xbf16>) -> tensor<32x4096xbf16>
    %q, %m = fp8.quantize %n2, %i3 : (tensor<32x4096xbf16>, tensor<f32>) -> (tensor<32x4096xf8E4M3FN>, tensor<f32>)
    %t, %ts = fp8.transpose %q, %i3 : (tensor<32x4096xf8E4M3FN>, tensor<f32>) -> (tensor<4096x32xf8E4M3FN>, tensor<f32>)
    kernel.yield %h, %q, %m, %t, %ts : tensor<1x32x4096xbf16>, tensor<32x4096xf8E4M3FN>, tensor<f32>, tensor<4096x32xf8E4M3FN>, tensor<f32>
  } : tensor<1x32x4096xbf16>, tensor<32x4096xf8E4M3FN>, tensor<f32>, tensor<4096x32xf8E4M3FN>, tensor<f32>
  %d:6 = kernel.fused "norm_grad_q_t" kind("row") ins(%dy, %xg, %w, %acc, %dres, %s : tensor<1x64x4096xbf16>, tensor<1x64x4096xbf16>, tensor<4096xf32>, tensor<4096xf32>, tensor<1x64x4096xbf16>, tensor<f32>) {
  ^bb0(%i0: tensor<1x64x4096xbf16>, %i1: tensor<1x64x4096xbf16>, %i2: tensor<4096xf32>, %i3: tensor<4096xf32>, %i4: tensor<1x64x4096xbf16>, %i5: tensor<f32>):
    %dx, %dw = graph.rms_norm_grad %i0, %i1, %i2 {eps = 1.0e-5 : f64} : (tensor<1x64x4096xbf16>, tensor<1x64x4096xbf16>, tensor<4096xf32>) -> (tensor<1x64x4096xbf16>, tensor<4096xf32>)
    %dwa = graph.add %i3, %dw : tensor<4096xf32>
    %g = graph.add %i4, %dx : tensor<1x64x4096xbf16>
    %g2 = graph.reshape %g : (tensor<1x64x4096xbf16>) -> tensor<64x4096xbf16>
    %q, %m = fp8.quantize %g2, %i5 : (tensor<64x4096xbf16>, tensor<f32>) -> (tensor<64x4096xf8E5M2>, tensor<f32>)
    %t, %ts = fp8.transpose %q, %i5 : (tensor<64x4096xf8E5M2>, tensor<f32>) -> (tensor<4096x64xf8E5M2>, tensor<f32>)
    kernel.yield %dwa, %g, %q, %m, %t, %ts : tensor<4096xf32>, tensor<1x64x4096xbf16>, tensor<64x4096xf8E5M2>, tensor<f32>, tensor<4096x64xf8E5M2>, tensor<f32>
  } : tensor<4096xf32>, tensor<1x64x4096xbf16>, tensor<64x4096xf8E5M2>, tensor<f32>, tensor<4096x64xf8E5M2>, tensor<f32>
  %e:4 = kernel.fused "narrow_q_t" kind("elementwise") ins(%n, %s : tensor<64x192xbf16>, tensor<f32>) {
  ^bb0(%i0: tensor<64x192xbf16>, %i1: tensor<f32>):
    %q, %m = fp8.quantize %i0, %i1 : (tensor<64x192xbf16>, tensor<f32>) -> (tensor<64x192xf8E4M3FN>, tensor<f32>)
    %t, %ts = fp8.transpose %q, %i1 : (tensor<64x192xf8E4M3FN>, tensor<f32>) -> (tensor<192x64xf8E4M3FN>, tensor<f32>)
    kernel.yield %q, %m, %t, %ts : tensor<64x192xf8E4M3FN>, tensor<f32>, tensor<192x64xf8E4M3FN>, tensor<f32>
  } : tensor<64x192xf8E4M3FN>, tensor<f32>, tensor<192x64xf8E4M3FN>, tensor<f32>
  %f:7 = kernel.fused "swiglu_grad_q_t" kind("row") ins(%gd, %gg, %gu, %s : tensor<32x256xbf16>, tensor<32x256xbf16>, tensor<32x256xbf16>, tensor<f32>) {
  ^bb0(%i0: tensor<32x256xbf16>, %i1: tensor<32x256xbf16>, %i2: tensor<32x256xbf16>, %i3: tensor<f32>):
    %dg, %du = graph.swiglu_grad %i0, %i1, %i2 : tensor<32x256xbf16>
    %qg, %mg = fp8.quantize %dg, %i3 : (tensor<32x256xbf16>, tensor<f32>) -> (tensor<32x256xf8E5M2>, tensor<f32>)
    %qu, %mu = fp8.quantize %du, %i3 : (tensor<32x256xbf16>, tensor<f32>) -> (tensor<32x256xf8E5M2>, tensor<f32>)
    %tg, %tgs = fp8.transpose %qg, %i3 : (tensor<32x256xf8E5M2>, tensor<f32>) -> (tensor<256x32xf8E5M2>, tensor<f32>)
    %tu, %tus = fp8.transpose %qu, %i3 : (tensor<32x256xf8E5M2>, tensor<f32>) -> (tensor<256x32xf8E5M2>, tensor<f32>)
    kernel.yield %qg, %qu, %mg, %mu, %tg, %tu, %tgs : tensor<32x256xf8E5M2>, tensor<32x256xf8E5M2>, tensor<f32>, tensor<f32>, tensor<256x32xf8E5M2>, tensor<256x32xf8E5M2>, tensor<f32>
  } : tensor<32x256xf8E5M2>, tensor<32x256xf8E5M2>, tensor<f32>, tensor<f32>, tensor<256x32xf8E5M2>, tensor<256x32xf8E5M2>, tensor<f32>
  return
}
