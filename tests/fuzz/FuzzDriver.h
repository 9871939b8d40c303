#ifndef OCTET_TESTS_FUZZ_FUZZDRIVER_H
#define OCTET_TESTS_FUZZ_FUZZDRIVER_H

// Each fuzz target defines the libFuzzer entry point and its seed inputs;
// FuzzDriver.cpp supplies a main() that mutates the seeds for a bounded
// number of iterations or seconds, so the targets run as plain programs
// (and under ctest) without libFuzzer.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace octet::fuzz {

std::vector<std::string> seedInputs();

// Fragments the mutator splices in (field names, numbers at type limits).
std::vector<std::string> dictionary();

} // namespace octet::fuzz

#endif
