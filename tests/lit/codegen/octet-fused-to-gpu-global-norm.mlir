// RUN: %octet-opt %s --octet-fused-to-gpu | FileCheck %s
// The global norm of a model's gradients: a block reads one chunk of one
// tensor (256 threads of 16 loads of 16 bytes: 16384 f32 or 32768 bf16
// elements), found by a binary search over the tensors' first blocks
// (starts) with the tensor's class (element type), length and argument
// table entry in its record, instead of a branch per tensor. 40000 f32
// elements take 3 blocks, 37000 bf16 2, the others 1 each; the partial
// sums are added in order by one block, 8 loads a thread at a time.

// CHECK: kernel.fused "gnorm"
// CHECK: } {arg_table
// CHECK-SAME: launch = [#kernel.launch<@gnorm::@gnorm_0_partial, grid = 7, block = 256>, #kernel.launch<@gnorm::@gnorm_0, grid = 1, block = 256>]
// CHECK-SAME: workspace_bytes = 28
// CHECK-DAG: memref.global "private" constant @gnorm_0_records : memref<12xi64> = dense<[0, 40000, 0, 1, 37000, 1, 0, 999, 2, 0, 5, 3]>
// CHECK-DAG: memref.global "private" constant @gnorm_0_starts : memref<4xi64> = dense<[0, 3, 5, 6]>
// CHECK: gpu.func @gnorm_0_partial(%[[TABLE:.*]]: memref<5xi64, 1>, %[[WS:.*]]: memref<7xf32, 1>)
// CHECK: %[[STARTS:.*]] = memref.get_global @gnorm_0_starts
// CHECK: %[[RECORDS:.*]] = memref.get_global @gnorm_0_records
// CHECK: %[[FOUND:.*]]:2 = scf.for
// CHECK: memref.load %[[STARTS]]
// CHECK: arith.cmpi ule, %{{.*}}, %block_id_x
// CHECK: scf.yield
// CHECK: memref.load %[[STARTS]][%[[FOUND]]#0]
// CHECK: %[[CLASS:.*]] = memref.load %[[RECORDS]]
// CHECK: %[[ADDRESS:.*]] = memref.load %[[TABLE]]
// CHECK: %[[LOW:.*]] = arith.index_cast %[[ADDRESS]]
// CHECK: arith.andi %[[LOW]], %c15
// The f32 tensors: 16-byte loads where the address is aligned and the
// chunk holds one, else one element a load.
// CHECK: scf.if %{{.*}} -> (f32) {
// CHECK: %[[WHOLE:.*]] = arith.cmpi uge, %{{.*}}, %c4
// CHECK: %[[VECTORS:.*]] = arith.andi %{{.*}}, %[[WHOLE]]
// CHECK: scf.if %[[VECTORS]] -> (f32) {
// CHECK-COUNT-16: vector.load %{{.*}} {alignment = 16 : i64} : memref<?xf32, 1>, vector<4xf32>
// CHECK-COUNT-16: math.fma %{{.*}} : vector<4xf32>
// CHECK: vector.reduction <add>
// CHECK: } else {
// CHECK: scf.for
// CHECK-COUNT-16: memref.load %{{.*}} : memref<?xf32, 1>
// CHECK: } else {
// The bf16 tensors.
// CHECK: %[[WHOLE8:.*]] = arith.cmpi uge, %{{.*}}, %c8
// CHECK: %[[VECTORS8:.*]] = arith.andi %{{.*}}, %[[WHOLE8]]
// CHECK: scf.if %[[VECTORS8]] -> (f32) {
// CHECK-COUNT-16: vector.load %{{.*}} {alignment = 16 : i64} : memref<?xbf16, 1>, vector<8xbf16>
// CHECK: } else {
// CHECK: scf.for
// CHECK-COUNT-16: memref.load %{{.*}} : memref<?xbf16, 1>
// CHECK-NOT: vector.load
// CHECK: memref.store %{{.*}}, %[[WS]][%block_id_x] : memref<7xf32, 1>
// CHECK: gpu.return
// CHECK: gpu.func @gnorm_0(%{{.*}}: memref<5xi64, 1>, %[[WS2:.*]]: memref<7xf32, 1>)
// CHECK: scf.for %{{.*}} = %thread_id_x to %{{.*}} step %c2048
// CHECK-COUNT-8: memref.load %[[WS2]]
// CHECK: math.sqrt
func.func @norm(%a: tensor<40000xf32>, %b: tensor<37000xbf16>, %c: tensor<3x333xf32>, %d: tensor<5xf32>) -> tensor<f32> {
  %n = kernel.fused "gnorm" kind("elementwise") ins(%a, %b, %c, %d : tensor<40000xf32>, tensor<37000xbf16>, tensor<3x333xf32>, tensor<5xf32>) {
  ^bb0(%x: tensor<40000xf32>, %y: tensor<37000xbf16>, %z: tensor<3x333xf32>, %w: tensor<5xf32>):
    %r = graph.global_norm %x, %y, %z, %w {scale = 5.000000e-01 : f64} : (tensor<40000xf32>, tensor<37000xbf16>, tensor<3x333xf32>, tensor<5xf32>) -> tensor<f32>
    kernel.yield %r : tensor<f32>
  } : tensor<f32>
  return %n : tensor<f32>
}
