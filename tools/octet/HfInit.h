#ifndef OCTET_TOOLS_OCTET_HFINIT_H
#define OCTET_TOOLS_OCTET_HFINIT_H

// Starting from, and handing back, Hugging Face weights: shared by `octet
// export-hf` and `octet train --init-from` (tools/octet/HfCommand.cpp).

#include "compiler/Checkpoint/HfCheckpoint.h"
#include "spec/spec.pb.h"

#include <string>

namespace octet {

// Loads the HF checkpoint in `hfDir` into the trainable variables of
// `module` (imported from `spec`, read from `specSource`). When the
// directory holds a config.json, its model must be the spec's (see
// checkSameModel); then every tensor is checked against the graph. Prints
// one line saying what was loaded.
StatusOr<hf::HfLoadSummary> initFromHf(const spec::Spec &spec,
                                       const std::string &specSource,
                                       const std::string &hfDir,
                                       mlir::ModuleOp module,
                                       interp::VariableStore &store);

// Writes the trainable variables as a HF checkpoint in `outDir`, with a
// config.json: a copy of `configSource` when that file exists (the one the
// weights came with), else one made from the spec's model.
StatusOr<size_t> saveHf(const spec::Spec &spec, const std::string &configSource,
                        const std::string &outDir, mlir::ModuleOp module,
                        const interp::VariableStore &store,
                        hf::HfExportOptions options);

} // namespace octet

#endif
