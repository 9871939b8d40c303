// RUN: %octet-opt %s --pass-pipeline='builtin.module(gpu.module(octet-lower-fp8-casts))' | FileCheck %s

gpu.module @k {
  // Narrowing: pairs through cvt.rn.satfinite, the higher element as `a`.
  // CHECK-LABEL: func.func @narrow
  // CHECK: %[[E0:.*]] = vector.extract %{{.*}}[0] : f32 from vector<4xf32>
  // CHECK: %[[E1:.*]] = vector.extract %{{.*}}[1] : f32 from vector<4xf32>
  // CHECK: nvvm.convert.f32x2.to.f8x2 %[[E1]], %[[E0]] {rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>} : vector<2xi8>(f8E4M3FN)
  // CHECK: nvvm.convert.f32x2.to.f8x2 {{.*}} : vector<2xi8>(f8E4M3FN)
  // CHECK-NOT: arith.truncf
  // CHECK: arith.bitcast %{{.*}} : vector<4xi8> to vector<4xf8E4M3FN>
  func.func @narrow(%v: vector<4xf32>) -> vector<4xf8E4M3FN> {
    %q = arith.truncf %v : vector<4xf32> to vector<4xf8E4M3FN>
    return %q : vector<4xf8E4M3FN>
  }
  // A scalar bf16 source is widened first; E5M2 keeps its own type.
  // CHECK-LABEL: func.func @scalar
  // CHECK: arith.extf %{{.*}} : bf16 to f32
  // CHECK: nvvm.convert.f32x2.to.f8x2 {{.*}} : vector<2xi8>(f8E5M2)
  // CHECK: arith.bitcast %{{.*}} : i8 to f8E5M2
  func.func @scalar(%x: bf16) -> f8E5M2 {
    %q = arith.truncf %x : bf16 to f8E5M2
    return %q : f8E5M2
  }
  // Widening through the exact f8x2 → f16x2 conversion.
  // CHECK-LABEL: func.func @widen
  // CHECK: arith.bitcast %{{.*}} : vector<2xf8E4M3FN> to vector<2xi8>
  // CHECK: nvvm.convert.f8x2.to.f16x2 %{{.*}} : vector<2xi8>(f8E4M3FN) -> vector<2xf16>
  // CHECK: arith.extf %{{.*}} : f16 to f32
  // CHECK-NOT: arith.extf %{{.*}} : vector<2xf8E4M3FN>
  func.func @widen(%q: vector<2xf8E4M3FN>) -> vector<2xf32> {
    %v = arith.extf %q : vector<2xf8E4M3FN> to vector<2xf32>
    return %v : vector<2xf32>
  }
}
