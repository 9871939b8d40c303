#ifndef OCTET_BUNDLE_INITVALUES_H
#define OCTET_BUNDLE_INITVALUES_H

// The initial value of a parameter or state tensor as its bundle Init says,
// computed on the host exactly as the reference interpreter computes it
// (bundle.proto, message Init, gives the generator), so a GPU run and a CPU
// run start from the same bits.

#include "bundle/bundle.pb.h"
#include "support/Status.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace octet::bundle {

// The per-tensor seed the compiler stores in Init.seed: the spec's seed
// XOR the FNV-1a hash of the tensor's name.
uint64_t initSeed(uint64_t specSeed, std::string_view name);

// `elements` values in `dtype`, little-endian, ready for a slot. `what`
// names the tensor in errors (a NORMAL init of an integer or FP8 tensor).
StatusOr<std::string> initialBytes(const Init &init, DType dtype,
                                   uint64_t elements, const std::string &what);

// The bytes of one element of `dtype` (an error naming `what` for a type
// this runtime does not know).
StatusOr<uint64_t> initialElementBytes(DType dtype, const std::string &what);

// Elements [first, first + count) of that value into `out` (count ×
// initialElementBytes): the same bytes initialBytes has there, so that
// ranges filled apart (by threads, or a rank's part alone) join into it.
Status initialRange(const Init &init, DType dtype, uint64_t first,
                    uint64_t count, char *out, const std::string &what);

// Elements [first, first + count) as bytes, filled by up to `threads`
// threads (ranges of at least a million elements each): a large model's
// normal draws take minutes on one core.
StatusOr<std::string> initialPart(const Init &init, DType dtype,
                                  uint64_t first, uint64_t count,
                                  const std::string &what, unsigned threads);

} // namespace octet::bundle

#endif
