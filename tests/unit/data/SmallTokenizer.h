#ifndef OCTET_TESTS_UNIT_DATA_SMALLTOKENIZER_H
#define OCTET_TESTS_UNIT_DATA_SMALLTOKENIZER_H

#include <string>
#include <utility>
#include <vector>

namespace octet::testutil {

// tokenizer.json text for a small byte-level BPE: the 256 byte tokens
// (ids 0..255), one token per merge (ids 256.., in order), the Llama 3
// pre-tokenizer regex, and the Llama 3 special tokens as added tokens
// (ids 1000..1004, <|begin_of_text|> first). Merges are pairs of plain
// strings of printable ASCII, e.g. {"h", "e"}.
std::string smallByteLevelTokenizerJson(
    const std::vector<std::pair<std::string, std::string>> &merges);

} // namespace octet::testutil

#endif
