#ifndef OCTET_DIALECTS_GRAPH_WEIGHTCACHE_H
#define OCTET_DIALECTS_GRAPH_WEIGHTCACHE_H

// A weight cache is state the optimizer step (and the init program) writes
// from one parameter for the steps to read instead of the f32 parameter:
// its FP8 cast (`fp8w.<param>`, with the amax or the scales, and the
// K-major copy `.t` until octet-step-local-kmajor-weights makes that in the
// step) or its BF16 cast (`bf16w.<param>`), made by octet-fuse-adamw. The
// memory plan holds them in WEIGHT_CACHE slots, a pipeline rank keeps them
// with their parameter, and checkpoints save them (a resume is bit-exact).

#include "llvm/ADT/StringRef.h"

#include <optional>

namespace octet::graph {

inline constexpr llvm::StringLiteral kFp8WeightCachePrefix = "fp8w.";
inline constexpr llvm::StringLiteral kBf16WeightCachePrefix = "bf16w.";

inline bool isWeightCache(llvm::StringRef name) {
  return name.starts_with(kFp8WeightCachePrefix) ||
         name.starts_with(kBf16WeightCachePrefix);
}

// A BF16 cache exists only in layouts that gather it (ZeRO-1), so
// checkpoints leave it out and a resumed run makes it again from the
// parameters (INIT); the FP8 caches, present at every layout, are saved.
inline bool isDerivedCache(llvm::StringRef name) {
  return name.starts_with(kBf16WeightCachePrefix);
}

// The K-major (transposed) copy of an FP8 cache, `fp8w.<param>.t`: state
// that octet-fuse-adamw makes and octet-step-local-kmajor-weights turns
// into a transpose in the step, where only the row-major cache is kept.
inline constexpr llvm::StringLiteral kKMajorCacheSuffix = ".t";

inline bool isKMajorCache(llvm::StringRef name) {
  return name.starts_with(kFp8WeightCachePrefix) &&
         name.ends_with(kKMajorCacheSuffix);
}

// The cache's name without its prefix (the parameter's name, followed by a
// suffix for the FP8 cache's other tensors), or nullopt for another name.
inline std::optional<llvm::StringRef> weightCacheRest(llvm::StringRef name) {
  for (llvm::StringRef prefix : {kFp8WeightCachePrefix, kBf16WeightCachePrefix})
    if (name.consume_front(prefix))
      return name;
  return std::nullopt;
}

} // namespace octet::graph

#endif
