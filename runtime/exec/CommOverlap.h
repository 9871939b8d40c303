#ifndef OCTET_RUNTIME_EXEC_COMMOVERLAP_H
#define OCTET_RUNTIME_EXEC_COMMOVERLAP_H

// What of a rank's programs runs beside its own collectives, for
// `octet-run --comm-sms N` (RuntimeOptions::commSms). A collective on a
// stream other than the main one is enqueued there and runs while the main
// stream goes on: a data-parallel backward's reduce-scatters beside the
// GEMMs of the layers before them. NCCL's kernels then hold SMs that a GEMM
// sized for the whole GPU counts on, and its last wave of tiles runs late.
// With N SMs set aside, those collectives get a communicator of at most N
// CTAs and the GEMMs after them are chosen and run for the rest of the SMs.
// No CUDA here: read from the bundle alone.

#include "bundle/bundle.pb.h"

#include <vector>

namespace octet {

// By GEMM descriptor (Bundle.gemms): whether some program of `rank` calls it
// after one of its collectives on another stream than the main one.
std::vector<bool> gemmsBesideCollectives(const bundle::Bundle &bundle,
                                         int rank);

// By step of `program`: whether it is a collective on another stream than
// the main one that a GEMM of the same program follows, i.e. one that runs
// beside compute. The others (an optimizer step's gathers beside its
// memory-bound kernels, the main stream's own collectives) keep NCCL's
// choice of CTAs.
std::vector<bool> collectivesBesideCompute(const bundle::Program &program);

// Whether any rank's program has such a collective: each rank of a job
// decides from this alone whether to make the communicators for them.
bool anyCollectiveBesideCompute(const bundle::Bundle &bundle);

} // namespace octet

#endif
