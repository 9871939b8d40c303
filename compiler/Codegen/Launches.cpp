//===- Launches.cpp - The launches codegen records on an op --------------===//

#include "compiler/Codegen/Launches.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace octet::codegen {

LaunchList::LaunchList(OpBuilder &b, StringRef moduleSym)
    : b(b), moduleSym(b.getStringAttr(moduleSym)) {}

void LaunchList::add(StringRef kernel, int64_t grid, int64_t block,
                     int64_t sharedBytes, int64_t cluster, bool programmatic) {
  auto ref = SymbolRefAttr::get(
      moduleSym, {FlatSymbolRefAttr::get(b.getContext(), kernel)});
  kernels.push_back(ref);
  SmallVector<NamedAttribute> attrs{
      b.getNamedAttr("kernel", ref),
      b.getNamedAttr("grid", b.getI64IntegerAttr(grid)),
      b.getNamedAttr("block", b.getI64IntegerAttr(block))};
  if (sharedBytes)
    attrs.push_back(
        b.getNamedAttr("shared_bytes", b.getI64IntegerAttr(sharedBytes)));
  if (cluster > 1)
    attrs.push_back(b.getNamedAttr("cluster", b.getI64IntegerAttr(cluster)));
  if (programmatic)
    attrs.push_back(b.getNamedAttr("programmatic", b.getUnitAttr()));
  launches.push_back(b.getDictionaryAttr(attrs));
}

void LaunchList::apply(Operation *op, int64_t workspaceBytes,
                       std::optional<ArrayRef<int64_t>> zeroResults) const {
  op->setAttr("kernels", b.getArrayAttr(kernels));
  op->setAttr("launch", b.getArrayAttr(launches));
  op->setAttr("workspace_bytes", b.getI64IntegerAttr(workspaceBytes));
  if (zeroResults)
    op->setAttr("zero_results", b.getDenseI64ArrayAttr(*zeroResults));
}

void copyLaunches(Operation *from, Operation *to) {
  for (StringRef name :
       {"kernels", "launch", "workspace_bytes", "zero_results"})
    if (Attribute a = from->getAttr(name))
      to->setAttr(name, a);
}

} // namespace octet::codegen
