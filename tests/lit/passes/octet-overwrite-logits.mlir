// RUN: %octet-opt %s --octet-overwrite-logits | FileCheck %s
// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-bf16-activations --octet-lower-to-kernel --octet-overwrite-logits | FileCheck %s --check-prefix=PIPELINE

// The loss kernel reads the logits first; the gradient kernel is their last
// reader, so it writes over them (input #1).
// CHECK-LABEL: func.func @train_microbatch
// CHECK: kernel.fused "cross_entropy" kind("row")
// CHECK-NOT: overwrites
// CHECK: } : tensor<f32>
// CHECK: kernel.fused "cross_entropy_grad" kind("row")
// CHECK: } {overwrites = array<i64: 1>} : tensor<2x4x32xbf16>

// A kernel reads the logits after the gradient: no mark.
// CHECK-LABEL: func.func @read_after
// CHECK-NOT: overwrites
// CHECK: return

// The logits are the program's input (the host's bytes): no mark.
// CHECK-LABEL: func.func @logits_in
// CHECK-NOT: overwrites
// CHECK: return

// The gradient kernel computes more than the gradient, whose lowering
// would not read each element before writing it: no mark.
// CHECK-LABEL: func.func @fused_more
// CHECK-NOT: overwrites
// CHECK: return

// Through autodiff and lowering: the train step's gradient kernel takes the
// logits' bytes; evaluation has no gradient.
// PIPELINE-LABEL: func.func @train_microbatch
// PIPELINE: kernel.fused "cross_entropy_grad" kind("row")
// PIPELINE: } {layer = -1 : i64, overwrites = array<i64: 1>, section = "backward"}
// PIPELINE-NOT: overwrites

module {
  func.func @train_microbatch(%x: tensor<8x16xbf16>, %w: tensor<32x16xbf16>, %labels: tensor<2x4xi32>, %mask: tensor<2x4xf32>) -> (tensor<f32>, tensor<2x4x32xbf16>) {
    %logits = kernel.gemm %x, %w {param = "lm_head", role = "fprop", transpose_b} : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
    %l3 = graph.reshape %logits : (tensor<8x32xbf16>) -> tensor<2x4x32xbf16>
    %loss = kernel.fused "cross_entropy" kind("row") ins(%l3, %labels, %mask : tensor<2x4x32xbf16>, tensor<2x4xi32>, tensor<2x4xf32>) {
    ^bb0(%a: tensor<2x4x32xbf16>, %b: tensor<2x4xi32>, %c: tensor<2x4xf32>):
      %l = graph.cross_entropy %a, %b, %c : (tensor<2x4x32xbf16>, tensor<2x4xi32>, tensor<2x4xf32>) -> tensor<f32>
      kernel.yield %l : tensor<f32>
    } : tensor<f32>
    %one = graph.fill {value = 1.0 : f64} : tensor<f32>
    %dl = kernel.fused "cross_entropy_grad" kind("row") ins(%one, %l3, %labels, %mask : tensor<f32>, tensor<2x4x32xbf16>, tensor<2x4xi32>, tensor<2x4xf32>) {
    ^bb0(%s: tensor<f32>, %a: tensor<2x4x32xbf16>, %b: tensor<2x4xi32>, %c: tensor<2x4xf32>):
      %g = graph.cross_entropy_grad %s, %a, %b, %c : (tensor<f32>, tensor<2x4x32xbf16>, tensor<2x4xi32>, tensor<2x4xf32>) -> tensor<2x4x32xbf16>
      kernel.yield %g : tensor<2x4x32xbf16>
    } : tensor<2x4x32xbf16>
    return %loss, %dl : tensor<f32>, tensor<2x4x32xbf16>
  }
  func.func @read_after(%x: tensor<8x16xbf16>, %w: tensor<32x16xbf16>, %labels: tensor<2x4xi32>, %mask: tensor<2x4xf32>) -> (tensor<2x4x32xbf16>, tensor<8x32xbf16>) {
    %logits = kernel.gemm %x, %w {param = "lm_head", role = "fprop", transpose_b} : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
    %l3 = graph.reshape %logits : (tensor<8x32xbf16>) -> tensor<2x4x32xbf16>
    %one = graph.fill {value = 1.0 : f64} : tensor<f32>
    %dl = kernel.fused "cross_entropy_grad" kind("row") ins(%one, %l3, %labels, %mask : tensor<f32>, tensor<2x4x32xbf16>, tensor<2x4xi32>, tensor<2x4xf32>) {
    ^bb0(%s: tensor<f32>, %a: tensor<2x4x32xbf16>, %b: tensor<2x4xi32>, %c: tensor<2x4xf32>):
      %g = graph.cross_entropy_grad %s, %a, %b, %c : (tensor<f32>, tensor<2x4x32xbf16>, tensor<2x4xi32>, tensor<2x4xf32>) -> tensor<2x4x32xbf16>
      kernel.yield %g : tensor<2x4x32xbf16>
    } : tensor<2x4x32xbf16>
    %twice = kernel.fused "twice" kind("elementwise") ins(%logits : tensor<8x32xbf16>) {
    ^bb0(%a: tensor<8x32xbf16>):
      %t = graph.add %a, %a : tensor<8x32xbf16>
      kernel.yield %t : tensor<8x32xbf16>
    } : tensor<8x32xbf16>
    return %dl, %twice : tensor<2x4x32xbf16>, tensor<8x32xbf16>
  }
  func.func @logits_in(%l3: tensor<2x4x32xbf16>, %labels: tensor<2x4xi32>, %mask: tensor<2x4xf32>) -> tensor<2x4x32xbf16> {
    %one = graph.fill {value = 1.0 : f64} : tensor<f32>
    %dl = kernel.fused "cross_entropy_grad" kind("row") ins(%one, %l3, %labels, %mask : tensor<f32>, tensor<2x4x32xbf16>, tensor<2x4xi32>, tensor<2x4xf32>) {
    ^bb0(%s: tensor<f32>, %a: tensor<2x4x32xbf16>, %b: tensor<2x4xi32>, %c: tensor<2x4xf32>):
      %g = graph.cross_entropy_grad %s, %a, %b, %c : (tensor<f32>, tensor<2x4x32xbf16>, tensor<2x4xi32>, tensor<2x4xf32>) -> tensor<2x4x32xbf16>
      kernel.yield %g : tensor<2x4x32xbf16>
    } : tensor<2x4x32xbf16>
    return %dl : tensor<2x4x32xbf16>
  }
  func.func @fused_more(%x: tensor<8x16xbf16>, %w: tensor<32x16xbf16>, %labels: tensor<2x4xi32>, %mask: tensor<2x4xf32>) -> tensor<2x4x32xbf16> {
    %logits = kernel.gemm %x, %w {param = "lm_head", role = "fprop", transpose_b} : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
    %l3 = graph.reshape %logits : (tensor<8x32xbf16>) -> tensor<2x4x32xbf16>
    %one = graph.fill {value = 1.0 : f64} : tensor<f32>
    %dl = kernel.fused "cross_entropy_grad" kind("row") ins(%one, %l3, %labels, %mask : tensor<f32>, tensor<2x4x32xbf16>, tensor<2x4xi32>, tensor<2x4xf32>) {
    ^bb0(%s: tensor<f32>, %a: tensor<2x4x32xbf16>, %b: tensor<2x4xi32>, %c: tensor<2x4xf32>):
      %g = graph.cross_entropy_grad %s, %a, %b, %c : (tensor<f32>, tensor<2x4x32xbf16>, tensor<2x4xi32>, tensor<2x4xf32>) -> tensor<2x4x32xbf16>
      %h = graph.add %g, %a : tensor<2x4x32xbf16>
      kernel.yield %h : tensor<2x4x32xbf16>
    } : tensor<2x4x32xbf16>
    return %dl : tensor<2x4x32xbf16>
  }
}
