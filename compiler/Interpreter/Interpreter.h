#ifndef OCTET_COMPILER_INTERPRETER_INTERPRETER_H
#define OCTET_COMPILER_INTERPRETER_INTERPRETER_H

// The reference interpreter: executes func.func bodies of graph, fp8 and
// kernel IR op by op on the CPU in float32, rounding every value to its
// element type (BF16, F16, E4M3FN, E5M2) exactly as the GPU does. It owns
// the semantics of every op those dialects have, behind one dispatch
// (execute() in Interpreter.cpp; the fp8 ops' in Fp8Ops.cpp); kernel.fused
// runs its region in place. Module variables live in a VariableStore that
// the caller owns, so parameters, optimizer moments, FP8 scale state and
// counters persist across calls.

#include "compiler/Interpreter/Tensor.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace octet::interp {

// Holds each value rounded to its element type, as every op result and every
// Tensor made from data is, so loads hand values on as they are.
class VariableStore {
public:
  // Creates every graph.variable of `module` that the store does not hold
  // yet, initialised as its `init` attribute says (normal with init_std,
  // zeros, ones), but the step-local ones (dialects/graph/StepLocal.h),
  // which a step writes before reading. Normal draws are a pure function of (seed, name), so a
  // store is reproducible across machines and variable orders.
  void initialize(mlir::ModuleOp module, uint64_t seed);

  bool has(const std::string &name) const { return vars_.count(name) != 0; }
  const Tensor &get(const std::string &name) const { return vars_.at(name); }
  void set(const std::string &name, Tensor value) {
    vars_[name] = std::move(value);
  }
  // Drops a variable whose value is about to be overwritten, so its storage
  // can go once nothing else holds it (Interpreter::run).
  void release(const std::string &name) { vars_.erase(name); }
  const std::map<std::string, Tensor> &all() const { return vars_; }

private:
  std::map<std::string, Tensor> vars_;
};

// Converts an MLIR element type to the interpreter's; fails for types it
// cannot hold.
llvm::Expected<DType> dtypeOf(mlir::Type elementType);

// What an observer sees of the op that just ran (and what the op semantics
// read and write): its operands' values, a place for its results, and the
// variable store.
class ExecContext {
public:
  virtual ~ExecContext() = default;
  virtual const Tensor &operand(mlir::Operation *op, unsigned index) = 0;
  // The operand's value for an op that hands it on (to a nested region):
  // moved out of the frame when this op is the value's last use and no later
  // operand of the op is the same value, so it is freed as soon as the
  // region is done with it rather than after the op. operand(op, index) is
  // not valid afterwards.
  virtual Tensor takeOperand(mlir::Operation *op, unsigned index) {
    return operand(op, index);
  }
  // Stores a result after rounding it to the result's element type.
  virtual void setResult(mlir::Operation *op, unsigned index, Tensor value) = 0;
  virtual VariableStore &variables() = 0;
};

// Called after each op runs (ops inside kernel.fused regions too), while its
// operands are still live, so tools can watch what flows through (FP8
// statistics).
using OpObserver = std::function<void(mlir::Operation *op, ExecContext &ctx)>;

class RankExchange;

// The rank an interpreter runs and the exchange where its collectives meet
// the other ranks' (compiler/Interpreter/Collectives.h). Without one, a
// collective over more than one rank is an error.
struct RankSlot {
  RankExchange *exchange = nullptr;
  int rank = 0;
  // Whether this run of @train_microbatch completes the step's gradient
  // accumulation: collectives marked `last_microbatch` run only then.
  bool lastMicrobatch = true;
  // Whether it is the step's first: kernel.gemm ops marked
  // `first_microbatch_overwrites` ignore their accumulate operand then.
  bool firstMicrobatch = true;
};

class Interpreter {
public:
  explicit Interpreter(mlir::ModuleOp module) : module_(module) {}

  void setOpObserver(OpObserver observer) { observer_ = std::move(observer); }
  void setRank(RankExchange &exchange, int rank) {
    rank_.exchange = &exchange;
    rank_.rank = rank;
  }
  void setLastMicrobatch(bool last) { rank_.lastMicrobatch = last; }
  void setFirstMicrobatch(bool first) { rank_.firstMicrobatch = first; }

  // Runs the function `name` with `args` and returns its results. Errors name
  // the function, the argument or the op (with its location) and what was
  // wrong.
  //
  // Peak memory follows liveness: a value is dropped after its last use
  // (arguments too, when the caller moves them in), and a variable that the
  // function overwrites leaves the store once the function has read it for
  // the last time before that store, so an update holds one copy of each
  // optimizer state, not the old and the new together. A run that fails
  // part-way can therefore leave such variables out of the store.
  //
  // @optimizer_step drops the step-local variables from the store when it
  // returns; a read of one before the next step's first microbatch writes
  // it is an error, as the GPU's slot would hold another tensor then.
  llvm::Expected<std::vector<Tensor>> run(llvm::StringRef name,
                                          std::vector<Tensor> args,
                                          VariableStore &variables);

private:
  mlir::ModuleOp module_;
  OpObserver observer_;
  RankSlot rank_;
};

} // namespace octet::interp

#endif
