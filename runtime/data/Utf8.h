#ifndef OCTET_RUNTIME_DATA_UTF8_H
#define OCTET_RUNTIME_DATA_UTF8_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace octet::data {

// Length in bytes of the well-formed UTF-8 sequence at text[pos], or 0 when
// the bytes there are not one (a stray continuation byte, an overlong form, a
// surrogate, a truncated sequence).
size_t utf8SequenceLength(std::string_view text, size_t pos);

// Offset of the first byte that is not well-formed UTF-8, or npos.
size_t findInvalidUtf8(std::string_view text);

// Converts bytes to valid UTF-8, replacing each maximal invalid subpart with
// U+FFFD, the policy of the Unicode standard (and of Rust's
// String::from_utf8_lossy, which HF tokenizers' decoders use).
std::string utf8Lossy(std::string_view bytes);

// Appends the UTF-8 form of a code point.
void appendUtf8(std::string &out, uint32_t codePoint);

// Decodes the code point at text[pos], which must start a well-formed
// sequence of `length` bytes.
uint32_t decodeUtf8(std::string_view text, size_t pos, size_t length);

} // namespace octet::data

#endif
