// RUN: %octet-opt %s --octet-fused-to-gpu -split-input-file -verify-diagnostics

func.func @no_lowering(%x: tensor<4x256xf32>, %w: tensor<256x256xf32>) -> tensor<4x256xf32> {
  %y = kernel.fused "mm" kind("row") ins(%x, %w : tensor<4x256xf32>, tensor<256x256xf32>) {
  ^bb0(%a: tensor<4x256xf32>, %b: tensor<256x256xf32>):
    // expected-error @below {{has no GPU lowering in octet-fused-to-gpu}}
    %m = graph.matmul %a, %b : (tensor<4x256xf32>, tensor<256x256xf32>) -> tensor<4x256xf32>
    kernel.yield %m : tensor<4x256xf32>
  } : tensor<4x256xf32>
  return %y : tensor<4x256xf32>
}

// -----

func.func @ragged(%x: tensor<2x25xf32>) -> tensor<2x25xf32> {
  // expected-error @below {{has a row, piece or tensor length with a common divisor of 50; GPU codegen needs a multiple of 4 elements}}
  %y = kernel.fused "odd" kind("elementwise") ins(%x : tensor<2x25xf32>) {
  ^bb0(%a: tensor<2x25xf32>):
    %s = graph.silu %a : tensor<2x25xf32>
    kernel.yield %s : tensor<2x25xf32>
  } : tensor<2x25xf32>
  return %y : tensor<2x25xf32>
}

// -----

func.func @long_row(%x: tensor<2x200000xf32>, %w: tensor<200000xf32>) -> tensor<2x200000xf32> {
  %y = kernel.fused "long" kind("row") ins(%x, %w : tensor<2x200000xf32>, tensor<200000xf32>) {
  ^bb0(%a: tensor<2x200000xf32>, %b: tensor<200000xf32>):
    // expected-error @below {{row of 200000 elements is too long for a register-resident row kernel}}
    %n = graph.rms_norm %a, %b {eps = 1.0e-5 : f64} : (tensor<2x200000xf32>, tensor<200000xf32>) -> tensor<2x200000xf32>
    kernel.yield %n : tensor<2x200000xf32>
  } : tensor<2x200000xf32>
  return %y : tensor<2x200000xf32>
}
