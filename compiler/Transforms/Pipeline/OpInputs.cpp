#include "compiler/Transforms/Pipeline/OpInputs.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace octet::pipeline {

std::string describeOp(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "'" << op->getName() << "'";
  if (auto name = op->getAttrOfType<StringAttr>("name"))
    os << " \"" << name.getValue() << "\"";
  else if (auto param = op->getAttrOfType<StringAttr>("param"))
    os << " of " << param.getValue();
  return text;
}

SmallVector<Value> capturedValues(Operation *op) {
  llvm::SetVector<Value> above;
  for (Region &region : op->getRegions())
    getUsedValuesDefinedAbove(region, above);
  return SmallVector<Value>(above.begin(), above.end());
}

SmallVector<Value> inputsOf(Operation *op) {
  SmallVector<Value> inputs(op->getOperands());
  llvm::append_range(inputs, capturedValues(op));
  return inputs;
}

} // namespace octet::pipeline
