// RUN: %octet-opt %s | %octet-opt | FileCheck %s

graph.variable @step : tensor<i64> {kind = "state", init = "zeros"}
// CHECK-LABEL: func.func @write
func.func @write(%v: tensor<i64>) {
  // CHECK: graph.store %{{.*}}, @step : tensor<i64>
  graph.store %v, @step : tensor<i64>
  return
}
