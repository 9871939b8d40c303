#ifndef OCTET_COMPILER_PIPELINES_PIPELINES_H
#define OCTET_COMPILER_PIPELINES_PIPELINES_H

// The compiler's pass pipelines, the one place that orders passes: the named
// stages of the training compile, which `octet compile` (every --dump-ir
// stage and report), `octet train` (GPU and CPU), `octet golden` and
// `octet-opt --octet-train-pipeline` run, and GPU code generation, which
// bundle emission, `octet compile --emit-ptx` and `octet-opt --octet-codegen`
// run. Options travel as the passes' own ODS-generated structs; a spec
// becomes them in trainingOptionsFromSpec and nowhere else.

#include "compiler/Codegen/Passes.h"
#include "compiler/Transforms/Fusion/Passes.h"
#include "compiler/Transforms/Pipeline/Passes.h"
#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/Precision.h"
#include "spec/spec.pb.h"
#include "support/Status.h"

#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace octet {

// Every option of the training compile, as the passes declare them.
struct TrainingPipelineOptions {
  OctetAutodiffOptions autodiff;
  // "f32" leaves the module as autodiff made it.
  OctetBf16ActivationsOptions activations;
  // train.precision.grad_dtype "bf16": octet-bf16-gradients after the
  // activations; none keeps every gradient accumulator f32.
  std::optional<OctetBf16GradientsOptions> gradients;
  // FP8 GEMMs: octet-precision, then octet-layout. None for the bf16 recipe.
  std::optional<OctetPrecisionOptions> precision;
  OctetLowerToKernelOptions lowerToKernel;
  // Data > 1: the untied embedding's gradient is made
  // whole on every rank from the gathered rows of its kernel, instead of
  // reducing its accumulator (octet-gather-embedding-gradient).
  std::optional<OctetGatherEmbeddingGradientOptions> gatherEmbeddingGradient;
  OctetReduceGradientsOptions reduceGradients;
  // ZeRO-1 (train.parallel.shard_optimizer): octet-shard-optimizer after
  // the gradient buckets; none keeps the optimizer replicated.
  std::optional<OctetShardOptimizerOptions> shardOptimizer;
  // BF16 caches of the parameters whose readers need BF16 only, for ZeRO-1
  // to gather (octet-fuse-adamw's bf16-caches), or of the BF16 GEMMs'
  // weights (bf16-gemm-caches; train.codegen.bf16_weight_cast).
  OctetFuseAdamWOptions fuseAdamW;
  // train.parallel.pipeline × virtual_stages chunks (empty: one rank's step).
  OctetSplitStagesOptions splitStages;
  // Each pipeline rank's optimizer step over its own chunks' variables.
  OctetSplitOptimizerOptions splitOptimizer;
  // Each chunk's backward as an input-gradient and a weight-gradient
  // function (schedule "zb-h1", which runs them apart).
  bool splitWeightGradients = false;
  // The LM head, its loss and gradients as one chunked region
  // (octet-fuse-lm-head), so f32 logits never exist whole. GPU codegen has
  // no lowering for that region yet, so a step that must run on the GPU
  // keeps the head as GEMMs and cross-entropy kernels.
  bool chunkedLmHead = false;
  // The LM head, loss and gradients as GEMMs and loss kernels over chunks
  // of tokens (octet-chunk-lm-head), so the logits are never live whole.
  OctetChunkLmHeadOptions chunkLmHead;
  // The FP8 weights cast in the step from their f32 masters
  // (octet-step-local-fp8-weights; train.codegen.fp8_weight_cast).
  bool stepLocalFp8Weights = false;
};

// The options a resolved spec (defaults applied, checked: spec::loadSpecFile)
// asks for. The LR schedule ends at train.steps.
TrainingPipelineOptions trainingOptionsFromSpec(const spec::Spec &spec);

// An error naming the field and the fix when the spec's train.parallel
// asks for a layout the pipeline cannot make (tensor or pipeline
// parallelism, a sharded optimizer with FP8 weight copies), rather than a
// program for another layout. Data parallelism is compiled, with the
// optimizer replicated or sharded (ZeRO-1, BF16 weights).
Status checkParallelLayout(const spec::Spec &spec);

// A stage of the training compile: `octet compile --dump-ir=NAME` prints the
// IR after it.
struct CompileStage {
  const char *name;
  const char *summary;
  // Adds the stage's passes; null for import, which frontends/ runs (the
  // spec becomes the forward graph before any pass).
  void (*addPasses)(mlir::OpPassManager &pm,
                    const TrainingPipelineOptions &options);
};

// import, autodiff, fuse-qkv, activations, precision, kernel, fused,
// parallelize, kmajor-weights, pipeline: the order every tool runs. Bundles record the names, so a
// stage is only ever added, with its line here.
llvm::ArrayRef<CompileStage> compileStages();

// The stage called `name`, or null.
const CompileStage *findCompileStage(llvm::StringRef name);

// Every stage after import, in order: forward graph to fused kernels.
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const TrainingPipelineOptions &options);

// The target codegen compiles for: sm_90a; PTX ISA 8.1, for kernel
// parameters past 4352 bytes (a multi-tensor AdamW or scale update takes a
// pointer per tensor: 13 KB for GPT-2); O3.
mlir::GpuNVVMAttachTargetOptions hopperTarget();

// octet-attention-to-gpu as codegen runs it: hopper-forward and
// hopper-backward on (the Hopper attention kernels wherever they cover the
// op; buildCodegenPipeline turns them off for a target other than sm_90a,
// the only one with their wgmma and setmaxnreg).
codegen::AttentionToGpuOptions defaultAttentionToGpu();

struct CodegenPipelineOptions {
  codegen::FusedToGpuOptions fusedToGpu;
  // hopper-forward and hopper-backward: spec train.codegen.attention_forward
  // and attention_backward ("hopper", the default on sm_90a, or "mma_sync").
  codegen::AttentionToGpuOptions attentionToGpu = defaultAttentionToGpu();
  // Its linkLibs left empty: CUDA's libdevice (defaultLibdevice()), for
  // exp/erf/tanh/sin/cos/pow, when it is found.
  mlir::GpuNVVMAttachTargetOptions target = hopperTarget();
};

// Codegen options where a region that cannot be lowered is reported and left
// without kernels instead of failing the pipeline, so the rest can still be
// emitted and inspected.
CodegenPipelineOptions keepGoingCodegenOptions();

// keepGoingCodegenOptions for `target` with what the spec's train.codegen
// asks for: every tool that compiles a spec's kernels (bundle emission,
// --emit-ptx) uses it. An attention kernel left unset is the Hopper one on
// sm_90a and the mma.sync one elsewhere; "hopper" for a target other than
// sm_90a is an error naming the field.
StatusOr<CodegenPipelineOptions>
codegenOptionsFromSpec(const spec::Spec &spec,
                       const mlir::GpuNVVMAttachTargetOptions &target =
                           hopperTarget());

// kernel.fused → gpu.func → NVVM → gpu.binary holding PTX for the target.
void buildCodegenPipeline(mlir::OpPassManager &pm,
                          const CodegenPipelineOptions &options = {});

// The libdevice file codegen links, or "" when none is found (CUDA_HOME,
// then the build's CUDA).
std::string defaultLibdevice();

// `octet-train-pipeline` and `octet-codegen`, for octet-opt.
void registerCompilerPipelines();

} // namespace octet

#endif
