// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @past_the_end(%x: tensor<2x8x512xf32>) {
  // expected-error @below {{slice [448, 576) does not fit dimension 2 of size 512}}
  %k = graph.slice %x {dim = 2 : i64, offset = 448 : i64} : (tensor<2x8x512xf32>) -> tensor<2x8x128xf32>
  return
}

// -----

func.func @bad_dim(%x: tensor<2x8xf32>) {
  // expected-error @below {{dim 2 is out of range for rank 2}}
  %k = graph.slice %x {dim = 2 : i64, offset = 0 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @other_dim_changes(%x: tensor<2x8xf32>) {
  // expected-error @below {{result}}
  %k = graph.slice %x {dim = 1 : i64, offset = 0 : i64} : (tensor<2x8xf32>) -> tensor<1x4xf32>
  return
}

// -----

func.func @concat_total(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) {
  // expected-error @below {{operands add up to 8 along dim 1 but the result has 9}}
  %j = graph.concat %a, %b {dim = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x9xf32>
  return
}

// -----

func.func @concat_other_dim(%a: tensor<2x4xf32>, %b: tensor<3x4xf32>) {
  // expected-error @below {{operand}}
  %j = graph.concat %a, %b {dim = 1 : i64} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x8xf32>
  return
}
