#ifndef OCTET_RUNTIME_BLAS_GEMMTUNINGCACHE_H
#define OCTET_RUNTIME_BLAS_GEMMTUNINGCACHE_H

// The cuBLASLt algorithms that timing chose, kept in a text file so that a
// rerun on the same GPU model and cuBLASLt takes the same ones without
// timing again. One line per GEMM descriptor:
//   device <TAB> cuBLASLt version <TAB> descriptor key <TAB> algorithm
//   (hex of the 64-byte cublasLtMatmulAlgo_t) <TAB> microseconds per call
// Lines starting with '#' are comments. Nothing here touches the GPU.

#include "support/Status.h"

#include <string>
#include <vector>

namespace octet::blas {

struct GemmTuningEntry {
  // Device name and compute capability, e.g. "NVIDIA H100 80GB HBM3 sm_90".
  std::string device;
  std::string cublasLtVersion;
  // GemmDesc::key(): every field that shapes the cuBLASLt objects.
  std::string descriptor;
  // The raw cublasLtMatmulAlgo_t.
  std::string algorithm;
  double microseconds = 0;
};

class GemmTuningCache {
public:
  // A missing file is an empty cache; a malformed one is an error that
  // names the file and line.
  static StatusOr<GemmTuningCache> load(const std::string &path);
  static StatusOr<GemmTuningCache> parse(const std::string &text,
                                         const std::string &origin);

  const GemmTuningEntry *find(const std::string &device,
                              const std::string &cublasLtVersion,
                              const std::string &descriptor) const;
  // Adds the entry, replacing one with the same device, version and
  // descriptor (in place, so the file's order stays stable).
  void put(GemmTuningEntry entry);
  size_t size() const { return entries_.size(); }

  std::string text() const;
  // Replaces the file atomically.
  Status save(const std::string &path) const;

private:
  std::vector<GemmTuningEntry> entries_;
};

} // namespace octet::blas

#endif
