#ifndef OCTET_TOOLS_OCTET_GPUTRAIN_H
#define OCTET_TOOLS_OCTET_GPUTRAIN_H

// `octet train` on a machine with a Hopper GPU: the bundle of the compiled
// spec, then octet-run's training loop on it. The octet binary links
// no CUDA (it must start on machines without a driver), so the GPU is found
// through the driver library loaded at run time, and training runs in the
// octet-run process (which links the runtime and static protobuf). octet
// hands octet-run its options as one file (RunArgs as JSON, `octet-run
// --options FILE`), not as flags re-made from its own.

#include "runtime/exec/RunOptions.h"

#include "support/Status.h"

#include <functional>
#include <string>

namespace octet {

// Whether this machine has a Hopper GPU. `found` says what was found (or
// why none was), for the line that tells the user which path runs.
bool findHopperGpu(std::string &found);

struct GpuTrainRequest {
  // Writes the bundle of the compiled spec to the path it is given (a
  // temporary file, removed after the run).
  std::function<Status(const std::string &path)> writeBundle;
  int64_t steps = 0; // 0: the spec's train.steps
  // octet-run's options (tools/octet/CommandLine.h, gpuRunArgs); the bundle
  // is the one writeBundle writes.
  RunArgs run;
};

// Writes the bundle and trains it. Returns -1 when the bundle cannot run on
// the GPU yet (kernels without code): `why` names them, and the caller
// trains on the CPU instead. Otherwise octet-run's exit code (1 when the
// bundle could not be written; the error is printed).
int trainOnGpu(const GpuTrainRequest &request, std::string &why);

} // namespace octet

#endif
