// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @count(%x: tensor<2x8x64xf32>) {
  // expected-error @below {{element count changes from 1024 to 512}}
  %h = graph.reshape %x : (tensor<2x8x64xf32>) -> tensor<2x8x2x16xf32>
  return
}

// -----

func.func @dtype(%x: tensor<2x8x64xf32>) {
  // expected-error @below {{expected result element type 'f32' (that of input), got 'bf16'}}
  %h = graph.reshape %x : (tensor<2x8x64xf32>) -> tensor<2x8x4x16xbf16>
  return
}
