// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @increment
func.func @increment(%s: tensor<i64>) -> tensor<i64> {
  // CHECK: graph.increment %{{.*}} : tensor<i64>
  %s1 = graph.increment %s : tensor<i64>
  return %s1 : tensor<i64>
}
