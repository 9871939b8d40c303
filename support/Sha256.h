#ifndef OCTET_SUPPORT_SHA256_H
#define OCTET_SUPPORT_SHA256_H

// SHA-256 (FIPS 180-4) for bundle content hashes. Kept here rather than
// pulling in a crypto library so that octet-run links nothing new.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace octet::bundle {

std::array<uint8_t, 32> sha256(std::string_view data);
std::string toHex(std::string_view bytes);

} // namespace octet::bundle

#endif
