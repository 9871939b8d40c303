#ifndef OCTET_RUNTIME_DATA_REGEX_H
#define OCTET_RUNTIME_DATA_REGEX_H

#include "support/Status.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace octet::data {

// A compiled PCRE2 pattern in UTF mode with Unicode properties, JIT-compiled
// when the platform allows. Immutable and safe to share between threads.
class Regex {
public:
  using Span = std::pair<size_t, size_t>; // [begin, end) byte offsets

  // Compiles a pattern written for Oniguruma, the engine HF tokenizers uses:
  // the few escapes whose meaning differs in PCRE2 (\s also covers U+0085,
  // \h is a hex digit) are rewritten first.
  static StatusOr<Regex> compileOniguruma(std::string_view pattern);
  // A pattern matching `text` literally.
  static StatusOr<Regex> literal(std::string_view text);
  // A pattern in PCRE2 syntax as is.
  static StatusOr<Regex> compilePcre2(std::string_view pattern);

  // Appends the non-empty, non-overlapping matches in `text`, left to right.
  // `text` must be valid UTF-8 (the caller checks once, so each piece is not
  // checked again).
  Status findAll(std::string_view text, std::vector<Span> &matches) const;
  // Whether the pattern matches starting exactly at `pos`.
  StatusOr<bool> matchesAt(std::string_view text, size_t pos) const;
  // End of the match starting exactly at `pos`, or npos when none.
  StatusOr<size_t> matchEndAt(std::string_view text, size_t pos) const;

private:
  struct Compiled;
  explicit Regex(std::shared_ptr<const Compiled> compiled)
      : compiled_(std::move(compiled)) {}
  std::shared_ptr<const Compiled> compiled_;
};

// The rewrite compileOniguruma applies, exposed for tests.
std::string onigurumaToPcre2(std::string_view pattern);

} // namespace octet::data

#endif
