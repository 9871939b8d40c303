#include "compiler/Emit/EmitBundle.h"

#include "compiler/Emit/KernelModules.h"
#include "compiler/Emit/PipelineSlots.h"
#include "compiler/Transforms/Pipeline/Passes.h"
#include "dialects/graph/GraphDialect.h"
#include "dialects/graph/WeightCache.h"
#include "dialects/kernel/KernelDialect.h"
#include "bundle/Bundle.h"
#include "bundle/HfLayout.h"
#include "bundle/InitValues.h"
#include "bundle/PipelineBundle.h"
#include "compiler/Checkpoint/HfCheckpoint.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Regex.h"

#include <set>

using namespace mlir;

namespace octet::emit {
namespace {

bundle::DType dtypeOf(Type type) {
  if (type.isF32())
    return bundle::F32;
  if (type.isBF16())
    return bundle::BF16;
  if (type.isF16())
    return bundle::F16;
  if (isa<Float8E4M3FNType>(type))
    return bundle::F8E4M3FN;
  if (isa<Float8E5M2Type>(type))
    return bundle::F8E5M2;
  if (type.isInteger(32))
    return bundle::I32;
  if (type.isInteger(64))
    return bundle::I64;
  if (type.isInteger(8) || type.isInteger(1))
    return bundle::U8;
  return bundle::DTYPE_UNSPECIFIED;
}

bundle::SlotKind slotKindOf(plan::SlotKind kind) {
  switch (kind) {
  case plan::SlotKind::Parameter:
    return bundle::PARAMETER;
  case plan::SlotKind::Gradient:
    return bundle::GRADIENT;
  case plan::SlotKind::OptimizerState:
    return bundle::OPTIMIZER_STATE;
  case plan::SlotKind::Fp8State:
  case plan::SlotKind::State:
    return bundle::FP8_STATE;
  case plan::SlotKind::WeightCache:
    return bundle::WEIGHT_CACHE;
  case plan::SlotKind::Activation:
    return bundle::ACTIVATION;
  case plan::SlotKind::IO:
    return bundle::IO;
  case plan::SlotKind::Workspace:
    return bundle::WORKSPACE;
  case plan::SlotKind::Stash:
    return bundle::STASH;
  }
  return bundle::SLOT_UNSPECIFIED;
}

bundle::Init initOf(graph::VariableOp var, uint64_t seed) {
  bundle::Init init;
  llvm::StringRef kind = var.getInit();
  if (kind == "normal") {
    init.set_kind(bundle::Init::NORMAL);
    // The verifier requires init_std with a normal init.
    init.set_std(var.getInitStd()->convertToDouble());
    init.set_seed(bundle::initSeed(seed, var.getSymName()));
  } else if (kind == "ones") {
    init.set_kind(bundle::Init::ONES);
  } else {
    init.set_kind(bundle::Init::ZEROS);
  }
  return init;
}

bundle::StateKind stateKindOf(llvm::StringRef name) {
  if (name.starts_with("adam_m."))
    return bundle::ADAM_M;
  if (name.starts_with("adam_v."))
    return bundle::ADAM_V;
  if (name.starts_with("fp8.") && name.ends_with(".amax_history"))
    return bundle::FP8_AMAX_HISTORY;
  if (name.starts_with("fp8.") && name.ends_with(".scale"))
    return bundle::FP8_SCALE;
  // Delayed scaling's inverses (fp8.*) and current scaling's weight
  // inverses (fp8w.*): what the FP8 GEMMs' A and B scale pointers read.
  if ((name.starts_with("fp8.") || name.starts_with("fp8w.")) &&
      name.ends_with(".scale_inv"))
    return bundle::FP8_SCALE_INV;
  if (name == "step")
    return bundle::STEP_COUNTER;
  return bundle::STATE_UNSPECIFIED;
}

// Bytes of the tensor a value holds. A copy or fill writes these, never its
// slot's size: a Stash slot holds every in-flight entry, and a view sits
// inside a larger slot, so the slot's size would write past the value.
uint64_t tensorBytes(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  return uint64_t(type.getNumElements()) *
         std::max(1u, type.getElementTypeBitWidth() / 8);
}

// The parameter a state tensor belongs to: its name without the state prefix
// (and, for FP8 scale state, the operand and field suffixes).
std::string ownerOf(llvm::StringRef name) {
  for (llvm::StringRef prefix : {"adam_m.", "adam_v.", "fp8w.", "bf16w.", "fp8."})
    if (name.consume_front(prefix))
      break;
  for (llvm::StringRef suffix :
       {".w.amax_history", ".x.amax_history", ".dy.amax_history",
        ".w.scale_inv", ".x.scale_inv", ".dy.scale_inv", ".w.scale", ".x.scale",
        ".dy.scale", ".amax", ".t"})
    if (name.consume_back(suffix))
      break;
  return name.str();
}

bundle::GemmRole roleOf(std::optional<llvm::StringRef> role) {
  if (!role)
    return bundle::GEMM_ROLE_UNSPECIFIED;
  if (*role == "fprop")
    return bundle::FPROP;
  if (*role == "dgrad")
    return bundle::DGRAD;
  if (*role == "wgrad")
    return bundle::WGRAD;
  return bundle::GEMM_ROLE_UNSPECIFIED;
}

bundle::GemmEpilogue epilogueOf(llvm::StringRef epilogue, bool bias) {
  if (epilogue == "bias")
    return bundle::EPILOGUE_BIAS;
  if (epilogue == "gelu")
    return bias ? bundle::EPILOGUE_BIAS_GELU : bundle::EPILOGUE_GELU;
  if (epilogue == "gelu_aux")
    return bias ? bundle::EPILOGUE_BIAS_GELU_AUX : bundle::EPILOGUE_GELU_AUX;
  if (epilogue == "bias_grad")
    return bundle::EPILOGUE_BIAS_GRAD;
  return bundle::EPILOGUE_NONE;
}

bundle::ProgramKind programKindOf(llvm::StringRef name) {
  if (name == "train_microbatch")
    return bundle::TRAIN_MICROBATCH;
  if (name == "optimizer_step")
    return bundle::OPTIMIZER_STEP;
  if (name == "forward")
    return bundle::EVAL;
  return bundle::INIT;
}

bool isChunkProgram(bundle::ProgramKind kind) {
  return kind == bundle::CHUNK_FORWARD || kind == bundle::CHUNK_BACKWARD ||
         kind == bundle::CHUNK_INPUT_GRADIENT ||
         kind == bundle::CHUNK_WEIGHT_GRADIENT ||
         kind == bundle::CHUNK_EVAL_FORWARD;
}

void addShape(google::protobuf::RepeatedField<int64_t> *out,
              RankedTensorType type) {
  for (int64_t d : type.getShape())
    out->Add(d);
}

class Emitter {
public:
  Emitter(ModuleOp module, const plan::MemoryPlan &plan, bundle::Bundle &b,
          const KernelModules &modules, const CodegenOutcome &codegen)
      : module(module), plan(plan), b(b), modules(modules), codegen(codegen) {}

  LogicalResult emitPrograms(bundle::RankProgram &rank) {
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() &&
          failed(emitProgram(func, programKindOf(func.getSymName()), 0, rank)))
        return failure();
    return success();
  }

  // One function as a program of `rank`. A pipeline's chunk programs list
  // only the microbatch's inputs (named arguments) as inputs: their other
  // arguments are stash entries other programs and transfers fill.
  LogicalResult emitProgram(func::FuncOp func, bundle::ProgramKind kind,
                            uint32_t chunk, bundle::RankProgram &rank) {
    const plan::ProgramPlan *pp = plan.program(func.getSymName());
    if (!pp)
      return func.emitError("bundle: no memory plan for @")
             << func.getSymName();
    current = pp;
    worldRank = int(rank.rank());
    program = rank.add_programs();
    program->set_kind(kind);
    program->set_name(func.getSymName().str());
    program->set_capturable(true);
    bool chunkProgram = isChunkProgram(kind);
    if (chunkProgram)
      program->set_chunk(chunk);
    Block &body = func.getBody().front();
    for (BlockArgument arg : body.getArguments()) {
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    "graph.name");
      if (chunkProgram && !name)
        continue;
      bundle::NamedSlot *in = program->add_inputs();
      in->set_name(name ? name.str()
                        : "arg" + std::to_string(arg.getArgNumber()));
      bundle::SlotRef slot = ref(arg);
      in->set_slot(slot.slot());
      in->set_stash_stride(slot.stash_stride());
    }
    lastStepOf.clear();
    commResults.clear();
    for (Operation &op : body) {
      int first = program->steps_size();
      if (failed(emitOp(func, op)))
        return failure();
      if (program->steps_size() > first) {
        lastStepOf[&op] = uint32_t(program->steps_size() - 1);
        waitForCommStream(op, *program->mutable_steps(first));
      }
    }
    return success();
  }

  // A crossing value of a chunk function as a transfer names it: its Stash
  // slot, entry-strided.
  bundle::SlotRef stashRef(func::FuncOp func, Value v) {
    current = plan.program(func.getSymName());
    return ref(v);
  }

  std::set<std::pair<std::string, int>> precisionSeen;

  // Of the function being emitted: each op's last step, and the last step
  // of each comm-stream collective.
  llvm::DenseMap<Operation *, uint32_t> lastStepOf, commResults;

private:
  // The communication stream's index: its collectives overlap compute.
  static constexpr uint32_t kCommStream = 1;

  // The op of the function's block whose kernel writes `v`, looking
  // through views.
  static Operation *producerOf(Value v) {
    while (Operation *def = v.getDefiningOp()) {
      if (!isa<graph::ReshapeOp, graph::SliceOp, graph::SaveOp,
               kernel::RankPartOp>(def))
        return def;
      v = def->getOperand(0);
    }
    return nullptr;
  }

  // A compute step that reads what a comm-stream collective makes waits for
  // it; the stream's own order covers the steps after this one.
  void waitForCommStream(Operation &op, bundle::Step &first) {
    if (first.stream() == kCommStream)
      return;
    for (Value v : op.getOperands()) {
      Operation *def = producerOf(v);
      auto it = def ? commResults.find(def) : commResults.end();
      if (it != commResults.end() &&
          !llvm::is_contained(first.waits(), it->second))
        first.add_waits(it->second);
    }
  }

  bundle::SlotRef ref(Value v) {
    bundle::SlotRef r;
    auto it = current->valueSlots.find(v);
    if (it != current->valueSlots.end()) {
      r.set_slot(it->second.first);
      r.set_byte_offset(it->second.second);
    }
    // The data group is the bundle's group 0 (the only one data
    // parallelism makes).
    if (auto stride = current->rankStrides.find(v);
        stride != current->rankStrides.end())
      r.set_rank_stride(stride->second);
    if (r.slot() < plan.slots.size() && plan.slots[r.slot()].stashStride)
      r.set_stash_stride(plan.slots[r.slot()].stashStride);
    return r;
  }

  // The bundle group a collective of `name` ("data", "pipeline") runs over
  // on the rank being emitted: the one of that name holding it.
  uint32_t groupIndex(llvm::StringRef name) const {
    for (int g = 0; g < b.groups_size(); ++g)
      if (b.groups(g).name() == name &&
          llvm::is_contained(b.groups(g).ranks(), uint32_t(worldRank)))
        return uint32_t(g);
    return 0;
  }

  bundle::Step *step(llvm::StringRef label) {
    bundle::Step *s = program->add_steps();
    s->set_label(label.str());
    return s;
  }

  // A kernel the codegen has not produced code for: listed once per op, so
  // the runtime's refusal names each.
  uint32_t missingKernel(func::FuncOp func, Operation &op) {
    std::string symbol = func.getSymName().str() + ".";
    if (auto name = op.getAttrOfType<StringAttr>("name"))
      symbol += name.str();
    else
      symbol += op.getName().stripDialect().str();
    symbol += "." + std::to_string(b.kernels_size());
    bundle::Kernel *k = b.add_kernels();
    k->set_symbol(symbol);
    std::string summary = op.getName().getStringRef().str();
    if (auto it = codegen.reasons.find(&op);
        it != codegen.reasons.end() && !it->second.empty())
      summary += ": " + it->second;
    k->set_summary(summary);
    k->set_missing_code(true);
    return b.kernels_size() - 1;
  }

  // The bundle kernel of a gpu.func, added on first use.
  FailureOr<uint32_t> kernelFor(Operation &op, SymbolRefAttr ref,
                                llvm::StringRef summary) {
    std::string moduleName = ref.getRootReference().str();
    std::string symbol = ref.getLeafReference().str();
    std::string key = moduleName + "::" + symbol;
    if (auto it = kernels.find(key); it != kernels.end())
      return it->second;
    auto m = modules.index.find(moduleName);
    if (m == modules.index.end())
      return op.emitError("bundle: kernel ")
             << ref << " has no gpu.binary (codegen left no PTX for it)";
    bundle::Kernel *k = b.add_kernels();
    k->set_symbol(symbol);
    k->set_module(m->second);
    k->set_summary(summary.str());
    uint32_t index = b.kernels_size() - 1;
    kernels[key] = index;
    return index;
  }

  bundle::SlotRef slotRef(unsigned slot) {
    bundle::SlotRef r;
    r.set_slot(slot);
    return r;
  }

  // What a generated kernel computes, for reports: the region's ops in
  // order, each once ("row: add + rms_norm + quantize").
  static std::string summaryOf(Operation &op) {
    auto fused = dyn_cast<kernel::FusedOp>(op);
    if (!fused)
      return op.getName().getStringRef().str();
    std::string out = fused.getKind().str() + ":";
    llvm::StringSet<> seen;
    for (Operation &inner : fused.getBodyBlock()) {
      llvm::StringRef name = inner.getName().stripDialect();
      if (isa<kernel::YieldOp, graph::ReshapeOp>(inner) ||
          !seen.insert(name).second)
        continue;
      out += (seen.size() == 1 ? " " : " + ") + name.str();
    }
    return out;
  }

  // One entry of an op's `tensor_maps` (octet-attention-to-gpu,
  // AttentionKernels.h): a 3-D view [B·S][heads][Dh] of a [B, S, heads, Dh]
  // operand, innermost first, boxes of box_columns × 1 × box_rows.
  FailureOr<bundle::TensorMap> tensorMapOf(Operation &op, DictionaryAttr entry) {
    auto field = [&](llvm::StringRef name) -> std::optional<int64_t> {
      auto v = entry ? entry.getAs<IntegerAttr>(name) : IntegerAttr();
      return v ? std::optional<int64_t>(v.getInt()) : std::nullopt;
    };
    std::optional<int64_t> operand = field("operand"), rows = field("box_rows"),
                           columns = field("box_columns"),
                           swizzle = field("swizzle_bytes");
    if (!operand || !rows || !columns || !swizzle || *operand < 0 ||
        *operand >= int64_t(op.getNumOperands()))
      return op.emitError("bundle: a `tensor_maps` entry needs operand (one "
                          "of the op's), box_rows, box_columns and "
                          "swizzle_bytes; got ")
             << entry;
    Value v = op.getOperand(*operand);
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type || type.getRank() != 4 || !type.hasStaticShape())
      return op.emitError("bundle: a tensor map views operand ")
             << *operand << " as [B·S][heads][Dh], which needs a static "
             << "[B, S, heads, Dh] tensor; got " << v.getType();
    bundle::TensorMap m;
    *m.mutable_base() = ref(v);
    m.set_dtype(dtypeOf(type.getElementType()));
    uint64_t element = std::max(1u, type.getElementTypeBitWidth() / 8);
    ArrayRef<int64_t> shape = type.getShape();
    for (int64_t d : {shape[3], shape[2], shape[0] * shape[1]})
      m.add_dims(uint64_t(d));
    m.add_strides(uint64_t(shape[3]) * element);
    m.add_strides(uint64_t(shape[2] * shape[3]) * element);
    for (int64_t b : {*columns, int64_t(1), *rows}) {
      m.add_box(uint32_t(b));
      m.add_element_strides(1);
    }
    switch (*swizzle) {
    case 0:
      m.set_swizzle(bundle::TENSOR_MAP_SWIZZLE_NONE);
      break;
    case 32:
      m.set_swizzle(bundle::TENSOR_MAP_SWIZZLE_32B);
      break;
    case 64:
      m.set_swizzle(bundle::TENSOR_MAP_SWIZZLE_64B);
      break;
    case 128:
      m.set_swizzle(bundle::TENSOR_MAP_SWIZZLE_128B);
      break;
    default:
      return op.emitError("bundle: a tensor map swizzle of ")
             << *swizzle << " bytes; TMA swizzles 0, 32, 64 or 128";
    }
    // Each K and V tile is read by several query tiles' CTAs at about the
    // same time: wide L2 fetches.
    m.set_l2_promotion(bundle::TENSOR_MAP_L2_PROMOTION_256B);
    m.set_oob_fill(bundle::TENSOR_MAP_OOB_FILL_ZERO);
    return m;
  }

  // An op codegen lowered: zero the results the ABI accumulates into, then
  // each launch with the ABI's arguments (operands, results, workspace).
  // The op's verifier (kernel::LaunchedOpInterface) has checked the launch
  // contract: valid launches, zeroed results that exist.
  LogicalResult emitLaunches(kernel::LaunchedOpInterface launched,
                             llvm::StringRef label) {
    Operation &op = *launched.getOperation();
    // Tensor maps come first among the parameters of the launch that takes
    // them (the Hopper attention kernels); the runtime encodes them at load.
    // An op of several launches names that launch in each entry (`launch`).
    auto launches = launched.getLaunches();
    int64_t count = std::distance(launches.begin(), launches.end());
    SmallVector<SmallVector<bundle::TensorMap>> maps(count);
    if (auto list = op.getAttrOfType<ArrayAttr>("tensor_maps")) {
      for (Attribute a : list) {
        auto entry = dyn_cast<DictionaryAttr>(a);
        auto launch = entry ? entry.getAs<IntegerAttr>("launch") : IntegerAttr();
        if (!launch && count != 1)
          return op.emitError("bundle: a `tensor_maps` entry of an op of ")
                 << count << " launches names the launch that takes it "
                 << "(`launch`, 0 to " << count - 1 << "); got " << a;
        int64_t index = launch ? launch.getInt() : 0;
        if (index < 0 || index >= count)
          return op.emitError("bundle: a `tensor_maps` entry names launch ")
                 << index << " of an op of " << count << " launches";
        FailureOr<bundle::TensorMap> map = tensorMapOf(op, entry);
        if (failed(map))
          return failure();
        maps[index].push_back(std::move(*map));
      }
    }
    for (int64_t i : launched.getZeroedResults()) {
      bundle::Memset *m =
          step((label + " zero #" + llvm::Twine(i)).str())->mutable_memset();
      *m->mutable_dst() = ref(op.getResult(i));
      m->set_bytes(tensorBytes(op.getResult(i)));
    }
    std::optional<unsigned> workspace;
    if (launched.getWorkspaceBytesOrZero() > 0) {
      auto it = current->workspaceSlots.find(&op);
      if (it == current->workspaceSlots.end())
        return op.emitError("bundle: the memory plan has no workspace for "
                            "this kernel (plan after codegen)");
      workspace = it->second;
    }
    std::string summary = summaryOf(op);
    for (auto [index, l] : llvm::enumerate(launches)) {
      FailureOr<uint32_t> kernel = kernelFor(op, l.getKernel(), summary);
      if (failed(kernel))
        return failure();
      bundle::KernelLaunch *launch =
          step((label + " " + l.getKernel().getLeafReference().getValue())
                   .str())
              ->mutable_launch();
      launch->set_kernel(*kernel);
      // One-dimensional grids and blocks (x).
      for (auto [dim, size] : {std::pair(launch->mutable_grid(), l.getGrid()),
                               std::pair(launch->mutable_block(), l.getBlock())}) {
        dim->set_x(size);
        dim->set_y(1);
        dim->set_z(1);
      }
      // Dynamic shared memory raises the kernel's limit past 48 KiB.
      if (l.getSharedBytes() > 0) {
        launch->set_dynamic_shared_bytes(l.getSharedBytes());
        bundle::Kernel *k = b.mutable_kernels(*kernel);
        k->set_max_dynamic_shared_bytes(std::max<uint32_t>(
            k->max_dynamic_shared_bytes(), l.getSharedBytes()));
      }
      if (l.getCluster() > 1)
        launch->set_cluster(l.getCluster());
      if (l.getProgrammatic())
        launch->set_programmatic(true);
      for (const bundle::TensorMap &m : maps[index])
        *launch->add_args()->mutable_tensor_map() = m;
      bundle::SlotTable *table =
          launched.getArgTable() ? launch->add_args()->mutable_table()
                                 : nullptr;
      for (Value v : llvm::concat<Value>(op.getOperands(), op.getResults()))
        *(table ? table->add_slots() : launch->add_args()->mutable_slot()) =
            ref(v);
      if (workspace)
        *launch->add_args()->mutable_slot() = slotRef(*workspace);
    }
    return success();
  }

  LogicalResult emitOp(func::FuncOp func, Operation &op) {
    // A concatenation's pieces are written in its slot (the memory plan).
    if (isa<graph::LoadOp, graph::ReshapeOp, graph::SliceOp, graph::SaveOp,
            graph::ConcatOp, kernel::RankPartOp>(op))
      return success();
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      bool chunkProgram = isChunkProgram(program->kind());
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        auto name = func.getResultAttrOfType<StringAttr>(i, "graph.name");
        // A chunk's edge and stash results are stash entries, not outputs
        // the host reads.
        if (chunkProgram && !name)
          continue;
        bundle::NamedSlot *out = program->add_outputs();
        out->set_name(name ? name.str() : "result" + std::to_string(i));
        out->set_slot(ref(v).slot());
      }
      return success();
    }
    if (plan::isStoredZeroFill(&op))
      return success();
    if (auto store = dyn_cast<graph::StoreOp>(op)) {
      auto var = plan.variableSlots.find(store.getVariable());
      if (var == plan.variableSlots.end())
        return store.emitError("bundle: no slot for @")
               << store.getVariable();
      if (Operation *def = store.getValue().getDefiningOp();
          def && plan::isStoredZeroFill(def)) {
        bundle::Memset *m =
            step("clear " + store.getVariable().str())->mutable_memset();
        m->mutable_dst()->set_slot(var->second);
        m->set_bytes(plan.slots[var->second].bytes);
        return success();
      }
      bundle::SlotRef src = ref(store.getValue());
      // In-place results already live in the variable.
      if (src.slot() == var->second && src.byte_offset() == 0)
        return success();
      bundle::Copy *c =
          step("store " + store.getVariable().str())->mutable_copy();
      *c->mutable_src() = src;
      c->mutable_dst()->set_slot(var->second);
      c->set_bytes(plan.slots[var->second].bytes);
      return success();
    }
    if (auto gemm = dyn_cast<kernel::GemmOp>(op))
      return emitGemm(gemm);
    if (auto coll = dyn_cast<kernel::CollectiveOp>(op)) {
      // On the communication stream, after the last kernel that writes an
      // input. Nothing the compute stream runs beside it may reuse its
      // memory: it reads variables (persistent, or step-local slots
      // reserved past the program's end) or activations kept to the
      // program's end (the memory plan keeps a communication-stream
      // collective's inputs so), and writes in place or into a variable's
      // slot; whatever reads its results waits for it.
      std::optional<uint32_t> after;
      if (coll.getCommStream()) {
        for (Value in : coll.getInputs()) {
          Operation *def = producerOf(in);
          if (auto it = def ? lastStepOf.find(def) : lastStepOf.end();
              it != lastStepOf.end())
            after = std::max(after.value_or(0), it->second);
        }
        auto persistent = [](const plan::Slot &slot) {
          return slot.program.empty() ||
                 (!slot.lastProgram.empty() &&
                  slot.lastProgram != slot.program);
        };
        auto keptToEnd = [&](const plan::Slot &slot) {
          return persistent(slot) ||
                 (slot.program == func.getSymName() &&
                  slot.lastStep + 1 >= current->numSteps);
        };
        for (auto [in, out] : llvm::zip(coll.getInputs(), coll.getResults())) {
          bundle::SlotRef i = ref(in), o = ref(out);
          const plan::Slot &from = plan.slots[i.slot()];
          const plan::Slot &to = plan.slots[o.slot()];
          bool inPlace =
              i.slot() == o.slot() && i.byte_offset() == o.byte_offset();
          if (!keptToEnd(from) || !(inPlace || persistent(to)))
            return coll.emitError("bundle: a communication-stream collective "
                                  "must read memory kept to the program's "
                                  "end and write in place or into a "
                                  "variable's slot; this one reads slot '")
                   << from.name << "' and writes slot '" << to.name << "'";
        }
      }
      size_t n = coll.getInputs().size(), k = 0;
      for (auto [in, out] : llvm::zip(coll.getInputs(), coll.getResults())) {
        bundle::Step *s = step("collective " + coll.getKind().str());
        if (coll.getCommStream()) {
          s->set_stream(kCommStream);
          if (after && k == 0)
            s->add_waits(*after);
        }
        bundle::Collective *c = s->mutable_collective();
        c->set_last_microbatch(coll.getLastMicrobatch());
        c->set_grouped_with_next(++k < n);
        llvm::StringRef kind = coll.getKind();
        c->set_op(kind == "all_reduce"       ? bundle::ALL_REDUCE
                  : kind == "reduce_scatter" ? bundle::REDUCE_SCATTER
                                             : bundle::ALL_GATHER);
        c->set_group(groupIndex(coll.getGroup()));
        *c->mutable_send() = ref(in);
        *c->mutable_recv() = ref(out);
        auto type = cast<RankedTensorType>(in.getType());
        c->set_count(kind == "reduce_scatter"
                         ? type.getNumElements() / coll.getGroupSize()
                         : type.getNumElements());
        c->set_dtype(dtypeOf(type.getElementType()));
        c->set_reduce(coll.getReduction().str());
      }
      if (coll.getCommStream())
        commResults[&op] = uint32_t(program->steps_size() - 1);
      return success();
    }
    if (auto copy = dyn_cast<kernel::CopyOp>(op); copy && !copy.getTranspose()) {
      bundle::Copy *c = step("copy")->mutable_copy();
      *c->mutable_src() = ref(copy.getInput());
      *c->mutable_dst() = ref(copy.getResult());
      c->set_bytes(tensorBytes(copy.getResult()));
      return success();
    }
    if (auto fill = dyn_cast<graph::FillOp>(op);
        fill && fill.getValue().isZero()) {
      bundle::Memset *m = step("fill 0")->mutable_memset();
      *m->mutable_dst() = ref(fill.getResult());
      m->set_bytes(tensorBytes(fill.getResult()));
      return success();
    }
    // Fused row kernels, attention, transposing copies and whatever else
    // runs on the GPU: launches as codegen recorded them, or, without code,
    // one launch whose arguments are the operands' and then the results'
    // slots, in order.
    std::string label = op.getName().getStringRef().str();
    if (auto name = op.getAttrOfType<StringAttr>("name"))
      label += " " + name.str();
    if (auto launched = dyn_cast<kernel::LaunchedOpInterface>(op);
        launched && launched.hasLaunches())
      return emitLaunches(launched, label);
    bundle::KernelLaunch *launch = step(label)->mutable_launch();
    launch->set_kernel(missingKernel(func, op));
    for (Value v : op.getOperands())
      *launch->add_args()->mutable_slot() = ref(v);
    for (Value v : op.getResults())
      *launch->add_args()->mutable_slot() = ref(v);
    return success();
  }

  LogicalResult emitGemm(kernel::GemmOp gemm) {
    bundle::GemmDescriptor *d = b.add_gemms();
    auto a = cast<RankedTensorType>(gemm.getA().getType());
    auto bt = cast<RankedTensorType>(gemm.getB().getType());
    auto res = cast<RankedTensorType>(gemm.getResult().getType());
    int64_t n = res.getShape().back();
    int64_t m = res.getNumElements() / std::max<int64_t>(n, 1);
    int64_t k = gemm.getTransposeA() ? a.getShape().front() : a.getShape().back();
    std::string param = gemm.getParam() ? gemm.getParam()->str() : "";
    std::string role = gemm.getRole() ? gemm.getRole()->str() : "";
    // The role has a column of its own in reports.
    d->set_name(program->name() + ":" + (param.empty() ? "gemm" : param));
    d->set_role(roleOf(gemm.getRole()));
    d->set_param(param);
    d->set_m(m);
    d->set_n(n);
    d->set_k(k);
    d->set_a_type(dtypeOf(a.getElementType()));
    d->set_b_type(dtypeOf(bt.getElementType()));
    d->set_d_type(dtypeOf(res.getElementType()));
    d->set_transpose_a(gemm.getTransposeA());
    d->set_transpose_b(gemm.getTransposeB());
    d->set_epilogue(
        epilogueOf(gemm.getEpilogueKind(), static_cast<bool>(gemm.getBias())));
    if (gemm.getBias())
      d->set_bias_type(dtypeOf(
          cast<RankedTensorType>(gemm.getBias().getType()).getElementType()));
    if (!gemm.getAux().empty())
      d->set_aux_type(dtypeOf(cast<RankedTensorType>(gemm.getAux()[0].getType())
                                  .getElementType()));
    bool fp8 = d->a_type() == bundle::F8E4M3FN || d->a_type() == bundle::F8E5M2;
    bool blocks = static_cast<bool>(gemm.getABlock());
    // Block-scaled products promote to f32 at every K block anyway.
    d->set_fast_accum(fp8 && !blocks && d->role() == bundle::FPROP);
    d->set_accumulate(static_cast<bool>(gemm.getC()));
    // cuBLASLt multiplies by its scale pointers: tensorwise, each points at
    // its operand's dequantization factor (the scales_inv operands, made
    // where the scales are); block-scaled, at the factors in its layout.
    bool scaled = gemm.getAScale() || gemm.getAScaleInv();
    d->set_has_a_scale(scaled);
    d->set_has_b_scale(scaled);
    if (blocks) {
      auto mode = [](std::optional<ArrayRef<int64_t>> block) {
        return (*block)[0] == 1 ? bundle::SCALE_VEC128
                                : bundle::SCALE_BLK128X128;
      };
      d->set_a_scale_mode(mode(gemm.getABlock()));
      d->set_b_scale_mode(mode(gemm.getBBlock()));
    }
    d->set_batch(1);
    if (plan.gemmWorkspaceSlot)
      d->set_workspace_bytes(plan.slots[*plan.gemmWorkspaceSlot].bytes);

    if (gemm.getC()) {
      // D += product needs D to start as C.
      bundle::SlotRef c = ref(gemm.getC()), out = ref(gemm.getResult());
      if (c.slot() != out.slot() || c.byte_offset() != out.byte_offset()) {
        bundle::Copy *copy = step("accumulator " + param)->mutable_copy();
        *copy->mutable_src() = c;
        *copy->mutable_dst() = out;
        copy->set_bytes(tensorBytes(gemm.getResult()));
      }
    }
    unsigned dequantSlot = 0;
    // The quantize kernels wrote the factors already (fp8.block_factors).
    bool factorsMade = blocks && plan::takesBlockFactors(gemm);
    if (blocks && !factorsMade) {
      auto slot = current->gemmScaleSlots.find(gemm);
      if (slot == current->gemmScaleSlots.end())
        return gemm.emitError("bundle: the memory plan has no dequantization "
                              "factor for this GEMM (plan after codegen)");
      dequantSlot = slot->second;
      // Both operands' factors from their quantize scales, one thread a
      // scale, in one launch.
      std::string symbol = gemmBlockFactorKernel(gemm);
      auto kernelRef = SymbolRefAttr::get(
          gemm.getContext(), kGemmBlockFactorModule,
          {FlatSymbolRefAttr::get(gemm.getContext(), symbol)});
      FailureOr<uint32_t> kernel = kernelFor(
          *gemm, kernelRef, "1 / scale per block, in cuBLASLt's layout: a "
                      "block-scaled FP8 GEMM's dequantization factors");
      if (failed(kernel))
        return failure();
      int64_t count = gemmBlockFactorThreads(gemm);
      bundle::KernelLaunch *launch =
          step(param + " " + role + " block factors")->mutable_launch();
      launch->set_kernel(*kernel);
      launch->mutable_grid()->set_x(
          (count + kGemmBlockFactorThreads - 1) / kGemmBlockFactorThreads);
      launch->mutable_grid()->set_y(1);
      launch->mutable_grid()->set_z(1);
      launch->mutable_block()->set_x(kGemmBlockFactorThreads);
      launch->mutable_block()->set_y(1);
      launch->mutable_block()->set_z(1);
      *launch->add_args()->mutable_slot() = ref(gemm.getAScale());
      *launch->add_args()->mutable_slot() = ref(gemm.getBScale());
      *launch->add_args()->mutable_slot() = slotRef(dequantSlot);
    }
    bundle::GemmCall *call = step(param + " " + role)->mutable_gemm();
    call->set_gemm(b.gemms_size() - 1);
    *call->mutable_a() = ref(gemm.getA());
    *call->mutable_b() = ref(gemm.getB());
    *call->mutable_d() = ref(gemm.getResult());
    if (gemm.getBias())
      *call->mutable_bias() = ref(gemm.getBias());
    if (!gemm.getAux().empty())
      *call->mutable_aux() = ref(gemm.getAux()[0]);
    if (factorsMade) {
      *call->mutable_a_scale() = ref(gemm.getAScale());
      *call->mutable_b_scale() = ref(gemm.getBScale());
    } else if (blocks) {
      *call->mutable_a_scale() = slotRef(dequantSlot);
      bundle::SlotRef factors = slotRef(dequantSlot);
      factors.set_byte_offset(plan::dequantFactorOffsetB(gemm));
      *call->mutable_b_scale() = factors;
    } else if (gemm.getAScaleInv()) {
      *call->mutable_a_scale() = ref(gemm.getAScaleInv());
      *call->mutable_b_scale() = ref(gemm.getBScaleInv());
    }
    if (plan.gemmWorkspaceSlot)
      *call->mutable_workspace() = slotRef(*plan.gemmWorkspaceSlot);
    call->set_first_microbatch_overwrites(
        gemm->hasAttr("first_microbatch_overwrites"));

    bool microbatch = program->kind() == bundle::TRAIN_MICROBATCH ||
                      isChunkProgram(program->kind());
    if (!param.empty() && microbatch &&
        precisionSeen.insert({param, d->role()}).second) {
      bundle::PrecisionEntry *e = b.add_precision();
      e->set_param(param);
      e->set_role(d->role());
      e->set_a_type(d->a_type());
      e->set_b_type(d->b_type());
      e->set_d_type(d->d_type());
      e->set_recipe(fp8 ? recipe : "bf16");
      e->set_reason(fp8 ? "default" : "policy: kept wide");
    }
    return success();
  }

public:
  std::string recipe = "bf16";

private:
  ModuleOp module;
  const plan::MemoryPlan &plan;
  bundle::Bundle &b;
  const KernelModules &modules;
  const CodegenOutcome &codegen;
  // "module::symbol" -> index in b.kernels.
  llvm::StringMap<uint32_t> kernels;
  const plan::ProgramPlan *current = nullptr;
  bundle::Program *program = nullptr;
  int worldRank = 0;
};

// The pipeline's ranks (pipeline × data): the schedule laid out by
// bundle::addPipelineRanks with each transfer's Stash entries, then each
// rank's arena (planPipelineArenas), its chunk programs, in local chunk
// order, and its optimizer step. The data replicas of a pipeline rank run
// the same programs; each is emitted for its own rank, whose "data" and
// "pipeline" groups its collectives name.
LogicalResult emitPipelineRanks(ModuleOp module, bundle::Bundle &b,
                                Emitter &emitter,
                                const PipelineSchedule &schedule, int data,
                                ArrayRef<StageFunctions> stages,
                                ArrayRef<plan::PipelineRankPlan> arenas,
                                const plan::MemoryPlan &plan) {
  // What each stage's transfers move, as slot references.
  struct Edges {
    std::vector<bundle::SlotRef> sendActivation, receiveActivation,
        sendGradient, receiveGradient;
  };
  std::vector<Edges> edges;
  for (const StageFunctions &f : stages) {
    Edges e;
    for (auto [values, func, out] :
         {std::tuple(&f.sendActivation, f.forward, &e.sendActivation),
          std::tuple(&f.receiveActivation, f.forward, &e.receiveActivation),
          std::tuple(&f.sendGradient, f.backward, &e.sendGradient),
          std::tuple(&f.receiveGradient, f.backward, &e.receiveGradient)})
      for (Value v : *values)
        out->push_back(emitter.stashRef(func, v));
    edges.push_back(std::move(e));
  }
  auto tensorsOf = [&](const bundle::TransferSite &site) {
    const bundle::PipeTransfer &t = *site.transfer;
    int64_t stage = int64_t(site.chunk) * schedule.ranks + site.rank;
    const Edges &e = edges[size_t(stage)];
    if (t.gradient())
      return t.send() ? e.sendGradient : e.receiveGradient;
    return t.send() ? e.sendActivation : e.receiveActivation;
  };
  if (Status st = bundle::addPipelineRanks(b, schedule, data, tensorsOf); !st)
    return module.emitError("bundle: ") << st.message();
  b.mutable_pipeline()->set_loss_sum_slot(
      plan.variableSlots.lookup(kPipelineLossSum));
  for (bundle::RankProgram &rank : *b.mutable_ranks()) {
    int p = int(rank.stage());
    const plan::PipelineRankPlan &arena = arenas[size_t(p)];
    bundle::PipelineRank *pipe = rank.mutable_pipeline();
    pipe->set_arena_bytes(arena.totalBytes());
    for (const auto &[slot, offset] : arena.slotOffsets) {
      bundle::RankSlot *held = pipe->add_slots();
      held->set_slot(slot);
      held->set_offset(offset);
    }
    for (int chunk = 0; chunk < schedule.virtualStages; ++chunk) {
      const StageFunctions &f = stages[size_t(chunk * schedule.ranks + p)];
      if (failed(emitter.emitProgram(f.forward, bundle::CHUNK_FORWARD,
                                     uint32_t(chunk), rank)) ||
          failed(emitter.emitProgram(f.backward,
                                     f.weightGradient
                                         ? bundle::CHUNK_INPUT_GRADIENT
                                         : bundle::CHUNK_BACKWARD,
                                     uint32_t(chunk), rank)) ||
          (f.weightGradient &&
           failed(emitter.emitProgram(f.weightGradient,
                                      bundle::CHUNK_WEIGHT_GRADIENT,
                                      uint32_t(chunk), rank))) ||
          (f.eval && failed(emitter.emitProgram(f.eval,
                                                bundle::CHUNK_EVAL_FORWARD,
                                                uint32_t(chunk), rank))))
        return failure();
    }
    auto optimizer = module.lookupSymbol<func::FuncOp>(rankOptimizerName(p));
    if (!optimizer)
      return module.emitError("bundle: pipeline rank ")
             << p << " has no @" << rankOptimizerName(p)
             << " (octet-split-optimizer makes one per rank)";
    if (failed(emitter.emitProgram(optimizer, bundle::OPTIMIZER_STEP, 0, rank)))
      return failure();
    // The rank's part of what runs once first (FP8 weight casts).
    for (const std::string &name : rankInitFunctions(module, p)) {
      auto init = module.lookupSymbol<func::FuncOp>(name);
      if (!init || failed(emitter.emitProgram(init, bundle::INIT, 0, rank)))
        return module.emitError("bundle: pipeline rank ")
               << p << " cannot emit its init function @" << name;
    }
  }
  return success();
}

} // namespace

FailureOr<bundle::Bundle> compileBundle(ModuleOp module,
                                        const BuildSource &source) {
  auto phase = [&](const std::string &what) {
    if (source.phase)
      source.phase(what);
  };
  const std::optional<PipelineSchedule> &pipeline = source.pipeline;
  int64_t stages = 0;
  if (pipeline) {
    stages = int64_t(pipeline->ranks) * pipeline->virtualStages;
    // Evaluation of a pipeline is a forward-only schedule over the stages,
    // which the chunk programs do not make yet: no rank gets @forward.
    if (auto eval = module.lookupSymbol<func::FuncOp>("forward"))
      eval.erase();
    FailureOr<std::vector<StageFunctions>> found =
        findStageFunctions(module, stages);
    if (failed(found) ||
        failed(addPipelineLossSum(module, found->back(), pipeline->ranks - 1)))
      return failure();
  }
  addGemmBlockFactorKernels(module);
  phase("codegen");
  FailureOr<CodegenOutcome> codegen = runCodegen(module, source.codegen);
  if (failed(codegen))
    return failure();
  auto binaries = module.getOps<gpu::BinaryOp>();
  phase("ptxas (" +
        std::to_string(std::distance(binaries.begin(), binaries.end())) +
        " modules)");
  FailureOr<KernelModules> modules = collectModules(module, source.ptxas);
  if (failed(modules))
    return failure();
  phase("memory plan and bundle");
  // After codegen, so kernel workspaces and GEMM factors get slots.
  FailureOr<plan::MemoryPlan> memory =
      plan::planMemory(module, source.schedule.grad_accum_steps());
  if (failed(memory))
    return failure();
  std::vector<StageFunctions> stageFunctions;
  std::vector<plan::PipelineRankPlan> rankArenas;
  if (pipeline) {
    FailureOr<std::vector<StageFunctions>> found =
        findStageFunctions(module, stages);
    if (failed(found))
      return failure();
    stageFunctions = std::move(*found);
    FailureOr<std::vector<plan::PipelineRankPlan>> arenas =
        planPipelineArenas(module, *pipeline, *memory);
    if (failed(arenas))
      return failure();
    rankArenas = std::move(*arenas);
    plan::Slot &lossSum =
        memory->slots[memory->variableSlots.lookup(kPipelineLossSum)];
    lossSum.kind = plan::SlotKind::IO;
  }
  const plan::MemoryPlan &plan = *memory;

  bundle::Bundle b;
  b.set_format_version(bundle::kBundleFormatVersion);
  b.set_compiler_version(OCTET_COMPILER_VERSION);
  bundle::BuildInfo *build = b.mutable_build();
  build->set_spec_text(source.specText);
  build->set_spec_format(source.specFormat);
  build->set_train_spec_text(source.trainSpecText);
  build->set_model_name(source.modelName);
  build->set_hf_config(source.hfConfig);
  build->set_target("sm_90a");
  for (const auto &[key, value] : source.options) {
    bundle::Option *o = build->add_options();
    o->set_key(key);
    o->set_value(value);
  }
  // The cubins' bytes depend on the assembler's version.
  bundle::Option *cubins = build->add_options();
  cubins->set_key("cubin");
  cubins->set_value(modules->assembler);
  for (bundle::Module &m : modules->modules)
    *b.add_modules() = std::move(m);

  *b.mutable_schedule() = source.schedule;

  bundle::MemoryPlan *mp = b.mutable_plan();
  bundle::Arena *arena = mp->add_arenas();
  arena->set_name("main");
  arena->set_bytes(plan.totalBytes());
  arena->set_alignment(plan::kPlanAlignment);
  uint64_t peak = 0;
  for (const plan::ProgramPlan &p : plan.programs)
    peak = std::max(peak, p.peakLiveBytes);
  mp->set_peak_live_bytes(plan.persistentBytes + peak);
  for (const plan::Slot &s : plan.slots) {
    bundle::Slot *slot = mp->add_slots();
    slot->set_name(s.name);
    slot->set_kind(slotKindOf(s.kind));
    slot->set_offset(s.offset);
    slot->set_bytes(s.bytes);
    slot->set_dtype(dtypeOf(s.elementType));
    for (int64_t d : s.shape)
      slot->add_shape(d);
    slot->set_program(s.program);
    slot->set_first_step(s.firstStep);
    slot->set_last_step(s.lastStep);
    slot->set_last_program(s.lastProgram);
  }

  for (auto var : module.getOps<graph::VariableOp>()) {
    llvm::StringRef name = var.getSymName();
    uint32_t slot = plan.variableSlots.lookup(name);
    RankedTensorType type = var.getTensorType();
    // octet-split-optimizer's owner of a variable one pipeline rank holds.
    auto owner = var->getAttrOfType<IntegerAttr>("pipeline_rank");
    if (var.isTrainable()) {
      bundle::Parameter *p = b.add_parameters();
      p->set_name(name.str());
      // The whole parameter's shape; a sharded master's slot holds a part.
      RankedTensorType whole = type;
      if (auto shards = var->getAttrOfType<IntegerAttr>("data_shards")) {
        SmallVector<int64_t> shape(type.getShape());
        shape[0] *= shards.getInt();
        whole = RankedTensorType::get(shape, type.getElementType());
        p->set_data_shards(uint32_t(shards.getInt()));
      }
      addShape(p->mutable_shape(), whole);
      p->set_dtype(dtypeOf(type.getElementType()));
      *p->mutable_init() = initOf(var, source.schedule.seed());
      if (hasHfName(var)) {
        StatusOr<hf::HfParameterLayout> layout = hfLayoutOf(var);
        if (!layout) {
          var.emitError(layout.status().message());
          return failure();
        }
        bundle::setHfPieces(*layout, *p);
      }
      p->set_slot(slot);
      auto grad = plan.variableSlots.find(("grad." + name).str());
      if (grad != plan.variableSlots.end())
        p->set_grad_slot(grad->second);
      p->set_trainable(true);
      if (owner)
        p->set_pipeline_rank(uint32_t(owner.getInt()));
      continue;
    }
    // The loss sum is the pipeline's loss_sum_slot, no state to keep.
    if (name.starts_with("grad.") || name == kPipelineLossSum)
      continue;
    bundle::StateTensor *st = b.add_state();
    st->set_name(name.str());
    st->set_kind(stateKindOf(name));
    st->set_owner(ownerOf(name));
    addShape(st->mutable_shape(), type);
    st->set_dtype(dtypeOf(type.getElementType()));
    *st->mutable_init() = initOf(var, source.schedule.seed());
    st->set_slot(slot);
    if (auto shards = var->getAttrOfType<IntegerAttr>("data_shards"))
      st->set_data_shards(uint32_t(shards.getInt()));
    st->set_derived(graph::isDerivedCache(name));
    if (std::optional<StringRef> param = graph::weightCacheRest(name);
        param && name.starts_with(graph::kFp8WeightCachePrefix))
      if (auto weight = module.lookupSymbol<graph::VariableOp>(*param))
        st->set_remade_by_init(weight.isTrainable() &&
                               graph::isFp8WeightCopyOf(name, *param));
    if (owner)
      st->set_pipeline_rank(uint32_t(owner.getInt()));
  }

  Emitter emitter(module, plan, b, *modules, *codegen);
  if (Attribute r = module->getAttr("fp8.recipe")) {
    std::string text;
    llvm::raw_string_ostream os(text);
    r.print(os);
    llvm::SmallVector<llvm::StringRef> m;
    if (llvm::Regex("kind = ([a-z_]+)").match(text, &m))
      emitter.recipe = m[1].str();
  }
  if (pipeline) {
    if (failed(emitPipelineRanks(
            module, b, emitter, *pipeline,
            int(std::max<uint32_t>(1, source.dataParallel)), stageFunctions,
            rankArenas, plan)))
      return failure();
    return b;
  }
  const uint32_t ranks = std::max<uint32_t>(1, source.dataParallel);
  b.set_world_size(ranks);
  bundle::Group *data = b.add_groups();
  data->set_name("data");
  for (uint32_t r = 0; r < ranks; ++r)
    data->add_ranks(r);
  bundle::RankProgram *rank = b.add_ranks();
  rank->set_rank(0);
  if (failed(emitter.emitPrograms(*rank)))
    return failure();
  for (uint32_t r = 1; r < ranks; ++r) {
    bundle::RankProgram *copy = b.add_ranks();
    *copy = b.ranks(0);
    copy->set_rank(r);
  }
  return b;
}

} // namespace octet::emit
