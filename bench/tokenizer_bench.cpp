// Tokenizer encode throughput on one core.
//   octet-tokenizer-bench TOKENIZER_JSON TEXT_FILE [--repeat N]
// Encodes the text as documents (split at blank lines, as paragraphs of a
// corpus would be) on the calling thread and prints one JSON object. The
// first pass starts with an empty word cache ("cold"); later passes show
// the steady state of a long preprocessing run ("warm").

#include "runtime/data/Tokenizer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using octet::data::Tokenizer;

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER_JSON TEXT_FILE [--repeat N]\n",
                 argv[0]);
    return 2;
  }
  int repeat = 5;
  if (argc >= 5 && std::string(argv[3]) == "--repeat")
    repeat = std::max(1, std::atoi(argv[4]));
  octet::StatusOr<Tokenizer> tokenizer = Tokenizer::fromFile(argv[1]);
  if (!tokenizer) {
    std::fprintf(stderr, "%s\n", tokenizer.status().message().c_str());
    return 1;
  }
  std::ifstream in(argv[2], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", argv[2]);
    return 1;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  std::vector<std::string_view> documents;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find("\n\n", pos);
    end = end == std::string::npos ? text.size() : end + 2;
    documents.emplace_back(text.data() + pos, end - pos);
    pos = end;
  }

  std::vector<double> seconds;
  size_t tokens = 0;
  std::vector<int32_t> ids;
  for (int pass = 0; pass <= repeat; ++pass) {
    tokens = 0;
    auto start = std::chrono::steady_clock::now();
    for (std::string_view doc : documents) {
      ids.clear();
      octet::Status s = tokenizer->encodeInto(doc, false, ids);
      if (!s) {
        std::fprintf(stderr, "%s\n", s.message().c_str());
        return 1;
      }
      tokens += ids.size();
    }
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }
  double cold = seconds[0];
  std::vector<double> warm(seconds.begin() + 1, seconds.end());
  std::sort(warm.begin(), warm.end());
  double median = warm[warm.size() / 2];
  double mb = text.size() / 1e6;
  std::printf("{\n  \"benchmark\": \"tokenizer_encode_single_core\",\n"
              "  \"tokenizer\": \"%s\",\n  \"text\": \"%s\",\n"
              "  \"bytes\": %zu,\n  \"documents\": %zu,\n  \"tokens\": %zu,\n"
              "  \"cold_seconds\": %.4f,\n  \"cold_mb_per_s\": %.2f,\n"
              "  \"warm_median_seconds\": %.4f,\n"
              "  \"warm_median_mb_per_s\": %.2f,\n  \"passes\": %d\n}\n",
              argv[1], argv[2], text.size(), documents.size(), tokens, cold,
              mb / cold, median, mb / median, repeat + 1);
  return 0;
}
