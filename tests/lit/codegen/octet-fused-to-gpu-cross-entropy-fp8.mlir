// RUN: %octet-opt %s --octet-fused-to-gpu | FileCheck %s
// The cross-entropy gradient of an FP8 LM head: the kernel rounds each
// gradient element to the gradient's type (bf16), scales it by the delayed
// scale and casts it to E5M2 as it writes it; each block adds its largest
// |gradient| to the amax by one atomic max of the float bits (the amax
// zeroed before the launches); a transpose launch after it writes the
// K-major copy (64 x 64 tiles: 2 x 16 blocks).
// CHECK: kernel.fused "cross_entropy_grad"
// CHECK: kernels = [
// CHECK-SAME: launch = [#kernel.launch<@cross_entropy_grad::@cross_entropy_grad_0_count, grid = 1, block = 256>, #kernel.launch<@cross_entropy_grad::@cross_entropy_grad_0, grid = 128, block = 1024>, #kernel.launch<@cross_entropy_grad::@cross_entropy_grad_0_t, grid = 32, block = 256>]
// CHECK-SAME: zero_results = array<i64: 1>
// CHECK: gpu.func @cross_entropy_grad_0(%{{.*}}: memref<1xf32, 1>, %[[Z:.*]]: memref<131072xbf16, 1>, %{{.*}}: memref<128xi32, 1>, %{{.*}}: memref<128xf32, 1>, %[[S:.*]]: memref<1xf32, 1>, %[[Q:.*]]: memref<131072xf8E5M2, 1>, %[[AMAX:.*]]: memref<1xi32, 1>, %[[QT:.*]]: memref<131072xf8E5M2, 1>, %{{.*}}: memref<1xf32, 1>)
// CHECK: %[[SCALE:.*]] = memref.load %[[S]]
// CHECK: %[[BF:.*]] = arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// CHECK: %[[G:.*]] = arith.extf %[[BF]] : vector<8xbf16> to vector<8xf32>
// CHECK: %[[SV:.*]] = vector.broadcast %[[SCALE]] : f32 to vector<8xf32>
// CHECK: %[[X:.*]] = arith.mulf %[[G]], %[[SV]] : vector<8xf32>
// CHECK: %[[F8:.*]] = arith.truncf %[[X]] : vector<8xf32> to vector<8xf8E5M2>
// CHECK: vector.store %[[F8]], %[[Q]]
// CHECK: math.absf %[[G]] : vector<8xf32>
// CHECK: vector.reduction <maximumf>
// CHECK: memref.atomic_rmw maxu %{{.*}}, %[[AMAX]][%{{.*}}] : (i32, memref<1xi32, 1>) -> i32
// CHECK: gpu.func @cross_entropy_grad_0_t(
func.func @ce_grad_fp8(%g: tensor<f32>, %z: tensor<128x1024xbf16>, %l: tensor<128xi32>, %m: tensor<128xf32>, %s: tensor<f32>) -> (tensor<128x1024xf8E5M2>, tensor<f32>, tensor<1024x128xf8E5M2>) {
  %r:3 = kernel.fused "cross_entropy_grad" kind("row") ins(%g, %z, %l, %m, %s : tensor<f32>, tensor<128x1024xbf16>, tensor<128xi32>, tensor<128xf32>, tensor<f32>) {
  ^bb0(%a: tensor<f32>, %b: tensor<128x1024xbf16>, %c: tensor<128xi32>, %d: tensor<128xf32>, %e: tensor<f32>):
    %dz = graph.cross_entropy_grad %a, %b, %c, %d : (tensor<f32>, tensor<128x1024xbf16>, tensor<128xi32>, tensor<128xf32>) -> tensor<128x1024xbf16>
    %q, %amax = fp8.quantize %dz, %e {amax_reduce = ["data", "tensor"], tensor = "lm_head.dy"} : (tensor<128x1024xbf16>, tensor<f32>) -> (tensor<128x1024xf8E5M2>, tensor<f32>)
    %qt, %st = fp8.transpose %q, %e : (tensor<128x1024xf8E5M2>, tensor<f32>) -> (tensor<1024x128xf8E5M2>, tensor<f32>)
    kernel.yield %q, %amax, %qt : tensor<128x1024xf8E5M2>, tensor<f32>, tensor<1024x128xf8E5M2>
  } : tensor<128x1024xf8E5M2>, tensor<f32>, tensor<1024x128xf8E5M2>
  return %r#0, %r#1, %r#2 : tensor<128x1024xf8E5M2>, tensor<f32>, tensor<1024x128xf8E5M2>
}

