// The kernels of a train step that are not a llama layer's row kernels, at
// small shapes: the head split after the QKV GEMM (graph.slice), its
// backward join (graph.concat) with the E5M2 quantize and the K-major
// transpose, embedding and its gradient into accumulators, cross-entropy
// with its gradient (the per-chunk kernel of the LM head), a forward RoPE
// (llama3 scaling, f32) joined after a plain piece, quantized and
// transposed in one launch, the global
// gradient norm (twice: over three f32 tensors, and over f32 and bf16
// tensors interleaved, of odd lengths, multiples of 8 and one element past
// a block's chunk, whose blocks share code by element type and read the
// last chunk of each tensor part-full), the optimizer's scalar ops and the delayed FP8 scale
// update with its inverse, current scaling's scales and their inverses
// (both formats, margin and power-of-two
// rounding; amaxes of either sign from 2^-27 to 2^12, a negative one
// clamped to eps), a norm gradient added into its weight-gradient accumulator and
// the residual gradient, and AdamW zeroing the gradient accumulators it
// read, over a tensor of 600000 elements: enough that the multi-tensor
// kernel's blocks loop over its slices (the FP8 cast's amax carried across
// them, the last slice partial). Vocabulary 1000 (no power of two) and 300
// (ids repeat, so the embedding gradient's atomic adds collide).
func.func @whole_ops(%pos: tensor<2x32xi32>, %qkv: tensor<64x1024xbf16>, %dk: tensor<2x32x2x128xbf16>, %dq: tensor<2x32x4x128xbf16>, %dv: tensor<64x256xbf16>, %dscale: tensor<f32>, %table: tensor<300x256xbf16>, %ids: tensor<2x32xi32>, %dy: tensor<2x32x256xf32>, %acc_a: tensor<300x256xf32>, %acc_b: tensor<300x256xf32>, %logits: tensor<2x32x1000xf32>, %labels: tensor<2x32xi32>, %mask: tensor<2x32xf32>, %dloss: tensor<f32>, %g0: tensor<300x256xf32>, %g1: tensor<1000xf32>, %g2: tensor<7x3xf32>, %step: tensor<i64>, %norm: tensor<f32>, %hist: tensor<16xf32>, %amax: tensor<f32>, %camax: tensor<f32>, %scale: tensor<f32>, %ndy: tensor<2x32x1024xf32>, %nx: tensor<2x32x1024xf32>, %nw: tensor<1024xf32>, %nacc: tensor<1024xf32>, %ndres: tensor<2x32x1024xf32>, %ap: tensor<600x1000xf32>, %apg: tensor<600x1000xf32>, %apm: tensor<600x1000xf32>, %apv: tensor<600x1000xf32>, %ab: tensor<256xf32>, %abg: tensor<256xf32>, %abm: tensor<256xf32>, %abv: tensor<256xf32>, %alr: tensor<f32>, %agscale: tensor<f32>, %aqs: tensor<f32>, %fq: tensor<2x32x4x128xf32>, %fv: tensor<64x256xf32>, %n0: tensor<40000xf32>, %n1: tensor<37000xbf16>, %n2: tensor<3x333xf32>, %n3: tensor<17x3xbf16>, %n4: tensor<16385xf32>, %n5: tensor<5xf32>, %n6: tensor<2048xf32>) {
  %rope_split:2 = kernel.fused "rope_split" kind("elementwise") ins(%pos, %qkv : tensor<2x32xi32>, tensor<64x1024xbf16>) {
  ^bb0(%p: tensor<2x32xi32>, %x: tensor<64x1024xbf16>):
    %x3 = graph.reshape %x : (tensor<64x1024xbf16>) -> tensor<2x32x1024xbf16>
    %k = graph.slice %x3 {dim = 2 : i64, offset = 512 : i64} : (tensor<2x32x1024xbf16>) -> tensor<2x32x256xbf16>
    %q = graph.slice %x3 {dim = 2 : i64, offset = 0 : i64} : (tensor<2x32x1024xbf16>) -> tensor<2x32x512xbf16>
    %k4 = graph.reshape %k : (tensor<2x32x256xbf16>) -> tensor<2x32x2x128xbf16>
    %q4 = graph.reshape %q : (tensor<2x32x512xbf16>) -> tensor<2x32x4x128xbf16>
    %rq = graph.rope %q4, %p {theta = 5.000000e+05 : f64} : (tensor<2x32x4x128xbf16>, tensor<2x32xi32>) -> tensor<2x32x4x128xbf16>
    %rk = graph.rope %k4, %p {theta = 5.000000e+05 : f64} : (tensor<2x32x2x128xbf16>, tensor<2x32xi32>) -> tensor<2x32x2x128xbf16>
    kernel.yield %rq, %rk : tensor<2x32x4x128xbf16>, tensor<2x32x2x128xbf16>
  } : tensor<2x32x4x128xbf16>, tensor<2x32x2x128xbf16>
  %rope_join:4 = kernel.fused "rope_join_quantize_transpose" kind("elementwise") ins(%dk, %pos, %dq, %dv, %dscale : tensor<2x32x2x128xbf16>, tensor<2x32xi32>, tensor<2x32x4x128xbf16>, tensor<64x256xbf16>, tensor<f32>) {
  ^bb0(%k: tensor<2x32x2x128xbf16>, %p: tensor<2x32xi32>, %q: tensor<2x32x4x128xbf16>, %v: tensor<64x256xbf16>, %s: tensor<f32>):
    %rk = graph.rope %k, %p {inverse, theta = 5.000000e+05 : f64} : (tensor<2x32x2x128xbf16>, tensor<2x32xi32>) -> tensor<2x32x2x128xbf16>
    %rq = graph.rope %q, %p {inverse, theta = 5.000000e+05 : f64} : (tensor<2x32x4x128xbf16>, tensor<2x32xi32>) -> tensor<2x32x4x128xbf16>
    %k2 = graph.reshape %rk : (tensor<2x32x2x128xbf16>) -> tensor<64x256xbf16>
    %q2 = graph.reshape %rq : (tensor<2x32x4x128xbf16>) -> tensor<64x512xbf16>
    %cat = graph.concat %q2, %k2, %v {dim = 1 : i64} : (tensor<64x512xbf16>, tensor<64x256xbf16>, tensor<64x256xbf16>) -> tensor<64x1024xbf16>
    %q8, %m = fp8.quantize %cat, %s : (tensor<64x1024xbf16>, tensor<f32>) -> (tensor<64x1024xf8E5M2>, tensor<f32>)
    %t8, %ts = fp8.transpose %q8, %s : (tensor<64x1024xf8E5M2>, tensor<f32>) -> (tensor<1024x64xf8E5M2>, tensor<f32>)
    kernel.yield %q8, %m, %t8, %ts : tensor<64x1024xf8E5M2>, tensor<f32>, tensor<1024x64xf8E5M2>, tensor<f32>
  } : tensor<64x1024xf8E5M2>, tensor<f32>, tensor<1024x64xf8E5M2>, tensor<f32>
  %rope_fwd:4 = kernel.fused "rope_fwd_join_quantize_transpose" kind("elementwise") ins(%fq, %pos, %fv, %aqs : tensor<2x32x4x128xf32>, tensor<2x32xi32>, tensor<64x256xf32>, tensor<f32>) {
  ^bb0(%q: tensor<2x32x4x128xf32>, %p: tensor<2x32xi32>, %v: tensor<64x256xf32>, %s: tensor<f32>):
    %r = graph.rope %q, %p {theta = 500000.0 : f64, scaling = "llama3", factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_position = 8192 : i64} : (tensor<2x32x4x128xf32>, tensor<2x32xi32>) -> tensor<2x32x4x128xf32>
    %r2 = graph.reshape %r : (tensor<2x32x4x128xf32>) -> tensor<64x512xf32>
    %cat = graph.concat %v, %r2 {dim = 1 : i64} : (tensor<64x256xf32>, tensor<64x512xf32>) -> tensor<64x768xf32>
    %q8, %m = fp8.quantize %cat, %s : (tensor<64x768xf32>, tensor<f32>) -> (tensor<64x768xf8E4M3FN>, tensor<f32>)
    %t8, %ts = fp8.transpose %q8, %s : (tensor<64x768xf8E4M3FN>, tensor<f32>) -> (tensor<768x64xf8E4M3FN>, tensor<f32>)
    kernel.yield %q8, %m, %t8, %ts : tensor<64x768xf8E4M3FN>, tensor<f32>, tensor<768x64xf8E4M3FN>, tensor<f32>
  } : tensor<64x768xf8E4M3FN>, tensor<f32>, tensor<768x64xf8E4M3FN>, tensor<f32>
  %emb = kernel.fused "embedding" kind("row") ins(%table, %ids : tensor<300x256xbf16>, tensor<2x32xi32>) {
  ^bb0(%t: tensor<300x256xbf16>, %i: tensor<2x32xi32>):
    %e = graph.embedding %t, %i : (tensor<300x256xbf16>, tensor<2x32xi32>) -> tensor<2x32x256xbf16>
    kernel.yield %e : tensor<2x32x256xbf16>
  } : tensor<2x32x256xbf16>
  %emb_grad = kernel.fused "embedding_grad" kind("row") ins(%dy, %ids, %acc_a, %acc_b : tensor<2x32x256xf32>, tensor<2x32xi32>, tensor<300x256xf32>, tensor<300x256xf32>) {
  ^bb0(%d: tensor<2x32x256xf32>, %i: tensor<2x32xi32>, %a: tensor<300x256xf32>, %b: tensor<300x256xf32>):
    %g = graph.embedding_grad %d, %i : (tensor<2x32x256xf32>, tensor<2x32xi32>) -> tensor<300x256xf32>
    %s1 = graph.add %a, %g : tensor<300x256xf32>
    %s2 = graph.add %b, %s1 : tensor<300x256xf32>
    kernel.yield %s2 : tensor<300x256xf32>
  } : tensor<300x256xf32>
  %ce:2 = kernel.fused "cross_entropy" kind("row") ins(%logits, %labels, %mask, %dloss : tensor<2x32x1000xf32>, tensor<2x32xi32>, tensor<2x32xf32>, tensor<f32>) {
  ^bb0(%z: tensor<2x32x1000xf32>, %l: tensor<2x32xi32>, %m: tensor<2x32xf32>, %g: tensor<f32>):
    %loss = graph.cross_entropy %z, %l, %m : (tensor<2x32x1000xf32>, tensor<2x32xi32>, tensor<2x32xf32>) -> tensor<f32>
    %dz = graph.cross_entropy_grad %g, %z, %l, %m : (tensor<f32>, tensor<2x32x1000xf32>, tensor<2x32xi32>, tensor<2x32xf32>) -> tensor<2x32x1000xf32>
    kernel.yield %loss, %dz : tensor<f32>, tensor<2x32x1000xf32>
  } : tensor<f32>, tensor<2x32x1000xf32>
  %gnorm = kernel.fused "global_norm" kind("elementwise") ins(%g0, %g1, %g2 : tensor<300x256xf32>, tensor<1000xf32>, tensor<7x3xf32>) {
  ^bb0(%a: tensor<300x256xf32>, %b: tensor<1000xf32>, %c: tensor<7x3xf32>):
    %n = graph.global_norm %a, %b, %c {scale = 2.500000e-01 : f64} : (tensor<300x256xf32>, tensor<1000xf32>, tensor<7x3xf32>) -> tensor<f32>
    kernel.yield %n : tensor<f32>
  } : tensor<f32>
  %sc:7 = kernel.fused "optimizer_scalars" kind("elementwise") ins(%step, %norm, %hist, %amax, %scale : tensor<i64>, tensor<f32>, tensor<16xf32>, tensor<f32>, tensor<f32>) {
  ^bb0(%s: tensor<i64>, %n: tensor<f32>, %h: tensor<16xf32>, %a: tensor<f32>, %x: tensor<f32>):
    %s1 = graph.increment %s : tensor<i64>
    %lr = graph.lr_schedule %s1 {lr = 6.000000e-04 : f64, min_lr_ratio = 1.000000e-01 : f64, total_steps = 1900 : i64, warmup_steps = 70 : i64} : (tensor<i64>) -> tensor<f32>
    %c = graph.clip_scale %n {max_norm = 1.000000e+00 : f64, scale = 2.500000e-01 : f64} : tensor<f32>
    %one = graph.fill {value = 1.000000e+00 : f64} : tensor<f32>
    %h2, %x2, %x2_inv = fp8.scale_update %h, %a, %x {dtype = f8E4M3FN, recipe = #fp8.recipe<kind = delayed, amax_history_len = 16>} : (tensor<16xf32>, tensor<f32>, tensor<f32>) -> (tensor<16xf32>, tensor<f32>, tensor<f32>)
    kernel.yield %s1, %lr, %c, %one, %h2, %x2, %x2_inv : tensor<i64>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<16xf32>, tensor<f32>, tensor<f32>
  } : tensor<i64>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<16xf32>, tensor<f32>, tensor<f32>
  %cur:6 = kernel.fused "current_scales" kind("elementwise") ins(%amax, %camax : tensor<f32>, tensor<f32>) {
  ^bb0(%a: tensor<f32>, %z: tensor<f32>):
    %s0, %s0_inv = fp8.compute_scale %a {dtype = f8E4M3FN} : tensor<f32>
    %s1, %s1_inv = fp8.compute_scale %a {dtype = f8E5M2, margin = 1 : i64, power_of_two} : tensor<f32>
    %s2, %s2_inv = fp8.compute_scale %z {dtype = f8E4M3FN} : tensor<f32>
    kernel.yield %s0, %s1, %s2, %s0_inv, %s1_inv, %s2_inv : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
  } : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
  %ngrad:6 = kernel.fused "rms_norm_grad_accumulate" kind("row") ins(%ndy, %nx, %nw, %nacc, %ndres, %dscale : tensor<2x32x1024xf32>, tensor<2x32x1024xf32>, tensor<1024xf32>, tensor<1024xf32>, tensor<2x32x1024xf32>, tensor<f32>) {
  ^bb0(%r_dy2: tensor<2x32x1024xf32>, %r_x: tensor<2x32x1024xf32>, %r_w: tensor<1024xf32>, %r_acc: tensor<1024xf32>, %r_dres: tensor<2x32x1024xf32>, %r_s: tensor<f32>):
    %r_dx, %r_dw = graph.rms_norm_grad %r_dy2, %r_x, %r_w {eps = 1.000000e-05 : f64} : (tensor<2x32x1024xf32>, tensor<2x32x1024xf32>, tensor<1024xf32>) -> (tensor<2x32x1024xf32>, tensor<1024xf32>)
    %r_acc2 = graph.add %r_acc, %r_dw : tensor<1024xf32>
    %r_g = graph.add %r_dres, %r_dx : tensor<2x32x1024xf32>
    %r_g2 = graph.reshape %r_g : (tensor<2x32x1024xf32>) -> tensor<64x1024xf32>
    %r_q8, %r_m = fp8.quantize %r_g2, %r_s : (tensor<64x1024xf32>, tensor<f32>) -> (tensor<64x1024xf8E5M2>, tensor<f32>)
    %r_t8, %r_ts = fp8.transpose %r_q8, %r_s : (tensor<64x1024xf8E5M2>, tensor<f32>) -> (tensor<1024x64xf8E5M2>, tensor<f32>)
    kernel.yield %r_acc2, %r_g, %r_q8, %r_m, %r_t8, %r_ts : tensor<1024xf32>, tensor<2x32x1024xf32>, tensor<64x1024xf8E5M2>, tensor<f32>, tensor<1024x64xf8E5M2>, tensor<f32>
  } : tensor<1024xf32>, tensor<2x32x1024xf32>, tensor<64x1024xf8E5M2>, tensor<f32>, tensor<1024x64xf8E5M2>, tensor<f32>
  %adamw:10 = kernel.fused "adamw_zero_grads" kind("multi_tensor") ins(%ap, %apg, %apm, %apv, %alr, %step, %agscale, %ab, %abg, %abm, %abv, %aqs : tensor<600x1000xf32>, tensor<600x1000xf32>, tensor<600x1000xf32>, tensor<600x1000xf32>, tensor<f32>, tensor<i64>, tensor<f32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<f32>) {
  ^bb0(%r_p0: tensor<600x1000xf32>, %r_g0: tensor<600x1000xf32>, %r_m0: tensor<600x1000xf32>, %r_v0: tensor<600x1000xf32>, %r_l: tensor<f32>, %r_st: tensor<i64>, %r_gs: tensor<f32>, %r_p1: tensor<256xf32>, %r_g1: tensor<256xf32>, %r_m1: tensor<256xf32>, %r_v1: tensor<256xf32>, %r_qs: tensor<f32>):
    %r_np0, %r_nm0, %r_nv0 = graph.adamw_update %r_p0, %r_g0, %r_m0, %r_v0, %r_l, %r_st, %r_gs {beta1 = 9.000000e-01 : f64, beta2 = 9.500000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64} : (tensor<600x1000xf32>, tensor<600x1000xf32>, tensor<600x1000xf32>, tensor<600x1000xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<600x1000xf32>, tensor<600x1000xf32>, tensor<600x1000xf32>)
    %r_q0, %r_a0 = fp8.quantize %r_np0, %r_qs : (tensor<600x1000xf32>, tensor<f32>) -> (tensor<600x1000xf8E4M3FN>, tensor<f32>)
    %r_z0 = graph.fill {value = 0.000000e+00 : f64} : tensor<600x1000xf32>
    %r_np1, %r_nm1, %r_nv1 = graph.adamw_update %r_p1, %r_g1, %r_m1, %r_v1, %r_l, %r_st, %r_gs {beta1 = 9.000000e-01 : f64, beta2 = 9.500000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64} : (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>)
    %r_z1 = graph.fill {value = 0.000000e+00 : f64} : tensor<256xf32>
    kernel.yield %r_np0, %r_nm0, %r_nv0, %r_q0, %r_a0, %r_z0, %r_np1, %r_nm1, %r_nv1, %r_z1 : tensor<600x1000xf32>, tensor<600x1000xf32>, tensor<600x1000xf32>, tensor<600x1000xf8E4M3FN>, tensor<f32>, tensor<600x1000xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>
  } : tensor<600x1000xf32>, tensor<600x1000xf32>, tensor<600x1000xf32>, tensor<600x1000xf8E4M3FN>, tensor<f32>, tensor<600x1000xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>
  %gnorm_mixed = kernel.fused "global_norm_mixed" kind("elementwise") ins(%n0, %n1, %n2, %n3, %n4, %n5, %n6 : tensor<40000xf32>, tensor<37000xbf16>, tensor<3x333xf32>, tensor<17x3xbf16>, tensor<16385xf32>, tensor<5xf32>, tensor<2048xf32>) {
  ^bb0(%a: tensor<40000xf32>, %b: tensor<37000xbf16>, %c: tensor<3x333xf32>, %d: tensor<17x3xbf16>, %e: tensor<16385xf32>, %f: tensor<5xf32>, %g: tensor<2048xf32>):
    %n = graph.global_norm %a, %b, %c, %d, %e, %f, %g {scale = 5.000000e-01 : f64} : (tensor<40000xf32>, tensor<37000xbf16>, tensor<3x333xf32>, tensor<17x3xbf16>, tensor<16385xf32>, tensor<5xf32>, tensor<2048xf32>) -> tensor<f32>
    kernel.yield %n : tensor<f32>
  } : tensor<f32>
  return
}
