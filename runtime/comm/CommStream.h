#ifndef OCTET_RUNTIME_COMM_COMMSTREAM_H
#define OCTET_RUNTIME_COMM_COMMSTREAM_H

// The streams contract between the runtime and the comm layer.
//
// - The runtime (the caller) creates the streams: one compute stream, and a
//   communication stream per communicator (DP, PP), with runtime/core's
//   Stream::create. The comm layer creates no stream and allocates no device
//   memory during a step.
// - Collectives are enqueued on the stream they are given and return once
//   enqueued (NCCL's semantics); order against compute is by CUDA events
//   recorded on one stream and waited on the other, never by host
//   synchronisation inside a step.
// - All NCCL calls of a rank come from one host thread, in the order the
//   compiler wrote them in the bundle (every rank issues the same
//   collectives in the same order); the watchdog's thread only polls for
//   errors and aborts.
// - The thread that calls NCCL has the rank's device context current
//   (runtime/core Device::makeCurrent): NCCL's CUDA runtime uses the
//   driver's current (primary) context.
// - CUstream and NCCL's cudaStream_t are the same type (CUstream_st *).

#include <cuda.h>

namespace octet::comm {

class Communicator;

// A communicator and the stream its collectives go on.
struct CommStream {
  Communicator *comm = nullptr;
  CUstream stream = nullptr;
};

} // namespace octet::comm

#endif
