#ifndef OCTET_TOOLS_OCTET_COMPILESPEC_H
#define OCTET_TOOLS_OCTET_COMPILESPEC_H

// The one compile behind `octet compile`, `octet train` (both paths) and
// `octet golden`: the spec read and checked once, with the run's steps, then
// imported and taken through every stage of compiler/Pipelines' table; and
// the bundle of the result.

#include "compiler/Pipelines/Pipelines.h"
#include "spec/spec.pb.h"
#include "support/Status.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>
#include <chrono>
#include <functional>
#include <string>

namespace octet {

struct SpecSource {
  // A .pbtxt with model and train blocks, or a Hugging Face config.json.
  std::string spec;
  // Train settings for a config.json (its model block, if any, is ignored);
  // without one, the documented defaults.
  std::string trainSpec;
  // Optimizer steps of the run (0: train.steps): spec::RunSettings.
  int64_t steps = 0;
};

// Reads, defaults and checks the spec with the run's steps: the one
// validation every command that compiles goes through.
StatusOr<spec::Spec> loadSpecSource(const SpecSource &source);

// Imports `spec` (named `specName` in errors) and runs every stage of
// compileStages() in order, calling `afterStage` (if any) with the module
// as each stage left it, import included.
StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> compileSpec(
    mlir::MLIRContext &context, const spec::Spec &spec,
    const std::string &specName,
    llvm::function_ref<void(const CompileStage &, mlir::ModuleOp)> afterStage =
        nullptr);

// The bundle of a module that went through every stage, written to
// `output`. The spec's text goes in (so `octet inspect` can say how it was
// built), nothing machine-specific.
// `phase`, when given, is told as each phase of the bundle starts.
Status writeBundleFile(
    mlir::ModuleOp module, const SpecSource &source, const spec::Spec &spec,
    const std::string &output,
    std::function<void(const std::string &)> phase = nullptr);

// Lines on stderr for the phases of a long command: a phase that took more
// than 2 s is named with its time when the next one starts (or at finish).
class PhaseTimes {
public:
  explicit PhaseTimes(std::string command) : command_(std::move(command)) {}
  void start(const std::string &phase);
  void finish() { start(""); }

private:
  std::string command_, phase_;
  std::chrono::steady_clock::time_point began_;
};

// Whether `path` can be written (it, or a new file in its folder): an error
// naming it if not, before any work is done.
Status checkWritable(const std::string &path);

// Trainable parameters (elements), for the lines commands print.
int64_t countParameters(mlir::ModuleOp module);

// The stage names, in order, as the bundle records them and help text
// lists them: "import, autodiff, ...".
std::string stageNames();

} // namespace octet

#endif
