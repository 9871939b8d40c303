// Usage: TARGET [--iterations N] [--seconds S] [--seed X] [FILE...]
// With files, runs each once (to replay a crash); otherwise mutates the
// seed inputs. Iteration k's input depends only on --seed and k, so a
// failure is reproduced with the same seed and --iterations k+1. When the
// sanitizer kills the process, the input is saved to fuzz-crash.bin.

#include "tests/fuzz/FuzzDriver.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

extern "C" void __sanitizer_set_death_callback(void (*)(void))
    __attribute__((weak));

namespace {

std::string currentInput;

void saveCurrentInput() {
  std::ofstream out("fuzz-crash.bin", std::ios::binary);
  out << currentInput;
  std::fprintf(stderr, "input saved to fuzz-crash.bin (%zu bytes)\n",
               currentInput.size());
}

class Mutator {
public:
  Mutator(uint64_t seed, std::vector<std::string> seeds,
          std::vector<std::string> dictionary)
      : rng_(seed), seeds_(std::move(seeds)),
        dictionary_(std::move(dictionary)) {
    dictionary_.insert(dictionary_.end(),
                       {"0", "-1", "1e308", "18446744073709551615",
                        "9223372036854775808", "4294967296", "null", "true",
                        "\"\"", "[]", "{}", "\\u0000", "\xF0\x9F\x99\x82",
                        "\xFF", "\xC3", std::string(1, '\0')});
  }

  std::string next() {
    std::string input = seeds_[below(seeds_.size())];
    int rounds = 1 + static_cast<int>(below(8));
    for (int i = 0; i < rounds; ++i)
      mutate(input);
    if (input.size() > kMaxSize)
      input.resize(kMaxSize);
    return input;
  }

private:
  static constexpr size_t kMaxSize = 1 << 16;

  uint64_t below(uint64_t n) { return n ? rng_() % n : 0; }

  void mutate(std::string &s) {
    switch (below(9)) {
    case 0: // flip a bit
      if (!s.empty())
        s[below(s.size())] ^= static_cast<char>(1u << below(8));
      break;
    case 1: // set a byte
      if (!s.empty())
        s[below(s.size())] = static_cast<char>(below(256));
      break;
    case 2: // insert bytes
      s.insert(below(s.size() + 1),
               std::string(1 + below(4), static_cast<char>(below(256))));
      break;
    case 3: { // erase a range
      if (s.empty())
        break;
      size_t at = below(s.size());
      s.erase(at, 1 + below(std::min<size_t>(16, s.size() - at)));
      break;
    }
    case 4: { // duplicate a range
      if (s.empty())
        break;
      size_t at = below(s.size());
      size_t len = 1 + below(std::min<size_t>(64, s.size() - at));
      s.insert(below(s.size() + 1), s.substr(at, len));
      break;
    }
    case 5: // insert a dictionary word
      s.insert(below(s.size() + 1), dictionary_[below(dictionary_.size())]);
      break;
    case 6: { // overwrite with a dictionary word
      const std::string &word = dictionary_[below(dictionary_.size())];
      if (s.size() >= word.size())
        s.replace(below(s.size() - word.size() + 1), word.size(), word);
      break;
    }
    case 7: // truncate
      s.resize(below(s.size() + 1));
      break;
    default: { // splice with another seed
      const std::string &other = seeds_[below(seeds_.size())];
      size_t cut = below(s.size() + 1);
      size_t from = below(other.size() + 1);
      s = s.substr(0, cut) + other.substr(from);
    }
    }
  }

  std::mt19937_64 rng_;
  std::vector<std::string> seeds_, dictionary_;
};

} // namespace

int main(int argc, char **argv) {
  uint64_t iterations = 100000, seed = 1;
  double seconds = 5;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--iterations" && i + 1 < argc)
      iterations = std::strtoull(argv[++i], nullptr, 10);
    else if (arg == "--seconds" && i + 1 < argc)
      seconds = std::atof(argv[++i]);
    else if (arg == "--seed" && i + 1 < argc)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else if (arg.rfind("--", 0) == 0) {
      std::fprintf(stderr,
                   "usage: %s [--iterations N] [--seconds S] [--seed X] "
                   "[FILE...]\n",
                   argv[0]);
      return 2;
    } else
      files.push_back(arg);
  }
  if (__sanitizer_set_death_callback)
    __sanitizer_set_death_callback(saveCurrentInput);

  if (!files.empty()) {
    for (const std::string &path : files) {
      std::ifstream in(path, std::ios::binary);
      std::stringstream buffer;
      buffer << in.rdbuf();
      currentInput = buffer.str();
      LLVMFuzzerTestOneInput(
          reinterpret_cast<const uint8_t *>(currentInput.data()),
          currentInput.size());
    }
    std::printf("replayed %zu inputs\n", files.size());
    return 0;
  }

  std::vector<std::string> seeds = octet::fuzz::seedInputs();
  // The seeds themselves must pass first.
  for (const std::string &s : seeds) {
    currentInput = s;
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(s.data()),
                           s.size());
  }
  Mutator mutator(seed, seeds, octet::fuzz::dictionary());
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  uint64_t done = 0;
  for (; done < iterations; ++done) {
    if ((done & 63) == 0 && std::chrono::steady_clock::now() > deadline)
      break;
    currentInput = mutator.next();
    LLVMFuzzerTestOneInput(
        reinterpret_cast<const uint8_t *>(currentInput.data()),
        currentInput.size());
  }
  std::printf("%s: %llu mutated inputs from %zu seeds (seed %llu), no "
              "failure\n",
              argv[0], static_cast<unsigned long long>(done), seeds.size(),
              static_cast<unsigned long long>(seed));
  return 0;
}
