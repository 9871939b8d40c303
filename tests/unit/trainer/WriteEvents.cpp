// Writes a TensorBoard event file of known scalars into DIR, for
// check_event_file.py to read with TensorBoard's own reader.

#include "runtime/metrics/EventFile.h"

#include <cstdio>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  auto w = octet::metrics::EventWriter::open(argv[1]);
  if (!w) {
    std::fprintf(stderr, "%s\n", w.status().message().c_str());
    return 1;
  }
  for (int step = 1; step <= 5; ++step) {
    octet::Status st = (*w)->scalars(step, {{"loss", 4.0 / step},
                                            {"grad_norm", 0.5 * step},
                                            {"lr", 1e-4},
                                            {"tokens_per_s", 1000.0 * step},
                                            {"mfu", 0.25}});
    if (!st) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      return 1;
    }
  }
  return (*w)->flush() ? 0 : 1;
}
