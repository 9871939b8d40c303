// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @shape(%x: tensor<2x8xf32>) {
  // expected-error @below {{expected result of shape [2, 8], got [16]}}
  %b = graph.cast %x : (tensor<2x8xf32>) -> tensor<16xbf16>
  return
}

// -----

func.func @integer(%x: tensor<2x8xi32>) {
  // expected-error @below {{operand #0 must be tensor of floating-point values}}
  %b = graph.cast %x : (tensor<2x8xi32>) -> tensor<2x8xbf16>
  return
}
