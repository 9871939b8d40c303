// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv --octet-precision="amax-history-len=4" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-adamw | FileCheck %s

// Next step's FP8 weights, their K-major copies and amaxes are state the
// optimizer writes and an init function fills once.
// CHECK: module attributes {{{.*}}octet.init_functions = ["cache_weights"]}
// CHECK-DAG: graph.variable @fp8w.layers.0.attn.wqkv : tensor<32x16xf8E4M3FN> {init = "zeros", kind = "state"}
// CHECK-DAG: graph.variable @fp8w.layers.0.attn.wqkv.t : tensor<16x32xf8E4M3FN> {init = "zeros", kind = "state"}
// CHECK-DAG: graph.variable @fp8w.layers.0.attn.wqkv.amax : tensor<f32> {init = "zeros", kind = "state"}
// CHECK-DAG: graph.variable @fp8w.layers.0.mlp.w_down : tensor<16x24xf8E4M3FN>

// The train step casts no weight: it loads the cast ones.
// CHECK-LABEL: func.func @train_microbatch
// CHECK-NOT: tensor = "layers.0.attn.wqkv.w"
// CHECK: graph.load @fp8w.layers.0.attn.wqkv.t : tensor<16x32xf8E4M3FN>
// CHECK-NOT: tensor = "layers.0.attn.wqkv.w"
// CHECK: kernel.gemm {{.*}}param = "layers.0.attn.wqkv", role = "fprop"
// CHECK-NOT: tensor = "layers.0.attn.wqkv.w"
// CHECK-LABEL: func.func @optimizer_step

// One multi-tensor kernel: every update, the zeroing of the accumulators
// and the weight casts with the scales the next step reads.
// CHECK: kernel.fused "optimizer.adamw" kind("multi_tensor")
// CHECK: graph.adamw_update
// CHECK: fp8.quantize {{.*}}tensor = "layers.0.attn.wqkv.w"
// CHECK-NEXT: fp8.transpose
// CHECK: kernel.yield
// CHECK-NOT: kernel.fused
// CHECK: graph.store {{.*}}, @fp8w.layers.0.attn.wqkv :
// CHECK: graph.store {{.*}}, @fp8w.layers.0.attn.wqkv.t :
// CHECK: graph.store {{.*}}, @fp8w.layers.0.attn.wqkv.amax :

// CHECK-LABEL: func.func @cache_weights()
// CHECK: graph.load @layers.0.mlp.w_down : tensor<16x24xf32>
// CHECK: kernel.fused "optimizer.fp8_weights"
// CHECK: fp8.quantize {{.*}}tensor = "layers.0.mlp.w_down.w"
// CHECK: graph.store {{.*}}, @fp8w.layers.0.mlp.w_down :

// Current scaling: the step no longer takes the weight's amax, computes its
// scale or casts it; the optimizer takes the amax in the multi-tensor
// kernel, as AdamW writes the weight, then computes the scale and casts in
// kernels after it, and stores the FP8 weight, its K-major copy and the
// scale the GEMMs read. The init function does the same for the initial
// weights.
// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv --octet-precision="recipe=current" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-adamw | FileCheck %s --check-prefix=CUR
// CUR-DAG: graph.variable @fp8w.layers.0.attn.wqkv : tensor<32x16xf8E4M3FN> {init = "zeros", kind = "state"}
// CUR-DAG: graph.variable @fp8w.layers.0.attn.wqkv.t : tensor<16x32xf8E4M3FN> {init = "zeros", kind = "state"}
// CUR-DAG: graph.variable @fp8w.layers.0.attn.wqkv.scale : tensor<f32> {init = "zeros", kind = "state"}
// CUR-DAG: graph.variable @fp8w.layers.0.attn.wqkv.scale_inv : tensor<f32> {init = "zeros", kind = "state"}
// CUR-LABEL: func.func @train_microbatch
// CUR-NOT: tensor = "layers.0.attn.wqkv.w"
// The GEMMs read the inverse scale the optimizer stored, not the scale.
// CUR-NOT: graph.load @fp8w.layers.0.attn.wqkv.scale :
// CUR: %[[S:.*]] = graph.load @fp8w.layers.0.attn.wqkv.scale_inv : tensor<f32>
// CUR-NOT: tensor = "layers.0.attn.wqkv.w"
// CUR: kernel.gemm {{.*}} scales_inv(%{{.*}}, %[[S]]){{.*}}param = "layers.0.attn.wqkv", role = "fprop"
// CUR-NOT: tensor = "layers.0.attn.wqkv.w"
// CUR-LABEL: func.func @optimizer_step
// CUR: %[[OPT:.*]]:{{[0-9]+}} = kernel.fused "optimizer.adamw" kind("multi_tensor")
// CUR: %[[NEW:.*]], %{{.*}}, %{{.*}} = graph.adamw_update
// CUR: %[[A:.*]] = fp8.amax %[[NEW]]
// CUR: kernel.yield {{.*}}%[[A]]
// CUR: kernel.fused "optimizer.fp8_weight_scale" kind("elementwise") ins(%[[OPT]]#{{[0-9]+}} : tensor<f32>)
// CUR-NEXT: ^bb0
// CUR-NEXT: fp8.compute_scale
// CUR: kernel.fused "optimizer.fp8_weights" kind("elementwise")
// CUR-NEXT: ^bb0
// CUR-NEXT: fp8.quantize {{.*}}tensor = "layers.0.attn.wqkv.w"
// CUR-NEXT: fp8.transpose
// CUR: graph.store {{.*}}, @fp8w.layers.0.attn.wqkv :
// CUR: graph.store {{.*}}, @fp8w.layers.0.attn.wqkv.t :
// CUR: graph.store {{.*}}, @fp8w.layers.0.attn.wqkv.scale :
// CUR: graph.store {{.*}}, @fp8w.layers.0.attn.wqkv.scale_inv :
// CUR-LABEL: func.func @cache_weights()
// CUR: kernel.fused "optimizer.fp8_weight_amax"
// CUR: kernel.fused "optimizer.fp8_weight_scale"
// CUR: kernel.fused "optimizer.fp8_weights"
// CUR: graph.store {{.*}}, @fp8w.{{.*}}.scale :
// CUR: graph.store {{.*}}, @fp8w.{{.*}}.scale_inv :

// bf16-caches (what ZeRO-1 compiles with): a parameter without an FP8 cast
// whose every reader needs it in BF16 only (here the tied embedding: the
// embedding kernel's BF16 rows and the LM head's cast for its BF16 GEMMs)
// gets a BF16 cache, bf16w.embed, which the optimizer kernel writes as it
// updates the weight and @cache_weights fills once; the readers load it.
// The norms, read in f32, get none.
// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv --cse --octet-bf16-activations --octet-precision="amax-history-len=4" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-adamw="bf16-caches=1" | FileCheck %s --check-prefix=BF16C
// BF16C: graph.variable @bf16w.embed : tensor<32x16xbf16> {init = "zeros", kind = "state"}
// BF16C-NOT: graph.variable @bf16w.
// BF16C-LABEL: func.func @train_microbatch
// BF16C-NOT: graph.load @embed
// BF16C: %[[TABLE:.*]] = graph.load @bf16w.embed : tensor<32x16xbf16>
// BF16C-NOT: graph.load @embed
// BF16C: kernel.fused "embedding" kind("row") ins(%[[TABLE]], %{{.*}} : tensor<32x16xbf16>, tensor<2x4xi32>)
// BF16C-NEXT: ^bb0
// BF16C-NEXT: graph.embedding {{.*}} : (tensor<32x16xbf16>, tensor<2x4xi32>) -> tensor<2x4x16xbf16>
// BF16C-NOT: graph.load @embed
// BF16C-LABEL: func.func @optimizer_step
// BF16C: %[[NEW:.*]]:{{[0-9]+}} = kernel.fused "optimizer.adamw"
// BF16C: graph.cast %new_param : (tensor<32x16xf32>) -> tensor<32x16xbf16>
// BF16C: graph.store %[[NEW]]#{{[0-9]+}}, @bf16w.embed : tensor<32x16xbf16>
// BF16C-LABEL: func.func @cache_weights
// BF16C: %[[INITIAL:.*]] = graph.load @embed : tensor<32x16xf32>
// BF16C: kernel.fused "optimizer.bf16_weights" kind("elementwise") ins(%[[INITIAL]] : tensor<32x16xf32>)
// BF16C: graph.store {{.*}}, @bf16w.embed : tensor<32x16xbf16>
// Without the option nothing is cached in BF16.
// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv --cse --octet-bf16-activations --octet-precision="amax-history-len=4" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-adamw | FileCheck %s --check-prefix=NOCACHE
// NOCACHE-NOT: bf16w.

// bf16-gemm-caches (train.codegen.bf16_weight_cast "optimizer"): under the
// bf16 recipe every linear weight is cast for its BF16 GEMMs, so each gets
// bf16w.<param>, and so does the tied embedding (its head's cast); the
// step functions load the caches and cast no weight, the multi-tensor
// kernel casts each new weight as it writes it, and @cache_weights makes
// the first copies. The norms, read in f32, get none.
// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv --cse --octet-bf16-activations --canonicalize --octet-lower-to-kernel --octet-fuse-adamw="bf16-gemm-caches=1" | FileCheck %s --check-prefix=GEMMC
// GEMMC-DAG: graph.variable @bf16w.layers.0.mlp.w_down : tensor<16x24xbf16> {init = "zeros", kind = "state"}
// GEMMC-DAG: graph.variable @bf16w.layers.0.mlp.w_gate_up : tensor<48x16xbf16>
// GEMMC-DAG: graph.variable @bf16w.layers.0.attn.wo : tensor<16x16xbf16>
// GEMMC-DAG: graph.variable @bf16w.layers.0.attn.wqkv : tensor<32x16xbf16>
// GEMMC-DAG: graph.variable @bf16w.embed : tensor<32x16xbf16>
// GEMMC-NOT: graph.variable @bf16w.
// GEMMC-LABEL: func.func @train_microbatch
// GEMMC-NOT: graph.cast
// GEMMC: graph.load @bf16w.layers.0.attn.wqkv : tensor<32x16xbf16>
// GEMMC-NOT: graph.load @layers.0.attn.wqkv
// GEMMC-NOT: graph.cast
// GEMMC-LABEL: func.func @optimizer_step
// GEMMC: %[[NEW:.*]]:{{[0-9]+}} = kernel.fused "optimizer.adamw" kind("multi_tensor")
// GEMMC-COUNT-5: graph.cast %new_param{{.*}} -> tensor<{{.*}}xbf16>
// GEMMC: graph.store %[[NEW]]#{{[0-9]+}}, @bf16w.embed
// GEMMC: graph.store %[[NEW]]#{{[0-9]+}}, @bf16w.layers.0.attn.wqkv
// GEMMC-LABEL: func.func @cache_weights
// GEMMC-COUNT-5: kernel.fused "optimizer.bf16_weights"
// Under an FP8 recipe the linears have FP8 casts of their own: only the
// tied embedding, whose head stays BF16, is cached in BF16.
// RUN: %octet-opt %S/Inputs/one-layer-llama.mlir --octet-autodiff --cse --octet-fuse-qkv --cse --octet-bf16-activations --octet-precision="amax-history-len=4" --octet-layout --canonicalize --octet-lower-to-kernel --octet-fuse-adamw="bf16-gemm-caches=1" | FileCheck %s --check-prefix=FP8GEMMC
// FP8GEMMC: graph.variable @bf16w.embed : tensor<32x16xbf16>
// FP8GEMMC-NOT: graph.variable @bf16w.
