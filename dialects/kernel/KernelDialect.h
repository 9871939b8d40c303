#ifndef OCTET_DIALECTS_KERNEL_KERNELDIALECT_H
#define OCTET_DIALECTS_KERNEL_KERNELDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/kernel/KernelDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/kernel/KernelAttrs.h.inc"

namespace octet::kernel {
// The launch contract of an op (LaunchedOpInterface): every launch valid,
// `kernels` the launches' kernels in order, the workspace a whole number of
// floats, every zeroed result an index of the op's results, ascending.
mlir::LogicalResult verifyLaunchContract(mlir::Operation *op);
} // namespace octet::kernel

#include "dialects/kernel/KernelInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/kernel/KernelOps.h.inc"

#endif
