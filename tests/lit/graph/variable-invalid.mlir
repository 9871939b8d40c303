// RUN: %octet-opt %s -split-input-file -verify-diagnostics

// expected-error @below {{kind must be one of weight, bias, norm, embedding, state; got 'activation'}}
graph.variable @x : tensor<4xf32> {kind = "activation", init = "zeros"}

// -----

// expected-error @below {{init = "normal" needs init_std}}
graph.variable @w : tensor<4x4xf32> {kind = "weight", init = "normal"}

// -----

// expected-error @below {{init must be one of normal, zeros, ones; got 'uniform'}}
graph.variable @w : tensor<4x4xf32> {kind = "weight", init = "uniform"}

// -----

// expected-error @below {{variables need a static shape}}
graph.variable @w : tensor<?x4xf32> {kind = "weight", init = "zeros"}
