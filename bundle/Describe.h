#ifndef OCTET_BUNDLE_DESCRIBE_H
#define OCTET_BUNDLE_DESCRIBE_H

// Human-readable reports of a bundle, shared by `octet inspect` and
// `octet-run` so that both print the same memory plan.

#include "bundle/bundle.pb.h"

#include <ostream>

namespace octet::bundle {

// Format and compiler versions, content hash, target, options, model size.
void describeBuild(const Bundle &bundle, std::ostream &os);
// Per linear: role, operand formats, recipe and why.
void describePrecision(const Bundle &bundle, std::ostream &os);
// Arenas, bytes by slot kind, the largest slots, and peak vs. arena size.
// `maxSlots` limits the slot listing (0 lists every slot).
void describePlan(const Bundle &bundle, std::ostream &os, int maxSlots = 12);
// Modules, kernels with launch counts, GEMMs with shapes and algorithms.
void describeKernels(const Bundle &bundle, std::ostream &os);
// Programs of each rank with step counts; for a pipeline, first its
// schedule drawn rank × time by the simulator from the ranks' instruction
// lists (the first pipeline's), each rank's stash entries and instructions.
void describePrograms(const Bundle &bundle, std::ostream &os);
// Every NCCL call of every rank's programs in issue order, a header line
// then one tab-separated line each: rank, program, op, reduce, dtype,
// group, group size, stream, last_microbatch (0/1), tensors (a bucket's
// tensors are one NCCL group, counted as one call) and count, NCCL's
// element count summed over them (the part a rank receives for
// reduce_scatter, the part it sends for all_gather).
void listCollectives(const Bundle &bundle, std::ostream &os);

} // namespace octet::bundle

#endif
