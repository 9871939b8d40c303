// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK: graph.variable @layers.0.attn.wq : tensor<64x64xf32> {hf_name = "model.layers.0.self_attn.q_proj.weight", init = "normal", init_std = 2.000000e-02 : f64, kind = "weight"}
graph.variable @layers.0.attn.wq : tensor<64x64xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64, hf_name = "model.layers.0.self_attn.q_proj.weight"}
// CHECK: graph.variable @final_norm : tensor<64xf32> {init = "ones", kind = "norm"}
graph.variable @final_norm : tensor<64xf32> {kind = "norm", init = "ones"}
// CHECK: graph.variable @step : tensor<i64> {init = "zeros", kind = "state"}
graph.variable @step : tensor<i64> {kind = "state", init = "zeros"}
