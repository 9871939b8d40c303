// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @type_change(%x: tensor<2x8xf32>) {
  // expected-error @below {{requires the same type for all operands and results}}
  %s = "graph.save"(%x) : (tensor<2x8xf32>) -> tensor<2x8xbf16>
  return
}
