// Fuzz target: a safetensors file as a whole (length, header JSON, data).

#include "hf/Safetensors.h"
#include "tests/fuzz/FuzzDriver.h"

#include <cstring>

using namespace octet::hf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  octet::StatusOr<SafetensorsHeader> header =
      parseSafetensorsHeader(data, size, size, "fuzz");
  if (!header)
    return 0;
  // Whatever the header says, an accepted one only names bytes inside the
  // input: touching each tensor's first and last byte lets the sanitizer
  // catch any range that escapes.
  volatile uint8_t sink = 0;
  for (const TensorInfo &t : header->tensors) {
    if (t.end == t.begin)
      continue;
    sink ^= data[header->dataStart + t.begin];
    sink ^= data[header->dataStart + t.end - 1];
    if (t.elementCount() * dtypeBytes(t.dtype) != t.end - t.begin)
      __builtin_trap();
  }
  return 0;
}

namespace octet::fuzz {

std::vector<std::string> seedInputs() {
  std::vector<std::string> seeds;
  SafetensorsWriter writer;
  float values[6] = {1, 2, 3, 4, 5, 6};
  uint16_t half[2] = {0x3F80, 0x4000};
  uint8_t fp8[3] = {0x38, 0x40, 0x7E};
  (void)writer.add("w", DType::F32, {2, 3}, values, sizeof(values));
  (void)writer.add("b", DType::BF16, {2}, half, sizeof(half));
  (void)writer.add("q", DType::F8E4M3FN, {3}, fp8, sizeof(fp8));
  (void)writer.add("e", DType::I64, {0}, nullptr, 0);
  writer.setMetadata("format", "pt");
  std::string header = writer.headerJson();
  uint64_t length = header.size();
  std::string file(reinterpret_cast<const char *>(&length), 8);
  file += header;
  file.append(reinterpret_cast<const char *>(fp8), 3); // "b", "e", "q", "w"
  file.append(reinterpret_cast<const char *>(half), 4);
  file.append(reinterpret_cast<const char *>(values), 24);
  // Data is laid out in name order: b, e, q, w.
  std::string ordered(reinterpret_cast<const char *>(&length), 8);
  ordered += header;
  ordered.append(reinterpret_cast<const char *>(half), 4);
  ordered.append(reinterpret_cast<const char *>(fp8), 3);
  ordered.append(reinterpret_cast<const char *>(values), 24);
  seeds.push_back(ordered);
  seeds.push_back(file);
  seeds.push_back(std::string("\x02\0\0\0\0\0\0\0{}", 10));
  return seeds;
}

std::vector<std::string> dictionary() {
  return {"\"dtype\"",
          "\"shape\"",
          "\"data_offsets\"",
          "\"__metadata__\"",
          "\"F32\"",
          "\"BF16\"",
          "\"F8_E5M2\"",
          "\"I64\"",
          "[0,0]",
          "[4294967296,4294967296]",
          ":",
          ","};
}

} // namespace octet::fuzz
