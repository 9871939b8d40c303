#ifndef OCTET_COMPILER_CHECKPOINT_HFCHECKPOINT_H
#define OCTET_COMPILER_CHECKPOINT_HFCHECKPOINT_H

// Hugging Face checkpoints in and out of a compiled model's parameters (the
// interpreter's VariableStore). The graph says where each parameter lives:
// graph.variable's hf_name (plus graph.hf_transpose / graph.hf_chunk, see
// frontends/GraphImporter.h), or, for a variable that octet-fuse-qkv
// made by stacking several, hf_names with the rows of each in `split`.
// hf/ does the rest: the layout rule, loading, checking and writing.

#include "compiler/Interpreter/Interpreter.h"
#include "dialects/graph/GraphDialect.h"
#include "hf/HfCheckpoint.h"
#include "support/Status.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace octet {

// Whether the graph names the HF tensor (or tensors) of `var`.
bool hasHfName(graph::VariableOp var);

// Where `var` lives in a HF checkpoint, as the graph says: the one source
// of the mapping, for the interpreter's loads and exports below and for the
// bundle's Parameter.hf_pieces, which the GPU runtime loads and exports by.
// A variable with no HF name is an error naming it.
StatusOr<hf::HfParameterLayout> hfLayoutOf(graph::VariableOp var);

// The layout of every trainable variable of `module`; a trainable variable
// with no HF name is an error naming it.
StatusOr<std::vector<hf::HfParameterLayout>> hfLayouts(mlir::ModuleOp module);

// Reads a HF checkpoint (hf::readHfCheckpoint) into `store`, for every
// trainable variable of `module`. Nothing in the store changes unless every
// tensor loads.
StatusOr<hf::HfLoadSummary> loadHfCheckpoint(const std::string &path,
                                             mlir::ModuleOp module,
                                             interp::VariableStore &store);

// Writes the trainable variables of `module` from `store` into `directory`
// as a HF checkpoint (hf::writeHfCheckpoint). Returns the number of tensors
// written.
StatusOr<size_t> exportHfCheckpoint(const std::string &directory,
                                    mlir::ModuleOp module,
                                    const interp::VariableStore &store,
                                    const hf::HfExportOptions &options);

} // namespace octet

#endif
