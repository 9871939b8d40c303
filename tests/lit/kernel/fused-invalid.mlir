// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @bad_kind(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  // expected-error @below {{kind must be row, elementwise or multi_tensor; got 'tile'}}
  %y = kernel.fused "k" kind("tile") ins(%x : tensor<8x64xf32>) {
  ^bb0(%a: tensor<8x64xf32>):
    %s = graph.silu %a : tensor<8x64xf32>
    kernel.yield %s : tensor<8x64xf32>
  } : tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

func.func @yield_types(%x: tensor<8x64xf32>) -> tensor<8x64xbf16> {
  // expected-error @below {{yields 1 values whose types differ from the op's results}}
  %y = kernel.fused "k" kind("row") ins(%x : tensor<8x64xf32>) {
  ^bb0(%a: tensor<8x64xf32>):
    kernel.yield %a : tensor<8x64xf32>
  } : tensor<8x64xbf16>
  return %y : tensor<8x64xbf16>
}

// -----

func.func @arg_types(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  // expected-error @below {{body argument #0 has type 'tensor<8x64xbf16>' but input #0 is 'tensor<8x64xf32>'}}
  %y = kernel.fused "k" kind("row") ins(%x : tensor<8x64xf32>) {
  ^bb0(%a: tensor<8x64xbf16>):
    %c = graph.cast %a : (tensor<8x64xbf16>) -> tensor<8x64xf32>
    kernel.yield %c : tensor<8x64xf32>
  } : tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

func.func @nested_gemm(%x: tensor<8x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<8x64xf32> {
  %y = kernel.fused "k" kind("row") ins(%x, %w : tensor<8x64xbf16>, tensor<64x64xbf16>) {
  ^bb0(%a: tensor<8x64xbf16>, %b: tensor<64x64xbf16>):
    // expected-error @below {{cannot be fused into a kernel: a kernel.fused body holds only graph and fp8 tensor ops}}
    %d = kernel.gemm %a, %b : (tensor<8x64xbf16>, tensor<64x64xbf16>) -> tensor<8x64xf32>
    kernel.yield %d : tensor<8x64xf32>
  } : tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

graph.variable @w : tensor<64xf32> {kind = "norm", init = "ones"}
func.func @state(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %y = kernel.fused "k" kind("row") ins(%x : tensor<8x64xf32>) {
  ^bb0(%a: tensor<8x64xf32>):
    // expected-error @below {{cannot be fused into a kernel}}
    %w = graph.load @w : tensor<64xf32>
    kernel.yield %a : tensor<8x64xf32>
  } : tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

func.func @captures(%x: tensor<8x64xf32>, %z: tensor<8x64xf32>) -> tensor<8x64xf32> {
  // expected-note @below {{required by region isolation constraints}}
  %y = kernel.fused "k" kind("row") ins(%x : tensor<8x64xf32>) {
  ^bb0(%a: tensor<8x64xf32>):
    // expected-error @below {{using value defined outside the region}}
    %s = graph.add %a, %z : tensor<8x64xf32>
    kernel.yield %s : tensor<8x64xf32>
  } : tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}
