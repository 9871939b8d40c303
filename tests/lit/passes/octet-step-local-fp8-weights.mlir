// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv --octet-precision="amax-history-len=4" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-adamw --octet-step-local-kmajor-weights --octet-step-local-fp8-weights | FileCheck %s

// Delayed scaling: no FP8 weight is state; each weight's amax is, and the
// scale the optimizer cast it with (derived state, copied from the
// weight's scale).
// CHECK-NOT: graph.variable @fp8w.layers.0.mlp.w_down :
// CHECK: graph.variable @fp8w.layers.0.mlp.w_down.cast_scale : tensor<f32>
// CHECK-NEXT: graph.variable @fp8w.layers.0.mlp.w_down.amax : tensor<f32>
// CHECK-NOT: graph.variable @fp8w.layers.0.attn.wqkv :
// The evaluation forward casts too.
// CHECK-LABEL: func.func @forward
// CHECK: kernel.fused "layers.0.attn.wqkv.fp8"
// CHECK: kernel.gemm {{.*}}param = "layers.0.attn.wqkv", role = "fprop"
// CHECK-LABEL: func.func @train_microbatch
// CHECK-NOT: graph.load @fp8w.layers.0.attn.wqkv :
// The step's amax history still reads the optimizer's amax.
// CHECK: graph.load @fp8w.layers.0.attn.wqkv.amax : tensor<f32>
// The fprop reads a cast of the f32 master, made right before it with the
// cast scale.
// CHECK: %[[M:.*]] = graph.load @layers.0.attn.wqkv : tensor<32x16xf32>
// CHECK-NEXT: %[[C:.*]] = graph.load @fp8w.layers.0.attn.wqkv.cast_scale : tensor<f32>
// CHECK-NEXT: %[[W:.*]] = kernel.fused "layers.0.attn.wqkv.fp8" kind("elementwise") ins(%[[M]], %[[C]] : tensor<32x16xf32>, tensor<f32>) {
// CHECK-NEXT: ^bb0(%[[A0:.*]]: tensor<32x16xf32>, %[[A1:.*]]: tensor<f32>):
// CHECK-NEXT: %[[Q:.*]], %{{.*}} = fp8.quantize %[[A0]], %[[A1]] {amax_reduce = ["tensor"], tensor = "layers.0.attn.wqkv.w"}
// CHECK-NEXT: kernel.yield %[[Q]] : tensor<32x16xf8E4M3FN>
// CHECK-NEXT: } {layer = 0 : i64, section = "forward"} : tensor<32x16xf8E4M3FN>
// CHECK-NEXT: kernel.gemm %{{.*}}, %[[W]] scales_inv({{.*}}) {{.*}}param = "layers.0.attn.wqkv", role = "fprop"
// The dgrad reads a cast-transpose of the master: the row-major FP8 tensor
// is no result.
// CHECK: kernel.gemm {{.*}}param = "layers.0.mlp.w_down", role = "fprop"
// CHECK: %[[M2:.*]] = graph.load @layers.0.mlp.w_down : tensor<16x24xf32>
// CHECK-NEXT: %[[C2:.*]] = graph.load @fp8w.layers.0.mlp.w_down.cast_scale : tensor<f32>
// CHECK-NEXT: %[[T:.*]] = kernel.fused "layers.0.mlp.w_down.kmajor" kind("elementwise") ins(%[[M2]], %[[C2]] : tensor<16x24xf32>, tensor<f32>) {
// CHECK-NEXT: ^bb0(%[[B0:.*]]: tensor<16x24xf32>, %[[B1:.*]]: tensor<f32>):
// CHECK-NEXT: %[[Q2:.*]], %{{.*}} = fp8.quantize %[[B0]], %[[B1]]
// CHECK-NEXT: %[[T2:.*]], %{{.*}} = fp8.transpose %[[Q2]], %[[B1]] : (tensor<16x24xf8E4M3FN>, tensor<f32>) -> (tensor<24x16xf8E4M3FN>, tensor<f32>)
// CHECK-NEXT: kernel.yield %[[T2]] : tensor<24x16xf8E4M3FN>
// CHECK-NEXT: } {layer = 0 : i64, section = "backward"} : tensor<24x16xf8E4M3FN>
// CHECK-NEXT: kernel.gemm %{{.*}}, %[[T]] scales_inv({{.*}}) {{.*}}param = "layers.0.mlp.w_down", role = "dgrad"
// CHECK: kernel.fused "layers.0.attn.wqkv.kmajor"
// CHECK: kernel.gemm {{.*}}param = "layers.0.attn.wqkv", role = "dgrad"
// The optimizer takes the new weight's amax where it cast it, and copies
// the scale it cast with; it writes no FP8 weight.
// CHECK-LABEL: func.func @optimizer_step
// CHECK: %[[S:.*]] = graph.load @fp8.layers.0.attn.wqkv.w.scale : tensor<f32>
// CHECK: kernel.fused "optimizer.adamw" kind("multi_tensor")
// CHECK-NOT: fp8.quantize
// CHECK: fp8.amax %{{.*}} {amax_reduce = ["tensor"], tensor = "layers.0.attn.wqkv.w"}
// CHECK-NOT: fp8.quantize
// CHECK: graph.store %[[S]], @fp8w.layers.0.attn.wqkv.cast_scale : tensor<f32>
// CHECK-NEXT: graph.store %{{.*}}, @fp8w.layers.0.attn.wqkv.amax : tensor<f32>
// CHECK-NOT: @fp8w.layers.0.attn.wqkv :
// CHECK-LABEL: func.func @cache_weights()
// CHECK: %[[IS:.*]] = graph.load @fp8.layers.0.mlp.w_down.w.scale : tensor<f32>
// CHECK: kernel.fused "optimizer.fp8_weight_amax" kind("elementwise") ins(%{{.*}} : tensor<16x24xf32>) {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: fp8.amax
// CHECK-NOT: fp8.quantize
// CHECK: graph.store %[[IS]], @fp8w.layers.0.mlp.w_down.cast_scale : tensor<f32>

// Current scaling: the optimizer's scale kernels stay, and their scale
// (fp8w.<param>.scale) is what the step casts with; the cast kernels go.
// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv --octet-precision="recipe=current" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-adamw --octet-step-local-kmajor-weights --octet-step-local-fp8-weights | FileCheck %s --check-prefix=CUR
// CUR-NOT: graph.variable @fp8w.layers.0.attn.wqkv :
// CUR-NOT: cast_scale
// CUR-LABEL: func.func @train_microbatch
// CUR: %[[M:.*]] = graph.load @layers.0.attn.wqkv : tensor<32x16xf32>
// CUR-NEXT: %[[C:.*]] = graph.load @fp8w.layers.0.attn.wqkv.scale : tensor<f32>
// CUR-NEXT: kernel.fused "layers.0.attn.wqkv.fp8" kind("elementwise") ins(%[[M]], %[[C]] :
// CUR: kernel.fused "layers.0.attn.wqkv.kmajor"
// CUR-LABEL: func.func @optimizer_step
// CUR-NOT: "optimizer.fp8_weights"
// CUR: kernel.fused "optimizer.fp8_weight_scale"
// CUR-NOT: "optimizer.fp8_weights"
// CUR-NOT: graph.store {{.*}}, @fp8w.layers.0.attn.wqkv :
// CUR: graph.store {{.*}}, @fp8w.layers.0.attn.wqkv.scale :
// CUR-NEXT: graph.store {{.*}}, @fp8w.layers.0.attn.wqkv.scale_inv :
// CUR-LABEL: func.func @cache_weights()
// CUR-NOT: fp8.quantize
// CUR: return

// RUN: %octet-opt %s --octet-step-local-fp8-weights | FileCheck %s --check-prefix=ONE

// @fp8w.w is made in the step. @fp8w.g (ZeRO-1's: the gathered FP8 parts,
// no cast of the whole master) and @fp8w.r (read by a kernel other than a
// GEMM or a K-major transpose) stay state, as does @fp8w.o, which the
// optimizer casts from the master it had before its update.
// ONE-NOT: graph.variable @fp8w.w :
// ONE: graph.variable @fp8w.w.cast_scale : tensor<f32>
// ONE: graph.variable @fp8w.g :
// ONE: graph.variable @fp8w.r :
// ONE: graph.variable @fp8w.o :
// ONE-LABEL: func.func @train_microbatch
// ONE-NEXT: %[[G:.*]] = graph.load @fp8w.g :
// ONE-NEXT: %[[R:.*]] = graph.load @fp8w.r :
// ONE-NEXT: %[[O:.*]] = graph.load @fp8w.o :
// ONE-NEXT: %[[M:.*]] = graph.load @w : tensor<64x32xf32>
// ONE-NEXT: %[[C:.*]] = graph.load @fp8w.w.cast_scale : tensor<f32>
// ONE-NEXT: %[[W:.*]] = kernel.fused "w.fp8" kind("elementwise") ins(%[[M]], %[[C]] :
// ONE: kernel.gemm %arg0, %[[W]] scales_inv(%arg1, %arg2) {role = "fprop", transpose_b}
// ONE: kernel.gemm %arg0, %[[G]]
// ONE: kernel.fused "reads_r" kind("elementwise") ins(%[[R]] :
// ONE: kernel.gemm %arg0, %[[O]]
// ONE-LABEL: func.func @optimizer_step
// The weight's amax stays the optimizer's: an fp8.amax of the new weight
// in place of the cast (whose scale the kernel no longer reads).
// ONE: %[[U:.*]]:2 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins(%{{.*}}, %{{.*}} : tensor<64x32xf32>, tensor<64x32xf32>) {
// ONE-NEXT: ^bb0
// ONE-NEXT: %[[N:.*]] = graph.add
// ONE-NEXT: %[[A:.*]] = fp8.amax %[[N]] {tensor = "w.w"}
// ONE-NEXT: kernel.yield %[[N]], %[[A]] :
// ONE: kernel.fused "cast_o"
// ONE-NEXT: ^bb0
// ONE-NEXT: fp8.quantize
// ONE: graph.store %[[U]]#0, @w :
// ONE-NEXT: graph.store %arg1, @fp8w.w.cast_scale : tensor<f32>
// ONE-NEXT: graph.store %[[U]]#1, @fp8w.w.amax : tensor<f32>
// ONE-NOT: @fp8w.w :
// ONE: graph.store %{{.*}}, @fp8w.g :
// ONE: graph.store %{{.*}}, @fp8w.r :
// ONE: graph.store %{{.*}}, @fp8w.o :
module {
  graph.variable @w : tensor<64x32xf32> {init = "normal", init_std = 2.000000e-02 : f64, kind = "weight"}
  graph.variable @o : tensor<64x32xf32> {init = "normal", init_std = 2.000000e-02 : f64, kind = "weight"}
  graph.variable @r : tensor<64x32xf32> {init = "normal", init_std = 2.000000e-02 : f64, kind = "weight"}
  graph.variable @g : tensor<64x32xf32> {init = "normal", init_std = 2.000000e-02 : f64, kind = "weight"}
  graph.variable @fp8w.w : tensor<64x32xf8E4M3FN> {init = "zeros", kind = "state"}
  graph.variable @fp8w.w.amax : tensor<f32> {init = "zeros", kind = "state"}
  graph.variable @fp8w.g : tensor<64x32xf8E4M3FN> {init = "zeros", kind = "state"}
  graph.variable @fp8w.r : tensor<64x32xf8E4M3FN> {init = "zeros", kind = "state"}
  graph.variable @fp8w.o : tensor<64x32xf8E4M3FN> {init = "zeros", kind = "state"}
  func.func @train_microbatch(%x: tensor<16x32xf8E4M3FN>, %sx: tensor<f32>, %sw: tensor<f32>) -> (tensor<16x64xbf16>, tensor<16x64xbf16>, tensor<64x32xf8E4M3FN>, tensor<16x64xbf16>) {
    %w = graph.load @fp8w.w : tensor<64x32xf8E4M3FN>
    %g = graph.load @fp8w.g : tensor<64x32xf8E4M3FN>
    %r = graph.load @fp8w.r : tensor<64x32xf8E4M3FN>
    %o = graph.load @fp8w.o : tensor<64x32xf8E4M3FN>
    %y = kernel.gemm %x, %w scales_inv(%sx, %sw) {role = "fprop", transpose_b} : (tensor<16x32xf8E4M3FN>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x64xbf16>
    %yg = kernel.gemm %x, %g scales_inv(%sx, %sw) {role = "fprop", transpose_b} : (tensor<16x32xf8E4M3FN>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x64xbf16>
    %c = kernel.fused "reads_r" kind("elementwise") ins(%r : tensor<64x32xf8E4M3FN>) {
    ^bb0(%a: tensor<64x32xf8E4M3FN>):
      kernel.yield %a : tensor<64x32xf8E4M3FN>
    } : tensor<64x32xf8E4M3FN>
    %yo = kernel.gemm %x, %o scales_inv(%sx, %sw) {role = "fprop", transpose_b} : (tensor<16x32xf8E4M3FN>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x64xbf16>
    return %y, %yg, %c, %yo : tensor<16x64xbf16>, tensor<16x64xbf16>, tensor<64x32xf8E4M3FN>, tensor<16x64xbf16>
  }
  func.func @optimizer_step(%grad: tensor<64x32xf32>, %s: tensor<f32>, %part: tensor<32x32xf8E4M3FN>) {
    %w = graph.load @w : tensor<64x32xf32>
    %o = graph.load @o : tensor<64x32xf32>
    %r = graph.load @r : tensor<64x32xf32>
    %u:3 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins(%w, %grad, %s : tensor<64x32xf32>, tensor<64x32xf32>, tensor<f32>) {
    ^bb0(%a0: tensor<64x32xf32>, %a1: tensor<64x32xf32>, %a2: tensor<f32>):
      %n = graph.add %a0, %a1 : tensor<64x32xf32>
      %q, %m = fp8.quantize %n, %a2 {tensor = "w.w"} : (tensor<64x32xf32>, tensor<f32>) -> (tensor<64x32xf8E4M3FN>, tensor<f32>)
      kernel.yield %n, %q, %m : tensor<64x32xf32>, tensor<64x32xf8E4M3FN>, tensor<f32>
    } : tensor<64x32xf32>, tensor<64x32xf8E4M3FN>, tensor<f32>
    %qo:2 = kernel.fused "cast_o" kind("elementwise") ins(%o, %s : tensor<64x32xf32>, tensor<f32>) {
    ^bb0(%a0: tensor<64x32xf32>, %a1: tensor<f32>):
      %q, %m = fp8.quantize %a0, %a1 {tensor = "o.w"} : (tensor<64x32xf32>, tensor<f32>) -> (tensor<64x32xf8E4M3FN>, tensor<f32>)
      kernel.yield %q, %m : tensor<64x32xf8E4M3FN>, tensor<f32>
    } : tensor<64x32xf8E4M3FN>, tensor<f32>
    %no = kernel.fused "update_o" kind("elementwise") ins(%o, %grad : tensor<64x32xf32>, tensor<64x32xf32>) {
    ^bb0(%a0: tensor<64x32xf32>, %a1: tensor<64x32xf32>):
      %n = graph.add %a0, %a1 : tensor<64x32xf32>
      kernel.yield %n : tensor<64x32xf32>
    } : tensor<64x32xf32>
    %qr:2 = kernel.fused "cast_r" kind("elementwise") ins(%r, %s : tensor<64x32xf32>, tensor<f32>) {
    ^bb0(%a0: tensor<64x32xf32>, %a1: tensor<f32>):
      %q, %m = fp8.quantize %a0, %a1 {tensor = "r.w"} : (tensor<64x32xf32>, tensor<f32>) -> (tensor<64x32xf8E4M3FN>, tensor<f32>)
      kernel.yield %q, %m : tensor<64x32xf8E4M3FN>, tensor<f32>
    } : tensor<64x32xf8E4M3FN>, tensor<f32>
    %gathered = kernel.collective %part {comm_stream, group = "data", group_size = 2 : i64, in_place, kind = "all_gather", reduction = "sum"} : (tensor<32x32xf8E4M3FN>) -> tensor<64x32xf8E4M3FN>
    graph.store %u#0, @w : tensor<64x32xf32>
    graph.store %u#1, @fp8w.w : tensor<64x32xf8E4M3FN>
    graph.store %u#2, @fp8w.w.amax : tensor<f32>
    graph.store %gathered, @fp8w.g : tensor<64x32xf8E4M3FN>
    graph.store %qr#0, @fp8w.r : tensor<64x32xf8E4M3FN>
    graph.store %no, @o : tensor<64x32xf32>
    graph.store %qo#0, @fp8w.o : tensor<64x32xf8E4M3FN>
    return
  }
}
