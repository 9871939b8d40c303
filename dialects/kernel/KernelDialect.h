#ifndef OCTET_DIALECTS_KERNEL_KERNELDIALECT_H
#define OCTET_DIALECTS_KERNEL_KERNELDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/kernel/KernelDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/kernel/KernelOps.h.inc"

#endif
