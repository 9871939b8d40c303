// RMSNorm + FP8 quantize + transpose regions that octet-fused-to-gpu builds
// as one launch of 2-block clusters (NormTransposeKernel.h). Compiled with
// num-sms=4: two clusters take the 5 bands of 64 rows in turn (3 and 2), so
// the row slots are refilled and the band buffers reused across bands.
// The llama3-8b row length (4096, 4 chunks a warp) at 320 rows; 2048 (2
// chunks a warp) with an f32 norm and an E5M2 result; 4096 again with no
// amax out (current scaling's cast, whose scale came from the amax the
// producer took) and the scale passed on.
func.func @norms(%x: tensor<1x320x4096xbf16>, %w: tensor<4096xf32>, %s: tensor<f32>, %x2: tensor<320x2048xbf16>, %w2: tensor<2048xf32>) {
  %a:4 = kernel.fused "norm_q_t_4096" kind("row") ins(%x, %w, %s : tensor<1x320x4096xbf16>, tensor<4096xf32>, tensor<f32>) {
  ^bb0(%i0: tensor<1x320x4096xbf16>, %i1: tensor<4096xf32>, %i2: tensor<f32>):
    %n0 = graph.rms_norm %i0, %i1 {eps = 1.0e-5 : f64} : (tensor<1x320x4096xbf16>, tensor<4096xf32>) -> tensor<1x320x4096xbf16>
    %n2 = graph.reshape %n0 : (tensor<1x320x4096xbf16>) -> tensor<320x4096xbf16>
    %q, %m = fp8.quantize %n2, %i2 : (tensor<320x4096xbf16>, tensor<f32>) -> (tensor<320x4096xf8E4M3FN>, tensor<f32>)
    %t, %ts = fp8.transpose %q, %i2 : (tensor<320x4096xf8E4M3FN>, tensor<f32>) -> (tensor<4096x320xf8E4M3FN>, tensor<f32>)
    kernel.yield %q, %m, %t, %ts : tensor<320x4096xf8E4M3FN>, tensor<f32>, tensor<4096x320xf8E4M3FN>, tensor<f32>
  } : tensor<320x4096xf8E4M3FN>, tensor<f32>, tensor<4096x320xf8E4M3FN>, tensor<f32>
  %b:3 = kernel.fused "norm_f32_q_t_2048" kind("row") ins(%x2, %w2, %s : tensor<320x2048xbf16>, tensor<2048xf32>, tensor<f32>) {
  ^bb0(%i0: tensor<320x2048xbf16>, %i1: tensor<2048xf32>, %i2: tensor<f32>):
    %n0 = graph.rms_norm %i0, %i1 {eps = 1.0e-6 : f64} : (tensor<320x2048xbf16>, tensor<2048xf32>) -> tensor<320x2048xf32>
    %q, %m = fp8.quantize %n0, %i2 : (tensor<320x2048xf32>, tensor<f32>) -> (tensor<320x2048xf8E5M2>, tensor<f32>)
    %t, %ts = fp8.transpose %q, %i2 : (tensor<320x2048xf8E5M2>, tensor<f32>) -> (tensor<2048x320xf8E5M2>, tensor<f32>)
    kernel.yield %t, %q, %m : tensor<2048x320xf8E5M2>, tensor<320x2048xf8E5M2>, tensor<f32>
  } : tensor<2048x320xf8E5M2>, tensor<320x2048xf8E5M2>, tensor<f32>
  %c:3 = kernel.fused "norm_q_t_4096_no_amax" kind("row") ins(%w, %x, %s : tensor<4096xf32>, tensor<1x320x4096xbf16>, tensor<f32>) {
  ^bb0(%i1: tensor<4096xf32>, %i0: tensor<1x320x4096xbf16>, %i2: tensor<f32>):
    %n0 = graph.rms_norm %i0, %i1 {eps = 1.0e-5 : f64} : (tensor<1x320x4096xbf16>, tensor<4096xf32>) -> tensor<1x320x4096xbf16>
    %n2 = graph.reshape %n0 : (tensor<1x320x4096xbf16>) -> tensor<320x4096xbf16>
    %q, %m = fp8.quantize %n2, %i2 : (tensor<320x4096xbf16>, tensor<f32>) -> (tensor<320x4096xf8E4M3FN>, tensor<f32>)
    %t, %ts = fp8.transpose %q, %i2 : (tensor<320x4096xf8E4M3FN>, tensor<f32>) -> (tensor<4096x320xf8E4M3FN>, tensor<f32>)
    kernel.yield %q, %t, %ts : tensor<320x4096xf8E4M3FN>, tensor<4096x320xf8E4M3FN>, tensor<f32>
  } : tensor<320x4096xf8E4M3FN>, tensor<4096x320xf8E4M3FN>, tensor<f32>
  return
}
