#ifndef OCTET_BUNDLE_BUNDLE_H
#define OCTET_BUNDLE_BUNDLE_H

// Reading, writing and checking .octet bundles. Writing is deterministic:
// the same Bundle message always gives the same bytes, and the content hash
// covers everything but itself.

#include "bundle/bundle.pb.h"
#include "support/Bytes.h"
#include "support/DType.h"
#include "support/Status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace octet::bundle {

// The format this code reads and writes (Bundle.format_version).
// 2: GEMM scale slots hold dequantization factors (quantize_scales gone),
// kernels carry code, Init has a per-tensor seed.
// 3: parameters say how they map to HF tensors in hf_pieces (hf_name and
// hf_rows gone).
// 4: GEMMs marked first_microbatch_overwrites write their gradient
// accumulators in a step's first microbatch, which the optimizer step no
// longer clears (a runtime of format 3 would add to stale gradients).
// 5: pipeline bundles (Bundle.pipeline, each rank's instruction list and
// CHUNK_* programs, stash-strided slots), which a runtime of format 4 would
// run as one rank of data parallelism; and a kernel argument may be a
// tensor map the runtime encodes at load (KernelArg.tensor_map), which a
// runtime of format 4 would launch without.
// 6: each pipeline rank's own arena (PipelineRank.arena_bytes and slots),
// which a runtime of format 5 would ignore, allocating the whole plan on
// every rank.
// 7: a parameter's slot may hold one data-parallel rank's part
// (Parameter.data_shards), which a runtime of format 6 would fill with the
// whole parameter; and a state tensor may be derived (StateTensor.derived),
// which INIT makes again on resume.
constexpr uint32_t kBundleFormatVersion = 7;

// Deterministic serialization of `bundle` as it is (content_hash included).
std::string serializeDeterministic(const Bundle &bundle);

// SHA-256 over the deterministic serialization with content_hash cleared.
std::string computeContentHash(const Bundle &bundle);

// Sets format_version (when unset) and content_hash, then serializes.
std::string finalizeAndSerialize(Bundle &bundle);

// Writes atomically (support/AtomicFile: a temporary beside `path`, fsynced,
// renamed, then the directory fsynced), so a reader, or a machine that loses
// power, never sees half a bundle.
Status writeBundle(Bundle &bundle, const std::string &path);

// Parses bytes; `origin` names them in errors. Checks the format version and
// the content hash, then validate().
StatusOr<Bundle> parseBundle(const std::string &bytes,
                             const std::string &origin);
StatusOr<Bundle> readBundle(const std::string &path);

// Structural checks: every index in range, every slot inside its arena and
// aligned, no two slots sharing bytes while both are live, every program of
// every rank present, every tensor map inside its slot and within
// cuTensorMapEncodeTiled's rules. Messages name the element.
Status validate(const Bundle &bundle);

// No two of `placed` (slot, offset) share a byte while both are live (the
// slots' program spans; a persistent slot is live throughout): the check of
// the planner's packing that the runtime, which only follows offsets,
// depends on. The message starts with `arena`.
Status checkSlotsDisjointWhileLive(
    const MemoryPlan &plan, std::vector<std::pair<uint32_t, uint64_t>> placed,
    const std::string &arena);

// Whether this runtime can execute the bundle: every kernel has code. Names
// what is missing.
Status checkRunnable(const Bundle &bundle);

// bundle.proto's DType is the wire form of octet::DType. DTYPE_UNSPECIFIED
// (and a value this build does not know) has no DType; f64, i16, i8 and bool
// have no wire value and become DTYPE_UNSPECIFIED.
std::optional<octet::DType> dtypeFromProto(DType dtype);
DType dtypeToProto(octet::DType dtype);
// octet::dtypeName and dtypeBytes of the wire value's DType: "?" and 0 for
// one that has none.
const char *dtypeName(DType dtype);
uint64_t dtypeBytes(DType dtype);
const char *slotKindName(SlotKind kind);
const char *roleName(GemmRole role);
const char *programKindName(ProgramKind kind);
const char *epilogueName(GemmEpilogue epilogue);
using octet::humanBytes;

} // namespace octet::bundle

#endif
