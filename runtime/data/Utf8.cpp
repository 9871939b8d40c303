#include "runtime/data/Utf8.h"

namespace octet::data {

namespace {

// How many bytes a lead byte announces, and the range its first continuation
// byte must fall in (narrower than 80..BF where overlong forms, surrogates or
// code points past U+10FFFF would otherwise slip in).
struct LeadByteRule {
  size_t length;
  uint8_t secondMin;
  uint8_t secondMax;
};

LeadByteRule ruleFor(uint8_t lead) {
  if (lead < 0x80)
    return {1, 0, 0};
  if (lead >= 0xC2 && lead <= 0xDF)
    return {2, 0x80, 0xBF};
  if (lead == 0xE0)
    return {3, 0xA0, 0xBF};
  if (lead == 0xED)
    return {3, 0x80, 0x9F};
  if (lead >= 0xE1 && lead <= 0xEF)
    return {3, 0x80, 0xBF};
  if (lead == 0xF0)
    return {4, 0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3)
    return {4, 0x80, 0xBF};
  if (lead == 0xF4)
    return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Number of bytes from pos that form a valid prefix of a sequence; equals
// the full length when the sequence is complete and well formed.
size_t validPrefixLength(std::string_view text, size_t pos,
                         const LeadByteRule &rule) {
  size_t n = 1;
  while (n < rule.length && pos + n < text.size()) {
    uint8_t byte = static_cast<uint8_t>(text[pos + n]);
    uint8_t lo = n == 1 ? rule.secondMin : 0x80;
    uint8_t hi = n == 1 ? rule.secondMax : 0xBF;
    if (byte < lo || byte > hi)
      break;
    ++n;
  }
  return n;
}

} // namespace

size_t utf8SequenceLength(std::string_view text, size_t pos) {
  if (pos >= text.size())
    return 0;
  LeadByteRule rule = ruleFor(static_cast<uint8_t>(text[pos]));
  if (rule.length <= 1)
    return rule.length;
  return validPrefixLength(text, pos, rule) == rule.length ? rule.length : 0;
}

size_t findInvalidUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    // ASCII fast path: most text is ASCII.
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    size_t length = utf8SequenceLength(text, pos);
    if (length == 0)
      return pos;
    pos += length;
  }
  return std::string_view::npos;
}

std::string utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    LeadByteRule rule = ruleFor(static_cast<uint8_t>(bytes[pos]));
    if (rule.length == 0) {
      out += "\xEF\xBF\xBD";
      ++pos;
      continue;
    }
    size_t n = rule.length == 1 ? 1 : validPrefixLength(bytes, pos, rule);
    if (n == rule.length)
      out.append(bytes.substr(pos, n));
    else
      out += "\xEF\xBF\xBD";
    pos += n;
  }
  return out;
}

void appendUtf8(std::string &out, uint32_t codePoint) {
  if (codePoint < 0x80) {
    out += static_cast<char>(codePoint);
  } else if (codePoint < 0x800) {
    out += static_cast<char>(0xC0 | (codePoint >> 6));
    out += static_cast<char>(0x80 | (codePoint & 0x3F));
  } else if (codePoint < 0x10000) {
    out += static_cast<char>(0xE0 | (codePoint >> 12));
    out += static_cast<char>(0x80 | ((codePoint >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (codePoint & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (codePoint >> 18));
    out += static_cast<char>(0x80 | ((codePoint >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((codePoint >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (codePoint & 0x3F));
  }
}

uint32_t decodeUtf8(std::string_view text, size_t pos, size_t length) {
  auto byte = [&](size_t i) { return static_cast<uint8_t>(text[pos + i]); };
  switch (length) {
  case 1:
    return byte(0);
  case 2:
    return (uint32_t(byte(0) & 0x1F) << 6) | (byte(1) & 0x3F);
  case 3:
    return (uint32_t(byte(0) & 0x0F) << 12) | (uint32_t(byte(1) & 0x3F) << 6) |
           (byte(2) & 0x3F);
  default:
    return (uint32_t(byte(0) & 0x07) << 18) | (uint32_t(byte(1) & 0x3F) << 12) |
           (uint32_t(byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
  }
}

} // namespace octet::data
