// Fuzz target: a Megatron .idx file. The first two input bytes give the
// size of the .bin beside it; the rest is the index.

#include "runtime/data/IndexedDataset.h"
#include "tests/fuzz/FuzzDriver.h"

#include <cstdlib>
#include <fstream>
#include <unistd.h>

using namespace octet::data;

namespace {

const std::string &workPrefix() {
  static const std::string prefix = [] {
    char dir[] = "/tmp/octet-fuzz-idx-XXXXXX";
    if (!mkdtemp(dir))
      std::abort();
    return std::string(dir) + "/d";
  }();
  return prefix;
}

void writeFile(const std::string &path, const char *data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data, static_cast<std::streamsize>(size));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  size_t binSize = data[0] | (size_t(data[1]) << 8);
  // The validation alone, in memory: most mutants stop here, and files
  // are written only for the ones it accepts.
  if (!validateIndex(data + 2, size - 2, binSize, "fuzz.idx"))
    return 0;
  const std::string &prefix = workPrefix();
  std::string bin(binSize, '\x5A');
  writeFile(prefix + ".bin", bin.data(), bin.size());
  writeFile(prefix + ".idx", reinterpret_cast<const char *>(data + 2),
            size - 2);
  octet::StatusOr<IndexedDataset> dataset = IndexedDataset::open(prefix);
  if (!dataset)
    __builtin_trap(); // the same bytes passed validation above
  // An accepted index is safe to read in full.
  std::vector<int32_t> tokens;
  uint64_t total = 0;
  for (size_t i = 0; i < dataset->sequenceCount(); ++i) {
    dataset->readSequence(i, tokens);
    total += tokens.size();
  }
  for (size_t d = 0; d <= dataset->documentCount(); ++d)
    if (dataset->documentBoundary(d) > dataset->sequenceCount())
      __builtin_trap();
  if (total != dataset->totalTokens())
    __builtin_trap();
  return 0;
}

namespace octet::fuzz {

std::vector<std::string> seedInputs() {
  std::vector<std::string> seeds;
  const std::string prefix = workPrefix() + "-seed";
  struct Seed {
    TokenDType dtype;
    std::vector<std::vector<int32_t>> sequences;
  };
  std::vector<Seed> specs = {
      {TokenDType::UInt16, {{1, 2, 3}, {}, {4}}},
      {TokenDType::Int32, {{7}, {8, 9}}},
      {TokenDType::UInt8, {{1, 0, 1, 1}}},
  };
  for (const Seed &spec : specs) {
    octet::StatusOr<IndexedDatasetWriter> writer =
        IndexedDatasetWriter::create(prefix, spec.dtype);
    if (!writer)
      std::abort();
    size_t binSize = 0;
    for (const auto &s : spec.sequences) {
      (void)writer->addSequence(s);
      writer->endDocument();
      binSize += s.size() * tokenDTypeSize(static_cast<uint8_t>(spec.dtype));
    }
    if (!writer->finalize())
      std::abort();
    std::ifstream in(prefix + ".idx", std::ios::binary);
    std::string idx((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
    std::string seed;
    seed += static_cast<char>(binSize & 0xFF);
    seed += static_cast<char>(binSize >> 8);
    seeds.push_back(seed + idx);
  }
  return seeds;
}

std::vector<std::string> dictionary() {
  return {std::string("MMIDIDX\0\0", 9), std::string("\x01\0\0\0\0\0\0\0", 8),
          std::string("\xFF\xFF\xFF\xFF", 4), std::string(8, '\xFF')};
}

} // namespace octet::fuzz
