#ifndef OCTET_RUNTIME_EXEC_RUNTIMEPREPARED_H
#define OCTET_RUNTIME_EXEC_RUNTIMEPREPARED_H

// Private to the runtime's sources (Runtime.cpp, RuntimeGemms.cpp): a
// program of this rank as load prepared it, its steps with their addresses
// resolved. The runs enqueue them; the GEMMs' algorithm choice times each
// GEMM on the operands of its first call among them.

#include "runtime/comm/Communicator.h"
#include "runtime/exec/Runtime.h"

namespace octet {

struct Runtime::PreparedStep {
  enum class Kind { Launch, Gemm, Memset, Copy, Collective };
  Kind kind = Kind::Launch;
  uint32_t stream = 0;
  std::string label;
  std::unique_ptr<PreparedLaunch> launch;
  blas::Gemm *gemm = nullptr;
  blas::GemmArgs gemmArgs;
  // beta = 0 in a step's first microbatch (GemmCall.first_microbatch_overwrites).
  bool overwriteFirst = false;
  CUdeviceptr dst = 0, src = 0;
  uint64_t bytes = 0;
  uint8_t value = 0;
  // A collective: the bundle's, with its buffers resolved (dst receives,
  // src sends, `count` elements); the NCCL type is set once connected.
  const bundle::Collective *collective = nullptr;
  // Issued together with the next step, in one NCCL group.
  bool groupedWithNext = false;
  comm::ReduceOp reduce = comm::ReduceOp::Sum;
  ncclDataType_t ncclType = ncclFloat32;
  std::vector<uint32_t> waits;
  bool waitedOn = false;
};

struct Runtime::PreparedProgram {
  bundle::ProgramKind kind = bundle::PROGRAM_UNSPECIFIED;
  const bundle::Program *program = nullptr;
  // A CHUNK_* program is prepared once per stash entry of its rank, its
  // stash-strided slots resolved to that entry.
  uint32_t chunk = 0;
  int stashEntry = -1;
  std::vector<PreparedStep> steps;
  // One event per step that a later step waits for.
  std::vector<CUevent> events;
  bool collectives = false;
  // Some GEMM writes rather than accumulates in a step's first microbatch:
  // that run is a graph of its own.
  bool overwrites = false;
  std::unique_ptr<CudaGraph> graph, firstGraph;
  ~PreparedProgram() {
    for (CUevent e : events)
      if (e)
        cuEventDestroy(e);
  }
};

} // namespace octet

#endif
