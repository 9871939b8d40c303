// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff=recompute-rope=true --cse --octet-fuse-qkv --cse --octet-save-fused-outputs | FileCheck %s
// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv --cse --octet-save-fused-outputs | FileCheck %s --check-prefix=ROTATED
// RUN: %octet-opt %s --octet-save-fused-outputs | FileCheck %s --check-prefix=PARTS

// With RoPE recomputed in the backward (pipeline stages: recompute-rope),
// q, k and v are all saved before it, and the fused QKV and gate/up GEMM
// outputs are saved whole, once; the forward
// reads its slices of the GEMM output, the backward slices of the save,
// each made where the backward first reads it.
// CHECK-LABEL: func.func @train_microbatch
// CHECK: %[[QKV:.*]] = graph.linear %{{.*}} {param = "layers.0.attn.wqkv"}
// CHECK-NEXT: %[[Q:.*]] = graph.slice %[[QKV]] {dim = 2 : i64, offset = 0 : i64}
// CHECK-NEXT: %[[K:.*]] = graph.slice %[[QKV]] {dim = 2 : i64, offset = 16 : i64}
// CHECK-NEXT: %[[V:.*]] = graph.slice %[[QKV]] {dim = 2 : i64, offset = 24 : i64}
// CHECK-NEXT: %[[QKVS:.*]] = graph.save %[[QKV]] : tensor<2x4x32xf32>
// CHECK-NOT: graph.save %[[Q]]
// CHECK-NOT: graph.save %[[K]]
// CHECK-NOT: graph.save %[[V]]
// CHECK: %[[GU:.*]] = graph.linear %{{.*}} {param = "layers.0.mlp.w_gate_up"}
// CHECK-NEXT: %[[G:.*]] = graph.slice %[[GU]] {dim = 2 : i64, offset = 0 : i64}
// CHECK-NEXT: %[[U:.*]] = graph.slice %[[GU]] {dim = 2 : i64, offset = 24 : i64}
// CHECK-NEXT: %[[GUS:.*]] = graph.save %[[GU]] : tensor<2x4x48xf32>
// CHECK-NEXT: graph.swiglu %[[G]], %[[U]] :
// CHECK-NOT: graph.save %[[G]]
// CHECK-NOT: graph.save %[[U]]
// CHECK: %[[GB:.*]] = graph.slice %[[GUS]] {dim = 2 : i64, offset = 0 : i64}
// CHECK-NEXT: %[[UB:.*]] = graph.slice %[[GUS]] {dim = 2 : i64, offset = 24 : i64}
// CHECK-NEXT: graph.swiglu %[[GB]], %[[UB]] {recomputed}
// CHECK: graph.swiglu_grad %{{.*}}, %[[GB]], %[[UB]]
// CHECK: graph.slice %[[QKVS]] {dim = 2 : i64, offset = 24 : i64}
// CHECK: graph.slice %[[QKVS]] {dim = 2 : i64, offset = 16 : i64}
// CHECK: graph.slice %[[QKVS]] {dim = 2 : i64, offset = 0 : i64}
// CHECK: graph.attention_grad

// Where RoPE's outputs are saved (the default), of the QKV output only v
// is: its slice stays saved as it is, the gate/up output is saved whole.
// ROTATED-LABEL: func.func @train_microbatch
// ROTATED: %[[QKV:.*]] = graph.linear %{{.*}} {param = "layers.0.attn.wqkv"}
// ROTATED-NOT: graph.save %[[QKV]]
// ROTATED: %[[V:.*]] = graph.slice %[[QKV]] {dim = 2 : i64, offset = 24 : i64}
// ROTATED-NEXT: graph.save %[[V]] : tensor<2x4x8xf32>
// ROTATED: %[[GU:.*]] = graph.linear %{{.*}} {param = "layers.0.mlp.w_gate_up"}
// ROTATED-NOT: graph.save %[[QKV]]
// ROTATED: graph.save %[[GU]] : tensor<2x4x48xf32>

// Saved slices of fewer bytes than their source stay saved as they are:
// saving the whole would keep more memory. Where they cover it, the
// source's own save (here after them) serves them all.
// PARTS-LABEL: func.func @part_saved
// PARTS: %[[A:.*]] = graph.slice %arg0 {dim = 1 : i64, offset = 0 : i64}
// PARTS-NEXT: %[[AS:.*]] = graph.save %[[A]] : tensor<4x2xf32>
// PARTS-NEXT: return %[[AS]]
func.func @part_saved(%x: tensor<4x6xf32>) -> tensor<4x2xf32> {
  %a = graph.slice %x {dim = 1 : i64, offset = 0 : i64} : (tensor<4x6xf32>) -> tensor<4x2xf32>
  %as = graph.save %a : tensor<4x2xf32>
  return %as : tensor<4x2xf32>
}

// PARTS-LABEL: func.func @whole_saved_too
// PARTS-NEXT: %[[S:.*]] = graph.save %arg0 : tensor<4x6xf32>
// PARTS-NEXT: %[[A:.*]] = graph.slice %[[S]] {dim = 1 : i64, offset = 0 : i64}
// PARTS-NEXT: %[[B:.*]] = graph.slice %[[S]] {dim = 1 : i64, offset = 2 : i64}
// PARTS-NEXT: return %[[A]], %[[B]], %[[S]]
func.func @whole_saved_too(%x: tensor<4x6xf32>) -> (tensor<4x2xf32>, tensor<4x4xf32>, tensor<4x6xf32>) {
  %a = graph.slice %x {dim = 1 : i64, offset = 0 : i64} : (tensor<4x6xf32>) -> tensor<4x2xf32>
  %b = graph.slice %x {dim = 1 : i64, offset = 2 : i64} : (tensor<4x6xf32>) -> tensor<4x4xf32>
  %as = graph.save %a : tensor<4x2xf32>
  %bs = graph.save %b : tensor<4x4xf32>
  %s = graph.save %x : tensor<4x6xf32>
  return %as, %bs, %s : tensor<4x2xf32>, tensor<4x4xf32>, tensor<4x6xf32>
}
