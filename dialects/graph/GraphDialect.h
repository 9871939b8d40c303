#ifndef OCTET_DIALECTS_GRAPH_GRAPHDIALECT_H
#define OCTET_DIALECTS_GRAPH_GRAPHDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/graph/GraphDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/graph/GraphOps.h.inc"

#endif
