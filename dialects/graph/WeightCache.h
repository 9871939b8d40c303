#ifndef OCTET_DIALECTS_GRAPH_WEIGHTCACHE_H
#define OCTET_DIALECTS_GRAPH_WEIGHTCACHE_H

// A weight cache is state the optimizer step (and the init program) writes
// from one parameter for the steps to read instead of the f32 parameter:
// its FP8 cast (`fp8w.<param>`, with the amax or the scales, and the
// K-major copy `.t` until octet-step-local-kmajor-weights makes that in the
// step) or its BF16 cast (`bf16w.<param>`), made by octet-fuse-adamw. The
// memory plan holds them in WEIGHT_CACHE slots, a pipeline rank keeps them
// with their parameter, and checkpoints save them (a resume is bit-exact).
// octet-step-local-fp8-weights makes the FP8 cast itself in the step, from
// the f32 parameter; its amax and scales stay state.

#include "llvm/ADT/StringRef.h"

#include <optional>

namespace octet::graph {

inline constexpr llvm::StringLiteral kFp8WeightCachePrefix = "fp8w.";
inline constexpr llvm::StringLiteral kBf16WeightCachePrefix = "bf16w.";

inline bool isWeightCache(llvm::StringRef name) {
  return name.starts_with(kFp8WeightCachePrefix) ||
         name.starts_with(kBf16WeightCachePrefix);
}

// The scale the optimizer cast an FP8 weight with under delayed scaling,
// `fp8w.<param>.cast_scale`, kept where the cast is made in the step
// (octet-step-local-fp8-weights): the step's own scale of the weight may
// have moved on by a later microbatch.
inline constexpr llvm::StringLiteral kCastScaleSuffix = ".cast_scale";

// A BF16 cache exists only in some layouts (ZeRO-1, which gathers it, or
// train.codegen.bf16_weight_cast "optimizer"), so checkpoints leave it out
// and a resumed run makes it again from the parameters (INIT); the FP8
// caches, present at every layout, are saved.
// So is the delayed cast scale: INIT copies it from the weight's scale,
// which at a step's end (where checkpoints are taken) is the one the
// optimizer cast with, so a checkpoint saved before it existed resumes too.
inline bool isDerivedCache(llvm::StringRef name) {
  return name.starts_with(kBf16WeightCachePrefix) ||
         (name.starts_with(kFp8WeightCachePrefix) &&
          name.ends_with(kCastScaleSuffix));
}

// The K-major (transposed) copy of an FP8 cache, `fp8w.<param>.t`: state
// that octet-fuse-adamw makes and octet-step-local-kmajor-weights turns
// into a transpose in the step, where only the row-major cache is kept.
inline constexpr llvm::StringLiteral kKMajorCacheSuffix = ".t";

inline bool isKMajorCache(llvm::StringRef name) {
  return name.starts_with(kFp8WeightCachePrefix) &&
         name.ends_with(kKMajorCacheSuffix);
}

// The FP8 copy of parameter `param` itself, `fp8w.<param>` (not its amax,
// scales or K-major copy): what @cache_weights makes from the parameter,
// so a checkpoint saved where the step casts the weight
// (octet-step-local-fp8-weights) and holds no copy resumes in a layout
// that keeps one by running the init functions.
inline bool isFp8WeightCopyOf(llvm::StringRef name, llvm::StringRef param) {
  return name.consume_front(kFp8WeightCachePrefix) && name == param;
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
