#ifndef OCTET_TESTS_UNIT_DATA_TESTUTIL_H
#define OCTET_TESTS_UNIT_DATA_TESTUTIL_H

#include "tests/unit/data/SmallTokenizer.h"

#include <string>
#include <utility>
#include <vector>

namespace octet::testutil {

// A fresh directory under the build tree for one test.
std::string makeTempDir(const std::string &tag);
void writeFile(const std::string &path, const std::string &contents);
std::string readFile(const std::string &path);
bool fileExists(const std::string &path);
// Names in a directory (no "." or ".."), sorted.
std::vector<std::string> listDirectory(const std::string &path);

// Directory holding the tokenizers and expected ids made by
// make_tokenizer_golden.py with HF tokenizers; empty (and `why` says why)
// when python3 cannot import tokenizers.
std::string tokenizerGoldenDir(std::string &why);

} // namespace octet::testutil

#endif
