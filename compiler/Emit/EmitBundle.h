#ifndef OCTET_COMPILER_EMIT_EMITBUNDLE_H
#define OCTET_COMPILER_EMIT_EMITBUNDLE_H

// The kernel-dialect train step as a .octet bundle
// (bundle/bundle.proto): codegen's PTX and cubins, parameter table,
// state tensors, the memory plan's slots, GEMM descriptors from kernel.gemm,
// and one program per function (train microbatch, optimizer step, eval,
// init) for every rank, each step bound to plan slots.
//
// Launches follow the codegen's kernel ABI (compiler/Codegen/README.md): a
// pointer per operand, per result, then the planned f32 workspace; results
// the ABI accumulates with atomics are zeroed by a memset first. Any op
// that codegen gave a `launch` list is emitted this way, so new lowerings
// need nothing here. Ops without code are listed with missing_code set and
// the reason; the runtime refuses such a bundle and names them. Everything
// is emitted in the module's op order, so the same module gives the same
// bundle.

#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Plan/MemoryPlan.h"
#include "bundle/bundle.pb.h"
#include "support/PipelineSchedule.h"

#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace octet::emit {

struct BuildSource {
  std::string specText;
  // "pbtxt" or "hf-config".
  std::string specFormat;
  std::string trainSpecText;
  std::string modelName;
  // The model's HF config.json (BuildInfo.hf_config); may be empty.
  std::string hfConfig;
  // Options that change the output, in the compiler's order.
  std::vector<std::pair<std::string, std::string>> options;
  // Sizes and the training schedule, from the resolved spec.
  bundle::Schedule schedule;
  // train.parallel.data: the bundle's world size and its "data" group. The
  // ranks run the same programs, whose collectives the pipeline placed.
  uint32_t dataParallel = 1;
  // train.parallel.pipeline > 1: the schedule whose instruction lists the
  // ranks follow (pipeline × dataParallel ranks). Each pipeline rank gets its chunks'
  // CHUNK_FORWARD and CHUNK_BACKWARD programs (under ZB-H1
  // CHUNK_INPUT_GRADIENT and CHUNK_WEIGHT_GRADIENT instead,
  // octet-split-weight-gradients) and its own optimizer step
  // (octet-split-stages, octet-split-optimizer), the chunk functions'
  // crossing values become Stash slots (PipelineSlots.h), and the eval
  // program is left out: evaluation needs a forward-only schedule.
  std::optional<PipelineSchedule> pipeline;
  // ptxas for cubins: empty searches CUDA_HOME, PATH and /usr/local/cuda;
  // "none" keeps PTX only.
  std::string ptxas;
  // Codegen's options (keep-going: an op it cannot lower is a kernel
  // without code); codegenOptionsFromSpec for a spec's.
  CodegenPipelineOptions codegen = keepGoingCodegenOptions();
  // Told when each phase (codegen, ptxas) starts, with what it will do.
  std::function<void(const std::string &)> phase;
};

// Codegen (which rewrites `module`: pass a copy to keep the kernel IR), the
// memory plan, then the bundle.
mlir::FailureOr<bundle::Bundle> compileBundle(mlir::ModuleOp module,
                                              const BuildSource &source);

} // namespace octet::emit

#endif
