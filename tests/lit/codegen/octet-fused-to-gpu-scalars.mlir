// RUN: %octet-opt %s --octet-fused-to-gpu | FileCheck %s
// A kernel of scalars alone (the pipeline's loss sum over its
// microbatches) has no row to lay out: one thread adds, as the whole-op
// kernels' scalar ops do.
// CHECK: kernel.fused "pipeline.loss_sum"
// CHECK: launch = [#kernel.launch<@pipeline_loss_sum::@pipeline_loss_sum_scalars, grid = 1, block = 32>]
// CHECK: gpu.func @pipeline_loss_sum_scalars(%[[SUM:.*]]: memref<1xf32, 1>, %[[LOSS:.*]]: memref<1xf32, 1>, %[[OUT:.*]]: memref<1xf32, 1>)
// CHECK: scf.if
// CHECK-DAG: %[[L:.*]] = memref.load %[[LOSS]]
// CHECK-DAG: %[[S:.*]] = memref.load %[[SUM]]
// CHECK: %[[T:.*]] = arith.addf %[[S]], %[[L]] : f32
// CHECK: memref.store %[[T]], %[[OUT]]
func.func @loss_sum(%sum: tensor<f32>, %loss: tensor<f32>) -> tensor<f32> {
  %r = kernel.fused "pipeline.loss_sum" kind("elementwise") ins(%sum, %loss : tensor<f32>, tensor<f32>) {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = graph.add %a, %b : tensor<f32>
    kernel.yield %s : tensor<f32>
  } : tensor<f32>
  return %r : tensor<f32>
}
