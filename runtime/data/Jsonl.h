#ifndef OCTET_RUNTIME_DATA_JSONL_H
#define OCTET_RUNTIME_DATA_JSONL_H

#include "support/Status.h"

#include <string>
#include <string_view>
#include <vector>

namespace octet::data {

struct ChatMessage {
  std::string role;
  std::string content;
};

// One line of a training jsonl file: {"text": "..."} or
// {"messages": [{"role": "...", "content": "..."}, ...]}.
struct JsonlRecord {
  enum class Kind { Text, Chat } kind = Kind::Text;
  std::string text;
  std::vector<ChatMessage> messages;
};

// Roles the Llama 3 chat template knows.
bool isKnownChatRole(std::string_view role);

// Parses one line. Errors say what is wrong with the line, not where it is:
// the caller adds the file name and line number.
StatusOr<JsonlRecord> parseJsonlLine(std::string_view line,
                                     const std::string &textKey = "text");

} // namespace octet::data

#endif
