#include "runtime/core/Graph.h"

namespace octet {

StatusOr<std::unique_ptr<CudaGraph>>
CudaGraph::capture(CUstream stream,
                   const std::function<Status(CUstream)> &body) {
  std::unique_ptr<CudaGraph> g(new CudaGraph());
  // Thread-local mode: other threads' unsafe calls (a data loader's
  // allocation, say) do not invalidate this capture.
  OCTET_CHECK_CUDA(
      cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  Status st = body(stream);
  CUgraph graph = nullptr;
  CUresult end = cuStreamEndCapture(stream, &graph);
  g->graph_ = graph;
  if (!st)
    return st.withContext("while capturing a CUDA graph");
  if (end == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    return Status::error(
        "CUDA-graph capture was invalidated: the captured step synchronized "
        "or used another stream without an event; run it uncaptured "
        "(--no-graph) and report the bundle");
  OCTET_CHECK_CUDA(end);
  OCTET_CHECK_CUDA(cuGraphInstantiate(&g->exec_, g->graph_, 0));
  return g;
}

CudaGraph::~CudaGraph() {
  if (exec_)
    cuGraphExecDestroy(exec_);
  if (graph_)
    cuGraphDestroy(graph_);
}

Status CudaGraph::launch(CUstream stream) const {
  OCTET_CHECK_CUDA(cuGraphLaunch(exec_, stream));
  return Status::ok();
}

StatusOr<size_t> CudaGraph::nodeCount() const {
  size_t n = 0;
  OCTET_CHECK_CUDA(cuGraphGetNodes(graph_, nullptr, &n));
  return n;
}

} // namespace octet
