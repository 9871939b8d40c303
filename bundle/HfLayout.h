#ifndef OCTET_BUNDLE_HFLAYOUT_H
#define OCTET_BUNDLE_HFLAYOUT_H

// A parameter's Hugging Face layout (hf/HfWeights.h) in and out of the
// bundle's Parameter.hf_pieces: the compiler writes what the graph says
// (compiler/Checkpoint), the runtime reads it back, and nothing else
// spells the mapping out.

#include "bundle/bundle.pb.h"
#include "hf/HfWeights.h"
#include "support/Status.h"

#include <optional>
#include <string>

namespace octet::bundle {

// Writes `layout`'s pieces into `parameter`, in the order of the
// parameter's rows.
void setHfPieces(const hf::HfParameterLayout &layout, Parameter &parameter);

// The layout `parameter` records, or nullopt when it has no HF pieces.
// Pieces that do not tile the parameter's rows are an error naming it.
StatusOr<std::optional<hf::HfParameterLayout>>
hfLayoutOf(const Parameter &parameter);

// The config.json a --save-hf export writes: the one beside the
// --init-from directory `initWeights` when there is one, else the
// bundle's; an error when there is none or a parameter has no HF name
// (transformers could not load the export).
StatusOr<std::string> hfConfigForExport(const Bundle &bundle,
                                        const std::string &initWeights);

} // namespace octet::bundle

#endif
