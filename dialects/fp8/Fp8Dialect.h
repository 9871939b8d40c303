#ifndef OCTET_DIALECTS_FP8_FP8DIALECT_H
#define OCTET_DIALECTS_FP8_FP8DIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/fp8/Fp8Dialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/fp8/Fp8Ops.h.inc"

#endif
