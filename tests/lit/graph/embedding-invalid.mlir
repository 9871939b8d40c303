// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @wrong_width(%table: tensor<256x64xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @below {{expected result of shape [2, 8, 64], got [2, 8, 32]}}
  %h = graph.embedding %table, %ids : (tensor<256x64xf32>, tensor<2x8xi32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @table_rank(%table: tensor<256xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @below {{expected table of rank 2, got rank 1 [256]}}
  %h = graph.embedding %table, %ids : (tensor<256xf32>, tensor<2x8xi32>) -> tensor<2x8x1xf32>
  return
}

// -----

func.func @float_ids(%table: tensor<256x64xf32>, %ids: tensor<2x8xf32>) {
  // expected-error @below {{operand #1 must be tensor of 32-bit signless integer or 64-bit signless integer values}}
  %h = graph.embedding %table, %ids : (tensor<256x64xf32>, tensor<2x8xf32>) -> tensor<2x8x64xf32>
  return
}
