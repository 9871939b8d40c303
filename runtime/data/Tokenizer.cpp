#include "runtime/data/Tokenizer.h"

#include "runtime/data/Regex.h"
#include "runtime/data/Utf8.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <deque>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace octet::data {

using nlohmann::json;

namespace {

// GPT-2's pattern, which HF's ByteLevel pre-tokenizer applies when use_regex
// is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct ByteLevelTables {
  std::array<std::string, 256> charFor;
  std::unordered_map<uint32_t, uint8_t> byteFor; // code point -> byte

  ByteLevelTables() {
    // Printable Latin-1 bytes stand for themselves; the others are moved to
    // U+0100 and up, in byte order, so every byte is a visible character.
    uint32_t shifted = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) ||
                       (b >= 0xAE && b <= 0xFF);
      uint32_t codePoint = printable ? b : 256 + shifted++;
      appendUtf8(charFor[b], codePoint);
      byteFor[codePoint] = static_cast<uint8_t>(b);
    }
  }
};

const ByteLevelTables &byteLevelTables() {
  static const ByteLevelTables tables;
  return tables;
}

// Maps a byte-level token back to its bytes; nullopt when some character is
// not one of the 256 byte characters.
std::optional<std::string> byteLevelToBytes(std::string_view token) {
  const ByteLevelTables &tables = byteLevelTables();
  std::string bytes;
  for (size_t pos = 0; pos < token.size();) {
    size_t length = utf8SequenceLength(token, pos);
    if (length == 0)
      return std::nullopt;
    auto it = tables.byteFor.find(decodeUtf8(token, pos, length));
    if (it == tables.byteFor.end())
      return std::nullopt;
    bytes += static_cast<char>(it->second);
    pos += length;
  }
  return bytes;
}

enum class SplitBehavior {
  Removed,
  Isolated,
  MergedWithPrevious,
  MergedWithNext,
  Contiguous
};

struct PreTokenizerStep {
  enum class Kind { Split, ByteLevel } kind;
  std::optional<Regex> regex; // ByteLevel without use_regex has none
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  bool addPrefixSpace = false;
};

struct AddedToken {
  int32_t id;
  std::string content;
  bool singleWord, lstrip, rstrip, normalized, special;
};

// Leftmost-longest matching of added tokens over bytes, the semantics of the
// Aho-Corasick automaton HF builds (MatchKind::LeftmostLongest).
class AddedTokenTrie {
public:
  void insert(std::string_view content, size_t tokenIndex) {
    int32_t node = 0;
    for (char c : content) {
      uint8_t byte = static_cast<uint8_t>(c);
      int32_t child = findChild(node, byte);
      if (child < 0) {
        child = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        nodes_[node].children.emplace_back(byte, child);
      }
      node = child;
    }
    nodes_[node].tokenIndex = static_cast<int32_t>(tokenIndex);
    firstBytes_[static_cast<uint8_t>(content[0])] = true;
  }
  bool empty() const { return nodes_.size() == 1; }
  // Longest token starting at `pos`: (token index, end) or (-1, pos).
  std::pair<int32_t, size_t> longestAt(std::string_view text,
                                       size_t pos) const {
    std::pair<int32_t, size_t> best{-1, pos};
    if (!firstBytes_[static_cast<uint8_t>(text[pos])])
      return best;
    int32_t node = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      node = findChild(node, static_cast<uint8_t>(text[i]));
      if (node < 0)
        break;
      if (nodes_[node].tokenIndex >= 0)
        best = {nodes_[node].tokenIndex, i + 1};
    }
    return best;
  }

private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;
    int32_t tokenIndex = -1;
  };
  int32_t findChild(int32_t node, uint8_t byte) const {
    for (const auto &[b, child] : nodes_[node].children)
      if (b == byte)
        return child;
    return -1;
  }
  std::vector<Node> nodes_{Node()};
  std::array<bool, 256> firstBytes_{};
};

// Open-addressing map from a pair of token ids to (rank, merged id). Merges
// are looked up in the innermost loop of BPE; std::unordered_map's node
// chasing costs a noticeable share of encode time.
class MergeTable {
public:
  struct Entry {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    int32_t mergedId = 0;
  };
  void reserve(size_t count) {
    size_t capacity = 16;
    shift_ = 60;
    while (capacity < count * 2) {
      capacity <<= 1;
      --shift_;
    }
    slots_.assign(capacity, Entry());
  }
  // Later merges of the same pair replace earlier ones, as in HF.
  void insertOrAssign(int32_t left, int32_t right, int32_t rank,
                      int32_t mergedId) {
    uint64_t key = pairKey(left, right);
    size_t slot = probeFor(key);
    slots_[slot] = {key, rank, mergedId};
  }
  const Entry *find(int32_t left, int32_t right) const {
    if (slots_.empty())
      return nullptr;
    const Entry &entry = slots_[probeFor(pairKey(left, right))];
    return entry.key == kEmpty ? nullptr : &entry;
  }

private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  static uint64_t pairKey(int32_t left, int32_t right) {
    return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  }
  size_t probeFor(uint64_t key) const {
    size_t mask = slots_.size() - 1;
    // Fibonacci hashing: the top bits of the product depend on every bit
    // of both ids.
    size_t slot = (key * 0x9E3779B97F4A7C15ull) >> shift_;
    while (slots_[slot].key != kEmpty && slots_[slot].key != key)
      slot = (slot + 1) & mask;
    return slot;
  }
  std::vector<Entry> slots_;
  int shift_ = 60;
};

// A piece of text on its way through pre-tokenization. `synthetic` counts
// leading bytes that are not in the input (ByteLevel's prefix space).
struct Piece {
  std::string_view text;
  uint32_t sourceBegin;
  uint32_t synthetic;
};

Piece subPiece(const Piece &piece, size_t begin, size_t end) {
  uint32_t offset = static_cast<uint32_t>(begin);
  return {piece.text.substr(begin, end - begin),
          piece.sourceBegin +
              (offset > piece.synthetic ? offset - piece.synthetic : 0),
          offset < piece.synthetic ? piece.synthetic - offset : 0};
}

// Open-addressing map from token bytes to id: looked up once per
// pre-tokenized piece and once per character, so it is kept flat.
class TokenTable {
public:
  void build(const std::vector<std::pair<std::string_view, int32_t>> &entries) {
    size_t capacity = 16;
    while (capacity < entries.size() * 2)
      capacity <<= 1;
    slots_.assign(capacity, {std::string_view(), -1});
    for (const auto &[key, id] : entries) {
      size_t slot = probeFor(key);
      slots_[slot] = {key, id};
    }
  }
  int32_t find(std::string_view key) const {
    if (slots_.empty())
      return -1;
    return slots_[probeFor(key)].second;
  }

private:
  static uint64_t hash(std::string_view key) {
    uint64_t h = 0xCBF29CE484222325ull; // FNV-1a: short keys, few cycles
    for (char c : key) {
      h ^= static_cast<uint8_t>(c);
      h *= 0x100000001B3ull;
    }
    return h ^ (h >> 29);
  }
  size_t probeFor(std::string_view key) const {
    size_t mask = slots_.size() - 1;
    size_t slot = hash(key) & mask;
    while (slots_[slot].second >= 0 && slots_[slot].first != key)
      slot = (slot + 1) & mask;
    return slot;
  }
  std::vector<std::pair<std::string_view, int32_t>> slots_;
};

// Reused buffers of the BPE merge loop, so encoding allocates nothing per
// word.
struct BpeSymbol {
  int32_t id;
  int32_t prev, next;
  uint32_t length;
};
struct BpeCandidate {
  int32_t rank, pos, mergedId;
  // Heap order: lowest rank first; among equal ranks, the leftmost.
  bool operator<(const BpeCandidate &o) const {
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};
struct BpeScratch {
  std::vector<BpeSymbol> symbols;
  std::vector<BpeCandidate> heap;
};

BpeScratch &threadBpeScratch() {
  thread_local BpeScratch scratch;
  return scratch;
}

} // namespace

struct Tokenizer::Impl {
  std::string sourceName;

  // Model.
  std::vector<std::string> modelTokens; // by id, as written in tokenizer.json
  std::vector<bool> modelIdPresent;
  std::unordered_map<std::string, int32_t> modelIds;
  std::deque<std::string> rawTokenStorage;
  TokenTable rawVocab; // input bytes -> id
  std::array<int32_t, 256> byteIds;
  MergeTable merges;
  bool ignoreMerges = false;
  std::optional<int32_t> unkId;
  bool fuseUnk = false;

  // Pre-tokenization. `byteLevel`: the model sees bytes, not characters.
  std::vector<PreTokenizerStep> steps;
  bool byteLevel = false;

  // Added tokens, matched before pre-tokenization.
  std::vector<AddedToken> added;
  std::unordered_map<int32_t, size_t> addedById;
  std::unordered_map<std::string, int32_t> addedByContent;
  std::unordered_set<std::string> specialContents;
  AddedTokenTrie rawTrie, normalizedTrie;
  std::optional<Regex> wordCharacter, whitespaceCharacter;

  // Post-processing template for a single sequence.
  std::vector<int32_t> templatePrefix, templateSuffix;

  bool byteLevelDecoder = false;
  int32_t vocabSize = 0;

  Status splitAddedTokens(std::string_view text, size_t base,
                          const AddedTokenTrie &trie,
                          std::vector<std::pair<Piece, int32_t>> &out) const;
  Status preTokenize(const Piece &segment, std::deque<std::string> &arena,
                     std::vector<Piece> &pieces) const;
  void encodeWord(std::string_view word, std::vector<int32_t> &ids,
                  std::vector<uint32_t> *lengths) const;
  void appendWord(const Piece &piece, std::vector<int32_t> &ids,
                  std::vector<uint32_t> *starts) const;
};

const std::string &byteLevelCharFor(uint8_t byte) {
  return byteLevelTables().charFor[byte];
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

namespace {

class Loader {
public:
  Loader(const std::string &sourceName, Tokenizer::Impl &impl)
      : source_(sourceName), impl_(impl) {}

  Status load(const json &root);

private:
  Status error(const std::string &field, const std::string &message) const {
    return Status::error(source_ + ": " + field + ": " + message);
  }
  Status unsupported(const std::string &field, const std::string &what) const {
    return error(field, what + " is not supported; octet reads byte-level BPE "
                               "tokenizers (Llama 3 and GPT-2 style)");
  }
  StatusOr<bool> flag(const json &object, const std::string &field,
                      const char *key, bool fallback) const {
    auto it = object.find(key);
    if (it == object.end() || it->is_null())
      return fallback;
    if (!it->is_boolean())
      return error(field + "." + key, "expected true or false");
    return it->get<bool>();
  }

  Status loadModel(const json &model);
  Status loadMerges(const json &merges,
                    const std::unordered_map<std::string, int32_t> &vocab);
  Status loadNormalizer(const json &normalizer);
  Status loadPreTokenizer(const json &preTokenizer, const std::string &field);
  Status loadAddedTokens(const json &addedTokens);
  Status loadPostProcessor(const json &processor, const std::string &field);
  Status loadDecoder(const json &decoder);
  StatusOr<SplitBehavior> splitBehavior(const json &split,
                                        const std::string &field) const;

  std::string source_;
  Tokenizer::Impl &impl_;
};

Status Loader::load(const json &root) {
  if (!root.is_object())
    return Status::error(source_ + ": expected a JSON object at the top");
  auto model = root.find("model");
  if (model == root.end() || !model->is_object())
    return error("model", "missing; a tokenizer.json names its model");
  if (Status s = loadModel(*model); !s)
    return s;
  if (Status s = loadNormalizer(root.value("normalizer", json())); !s)
    return s;
  if (Status s = loadPreTokenizer(root.value("pre_tokenizer", json()),
                                  "pre_tokenizer");
      !s)
    return s;
  for (size_t i = 0; i < impl_.steps.size(); ++i)
    if (impl_.steps[i].kind == PreTokenizerStep::Kind::ByteLevel &&
        i + 1 != impl_.steps.size())
      return unsupported("pre_tokenizer",
                         "a ByteLevel pre-tokenizer followed by others");
  if (Status s = loadAddedTokens(root.value("added_tokens", json::array())); !s)
    return s;
  if (Status s = loadPostProcessor(root.value("post_processor", json()),
                                   "post_processor");
      !s)
    return s;
  return loadDecoder(root.value("decoder", json()));
}

Status Loader::loadModel(const json &model) {
  std::string type = model.value("type", "");
  if (type.empty() && model.contains("merges"))
    type = "BPE"; // tokenizers omits the tag in some older files
  if (type != "BPE")
    return unsupported("model.type", "model type \"" + type + "\"");
  auto dropout = model.find("dropout");
  if (dropout != model.end() && !dropout->is_null() &&
      !(dropout->is_number() && dropout->get<double>() == 0.0))
    return unsupported("model.dropout", "BPE dropout");
  for (const char *key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(key);
    if (it != model.end() && !it->is_null() &&
        !(it->is_string() && it->get<std::string>().empty()))
      return unsupported(std::string("model.") + key, key);
  }
  StatusOr<bool> byteFallback = flag(model, "model", "byte_fallback", false);
  if (!byteFallback)
    return byteFallback.status();
  if (*byteFallback)
    return unsupported("model.byte_fallback", "byte_fallback (SentencePiece "
                                              "style BPE)");
  StatusOr<bool> ignoreMerges = flag(model, "model", "ignore_merges", false);
  StatusOr<bool> fuseUnk = flag(model, "model", "fuse_unk", false);
  if (!ignoreMerges)
    return ignoreMerges.status();
  if (!fuseUnk)
    return fuseUnk.status();
  impl_.ignoreMerges = *ignoreMerges;
  impl_.fuseUnk = *fuseUnk;

  auto vocabIt = model.find("vocab");
  if (vocabIt == model.end() || !vocabIt->is_object())
    return error("model.vocab", "missing or not an object of token: id");
  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(vocabIt->size());
  for (auto it = vocabIt->begin(); it != vocabIt->end(); ++it) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 ||
        it->get<int64_t>() > INT32_MAX)
      return error("model.vocab[\"" + it.key() + "\"]",
                   "expected a non-negative integer id");
    int32_t id = static_cast<int32_t>(it->get<int64_t>());
    vocab.emplace(it.key(), id);
    if (static_cast<size_t>(id) >= impl_.modelTokens.size()) {
      impl_.modelTokens.resize(id + 1);
      impl_.modelIdPresent.resize(id + 1, false);
    }
    impl_.modelTokens[id] = it.key();
    impl_.modelIdPresent[id] = true;
  }
  impl_.vocabSize = static_cast<int32_t>(impl_.modelTokens.size());
  impl_.modelIds = vocab;

  auto unk = model.find("unk_token");
  if (unk != model.end() && !unk->is_null()) {
    if (!unk->is_string())
      return error("model.unk_token", "expected a string or null");
    auto id = vocab.find(unk->get<std::string>());
    if (id == vocab.end())
      return error("model.unk_token",
                   "\"" + unk->get<std::string>() + "\" is not in model.vocab");
    impl_.unkId = id->second;
  }

  auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array())
    return error("model.merges", "missing or not an array");
  return loadMerges(*merges, vocab);
}

Status
Loader::loadMerges(const json &merges,
                   const std::unordered_map<std::string, int32_t> &vocab) {
  impl_.merges.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json &merge = merges[rank];
    std::string field = "model.merges[" + std::to_string(rank) + "]";
    std::string left, right;
    if (merge.is_string()) {
      const std::string &text = merge.get_ref<const std::string &>();
      size_t space = text.find(' ');
      if (space == std::string::npos)
        return error(field,
                     "\"" + text + "\" is not two tokens separated by a space");
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      return error(field, "expected \"a b\" or [\"a\", \"b\"]");
    }
    auto leftId = vocab.find(left), rightId = vocab.find(right),
         mergedId = vocab.find(left + right);
    if (leftId == vocab.end() || rightId == vocab.end() ||
        mergedId == vocab.end())
      return error(field, "\"" + left + "\" + \"" + right +
                              "\" uses a token that is not in model.vocab");
    impl_.merges.insertOrAssign(leftId->second, rightId->second,
                                static_cast<int32_t>(rank), mergedId->second);
  }
  return Status::ok();
}

Status Loader::loadNormalizer(const json &normalizer) {
  if (normalizer.is_null())
    return Status::ok();
  std::string type = normalizer.value("type", "");
  if (type == "Sequence" &&
      normalizer.value("normalizers", json::array()).empty())
    return Status::ok();
  return unsupported("normalizer", "normalizer \"" + type + "\"");
}

StatusOr<SplitBehavior> Loader::splitBehavior(const json &split,
                                              const std::string &field) const {
  std::string behavior = split.value("behavior", "Isolated");
  static const std::pair<const char *, SplitBehavior> names[] = {
      {"Removed", SplitBehavior::Removed},
      {"Isolated", SplitBehavior::Isolated},
      {"MergedWithPrevious", SplitBehavior::MergedWithPrevious},
      {"MergedWithNext", SplitBehavior::MergedWithNext},
      {"Contiguous", SplitBehavior::Contiguous}};
  for (const auto &[name, value] : names)
    if (behavior == name)
      return value;
  return error(field + ".behavior",
               "unknown split behavior \"" + behavior + "\"");
}

Status Loader::loadPreTokenizer(const json &pre, const std::string &field) {
  if (pre.is_null())
    return Status::ok();
  if (!pre.is_object())
    return error(field, "expected an object or null");
  std::string type = pre.value("type", "");
  if (type == "Sequence") {
    auto list = pre.find("pretokenizers");
    if (list == pre.end() || !list->is_array())
      return error(field + ".pretokenizers", "missing or not an array");
    for (size_t i = 0; i < list->size(); ++i)
      if (Status s = loadPreTokenizer((*list)[i], field + ".pretokenizers[" +
                                                      std::to_string(i) + "]");
          !s)
        return s;
    return Status::ok();
  }
  PreTokenizerStep step;
  if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::ByteLevel;
    StatusOr<bool> prefix = flag(pre, field, "add_prefix_space", true);
    StatusOr<bool> useRegex = flag(pre, field, "use_regex", true);
    if (!prefix)
      return prefix.status();
    if (!useRegex)
      return useRegex.status();
    step.addPrefixSpace = *prefix;
    if (*useRegex) {
      StatusOr<Regex> regex = Regex::compileOniguruma(kGpt2Pattern);
      if (!regex)
        return regex.status();
      step.regex = *regex;
    }
    impl_.byteLevel = true;
    impl_.steps.push_back(std::move(step));
    return Status::ok();
  }
  if (type == "Split") {
    step.kind = PreTokenizerStep::Kind::Split;
    auto pattern = pre.find("pattern");
    if (pattern == pre.end() || !pattern->is_object())
      return error(field + ".pattern",
                   "expected {\"Regex\": ...} or {\"String\": ...}");
    StatusOr<Regex> regex = Status::error("");
    if (pattern->contains("Regex") && (*pattern)["Regex"].is_string())
      regex = Regex::compileOniguruma((*pattern)["Regex"].get<std::string>());
    else if (pattern->contains("String") && (*pattern)["String"].is_string())
      regex = Regex::literal((*pattern)["String"].get<std::string>());
    else
      return error(field + ".pattern",
                   "expected {\"Regex\": ...} or {\"String\": ...}");
    if (!regex)
      return regex.status().withContext(source_ + ": " + field + ".pattern");
    step.regex = *regex;
    StatusOr<SplitBehavior> behavior = splitBehavior(pre, field);
    if (!behavior)
      return behavior.status();
    step.behavior = *behavior;
    StatusOr<bool> invert = flag(pre, field, "invert", false);
    if (!invert)
      return invert.status();
    step.invert = *invert;
    impl_.steps.push_back(std::move(step));
    return Status::ok();
  }
  return unsupported(field + ".type", "pre-tokenizer \"" + type + "\"");
}

Status Loader::loadAddedTokens(const json &addedTokens) {
  if (!addedTokens.is_array())
    return error("added_tokens", "expected an array");
  for (size_t i = 0; i < addedTokens.size(); ++i) {
    const json &entry = addedTokens[i];
    std::string field = "added_tokens[" + std::to_string(i) + "]";
    if (!entry.is_object() || !entry.contains("id") ||
        !entry["id"].is_number_integer() || entry["id"].get<int64_t>() < 0 ||
        entry["id"].get<int64_t>() > INT32_MAX || !entry.contains("content") ||
        !entry["content"].is_string())
      return error(field, "expected {\"id\": non-negative integer, "
                          "\"content\": string, ...}");
    AddedToken token;
    token.id = static_cast<int32_t>(entry["id"].get<int64_t>());
    token.content = entry["content"].get<std::string>();
    if (token.content.empty())
      return error(field + ".content", "an added token cannot be empty");
    if (findInvalidUtf8(token.content) != std::string::npos)
      return error(field + ".content", "not valid UTF-8");
    bool *flags[] = {&token.singleWord, &token.lstrip, &token.rstrip,
                     &token.normalized, &token.special};
    const char *keys[] = {"single_word", "lstrip", "rstrip", "normalized",
                          "special"};
    for (int k = 0; k < 5; ++k) {
      // HF's default for `normalized` is the opposite of `special`.
      bool fallback = k == 3 ? !entry.value("special", false) : false;
      StatusOr<bool> value = flag(entry, field, keys[k], fallback);
      if (!value)
        return value.status();
      *flags[k] = *value;
    }
    if (token.special)
      impl_.specialContents.insert(token.content);
    impl_.addedByContent[token.content] = token.id;
    impl_.addedById[token.id] = impl_.added.size();
    impl_.vocabSize = std::max(impl_.vocabSize, token.id + 1);
    (token.normalized ? impl_.normalizedTrie : impl_.rawTrie)
        .insert(token.content, impl_.added.size());
    impl_.added.push_back(std::move(token));
  }
  // The character classes of Rust's regex crate, which HF uses for
  // single_word (\w) and lstrip/rstrip (\s).
  StatusOr<Regex> word = Regex::compilePcre2(
      "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]");
  StatusOr<Regex> space = Regex::compilePcre2("\\p{White_Space}+");
  if (!word)
    return word.status();
  if (!space)
    return space.status();
  impl_.wordCharacter = *word;
  impl_.whitespaceCharacter = *space;
  return Status::ok();
}

Status Loader::loadPostProcessor(const json &processor,
                                 const std::string &field) {
  if (processor.is_null())
    return Status::ok();
  std::string type = processor.value("type", "");
  if (type == "ByteLevel")
    return Status::ok(); // adjusts offsets only
  if (type == "Sequence") {
    const json list = processor.value("processors", json::array());
    for (size_t i = 0; i < list.size(); ++i)
      if (Status s = loadPostProcessor(list[i], field + ".processors[" +
                                                    std::to_string(i) + "]");
          !s)
        return s;
    return Status::ok();
  }
  if (type != "TemplateProcessing")
    return unsupported(field + ".type", "post-processor \"" + type + "\"");
  const json single = processor.value("single", json::array());
  const json specials = processor.value("special_tokens", json::object());
  bool seenSequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    std::string itemField = field + ".single[" + std::to_string(i) + "]";
    const json &item = single[i];
    if (item.contains("Sequence")) {
      seenSequence = true;
      continue;
    }
    if (!item.contains("SpecialToken") ||
        !item["SpecialToken"].value("id", json()).is_string())
      return error(itemField, "expected {\"SpecialToken\": {\"id\": ...}} or "
                              "{\"Sequence\": ...}");
    std::string name = item["SpecialToken"]["id"].get<std::string>();
    auto special = specials.find(name);
    if (special == specials.end() || !special->value("ids", json()).is_array())
      return error(field + ".special_tokens",
                   "no ids for \"" + name + "\", which " + itemField + " uses");
    for (const json &id : (*special)["ids"]) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() > INT32_MAX)
        return error(field + ".special_tokens[\"" + name + "\"].ids",
                     "expected non-negative integers");
      // An id the vocabulary lacks would be emitted by encode and then be
      // undecodable: refuse the file instead.
      int32_t tokenId = static_cast<int32_t>(id.get<int64_t>());
      bool inModel = static_cast<size_t>(tokenId) < impl_.modelIdPresent.size() &&
                     impl_.modelIdPresent[tokenId];
      if (!inModel && !impl_.addedById.count(tokenId))
        return error(field + ".special_tokens[\"" + name + "\"].ids",
                     "id " + std::to_string(tokenId) +
                         " is neither in model.vocab nor in added_tokens");
      (seenSequence ? impl_.templateSuffix : impl_.templatePrefix)
          .push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  return Status::ok();
}

Status Loader::loadDecoder(const json &decoder) {
  if (decoder.is_null())
    return Status::ok();
  std::string type = decoder.value("type", "");
  if (type == "ByteLevel") {
    impl_.byteLevelDecoder = true;
    return Status::ok();
  }
  return unsupported("decoder.type", "decoder \"" + type + "\"");
}

} // namespace

StatusOr<Tokenizer> Tokenizer::fromJson(std::string_view text,
                                        const std::string &sourceName) {
  json root = json::parse(text.begin(), text.end(), nullptr,
                          /*allow_exceptions=*/false);
  if (root.is_discarded())
    return Status::error(sourceName +
                         ": not valid JSON; expected a Hugging Face "
                         "tokenizer.json");
  auto impl = std::make_shared<Impl>();
  impl->sourceName = sourceName;
  try {
    if (Status s = Loader(sourceName, *impl).load(root); !s)
      return s;
  } catch (const json::exception &e) {
    // A field of an unexpected JSON type read through nlohmann's accessors.
    return Status::error(sourceName +
                         ": unexpected JSON structure: " + e.what());
  }

  // The model's view of its vocabulary: bytes for byte-level tokenizers, so
  // no text has to be mapped to byte characters at encode time.
  impl->byteIds.fill(-1);
  std::vector<std::pair<std::string_view, int32_t>> rawEntries;
  for (size_t id = 0; id < impl->modelTokens.size(); ++id) {
    if (!impl->modelIdPresent[id])
      continue;
    const std::string &token = impl->modelTokens[id];
    std::optional<std::string> raw =
        impl->byteLevel ? byteLevelToBytes(token) : token;
    if (!raw)
      continue; // unreachable from text; kept for decoding
    impl->rawTokenStorage.push_back(std::move(*raw));
    rawEntries.emplace_back(impl->rawTokenStorage.back(),
                            static_cast<int32_t>(id));
  }
  impl->rawVocab.build(rawEntries);
  if (impl->byteLevel)
    for (int b = 0; b < 256; ++b) {
      char byte = static_cast<char>(b);
      impl->byteIds[b] = impl->rawVocab.find(std::string_view(&byte, 1));
    }
  return Tokenizer(std::move(impl));
}

StatusOr<Tokenizer> Tokenizer::fromFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot open tokenizer file " + path +
                         "; pass the path of a Hugging Face tokenizer.json");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return fromJson(buffer.str(), path);
}

//===----------------------------------------------------------------------===//
// Encoding
//===----------------------------------------------------------------------===//

namespace {

size_t previousCharStart(std::string_view text, size_t pos) {
  size_t start = pos - 1;
  while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80)
    --start;
  return start;
}

} // namespace

// Splits `text` at the added tokens of `trie`, following HF's
// AddedVocabulary::find_matches (single_word, lstrip, rstrip), relative to
// this piece of text. `base` is its offset in the whole input.
Status Tokenizer::Impl::splitAddedTokens(
    std::string_view text, size_t base, const AddedTokenTrie &trie,
    std::vector<std::pair<Piece, int32_t>> &out) const {
  auto emit = [&](size_t begin, size_t end, int32_t id) {
    if (end > begin)
      out.push_back({Piece{text.substr(begin, end - begin),
                           static_cast<uint32_t>(base + begin), 0},
                     id});
  };
  if (trie.empty()) {
    emit(0, text.size(), -1);
    return Status::ok();
  }
  size_t pieceStart = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    auto [tokenIndex, matchEnd] = trie.longestAt(text, pos);
    if (tokenIndex < 0) {
      ++pos;
      continue;
    }
    const AddedToken &token = added[tokenIndex];
    size_t start = pos, stop = matchEnd;
    pos = matchEnd; // matches never overlap, even when one is discarded
    if (token.singleWord) {
      bool wordBefore = false, wordAfter = false;
      if (start > 0) {
        StatusOr<bool> m =
            wordCharacter->matchesAt(text, previousCharStart(text, start));
        if (!m)
          return m.status();
        wordBefore = *m;
      }
      if (stop < text.size()) {
        StatusOr<bool> m = wordCharacter->matchesAt(text, stop);
        if (!m)
          return m.status();
        wordAfter = *m;
      }
      if (wordBefore || wordAfter)
        continue;
    }
    if (token.lstrip) {
      size_t newStart = start;
      while (newStart > 0) {
        size_t prev = previousCharStart(text, newStart);
        StatusOr<bool> m = whitespaceCharacter->matchesAt(text, prev);
        if (!m)
          return m.status();
        if (!*m)
          break;
        newStart = prev;
      }
      start = std::max(newStart, pieceStart);
    }
    if (token.rstrip && stop < text.size()) {
      StatusOr<size_t> end = whitespaceCharacter->matchEndAt(text, stop);
      if (!end)
        return end.status();
      if (*end != std::string_view::npos)
        stop = *end;
    }
    emit(pieceStart, start, -1);
    out.push_back({Piece{text.substr(start, stop - start),
                         static_cast<uint32_t>(base + start), 0},
                   token.id});
    pieceStart = stop;
    pos = std::max(pos, stop);
  }
  emit(pieceStart, text.size(), -1);
  return Status::ok();
}

Status Tokenizer::Impl::preTokenize(const Piece &segment,
                                    std::deque<std::string> &arena,
                                    std::vector<Piece> &pieces) const {
  pieces.assign(1, segment);
  std::vector<Piece> next;
  std::vector<Regex::Span> matches;
  // (span, is match) covering a piece, as HF's Pattern::find_matches.
  std::vector<std::pair<Regex::Span, bool>> parts;
  for (const PreTokenizerStep &step : steps) {
    next.clear();
    for (Piece piece : pieces) {
      if (step.kind == PreTokenizerStep::Kind::ByteLevel &&
          step.addPrefixSpace && piece.text.front() != ' ') {
        arena.emplace_back();
        arena.back().reserve(piece.text.size() + 1);
        arena.back() += ' ';
        arena.back() += piece.text;
        piece = Piece{arena.back(), piece.sourceBegin, piece.synthetic + 1};
      }
      if (!step.regex) {
        next.push_back(piece);
        continue;
      }
      matches.clear();
      if (Status s = step.regex->findAll(piece.text, matches); !s)
        return s;
      parts.clear();
      size_t prev = 0;
      for (const Regex::Span &m : matches) {
        if (m.first > prev)
          parts.push_back({{prev, m.first}, false});
        parts.push_back({m, true});
        prev = m.second;
      }
      if (prev < piece.text.size())
        parts.push_back({{prev, piece.text.size()}, false});
      if (step.invert)
        for (auto &part : parts)
          part.second = !part.second;

      auto push = [&](size_t begin, size_t end) {
        next.push_back(subPiece(piece, begin, end));
      };
      switch (step.behavior) {
      case SplitBehavior::Isolated:
        for (const auto &part : parts)
          push(part.first.first, part.first.second);
        break;
      case SplitBehavior::Removed:
        for (const auto &part : parts)
          if (!part.second)
            push(part.first.first, part.first.second);
        break;
      case SplitBehavior::MergedWithPrevious:
      case SplitBehavior::Contiguous: {
        std::vector<Regex::Span> merged;
        bool previousMatch = false;
        for (const auto &part : parts) {
          bool extend = step.behavior == SplitBehavior::MergedWithPrevious
                            ? part.second && !previousMatch
                            : part.second == previousMatch;
          if (extend && !merged.empty())
            merged.back().second = part.first.second;
          else
            merged.push_back(part.first);
          previousMatch = part.second;
        }
        for (const auto &span : merged)
          push(span.first, span.second);
        break;
      }
      case SplitBehavior::MergedWithNext: {
        std::vector<Regex::Span> merged;
        bool previousMatch = false;
        for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
          if (it->second && !previousMatch && !merged.empty())
            merged.back().first = it->first.first;
          else
            merged.push_back(it->first);
          previousMatch = it->second;
        }
        for (auto it = merged.rbegin(); it != merged.rend(); ++it)
          push(it->first, it->second);
        break;
      }
      }
    }
    pieces.swap(next);
  }
  return Status::ok();
}

void Tokenizer::Impl::encodeWord(std::string_view word,
                                 std::vector<int32_t> &ids,
                                 std::vector<uint32_t> *lengths) const {
  BpeScratch &scratch = threadBpeScratch();
  std::vector<BpeSymbol> &symbols = scratch.symbols;
  symbols.clear();
  std::optional<std::pair<int32_t, uint32_t>> pendingUnk;
  auto addSymbol = [&](int32_t id, uint32_t length) {
    int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, length});
  };
  for (size_t pos = 0; pos < word.size();) {
    size_t length = 1;
    int32_t id;
    if (byteLevel) {
      id = byteIds[static_cast<uint8_t>(word[pos])];
    } else {
      length = std::max<size_t>(1, utf8SequenceLength(word, pos));
      id = rawVocab.find(word.substr(pos, length));
    }
    pos += length;
    if (id >= 0) {
      if (pendingUnk) {
        addSymbol(pendingUnk->first, pendingUnk->second);
        pendingUnk.reset();
      }
      addSymbol(id, static_cast<uint32_t>(length));
    } else if (unkId) {
      if (pendingUnk && fuseUnk) {
        pendingUnk->second += static_cast<uint32_t>(length);
      } else {
        if (pendingUnk)
          addSymbol(pendingUnk->first, pendingUnk->second);
        pendingUnk = {{*unkId, static_cast<uint32_t>(length)}};
      }
    }
    // Without an unknown token HF drops characters the vocabulary lacks.
  }
  if (pendingUnk)
    addSymbol(pendingUnk->first, pendingUnk->second);
  if (!symbols.empty())
    symbols.back().next = -1;

  std::vector<BpeCandidate> &heap = scratch.heap;
  heap.clear();
  auto push = [&](const BpeCandidate &c) {
    heap.push_back(c);
    std::push_heap(heap.begin(), heap.end());
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i)
    if (const MergeTable::Entry *m =
            merges.find(symbols[i].id, symbols[i + 1].id))
      push({m->rank, static_cast<int32_t>(i), m->mergedId});
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    BpeCandidate top = heap.back();
    heap.pop_back();
    BpeSymbol &left = symbols[top.pos];
    if (left.length == 0 || left.next < 0)
      continue;
    BpeSymbol &right = symbols[left.next];
    const MergeTable::Entry *m = merges.find(left.id, right.id);
    if (!m || m->mergedId != top.mergedId)
      continue; // stale: one side changed since it was queued
    left.id = top.mergedId;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (left.next >= 0)
      symbols[left.next].prev = top.pos;
    if (left.prev >= 0)
      if (const MergeTable::Entry *p =
              merges.find(symbols[left.prev].id, left.id))
        push({p->rank, left.prev, p->mergedId});
    if (left.next >= 0)
      if (const MergeTable::Entry *n =
              merges.find(left.id, symbols[left.next].id))
        push({n->rank, top.pos, n->mergedId});
  }
  for (const BpeSymbol &symbol : symbols)
    if (symbol.length > 0) {
      ids.push_back(symbol.id);
      if (lengths)
        lengths->push_back(symbol.length);
    }
}

void Tokenizer::Impl::appendWord(const Piece &piece, std::vector<int32_t> &ids,
                                 std::vector<uint32_t> *starts) const {
  if (ignoreMerges) {
    int32_t id = rawVocab.find(piece.text);
    if (id >= 0) {
      ids.push_back(id);
      if (starts)
        starts->push_back(piece.sourceBegin);
      return;
    }
  }
  if (!starts) {
    encodeWord(piece.text, ids, nullptr);
    return;
  }
  thread_local std::vector<uint32_t> lengths;
  lengths.clear();
  encodeWord(piece.text, ids, &lengths);
  uint32_t offset = 0;
  for (uint32_t length : lengths) {
    starts->push_back(piece.sourceBegin + (offset > piece.synthetic
                                               ? offset - piece.synthetic
                                               : 0));
    offset += length;
  }
}

Status Tokenizer::encodeInto(std::string_view text, bool addSpecialTokens,
                             std::vector<int32_t> &ids,
                             std::vector<uint32_t> *tokenStarts) const {
  const Impl &impl = *impl_;
  size_t invalid = findInvalidUtf8(text);
  if (invalid != std::string_view::npos)
    return Status::error("text to tokenize is not valid UTF-8 (byte " +
                         std::to_string(invalid) + ")");
  if (text.size() > UINT32_MAX)
    return Status::error("text to tokenize is larger than 4 GiB; split it "
                         "into documents");
  if (addSpecialTokens)
    for (int32_t id : impl.templatePrefix) {
      ids.push_back(id);
      if (tokenStarts)
        tokenStarts->push_back(0);
    }

  // Added tokens written as-is first, then those matched after
  // normalization (octet supports no normalizer, so on the same text).
  std::vector<std::pair<Piece, int32_t>> firstPass, segments;
  if (Status s = impl.splitAddedTokens(text, 0, impl.rawTrie, firstPass); !s)
    return s;
  for (const auto &[piece, id] : firstPass) {
    if (id >= 0) {
      segments.push_back({piece, id});
      continue;
    }
    if (Status s = impl.splitAddedTokens(piece.text, piece.sourceBegin,
                                         impl.normalizedTrie, segments);
        !s)
      return s;
  }

  std::deque<std::string> arena;
  std::vector<Piece> pieces;
  for (const auto &[segment, addedId] : segments) {
    if (addedId >= 0) {
      ids.push_back(addedId);
      if (tokenStarts)
        tokenStarts->push_back(segment.sourceBegin);
      continue;
    }
    if (Status s = impl.preTokenize(segment, arena, pieces); !s)
      return s;
    for (const Piece &piece : pieces)
      impl.appendWord(piece, ids, tokenStarts);
  }

  if (addSpecialTokens)
    for (int32_t id : impl.templateSuffix) {
      ids.push_back(id);
      if (tokenStarts)
        tokenStarts->push_back(static_cast<uint32_t>(text.size()));
    }
  return Status::ok();
}

StatusOr<std::vector<int32_t>> Tokenizer::encode(std::string_view text,
                                                 bool addSpecialTokens) const {
  std::vector<int32_t> ids;
  if (Status s = encodeInto(text, addSpecialTokens, ids); !s)
    return s;
  return ids;
}

//===----------------------------------------------------------------------===//
// Decoding and lookups
//===----------------------------------------------------------------------===//

StatusOr<std::string> Tokenizer::decode(const std::vector<int32_t> &ids,
                                        bool skipSpecialTokens) const {
  const Impl &impl = *impl_;
  std::string bytes;
  bool first = true;
  for (int32_t id : ids) {
    std::optional<std::string> token = idToToken(id);
    if (!token)
      return Status::error("token id " + std::to_string(id) +
                           " is not in the vocabulary of " + impl.sourceName +
                           " (" + std::to_string(impl.vocabSize) + " ids)");
    if (skipSpecialTokens && impl.specialContents.count(*token))
      continue;
    if (!impl.byteLevelDecoder) {
      if (!first)
        bytes += ' ';
      bytes += *token;
    } else if (std::optional<std::string> raw = byteLevelToBytes(*token)) {
      bytes += *raw;
    } else {
      bytes += *token; // e.g. an added token with a space in it
    }
    first = false;
  }
  return utf8Lossy(bytes);
}

std::optional<int32_t> Tokenizer::tokenToId(std::string_view token) const {
  auto added = impl_->addedByContent.find(std::string(token));
  if (added != impl_->addedByContent.end())
    return added->second;
  auto it = impl_->modelIds.find(std::string(token));
  if (it != impl_->modelIds.end())
    return it->second;
  return std::nullopt;
}

std::optional<std::string> Tokenizer::idToToken(int32_t id) const {
  auto added = impl_->addedById.find(id);
  if (added != impl_->addedById.end())
    return impl_->added[added->second].content;
  if (id >= 0 && static_cast<size_t>(id) < impl_->modelTokens.size() &&
      impl_->modelIdPresent[id])
    return impl_->modelTokens[id];
  return std::nullopt;
}

int32_t Tokenizer::vocabSize() const { return impl_->vocabSize; }

bool Tokenizer::isSpecial(int32_t id) const {
  std::optional<std::string> token = idToToken(id);
  return token && impl_->specialContents.count(*token);
}

} // namespace octet::data
