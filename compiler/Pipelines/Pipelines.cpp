#include "compiler/Pipelines/Pipelines.h"

#include "compiler/Pipelines/PipelineLayout.h"
#include "spec/SpecReader.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"

#include <algorithm>
#include <cstdlib>

namespace octet {

using mlir::OpPassManager;

Status checkParallelLayout(const spec::Spec &spec) {
  const spec::Parallel &parallel = spec.train().parallel();
  auto unsupported = [](const char *field, int64_t value, const char *what) {
    return Status::error("train.parallel." + std::string(field) + " is " +
                         std::to_string(value) + ": the compiler does not " +
                         what + " yet, and a program for one rank would "
                         "ignore it; set train.parallel." + field +
                         " to 1 (train.parallel.data is compiled)");
  };
  if (parallel.tensor() > 1)
    return unsupported("tensor", parallel.tensor(),
                       "split layers across tensor-parallel ranks");
  if (Status pipeline = checkPipelineLayout(spec); !pipeline)
    return pipeline;
  return Status::ok();
}

TrainingPipelineOptions trainingOptionsFromSpec(const spec::Spec &spec) {
  const spec::TrainSpec &train = spec.train();
  const spec::AdamW &adam = train.optimizer();
  TrainingPipelineOptions o;
  OctetAutodiffOptions &autodiff = o.autodiff;
  autodiff.lr = adam.lr();
  autodiff.minLrRatio = adam.min_lr_ratio();
  autodiff.warmupSteps = adam.warmup_steps();
  autodiff.totalSteps = train.steps();
  autodiff.beta1 = adam.beta1();
  autodiff.beta2 = adam.beta2();
  autodiff.eps = adam.eps();
  autodiff.weightDecay = adam.weight_decay();
  autodiff.gradClip = train.grad_clip();
  int64_t dataParallel = std::max<int64_t>(1, train.parallel().data());
  autodiff.microbatches = std::max<int64_t>(
      1, train.global_batch_size() / (train.micro_batch_size() * dataParallel));
  o.activations.activationDtype = train.precision().activation_dtype();
  o.lowerToKernel.dataParallel = dataParallel;
  // With a pipeline too: octet-split-stages cuts the buckets per chunk, so
  // each pipeline rank reduces its own gradients over its data group.
  o.reduceGradients.dataParallel = dataParallel;
  // With a pipeline too: octet-split-stages puts the gathers with the
  // embedding's kernel in the first chunk's backward, over that pipeline
  // rank's data group.
  if (dataParallel > 1) {
    OctetGatherEmbeddingGradientOptions &gather =
        o.gatherEmbeddingGradient.emplace();
    gather.dataParallel = dataParallel;
    gather.microbatches = autodiff.microbatches;
    gather.shardedOptimizer = train.parallel().shard_optimizer();
  }
  o.reduceGradients.bucketElements = train.parallel().bucket_elements();
  // With a pipeline too: octet-split-stages cuts the reduce-scatters per
  // chunk like the all-reduces, and octet-split-optimizer gives each
  // pipeline rank the per-bucket updates and all-gathers of its own
  // parameters, so each rank's moments are sharded over its data group.
  std::vector<int64_t> layerSplit = pipelineLayerSplit(spec);
  if (train.parallel().shard_optimizer() && dataParallel > 1) {
    OctetShardOptimizerOptions &shard = o.shardOptimizer.emplace();
    shard.dataParallel = dataParallel;
    // The pipeline executor's stages keep whole f32 masters (DESIGN,
    // "ZeRO-1").
    shard.shardCastWeights = layerSplit.empty();
    o.fuseAdamW.bf16Caches = layerSplit.empty();
  }
  autodiff.dataParallel = dataParallel;
  o.splitStages.layerSplit.assign(layerSplit.begin(), layerSplit.end());
  // A pipeline stage stashes what its backward reads of its forward, and
  // a stash entry is no tensor map's base: the attention kernels read the
  // rotated q and k through maps, so there the backward rotates them again
  // from the QKV output it stashes anyway.
  o.autodiff.recomputeRope = !layerSplit.empty();
  o.splitOptimizer.ranks = std::max<int64_t>(1, train.parallel().pipeline());
  o.splitWeightGradients = !layerSplit.empty() &&
                           train.parallel().schedule() == "zb-h1";
  if (train.codegen().has_lm_head_chunk_tokens())
    o.chunkLmHead.chunkTokens = train.codegen().lm_head_chunk_tokens();
  // The FP8 weight casts in the step where the layout keeps whole f32
  // masters beside their readers: not ZeRO-1's, which casts each rank's
  // shard and gathers the FP8 copy, nor a pipeline's (the spec reader
  // refuses "step" for those).
  const std::string &weightCast = train.codegen().fp8_weight_cast();
  bool zero1 = train.parallel().shard_optimizer() && dataParallel > 1;
  o.stepLocalFp8Weights =
      weightCast.empty() ? !zero1 && layerSplit.empty() : weightCast == "step";
  // The BF16 GEMMs' weights: ZeRO-1 without a pipeline caches them (and
  // the embedding) to gather their parts; "optimizer" caches them at any
  // other layout the spec reader lets through (not a pipeline's).
  o.fuseAdamW.bf16GemmCaches =
      train.codegen().bf16_weight_cast() == "optimizer";
  // The head's wgrad over token chunks accumulates chunk after chunk: it
  // keeps its f32 accumulator (octet-chunk-lm-head runs without pipeline
  // stages only).
  if (train.precision().grad_dtype() == "bf16")
    o.gradients.emplace().headChunkTokens =
        layerSplit.empty() ? o.chunkLmHead.chunkTokens : 0;

  const spec::Precision &p = train.precision();
  if (p.recipe().empty() || p.recipe() == "bf16")
    return o;
  OctetPrecisionOptions &precision = o.precision.emplace();
  precision.recipe = p.recipe();
  if (!p.format().empty())
    precision.format = p.format();
  if (p.has_amax_history_len())
    precision.amaxHistoryLen = p.amax_history_len();
  if (!p.amax_algorithm().empty())
    precision.amaxAlgorithm = p.amax_algorithm();
  if (p.has_margin())
    precision.margin = p.margin();
  precision.powerOfTwoScales = p.power_of_two_scales();
  precision.firstLayersBf16 = p.first_last_layers_bf16().first();
  precision.lastLayersBf16 = p.first_last_layers_bf16().last();
  for (const std::string &pattern : p.bf16_patterns())
    precision.bf16Patterns.push_back(pattern);
  precision.keepHeadBf16 = !p.lm_head_fp8();
  return o;
}

namespace {

void addAutodiffPasses(OpPassManager &pm, const TrainingPipelineOptions &o) {
  pm.addPass(createOctetAutodiff(o.autodiff));
  pm.addPass(mlir::createCSEPass());
}

// Before the activations turn BF16: fuse-qkv matches weights as they are
// loaded, before the casts to BF16 sit between them and their GEMMs. The
// fused GEMMs' outputs are then saved whole rather than as copies of their
// slices, except under blockwise FP8: there the backward's SwiGLU gradient
// is quantized in 128 x 128 tiles by a kernel that reads gate and up
// densely (octet-fuse-swiglu-quantize), so they stay contiguous copies
// (strided, the gradient would be stored in BF16 and read back: 2.5 GB
// more memory-bound bytes a step for the 8-layer 8B by --fusion-report).
// Nor under ZB-H1: the backward's SwiGLU gradient kernel would take in
// the SwiGLU recomputed for w_down's wgrad, whose output the input-gradient
// half then keeps for the weight-gradient half (octet-split-weight-
// gradients): 2.10 → 2.42 GiB a stash entry in
// tests/lit/pipelines/pipeline-cost-model.test.
void addFuseQkvPasses(OpPassManager &pm, const TrainingPipelineOptions &o) {
  pm.addPass(createOctetFuseQkv());
  pm.addPass(mlir::createCSEPass());
  if ((!o.precision || o.precision->recipe != "blockwise") &&
      !o.splitWeightGradients)
    pm.addPass(createOctetSaveFusedOutputs());
}

void addActivationsPasses(OpPassManager &pm,
                          const TrainingPipelineOptions &o) {
  pm.addPass(createOctetBf16Activations(o.activations));
  if (o.gradients)
    pm.addPass(createOctetBf16Gradients(*o.gradients));
}

void addPrecisionPasses(OpPassManager &pm, const TrainingPipelineOptions &o) {
  if (!o.precision)
    return;
  pm.addPass(createOctetPrecision(*o.precision));
  pm.addPass(createOctetLayout());
  pm.addPass(mlir::createCanonicalizerPass());
}

void addKernelPasses(OpPassManager &pm, const TrainingPipelineOptions &o) {
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(createOctetLowerToKernel(o.lowerToKernel));
}

void addFusedPasses(OpPassManager &pm, const TrainingPipelineOptions &o) {
  // The LM head first, while its GEMMs and cross-entropy kernels are still
  // apart; then epilogues: the gradient-accumulation adds they take must not
  // be folded into row kernels by the later passes.
  if (o.chunkedLmHead)
    pm.addPass(createOctetFuseLmHead());
  pm.addPass(createOctetFuseEpilogue());
  pm.addPass(createOctetFuseRope());
  pm.addPass(createOctetFuseNormQuantize());
  pm.addPass(createOctetFuseSwigluQuantize());
  pm.addPass(createOctetFuseAdamW(o.fuseAdamW));
  // ZB-H1 runs w_down's wgrad apart from the SwiGLU gradient: a kernel
  // making both would keep the recomputed SwiGLU from one half to the other.
  OctetFuseElementwiseOptions elementwise;
  elementwise.joinSiblings = !o.splitWeightGradients;
  pm.addPass(createOctetFuseElementwise(elementwise));
  pm.addPass(createOctetRecomputeCast());
  // Before the canonicalizer, which drops the casts the forward kernels no
  // longer yield.
  pm.addPass(createOctetRecomputeKMajor());
  // After every fusion that joins quantize kernels: the factors go into
  // the kernel that finally writes the scales.
  pm.addPass(createOctetFuseBlockFactors());
  pm.addPass(mlir::createCanonicalizerPass());
  // After the other fusions, which would fold the sum of the chunks' losses
  // into the first chunk's loss kernel (and move it behind the chunks), and
  // after the epilogues: the head's wgrad carries its accumulator, which the
  // first chunk's wgrad takes. Not for pipeline stages: each chunk's
  // forward and backward kernels would go to different functions, every
  // chunk's logits stashed between them.
  if (o.splitStages.layerSplit.empty())
    pm.addPass(createOctetChunkLmHead(o.chunkLmHead));
  // Last: it needs the loss kernels as fusion leaves them, and every reader
  // of the logits in place. Not for pipeline stages: the split passes the
  // logits from a stage's forward to its backward as a stash input, whose
  // bytes the backward's program may not write over.
  if (o.splitStages.layerSplit.empty())
    pm.addPass(createOctetOverwriteLogits());
}

// After fusion, so that a bucket's all-reduce follows the kernel that
// finishes its last gradient, and the wgrad GEMMs carry their accumulation.
void addParallelizePasses(OpPassManager &pm,
                          const TrainingPipelineOptions &o) {
  if (o.gatherEmbeddingGradient)
    pm.addPass(createOctetGatherEmbeddingGradient(*o.gatherEmbeddingGradient));
  pm.addPass(createOctetReduceGradients(o.reduceGradients));
  if (o.shardOptimizer)
    pm.addPass(createOctetShardOptimizer(*o.shardOptimizer));
  OctetOverwriteGradientsOptions overwrite;
  // A pipeline's stages hold the accumulators apart from the optimizer.
  overwrite.microbatches =
      o.splitStages.layerSplit.empty() ? o.autodiff.microbatches : 0;
  pm.addPass(createOctetOverwriteGradients(overwrite));
}

// After the parallelize passes, so that ZeRO-1's transposes of the
// gathered FP8 weights are among the copies that go; before the pipeline
// split, which takes each transpose to the chunk of the GEMM that reads it.
// Every recipe runs the K-major pass: delayed and current scaling keep FP8
// weight caches, at every layout; blockwise casts its weights in the step
// and keeps none, nor does the bf16 recipe, so there it finds nothing to
// do. Then, with train.codegen.fp8_weight_cast "step", the row-major cache
// goes too: each fprop casts the f32 master and each K-major transpose
// becomes a cast-transpose of it (after the K-major pass, so that its
// transposes are the dgrad readers this pass rewrites).
void addFp8WeightsPasses(OpPassManager &pm,
                         const TrainingPipelineOptions &o) {
  pm.addPass(createOctetStepLocalKMajorWeights());
  if (o.stepLocalFp8Weights)
    pm.addPass(createOctetStepLocalFp8Weights());
}

void addPipelinePasses(OpPassManager &pm, const TrainingPipelineOptions &o) {
  if (!o.splitStages.layerSplit.empty()) {
    pm.addPass(createOctetSplitStages(o.splitStages));
    pm.addPass(createOctetSplitOptimizer(o.splitOptimizer));
    pm.addPass(createOctetStageEvalFunctions());
    if (o.splitWeightGradients)
      pm.addPass(createOctetSplitWeightGradients());
  }
}

const CompileStage kCompileStages[] = {
    {"import", "the forward graph built from the spec (graph dialect)",
     nullptr},
    {"autodiff", "the train step: forward, backward, optimizer",
     addAutodiffPasses},
    {"fuse-qkv", "q/k/v and gate/up projections as one GEMM each",
     addFuseQkvPasses},
    {"activations",
     "BF16 activations and activation gradients, f32 state (BF16 wgrad "
     "gradients with train.precision.grad_dtype \"bf16\")",
     addActivationsPasses},
    {"precision", "FP8 GEMMs per the recipe and policy, K-major layout",
     addPrecisionPasses},
    {"kernel", "kernel dialect: GEMMs, attention, one-op fused kernels",
     addKernelPasses},
    {"fused", "after the kernel fusion passes", addFusedPasses},
    {"parallelize",
     "data-parallel gradient buckets reduced during the backward (the "
     "untied embedding's rows gathered instead); "
     "ZeRO-1's sharded optimizer; the first microbatch's wgrad GEMMs "
     "write their accumulators",
     addParallelizePasses},
    {"kmajor-weights",
     "each FP8 weight's K-major copy transposed from its row-major cache "
     "right before the GEMM that reads it, instead of kept as optimizer "
     "state; with train.codegen.fp8_weight_cast \"step\" (the default "
     "without ZeRO-1 or a pipeline) the FP8 weights themselves cast from "
     "the f32 masters right before their GEMMs",
     addFp8WeightsPasses},
    {"pipeline",
     "pipeline stage chunks: a forward and a backward function each "
     "(under ZB-H1 the backward as input- and weight-gradient functions), "
     "and an evaluation forward where the forward writes state",
     addPipelinePasses},
};

} // namespace

llvm::ArrayRef<CompileStage> compileStages() { return kCompileStages; }

const CompileStage *findCompileStage(llvm::StringRef name) {
  for (const CompileStage &stage : kCompileStages)
    if (name == stage.name)
      return &stage;
  return nullptr;
}

void buildTrainingPipeline(OpPassManager &pm,
                           const TrainingPipelineOptions &options) {
  for (const CompileStage &stage : kCompileStages)
    if (stage.addPasses)
      stage.addPasses(pm, options);
}

mlir::GpuNVVMAttachTargetOptions hopperTarget() {
  mlir::GpuNVVMAttachTargetOptions target;
  target.chip = "sm_90a";
  target.features = "+ptx81";
  target.optLevel = 3;
  return target;
}

codegen::AttentionToGpuOptions defaultAttentionToGpu() {
  codegen::AttentionToGpuOptions options;
  options.hopperForward = true;
  options.hopperBackward = true;
  return options;
}

// Only sm_90a has the wgmma, TMA and setmaxnreg the Hopper kernels are
// built on.
static bool runsHopperKernels(const mlir::GpuNVVMAttachTargetOptions &target) {
  return target.chip == "sm_90a";
}

StatusOr<CodegenPipelineOptions>
codegenOptionsFromSpec(const spec::Spec &spec,
                       const mlir::GpuNVVMAttachTargetOptions &target) {
  CodegenPipelineOptions options = keepGoingCodegenOptions();
  options.target = target;
  const spec::Codegen &codegen = spec.train().codegen();
  bool hopper = runsHopperKernels(target);
  // Unset, a choice is the target's fastest kernel; asked for, the Hopper
  // kernel is never quietly replaced.
  auto choose = [&](const std::string &field,
                    const std::string &value) -> StatusOr<bool> {
    if (value == "hopper" && !hopper)
      return Status::error(
          "train.codegen." + field +
          ": \"hopper\" needs an sm_90a target (wgmma, TMA, setmaxnreg), "
          "this compile targets " +
          target.chip + "; set \"mma_sync\" or leave it unset");
    return value.empty() ? hopper : value == "hopper";
  };
  StatusOr<bool> forward =
      choose("attention_forward", codegen.attention_forward());
  if (!forward)
    return forward.status();
  StatusOr<bool> backward =
      choose("attention_backward", codegen.attention_backward());
  if (!backward)
    return backward.status();
  options.attentionToGpu.hopperForward = *forward;
  options.attentionToGpu.hopperBackward = *backward;
  return options;
}

CodegenPipelineOptions keepGoingCodegenOptions() {
  CodegenPipelineOptions options;
  options.fusedToGpu.keepGoing = true;
  options.attentionToGpu.keepGoing = true;
  return options;
}

std::string defaultLibdevice() {
  if (const char *home = std::getenv("CUDA_HOME")) {
    std::string path = std::string(home) + "/nvvm/libdevice/libdevice.10.bc";
    if (llvm::sys::fs::exists(path))
      return path;
  }
#ifdef OCTET_LIBDEVICE
  if (llvm::sys::fs::exists(OCTET_LIBDEVICE))
    return OCTET_LIBDEVICE;
#endif
  return "";
}

void buildCodegenPipeline(OpPassManager &pm,
                          const CodegenPipelineOptions &options) {
  pm.addPass(codegen::createFusedToGpu(options.fusedToGpu));
  codegen::AttentionToGpuOptions attention = options.attentionToGpu;
  attention.hopperForward &= runsHopperKernels(options.target);
  attention.hopperBackward &= runsHopperKernels(options.target);
  pm.addPass(codegen::createAttentionToGpu(attention));
  mlir::GpuNVVMAttachTargetOptions target = options.target;
  // Without libdevice the math calls stay unresolved and only ptxas
  // complains; PTX is still written so that the IR can be inspected.
  if (target.linkLibs.empty())
    if (std::string libdevice = defaultLibdevice(); !libdevice.empty())
      target.linkLibs.push_back(libdevice);
  pm.addPass(mlir::createGpuNVVMAttachTarget(target));
  OpPassManager &gpu = pm.nest<mlir::gpu::GPUModuleOp>();
  gpu.addPass(codegen::createLowerFp8Casts());
  gpu.addPass(mlir::createSCFToControlFlowPass());
  mlir::ConvertGpuOpsToNVVMOpsOptions nvvm;
  // Static shapes: a bare pointer per buffer instead of a memref descriptor.
  nvvm.useBarePtrCallConv = true;
  gpu.addPass(mlir::createConvertGpuOpsToNVVMOps(nvvm));
  // NVVM ops that LLVM has no intrinsic for (wgmma, mbarrier waits) become
  // their PTX.
  gpu.addPass(mlir::createConvertNVVMToLLVMPass());
  gpu.addPass(mlir::createCanonicalizerPass());
  gpu.addPass(mlir::createCSEPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
  mlir::GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  pm.addPass(mlir::createGpuModuleToBinaryPass(binary));
}

namespace {

// What octet-opt's --octet-train-pipeline takes: a spec, as `octet compile`
// does, rather than a copy of every pass option (those are in the textual
// pipeline `octet compile SPEC --print-pipeline` prints).
struct TrainPipelineSource
    : mlir::PassPipelineOptions<TrainPipelineSource> {
  Option<std::string> spec{
      *this, "spec",
      llvm::cl::desc("a .pbtxt spec: the options `octet compile` derives "
                     "from it (default: each pass's own defaults, BF16 "
                     "GEMMs)")};
  Option<int64_t> steps{
      *this, "steps",
      llvm::cl::desc("optimizer steps of the run, as `octet compile "
                     "--steps` (0: train.steps)"),
      llvm::cl::init(0)};
};

} // namespace

void registerCompilerPipelines() {
  mlir::registerPassPipeline(
      "octet-train-pipeline",
      "forward graph to fused kernels: every stage of `octet compile` after "
      "import",
      [](OpPassManager &pm, llvm::StringRef text,
         llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)>
             errorHandler) -> mlir::LogicalResult {
        TrainPipelineSource source;
        if (mlir::failed(source.parseFromString(text)))
          return mlir::failure();
        TrainingPipelineOptions options;
        if (!source.spec.empty()) {
          spec::RunSettings run;
          run.steps = source.steps;
          StatusOr<spec::Spec> spec =
              spec::loadSpecFile(source.spec, nullptr, run);
          if (!spec)
            return errorHandler(spec.status().message());
          if (Status layout = checkParallelLayout(*spec); !layout)
            return errorHandler(source.spec + ": " + layout.message());
          options = trainingOptionsFromSpec(*spec);
        }
        buildTrainingPipeline(pm, options);
        return mlir::success();
      },
      [](llvm::function_ref<void(const mlir::detail::PassOptions &)> print) {
        print(TrainPipelineSource());
      });
  mlir::registerPassPipeline(
      "octet-codegen",
      "kernel.fused regions to PTX for sm_90a (gpu.binary ops); options are "
      "octet-fused-to-gpu's",
      [](OpPassManager &pm, llvm::StringRef text,
         llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)>
             errorHandler) -> mlir::LogicalResult {
        buildCodegenPipeline(pm);
        for (mlir::Pass &pass : pm.getPasses())
          if (pass.getArgument() == "octet-fused-to-gpu")
            return pass.initializeOptions(text, errorHandler);
        return errorHandler("octet-codegen has no octet-fused-to-gpu pass");
      },
      [](llvm::function_ref<void(const mlir::detail::PassOptions &)>) {});
}

} // namespace octet
