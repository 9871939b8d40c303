#ifndef OCTET_RUNTIME_COMM_NCCLOPTIONS_H
#define OCTET_RUNTIME_COMM_NCCLOPTIONS_H

// How NCCL may use a job's buffers, by the names octet-run's flags give
// them. Header-only and free of nccl.h, so that option parsing can check
// them without NCCL.

#include <optional>
#include <string>

namespace octet::comm {

// How NCCL may use the memory the collectives read and write.
enum class BufferRegistration {
  // NCCL copies through its own staging buffers.
  None,
  // ncclCommRegister: NCCL reads and writes the registered buffers of the
  // peers directly (zero-copy), sparing the staging copies.
  Registered,
};

inline std::optional<BufferRegistration>
bufferRegistrationNamed(const std::string &name) {
  if (name == "none")
    return BufferRegistration::None;
  if (name == "registered")
    return BufferRegistration::Registered;
  return std::nullopt;
}

inline const char *bufferRegistrationName(BufferRegistration how) {
  switch (how) {
  case BufferRegistration::Registered:
    return "registered";
  case BufferRegistration::None:
    break;
  }
  return "none";
}

} // namespace octet::comm

#endif
