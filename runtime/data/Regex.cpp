#include "runtime/data/Regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>

namespace octet::data {

struct Regex::Compiled {
  pcre2_code *code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

std::string pcre2ErrorText(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char *>(buffer);
}

// Per-thread match state: match data and a JIT stack large enough for the
// backtracking that whitespace-run patterns do on long inputs.
struct ThreadMatchState {
  pcre2_match_data *data = nullptr;
  pcre2_match_context *context = nullptr;
  pcre2_jit_stack *jitStack = nullptr;
  ThreadMatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    jitStack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    if (context && jitStack)
      pcre2_jit_stack_assign(context, nullptr, jitStack);
  }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(jitStack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

ThreadMatchState &threadMatchState() {
  thread_local ThreadMatchState state;
  return state;
}

// Runs one match from `start`; returns the PCRE2 result code.
int matchOnce(const pcre2_code *code, std::string_view text, size_t start,
              uint32_t options) {
  ThreadMatchState &state = threadMatchState();
  return pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()),
                     text.size(), start, options | PCRE2_NO_UTF_CHECK,
                     state.data, state.context);
}

Status matchError(int rc) {
  return Status::error("regular expression match failed: " +
                       pcre2ErrorText(rc));
}

} // namespace

std::string onigurumaToPcre2(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 16);
  int classDepth = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char next = pattern[++i];
      bool inClass = classDepth > 0;
      switch (next) {
      case 's': // Oniguruma's \s includes NEL (U+0085); PCRE2's does not.
        out += inClass ? "\\s\\x{85}" : "[\\s\\x{85}]";
        break;
      case 'S':
        out += inClass ? "\\S" : "[^\\s\\x{85}]";
        break;
      case 'h': // Oniguruma: hex digit. PCRE2: horizontal space.
        out += inClass ? "0-9a-fA-F" : "[0-9a-fA-F]";
        break;
      case 'H':
        out += inClass ? "\\x{0}-/:-@G-`g-\\x{10FFFF}" : "[^0-9a-fA-F]";
        break;
      default:
        out += c;
        out += next;
      }
      continue;
    }
    if (c == '[') {
      ++classDepth;
      out += c;
      // A ']' right after '[' or '[^' is a literal, not the class end.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^')
        out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']')
        out += pattern[++i];
      continue;
    }
    if (c == ']' && classDepth > 0)
      --classDepth;
    out += c;
  }
  return out;
}

StatusOr<Regex> Regex::compilePcre2(std::string_view pattern) {
  int errorCode = 0;
  PCRE2_SIZE errorOffset = 0;
  pcre2_code *code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                                   pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                   &errorCode, &errorOffset, nullptr);
  if (!code)
    return Status::error("cannot compile regular expression '" +
                         std::string(pattern) + "' at offset " +
                         std::to_string(errorOffset) + ": " +
                         pcre2ErrorText(errorCode));
  // Without JIT (unsupported platform) matching still works, only slower.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  auto compiled = std::make_shared<Compiled>();
  compiled->code = code;
  return Regex(std::move(compiled));
}

StatusOr<Regex> Regex::compileOniguruma(std::string_view pattern) {
  return compilePcre2(onigurumaToPcre2(pattern));
}

StatusOr<Regex> Regex::literal(std::string_view text) {
  std::string escaped;
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u))
      escaped += '\\';
    escaped += c;
  }
  return compilePcre2(escaped);
}

Status Regex::findAll(std::string_view text, std::vector<Span> &matches) const {
  const pcre2_code *code = compiled_->code;
  size_t pos = 0;
  while (pos <= text.size()) {
    int rc = matchOnce(code, text, pos, 0);
    if (rc == PCRE2_ERROR_NOMATCH)
      return Status::ok();
    if (rc < 0)
      return matchError(rc);
    PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(threadMatchState().data);
    size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      pos = end;
      continue;
    }
    // An empty match splits nothing: step over one whole character.
    if (begin >= text.size())
      return Status::ok();
    pos = begin + 1;
    while (pos < text.size() &&
           (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80)
      ++pos;
  }
  return Status::ok();
}

StatusOr<size_t> Regex::matchEndAt(std::string_view text, size_t pos) const {
  int rc = matchOnce(compiled_->code, text, pos, PCRE2_ANCHORED);
  if (rc == PCRE2_ERROR_NOMATCH)
    return std::string_view::npos;
  if (rc < 0)
    return matchError(rc);
  return pcre2_get_ovector_pointer(threadMatchState().data)[1];
}

StatusOr<bool> Regex::matchesAt(std::string_view text, size_t pos) const {
  StatusOr<size_t> end = matchEndAt(text, pos);
  if (!end)
    return end.status();
  return *end != std::string_view::npos;
}

} // namespace octet::data
