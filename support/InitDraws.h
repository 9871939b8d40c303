#ifndef OCTET_SUPPORT_INITDRAWS_H
#define OCTET_SUPPORT_INITDRAWS_H

// The normal draws that initialise weights, the same on every platform
// (std::normal_distribution is not): SplitMix64 seeded per tensor with the
// run's seed XOR the FNV-1a hash of the tensor's name, so values depend on
// names and not on the order of the tensors. The reference interpreter and
// the GPU runtime's host (bundle/InitValues) both draw from here.
// Header-only and dependency-free.

#include <cmath>
#include <cstdint>
#include <string_view>

namespace octet::numerics {

inline uint64_t initSeed(uint64_t seed, std::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return seed ^ h;
}

class NormalDraws {
public:
  // Positioned at value `first` of the tensor's sequence: each value takes
  // two draws of SplitMix64, whose state only ever adds its constant, so a
  // range of a tensor (a thread's, a data-parallel rank's part) starts
  // where the whole sequence would be and gives the same bits.
  explicit NormalDraws(uint64_t tensorSeed, uint64_t first = 0)
      : state_(tensorSeed + first * 2 * kStep) {}

  // One standard normal value (Box-Muller, two uniform draws).
  double next() {
    // 1 - u keeps the logarithm finite.
    double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2);
  }

private:
  static constexpr uint64_t kStep = 0x9e3779b97f4a7c15ull;

  uint64_t mix() {
    uint64_t z = (state_ += kStep);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return (mix() >> 11) * (1.0 / 9007199254740992.0); }

  uint64_t state_;
};

} // namespace octet::numerics

#endif
