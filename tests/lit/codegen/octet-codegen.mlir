// The whole path: kernel.fused → gpu.func → NVVM → PTX for sm_90a, then
// ptxas assembles it (CI checks every emitted PTX this way).
// RUN: %octet-opt %s --octet-codegen | FileCheck %s
// RUN: rm -rf %t && %octet-opt %s --octet-codegen | %octet-opt '--octet-emit-ptx=dir=%t ptxas=none' -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t/swiglu_q.ptx
// RUN: FileCheck %s --check-prefix=JSON < %t/kernels.json
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t/swiglu_q.ptx -o %t/swiglu_q.cubin %}
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t/rope.ptx -o %t/rope.cubin %}

// CHECK: kernel.fused "swiglu_q"
// CHECK: gpu.binary @swiglu_q
// CHECK: gpu.binary @rope

// PTX: .version 8.1
// PTX: .target sm_90a
// PTX: .entry swiglu_q(
// PTX: ld.global.v4.b32
// PTX: cvt.rn.satfinite.e4m3x2.f32
// PTX: shfl.sync.bfly.b32
// PTX: atom.global.max.u32

// JSON: "kernels": [
// JSON: "launches": [
// JSON: "grid": 2
// JSON: "kernel": "swiglu_q"
// JSON: "name": "swiglu_q"
// JSON: "zero_results": [
// JSON-NEXT: 1

func.func @mlp(%g: tensor<2x4096xbf16>, %u: tensor<2x4096xbf16>, %s: tensor<f32>,
               %q: tensor<1x2x4x128xbf16>, %pos: tensor<1x2xi32>) -> (tensor<2x4096xf8E4M3FN>, tensor<f32>, tensor<1x2x4x128xbf16>) {
  %a, %m = kernel.fused "swiglu_q" kind("row") ins(%g, %u, %s : tensor<2x4096xbf16>, tensor<2x4096xbf16>, tensor<f32>) {
  ^bb0(%x: tensor<2x4096xbf16>, %y: tensor<2x4096xbf16>, %z: tensor<f32>):
    %h = graph.swiglu %x, %y : tensor<2x4096xbf16>
    %q8, %amax = fp8.quantize %h, %z : (tensor<2x4096xbf16>, tensor<f32>) -> (tensor<2x4096xf8E4M3FN>, tensor<f32>)
    kernel.yield %q8, %amax : tensor<2x4096xf8E4M3FN>, tensor<f32>
  } : tensor<2x4096xf8E4M3FN>, tensor<f32>
  %r = kernel.fused "rope" kind("row") ins(%q, %pos : tensor<1x2x4x128xbf16>, tensor<1x2xi32>) {
  ^bb0(%x: tensor<1x2x4x128xbf16>, %p: tensor<1x2xi32>):
    %o = graph.rope %x, %p {theta = 500000.0 : f64} : (tensor<1x2x4x128xbf16>, tensor<1x2xi32>) -> tensor<1x2x4x128xbf16>
    kernel.yield %o : tensor<1x2x4x128xbf16>
  } : tensor<1x2x4x128xbf16>
  return %a, %m, %r : tensor<2x4096xf8E4M3FN>, tensor<f32>, tensor<1x2x4x128xbf16>
}
