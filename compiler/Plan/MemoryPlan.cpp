#include "compiler/Plan/MemoryPlan.h"

#include "dialects/graph/GraphDialect.h"
#include "dialects/graph/StepLocal.h"
#include "dialects/graph/WeightCache.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <map>
#include <set>
#include <optional>

using namespace mlir;

namespace octet::plan {

int64_t dequantFactorOffsetB(kernel::GemmOp gemm) {
  return (gemm.getDequantFactorCount(false) * 4 + 255) / 256 * 256;
}

int64_t dequantFactorFloats(kernel::GemmOp gemm) {
  return dequantFactorOffsetB(gemm) / 4 + gemm.getDequantFactorCount(true);
}

bool takesBlockFactors(kernel::GemmOp gemm) {
  return gemm.getABlock() && gemm.getAScale() &&
         cast<RankedTensorType>(gemm.getAScale().getType()).getRank() == 1;
}

const char *slotKindName(SlotKind kind) {
  switch (kind) {
  case SlotKind::Parameter:
    return "parameter";
  case SlotKind::Gradient:
    return "gradient";
  case SlotKind::OptimizerState:
    return "optimizer";
  case SlotKind::Fp8State:
    return "fp8-state";
  case SlotKind::WeightCache:
    return "weight-cache";
  case SlotKind::State:
    return "state";
  case SlotKind::Activation:
    return "activation";
  case SlotKind::IO:
    return "io";
  case SlotKind::Workspace:
    return "workspace";
  case SlotKind::Stash:
    return "stash";
  }
  return "?";
}

bool isStoredZeroFill(Operation *op) {
  if (auto fused = dyn_cast<kernel::FusedOp>(op))
    return fused.isStoredZeroFill();
  auto fill = dyn_cast<graph::FillOp>(op);
  return fill && fill.getValue().isZero() && !fill->use_empty() &&
         llvm::all_of(fill->getUsers(),
                      [](Operation *user) { return isa<graph::StoreOp>(user); });
}

const ProgramPlan *MemoryPlan::program(llvm::StringRef name) const {
  for (const ProgramPlan &p : programs)
    if (p.name == name)
      return &p;
  return nullptr;
}

namespace {

uint64_t alignUp(uint64_t n) {
  return (n + kPlanAlignment - 1) / kPlanAlignment * kPlanAlignment;
}

FailureOr<uint64_t> tensorBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return failure();
  uint64_t bits = tensor.getElementType().getIntOrFloatBitWidth();
  return (tensor.getNumElements() * bits + 7) / 8;
}

SlotKind variableKind(graph::VariableOp var) {
  llvm::StringRef name = var.getSymName();
  if (var.isTrainable())
    return SlotKind::Parameter;
  if (name.starts_with("grad."))
    return SlotKind::Gradient;
  if (name.starts_with("adam_m.") || name.starts_with("adam_v."))
    return SlotKind::OptimizerState;
  if (graph::isWeightCache(name))
    return SlotKind::WeightCache;
  if (name.starts_with("fp8."))
    return SlotKind::Fp8State;
  return SlotKind::State;
}

// A name that says where a buffer comes from in report terms: the fused
// kernel's name, or the GEMM's parameter and role.
std::string describeProducer(Operation *op, unsigned resultIndex) {
  std::string out = op->getName().getStringRef().str();
  if (auto name = op->getAttrOfType<StringAttr>("name"))
    out += " " + name.str();
  if (auto param = op->getAttrOfType<StringAttr>("param"))
    out += " " + param.str();
  if (auto role = op->getAttrOfType<StringAttr>("role"))
    out += " " + role.str();
  if (op->getNumResults() > 1)
    out += " #" + std::to_string(resultIndex);
  return out;
}

// A buffer's bytes and the steps it is live, both ends included.
struct Lifetime {
  int64_t first = 0, last = 0;
  uint64_t bytes = 0;
};

// Offsets for buffers whose lifetimes are all known: largest first, each
// at the lowest offset where it meets no buffer already placed whose
// lifetime meets its own. Placing them as they came and went (best fit)
// left the 8B bench model's train region 1.46 GiB above its peak live
// bytes, this 0.04. Lifetimes are inclusive, so an op's outputs never share
// bytes with its inputs. `high` gets the end of the highest.
//
// Buffers of one size are taken in two orders, the earlier first step
// first and the longer lifetime first, and the lower packing is kept (the
// first on a tie). Neither wins everywhere: saving the 8B bench model's
// gate/up GEMM output as one buffer instead of two halves
// (octet-save-fused-outputs) packed its FP8 step 11 MB above its former
// region with the first order alone and the same as before with the
// second, at the same peak live bytes.
static std::vector<uint64_t>
placeInOrder(const std::vector<Lifetime> &buffers,
             const std::vector<unsigned> &order, uint64_t &high) {
  std::vector<uint64_t> offsets(buffers.size(), 0);
  std::vector<unsigned> placed;
  std::vector<std::pair<uint64_t, uint64_t>> taken; // [begin, end)
  high = 0;
  for (unsigned i : order) {
    const Lifetime &b = buffers[i];
    taken.clear();
    for (unsigned j : placed)
      if (buffers[j].first <= b.last && b.first <= buffers[j].last)
        taken.emplace_back(offsets[j], offsets[j] + buffers[j].bytes);
    llvm::sort(taken);
    uint64_t at = 0;
    for (auto [begin, end] : taken) {
      if (begin >= at + b.bytes)
        break;
      at = std::max(at, end);
    }
    offsets[i] = at;
    high = std::max(high, at + b.bytes);
    placed.push_back(i);
  }
  return offsets;
}

std::vector<uint64_t> placeByLifetime(const std::vector<Lifetime> &buffers,
                                      uint64_t &high) {
  auto ordered = [&](auto tieBreak) {
    std::vector<unsigned> order(buffers.size());
    for (unsigned i = 0; i < order.size(); ++i)
      order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) {
      if (buffers[a].bytes != buffers[b].bytes)
        return buffers[a].bytes > buffers[b].bytes;
      return tieBreak(buffers[a], buffers[b]);
    });
    return order;
  };
  std::vector<uint64_t> offsets = placeInOrder(
      buffers,
      ordered([](const Lifetime &a, const Lifetime &b) {
        return a.first < b.first;
      }),
      high);
  uint64_t longerHigh = 0;
  std::vector<uint64_t> longer = placeInOrder(
      buffers,
      ordered([](const Lifetime &a, const Lifetime &b) {
        return a.last - a.first > b.last - b.first;
      }),
      longerHigh);
  if (longerHigh < high) {
    high = longerHigh;
    return longer;
  }
  return offsets;
}

// Byte offset of a graph.slice result inside its input, when the slice is
// contiguous (every dimension before `dim` is 1); else none: a strided
// slice is no view a kernel can be given, and octet-fuse-elementwise
// computes it in a kernel.
std::optional<uint64_t> sliceByteOffset(graph::SliceOp slice) {
  auto in = cast<RankedTensorType>(slice.getInput().getType());
  int64_t dim = slice.getDim();
  for (int64_t d = 0; d < dim; ++d)
    if (in.getDimSize(d) != 1)
      return std::nullopt;
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < in.getRank(); ++d)
    inner *= in.getDimSize(d);
  return slice.getOffset() * inner * in.getElementTypeBitWidth() / 8;
}

struct Buffer {
  // Slot index once placed.
  unsigned slot = 0;
  uint64_t bytes = 0;
  int64_t def = 0, lastUse = 0;
  bool inPlace = false;
  // Placed in place as a rank's part of its slot (an in-place all-gather's
  // operand): bytes added per index in the data group.
  uint64_t rankStride = 0;
  bool io = false;
  bool workspace = false;
  // Bumped by each kernel that writes a new value over the buffer
  // (kernel.fused `overwrites`), with the name of the last one.
  unsigned version = 0;
  std::string overwrittenBy;
  std::string name;
  Type type;
  // The value that defines the buffer.
  Value value;
};

// Ops whose result element i reads element i of each operand and nothing
// else: a chain of them may write over the tensor it reads.
bool preservesIndex(Operation *op) {
  return isa<graph::AdamWUpdateOp, graph::AddOp, graph::MulOp, graph::CastOp,
             graph::IncrementOp, graph::ReshapeOp>(op);
}

// Whether result `result` of a kernel.fused is computed from its inputs in
// `inputs` element by element (every op between those block arguments and
// the yielded value preserves the index). Not when it is not computed from
// them at all (a fill), or through an op that moves elements (the roll of
// an FP8 amax history, a transpose, a row reduction).
bool computedInPlaceFrom(OpResult result,
                         const llvm::DenseSet<unsigned> &inputs) {
  auto fused = cast<kernel::FusedOp>(result.getOwner());
  Block &body = fused.getBodyBlock();
  llvm::DenseSet<Value> sameIndex, moved;
  for (unsigned i : inputs)
    sameIndex.insert(body.getArgument(i));
  for (Operation &op : body) {
    bool fromMoved = llvm::any_of(op.getOperands(),
                                  [&](Value v) { return moved.contains(v); });
    bool fromInputs = llvm::any_of(
        op.getOperands(), [&](Value v) { return sameIndex.contains(v); });
    for (Value r : op.getResults()) {
      if (fromMoved || (fromInputs && !preservesIndex(&op)))
        moved.insert(r);
      else if (fromInputs)
        sameIndex.insert(r);
    }
  }
  Value yielded = body.getTerminator()->getOperand(result.getResultNumber());
  return sameIndex.contains(yielded) && !moved.contains(yielded);
}

// Plans `funcs` as one timeline, each function's steps after the previous
// one's, in one activation region: a buffer of one function is dead before
// the next starts, but a step-local variable (`stepLocal`: name -> its
// slot, whose offset this sets) is a buffer that spans them.
LogicalResult planTimeline(ArrayRef<func::FuncOp> funcs, MemoryPlan &plan,
                           const llvm::StringMap<unsigned> &stepLocal) {
  // Every value resolves to a root buffer (or a variable) and a byte offset.
  struct Root {
    int buffer = -1;           // index into buffers
    llvm::StringRef variable;  // when the value reads a variable
    uint64_t offset = 0;
    // A rank's part (kernel.rank_part): bytes added per index in the group.
    uint64_t rankStride = 0;
    // Which of the buffer's values this is: a kernel.fused that `overwrites`
    // its input makes the next one, and the older ones are gone.
    unsigned version = 0;
    // For a variable's value: the stores to it in this program before its
    // load (a later store makes the bytes hold another value).
    unsigned variableStores = 0;
  };
  llvm::DenseMap<Value, Root> roots;
  std::vector<Buffer> buffers;
  std::vector<ProgramPlan> programs;
  // Each program's first step on the timeline.
  std::vector<int64_t> bases;
  // The steps that touch each step-local variable.
  llvm::StringMap<std::pair<int64_t, int64_t>> stepLocalExtent;
  int64_t base = 0;
  for (func::FuncOp func : funcs) {
  ProgramPlan program;
  program.name = func.getSymName().str();
  Block &body = func.getBody().front();

  // Program order of the top-level ops, on the timeline.
  llvm::DenseMap<Operation *, int64_t> index;
  for (Operation &op : body)
    index[&op] = base + static_cast<int64_t>(index.size());
  int64_t end = base + static_cast<int64_t>(index.size());
  program.numSteps = end - base;

  // A concatenation along a dimension whose outer dimensions are 1 (each
  // piece one contiguous run of its bytes) of results that nothing else
  // reads: the ops that make the pieces write them into the concatenation's
  // buffer at their offsets, and the concatenation is no kernel
  // (octet-chunk-lm-head's dx). Piece -> (the concatenation, byte offset).
  llvm::DenseMap<Value, std::pair<Value, uint64_t>> concatPieces;
  for (auto concat : body.getOps<graph::ConcatOp>()) {
    auto type = cast<RankedTensorType>(concat.getType());
    bool contiguous = llvm::all_of(
        type.getShape().take_front(concat.getDim()),
        [](int64_t size) { return size == 1; });
    llvm::SmallPtrSet<Value, 8> seen;
    bool owned = llvm::all_of(concat.getInputs(), [&](Value piece) {
      Operation *def = piece.getDefiningOp();
      return def && def->getBlock() == &body && piece.hasOneUse() &&
             seen.insert(piece).second &&
             !isa<graph::LoadOp, graph::ReshapeOp, graph::SliceOp,
                  graph::SaveOp, graph::ConcatOp, kernel::RankPartOp,
                  kernel::CollectiveOp>(def) &&
             !(isa<kernel::FusedOp>(def) &&
               cast<kernel::FusedOp>(def).getOverwrites()) &&
             !(isa<kernel::GemmOp>(def) && cast<kernel::GemmOp>(def).getC());
    });
    if (!contiguous || !owned)
      return concat.emitError("memory plan: ")
             << "a concatenation is no kernel: each piece must be the "
                "result of an op of the program that only the "
                "concatenation reads, along a dimension whose outer "
                "dimensions are 1, so that the op writes it in place";
    uint64_t offset = 0;
    for (Value piece : concat.getInputs()) {
      concatPieces[piece] = {concat.getResult(), offset};
      FailureOr<uint64_t> bytes = tensorBytes(piece.getType());
      if (failed(bytes))
        return concat.emitError("memory plan: a concatenation's pieces "
                                "need static shapes");
      offset += *bytes;
    }
  }

  auto newBuffer = [&](Value v, std::string name, int64_t def,
                       bool io) -> LogicalResult {
    if (auto piece = concatPieces.find(v); piece != concatPieces.end()) {
      auto [whole, offset] = piece->second;
      if (!roots.count(whole)) {
        Operation *concat = whole.getDefiningOp();
        if (failed(tensorBytes(whole.getType())))
          return concat->emitError("memory plan: a concatenation needs a "
                                   "static shape");
        Buffer b;
        b.bytes = *tensorBytes(whole.getType());
        b.def = b.lastUse = def;
        b.name = program.name + ":" + describeProducer(concat, 0);
        b.type = whole.getType();
        b.value = whole;
        roots[whole] = Root{static_cast<int>(buffers.size()), {}, 0};
        buffers.push_back(std::move(b));
      }
      Root r = roots.lookup(whole);
      buffers[r.buffer].lastUse = std::max(buffers[r.buffer].lastUse, def);
      r.offset += offset;
      roots[v] = r;
      return success();
    }
    FailureOr<uint64_t> bytes = tensorBytes(v.getType());
    if (failed(bytes))
      return func.emitError("memory plan: ")
             << "a tensor of " << program.name << " has type " << v.getType()
             << "; the planner needs static shapes";
    Buffer b;
    b.bytes = *bytes;
    b.def = b.lastUse = def;
    b.io = io;
    b.name = std::move(name);
    b.type = v.getType();
    b.value = v;
    roots[v] = Root{static_cast<int>(buffers.size()), {}, 0};
    buffers.push_back(std::move(b));
    return success();
  };

  for (BlockArgument arg : body.getArguments()) {
    std::string name = program.name + ":";
    if (auto attr = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      "graph.name"))
      name += attr.str();
    else
      name += "arg" + std::to_string(arg.getArgNumber());
    // The host writes inputs before the first op runs.
    if (failed(newBuffer(arg, name, base, /*io=*/true)))
      return failure();
  }

  // A kernel.fused whose results are written over some of its inputs
  // (`overwrites`): each such result is a new value of its input's buffer,
  // and a later read of the old value is an error (the operand check
  // above); the other results get buffers of their own.
  auto overwriteInput = [&](kernel::FusedOp fused,
                            int64_t at) -> LogicalResult {
    ArrayRef<int64_t> overwrites = *fused.getOverwrites();
    std::string name =
        program.name + ":" + describeProducer(fused.getOperation(), 0);
    for (OpResult result : fused->getResults()) {
      int64_t input = overwrites[result.getResultNumber()];
      if (input < 0) {
        if (failed(newBuffer(result,
                             program.name + ":" +
                                 describeProducer(fused.getOperation(),
                                                  result.getResultNumber()),
                             at, /*io=*/false)))
          return failure();
        continue;
      }
      Value in = fused.getInputs()[input];
      Root r = roots.lookup(in);
      if (r.buffer < 0 || buffers[r.buffer].io)
        return fused.emitError("memory plan: ")
               << name << " overwrites input #" << input
               << ", which is a variable or a program input or output: its "
                  "bytes are not this step's to write over";
      for (OpOperand &operand : fused->getOpOperands()) {
        if (operand.getOperandNumber() != unsigned(input) &&
            roots.lookup(operand.get()).buffer == r.buffer)
          return fused.emitError("memory plan: ")
                 << name << " overwrites input #" << input
                 << " but also reads its bytes as input #"
                 << operand.getOperandNumber();
      }
      Buffer &b = buffers[r.buffer];
      b.version++;
      b.overwrittenBy = name;
      b.lastUse = std::max(b.lastUse, at);
      r.version = b.version;
      roots[result] = r;
    }
    return success();
  };

  // Whether a GEMM's accumulating result may be written over its C
  // operand: C is the whole of a buffer of the step (a variable's value is
  // the store's to place), of the result's type, no other operand of the
  // GEMM, and no op after the GEMM reads it, through views. A chain of such
  // GEMMs (octet-chunk-lm-head's wgrad over token chunks) needs one buffer.
  auto accumulatesInPlace = [&](kernel::GemmOp gemm) {
    Value c = gemm.getC();
    if (!c || !gemm.getAux().empty() ||
        c.getType() != gemm.getResult().getType())
      return false;
    Root r = roots.lookup(c);
    if (r.buffer < 0 || r.offset != 0 || r.rankStride ||
        buffers[r.buffer].io ||
        buffers[r.buffer].bytes != *tensorBytes(c.getType()) ||
        r.version != buffers[r.buffer].version)
      return false;
    for (Value other : {gemm.getA(), gemm.getB(), gemm.getBias()})
      if (other && roots.lookup(other).buffer == r.buffer)
        return false;
    SmallVector<Value> work = {c};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      for (Operation *user : v.getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*user);
        if (top && isa<graph::ReshapeOp, graph::SliceOp, graph::SaveOp>(top)) {
          work.push_back(top->getResult(0));
          continue;
        }
        if (!top || (top != gemm.getOperation() && !top->isBeforeInBlock(gemm)))
          return false;
      }
    }
    return true;
  };

  // Loads of each variable, to decide when a store may write in place.
  llvm::StringMap<int64_t> lastVariableRead;
  auto use = [&](Value v, int64_t at) {
    auto it = roots.find(v);
    if (it == roots.end())
      return;
    if (it->second.buffer >= 0) {
      Buffer &b = buffers[it->second.buffer];
      b.lastUse = std::max(b.lastUse, at);
    } else {
      int64_t &last = lastVariableRead[it->second.variable];
      last = std::max(last, at);
      if (stepLocal.count(it->second.variable)) {
        auto [extent, fresh] = stepLocalExtent.try_emplace(
            it->second.variable, std::make_pair(at, at));
        extent->second.first = std::min(extent->second.first, at);
        extent->second.second = std::max(extent->second.second, at);
      }
    }
  };

  // Where each variable was first stored in this program. A load names the
  // variable's bytes rather than copying them, so an op after the store
  // that reads a value loaded before it would see the new value on the GPU
  // while the interpreter (SSA) gives it the old one.
  llvm::StringMap<llvm::SmallVector<graph::StoreOp, 1>> storesOf;
  // The stores of an in-place all-gather's results: the gather wrote them.
  llvm::SmallPtrSet<Operation *, 16> gatheredStores;

  // An in-place all-gather (octet-shard-optimizer's, of the updated
  // parameter parts): each result is stored into a parameter, and its
  // operand, a kernel's result made in this program, is placed in the
  // rank's part of that parameter's slot, so the kernel writes it there and
  // NCCL gathers in place (sendbuff = recvbuff + rank × the part's bytes).
  // The result is the variable's bytes from here on, as its store would
  // make them.
  auto gatherInPlace = [&](kernel::CollectiveOp coll,
                           int64_t at) -> LogicalResult {
    auto fail = [&](const Twine &why) {
      return coll.emitError("memory plan: an in-place all-gather ") << why;
    };
    for (auto [in, out] : llvm::zip(coll.getInputs(), coll.getResults())) {
      graph::StoreOp store;
      for (Operation *user : out.getUsers())
        if (auto s = dyn_cast<graph::StoreOp>(user);
            s && plan.variableSlots.count(s.getVariable()))
          store = s;
      if (!store)
        return fail("whose result is stored into no variable: its operand "
                    "has no parameter slot to be placed in");
      StringRef var = store.getVariable();
      const Slot &slot = plan.slots[plan.variableSlots.lookup(var)];
      FailureOr<uint64_t> partBytes = tensorBytes(in.getType());
      Root r = roots.lookup(in);
      auto result = dyn_cast<OpResult>(in);
      if (failed(partBytes) || r.buffer < 0 || r.offset || r.rankStride ||
          !result || !isa<kernel::FusedOp>(result.getOwner()))
        return fail("needs each operand to be a kernel's result of its own, "
                    "which it places in the rank's part of @")
               << var;
      Buffer &b = buffers[r.buffer];
      if (b.inPlace || b.io || b.def <= base ||
          b.bytes * uint64_t(coll.getGroupSize()) != slot.bytes ||
          r.version != b.version)
        return fail("cannot place its operand ")
               << b.name << " in the rank's part of @" << var
               << ": it is written in place elsewhere, returned, made "
                  "outside this program or not 1/"
               << coll.getGroupSize() << " of the variable's bytes";
      // The kernel writes the part over the variable's old value: nothing
      // may read that after it, and the kernel itself only the same part,
      // element by element (AdamW's new parameter from the old).
      llvm::DenseSet<unsigned> readers;
      for (OpOperand &operand : result.getOwner()->getOpOperands()) {
        auto it = roots.find(operand.get());
        if (it == roots.end() || it->second.buffer >= 0 ||
            it->second.variable != var)
          continue;
        if (it->second.offset || it->second.rankStride != b.bytes)
          return fail("operand's kernel reads @")
                 << var << " other than as the rank's part it writes";
        readers.insert(operand.getOperandNumber());
      }
      auto read = lastVariableRead.find(var);
      if ((read != lastVariableRead.end() && read->second > b.def) ||
          (!readers.empty() && !computedInPlaceFrom(result, readers)))
        return fail("writes @")
               << var << " while its old value is still read after the "
                         "kernel that makes the rank's part";
      b.inPlace = true;
      b.slot = plan.variableSlots.lookup(var);
      b.rankStride = b.bytes;
      b.lastUse = std::max(b.lastUse, at);
      Root whole{-1, var, 0};
      storesOf[var].push_back(store);
      gatheredStores.insert(store);
      whole.variableStores = storesOf[var].size();
      roots[out] = whole;
    }
    return success();
  };
  for (Operation &op : body) {
    int64_t at = index[&op];
    for (Value operand : op.getOperands()) {
      auto it = roots.find(operand);
      if (it != roots.end() && it->second.buffer < 0 &&
          !isa<graph::StoreOp>(op)) {
        auto stores = storesOf.find(it->second.variable);
        if (stores != storesOf.end() &&
            stores->second.size() > it->second.variableStores)
          return op.emitError("memory plan: this op reads @")
                 << it->second.variable
                 << " as loaded before the graph.store at "
                 << stores->second[it->second.variableStores].getLoc()
                 << " wrote it; the bytes it reads hold the stored value by "
                    "then: read the loaded value before the store (or copy "
                    "it there)";
      }
      if (it != roots.end() && it->second.buffer >= 0 &&
          it->second.version != buffers[it->second.buffer].version)
        return op.emitError("memory plan: this op reads ")
               << buffers[it->second.buffer].name << " after "
               << buffers[it->second.buffer].overwrittenBy
               << " wrote its result over it (`overwrites`); drop the "
                  "mark, or read the value before that kernel";
      use(operand, at);
    }
    // A communication-stream collective reads its inputs while the compute
    // stream goes on: they keep their bytes to the program's end, which
    // joins the streams.
    if (auto coll = dyn_cast<kernel::CollectiveOp>(op); coll && coll.getCommStream())
      for (Value in : coll.getInputs())
        use(in, end - 1);
    if (auto load = dyn_cast<graph::LoadOp>(op)) {
      Root r{-1, load.getVariable(), 0};
      auto stores = storesOf.find(load.getVariable());
      r.variableStores = stores == storesOf.end() ? 0 : stores->second.size();
      roots[load.getResult()] = r;
      continue;
    }
    if (isa<graph::ReshapeOp, graph::SaveOp>(op)) {
      roots[op.getResult(0)] = roots.lookup(op.getOperand(0));
      continue;
    }
    if (isStoredZeroFill(&op))
      continue;
    // An all-reduce runs in place (NCCL allows send == recv), so the
    // reduced gradients stay in their accumulators instead of doubling the
    // optimizer step's memory; reduce-scatter and all-gather change the
    // size and get buffers of their own below.
    auto readLater = [&](Value v) {
      return llvm::any_of(v.getUsers(), [&](Operation *user) {
        Operation *top = body.findAncestorOpInBlock(*user);
        return top && index.lookup(top) > at;
      });
    };
    if (auto coll = dyn_cast<kernel::CollectiveOp>(op);
        coll && (coll.getKind() == "all_reduce" ||
                 (coll.getInPlace() && coll.getKind() == "reduce_scatter")) &&
        llvm::none_of(coll.getInputs(), readLater)) {
      for (auto [in, out] : llvm::zip(coll.getInputs(), coll.getResults()))
        roots[out] = roots.lookup(in);
      continue;
    }
    if (auto coll = dyn_cast<kernel::CollectiveOp>(op);
        coll && coll.getInPlace() && coll.getKind() == "all_gather") {
      if (failed(gatherInPlace(coll, at)))
        return failure();
      continue;
    }
    if (auto part = dyn_cast<kernel::RankPartOp>(op)) {
      Root r = roots.lookup(part.getInput());
      if (r.rankStride)
        return part.emitError("memory plan: a rank's part of a rank's part");
      FailureOr<uint64_t> bytes = tensorBytes(part.getType());
      if (failed(bytes))
        return part.emitError("memory plan: a rank's part needs a static "
                              "shape");
      r.rankStride = *bytes;
      roots[part.getResult()] = r;
      continue;
    }
    if (auto slice = dyn_cast<graph::SliceOp>(op)) {
      std::optional<uint64_t> offset = sliceByteOffset(slice);
      if (!offset)
        return slice.emitError("memory plan: a strided slice (dimension ")
               << slice.getDim()
               << " of a tensor whose outer dimensions are not 1) is no "
                  "view of its input's memory; run octet-fuse-elementwise, "
                  "which computes it in a kernel";
      Root r = roots.lookup(slice.getInput());
      r.offset += *offset;
      roots[slice.getResult()] = r;
      continue;
    }
    // Its pieces were written in its buffer (concatPieces).
    if (isa<graph::ConcatOp>(op))
      continue;
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value v : ret.getOperands()) {
        auto it = roots.find(v);
        if (it != roots.end() && it->second.buffer >= 0)
          buffers[it->second.buffer].io = true;
        // To the program's last step (this return), not into the next
        // program of the timeline.
        use(v, end - 1);
      }
      continue;
    }
    if (auto store = dyn_cast<graph::StoreOp>(op)) {
      Root r = roots.lookup(store.getValue());
      llvm::StringRef var = store.getVariable();
      // An in-place all-gather wrote the variable's bytes (gatherInPlace
      // counted this store there).
      if (r.buffer < 0 && r.variable == var && r.offset == 0 &&
          !r.rankStride && gatheredStores.contains(store))
        continue;
      storesOf[var].push_back(store);
      // A step-local variable's bytes are its own from the first write
      // (the memset of a cleared accumulator) on.
      if (stepLocal.count(var)) {
        auto [extent, fresh] =
            stepLocalExtent.try_emplace(var, std::make_pair(at, at));
        extent->second.first = std::min(extent->second.first, at);
        extent->second.second = std::max(extent->second.second, at);
      }
      auto slotIt = plan.variableSlots.find(var);
      if (r.buffer < 0 || slotIt == plan.variableSlots.end())
        continue;
      Buffer &b = buffers[r.buffer];
      auto readIt = lastVariableRead.find(var);
      // The producer may overwrite the variable only when nothing reads the
      // old value after it (reads by the producer itself are the in-place
      // update an optimizer or an accumulating GEMM does).
      bool oldValueDead =
          readIt == lastVariableRead.end() || readIt->second <= b.def;
      // A kernel that reads the variable may write a result into it only
      // when that result is computed from the value it reads, element by
      // element (a new parameter from the old). One that is not (the
      // cleared gradient accumulator a multi-tensor optimizer yields, one
      // zero tensor for several accumulators) could be written before
      // other parts of the kernel have read the old value.
      if (oldValueDead && readIt != lastVariableRead.end() &&
          readIt->second == b.def) {
        auto result = dyn_cast_or_null<OpResult>(b.value);
        if (result && isa<kernel::FusedOp>(result.getOwner())) {
          llvm::DenseSet<unsigned> readers;
          for (OpOperand &operand : result.getOwner()->getOpOperands()) {
            auto it = roots.find(operand.get());
            if (it != roots.end() && it->second.buffer < 0 &&
                it->second.variable == var)
              readers.insert(operand.getOperandNumber());
          }
          if (!readers.empty() && !computedInPlaceFrom(result, readers))
            oldValueDead = false;
        }
      }
      if (!b.inPlace && !b.io && r.offset == 0 &&
          b.bytes == plan.slots[slotIt->second].bytes && oldValueDead &&
          b.def > base) {
        b.inPlace = true;
        b.slot = slotIt->second;
      }
      continue;
    }
    auto fused = dyn_cast<kernel::FusedOp>(op);
    auto gemm = dyn_cast<kernel::GemmOp>(op);
    if (fused && fused.getOverwrites()) {
      if (failed(overwriteInput(fused, at)))
        return failure();
    } else if (gemm && accumulatesInPlace(gemm)) {
      // D = P + C written over C (cuBLASLt allows C == D): a new value of
      // C's buffer, as a kernel's `overwrites` makes one.
      Root r = roots.lookup(gemm.getC());
      Buffer &b = buffers[r.buffer];
      b.version++;
      b.overwrittenBy =
          program.name + ":" + describeProducer(gemm.getOperation(), 0);
      b.lastUse = std::max(b.lastUse, at);
      r.version = b.version;
      roots[gemm.getResult()] = r;
    } else {
      for (OpResult result : op.getResults())
        if (failed(newBuffer(
                result,
                program.name + ":" +
                    describeProducer(&op, result.getResultNumber()),
                at, /*io=*/false)))
          return failure();
    }
    // Scratch lives at this step only, beside the op's inputs and results.
    auto scratch = [&](int64_t floats, llvm::StringRef what,
                       llvm::DenseMap<Operation *, unsigned> &owner) {
      Buffer b;
      b.bytes = static_cast<uint64_t>(floats) * 4;
      b.def = b.lastUse = at;
      b.workspace = true;
      b.name = program.name + ":" + describeProducer(&op, 0) + " " + what.str();
      b.type = RankedTensorType::get({floats}, Float32Type::get(op.getContext()));
      owner[&op] = buffers.size();
      buffers.push_back(std::move(b));
    };
    if (auto launched = dyn_cast<kernel::LaunchedOpInterface>(op);
        launched && launched.getWorkspaceBytesOrZero() > 0)
      scratch((launched.getWorkspaceBytesOrZero() + 3) / 4, "workspace",
              program.workspaceSlots);
    if (auto gemm = dyn_cast<kernel::GemmOp>(op); gemm && gemm.getABlock() &&
                                                  !takesBlockFactors(gemm))
      scratch(dequantFactorFloats(gemm), "block factors",
              program.gemmScaleSlots);
  }

  programs.push_back(std::move(program));
  bases.push_back(base);
  base = end;
  }

  // A step-local variable is a buffer from its first access to its last;
  // the results computed in place in it are that buffer too.
  llvm::DenseMap<unsigned, unsigned> stepLocalBuffers; // slot -> buffer
  for (auto &[name, extent] : stepLocalExtent) {
    unsigned slot = stepLocal.lookup(name);
    Buffer b;
    b.bytes = plan.slots[slot].bytes;
    b.def = extent.first;
    b.lastUse = extent.second;
    for (const Buffer &other : buffers)
      if (other.inPlace && other.slot == slot) {
        b.def = std::min(b.def, other.def);
        b.lastUse = std::max(b.lastUse, other.lastUse);
      }
    b.name = name.str();
    b.slot = slot;
    b.type = RankedTensorType::get(
        plan.slots[slot].shape, plan.slots[slot].elementType);
    stepLocalBuffers[slot] = buffers.size();
    buffers.push_back(std::move(b));
  }

  // Place the buffers once every lifetime is known (placeByLifetime).
  std::vector<unsigned> order;
  std::vector<Lifetime> lifetimes;
  for (unsigned i = 0; i < buffers.size(); ++i)
    if (!buffers[i].inPlace) {
      order.push_back(i);
      lifetimes.push_back(
          {buffers[i].def, buffers[i].lastUse, alignUp(buffers[i].bytes)});
    }
  std::vector<uint64_t> offsets(buffers.size(), 0);
  uint64_t high = 0;
  std::vector<uint64_t> at = placeByLifetime(lifetimes, high);
  for (size_t k = 0; k < order.size(); ++k)
    offsets[order[k]] = at[k];
  // Each program's peak (live bytes at its busiest step) and region (the
  // end of the highest slot live during it).
  std::map<int64_t, int64_t> deltas;
  for (unsigned i : order) {
    deltas[buffers[i].def] += int64_t(alignUp(buffers[i].bytes));
    deltas[buffers[i].lastUse + 1] -= int64_t(alignUp(buffers[i].bytes));
  }
  for (size_t p = 0; p < programs.size(); ++p) {
    int64_t first = bases[p], last = first + programs[p].numSteps - 1;
    int64_t now = 0;
    auto it = deltas.begin();
    for (; it != deltas.end() && it->first <= first; ++it)
      now += it->second;
    int64_t peak = now;
    for (; it != deltas.end() && it->first <= last; ++it)
      peak = std::max(peak, now += it->second);
    programs[p].peakLiveBytes = uint64_t(std::max<int64_t>(peak, 0));
    for (unsigned i : order)
      if (buffers[i].def <= last && buffers[i].lastUse >= first)
        programs[p].regionBytes =
            std::max(programs[p].regionBytes,
                     offsets[i] + alignUp(buffers[i].bytes));
  }
  // The program a step of the timeline belongs to.
  auto programAt = [&](int64_t step) {
    size_t p = 0;
    while (p + 1 < programs.size() && bases[p + 1] <= step)
      ++p;
    return p;
  };

  for (auto &[slotIndex, i] : stepLocalBuffers) {
    Slot &slot = plan.slots[slotIndex];
    const Buffer &b = buffers[i];
    size_t first = programAt(b.def), last = programAt(b.lastUse);
    // Relative to the activation region until every program is planned.
    slot.offset = offsets[i];
    slot.program = programs[first].name;
    slot.firstStep = b.def - bases[first];
    slot.lastProgram = programs[last].name;
    slot.lastStep = b.lastUse - bases[last];
  }
  for (unsigned i = 0; i < buffers.size(); ++i) {
    Buffer &b = buffers[i];
    if (b.inPlace || stepLocalBuffers.count(b.slot) &&
                         stepLocalBuffers.lookup(b.slot) == i)
      continue;
    Slot slot;
    slot.name = b.name;
    slot.kind = b.workspace ? SlotKind::Workspace
                : b.io      ? SlotKind::IO
                            : SlotKind::Activation;
    // Relative to the activation region until every program is planned.
    slot.offset = offsets[i];
    slot.bytes = b.bytes;
    auto tensor = cast<RankedTensorType>(b.type);
    slot.elementType = tensor.getElementType();
    slot.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
    size_t p = programAt(b.def);
    slot.program = programs[p].name;
    slot.firstStep = b.def - bases[p];
    slot.lastStep = b.lastUse - bases[p];
    b.slot = plan.slots.size();
    plan.slots.push_back(std::move(slot));
  }
  // Scratch owners held buffer indices until the buffers had slots.
  for (ProgramPlan &program : programs)
    for (auto *owner : {&program.workspaceSlots, &program.gemmScaleSlots})
      for (auto &entry : *owner)
        entry.second = buffers[entry.second].slot;
  for (auto &[value, root] : roots) {
    // The program whose body holds the value.
    Region *region = value.getParentRegion();
    auto func = region ? region->getParentOfType<func::FuncOp>() : nullptr;
    if (!func)
      continue;
    ProgramPlan *program = nullptr;
    for (ProgramPlan &p : programs)
      if (p.name == func.getSymName())
        program = &p;
    if (!program)
      continue;
    if (root.buffer >= 0)
      program->valueSlots[value] = {buffers[root.buffer].slot, root.offset};
    else if (auto it = plan.variableSlots.find(root.variable);
             it != plan.variableSlots.end())
      program->valueSlots[value] = {it->second, root.offset};
    uint64_t stride =
        root.buffer >= 0 ? buffers[root.buffer].rankStride : 0;
    if (root.rankStride && stride)
      return emitError(value.getLoc(),
          "memory plan: a rank's part of a value the plan placed as a "
          "rank's part of a parameter (an in-place all-gather's operand)");
    if (root.rankStride || stride)
      program->rankStrides[value] = root.rankStride + stride;
  }
  for (ProgramPlan &program : programs)
    plan.programs.push_back(std::move(program));
  return success();
}

// A step-local variable's value is gone outside [its first write in the
// train program, its last read in the optimizer step]: it may be read in
// @train_microbatch only after a store of it there (the memset that clears
// it) or as the accumulate operand of a GEMM that writes it in the step's
// first microbatch, in @optimizer_step only read, and in no other function.
LogicalResult checkStepLocal(graph::VariableOp var, ModuleOp module,
                             func::FuncOp train, func::FuncOp optimizer) {
  StringRef name = var.getSymName();
  auto fail = [&](Operation *at, const Twine &why) {
    return at->emitError("memory plan: @")
           << name << " is step-local (its slot is reused outside the step), "
           << why;
  };
  for (auto func : module.getOps<func::FuncOp>()) {
    WalkResult walked = func.walk([&](Operation *op) {
      auto load = dyn_cast<graph::LoadOp>(op);
      auto store = dyn_cast<graph::StoreOp>(op);
      if ((!load || load.getVariable() != name) &&
          (!store || store.getVariable() != name))
        return WalkResult::advance();
      if (func != train && func != optimizer) {
        (void)fail(op, "but @" + func.getSymName() + " reads or writes it");
        return WalkResult::interrupt();
      }
      if (func == optimizer && store) {
        (void)fail(op, "but the optimizer step writes it: the next step "
                       "would read that value after the slot was reused");
        return WalkResult::interrupt();
      }
      // Cleared by this run of the train program before it reads it.
      auto writtenBefore = [&](Operation *read) {
        Block *block = read->getBlock();
        return llvm::any_of(block->getOps<graph::StoreOp>(),
                            [&](graph::StoreOp s) {
                              return s.getVariable() == name &&
                                     s->isBeforeInBlock(read);
                            });
      };
      if (func == train && load && !writtenBefore(load))
        for (OpOperand &use : load->getUses()) {
          auto gemm = dyn_cast<kernel::GemmOp>(use.getOwner());
          if (!gemm || gemm.getC() != load.getResult() ||
              !gemm->hasAttr("first_microbatch_overwrites") ||
              llvm::count(gemm->getOperands(), load.getResult()) != 1) {
            (void)fail(use.getOwner(),
                       "but this op reads it in the train microbatch before "
                       "the step has written it");
            return WalkResult::interrupt();
          }
        }
      return WalkResult::advance();
    });
    if (walked.wasInterrupted())
      return failure();
  }
  return success();
}

} // namespace

FailureOr<MemoryPlan> planMemory(ModuleOp module,
                                 int64_t microbatchesPerStep) {
  MemoryPlan plan;
  auto train = module.lookupSymbol<func::FuncOp>("train_microbatch");
  auto optimizer = module.lookupSymbol<func::FuncOp>("optimizer_step");
  bool stepTimeline = train && !train.isExternal() && optimizer &&
                      !optimizer.isExternal();
  llvm::StringMap<unsigned> stepLocal;
  for (auto var : module.getOps<graph::VariableOp>()) {
    FailureOr<uint64_t> bytes = tensorBytes(var.getTensorType());
    if (failed(bytes))
      return var.emitError("memory plan: variable @")
             << var.getSymName() << " needs a static shape";
    // With several microbatches a step-local variable carries the sum
    // through the whole train program, so it stays persistent: the train
    // program's peak would hold it anyway.
    if (stepTimeline && microbatchesPerStep == 1 && graph::isStepLocal(var)) {
      if (failed(checkStepLocal(var, module, train, optimizer)))
        return failure();
      Slot slot;
      slot.name = var.getSymName().str();
      slot.kind = variableKind(var);
      slot.bytes = *bytes;
      slot.elementType = var.getTensorType().getElementType();
      slot.shape.assign(var.getTensorType().getShape().begin(),
                        var.getTensorType().getShape().end());
      stepLocal[slot.name] = plan.slots.size();
      plan.variableSlots[slot.name] = plan.slots.size();
      plan.slots.push_back(std::move(slot));
      continue;
    }
    Slot slot;
    slot.name = var.getSymName().str();
    slot.kind = variableKind(var);
    slot.offset = plan.persistentBytes;
    slot.bytes = *bytes;
    slot.elementType = var.getTensorType().getElementType();
    slot.shape.assign(var.getTensorType().getShape().begin(),
                      var.getTensorType().getShape().end());
    plan.variableSlots[slot.name] = plan.slots.size();
    plan.slots.push_back(std::move(slot));
    plan.persistentBytes += alignUp(*bytes);
  }
  bool hasGemm = false;
  module.walk([&](kernel::GemmOp) {
    hasGemm = true;
    return WalkResult::interrupt();
  });
  if (hasGemm) {
    Slot slot;
    slot.name = "gemm workspace (stream 0)";
    slot.kind = SlotKind::Workspace;
    slot.offset = plan.persistentBytes;
    slot.bytes = kGemmWorkspaceBytes;
    slot.elementType = IntegerType::get(module.getContext(), 8);
    slot.shape = {static_cast<int64_t>(kGemmWorkspaceBytes)};
    plan.gemmWorkspaceSlot = plan.slots.size();
    plan.slots.push_back(std::move(slot));
    plan.persistentBytes += alignUp(kGemmWorkspaceBytes);
  }
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() || (stepTimeline && func == optimizer))
      continue;
    if (stepTimeline && func == train) {
      if (failed(planTimeline({train, optimizer}, plan, stepLocal)))
        return failure();
      continue;
    }
    if (failed(planTimeline({func}, plan, {})))
      return failure();
  }
  for (auto &[name, slot] : stepLocal)
    if (plan.slots[slot].program.empty())
      return module.emitError("memory plan: step-local @")
             << name << " is read or written by neither the train "
             << "microbatch nor the optimizer step";
  for (const ProgramPlan &p : plan.programs)
    plan.activationBytes = std::max(plan.activationBytes, p.regionBytes);
  for (Slot &slot : plan.slots)
    if (!slot.program.empty())
      slot.offset += plan.persistentBytes;

  // Evaluation runs between training steps in the same arena; it must fit
  // in what training needs already.
  const ProgramPlan *trainPlan = plan.program("train_microbatch");
  const ProgramPlan *eval = plan.program("forward");
  if (trainPlan && eval && eval->regionBytes > trainPlan->regionBytes)
    return module.emitError("memory plan: the eval program (forward) needs ")
           << eval->regionBytes << " activation bytes, more than the "
           << trainPlan->regionBytes
           << " of train_microbatch; evaluation would raise peak memory";
  return plan;
}

namespace {
std::string human(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::string out;
  llvm::raw_string_ostream os(out);
  if (u == 0)
    os << bytes << " B";
  else
    os << llvm::format("%.2f %s", v, units[u]);
  return out;
}
} // namespace

std::string formatBytes(uint64_t bytes) { return human(bytes); }

void printMemoryPlan(const MemoryPlan &plan, llvm::raw_ostream &os,
                     int maxSlots) {
  os << "memory plan: alignment " << kPlanAlignment << " B, "
     << plan.slots.size() << " slots\n";
  os << "  total      " << plan.totalBytes() << " B (" << human(plan.totalBytes())
     << ")\n";
  os << "  persistent " << plan.persistentBytes << " B ("
     << human(plan.persistentBytes) << ")\n";
  // The region, not the sum of activation slots (which share it over time).
  os << "  activation " << plan.activationBytes << " B ("
     << human(plan.activationBytes) << ") region\n";
  std::map<int, uint64_t> byKind;
  for (const Slot &s : plan.slots)
    if (s.program.empty())
      byKind[static_cast<int>(s.kind)] += alignUp(s.bytes);
  for (auto &[kind, bytes] : byKind)
    os << llvm::format("    %-13s", slotKindName(static_cast<SlotKind>(kind)))
       << bytes << " B (" << human(bytes) << ")\n";
  uint64_t stepLocalBytes = 0;
  for (const Slot &s : plan.slots)
    if (!s.lastProgram.empty())
      stepLocalBytes += alignUp(s.bytes);
  if (stepLocalBytes)
    os << "  step-local " << stepLocalBytes << " B (" << human(stepLocalBytes)
       << ") gradients in the activation region, each live from its first "
          "write in train_microbatch to its last read in optimizer_step\n";
  os << "  programs (activation region: peak live / packed):\n";
  for (const ProgramPlan &p : plan.programs)
    os << llvm::format("    %-17s", p.name.c_str()) << p.numSteps
       << " steps, " << p.peakLiveBytes << " B (" << human(p.peakLiveBytes)
       << ") / " << p.regionBytes << " B (" << human(p.regionBytes) << ")\n";
  std::vector<unsigned> order(plan.slots.size());
  for (unsigned i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) {
    return plan.slots[a].bytes > plan.slots[b].bytes;
  });
  size_t shown = maxSlots <= 0 ? order.size()
                               : std::min<size_t>(order.size(), maxSlots);
  os << "  largest slots:\n";
  for (size_t i = 0; i < shown; ++i) {
    const Slot &s = plan.slots[order[i]];
    os << "    " << llvm::format("%14llu", (unsigned long long)s.bytes)
       << " B at " << llvm::format("%14llu", (unsigned long long)s.offset)
       << "  " << slotKindName(s.kind) << "  " << s.name;
    if (!s.lastProgram.empty())
      os << " [" << s.program << " " << s.firstStep << ", " << s.lastProgram
         << " " << s.lastStep << "]";
    else if (!s.program.empty())
      os << " [" << s.firstStep << ", " << s.lastStep << "]";
    os << "\n";
  }
}

void repackActivations(MemoryPlan &plan) {
  std::map<std::string, std::vector<unsigned>> byProgram;
  std::set<std::string> pinned;
  for (unsigned i = 0; i < plan.slots.size(); ++i) {
    const Slot &slot = plan.slots[i];
    if (slot.program.empty() || slot.kind == SlotKind::Stash)
      continue;
    if (!slot.lastProgram.empty() && slot.lastProgram != slot.program) {
      pinned.insert(slot.program);
      pinned.insert(slot.lastProgram);
    }
    byProgram[slot.program].push_back(i);
  }
  uint64_t region = 0;
  for (ProgramPlan &program : plan.programs) {
    auto it = byProgram.find(program.name);
    if (it == byProgram.end()) {
      program.peakLiveBytes = program.regionBytes = 0;
      continue;
    }
    std::vector<unsigned> &slots = it->second;
    if (pinned.count(program.name)) {
      for (unsigned i : slots)
        region = std::max(region, plan.slots[i].offset - plan.persistentBytes +
                                      alignUp(plan.slots[i].bytes));
      continue;
    }
    // As planTimeline places buffers (placeByLifetime), over the slots' steps.
    std::vector<Lifetime> lifetimes;
    std::map<int64_t, int64_t> deltas;
    for (unsigned i : slots) {
      const Slot &slot = plan.slots[i];
      lifetimes.push_back({slot.firstStep, slot.lastStep, alignUp(slot.bytes)});
      deltas[slot.firstStep] += int64_t(alignUp(slot.bytes));
      deltas[slot.lastStep + 1] -= int64_t(alignUp(slot.bytes));
    }
    uint64_t high = 0;
    std::vector<uint64_t> at = placeByLifetime(lifetimes, high);
    for (size_t k = 0; k < slots.size(); ++k)
      plan.slots[slots[k]].offset = plan.persistentBytes + at[k];
    int64_t now = 0, peak = 0;
    for (auto &[step, delta] : deltas)
      peak = std::max(peak, now += delta);
    program.peakLiveBytes = uint64_t(peak);
    program.regionBytes = high;
    region = std::max(region, program.regionBytes);
  }
  plan.activationBytes = region;
}

} // namespace octet::plan
