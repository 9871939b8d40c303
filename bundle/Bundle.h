#ifndef OCTET_BUNDLE_BUNDLE_H
#define OCTET_BUNDLE_BUNDLE_H

// Reading, writing and checking .octet bundles. Writing is deterministic:
// the same Bundle message always gives the same bytes, and the content hash
// covers everything but itself.

#include "bundle/bundle.pb.h"
#include "support/Bytes.h"
#include "support/Status.h"

#include <cstdint>
#include <string>

namespace octet::bundle {

// The format this code reads and writes (Bundle.format_version).
// 2: GEMM scale slots hold dequantization factors (quantize_scales gone),
// kernels carry code, Init has a per-tensor seed.
constexpr uint32_t kBundleFormatVersion = 2;

// Deterministic serialization of `bundle` as it is (content_hash included).
std::string serializeDeterministic(const Bundle &bundle);

// SHA-256 over the deterministic serialization with content_hash cleared.
std::string computeContentHash(const Bundle &bundle);

// Sets format_version (when unset) and content_hash, then serializes.
std::string finalizeAndSerialize(Bundle &bundle);

// Writes atomically (a temporary beside `path`, then rename), so a reader
// never sees half a bundle.
Status writeBundle(Bundle &bundle, const std::string &path);

// Parses bytes; `origin` names them in errors. Checks the format version and
// the content hash, then validate().
StatusOr<Bundle> parseBundle(const std::string &bytes,
                             const std::string &origin);
StatusOr<Bundle> readBundle(const std::string &path);

// Structural checks: every index in range, every slot inside its arena and
// aligned, every program of every rank present. Messages name the element.
Status validate(const Bundle &bundle);

// Whether this runtime can execute the bundle: every kernel has code. Names
// what is missing.
Status checkRunnable(const Bundle &bundle);

const char *dtypeName(DType dtype);
// Bytes of one element; 0 for DTYPE_UNSPECIFIED.
uint64_t dtypeBytes(DType dtype);
const char *slotKindName(SlotKind kind);
const char *roleName(GemmRole role);
const char *programKindName(ProgramKind kind);
const char *epilogueName(GemmEpilogue epilogue);
using octet::humanBytes;

} // namespace octet::bundle

#endif
