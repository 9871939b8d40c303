//===- Launches.cpp - The launches codegen records on an op --------------===//

#include "compiler/Codegen/Launches.h"

#include "dialects/kernel/KernelDialect.h"

using namespace mlir;

namespace octet::codegen {

LaunchList::LaunchList(OpBuilder &b, StringRef moduleSym)
    : b(b), moduleSym(b.getStringAttr(moduleSym)) {}

void LaunchList::add(StringRef kernel, int64_t grid, int64_t block,
                     int64_t sharedBytes, int64_t cluster, bool programmatic) {
  auto ref = SymbolRefAttr::get(
      moduleSym, {FlatSymbolRefAttr::get(b.getContext(), kernel)});
  kernels.push_back(ref);
  launches.push_back(kernel::LaunchAttr::get(b.getContext(), ref, grid, block,
                                             sharedBytes, cluster,
                                             programmatic));
}

void LaunchList::apply(Operation *op, int64_t workspaceBytes,
                       std::optional<ArrayRef<int64_t>> zeroResults) const {
  auto launched = cast<kernel::LaunchedOpInterface>(op);
  launched.setKernelsAttr(b.getArrayAttr(kernels));
  launched.setLaunchAttr(b.getArrayAttr(launches));
  launched.setWorkspaceBytesAttr(b.getI64IntegerAttr(workspaceBytes));
  if (zeroResults)
    launched.setZeroResultsAttr(b.getDenseI64ArrayAttr(*zeroResults));
  launched.setArgTable(argTable);
}

void copyLaunches(Operation *from, Operation *to) {
  auto source = cast<kernel::LaunchedOpInterface>(from);
  auto target = cast<kernel::LaunchedOpInterface>(to);
  target.setKernelsAttr(source.getKernelsAttr());
  target.setLaunchAttr(source.getLaunchAttr());
  target.setWorkspaceBytesAttr(source.getWorkspaceBytesAttr());
  target.setZeroResultsAttr(source.getZeroResultsAttr());
  target.setArgTable(source.getArgTable());
}

} // namespace octet::codegen
