#ifndef OCTET_RUNTIME_CORE_GRAPH_H
#define OCTET_RUNTIME_CORE_GRAPH_H

// CUDA-graph capture of a step: everything `body` enqueues on `stream` is
// recorded once and replayed with one launch. The body must not synchronize
// or allocate (the memory plan guarantees the runtime does neither).

#include "runtime/core/CudaCheck.h"

#include <functional>
#include <memory>

namespace octet {

class CudaGraph {
public:
  static StatusOr<std::unique_ptr<CudaGraph>>
  capture(CUstream stream, const std::function<Status(CUstream)> &body);
  ~CudaGraph();
  CudaGraph(const CudaGraph &) = delete;
  CudaGraph &operator=(const CudaGraph &) = delete;

  Status launch(CUstream stream) const;
  // Nodes in the captured graph (kernels, memsets, copies).
  StatusOr<size_t> nodeCount() const;

private:
  CudaGraph() = default;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

} // namespace octet

#endif
