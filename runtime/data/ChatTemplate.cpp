#include "runtime/data/ChatTemplate.h"

namespace octet::data {

namespace {

constexpr const char *kBeginOfText = "<|begin_of_text|>";
constexpr const char *kStartHeader = "<|start_header_id|>";
constexpr const char *kEndHeader = "<|end_header_id|>";
constexpr const char *kEndOfTurn = "<|eot_id|>";

std::string_view trimmed(std::string_view text) {
  const char *space = " \t\n\r\f\v";
  size_t begin = text.find_first_not_of(space);
  if (begin == std::string_view::npos)
    return {};
  size_t end = text.find_last_not_of(space);
  return text.substr(begin, end - begin + 1);
}

} // namespace

StatusOr<Llama3ChatTemplate>
Llama3ChatTemplate::create(const Tokenizer &tokenizer) {
  Llama3ChatTemplate result(tokenizer);
  std::pair<const char *, int32_t *> specials[] = {
      {kBeginOfText, &result.beginOfText_},
      {kStartHeader, &result.startHeader_},
      {kEndHeader, &result.endHeader_},
      {kEndOfTurn, &result.endOfTurn_}};
  for (auto &[name, slot] : specials) {
    std::optional<int32_t> id = tokenizer.tokenToId(name);
    if (!id)
      return Status::error(std::string("the tokenizer has no ") + name +
                           " token, which the Llama 3 chat template needs; "
                           "use a Llama 3 tokenizer.json");
    *slot = *id;
  }
  return result;
}

std::string
Llama3ChatTemplate::render(const std::vector<ChatMessage> &messages) {
  std::string text = kBeginOfText;
  for (const ChatMessage &message : messages) {
    text += kStartHeader;
    text += message.role;
    text += kEndHeader;
    text += "\n\n";
    text += trimmed(message.content);
    text += kEndOfTurn;
  }
  return text;
}

StatusOr<TokenizedSample>
Llama3ChatTemplate::tokenize(const std::vector<ChatMessage> &messages) const {
  TokenizedSample sample;
  auto push = [&](int32_t id, bool trained) {
    sample.tokens.push_back(id);
    sample.lossMask.push_back(trained ? 1 : 0);
  };
  push(beginOfText_, false);
  std::vector<int32_t> ids;
  std::vector<uint32_t> starts;
  // Special tokens split the text, so encoding the pieces between them one
  // by one gives the tokens of the rendered whole.
  for (const ChatMessage &message : messages) {
    bool trained = message.role == "assistant";
    push(startHeader_, false);
    ids.clear();
    if (Status s = tokenizer_.encodeInto(message.role, false, ids); !s)
      return s;
    for (int32_t id : ids)
      push(id, false);
    push(endHeader_, false);

    std::string body = "\n\n";
    body += trimmed(message.content);
    ids.clear();
    starts.clear();
    if (Status s = tokenizer_.encodeInto(body, false, ids, &starts); !s)
      return s.withContext("message with role " + message.role);
    // Tokens starting inside the "\n\n" belong to the header.
    for (size_t i = 0; i < ids.size(); ++i)
      push(ids[i], trained && starts[i] >= 2);
    push(endOfTurn_, trained);
  }
  return sample;
}

} // namespace octet::data
