#ifndef OCTET_RUNTIME_DATA_RANDOM_H
#define OCTET_RUNTIME_DATA_RANDOM_H

#include <cstdint>
#include <random>

namespace octet::data {

// Mixes a 64-bit value into a well-spread one (SplitMix64's finalizer), to
// derive independent seeds from (seed, epoch) or (seed, step).
inline uint64_t splitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t deriveSeed(uint64_t seed, uint64_t stream) {
  return splitMix64(seed ^ splitMix64(stream));
}

// Unbiased integer in [0, bound) by rejection. Written out because
// std::uniform_int_distribution's algorithm differs between standard
// libraries, and data order must not.
inline uint64_t boundedRandom(std::mt19937_64 &rng, uint64_t bound) {
  uint64_t threshold = (0 - bound) % bound;
  while (true) {
    uint64_t r = rng();
    if (r >= threshold)
      return r % bound;
  }
}

} // namespace octet::data

#endif
