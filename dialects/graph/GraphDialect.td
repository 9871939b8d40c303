#ifndef OCTET_GRAPH_DIALECT_TD
#define OCTET_GRAPH_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def Graph_Dialect : Dialect {
  let name = "graph";
  let cppNamespace = "::octet::graph";
  let summary = "Whole-tensor operations of decoder-transformer training";
  let description = [{
    Value-semantics tensor ops. Parameters and state are module-level
    `graph.variable` symbols read with `graph.load` and written with
    `graph.store`, so a training step is a function of its inputs plus
    explicit state reads and writes.
  }];
}

class Graph_Op<string mnemonic, list<Trait> traits = []>
    : Op<Graph_Dialect, mnemonic, traits>;

#endif
