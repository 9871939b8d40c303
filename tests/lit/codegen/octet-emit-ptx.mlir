// octet-emit-ptx writes one PTX file per gpu.binary (and a cubin where
// ptxas is found) and kernels.json; without a folder it refuses.
// RUN: rm -rf %t && %octet-opt %s --octet-codegen | %octet-opt --octet-emit-ptx=dir=%t -o /dev/null
// RUN: ls %t | FileCheck %s
// RUN: FileCheck %s --check-prefix=JSON < %t/kernels.json
// RUN: not %octet-opt %s --octet-emit-ptx 2>&1 | FileCheck %s --check-prefix=NODIR
// RUN: not %octet-opt %s --octet-emit-ptx=dir=%t/x 2>&1 | FileCheck %s --check-prefix=NOBIN

// CHECK: act.ptx
// CHECK: kernels.json

// JSON: "bytes": 4096
// JSON: "dtype": "bf16"
// JSON: "role": "input"
// JSON: "shape": [
// JSON-NEXT: 8
// JSON-NEXT: 256
// JSON: "role": "result"
// JSON: "module": "act"
// JSON: "ptx": "act.ptx"

// NODIR: octet-emit-ptx needs dir=<folder>
// NOBIN: no gpu.binary to emit: run the codegen pipeline (octet-codegen) first

func.func @mlp_act(%x: tensor<8x256xbf16>) -> tensor<8x256xbf16> {
  %y = kernel.fused "act" kind("elementwise") ins(%x : tensor<8x256xbf16>) {
  ^bb0(%a: tensor<8x256xbf16>):
    %s = graph.gelu %a {approximate = "tanh"} : tensor<8x256xbf16>
    kernel.yield %s : tensor<8x256xbf16>
  } : tensor<8x256xbf16>
  return %y : tensor<8x256xbf16>
}
