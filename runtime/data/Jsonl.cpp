#include "runtime/data/Jsonl.h"

#include <nlohmann/json.hpp>

namespace octet::data {

using nlohmann::json;

namespace {

constexpr const char *kChatRoles[] = {"system", "user", "assistant", "tool",
                                      "ipython"};

std::string typeName(const json &value) { return value.type_name(); }

} // namespace

bool isKnownChatRole(std::string_view role) {
  for (const char *known : kChatRoles)
    if (role == known)
      return true;
  return false;
}

StatusOr<JsonlRecord> parseJsonlLine(std::string_view line,
                                     const std::string &textKey) {
  json root = json::parse(line.begin(), line.end(), nullptr,
                          /*allow_exceptions=*/false);
  if (root.is_discarded())
    return Status::error("not valid JSON (each line must be one JSON object)");
  if (!root.is_object())
    return Status::error("expected a JSON object, found " + typeName(root));
  auto messages = root.find("messages");
  auto text = root.find(textKey);
  if (messages != root.end() && text != root.end())
    return Status::error("has both \"" + textKey +
                         "\" and \"messages\"; keep one per line");
  JsonlRecord record;
  if (messages == root.end()) {
    if (text == root.end())
      return Status::error("has neither \"" + textKey + "\" nor \"messages\"");
    if (!text->is_string())
      return Status::error("\"" + textKey + "\" is " + typeName(*text) +
                           ", expected a string");
    record.text = text->get<std::string>();
    return record;
  }
  record.kind = JsonlRecord::Kind::Chat;
  if (!messages->is_array())
    return Status::error("\"messages\" is " + typeName(*messages) +
                         ", expected an array of {\"role\", \"content\"}");
  if (messages->empty())
    return Status::error("\"messages\" is empty");
  for (size_t i = 0; i < messages->size(); ++i) {
    const json &message = (*messages)[i];
    std::string where = "messages[" + std::to_string(i) + "]";
    if (!message.is_object())
      return Status::error(where + " is " + typeName(message) +
                           ", expected {\"role\", \"content\"}");
    auto role = message.find("role");
    auto content = message.find("content");
    if (role == message.end() || !role->is_string())
      return Status::error(where + ".role is missing or not a string");
    if (content == message.end() || !content->is_string())
      return Status::error(where + ".content is missing or not a string");
    std::string roleName = role->get<std::string>();
    if (!isKnownChatRole(roleName))
      return Status::error(where + ".role \"" + roleName +
                           "\" is not a chat role; use system, user, "
                           "assistant, tool or ipython");
    record.messages.push_back(
        {std::move(roleName), content->get<std::string>()});
  }
  return record;
}

} // namespace octet::data
