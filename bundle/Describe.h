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

} // namespace octet::bundle

#endif
