// octet-fused-to-gpu: one gpu.func per kernel.fused region.
//
// The kernel model. A region splits into segments: groups of ops connected
// through non-scalar tensors (one per parameter in an AdamW multi-tensor
// kernel, usually one otherwise). Each segment is a set of rows: a token for
// norms, RoPE and activations, or a fixed slice of a flattened tensor when
// nothing in the segment needs row structure. A block owns a row; its T
// threads hold the row in registers as 8-element f32 vectors, thread t owning
// elements [c·8T + 8t, c·8T + 8t + 8) of chunk c, so every load and store is
// a 16-byte (bf16) access and a warp touches 512 contiguous bytes. Blocks are
// dealt out to segments by fixed block ranges.
//
// Values are carried as f32 and rounded to each op's result type after the
// op (bf16/f16 results are rounded at once, FP8 ones when first read or
// stored), which is what the interpreter does op by op.
//
// An FP8 result that the region also transposes ([R, C] -> [C, R], the
// K-major copy a weight-gradient GEMM reads) runs as a launch after the row
// kernel (TransposeKernel.h), which reads the tensor back. With
// transpose-tile-rows > 0 the row kernel writes it itself when its rows are
// the kernel's: a block then takes tiles of that many consecutive rows, one
// row after another, gathers its columns' bytes of the tile and writes each
// column's run of the transposed tensor at once (emitTiledRows). That is
// off by default: its column runs are 16 bytes, half a sector each, and it
// measured slower on an H100 (Pipeline.h).

#include "compiler/Codegen/Emitter.h"
#include "compiler/Codegen/NormTransposeKernel.h"
#include "compiler/Codegen/Passes.h"
#include "compiler/Codegen/TransposeKernel.h"

#include "dialects/fp8/Fp8Dialect.h"
#include "dialects/graph/GraphDialect.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <limits>
#include <numeric>

namespace octet::codegen {
#define GEN_PASS_DEF_FUSEDTOGPU
#include "compiler/Codegen/Passes.h.inc"
} // namespace octet::codegen

using namespace mlir;

namespace octet::codegen {
namespace {

constexpr int64_t kVec = 8;       // elements per thread access
// The narrow layout, for rows cut at offsets that no 8-element span divides
// (64-wide heads: q, k and v pieces of 128 elements).
constexpr int64_t kNarrowVec = 4;
constexpr int64_t kWarp = 32;
constexpr int64_t kMaxChunks = 16; // 8·16 = 128 registers per row tensor
// Values reduced over a block at once (one barrier): LayerNorm's mean and
// M2, a norm gradient's two row sums.
constexpr int64_t kMaxReduced = 2;
// Shared floats of the block reductions: two slots used in turn, each with
// kMaxReduced values per warp.
constexpr int64_t kReduceFloats = 2 * kMaxReduced * kWarp;
// The transposes a row kernel writes itself. A thread gathers the bytes of
// its columns kRegisterTileRows rows at a time in registers, and parks each
// full group in shared memory until the tile's last; registers a thread may
// give to the gathering, shared bytes a block may park (static shared
// memory stops at 48 KiB), and the registers the resident-block request
// budgets beside the gathering: a base, and a current and a prefetched
// chunk (16 bytes each) per row input.
constexpr int64_t kRegisterTileRows = 8;
// Threads of a tiled block: one block a multiprocessor still has 128
// registers a thread.
constexpr int64_t kMaxTiledThreads = 512;
constexpr int64_t kMaxTileRegisters = 32;
constexpr int64_t kMaxParkBytes = 40 * 1024;
constexpr int64_t kTiledBaseRegisters = 32;
constexpr int64_t kRegistersPerRowInput = 8;
constexpr int64_t kRegistersPerSM = 65536;
constexpr int64_t kMaxBlocksPerSM = 32;
constexpr unsigned kGlobalSpace = 1;
constexpr unsigned kSharedSpace = 3;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t numElements(Type t) {
  return cast<RankedTensorType>(t).getNumElements();
}

bool isScalarTensor(Value v) {
  return cast<RankedTensorType>(v.getType()).getRank() == 0;
}

enum class Role { Row, Column, PerRow, Scalar, ColumnSum, Amax };

// How a segment's rows are laid out and which blocks run it.
struct Segment {
  SmallVector<Operation *> ops;
  llvm::MapVector<Value, Role> roles;
  DenseMap<Value, int64_t> length; // row length (Row, Column, ColumnSum)
  bool flat = false;               // rows are slices of a flattened tensor
  int64_t flatElements = 0;
  int64_t rows = 0;
  int64_t blocks = 0;
  bool loop = false; // blocks loop over rows (column sums need it)
  bool sumsColumns = false;
  int64_t firstBlock = 0;
  SmallVector<Value> columnSums; // in accumulator order
  SmallVector<Value> amaxes;     // in accumulator order
  // Rows a block takes one after another so that it writes the transposed
  // FP8 copies of `tiled` itself (0: a row at a time, no transposes).
  int64_t tileRows = 0;
  SmallVector<fp8::TransposeOp> tiled;
  int64_t tileRegisters = 0; // per thread, gathering kRegisterTileRows
  int64_t parkBytes = 0;     // per block
};

struct Plan {
  SmallVector<Segment, 0> segments;
  int64_t threads = 0;
  int64_t totalBlocks = 0;
  int64_t vec = kVec; // elements per thread access
  int64_t workspaceFloats = 0;
  int64_t ropeHalf = 0; // largest RoPE half head size: angle table in smem
  int64_t parkBytes = 0; // shared bytes of the largest tiled segment
  int64_t columnBlocksPerSM = 3;
  // Blocks a multiprocessor runs at once for the kernels whose blocks loop
  // over rows (0: none loop).
  int64_t blocksPerSM = 0;
  DenseMap<Value, int64_t> workspaceOffset; // per ColumnSum value
  DenseMap<Value, int64_t> workspaceRows;
  // Transposed FP8 copies of tensors the kernel reads or writes whole that
  // no segment writes itself (Segment::tiled): a block of the row kernel
  // holds a row and a transpose needs columns, so they run as a kernel of
  // their own after the others.
  SmallVector<fp8::TransposeOp> transposes;
  // Gradient accumulation into a column sum (acc + dweight): the kernel that
  // adds up the partial rows adds the accumulator too. Result → (column
  // sum, accumulator).
  llvm::MapVector<Value, std::pair<Value, BlockArgument>> accumulated;
  // The column sum that a kernel result holds, accumulated or not.
  Value columnSumOf(Value result) const {
    if (workspaceOffset.count(result))
      return result;
    auto it = accumulated.find(result);
    return it == accumulated.end() ? Value() : it->second.first;
  }
};

bool isColumnSum(Value v) {
  Operation *def = v.getDefiningOp();
  if (auto g = dyn_cast_or_null<graph::RMSNormGradOp>(def))
    return v == g.getWeightGrad();
  if (auto g = dyn_cast_or_null<graph::LayerNormGradOp>(def))
    return v == g.getWeightGrad() || v == g.getBiasGrad();
  return isa_and_nonnull<graph::BiasGradOp>(def);
}

// The column-sum kernel: 8 warps, each adding every 8th partial row of the
// block's 32 columns.
constexpr int64_t kColumnSumGroups = 8;
constexpr int64_t kColumnSumThreads = kColumnSumGroups * kWarp;
// Partial rows a warp loads at once.
constexpr int64_t kColumnSumUnroll = 8;

// A transpose can trail the row kernel when its operands are in memory by
// then (kernel inputs or results) and only the kernel's results read it.
bool isTrailingTranspose(Operation *op, kernel::YieldOp yield) {
  auto t = dyn_cast<fp8::TransposeOp>(op);
  if (!t || t.getInput().getType().getRank() != 2)
    return false;
  auto inMemory = [&](Value v) {
    return isa<BlockArgument>(v) || llvm::is_contained(yield.getValues(), v);
  };
  if (!inMemory(t.getInput()) || !inMemory(t.getScale()))
    return false;
  return llvm::all_of(t->getUsers(),
                      [&](Operation *user) { return user == yield; });
}

// Operand and result roles that the op's semantics fix; everything else is
// a row tensor (or a scalar when 0-d).
void assignRoles(Operation *op, Segment &seg) {
  auto set = [&](Value v, Role r) { seg.roles[v] = r; };
  for (Value v : op->getOperands())
    if (!seg.roles.count(v))
      seg.roles[v] = isScalarTensor(v) ? Role::Scalar : Role::Row;
  for (Value v : op->getResults())
    seg.roles[v] = isScalarTensor(v) ? Role::Scalar : Role::Row;
  if (auto n = dyn_cast<graph::RMSNormOp>(op)) {
    set(n.getWeight(), Role::Column);
  } else if (auto n = dyn_cast<graph::LayerNormOp>(op)) {
    set(n.getWeight(), Role::Column);
    set(n.getBias(), Role::Column);
  } else if (auto g = dyn_cast<graph::RMSNormGradOp>(op)) {
    set(g.getWeight(), Role::Column);
    set(g.getWeightGrad(), Role::ColumnSum);
  } else if (auto g = dyn_cast<graph::LayerNormGradOp>(op)) {
    set(g.getWeight(), Role::Column);
    set(g.getWeightGrad(), Role::ColumnSum);
    set(g.getBiasGrad(), Role::ColumnSum);
  } else if (auto g = dyn_cast<graph::BiasGradOp>(op)) {
    set(g.getResult(), Role::ColumnSum);
  } else if (auto r = dyn_cast<graph::RopeOp>(op)) {
    set(r.getPositions(), Role::PerRow);
  } else if (auto q = dyn_cast<fp8::QuantizeOp>(op)) {
    set(q.getAmax(), Role::Amax);
  } else if (auto a = dyn_cast<fp8::AmaxOp>(op)) {
    set(a.getResult(), Role::Amax);
  }
}

bool needsRows(Operation *op) {
  return isa<graph::RMSNormOp, graph::LayerNormOp, graph::RMSNormGradOp,
             graph::LayerNormGradOp, graph::BiasGradOp, graph::RopeOp,
             graph::SliceOp, graph::ConcatOp>(op);
}

// Slices and concatenations along the row pick or join whole chunks, so a
// chunk (8 elements per thread) must divide every offset where a piece
// starts. Returns those offsets, or fails when the op cuts elsewhere.
LogicalResult pieceOffsets(Operation *op, SmallVectorImpl<int64_t> &offsets) {
  auto lastDim = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getRank() - 1;
  };
  if (auto s = dyn_cast<graph::SliceOp>(op)) {
    if (s.getDim() != lastDim(s.getInput()))
      return s.emitOpError("slices dimension ")
             << s.getDim() << "; GPU codegen slices the last one only";
    offsets.push_back(s.getOffset());
  } else if (auto c = dyn_cast<graph::ConcatOp>(op)) {
    if (c.getDim() != lastDim(c.getResult()))
      return c.emitOpError("joins along dimension ")
             << c.getDim() << "; GPU codegen joins along the last one only";
    int64_t at = 0;
    for (Value in : c.getInputs().drop_back()) {
      at += cast<RankedTensorType>(in.getType()).getShape().back();
      offsets.push_back(at);
    }
  }
  return success();
}

bool isSupported(Operation *op) {
  return isa<graph::AddOp, graph::MulOp, graph::SiluOp, graph::GeluOp,
             graph::SwigluOp, graph::CastOp, graph::ReshapeOp, graph::SaveOp,
             graph::SiluGradOp, graph::GeluGradOp, graph::SwigluGradOp,
             graph::RMSNormOp, graph::LayerNormOp, graph::RMSNormGradOp,
             graph::LayerNormGradOp, graph::BiasGradOp, graph::RopeOp,
             graph::AdamWUpdateOp, graph::SliceOp, graph::ConcatOp,
             graph::FillOp,
             fp8::QuantizeOp, fp8::DequantizeOp, fp8::AmaxOp>(op);
}

// Splits the body into segments and fixes every size. Errors name the op.
FailureOr<Plan> planKernel(kernel::FusedOp fused, int64_t numSMs,
                           int64_t columnBlocksPerSM, int64_t rowBytesInFlight,
                           int64_t rowBlocksPerSM, int64_t flatBlocksPerSM,
                           int64_t flatChunksOverride,
                           int64_t transposeTileRows) {
  auto untiled = [&] {
    return planKernel(fused, numSMs, columnBlocksPerSM, rowBytesInFlight,
                      rowBlocksPerSM, flatBlocksPerSM, flatChunksOverride,
                      /*transposeTileRows=*/0);
  };
  Block &body = fused.getBodyBlock();
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  Plan plan;
  llvm::EquivalenceClasses<Operation *> classes;
  DenseMap<Value, Operation *> firstUser;
  for (Operation &op : body.without_terminator()) {
    if (isTrailingTranspose(&op, yield)) {
      plan.transposes.push_back(cast<fp8::TransposeOp>(op));
      continue;
    }
    if (auto add = dyn_cast<graph::AddOp>(op)) {
      Value sum = isColumnSum(add.getLhs()) ? add.getLhs() : add.getRhs();
      Value other = sum == add.getLhs() ? add.getRhs() : add.getLhs();
      auto acc = dyn_cast<BlockArgument>(other);
      if (isColumnSum(sum) && acc && sum.hasOneUse() &&
          llvm::all_of(add->getUsers(),
                       [&](Operation *u) { return u == yield; })) {
        plan.accumulated[add.getResult()] = {sum, acc};
        continue;
      }
    }
    if (!isSupported(&op))
      return op.emitOpError("has no GPU lowering in octet-fused-to-gpu"),
             failure();
    classes.insert(&op);
    auto link = [&](Value v) {
      if (isScalarTensor(v))
        return;
      auto [it, inserted] = firstUser.try_emplace(v, &op);
      if (!inserted)
        classes.unionSets(it->second, &op);
    };
    for (Value v : op.getOperands())
      link(v);
    for (Value v : op.getResults())
      link(v);
  }
  plan.columnBlocksPerSM = columnBlocksPerSM;
  DenseMap<Operation *, size_t> segmentOf;
  for (Operation &op : body.without_terminator()) {
    if (!classes.contains(&op))
      continue;
    Operation *leader = classes.getLeaderValue(&op);
    auto [it, inserted] = segmentOf.try_emplace(leader, plan.segments.size());
    if (inserted)
      plan.segments.emplace_back();
    plan.segments[it->second].ops.push_back(&op);
  }

  // Rows first, threads second: the thread count is shared by the kernel.
  for (Segment &seg : plan.segments) {
    bool rowOps = false;
    graph::RopeOp rope;
    for (Operation *op : seg.ops) {
      assignRoles(op, seg);
      rowOps |= needsRows(op);
      if (auto r = dyn_cast<graph::RopeOp>(op))
        rope = r;
    }
    Value primary;
    for (auto [v, role] : seg.roles)
      if (role == Role::Row &&
          (!primary || cast<RankedTensorType>(v.getType()).getRank() >
                           cast<RankedTensorType>(primary.getType()).getRank()))
        primary = v;
    if (!primary)
      return seg.ops.front()->emitOpError("has no row tensor to lay out"),
             failure();
    auto primaryType = cast<RankedTensorType>(primary.getType());
    if (!primaryType.hasStaticShape())
      return seg.ops.front()->emitOpError(
                 "needs static shapes for GPU codegen"),
             failure();
    if (!rowOps) {
      seg.flat = true;
      seg.flatElements = primaryType.getNumElements();
      for (auto [v, role] : seg.roles)
        if (role == Role::Row && numElements(v.getType()) != seg.flatElements)
          return seg.ops.front()->emitOpError(
                     "mixes element counts in one elementwise group"),
                 failure();
      continue;
    }
    int64_t rowRank =
        rope ? cast<RankedTensorType>(rope.getPositions().getType()).getRank()
             : primaryType.getRank() - 1;
    ArrayRef<int64_t> lead = primaryType.getShape().take_front(rowRank);
    seg.rows = 1;
    for (int64_t d : lead)
      seg.rows *= d;
    for (auto [v, role] : seg.roles) {
      auto t = cast<RankedTensorType>(v.getType());
      if (role == Role::Row) {
        if (t.getNumElements() % seg.rows)
          return seg.ops.front()->emitOpError("tensor ")
                     << t << " does not split into " << seg.rows << " rows",
                 failure();
        seg.length[v] = t.getNumElements() / seg.rows;
      } else if (role == Role::Column || role == Role::ColumnSum) {
        seg.length[v] = t.getNumElements();
      } else if (role == Role::PerRow && t.getNumElements() != seg.rows) {
        return seg.ops.front()->emitOpError("per-row tensor ")
                   << t << " does not have " << seg.rows << " elements",
               failure();
      }
      if (role == Role::ColumnSum)
        seg.loop = seg.sumsColumns = true;
    }
    // Persistent blocks: rowBlocksPerSM blocks a multiprocessor loop over
    // the rows, each loading its next row while it computes this one,
    // instead of a short-lived block per row.
    if (rowBlocksPerSM > 0 && seg.rows > numSMs * rowBlocksPerSM)
      seg.loop = true;
  }

  // Transposes the row kernel writes itself: a transpose of an FP8 [R, C]
  // result whose rows are the segment's rows, R a multiple of the tile, with
  // a tensorwise scale the kernel reads (its copy is a single element).
  // The segment's blocks then take transposeTileRows rows at a time. A
  // kernel of several segments (the multi-tensor AdamW) keeps its
  // transposes apart: its block size serves every segment.
  SmallVector<fp8::TransposeOp> separate;
  for (fp8::TransposeOp t : plan.transposes) {
    Value in = t.getInput();
    auto type = cast<RankedTensorType>(in.getType());
    int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
    Segment *home = nullptr;
    if (transposeTileRows > 0 && plan.segments.size() == 1 &&
        isa<OpResult>(in) &&
        isa<BlockArgument>(t.getScale()) &&
        numElements(t.getScale().getType()) == 1 &&
        rows % transposeTileRows == 0)
      for (Segment &seg : plan.segments) {
        auto it = seg.roles.find(in);
        if (it == seg.roles.end() || it->second != Role::Row)
          continue;
        // A flattened segment (no op needs rows) takes the tensor's rows.
        if (seg.flat && seg.flatElements % rows == 0) {
          seg.flat = false;
          seg.rows = rows;
          for (auto [v, role] : seg.roles)
            if (role == Role::Row)
              seg.length[v] = numElements(v.getType()) / rows;
        }
        if (!seg.flat && seg.rows == rows && seg.length.lookup(in) == cols)
          home = &seg;
        break;
      }
    if (!home) {
      separate.push_back(t);
      continue;
    }
    home->tileRows = transposeTileRows;
    home->tiled.push_back(t);
  }
  plan.transposes = std::move(separate);

  // Chunks per thread, sized by the bytes a thread has in flight: a block
  // loads its whole row at once and computes only when it is in, so the
  // memory system sees a block's row inputs and nothing more from it.
  // - rows: 4 chunks, 8 when the row inputs are narrow (one bf16 input:
  //   4 chunks are only 64 bytes a thread), for about rowBytesInFlight;
  //   norms half that (below);
  // - blocks looping over rows (column sums) prefetch the next row and keep
  //   weight-gradient accumulators: 2 chunks, so both rows fit in registers;
  // - flat slices: 2 chunks, 4 for one narrow input (64 bytes).
  auto bytesPerChunk = [](const Segment &seg) {
    int64_t bytes = 0;
    for (auto [v, role] : seg.roles)
      if (role == Role::Row && isa<BlockArgument>(v))
        bytes += kVec * cast<RankedTensorType>(v.getType())
                            .getElementType()
                            .getIntOrFloatBitWidth() /
                 8;
    return std::max<int64_t>(bytes, 1);
  };
  bool looping =
      llvm::any_of(plan.segments, [](const Segment &s) { return s.loop; });
  int64_t threads = 0, flatChunks = 2;
  for (Segment &seg : plan.segments) {
    if (seg.flat) {
      flatChunks = std::max<int64_t>(
          flatChunks, std::clamp<int64_t>(64 / bytesPerChunk(seg), 2, 4));
      continue;
    }
    int64_t longest = 0;
    for (auto [v, len] : seg.length)
      longest = std::max(longest, len);
    // A tiled segment gathers a byte a row for every column it owns: one
    // chunk a thread keeps that small, with at most kMaxTiledThreads threads
    // (a block takes a row only after the previous one, so what it has in
    // flight is a row, whatever its chunks).
    // A norm's block holds its row through a block-wide sum before it
    // stores anything: half the bytes a thread, so twice the threads (and
    // blocks) share that wait. On an H100 (llama3-8b, bench/results/h100/
    // row-bytes-in-flight.json) RMSNorm + quantize went from 80.0% to
    // 82.0% of copy bandwidth, add + RMSNorm from 92.4% to 93.5%; RoPE,
    // which has no such sum, lost 2.6-4.9% the same way.
    bool sumsRows = llvm::any_of(seg.ops, [](Operation *op) {
      return isa<graph::RMSNormOp, graph::LayerNormOp>(op);
    });
    int64_t bytesInFlight = sumsRows ? rowBytesInFlight / 2 : rowBytesInFlight;
    int64_t chunks =
        seg.tileRows ? ceilDiv(longest, kVec * kMaxTiledThreads)
        : looping ? std::clamp<int64_t>(rowBytesInFlight / 2 /
                                          bytesPerChunk(seg),
                                      2, 8)
                : std::clamp<int64_t>(bytesInFlight / bytesPerChunk(seg), 2,
                                      8);
    int64_t want = llvm::alignTo(ceilDiv(longest, kVec * chunks), kWarp);
    threads = std::max(threads, std::clamp<int64_t>(want, kWarp, 1024));
  }
  if (threads == 0)
    threads = 256;
  int64_t pieceGcd = 0;
  for (Segment &seg : plan.segments)
    for (Operation *op : seg.ops) {
      SmallVector<int64_t> offsets;
      if (failed(pieceOffsets(op, offsets)))
        return failure();
      for (int64_t o : offsets)
        pieceGcd = std::gcd(pieceGcd, o);
    }
  // Every length a thread access must divide: rows, flat tensors, pieces.
  int64_t lengthGcd = pieceGcd;
  for (Segment &seg : plan.segments) {
    if (seg.flat)
      lengthGcd = std::gcd(lengthGcd, seg.flatElements);
    for (auto [v, len] : seg.length)
      lengthGcd = std::gcd(lengthGcd, len);
  }
  // 8 elements per access where every length allows it, else 4 (16 bytes
  // of f32, 8 of bf16).
  int64_t vec = lengthGcd % kVec == 0 ? kVec : kNarrowVec;
  if (lengthGcd % vec)
    return fused.emitOpError("has a row, piece or tensor length with a "
                             "common divisor of ")
               << lengthGcd << "; GPU codegen needs a multiple of "
               << kNarrowVec << " elements",
           failure();
  if (pieceGcd) {
    // The widest block whose span (threads · vec elements) divides every
    // piece offset; fewer threads only means more chunks per thread. A
    // narrow access comes before a block of less than a warp.
    auto fit = [&](int64_t v) {
      int64_t t = threads;
      while (t > kWarp && pieceGcd % (t * v))
        t -= kWarp;
      return pieceGcd % (t * v) ? 0 : t;
    };
    int64_t t = fit(vec);
    if (!t && vec == kVec)
      t = fit(vec = kNarrowVec);
    if (!t)
      return fused.emitOpError("slices or joins rows at offsets with a "
                               "common divisor of ")
                 << pieceGcd << "; GPU codegen needs a multiple of "
                 << kWarp * kNarrowVec,
             failure();
    threads = t;
  }
  plan.threads = threads;
  plan.vec = vec;
  int64_t span = threads * vec;
  // What a tile costs: the gathering registers (8 bytes of each column a
  // thread owns, four to a register) and the parked bytes (the tile's other
  // rows). Rows cut into pieces (fewer threads, more chunks) or too long
  // for kMaxTiledThreads threads of two chunks make that more than a thread
  // or a block holds: then the transposes run as their own kernel.
  for (Segment &seg : plan.segments) {
    for (fp8::TransposeOp t : seg.tiled) {
      int64_t columns = ceilDiv(seg.length.lookup(t.getInput()), span) * vec;
      seg.tileRegisters += columns * kRegisterTileRows / 4;
      seg.parkBytes +=
          columns * threads * (seg.tileRows - kRegisterTileRows);
    }
    if (seg.tileRows && (seg.tileRegisters > kMaxTileRegisters ||
                         seg.parkBytes > kMaxParkBytes ||
                         threads > kMaxTiledThreads))
      return untiled();
    plan.parkBytes = std::max(plan.parkBytes, seg.parkBytes);
  }

  int64_t block = 0;
  // Blocks that loop prefetch the next slice, which doubles the registers
  // a chunk takes: one chunk each, and more blocks (measured on an H100:
  // a Llama 3.2 1B multi-tensor AdamW at 58% of copy bandwidth with a
  // block per slice of one chunk, 94% with 2 looping blocks per SM of one
  // chunk each; 2 chunks or 3 blocks per SM made ptxas spill and ran at
  // 55-61%).
  if (flatChunksOverride > 0)
    flatChunks = flatChunksOverride;
  else if (flatBlocksPerSM > 0)
    flatChunks = 1;
  for (Segment &seg : plan.segments) {
    if (seg.flat) {
      int64_t len = span * flatChunks;
      seg.rows = ceilDiv(seg.flatElements, len);
      for (auto [v, role] : seg.roles)
        if (role == Role::Row)
          seg.length[v] = len;
      if (flatBlocksPerSM > 0 && seg.rows > numSMs * flatBlocksPerSM)
        seg.loop = true;
    }
    for (auto [v, len] : seg.length)
      if (ceilDiv(len, span) > kMaxChunks)
        return seg.ops.front()->emitOpError("row of ")
                   << len << " elements is too long for a register-resident "
                   << "row kernel (at most " << span * kMaxChunks << ")",
               failure();
    for (Operation *op : seg.ops)
      if (auto rope = dyn_cast<graph::RopeOp>(op)) {
        int64_t dh = cast<RankedTensorType>(rope.getInput().getType())
                         .getShape()
                         .back();
        int64_t half = dh / 2;
        bool sameThread = half % span == 0;
        bool inWarp = span % dh == 0 && half % vec == 0 &&
                      half / vec < kWarp && llvm::isPowerOf2_64(half / vec);
        if (dh % 2 || (!sameThread && !inWarp))
          return rope.emitOpError("head size ")
                     << dh << " does not fit the row layout (" << threads
                     << " threads of 8 elements)",
                 failure();
        plan.ropeHalf = std::max(plan.ropeHalf, half);
      }
    int64_t perSM = seg.sumsColumns ? columnBlocksPerSM
                    : seg.flat      ? flatBlocksPerSM
                                    : rowBlocksPerSM;
    // A tiled segment deals out tiles of rows as others deal out rows.
    int64_t units = seg.tileRows ? seg.rows / seg.tileRows : seg.rows;
    if (seg.tileRows) {
      seg.loop = seg.sumsColumns ||
                 (rowBlocksPerSM > 0 && units > numSMs * rowBlocksPerSM);
      // A tiled block runs its rows one by one, so the blocks resident on
      // a multiprocessor bound the rows it has in flight: ask ptxas for as
      // many as the estimated registers allow (64 a thread, two blocks of
      // 512 threads, for one or two bf16 row inputs; one block for a norm
      // gradient, and a grid that loops over the tiles matches it).
      int64_t registers = kTiledBaseRegisters + seg.tileRegisters;
      for (auto [v, role] : seg.roles) {
        if (role == Role::Row && isa<BlockArgument>(v))
          registers += kRegistersPerRowInput;
        else if (role == Role::ColumnSum)
          registers += vec * ceilDiv(seg.length.lookup(v), span);
      }
      int64_t fit = std::clamp<int64_t>(
          kRegistersPerSM / (registers * plan.threads), 1, kMaxBlocksPerSM);
      if (seg.loop)
        perSM = std::min(perSM, fit);
      else
        plan.blocksPerSM = std::max(plan.blocksPerSM, fit);
    }
    seg.blocks = seg.loop ? std::min(units, numSMs * perSM) : units;
    if (seg.loop)
      plan.blocksPerSM =
          std::max(plan.blocksPerSM, ceilDiv(seg.blocks, numSMs));
    seg.firstBlock = block;
    block += seg.blocks;
    for (auto [v, role] : seg.roles) {
      if (role == Role::ColumnSum) {
        seg.columnSums.push_back(v);
        plan.workspaceOffset[v] = plan.workspaceFloats;
        plan.workspaceRows[v] = seg.blocks;
        plan.workspaceFloats += seg.blocks * seg.length[v];
      } else if (role == Role::Amax) {
        seg.amaxes.push_back(v);
      }
    }
  }
  plan.totalBlocks = block;
  return plan;
}

std::string symbolFor(StringRef name) {
  std::string s;
  for (char c : name)
    s.push_back(llvm::isAlnum(c) ? c : '_');
  if (s.empty() || llvm::isDigit(s[0]))
    s.insert(s.begin(), 'k');
  return s;
}

// Whether two RoPEs rotate by the same angles (one cos/sin table serves both).
bool sameRopeAngles(graph::RopeOp a, graph::RopeOp b) {
  return a.getPositions() == b.getPositions() && a.getTheta() == b.getTheta() &&
         a.getScaling() == b.getScaling() && a.getFactor() == b.getFactor() &&
         a.getLowFreqFactor() == b.getLowFreqFactor() &&
         a.getHighFreqFactor() == b.getHighFreqFactor() &&
         a.getOriginalMaxPosition() == b.getOriginalMaxPosition() &&
         cast<RankedTensorType>(a.getInput().getType()).getShape().back() ==
             cast<RankedTensorType>(b.getInput().getType()).getShape().back();
}

// A value as the threads of a block hold it.
struct Val {
  SmallVector<Value> chunks; // vector<8xf32>, Row/Column values
  Value scalar;              // f32: Scalar and PerRow values
  Type pendingFp8;           // chunks still need rounding to this FP8 type
  Type rawElem; // chunks are as loaded (vector of this type), not yet f32
  // A column input not loaded yet: read where first used, so that a row
  // kernel does not hold norm weights in registers through its reductions.
  Value deferredFrom;
  int64_t deferredLength = 0;
};

class KernelBuilder {
public:
  KernelBuilder(kernel::FusedOp fused, const Plan &plan, OpBuilder &b)
      : fused(fused), plan(plan), b(b), loc(fused.getLoc()), vec(plan.vec) {
    f32 = b.getF32Type();
    vecType = VectorType::get({vec}, f32);
  }

  gpu::GPUFuncOp buildMain(gpu::GPUModuleOp module, StringRef name);
  gpu::GPUFuncOp buildColumnSum(gpu::GPUModuleOp module, StringRef name);
  // The column sums and the trailing transposes in one launch (the column
  // sums' blocks first): a kernel with both saves a launch, whose few
  // microseconds of ramp are most of a column sum's time.
  gpu::GPUFuncOp buildColumnSumAndTransposes(gpu::GPUModuleOp module,
                                             StringRef name, int64_t &grid);
  int64_t columnSumBlocks();
  // Every trailing transpose of the plan; returns the grid it needs. With
  // `quantize` (quantizeInTranspose's op) the launch also does that
  // quantize, and no row kernel runs.
  gpu::GPUFuncOp buildTransposes(gpu::GPUModuleOp module, StringRef name,
                                 int64_t &grid,
                                 fp8::QuantizeOp quantize = nullptr);
  // A kernel that only quantizes a [R, C] input and transposes the result
  // (tensorwise scale, tiles that divide R and C): its quantize, which the
  // transpose launch can do itself, reading the input once. Null otherwise.
  // The input may also be a join (along its rows) of inputs, each as it is
  // or through a RoPE of head size kRopeTileHead (RoPE backward and the
  // q/k/v join): inTransposePieces then lists them.
  fp8::QuantizeOp quantizeInTranspose();

  // A column piece of the join quantizeInTranspose found.
  struct JoinPiece {
    BlockArgument input;
    int64_t col0, width;
    graph::RopeOp rope;
  };
  SmallVector<JoinPiece> inTransposePieces;
  // Or a join of the results of one elementwise op (SwiGLU's gradient:
  // gate and up), each computed from the op's operands at the same place.
  Operation *inTransposeOp = nullptr;
  SmallVector<Value> inTransposeResults; // in join order

private:
  // A kernel of the region's arguments and `threads` threads, the builder
  // at its body.
  gpu::GPUFuncOp createKernel(gpu::GPUModuleOp module, StringRef name,
                              int64_t threads, TypeRange workgroup);
  MemRefType columnSumSharedType();
  // Column sums of blocks [0, columnSumBlocks()) of `blockId`.
  void emitColumnSums(gpu::GPUFuncOp func, Value blockId);
  // The trailing transposes, block firstBlock on; returns their blocks.
  int64_t emitTransposes(gpu::GPUFuncOp func, fp8::QuantizeOp quantize,
                         int64_t firstBlock);
  // inTransposeOp's results (join order) from its operands' values.
  SmallVector<Value> evaluateInTranspose(ArrayRef<Value> operands);
  // Kernel arguments: inputs, results, then the workspace.
  SmallVector<Type> argumentTypes();
  Type memrefFor(Value tensorValue, bool atomicMax);

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value f32c(double v) {
    return arith::ConstantOp::create(b, loc, f32, b.getF32FloatAttr(v));
  }
  Value splat(double v) {
    return arith::ConstantOp::create(
        b, loc, vecType, DenseElementsAttr::get(vecType, (float)v));
  }
  Value bcast(Value s) { return vector::BroadcastOp::create(b, loc, vecType, s); }
  // Products feeding sums may fuse into one fma (a single rounding instead
  // of two: within the stated f32 tolerances, and fewer instructions an
  // element in kernels that issue as much as they move).
  arith::FastMathFlagsAttr contract() {
    return arith::FastMathFlagsAttr::get(b.getContext(),
                                         arith::FastMathFlags::contract);
  }
  Value add(Value x, Value y) {
    return arith::AddFOp::create(b, loc, x, y, contract());
  }
  Value sub(Value x, Value y) {
    return arith::SubFOp::create(b, loc, x, y, contract());
  }
  Value mul(Value x, Value y) {
    return arith::MulFOp::create(b, loc, x, y, contract());
  }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value fma(Value x, Value y, Value z) {
    return math::FmaOp::create(b, loc, x, y, z);
  }
  // f applied to every lane of a vector<vec x f32>.
  Value perLane(Value v, function_ref<Value(Value)> f) {
    Value out = v;
    for (int64_t k = 0; k < vec; ++k)
      out = vector::InsertOp::create(
          b, loc, f(vector::ExtractOp::create(b, loc, v, k)), out, k);
    return out;
  }
  // 1 / (1 + 2^y) through the SFU: ex2.approx.ftz (at most 2 ulp, PTX ISA)
  // and rcp.approx.ftz (1 ulp). Four instructions a lane where libdevice's
  // expf and a correctly rounded division take about twenty, which made the
  // activation kernels instruction-bound. y = +inf gives 0, y = -inf 1.
  Value logistic2(Value y) {
    return perLane(y, [&](Value s) -> Value {
      Value e = LLVM::InlineAsmOp::create(
                    b, loc, f32, ValueRange{s}, "ex2.approx.ftz.f32 $0, $1;",
                    "=f,f", /*has_side_effects=*/false,
                    /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
                    LLVM::AsmDialectAttr(), ArrayAttr())
                    .getResult(0);
      return NVVM::RcpApproxFtzF32Op::create(b, loc, f32,
                                             add(e, f32c(1.0)));
    });
  }
  // sigmoid(x) = 1 / (1 + 2^(-x·log2 e)).
  Value sigmoid(Value x) { return logistic2(mul(x, splat(-M_LOG2E))); }

  Value toF32(Value v);
  Value fromF32(Value v, Type elem);
  Value roundTo(Value v, Type elem);

  // Chunk c of a row of `len` elements: this thread's first element, and
  // whether it lies inside the row (null when it always does).
  Value chunkBase(int64_t c) {
    return arith::AddIOp::create(b, loc, idx(c * plan.threads * vec), tid8);
  }
  Value chunkValid(const Segment &seg, int64_t len, int64_t c, Value rowStart);

  Value loadChunk(Value mem, Type elem, Value offset, Value valid);
  void storeChunk(Value mem, Type elem, Value offset, Value valid, Value v,
                  Type pendingFp8);
  // A chunk already in its stored type.
  void storeNarrow(Value mem, Value offset, Value valid, Value narrow);
  Value loadScalar(Value mem, Type elem, Value index);

  // Sum or max over the block; every thread gets the result.
  Value blockReduce(Value x, bool isMax);
  SmallVector<Value> blockReduce(SmallVector<Value> xs, bool isMax);
  SmallVector<Value> blockCombine(
      SmallVector<Value> xs,
      function_ref<SmallVector<Value>(ArrayRef<Value>, ArrayRef<Value>,
                                      int64_t)>
          combine,
      function_ref<SmallVector<Value>(ArrayRef<Value>, ArrayRef<Value>,
                                      int64_t)>
          merge);
  std::pair<Value, Value> blockMeanM2(Value mean, Value m2, int64_t perThread);

  const SmallVector<Value> &chunksOf(Value v);
  Value scalarOf(Value v) { return vals[v].scalar; }

  void emitSegment(const Segment &seg, Value localBlock);
  SmallVector<Value> loadRow(const Segment &seg, Value row);
  void loadColumns(const Segment &seg);
  // A column input's chunks, as stored.
  SmallVector<Value> loadColumn(Value mem, Type elem, int64_t len);
  // `stored`, when given, receives the FP8 chunks of the segment's tiled
  // transpose inputs as they were stored.
  SmallVector<Value> emitRow(const Segment &seg, Value row, ValueRange accs,
                             ValueRange raw,
                             DenseMap<Value, SmallVector<Value>> *stored =
                                 nullptr);
  // A tiled segment: tiles of seg.tileRows rows, each row after the other,
  // and the transposed copies of its tiles. `accs` in: the accumulators'
  // initial values; out: their final ones.
  void emitTiledRows(const Segment &seg, Value localBlock,
                     SmallVector<Value> &accs);
  // Loaded chunks to f32 (once, where first needed).
  void widen(Val &val) {
    if (!val.rawElem)
      return;
    for (Value &c : val.chunks)
      c = toF32(c);
    val.rawElem = Type();
  }
  LogicalResult emitOp(const Segment &seg, Operation *op, Value row,
                       SmallVector<Value> &accs, DenseMap<Value, int> &accIdx);
  void emitDispatch(ArrayRef<int64_t> starts, int64_t lo, int64_t hi,
                    Value blockId,
                    function_ref<void(int64_t, Value)> emitCase);
  Value ropeTable(graph::RopeOp rope);
  // Region values in memory (inputs, results) → `func`'s arguments.
  void bindArguments(gpu::GPUFuncOp func);

  kernel::FusedOp fused;
  const Plan &plan;
  OpBuilder &b;
  Location loc;
  int64_t vec; // elements per thread access
  Type f32;
  VectorType vecType;
  gpu::GPUModuleOp module;
  Value tid, tid8, lane, warp, shared, workspace;
  Value parked; // i8 shared buffer of the tiled transposes' parked groups
  int reduceSlot = 0;
  DenseMap<Value, Value> memOf; // region value → kernel argument
  DenseMap<Value, Val> vals;
  DenseMap<Value, Val> columns; // Column inputs as loaded, per segment
  DenseMap<Value, int64_t> lengthOf;
  int ropeTables = 0;
  // Which RoPE angles the shared table holds in the current row.
  Operation *anglesFor = nullptr;
};

Type KernelBuilder::memrefFor(Value v, bool atomicMax) {
  auto t = cast<RankedTensorType>(v.getType());
  Type elem = atomicMax ? b.getI32Type() : t.getElementType();
  return MemRefType::get({std::max<int64_t>(t.getNumElements(), 1)}, elem,
                         MemRefLayoutAttrInterface(),
                         b.getI64IntegerAttr(kGlobalSpace));
}

SmallVector<Type> KernelBuilder::argumentTypes() {
  SmallVector<Type> types;
  for (Value v : fused.getBodyBlock().getArguments())
    types.push_back(memrefFor(v, false));
  auto yield = cast<kernel::YieldOp>(fused.getBodyBlock().getTerminator());
  for (Value v : yield.getValues()) {
    bool amax = false;
    for (const Segment &seg : plan.segments)
      if (seg.roles.count(v) && seg.roles.lookup(v) == Role::Amax)
        amax = true;
    types.push_back(memrefFor(v, amax));
  }
  if (plan.workspaceFloats)
    types.push_back(MemRefType::get({plan.workspaceFloats}, f32,
                                    MemRefLayoutAttrInterface(),
                                    b.getI64IntegerAttr(kGlobalSpace)));
  return types;
}

Value KernelBuilder::toF32(Value v) {
  Type elem = getElementTypeOrSelf(v.getType());
  if (elem.isF32())
    return v;
  Type target = isa<VectorType>(v.getType()) ? Type(vecType) : f32;
  if (isa<FloatType>(elem))
    return arith::ExtFOp::create(b, loc, target, v);
  return arith::SIToFPOp::create(b, loc, target, v);
}

Value KernelBuilder::fromF32(Value v, Type elem) {
  if (elem.isF32())
    return v;
  Type target = elem;
  if (auto vt = dyn_cast<VectorType>(v.getType()))
    target = vt.clone(elem);
  return arith::TruncFOp::create(b, loc, target, v);
}

Value KernelBuilder::roundTo(Value v, Type elem) {
  if (elem.isF32())
    return v;
  return toF32(fromF32(v, elem));
}

Value KernelBuilder::chunkValid(const Segment &seg, int64_t len, int64_t c,
                                Value rowStart) {
  int64_t span = plan.threads * vec;
  Value valid;
  Value base = chunkBase(c);
  if ((c + 1) * span > len)
    valid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, base,
                                  idx(len));
  if (seg.flat && seg.flatElements % len && rowStart) {
    Value global = arith::AddIOp::create(b, loc, rowStart, base);
    Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                         global, idx(seg.flatElements));
    valid = valid ? arith::AndIOp::create(b, loc, valid, inside) : inside;
  }
  return valid;
}

Value KernelBuilder::loadChunk(Value mem, Type elem, Value offset,
                               Value valid) {
  // Invalid lanes read element 0 and are replaced by zeros: no branch, and
  // zeros are neutral for the sums and maxima that follow.
  if (valid)
    offset = arith::SelectOp::create(b, loc, valid, offset, idx(0));
  auto type = VectorType::get({vec}, elem);
  int64_t bytes = vec * elem.getIntOrFloatBitWidth() / 8;
  Value v = vector::LoadOp::create(b, loc, type, mem, ValueRange{offset},
                                   /*nontemporal=*/false,
                                   llvm::MaybeAlign(std::min<int64_t>(bytes, 16)));
  if (valid)
    v = arith::SelectOp::create(
        b, loc, valid, v,
        arith::ConstantOp::create(b, loc, type, b.getZeroAttr(type)));
  return v;
}

void KernelBuilder::storeChunk(Value mem, Type elem, Value offset, Value valid,
                               Value v, Type pendingFp8) {
  (void)pendingFp8;
  OpBuilder::InsertionGuard guard(b);
  if (valid) {
    auto ifOp = scf::IfOp::create(b, loc, valid, /*withElseRegion=*/false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  }
  Value narrow = fromF32(v, elem);
  int64_t bytes = vec * elem.getIntOrFloatBitWidth() / 8;
  vector::StoreOp::create(b, loc, narrow, mem, ValueRange{offset},
                          /*nontemporal=*/false,
                          llvm::MaybeAlign(std::min<int64_t>(bytes, 16)));
}

void KernelBuilder::storeNarrow(Value mem, Value offset, Value valid,
                                Value narrow) {
  OpBuilder::InsertionGuard guard(b);
  if (valid) {
    auto ifOp = scf::IfOp::create(b, loc, valid, /*withElseRegion=*/false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  }
  auto type = cast<VectorType>(narrow.getType());
  int64_t bytes =
      type.getNumElements() * type.getElementTypeBitWidth() / 8;
  vector::StoreOp::create(b, loc, narrow, mem, ValueRange{offset},
                          /*nontemporal=*/false,
                          llvm::MaybeAlign(std::min<int64_t>(bytes, 16)));
}

Value KernelBuilder::loadScalar(Value mem, Type elem, Value index) {
  Value v = memref::LoadOp::create(b, loc, mem, ValueRange{index});
  return toF32(v);
}

// Butterfly over the warp, then each warp's values through shared memory:
// `combine` merges two partials (it must be symmetric, so that every lane
// ends with the same bits), `merge` folds the warps' partials in warp order.
SmallVector<Value> KernelBuilder::blockCombine(
    SmallVector<Value> xs,
    function_ref<SmallVector<Value>(ArrayRef<Value>, ArrayRef<Value>, int64_t)>
        combine,
    function_ref<SmallVector<Value>(ArrayRef<Value>, ArrayRef<Value>, int64_t)>
        merge) {
  assert((int64_t)xs.size() <= kMaxReduced && "too many values reduced");
  Value width = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(kWarp));
  for (int64_t off = kWarp / 2, level = 0; off >= 1; off /= 2, ++level) {
    Value o = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(off));
    SmallVector<Value> other;
    for (Value x : xs)
      other.push_back(gpu::ShuffleOp::create(b, loc, x, o, width,
                                             gpu::ShuffleMode::XOR)
                          .getShuffleResult());
    xs = combine(xs, other, level);
  }
  int64_t warps = plan.threads / kWarp;
  if (warps == 1)
    return xs;
  // Two slots used in turn: a slot is rewritten only after the barrier of
  // the reduction in between, which every reader of its last use has passed.
  int64_t slot = (reduceSlot++ % 2) * kMaxReduced * kWarp;
  Value isLeader =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, idx(0));
  {
    OpBuilder::InsertionGuard guard(b);
    auto ifOp = scf::IfOp::create(b, loc, isLeader, false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    for (auto [j, x] : llvm::enumerate(xs)) {
      Value at = arith::AddIOp::create(b, loc, warp,
                                       idx(slot + (int64_t)j * kWarp));
      memref::StoreOp::create(b, loc, x, shared, ValueRange{at});
    }
  }
  gpu::BarrierOp::create(b, loc);
  auto readWarp = [&](int64_t w) {
    SmallVector<Value> r;
    for (size_t j = 0; j < xs.size(); ++j)
      r.push_back(memref::LoadOp::create(
          b, loc, shared, ValueRange{idx(slot + (int64_t)j * kWarp + w)}));
    return r;
  };
  SmallVector<Value> acc = readWarp(0);
  for (int64_t w = 1; w < warps; ++w)
    acc = merge(acc, readWarp(w), w);
  return acc;
}

SmallVector<Value> KernelBuilder::blockReduce(SmallVector<Value> xs,
                                              bool isMax) {
  auto both = [&](ArrayRef<Value> p, ArrayRef<Value> q, int64_t) {
    SmallVector<Value> r;
    for (auto [x, y] : llvm::zip(p, q))
      r.push_back(isMax ? Value(arith::MaximumFOp::create(b, loc, x, y))
                        : add(x, y));
    return r;
  };
  return blockCombine(std::move(xs), both, both);
}

Value KernelBuilder::blockReduce(Value x, bool isMax) {
  return blockReduce(SmallVector<Value>{x}, isMax).front();
}

// Mean and M2 (sum of squared deviations) of the block's values, each
// thread holding `perThread` of them with their mean and M2: Chan et al.'s
// pairwise update, which with equal counts is mean = (a + b) / 2,
// M2 = M2a + M2b + (b − a)²·n/2. As accurate as two passes over the data,
// with one barrier instead of two.
std::pair<Value, Value> KernelBuilder::blockMeanM2(Value mean, Value m2,
                                                   int64_t perThread) {
  auto pairwise = [&](ArrayRef<Value> p, ArrayRef<Value> q, int64_t level) {
    double n = (double)(perThread << level);
    Value d = sub(q[0], p[0]);
    // (p + q)·0.5 and M2p + M2q: the same bits on both lanes.
    Value m = mul(add(p[0], q[0]), f32c(0.5));
    Value s = add(add(p[1], q[1]), mul(mul(d, d), f32c(n / 2)));
    return SmallVector<Value>{m, s};
  };
  int64_t perWarp = perThread * kWarp;
  auto sequential = [&](ArrayRef<Value> acc, ArrayRef<Value> next,
                        int64_t w) {
    // acc holds w warps, next one more.
    Value d = sub(next[0], acc[0]);
    Value m = add(acc[0], mul(d, f32c(1.0 / (double)(w + 1))));
    Value s = add(add(acc[1], next[1]),
                  mul(mul(d, d), f32c((double)w * perWarp / (w + 1))));
    return SmallVector<Value>{m, s};
  };
  SmallVector<Value> r = blockCombine({mean, m2}, pairwise, sequential);
  return {r[0], r[1]};
}

const SmallVector<Value> &KernelBuilder::chunksOf(Value v) {
  Val &val = vals[v];
  if (val.deferredFrom) {
    Type elem = cast<RankedTensorType>(v.getType()).getElementType();
    val.chunks = loadColumn(val.deferredFrom, elem, val.deferredLength);
    val.rawElem = elem;
    val.deferredFrom = Value();
  }
  widen(val);
  if (val.pendingFp8) {
    for (Value &c : val.chunks)
      c = roundTo(c, val.pendingFp8);
    val.pendingFp8 = Type();
  }
  return val.chunks;
}

Value KernelBuilder::ropeTable(graph::RopeOp rope) {
  int64_t dh =
      cast<RankedTensorType>(rope.getInput().getType()).getShape().back();
  int64_t half = dh / 2;
  SmallVector<float> table;
  double theta = rope.getTheta().convertToDouble();
  for (int64_t i = 0; i < half; ++i) {
    double inv = std::pow(theta, -2.0 * (double)i / (double)dh);
    if (rope.getScaling() == "llama3") {
      // Llama 3.1 frequency rescaling: long wavelengths slowed by `factor`,
      // short ones kept, a smooth blend between.
      double factor = rope.getFactor() ? rope.getFactor()->convertToDouble() : 8;
      double lowF = rope.getLowFreqFactor()
                        ? rope.getLowFreqFactor()->convertToDouble()
                        : 1;
      double highF = rope.getHighFreqFactor()
                         ? rope.getHighFreqFactor()->convertToDouble()
                         : 4;
      double orig = rope.getOriginalMaxPosition()
                        ? (double)*rope.getOriginalMaxPosition()
                        : 8192;
      double wavelen = 2 * M_PI / inv;
      double lowWave = orig / lowF, highWave = orig / highF;
      if (wavelen > lowWave) {
        inv = inv / factor;
      } else if (wavelen >= highWave) {
        double smooth = (orig / wavelen - lowF) / (highF - lowF);
        inv = (1 - smooth) * inv / factor + smooth * inv;
      }
    }
    table.push_back((float)inv);
  }
  std::string name = "rope_inv_freq_" + std::to_string(ropeTables++);
  auto type = MemRefType::get({half}, f32);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto tensorType = RankedTensorType::get({half}, f32);
    memref::GlobalOp::create(
        b, loc, name, b.getStringAttr("private"), type,
        DenseElementsAttr::get(tensorType, ArrayRef<float>(table)),
        /*constant=*/true, b.getI64IntegerAttr(32));
  }
  return memref::GetGlobalOp::create(b, loc, type, name);
}

void KernelBuilder::emitDispatch(ArrayRef<int64_t> starts, int64_t lo,
                                 int64_t hi, Value blockId,
                                 function_ref<void(int64_t, Value)> emitCase) {
  if (hi - lo == 1) {
    Value local =
        arith::SubIOp::create(b, loc, blockId, idx(starts[lo]));
    emitCase(lo, local);
    return;
  }
  int64_t mid = (lo + hi) / 2;
  Value below = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                      blockId, idx(starts[mid]));
  OpBuilder::InsertionGuard guard(b);
  auto ifOp = scf::IfOp::create(b, loc, below, /*withElseRegion=*/true);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  emitDispatch(starts, lo, mid, blockId, emitCase);
  b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  emitDispatch(starts, mid, hi, blockId, emitCase);
}

gpu::GPUFuncOp KernelBuilder::buildMain(gpu::GPUModuleOp mod,
                                        StringRef name) {
  module = mod;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(mod.getBody());
  auto sharedType = MemRefType::get({kReduceFloats + 2 * plan.ropeHalf}, f32,
                                    MemRefLayoutAttrInterface(),
                                    b.getI64IntegerAttr(kSharedSpace));
  SmallVector<Type> workgroup{sharedType};
  if (plan.parkBytes)
    workgroup.push_back(MemRefType::get({plan.parkBytes}, b.getI8Type(),
                                        MemRefLayoutAttrInterface(),
                                        b.getI64IntegerAttr(kSharedSpace)));
  auto func = gpu::GPUFuncOp::create(
      b, loc, name, b.getFunctionType(argumentTypes(), {}), workgroup,
      TypeRange{});
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({(int32_t)plan.threads, 1, 1}));
  // Memory-bound: ask for enough resident blocks to keep bytes in flight
  // (ptxas caps registers to fit them). Kernels that loop over rows get
  // exactly the blocks they launch per SM, so the grid is one wave.
  // Kernels that loop over rows launch columnBlocksPerSM blocks per SM:
  // capping registers so that they all fit keeps the grid one wave (measured
  // on an H200: RMSNorm backward 57% → 75% of copy bandwidth). Capping the
  // one-block-per-row kernels as well made ptxas spill and lost 4-5%.
  if (plan.blocksPerSM)
    func->setAttr("nvvm.minctasm", b.getI32IntegerAttr(plan.blocksPerSM));
  // 16-byte vector reads of the RoPE angle table need an aligned buffer.
  func.setWorkgroupAttributionAttr(0, b.getStringAttr("llvm.align"),
                                   b.getI64IntegerAttr(16));
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  auto ret = gpu::ReturnOp::create(b, loc);
  b.setInsertionPoint(ret);

  Block &body = fused.getBodyBlock();
  bindArguments(func);
  shared = func.getWorkgroupAttributions().front();
  if (plan.parkBytes) {
    parked = func.getWorkgroupAttributions()[1];
    // 8-byte accesses of the parked groups.
    func.setWorkgroupAttributionAttr(1, b.getStringAttr("llvm.align"),
                                     b.getI64IntegerAttr(16));
  }
  // The entry block's arguments end with the workgroup buffer: index the
  // workspace by the signature.
  if (plan.workspaceFloats)
    workspace = func.getArgument(func.getFunctionType().getNumInputs() - 1);

  // A launch follows (column sums, transposes): it may start as soon as
  // every block of this one has, and waits for this one's results itself.
  if (plan.workspaceFloats || !plan.transposes.empty())
    Emitter(b, loc).asmVoid("griddepcontrol.launch_dependents;", "", {});

  tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  tid8 = arith::MulIOp::create(b, loc, tid, idx(vec));
  lane = arith::RemUIOp::create(b, loc, tid, idx(kWarp));
  warp = arith::DivUIOp::create(b, loc, tid, idx(kWarp));
  Value blockId = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);

  // Scalars (scales, learning rate, step) are read once per thread.
  for (BlockArgument arg : body.getArguments())
    if (isScalarTensor(arg) && !arg.use_empty())
      vals[arg].scalar = loadScalar(
          memOf[arg], cast<RankedTensorType>(arg.getType()).getElementType(),
          idx(0));

  // The tiled transposes' tensorwise scales: a one-element copy.
  for (const Segment &seg : plan.segments)
    for (fp8::TransposeOp t : seg.tiled) {
      if (!memOf.count(t.getResultScale()))
        continue;
      Value first = arith::AndIOp::create(
          b, loc,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, blockId,
                                idx(0)),
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                                idx(0)));
      OpBuilder::InsertionGuard guard(b);
      auto ifOp = scf::IfOp::create(b, loc, first, false);
      b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
      Value scale = memref::LoadOp::create(b, loc, memOf.lookup(t.getScale()),
                                           ValueRange{idx(0)});
      memref::StoreOp::create(b, loc, scale,
                              memOf.lookup(t.getResultScale()),
                              ValueRange{idx(0)});
    }

  SmallVector<int64_t> starts;
  for (const Segment &seg : plan.segments)
    starts.push_back(seg.firstBlock);
  emitDispatch(starts, 0, starts.size(), blockId,
               [&](int64_t s, Value local) {
                 emitSegment(plan.segments[s], local);
               });
  return func;
}

void KernelBuilder::bindArguments(gpu::GPUFuncOp func) {
  memOf.clear();
  Block &body = fused.getBodyBlock();
  unsigned numInputs = body.getNumArguments();
  for (auto [i, arg] : llvm::enumerate(body.getArguments()))
    memOf[arg] = func.getArgument(i);
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    if (!memOf.count(v))
      memOf[v] = func.getArgument(numInputs + i);
}

fp8::QuantizeOp KernelBuilder::quantizeInTranspose() {
  inTransposePieces.clear();
  inTransposeOp = nullptr;
  inTransposeResults.clear();
  auto fail = [&]() -> fp8::QuantizeOp {
    inTransposeOp = nullptr;
    inTransposeResults.clear();
    return nullptr;
  };
  if (plan.transposes.size() != 1)
    return fail();
  fp8::TransposeOp t = plan.transposes.front();
  auto q = t.getInput().getDefiningOp<fp8::QuantizeOp>();
  if (!q || !isa<BlockArgument>(q.getScale()) ||
      numElements(q.getScale().getType()) != 1 ||
      numElements(t.getScale().getType()) != 1)
    return fail();
  auto type = cast<RankedTensorType>(q.getInput().getType());
  if (type.getRank() != 2)
    return fail();
  int64_t rows = type.getDimSize(0);
  // Both layouts must be results: the row-major one is what the launch
  // writes as it goes.
  auto yield = cast<kernel::YieldOp>(fused.getBodyBlock().getTerminator());
  if (!llvm::is_contained(yield.getValues(), q.getResult()) ||
      !llvm::is_contained(yield.getValues(), t.getResult()))
    return fail();
  if (isa<BlockArgument>(q.getInput()))
    return plan.segments.size() == 1 && plan.segments.front().ops.size() == 1 &&
                   canQuantizeInTranspose(rows, type.getDimSize(1))
               ? q
               : nullptr;

  // A join: every op of the region is the join, the quantize, the
  // transpose, or on the way from an input to the join (reshapes, RoPEs),
  // used once.
  auto concat = q.getInput().getDefiningOp<graph::ConcatOp>();
  if (!concat || concat.getDim() != 1 || !concat->hasOneUse())
    return fail();
  llvm::SmallPtrSet<Operation *, 16> covered{concat, q, t, yield};
  SmallVector<JoinPiece> pieces;
  SmallVector<int64_t> widths;
  int64_t col0 = 0;
  for (Value operand : concat.getInputs()) {
    int64_t width = cast<RankedTensorType>(operand.getType()).getDimSize(1);
    Value v = operand;
    auto usedOnce = [&](Value x) {
      covered.insert(x.getDefiningOp());
      return x.hasOneUse();
    };
    while (auto r = v.getDefiningOp<graph::ReshapeOp>()) {
      if (!usedOnce(v))
        return fail();
      v = r.getInput();
    }
    JoinPiece piece{nullptr, col0, width, nullptr};
    if (auto op = v.getDefiningOp<graph::SwigluGradOp>()) {
      if (!usedOnce(v) || (inTransposeOp && inTransposeOp != op) ||
          !llvm::all_of(op->getOperands(), [&](Value x) {
            return isa<BlockArgument>(x) &&
                   numElements(x.getType()) == rows * width;
          }))
        return fail();
      inTransposeOp = op;
      inTransposeResults.push_back(v);
      widths.push_back(width);
      col0 += width;
      continue;
    }
    if (auto rope = v.getDefiningOp<graph::RopeOp>()) {
      auto in = cast<RankedTensorType>(rope.getInput().getType());
      if (!usedOnce(v) || !isa<BlockArgument>(rope.getInput()) ||
          !isa<BlockArgument>(rope.getPositions()) ||
          in.getShape().back() != kRopeTileHead ||
          in.getNumElements() / (in.getShape().back() * in.getShape().end()[-2]) !=
              rows ||
          numElements(rope.getPositions().getType()) != rows)
        return fail();
      for (const JoinPiece &other : pieces)
        if (other.rope && !sameRopeAngles(other.rope, rope))
          return fail();
      piece.rope = rope;
      v = rope.getInput();
    }
    auto input = dyn_cast<BlockArgument>(v);
    if (!input)
      return fail();
    piece.input = input;
    pieces.push_back(piece);
    widths.push_back(width);
    col0 += width;
  }
  for (Operation &op : fused.getBodyBlock())
    if (!covered.contains(&op))
      return fail();
  if (inTransposeOp) {
    // Every piece a result of the op, each result once, all as wide.
    if (!pieces.empty() ||
        inTransposeResults.size() != inTransposeOp->getNumResults() ||
        !canQuantizeResultsInTranspose(rows, widths))
      return fail();
    return q;
  }
  if (!canQuantizePiecesInTranspose(rows, widths))
    return fail();
  inTransposePieces = std::move(pieces);
  return q;
}

SmallVector<Value> KernelBuilder::evaluateInTranspose(ArrayRef<Value> operands) {
  // The op as the row kernels emit it, on four elements a value instead of
  // a chunk (the same arithmetic and roundings).
  int64_t savedVec = vec;
  VectorType savedType = vecType;
  vec = cast<VectorType>(operands.front().getType()).getNumElements();
  vecType = VectorType::get({vec}, f32);
  for (auto [operand, x] : llvm::zip(inTransposeOp->getOperands(), operands)) {
    Val val;
    val.chunks = {x};
    vals[operand] = val;
  }
  const Segment *seg = nullptr;
  for (const Segment &s : plan.segments)
    if (llvm::is_contained(s.ops, inTransposeOp))
      seg = &s;
  assert(seg && "the op is planned");
  SmallVector<Value> accs;
  DenseMap<Value, int> accIdx;
  LogicalResult emitted = emitOp(*seg, inTransposeOp, idx(0), accs, accIdx);
  assert(succeeded(emitted) && "an elementwise op emits");
  (void)emitted;
  SmallVector<Value> results;
  for (Value r : inTransposeResults)
    results.push_back(chunksOf(r).front());
  vec = savedVec;
  vecType = savedType;
  return results;
}

gpu::GPUFuncOp KernelBuilder::createKernel(gpu::GPUModuleOp mod,
                                           StringRef name, int64_t threads,
                                           TypeRange workgroup) {
  module = mod;
  b.setInsertionPointToEnd(mod.getBody());
  auto func = gpu::GPUFuncOp::create(
      b, loc, name, b.getFunctionType(argumentTypes(), {}), workgroup,
      TypeRange{});
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({(int32_t)threads, 1, 1}));
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  auto ret = gpu::ReturnOp::create(b, loc);
  b.setInsertionPoint(ret);
  // These kernels follow the row kernel, launched as its programmatic
  // dependent so that their launch overlaps its last blocks: nothing of its
  // output is read before it has finished. Launched plainly, the wait
  // returns at once.
  Emitter(b, loc).asmVoid("griddepcontrol.wait;", "~{memory}", {});
  bindArguments(func);
  return func;
}

gpu::GPUFuncOp KernelBuilder::buildTransposes(gpu::GPUModuleOp mod,
                                              StringRef name, int64_t &grid,
                                              fp8::QuantizeOp quantize) {
  OpBuilder::InsertionGuard guard(b);
  gpu::GPUFuncOp func = createKernel(mod, name, kTransposeThreads, {});
  grid = emitTransposes(func, quantize, 0);
  return func;
}

gpu::GPUFuncOp KernelBuilder::buildColumnSumAndTransposes(gpu::GPUModuleOp mod,
                                                          StringRef name,
                                                          int64_t &grid) {
  static_assert(kColumnSumThreads == kTransposeThreads,
                "one block size for both");
  OpBuilder::InsertionGuard guard(b);
  gpu::GPUFuncOp func =
      createKernel(mod, name, kTransposeThreads, {columnSumSharedType()});
  Value blockId = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  int64_t sumBlocks = columnSumBlocks();
  Value summing = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                        blockId, idx(sumBlocks));
  auto ifOp = scf::IfOp::create(b, loc, summing, /*withElseRegion=*/true);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  emitColumnSums(func, blockId);
  b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  grid = sumBlocks + emitTransposes(func, nullptr, sumBlocks);
  return func;
}

int64_t KernelBuilder::emitTransposes(gpu::GPUFuncOp func,
                                      fp8::QuantizeOp quantize,
                                      int64_t firstBlock) {
  // Copies [R, C] → [C, R]; a tensorwise scale passes through as a 1×1 one,
  // block scales transpose with the data.
  SmallVector<TransposeCopy> copies;
  for (fp8::TransposeOp t : plan.transposes) {
    for (auto [from, to] : {std::pair(t.getInput(), t.getResult()),
                            std::pair(t.getScale(), t.getResultScale())}) {
      // A result nobody reads is not a kernel result: nothing to write.
      if (!memOf.count(to))
        continue;
      auto type = cast<RankedTensorType>(from.getType());
      int64_t rows = type.getRank() == 2 ? type.getDimSize(0) : 1;
      int64_t cols = type.getNumElements() / rows;
      TransposeCopy copy{memOf.lookup(from), memOf.lookup(to), rows, cols};
      if (quantize && from == quantize.getResult()) {
        copy.scale = memOf.lookup(quantize.getScale());
        copy.amax = memOf.lookup(quantize.getAmax());
        if (inTransposeOp) {
          for (Value operand : inTransposeOp->getOperands())
            copy.operands.push_back(memOf.lookup(operand));
          copy.evaluate = [this](ArrayRef<Value> operands) {
            return evaluateInTranspose(operands);
          };
        } else if (inTransposePieces.empty()) {
          copy.source = memOf.lookup(quantize.getInput());
        }
        for (const JoinPiece &p : inTransposePieces) {
          TransposePiece piece{memOf.lookup(p.input), p.col0, p.width};
          if (graph::RopeOp rope = p.rope) {
            piece.invFreq = ropeTable(rope);
            piece.inverse = rope.getInverse();
            piece.roundTo = getElementTypeOrSelf(rope.getResult().getType());
            copy.positions = memOf.lookup(rope.getPositions());
          }
          copy.pieces.push_back(piece);
        }
      }
      copies.push_back(copy);
    }
  }
  return emitTransposeCopies(b, loc, func, copies, firstBlock);
}

void KernelBuilder::emitSegment(const Segment &seg, Value localBlock) {
  for (auto [v, len] : seg.length)
    lengthOf[v] = len;
  int64_t numChunkAccs = 0;
  for (Value v : seg.columnSums)
    numChunkAccs += ceilDiv(seg.length.lookup(v), plan.threads * vec);
  SmallVector<Value> inits;
  for (int64_t i = 0; i < numChunkAccs; ++i)
    inits.push_back(splat(0.0));
  for (size_t i = 0; i < seg.amaxes.size(); ++i)
    inits.push_back(f32c(0.0));

  SmallVector<Value> accs;
  columns.clear();
  if (seg.tileRows) {
    accs = inits;
    emitTiledRows(seg, localBlock, accs);
  } else if (!seg.loop) {
    accs = emitRow(seg, localBlock, inits, loadRow(seg, localBlock));
  } else {
    // Every row reads the same columns (norm weights): once per block when
    // the block also holds column sums (its registers are sized for it);
    // persistent row kernels read them per row (L1 hits) to keep registers
    // for more resident blocks.
    if (seg.sumsColumns)
      loadColumns(seg);
    // Software pipelining: row r + blocks is loaded (as stored, narrow)
    // before row r is computed, so a block keeps its next row in flight
    // through the reductions and the stores of this one.
    size_t numAccs = inits.size();
    SmallVector<Value> carried = inits;
    llvm::append_range(carried, loadRow(seg, localBlock));
    auto forOp = scf::ForOp::create(
        b, loc, localBlock, idx(seg.rows), idx(seg.blocks), carried,
        [&](OpBuilder &, Location, Value row, ValueRange iterArgs) {
          Value next = arith::AddIOp::create(b, loc, row, idx(seg.blocks));
          Value more = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                             next, idx(seg.rows));
          SmallVector<Type> rawTypes;
          for (Value v : iterArgs.drop_front(numAccs))
            rawTypes.push_back(v.getType());
          // Nothing to prefetch when the segment reads no rows (a fill).
          scf::IfOp ifOp;
          if (!rawTypes.empty()) {
            ifOp = scf::IfOp::create(b, loc, rawTypes, more,
                                     /*withElseRegion=*/true);
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPointToStart(ifOp.thenBlock());
            scf::YieldOp::create(b, loc, loadRow(seg, next));
            b.setInsertionPointToStart(ifOp.elseBlock());
            // Past the last row: the values are never read.
            scf::YieldOp::create(b, loc, iterArgs.drop_front(numAccs));
          }
          SmallVector<Value> out =
              emitRow(seg, row, iterArgs.take_front(numAccs),
                      iterArgs.drop_front(numAccs));
          // The next row's reductions reuse the shared slots.
          gpu::BarrierOp::create(b, loc);
          if (ifOp)
            llvm::append_range(out, ifOp.getResults());
          scf::YieldOp::create(b, loc, out);
        });
    accs.assign(forOp.getResults().begin(),
                forOp.getResults().begin() + numAccs);
  }

  // Column sums: this block's partial row into the workspace.
  int64_t a = 0;
  for (Value v : seg.columnSums) {
    int64_t len = seg.length.lookup(v);
    Value wsArg = workspace;
    Value rowStart = arith::AddIOp::create(
        b, loc, idx(plan.workspaceOffset.lookup(v)),
        arith::MulIOp::create(b, loc, localBlock, idx(len)));
    for (int64_t c = 0, e = ceilDiv(len, plan.threads * vec); c < e; ++c) {
      Value off = arith::AddIOp::create(b, loc, rowStart, chunkBase(c));
      storeChunk(wsArg, f32, off, chunkValid(seg, len, c, Value()), accs[a++],
                 Type());
    }
  }
  // Whole-tensor maxima: one atomic per block. The values are non-negative
  // (or NaN, whose bits exceed every finite value's), so an unsigned integer
  // max of the float bits is the float max.
  for (Value v : seg.amaxes) {
    Value m = blockReduce(accs[a++], /*isMax=*/true);
    if (!memOf.count(v))
      continue;
    Value bits = arith::BitcastOp::create(b, loc, b.getI32Type(), m);
    Value first =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, idx(0));
    OpBuilder::InsertionGuard guard(b);
    auto ifOp = scf::IfOp::create(b, loc, first, false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::maxu, bits,
                                memOf.lookup(v), ValueRange{idx(0)});
  }
}

// Each thread gathers, for every column c it owns of a transposed input,
// the bytes of kRegisterTileRows rows in a vector<8 x fp8> that shifts by
// one each row (the newest byte last: two byte permutes a row), so that
// after a group of rows byte j is the group's row j. Every full group but
// the tile's last is parked in shared memory, in a slot of this thread's
// own (no barrier; a warp stores 256 consecutive bytes). After the tile the
// column's TR bytes, consecutive in the transposed [C, R] tensor, go out as
// one 16-byte store (TR = 16: the parked group, then the registers).
void KernelBuilder::emitTiledRows(const Segment &seg, Value localBlock,
                                  SmallVector<Value> &accs) {
  int64_t tileRows = seg.tileRows;
  int64_t tiles = seg.rows / tileRows;
  int64_t span = plan.threads * vec;
  int64_t groups = tileRows / kRegisterTileRows;
  Type i8 = b.getIntegerType(8);
  auto groupType = VectorType::get({kRegisterTileRows}, i8);
  auto parkedType = [&](Type elem) {
    return VectorType::get({kRegisterTileRows}, elem);
  };
  // Gathering vectors, in (transpose, chunk, lane) order.
  struct Column {
    fp8::TransposeOp transpose;
    int64_t chunk, lane;
    Type elem;
  };
  SmallVector<Column> columns;
  SmallVector<Value> gatherInits;
  for (fp8::TransposeOp t : seg.tiled) {
    Type elem =
        cast<RankedTensorType>(t.getInput().getType()).getElementType();
    Value zero = arith::ConstantOp::create(
        b, loc, parkedType(elem), b.getZeroAttr(parkedType(elem)));
    for (int64_t c = 0, e = ceilDiv(seg.length.lookup(t.getInput()), span);
         c < e; ++c)
      for (int64_t lane = 0; lane < vec; ++lane) {
        columns.push_back({t, c, lane, elem});
        gatherInits.push_back(zero);
      }
  }
  // Column k's group g: parked at ((g·columns + k)·threads + tid)·8.
  auto parkOffset = [&](Value group, int64_t k) {
    Value slot = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, group, idx((int64_t)columns.size())),
        idx(k));
    return arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, slot,
                              idx(plan.threads * kRegisterTileRows)),
        arith::MulIOp::create(b, loc, tid, idx(kRegisterTileRows)));
  };
  size_t numAccs = accs.size();
  SmallVector<Value> carried = accs;
  SmallVector<Value> firstRaw =
      loadRow(seg, arith::MulIOp::create(b, loc, localBlock, idx(tileRows)));
  size_t numRaw = firstRaw.size();
  llvm::append_range(carried, firstRaw);
  auto tileLoop = scf::ForOp::create(
      b, loc, localBlock, idx(tiles), idx(seg.blocks), carried,
      [&](OpBuilder &, Location, Value tile, ValueRange tileIter) {
        Value firstRow = arith::MulIOp::create(b, loc, tile, idx(tileRows));
        // The row after a tile's last is the first of the block's next
        // tile; past the block's last there is none.
        Value nextTileRow = arith::MulIOp::create(
            b, loc, arith::AddIOp::create(b, loc, tile, idx(seg.blocks)),
            idx(tileRows));
        SmallVector<Value> rowInits(tileIter.begin(), tileIter.end());
        llvm::append_range(rowInits, gatherInits);
        auto rowLoop = scf::ForOp::create(
            b, loc, idx(0), idx(tileRows), idx(1), rowInits,
            [&](OpBuilder &, Location, Value i, ValueRange iter) {
              Value row = arith::AddIOp::create(b, loc, firstRow, i);
              Value last = arith::CmpIOp::create(
                  b, loc, arith::CmpIPredicate::eq, i, idx(tileRows - 1));
              Value next = arith::SelectOp::create(
                  b, loc, last, nextTileRow,
                  arith::AddIOp::create(b, loc, row, idx(1)));
              Value more = arith::CmpIOp::create(
                  b, loc, arith::CmpIPredicate::ult, next, idx(seg.rows));
              ValueRange raw = iter.slice(numAccs, numRaw);
              auto ifOp = scf::IfOp::create(b, loc, raw.getTypes(), more,
                                            /*withElseRegion=*/true);
              {
                OpBuilder::InsertionGuard guard(b);
                b.setInsertionPointToStart(ifOp.thenBlock());
                scf::YieldOp::create(b, loc, loadRow(seg, next));
                b.setInsertionPointToStart(ifOp.elseBlock());
                // Past the block's last row: the values are never read.
                scf::YieldOp::create(b, loc, raw);
              }
              DenseMap<Value, SmallVector<Value>> stored;
              int slotsBefore = reduceSlot;
              SmallVector<Value> out = emitRow(
                  seg, row, iter.take_front(numAccs), raw, &stored);
              // The next row's reductions (or RoPE angles) reuse the shared
              // slots; a row without either (a quantize) needs no barrier.
              if (reduceSlot != slotsBefore || plan.ropeHalf)
                gpu::BarrierOp::create(b, loc);
              llvm::append_range(out, ifOp.getResults());
              SmallVector<int64_t> mask;
              for (int64_t j = 1; j < kRegisterTileRows; ++j)
                mask.push_back(j);
              mask.push_back(0); // replaced by the new byte's lane below
              SmallVector<Value> gathered;
              for (auto [k, col] : llvm::enumerate(columns)) {
                mask.back() = kRegisterTileRows + col.lane;
                Value chunk = stored[col.transpose.getInput()][col.chunk];
                gathered.push_back(vector::ShuffleOp::create(
                    b, loc, iter[numAccs + numRaw + k], chunk, mask));
              }
              if (groups > 1) {
                // A full group that is not the tile's last: park it.
                Value inGroup = arith::RemUIOp::create(
                    b, loc, i, idx(kRegisterTileRows));
                Value park = arith::AndIOp::create(
                    b, loc,
                    arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          inGroup,
                                          idx(kRegisterTileRows - 1)),
                    arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                          i, idx(tileRows - 1)));
                OpBuilder::InsertionGuard guard(b);
                auto parkIf = scf::IfOp::create(b, loc, park, false);
                b.setInsertionPoint(parkIf.thenBlock()->getTerminator());
                Value group =
                    arith::DivUIOp::create(b, loc, i, idx(kRegisterTileRows));
                for (auto [k, g] : llvm::enumerate(gathered))
                  vector::StoreOp::create(
                      b, loc, arith::BitcastOp::create(b, loc, groupType, g),
                      parked, ValueRange{parkOffset(group, k)},
                      /*nontemporal=*/false,
                      llvm::MaybeAlign(kRegisterTileRows));
              }
              llvm::append_range(out, gathered);
              scf::YieldOp::create(b, loc, out);
            });
        // The rows stay a loop: their trip count is known, and ptxas may
        // unroll it and keep several rows in registers beside the gathered
        // bytes (it did when the whole tile was in registers: 109 a thread
        // for a quantize where 57 did a row at a time).
        rowLoop->setAttr(
            "loop_annotation",
            LLVM::LoopAnnotationAttr::get(
                b.getContext(), /*disableNonforced=*/nullptr,
                /*vectorize=*/nullptr, /*interleave=*/nullptr,
                LLVM::LoopUnrollAttr::get(b.getContext(),
                                          /*disable=*/b.getBoolAttr(true),
                                          nullptr, nullptr, nullptr, nullptr,
                                          nullptr, nullptr),
                nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                nullptr, nullptr, nullptr, nullptr, {}));
        // The tile's columns: bytes [firstRow, firstRow + TR) of row c of
        // the transposed tensor, the parked groups first.
        for (auto [k, col] : llvm::enumerate(columns)) {
          Value in = col.transpose.getInput();
          if (!memOf.count(col.transpose.getResult()))
            continue;
          int64_t len = seg.length.lookup(in);
          Value bytes = rowLoop.getResult(numAccs + numRaw + k);
          for (int64_t g = groups - 2; g >= 0; --g) {
            Value group = vector::LoadOp::create(
                b, loc, groupType, parked, ValueRange{parkOffset(idx(g), k)},
                /*nontemporal=*/false, llvm::MaybeAlign(kRegisterTileRows));
            Value earlier =
                arith::BitcastOp::create(b, loc, parkedType(col.elem), group);
            int64_t have =
                cast<VectorType>(bytes.getType()).getNumElements();
            SmallVector<int64_t> join(kRegisterTileRows + have);
            std::iota(join.begin(), join.end(), 0);
            bytes = vector::ShuffleOp::create(b, loc, earlier, bytes, join);
          }
          Value column = arith::AddIOp::create(b, loc, chunkBase(col.chunk),
                                               idx(col.lane));
          Value off = arith::AddIOp::create(
              b, loc, arith::MulIOp::create(b, loc, column, idx(seg.rows)),
              firstRow);
          storeNarrow(memOf.lookup(col.transpose.getResult()), off,
                      chunkValid(seg, len, col.chunk, Value()), bytes);
        }
        scf::YieldOp::create(
            b, loc, rowLoop.getResults().take_front(numAccs + numRaw));
      });
  accs.assign(tileLoop.getResults().begin(),
              tileLoop.getResults().begin() + numAccs);
}

// The segment's row inputs, in role order: every chunk as stored (narrow),
// converted where first used.
SmallVector<Value> KernelBuilder::loadRow(const Segment &seg, Value row) {
  SmallVector<Value> raw;
  int64_t span = plan.threads * vec;
  for (auto [v, role] : seg.roles) {
    if (!isa<BlockArgument>(v) || role != Role::Row)
      continue;
    Type elem = cast<RankedTensorType>(v.getType()).getElementType();
    int64_t len = seg.length.lookup(v);
    Value rowStart = arith::MulIOp::create(b, loc, row, idx(len));
    for (int64_t c = 0, e = ceilDiv(len, span); c < e; ++c)
      raw.push_back(loadChunk(memOf.lookup(v), elem,
                              arith::AddIOp::create(b, loc, rowStart,
                                                    chunkBase(c)),
                              chunkValid(seg, len, c, rowStart)));
  }
  return raw;
}

SmallVector<Value> KernelBuilder::loadColumn(Value mem, Type elem,
                                             int64_t len) {
  SmallVector<Value> chunks;
  for (int64_t c = 0, e = ceilDiv(len, plan.threads * vec); c < e; ++c) {
    Value valid;
    if ((c + 1) * plan.threads * vec > len)
      valid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                    chunkBase(c), idx(len));
    chunks.push_back(loadChunk(mem, elem, chunkBase(c), valid));
  }
  return chunks;
}

void KernelBuilder::loadColumns(const Segment &seg) {
  for (auto [v, role] : seg.roles) {
    if (!isa<BlockArgument>(v) || role != Role::Column)
      continue;
    Val val;
    val.rawElem = cast<RankedTensorType>(v.getType()).getElementType();
    val.chunks = loadColumn(memOf.lookup(v), val.rawElem,
                            seg.length.lookup(v));
    columns[v] = val;
  }
}

SmallVector<Value> KernelBuilder::emitRow(
    const Segment &seg, Value row, ValueRange accsIn, ValueRange raw,
    DenseMap<Value, SmallVector<Value>> *stored) {
  SmallVector<Value> accs(accsIn.begin(), accsIn.end());
  anglesFor = nullptr;
  DenseMap<Value, int> accIdx;
  int a = 0;
  for (Value v : seg.columnSums) {
    accIdx[v] = a;
    a += ceilDiv(seg.length.lookup(v), plan.threads * vec);
  }
  for (Value v : seg.amaxes)
    accIdx[v] = a++;

  int64_t span = plan.threads * vec;
  // The row's inputs were loaded (all chunks at once, so the whole row is in
  // flight before the first use); per-row scalars are read here.
  size_t r = 0;
  for (auto [v, role] : seg.roles) {
    if (!isa<BlockArgument>(v) || role == Role::Scalar)
      continue;
    Type elem = cast<RankedTensorType>(v.getType()).getElementType();
    if (role == Role::PerRow) {
      vals[v].scalar = loadScalar(memOf.lookup(v), elem, row);
    } else if (role == Role::Column) {
      if (columns.count(v)) {
        vals[v] = columns.lookup(v);
      } else {
        Val val;
        val.deferredFrom = memOf.lookup(v);
        val.deferredLength = seg.length.lookup(v);
        vals[v] = val;
      }
    } else if (role == Role::Row) {
      Val val;
      val.rawElem = elem;
      int64_t n = ceilDiv(seg.length.lookup(v), span);
      val.chunks.assign(raw.begin() + r, raw.begin() + r + n);
      r += n;
      vals[v] = val;
    }
  }

  for (Operation *op : seg.ops)
    if (failed(emitOp(seg, op, row, accs, accIdx)))
      return accs;

  // Results of this segment, in yield order.
  auto yield = cast<kernel::YieldOp>(fused.getBodyBlock().getTerminator());
  for (Value v : yield.getValues()) {
    if (!seg.roles.count(v) || seg.roles.lookup(v) != Role::Row ||
        isa<BlockArgument>(v))
      continue;
    int64_t len = seg.length.lookup(v);
    Type elem = cast<RankedTensorType>(v.getType()).getElementType();
    Val &val = vals[v];
    widen(val);
    Value rowStart = arith::MulIOp::create(b, loc, row, idx(len));
    bool keep = stored && llvm::any_of(seg.tiled, [&](fp8::TransposeOp t) {
                  return t.getInput() == v;
                });
    for (auto [c, chunk] : llvm::enumerate(val.chunks)) {
      Value off = arith::AddIOp::create(b, loc, rowStart, chunkBase(c));
      Value valid = chunkValid(seg, len, c, rowStart);
      if (!keep) {
        storeChunk(memOf.lookup(v), elem, off, valid, chunk, val.pendingFp8);
        continue;
      }
      Value narrow = fromF32(chunk, elem);
      storeNarrow(memOf.lookup(v), off, valid, narrow);
      (*stored)[v].push_back(narrow);
    }
  }
  return accs;
}

LogicalResult KernelBuilder::emitOp(const Segment &seg, Operation *op,
                                    Value row, SmallVector<Value> &accs,
                                    DenseMap<Value, int> &accIdx) {
  int64_t span = plan.threads * vec;
  auto elemOf = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType();
  };
  // Elementwise: f applied chunk by chunk, result rounded to its type.
  auto map = [&](Value result, auto f, auto... inputs) {
    Val out;
    size_t n = chunksOf(std::get<0>(std::make_tuple(inputs...))).size();
    for (size_t c = 0; c < n; ++c)
      out.chunks.push_back(roundTo(f(chunksOf(inputs)[c]...), elemOf(result)));
    vals[result] = out;
  };
  auto validMask = [&](Value v, size_t c) -> Value {
    int64_t len = seg.length.lookup(v);
    if ((int64_t)(c + 1) * span <= len)
      return Value();
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                 chunkBase(c), idx(len));
  };
  auto masked = [&](Value v, size_t c, Value x) {
    if (Value ok = validMask(v, c))
      return Value(arith::SelectOp::create(b, loc, ok, x, splat(0.0)));
    return x;
  };
  // This thread's share of a row sum (lanes past the row's end masked).
  auto threadSum = [&](Value like, ArrayRef<Value> chunks) {
    Value acc;
    for (auto [c, x] : llvm::enumerate(chunks)) {
      Value m = masked(like, c, x);
      acc = acc ? add(acc, m) : m;
    }
    return Value(
        vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, acc));
  };
  auto sumOver = [&](Value like, ArrayRef<Value> chunks) {
    return blockReduce(threadSum(like, chunks), false);
  };
  auto invSqrt = [&](Value meanSq, double eps) {
    return div(f32c(1.0),
               math::SqrtOp::create(b, loc, add(meanSq, f32c(eps))));
  };
  auto squares = [&](ArrayRef<Value> chunks) {
    SmallVector<Value> sq;
    for (Value c : chunks)
      sq.push_back(mul(c, c));
    return sq;
  };
  auto invRms = [&](Value x, double eps, int64_t len) {
    Value ss = sumOver(x, squares(chunksOf(x)));
    return invSqrt(div(ss, f32c((double)len)), eps);
  };
  // LayerNorm statistics: x - mean, and 1/sqrt(var + eps) broadcast. When
  // every lane holds row elements, each thread's mean and M2 merge over the
  // block in one reduction; otherwise two passes (mean, then the centred
  // squares).
  auto layerStats = [&](Value xv, double eps, SmallVector<Value> &centered) {
    int64_t len = seg.length.lookup(xv);
    SmallVector<Value> x = chunksOf(xv);
    Value mean, var;
    if (len % span == 0) {
      int64_t perThread = (int64_t)x.size() * vec;
      Value localMean = div(threadSum(xv, x), f32c((double)perThread));
      Value lm = bcast(localMean);
      SmallVector<Value> dev;
      for (Value c : x)
        dev.push_back(sub(c, lm));
      Value localM2 = threadSum(xv, squares(dev));
      auto [m, m2] = blockMeanM2(localMean, localM2, perThread);
      mean = m;
      var = div(m2, f32c((double)len));
    } else {
      mean = div(sumOver(xv, x), f32c((double)len));
      SmallVector<Value> dev;
      for (Value c : x)
        dev.push_back(sub(c, bcast(mean)));
      var = div(sumOver(xv, squares(dev)), f32c((double)len));
    }
    Value meanV = bcast(mean);
    for (Value c : x)
      centered.push_back(sub(c, meanV));
    return bcast(invSqrt(var, eps));
  };
  // Per chunk: x̂ = centred·inv, w·dy, w·dy·x̂ (row-summed next) and dy·x̂
  // (the weight gradient's column term).
  auto normGradTerms = [&](ArrayRef<Value> dy, ArrayRef<Value> centred,
                           ArrayRef<Value> w, Value inv,
                           SmallVector<Value> &xhat, SmallVector<Value> &wdy,
                           SmallVector<Value> &prod,
                           SmallVector<Value> &dwTerm) {
    for (size_t c = 0; c < centred.size(); ++c) {
      xhat.push_back(mul(centred[c], inv));
      wdy.push_back(mul(dy[c], w[c]));
      prod.push_back(mul(wdy.back(), xhat.back()));
      dwTerm.push_back(mul(dy[c], xhat.back()));
    }
  };
  auto amaxInto = [&](Value amaxResult, ArrayRef<Value> chunks, Value like) {
    int i = accIdx.lookup(amaxResult);
    Value acc;
    for (auto [c, x] : llvm::enumerate(chunks)) {
      Value m = masked(like, c, math::AbsFOp::create(b, loc, x));
      acc = acc ? Value(arith::MaximumFOp::create(b, loc, acc, m)) : m;
    }
    Value r = vector::ReductionOp::create(b, loc,
                                          vector::CombiningKind::MAXIMUMF, acc);
    accs[i] = arith::MaximumFOp::create(b, loc, accs[i], r);
  };
  auto columnAdd = [&](Value result, ArrayRef<Value> chunks, Value like) {
    int i = accIdx.lookup(result);
    for (auto [c, x] : llvm::enumerate(chunks))
      accs[i + c] = add(accs[i + c], masked(like, c, x));
  };

  if (auto o = dyn_cast<graph::AddOp>(op)) {
    map(o.getResult(), [&](Value x, Value y) { return add(x, y); }, o.getLhs(),
        o.getRhs());
  } else if (auto o = dyn_cast<graph::MulOp>(op)) {
    map(o.getResult(), [&](Value x, Value y) { return mul(x, y); }, o.getLhs(),
        o.getRhs());
  } else if (auto o = dyn_cast<graph::SiluOp>(op)) {
    map(o.getResult(), [&](Value x) { return mul(x, sigmoid(x)); },
        o.getInput());
  } else if (auto o = dyn_cast<graph::SwigluOp>(op)) {
    map(o.getResult(),
        [&](Value g, Value u) { return mul(mul(g, sigmoid(g)), u); },
        o.getLhs(), o.getRhs());
  } else if (auto o = dyn_cast<graph::GeluOp>(op)) {
    bool tanhForm = o.getApproximate() == "tanh";
    map(o.getResult(),
        [&](Value x) -> Value {
          if (tanhForm) {
            // 0.5·(1 + tanh(u)) = 1 / (1 + e^(-2u)), u = c·(x + 0.044715·x³):
            // exact, and without tanh's cancellation near -1 for x < 0.
            constexpr double c = 0.7978845608028654;
            Value arg = mul(x, fma(mul(x, x), splat(-2 * c * 0.044715 * M_LOG2E),
                                   splat(-2 * c * M_LOG2E)));
            return mul(x, logistic2(arg));
          }
          Value inner = math::ErfOp::create(b, loc,
                                            mul(x, splat(0.7071067811865476)));
          return mul(mul(splat(0.5), x), add(splat(1.0), inner));
        },
        o.getInput());
  } else if (auto o = dyn_cast<graph::GeluGradOp>(op)) {
    bool tanhForm = o.getApproximate() == "tanh";
    map(o.getResult(),
        [&](Value dy, Value x) -> Value {
          Value d;
          if (tanhForm) {
            Value x2 = mul(x, x);
            Value u = mul(splat(0.7978845608028654),
                          add(x, mul(splat(0.044715), mul(x2, x))));
            Value t = math::TanhOp::create(b, loc, u);
            Value du = mul(splat(0.7978845608028654),
                           add(splat(1.0), mul(splat(3 * 0.044715), x2)));
            Value sech2 = sub(splat(1.0), mul(t, t));
            d = add(mul(splat(0.5), add(splat(1.0), t)),
                    mul(mul(splat(0.5), x), mul(sech2, du)));
          } else {
            Value cdf = mul(splat(0.5),
                            add(splat(1.0),
                                math::ErfOp::create(
                                    b, loc, mul(x, splat(0.7071067811865476)))));
            Value pdf = mul(splat(0.3989422804014327),
                            math::ExpOp::create(
                                b, loc, mul(splat(-0.5), mul(x, x))));
            d = add(cdf, mul(x, pdf));
          }
          return mul(dy, d);
        },
        o.getGrad(), o.getInput());
  } else if (auto o = dyn_cast<graph::SiluGradOp>(op)) {
    map(o.getResult(),
        [&](Value dy, Value x) {
          Value s = sigmoid(x);
          return mul(dy, mul(s, add(splat(1.0), mul(x, sub(splat(1.0), s)))));
        },
        o.getGrad(), o.getInput());
  } else if (auto o = dyn_cast<graph::SwigluGradOp>(op)) {
    SmallVector<Value> dy = chunksOf(o.getGrad());
    SmallVector<Value> g = chunksOf(o.getGate());
    SmallVector<Value> u = chunksOf(o.getUp());
    Val dg, du;
    Type elem = elemOf(o.getGateGrad());
    for (size_t c = 0; c < dy.size(); ++c) {
      Value s = sigmoid(g[c]);
      Value silu = mul(g[c], s);
      Value dsilu = mul(s, add(splat(1.0), mul(g[c], sub(splat(1.0), s))));
      dg.chunks.push_back(roundTo(mul(mul(dy[c], u[c]), dsilu), elem));
      du.chunks.push_back(roundTo(mul(dy[c], silu), elem));
    }
    vals[o.getGateGrad()] = dg;
    vals[o.getUpGrad()] = du;
  } else if (auto o = dyn_cast<graph::CastOp>(op)) {
    Type elem = elemOf(o.getResult());
    Val out;
    out.chunks = chunksOf(o.getInput());
    if (isa<Float8E4M3FNType, Float8E5M2Type>(elem))
      out.pendingFp8 = elem;
    else
      for (Value &c : out.chunks)
        c = roundTo(c, elem);
    vals[o.getResult()] = out;
  } else if (auto o = dyn_cast<graph::FillOp>(op)) {
    Type elem = elemOf(o.getResult());
    Value x = roundTo(splat(o.getValue().convertToDouble()), elem);
    Val out;
    out.chunks.assign(ceilDiv(seg.length.lookup(o.getResult()), span), x);
    vals[o.getResult()] = out;
  } else if (auto o = dyn_cast<graph::SliceOp>(op)) {
    // The offset is a whole number of chunks (planKernel), so thread t
    // already holds the elements it owns in the slice.
    const SmallVector<Value> &in = chunksOf(o.getInput());
    int64_t first = o.getOffset() / span;
    Val out;
    for (int64_t c = 0, e = ceilDiv(seg.length.lookup(o.getResult()), span);
         c < e; ++c)
      // Lanes past the slice's end hold the next piece: zero them, as a
      // load past a row's end does.
      out.chunks.push_back(masked(o.getResult(), c, in[first + c]));
    vals[o.getResult()] = out;
  } else if (auto o = dyn_cast<graph::ConcatOp>(op)) {
    Val out;
    for (Value in : o.getInputs())
      llvm::append_range(out.chunks, chunksOf(in));
    vals[o.getResult()] = out;
  } else if (isa<graph::ReshapeOp, graph::SaveOp>(op)) {
    Value in = op->getOperand(0), out = op->getResult(0);
    if (seg.length.lookup(in) != seg.length.lookup(out))
      return op->emitOpError("changes the row length; only reshapes that keep "
                             "rows whole fuse");
    vals[out] = vals[in];
  } else if (auto o = dyn_cast<graph::RMSNormOp>(op)) {
    int64_t len = seg.length.lookup(o.getInput());
    Value inv =
        bcast(invRms(o.getInput(), o.getEps().convertToDouble(), len));
    map(o.getResult(), [&](Value x, Value w) { return mul(mul(x, inv), w); },
        o.getInput(), o.getWeight());
  } else if (auto o = dyn_cast<graph::LayerNormOp>(op)) {
    SmallVector<Value> x = chunksOf(o.getInput()), centered;
    Value inv = layerStats(o.getInput(), o.getEps().convertToDouble(), centered);
    SmallVector<Value> w = chunksOf(o.getWeight());
    SmallVector<Value> bias = chunksOf(o.getBias());
    Val out;
    for (size_t c = 0; c < x.size(); ++c)
      out.chunks.push_back(roundTo(add(mul(mul(centered[c], inv), w[c]), bias[c]),
                                   elemOf(o.getResult())));
    vals[o.getResult()] = out;
  } else if (auto o = dyn_cast<graph::RMSNormGradOp>(op)) {
    int64_t len = seg.length.lookup(o.getInput());
    SmallVector<Value> dy = chunksOf(o.getGrad());
    SmallVector<Value> x = chunksOf(o.getInput());
    SmallVector<Value> w = chunksOf(o.getWeight());
    // Σx² and Σ w·dy·x in one block reduction: Σ w·dy·x̂ = inv·Σ w·dy·x.
    SmallVector<Value> wdyx;
    for (size_t c = 0; c < x.size(); ++c)
      wdyx.push_back(mul(mul(dy[c], w[c]), x[c]));
    SmallVector<Value> sums = blockReduce(
        {threadSum(o.getInput(), squares(x)), threadSum(o.getInput(), wdyx)},
        false);
    Value invS = invSqrt(div(sums[0], f32c((double)len)),
                         o.getEps().convertToDouble());
    Value inv = bcast(invS);
    SmallVector<Value> xhat, wdy, prod, dwTerm;
    normGradTerms(dy, x, w, inv, xhat, wdy, prod, dwTerm);
    Value mean = bcast(div(mul(sums[1], invS), f32c((double)len)));
    Val dx;
    for (size_t c = 0; c < x.size(); ++c)
      dx.chunks.push_back(roundTo(mul(sub(wdy[c], mul(xhat[c], mean)), inv),
                                  elemOf(o.getInputGrad())));
    vals[o.getInputGrad()] = dx;
    columnAdd(o.getWeightGrad(), dwTerm, o.getInput());
  } else if (auto o = dyn_cast<graph::LayerNormGradOp>(op)) {
    int64_t len = seg.length.lookup(o.getInput());
    SmallVector<Value> dy = chunksOf(o.getGrad());
    SmallVector<Value> x = chunksOf(o.getInput());
    SmallVector<Value> w = chunksOf(o.getWeight());
    SmallVector<Value> centered;
    Value inv = layerStats(o.getInput(), o.getEps().convertToDouble(), centered);
    SmallVector<Value> xhat, wdy, prod, dwTerm;
    normGradTerms(dy, centered, w, inv, xhat, wdy, prod, dwTerm);
    SmallVector<Value> sums = blockReduce(
        {threadSum(o.getInput(), wdy), threadSum(o.getInput(), prod)}, false);
    Value c1 = bcast(div(sums[0], f32c((double)len)));
    Value c2 = bcast(div(sums[1], f32c((double)len)));
    Val dx;
    for (size_t c = 0; c < x.size(); ++c)
      dx.chunks.push_back(
          roundTo(mul(sub(sub(wdy[c], c1), mul(xhat[c], c2)), inv),
                  elemOf(o.getInputGrad())));
    vals[o.getInputGrad()] = dx;
    columnAdd(o.getWeightGrad(), dwTerm, o.getInput());
    columnAdd(o.getBiasGrad(), dy, o.getInput());
  } else if (auto o = dyn_cast<graph::BiasGradOp>(op)) {
    columnAdd(o.getResult(), chunksOf(o.getGrad()), o.getGrad());
  } else if (auto o = dyn_cast<graph::RopeOp>(op)) {
    auto type = cast<RankedTensorType>(o.getInput().getType());
    int64_t dh = type.getShape().back(), half = dh / 2;
    // A token's angles depend only on the frequency index: the first `half`
    // threads compute cos/sin once into shared memory (libdevice sinf/cosf,
    // full range reduction), everyone reads them as vectors.
    Value pos = scalarOf(o.getPositions());
    int64_t angles = kReduceFloats;
    auto sameAngles = [&](Operation *other) {
      auto r = dyn_cast_or_null<graph::RopeOp>(other);
      return r && sameRopeAngles(r, o);
    };
    if (!sameAngles(anglesFor)) {
      if (anglesFor) // others may still read the previous table
        gpu::BarrierOp::create(b, loc);
      Value table = ropeTable(o);
      scf::ForOp::create(
          b, loc, tid, idx(half), idx(plan.threads), ValueRange{},
          [&](OpBuilder &, Location, Value i, ValueRange) {
            Value f = memref::LoadOp::create(b, loc, table, ValueRange{i});
            Value angle = mul(pos, f);
            Value at = arith::AddIOp::create(b, loc, i, idx(angles));
            memref::StoreOp::create(b, loc, math::CosOp::create(b, loc, angle),
                                    shared, ValueRange{at});
            Value at2 = arith::AddIOp::create(b, loc, at, idx(half));
            memref::StoreOp::create(b, loc, math::SinOp::create(b, loc, angle),
                                    shared, ValueRange{at2});
            scf::YieldOp::create(b, loc);
          });
      gpu::BarrierOp::create(b, loc);
      anglesFor = op;
    }
    SmallVector<Value> x = chunksOf(o.getInput());
    bool sameThread = half % span == 0;
    Val out;
    for (size_t c = 0; c < x.size(); ++c) {
      Value base = chunkBase(c);
      Value inHead = arith::RemUIOp::create(b, loc, base, idx(dh));
      Value firstHalf = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::ult, inHead, idx(half));
      Value freqIdx = arith::RemUIOp::create(b, loc, inHead, idx(half));
      Value cosAt = arith::AddIOp::create(b, loc, freqIdx, idx(angles));
      Value sinAt = arith::AddIOp::create(b, loc, cosAt, idx(half));
      Value cosA = vector::LoadOp::create(b, loc, vecType, shared,
                                          ValueRange{cosAt}, false,
                                          llvm::MaybeAlign(16));
      Value sinA = vector::LoadOp::create(b, loc, vecType, shared,
                                          ValueRange{sinAt}, false,
                                          llvm::MaybeAlign(16));
      Value partner;
      if (sameThread) {
        int64_t step = half / span;
        bool first = ((int64_t)c * span) % dh < half;
        partner = x[first ? c + step : c - step];
      } else {
        // The partner element lies (half / 8) lanes away in the same warp.
        Value width =
            arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(kWarp));
        Value off = arith::ConstantOp::create(
            b, loc, b.getI32IntegerAttr(half / vec));
        partner = splat(0.0);
        for (int64_t k = 0; k < vec; ++k) {
          Value e = vector::ExtractOp::create(b, loc, x[c], k);
          Value s = gpu::ShuffleOp::create(b, loc, e, off, width,
                                           gpu::ShuffleMode::XOR)
                        .getShuffleResult();
          partner = vector::InsertOp::create(b, loc, s, partner, k);
        }
      }
      // rotate-half: first half x·cos − x₂·sin, second half x·cos + x₁·sin;
      // the inverse rotates by −angle.
      Value minus = o.getInverse() ? splat(1.0) : splat(-1.0);
      Value plus = o.getInverse() ? splat(-1.0) : splat(1.0);
      Value sign = arith::SelectOp::create(b, loc, firstHalf, minus, plus);
      out.chunks.push_back(roundTo(add(mul(x[c], cosA),
                                       mul(mul(sign, partner), sinA)),
                                   elemOf(o.getResult())));
    }
    vals[o.getResult()] = out;
  } else if (auto o = dyn_cast<graph::AdamWUpdateOp>(op)) {
    double b1 = o.getBeta1().convertToDouble();
    double b2 = o.getBeta2().convertToDouble();
    double eps = o.getEps().convertToDouble();
    double wd = o.getWeightDecay().convertToDouble();
    Value lr = bcast(scalarOf(o.getLr()));
    Value t = scalarOf(o.getStep());
    Value gs = bcast(scalarOf(o.getGradScale()));
    Value bc1 = sub(f32c(1.0), math::PowFOp::create(b, loc, f32c(b1), t));
    Value bc2 = sub(f32c(1.0), math::PowFOp::create(b, loc, f32c(b2), t));
    Value bc1v = bcast(bc1), bc2v = bcast(bc2);
    SmallVector<Value> p = chunksOf(o.getParam());
    SmallVector<Value> g = chunksOf(o.getGrad());
    SmallVector<Value> m = chunksOf(o.getExpAvg());
    SmallVector<Value> v = chunksOf(o.getExpAvgSq());
    Val np, nm, nv;
    for (size_t c = 0; c < p.size(); ++c) {
      Value gg = mul(g[c], gs);
      Value m1 = add(mul(splat(b1), m[c]), mul(splat(1.0 - b1), gg));
      Value v1 = add(mul(splat(b2), v[c]), mul(splat(1.0 - b2), mul(gg, gg)));
      Value mhat = div(m1, bc1v);
      Value vhat = div(v1, bc2v);
      Value upd = div(mhat, add(math::SqrtOp::create(b, loc, vhat), splat(eps)));
      Value p1 = sub(sub(p[c], mul(lr, upd)), mul(mul(lr, splat(wd)), p[c]));
      np.chunks.push_back(roundTo(p1, elemOf(o.getNewParam())));
      nm.chunks.push_back(roundTo(m1, elemOf(o.getNewExpAvg())));
      nv.chunks.push_back(roundTo(v1, elemOf(o.getNewExpAvgSq())));
    }
    vals[o.getNewParam()] = np;
    vals[o.getNewExpAvg()] = nm;
    vals[o.getNewExpAvgSq()] = nv;
  } else if (auto o = dyn_cast<fp8::QuantizeOp>(op)) {
    SmallVector<Value> x = chunksOf(o.getInput());
    Value scale = bcast(scalarOf(o.getScale()));
    Val q;
    for (Value c : x)
      q.chunks.push_back(mul(c, scale));
    q.pendingFp8 = elemOf(o.getResult());
    vals[o.getResult()] = q;
    amaxInto(o.getAmax(), x, o.getInput());
  } else if (auto o = dyn_cast<fp8::DequantizeOp>(op)) {
    Value scale = bcast(scalarOf(o.getScale()));
    map(o.getResult(), [&](Value q) { return div(q, scale); }, o.getInput());
  } else if (auto o = dyn_cast<fp8::AmaxOp>(op)) {
    amaxInto(o.getResult(), chunksOf(o.getInput()), o.getInput());
  } else {
    return op->emitOpError("has no GPU lowering in octet-fused-to-gpu");
  }
  (void)row;
  return success();
}

MemRefType KernelBuilder::columnSumSharedType() {
  return MemRefType::get({kColumnSumThreads}, f32, MemRefLayoutAttrInterface(),
                         b.getI64IntegerAttr(kSharedSpace));
}

int64_t KernelBuilder::columnSumBlocks() {
  int64_t blocks = 0;
  for (Value v : cast<kernel::YieldOp>(fused.getBodyBlock().getTerminator())
                     .getValues())
    if (plan.columnSumOf(v))
      blocks += ceilDiv(numElements(v.getType()), kWarp);
  return blocks;
}

gpu::GPUFuncOp KernelBuilder::buildColumnSum(gpu::GPUModuleOp mod,
                                             StringRef name) {
  OpBuilder::InsertionGuard guard(b);
  gpu::GPUFuncOp func =
      createKernel(mod, name, kColumnSumThreads, {columnSumSharedType()});
  emitColumnSums(func, gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
  return func;
}

void KernelBuilder::emitColumnSums(gpu::GPUFuncOp func, Value blockId) {
  Block &body = fused.getBodyBlock();
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  Value ws = func.getArgument(func.getFunctionType().getNumInputs() - 1);
  Value sums = func.getWorkgroupAttributions().front();
  Value t = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value lane = arith::RemUIOp::create(b, loc, t, idx(kWarp));
  Value group = arith::DivUIOp::create(b, loc, t, idx(kWarp));
  // A block owns 32 columns; its warps split the partial rows (warp g adds
  // rows g, g + 8, ...), then warp 0 adds the 8 group sums in group order.
  // The order is fixed, so the result does not depend on scheduling, and a
  // column has 8 loads in flight instead of one chain through the L2.
  SmallVector<std::pair<Value, unsigned>> outputs;
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    if (plan.columnSumOf(v))
      outputs.push_back({v, body.getNumArguments() + i});
  SmallVector<int64_t> starts;
  int64_t next = 0;
  for (auto [v, arg] : outputs) {
    starts.push_back(next);
    next += ceilDiv(numElements(v.getType()), kWarp);
  }
  emitDispatch(starts, 0, starts.size(), blockId, [&](int64_t o, Value local) {
    auto [v, argNo] = outputs[o];
    Value sum = plan.columnSumOf(v);
    int64_t len = numElements(v.getType());
    int64_t partials = plan.workspaceRows.lookup(sum);
    Value col = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, local, idx(kWarp)), lane);
    Value inside =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, col, idx(len));
    Value first = arith::AddIOp::create(
        b, loc, idx(plan.workspaceOffset.lookup(sum)), col);
    Value partial;
    {
      OpBuilder::InsertionGuard g2(b);
      auto ifOp = scf::IfOp::create(b, loc, TypeRange{f32}, inside, true);
      b.setInsertionPointToStart(ifOp.thenBlock());
      auto partialAt = [&](Value g) {
        Value at = arith::AddIOp::create(
            b, loc, first, arith::MulIOp::create(b, loc, g, idx(len)));
        return memref::LoadOp::create(b, loc, ws, ValueRange{at});
      };
      // This warp's rows in chunks of kColumnSumUnroll, loaded together
      // and added in order (the bits do not change): one load at a time
      // through the L2 left the kernel latency-bound (llama3-8b RMSNorm
      // backward: 264 partial rows, 33 a warp, 6.1 us on an H100).
      Value rows = arith::DivUIOp::create(
          b, loc,
          arith::SubIOp::create(b, loc, idx(partials + kColumnSumGroups - 1),
                                group),
          idx(kColumnSumGroups));
      Value chunks = arith::DivUIOp::create(b, loc, rows, idx(kColumnSumUnroll));
      auto unrolled = scf::ForOp::create(
          b, loc, idx(0), chunks, idx(1), ValueRange{f32c(0.0)},
          [&](OpBuilder &, Location, Value c, ValueRange acc) {
            Value base = arith::AddIOp::create(
                b, loc, group,
                arith::MulIOp::create(
                    b, loc, c, idx(kColumnSumUnroll * kColumnSumGroups)));
            SmallVector<Value> xs;
            for (int64_t u = 0; u < kColumnSumUnroll; ++u)
              xs.push_back(partialAt(arith::AddIOp::create(
                  b, loc, base, idx(u * kColumnSumGroups))));
            Value total = acc[0];
            for (Value x : xs)
              total = add(total, x);
            scf::YieldOp::create(b, loc, ValueRange{total});
          });
      Value rest = arith::AddIOp::create(
          b, loc, group,
          arith::MulIOp::create(b, loc, chunks,
                                idx(kColumnSumUnroll * kColumnSumGroups)));
      auto loop = scf::ForOp::create(
          b, loc, rest, idx(partials), idx(kColumnSumGroups),
          ValueRange{unrolled.getResult(0)},
          [&](OpBuilder &, Location, Value g, ValueRange acc) {
            scf::YieldOp::create(b, loc, ValueRange{add(acc[0], partialAt(g))});
          });
      scf::YieldOp::create(b, loc, loop.getResult(0));
      b.setInsertionPointToStart(ifOp.elseBlock());
      scf::YieldOp::create(b, loc, ValueRange{f32c(0.0)});
      partial = ifOp.getResult(0);
    }
    memref::StoreOp::create(b, loc, partial, sums, ValueRange{t});
    gpu::BarrierOp::create(b, loc);
    Value firstGroup = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::eq, group, idx(0));
    Value write = arith::AndIOp::create(b, loc, firstGroup, inside);
    OpBuilder::InsertionGuard g2(b);
    auto ifOp = scf::IfOp::create(b, loc, write, false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    Value total = memref::LoadOp::create(b, loc, sums, ValueRange{lane});
    for (int64_t g = 1; g < kColumnSumGroups; ++g)
      total = add(total,
                  memref::LoadOp::create(
                      b, loc, sums,
                      ValueRange{arith::AddIOp::create(b, loc, lane,
                                                       idx(g * kWarp))}));
    Type elem = cast<RankedTensorType>(v.getType()).getElementType();
    if (sum != v) {
      // The column sum is rounded to its type before the add, as the
      // interpreter does op by op.
      Type sumElem = cast<RankedTensorType>(sum.getType()).getElementType();
      BlockArgument acc = plan.accumulated.lookup(v).second;
      Value prior = loadScalar(func.getArgument(acc.getArgNumber()),
                               cast<RankedTensorType>(acc.getType()).getElementType(), col);
      total = add(prior, roundTo(total, sumElem));
    }
    Value out = fromF32(total, elem);
    memref::StoreOp::create(b, loc, out, func.getArgument(argNo),
                            ValueRange{col});
  });
}

// Kernels for ops that do not fit the register-resident row model: a
// vocabulary row is too long to hold in registers (cross-entropy), a gather
// or scatter indexes rows by token id (embedding), a reduction spans whole
// tensors (global norm), or the work is a handful of scalars (step counter,
// learning rate, clip coefficient, FP8 scale state). Each op is a launch of
// its own, reading its operands from the kernel's buffers.
bool isWholeOp(Operation *op) {
  return isa<graph::EmbeddingOp, graph::EmbeddingGradOp,
             graph::CrossEntropyOp, graph::CrossEntropyGradOp,
             graph::GlobalNormOp, graph::ClipScaleOp, graph::IncrementOp,
             graph::LrScheduleOp, fp8::ScaleUpdateOp>(op) ||
         (isa<graph::FillOp>(op) && isScalarTensor(op->getResult(0)));
}

bool hasWholeOps(kernel::FusedOp fused) {
  for (Operation &op : fused.getBodyBlock().without_terminator())
    if (isWholeOp(&op))
      return true;
  return false;
}

constexpr int64_t kWholeThreads = 256;

class WholeOpBuilder {
public:
  WholeOpBuilder(kernel::FusedOp fused, OpBuilder &b)
      : fused(fused), b(b), loc(fused.getLoc()) {
    f32 = b.getF32Type();
  }

  // Builds every launch into `mod`; `record` gets each kernel with its
  // grid and block. Fails, naming the op, on anything it cannot lower.
  LogicalResult build(gpu::GPUModuleOp mod, StringRef sym,
                      function_ref<void(gpu::GPUFuncOp, int64_t, int64_t)>
                          record);
  int64_t workspaceFloats() const { return wsFloats; }

private:
  struct Func {
    gpu::GPUFuncOp func;
    Value tid, block, shared;
  };
  Func begin(gpu::GPUModuleOp mod, std::string name, int64_t threads);
  Value mem(Value v) { return memOf.lookup(v); }
  bool inMemory(Value v) { return memOf.count(v); }
  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value f32c(double v) {
    return arith::ConstantOp::create(b, loc, f32, b.getF32FloatAttr(v));
  }
  Value toF32(Value v) {
    Type t = v.getType();
    if (t.isF32())
      return v;
    if (isa<FloatType>(t))
      return arith::ExtFOp::create(b, loc, f32, v);
    return arith::SIToFPOp::create(b, loc, f32, v);
  }
  Value fromF32(Value v, Type elem) {
    return elem.isF32() ? v : Value(arith::TruncFOp::create(b, loc, elem, v));
  }
  Value load(Value v, Value i) {
    return memref::LoadOp::create(b, loc, mem(v), ValueRange{i});
  }
  Value loadF(Value v, Value i) { return toF32(load(v, i)); }
  void storeF(Value v, Value i, Value x) {
    memref::StoreOp::create(b, loc, fromF32(x, elemOf(v)), mem(v),
                            ValueRange{i});
  }
  static Type elemOf(Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType();
  }
  Value ws(Value i) {
    return memref::LoadOp::create(b, loc, workspace, ValueRange{i});
  }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value addi(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value muli(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value ult(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, y);
  }
  // Runs `body` in an scf.if on `cond`, restoring the insertion point.
  void when(Value cond, function_ref<void()> body) {
    OpBuilder::InsertionGuard guard(b);
    auto ifOp = scf::IfOp::create(b, loc, cond, false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    body();
  }
  // for (i = tid; i < n; i += threads) acc = f(acc, i), then over the block.
  Value stride(const Func &f, int64_t n, Value init, bool isMax,
               function_ref<Value(Value)> element);
  Value blockReduce(const Func &f, Value x, bool isMax);
  Value thread0(const Func &f) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, f.tid,
                                 idx(0));
  }
  Value index(Value i) {
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), i);
  }
  // Rows of a [..., V] tensor: (count, width).
  static std::pair<int64_t, int64_t> rowsOf(Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    return {t.getNumElements() / t.getShape().back(), t.getShape().back()};
  }

  LogicalResult scalarOps(gpu::GPUModuleOp mod, StringRef sym,
                          ArrayRef<Operation *> ops,
                          function_ref<void(gpu::GPUFuncOp, int64_t, int64_t)>
                              record);

  kernel::FusedOp fused;
  OpBuilder &b;
  Location loc;
  Type f32;
  SmallVector<Type> argTypes;
  DenseMap<Value, Value> memOf;
  Value workspace;
  int64_t wsFloats = 0;
};

WholeOpBuilder::Func WholeOpBuilder::begin(gpu::GPUModuleOp mod,
                                           std::string name, int64_t threads) {
  // The caller holds an insertion guard: this leaves the builder inside the
  // new kernel, before its return.
  b.setInsertionPointToEnd(mod.getBody());
  auto sharedType = MemRefType::get({kWarp}, f32, MemRefLayoutAttrInterface(),
                                    b.getI64IntegerAttr(kSharedSpace));
  auto func = gpu::GPUFuncOp::create(b, loc, name,
                                     b.getFunctionType(argTypes, {}),
                                     TypeRange{sharedType}, TypeRange{});
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({(int32_t)threads, 1, 1}));
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  auto ret = gpu::ReturnOp::create(b, loc);
  b.setInsertionPoint(ret);
  memOf.clear();
  Block &body = fused.getBodyBlock();
  for (auto [i, arg] : llvm::enumerate(body.getArguments()))
    memOf[arg] = func.getArgument(i);
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    if (!memOf.count(v))
      memOf[v] = func.getArgument(body.getNumArguments() + i);
  workspace = wsFloats ? func.getArgument(argTypes.size() - 1) : Value();
  return Func{func, gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x),
              gpu::BlockIdOp::create(b, loc, gpu::Dimension::x),
              func.getWorkgroupAttributions().front()};
}

Value WholeOpBuilder::blockReduce(const Func &f, Value x, bool isMax) {
  auto combine = [&](Value p, Value q) -> Value {
    return isMax ? Value(arith::MaximumFOp::create(b, loc, p, q)) : add(p, q);
  };
  Value width = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(kWarp));
  for (int64_t off = kWarp / 2; off >= 1; off /= 2) {
    Value o = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(off));
    x = combine(x, gpu::ShuffleOp::create(b, loc, x, o, width,
                                          gpu::ShuffleMode::XOR)
                       .getShuffleResult());
  }
  Value lane = arith::RemUIOp::create(b, loc, f.tid, idx(kWarp));
  Value warp = arith::DivUIOp::create(b, loc, f.tid, idx(kWarp));
  // The barrier first: the slots may still be read from the last reduction.
  gpu::BarrierOp::create(b, loc);
  when(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, idx(0)),
       [&] { memref::StoreOp::create(b, loc, x, f.shared, ValueRange{warp}); });
  gpu::BarrierOp::create(b, loc);
  Value acc = memref::LoadOp::create(b, loc, f.shared, ValueRange{idx(0)});
  for (int64_t w = 1; w < kWholeThreads / kWarp; ++w)
    acc = combine(acc,
                  memref::LoadOp::create(b, loc, f.shared, ValueRange{idx(w)}));
  return acc;
}

Value WholeOpBuilder::stride(const Func &f, int64_t n, Value init, bool isMax,
                             function_ref<Value(Value)> element) {
  auto loop = scf::ForOp::create(
      b, loc, f.tid, idx(n), idx(kWholeThreads), ValueRange{init},
      [&](OpBuilder &, Location, Value i, ValueRange acc) {
        Value x = element(i);
        Value r = isMax ? Value(arith::MaximumFOp::create(b, loc, acc[0], x))
                        : add(acc[0], x);
        scf::YieldOp::create(b, loc, ValueRange{r});
      });
  return blockReduce(f, loop.getResult(0), isMax);
}

LogicalResult WholeOpBuilder::scalarOps(
    gpu::GPUModuleOp mod, StringRef sym, ArrayRef<Operation *> ops,
    function_ref<void(gpu::GPUFuncOp, int64_t, int64_t)> record) {
  OpBuilder::InsertionGuard guard(b);
  DenseMap<Value, Value> scalars; // values computed in this kernel
  auto read = [&](Value v) -> Value {
    if (Value s = scalars.lookup(v))
      return s;
    return load(v, idx(0));
  };
  auto write = [&](Value v, Value x) {
    scalars[v] = x;
    if (inMemory(v))
      memref::StoreOp::create(b, loc, x, mem(v), ValueRange{idx(0)});
  };
  // A delayed-scaling update, its history rolled by `lanes` threads of one
  // warp (lane `lane`): the maximum is exact in any order, so the lanes
  // split the copy and reduce by shuffles; lane 0 writes the scalars.
  auto scaleUpdate = [&](fp8::ScaleUpdateOp o, Value lane,
                         int64_t lanes) -> LogicalResult {
    if (!inMemory(o.getAmaxHistory()) || !inMemory(o.getNewHistory()))
      return o.emitOpError("needs its amax histories in kernel buffers"),
             failure();
    auto atLane0 = [&](function_ref<void()> body) {
      if (lanes == 1)
        return body();
      when(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane,
                                 idx(0)),
           body);
    };
    fp8::RecipeAttr recipe = o.getRecipe();
    int64_t len = numElements(o.getAmaxHistory().getType());
    Value amax = read(o.getAmax());
    // Newest first: [amax, history[0 .. H-2]], and its maximum.
    atLane0([&] {
      memref::StoreOp::create(b, loc, amax, mem(o.getNewHistory()),
                              ValueRange{idx(0)});
    });
    Value first = lanes == 1 ? idx(1) : addi(idx(1), lane);
    auto roll = scf::ForOp::create(
        b, loc, first, idx(len), idx(lanes), ValueRange{amax},
        [&](OpBuilder &, Location, Value i, ValueRange acc) {
          Value h = load(o.getAmaxHistory(),
                         arith::SubIOp::create(b, loc, i, idx(1)));
          memref::StoreOp::create(b, loc, h, mem(o.getNewHistory()),
                                  ValueRange{i});
          scf::YieldOp::create(
              b, loc,
              ValueRange{arith::MaximumFOp::create(b, loc, acc[0], h)});
        });
    Value rolled = roll.getResult(0);
    if (lanes > 1) {
      Value width =
          arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(kWarp));
      for (int64_t off = kWarp / 2; off >= 1; off /= 2) {
        Value shift =
            arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(off));
        rolled = arith::MaximumFOp::create(
            b, loc, rolled,
            gpu::ShuffleOp::create(b, loc, rolled, shift, width,
                                   gpu::ShuffleMode::XOR)
                .getShuffleResult());
      }
    }
    Value eff = recipe.getAmaxAlgorithm() == fp8::AmaxAlgorithm::max
                    ? rolled
                    : amax;
    double fp8Max = isa<Float8E4M3FNType>(o.getDtype()) ? 448.0 : 57344.0;
    Value denom = mul(arith::MaximumFOp::create(
                          b, loc, eff, f32c(o.getEps().convertToDouble())),
                      f32c(std::ldexp(1.0, recipe.getMargin())));
    Value next = arith::DivFOp::create(b, loc, f32c(fp8Max), denom);
    if (recipe.getPowerOfTwoScales()) {
      // Down to a power of two: keep sign and exponent, clear the mantissa.
      Value bits = arith::BitcastOp::create(b, loc, b.getI32Type(), next);
      Value mask = arith::ConstantOp::create(
          b, loc, b.getI32IntegerAttr((int32_t)0xFF800000u));
      next = arith::BitcastOp::create(
          b, loc, f32, arith::AndIOp::create(b, loc, bits, mask));
    }
    Value finite = arith::CmpFOp::create(
        b, loc, arith::CmpFPredicate::OLT, math::AbsFOp::create(b, loc, eff),
        f32c(std::numeric_limits<float>::infinity()));
    Value scale =
        arith::SelectOp::create(b, loc, finite, next, read(o.getScale()));
    atLane0([&] { write(o.getNewScale(), scale); });
    return success();
  };

  // Only scale updates (the step's fp8.scale_updates region, one per FP8
  // tensor, each with its own history): they are independent, so a block
  // per update instead of one thread walking every history in turn.
  if (ops.size() > 1 && llvm::all_of(ops, [](Operation *op) {
        return isa<fp8::ScaleUpdateOp>(op);
      })) {
    Func f = begin(mod, (sym + "_scalars").str(), kWarp);
    LogicalResult result = success();
    for (auto [j, op] : llvm::enumerate(ops))
      when(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, f.block,
                                 idx(j)),
           [&] {
             if (failed(scaleUpdate(cast<fp8::ScaleUpdateOp>(op), f.tid,
                                    kWarp)))
               result = failure();
           });
    if (failed(result))
      return failure();
    record(f.func, (int64_t)ops.size(), kWarp);
    return success();
  }

  // One thread: a few scalars (and amax histories of a few entries each).
  Func f = begin(mod, (sym + "_scalars").str(), kWarp);
  OpBuilder::InsertionGuard inner(b);
  auto ifOp = scf::IfOp::create(b, loc, thread0(f), false);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  for (Operation *op : ops) {
    if (auto o = dyn_cast<graph::FillOp>(op)) {
      Type elem = elemOf(o.getResult());
      Attribute value =
          isa<FloatType>(elem)
              ? Attribute(b.getFloatAttr(elem, o.getValue().convertToDouble()))
              : Attribute(b.getIntegerAttr(
                    elem, (int64_t)o.getValue().convertToDouble()));
      write(o.getResult(),
            arith::ConstantOp::create(b, loc, cast<TypedAttr>(value)));
    } else if (auto o = dyn_cast<graph::IncrementOp>(op)) {
      Value one = arith::ConstantOp::create(
          b, loc, b.getIntegerAttr(elemOf(o.getResult()), 1));
      write(o.getResult(), addi(read(o.getInput()), one));
    } else if (auto o = dyn_cast<graph::LrScheduleOp>(op)) {
      double lr = o.getLr().convertToDouble();
      double warmup = (double)o.getWarmupStepsAttr().getInt();
      double total = (double)o.getTotalStepsAttr().getInt();
      double ratio = o.getMinLrRatio().convertToDouble();
      Value step = toF32(read(o.getStep()));
      Value warm = mul(step, f32c(warmup > 0 ? lr / warmup : 0));
      Value p = mul(arith::SubFOp::create(b, loc, step, f32c(warmup)),
                    f32c(1.0 / std::max(1.0, total - warmup)));
      p = arith::MinimumFOp::create(
          b, loc, arith::MaximumFOp::create(b, loc, p, f32c(0)), f32c(1));
      Value cosine =
          math::CosOp::create(b, loc, mul(p, f32c(M_PI)));
      Value decay = mul(f32c(lr), add(f32c(ratio),
                                      mul(f32c((1 - ratio) * 0.5),
                                          add(f32c(1), cosine))));
      Value inWarmup = arith::CmpFOp::create(
          b, loc, arith::CmpFPredicate::OLE, step, f32c(warmup));
      if (warmup <= 0)
        inWarmup = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
      write(o.getResult(),
            arith::SelectOp::create(b, loc, inWarmup, warm, decay));
    } else if (auto o = dyn_cast<graph::ClipScaleOp>(op)) {
      double maxNorm = o.getMaxNorm().convertToDouble();
      double scale = o.getScale().convertToDouble();
      Value coef = f32c(1);
      if (maxNorm > 0)
        coef = arith::MinimumFOp::create(
            b, loc, f32c(1),
            arith::DivFOp::create(
                b, loc, f32c(maxNorm),
                add(toF32(read(o.getNorm())), f32c(1e-6))));
      write(o.getResult(), mul(f32c(scale), coef));
    } else if (auto o = dyn_cast<fp8::ScaleUpdateOp>(op)) {
      if (failed(scaleUpdate(o, f.tid, 1)))
        return failure();
    } else {
      return op->emitOpError("has no GPU lowering in octet-fused-to-gpu"),
             failure();
    }
  }
  record(f.func, 1, kWarp);
  return success();
}

LogicalResult WholeOpBuilder::build(
    gpu::GPUModuleOp mod, StringRef sym,
    function_ref<void(gpu::GPUFuncOp, int64_t, int64_t)> record) {
  Block &body = fused.getBodyBlock();
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  for (Value v : body.getArguments())
    argTypes.push_back(MemRefType::get(
        {std::max<int64_t>(numElements(v.getType()), 1)}, elemOf(v),
        MemRefLayoutAttrInterface(), b.getI64IntegerAttr(kGlobalSpace)));
  for (Value v : yield.getValues())
    argTypes.push_back(MemRefType::get(
        {std::max<int64_t>(numElements(v.getType()), 1)}, elemOf(v),
        MemRefLayoutAttrInterface(), b.getI64IntegerAttr(kGlobalSpace)));
  // Workspace: per-row partial sums of the reductions, fixed below.
  for (Operation &op : body.without_terminator()) {
    if (auto o = dyn_cast<graph::CrossEntropyOp>(&op))
      wsFloats = std::max(wsFloats, 2 * rowsOf(o.getLogits()).first);
    else if (auto o = dyn_cast<graph::CrossEntropyGradOp>(&op))
      wsFloats = std::max<int64_t>(wsFloats, 1);
    else if (auto o = dyn_cast<graph::GlobalNormOp>(&op)) {
      int64_t blocks = 0;
      for (Value in : o->getOperands())
        blocks += ceilDiv(numElements(in.getType()), kWholeThreads * kVec);
      wsFloats = std::max(wsFloats, blocks);
    }
  }
  if (wsFloats)
    argTypes.push_back(MemRefType::get({wsFloats}, f32,
                                       MemRefLayoutAttrInterface(),
                                       b.getI64IntegerAttr(kGlobalSpace)));
  auto yielded = [&](Value v) {
    return llvm::is_contained(yield.getValues(), v);
  };
  auto inputsInMemory = [&](Operation *op) {
    return llvm::all_of(op->getOperands(), [&](Value v) {
      return isa<BlockArgument>(v) || yielded(v);
    });
  };

  SmallVector<Operation *> scalarList;
  DenseSet<Operation *> done;
  int n = 0;
  for (Operation &opRef : body.without_terminator()) {
    Operation *op = &opRef;
    if (done.contains(op))
      continue;
    std::string name = (sym + "_" + Twine(n++)).str();
    bool scalarOnly =
        llvm::all_of(op->getResults(), [](Value v) { return isScalarTensor(v); }) &&
        !isa<graph::GlobalNormOp, graph::CrossEntropyOp>(op);
    if (scalarOnly || isa<fp8::ScaleUpdateOp>(op)) {
      scalarList.push_back(op);
      continue;
    }
    if (!inputsInMemory(op))
      return op->emitOpError("reads a value computed in the same kernel; "
                             "GPU codegen needs it in a kernel input"),
             failure();
    OpBuilder::InsertionGuard guard(b);
    if (auto o = dyn_cast<graph::EmbeddingOp>(op)) {
      if (!yielded(o.getResult()))
        return o.emitOpError("result must be a kernel result"), failure();
      // A thread per output element: rows of the table copied in order.
      int64_t total = numElements(o.getResult().getType());
      int64_t width = rowsOf(o.getResult()).second;
      Func f = begin(mod, name, kWholeThreads);
      Value i = addi(muli(f.block, idx(kWholeThreads)), f.tid);
      when(ult(i, idx(total)), [&] {
        Value t = arith::DivUIOp::create(b, loc, i, idx(width));
        Value j = arith::RemUIOp::create(b, loc, i, idx(width));
        Value id = index(load(o.getIds(), t));
        storeF(o.getResult(), i,
               loadF(o.getTable(), addi(muli(id, idx(width)), j)));
      });
      record(f.func, ceilDiv(total, kWholeThreads), kWholeThreads);
    } else if (auto o = dyn_cast<graph::EmbeddingGradOp>(op)) {
      // d_table = accumulators + scatter-add(dy): the accumulating adds
      // that fusion folds in (a tied LM head's gradient, say) give the
      // starting value.
      Value out = o.getResult();
      SmallVector<Value> inits;
      while (!yielded(out)) {
        auto user = out.hasOneUse() ? dyn_cast<graph::AddOp>(*out.user_begin())
                                    : graph::AddOp();
        if (!user)
          return o.emitOpError("result must be a kernel result or be added "
                               "to one"),
                 failure();
        Value init = user.getLhs() == out ? user.getRhs() : user.getLhs();
        if (!isa<BlockArgument>(init))
          return o.emitOpError("is added to a value computed in the kernel"),
                 failure();
        inits.push_back(init);
        out = user.getResult();
        done.insert(user);
      }
      if (!elemOf(out).isF32())
        return o.emitOpError("needs an f32 table gradient (atomic adds)"),
               failure();
      int64_t total = numElements(out.getType());
      {
        Func f = begin(mod, name + "_init", kWholeThreads);
        Value i = addi(muli(f.block, idx(kWholeThreads)), f.tid);
        when(ult(i, idx(total)), [&] {
          Value x = f32c(0);
          for (Value init : inits)
            x = add(x, loadF(init, i));
          storeF(out, i, x);
        });
        record(f.func, ceilDiv(total, kWholeThreads), kWholeThreads);
      }
      int64_t tokens = numElements(o.getIds().getType());
      int64_t width = rowsOf(out).second;
      b.setInsertionPointToEnd(mod.getBody());
      Func f = begin(mod, name, kWholeThreads);
      Value i = addi(muli(f.block, idx(kWholeThreads)), f.tid);
      when(ult(i, idx(tokens * width)), [&] {
        Value t = arith::DivUIOp::create(b, loc, i, idx(width));
        Value j = arith::RemUIOp::create(b, loc, i, idx(width));
        Value id = index(load(o.getIds(), t));
        memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addf,
                                    loadF(o.getGrad(), i), mem(out),
                                    ValueRange{addi(muli(id, idx(width)), j)});
      });
      record(f.func, ceilDiv(tokens * width, kWholeThreads), kWholeThreads);
    } else if (auto o = dyn_cast<graph::GlobalNormOp>(op)) {
      // Per-block partial sums of squares, then one block adds them in
      // order: deterministic.
      int64_t chunk = kWholeThreads * kVec;
      SmallVector<int64_t> starts;
      int64_t blocks = 0;
      for (Value in : o->getOperands()) {
        starts.push_back(blocks);
        blocks += ceilDiv(numElements(in.getType()), chunk);
      }
      {
        Func f = begin(mod, name + "_partial", kWholeThreads);
        Value partial = f32c(0);
        // Dispatch on the block's tensor: a chain of ifs on block ranges.
        for (auto [k, in] : llvm::enumerate(o->getOperands())) {
          int64_t len = numElements(in.getType());
          Value lo = idx(starts[k]), hi = idx(starts[k] + ceilDiv(len, chunk));
          Value mine = arith::AndIOp::create(
              b, loc,
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge,
                                    f.block, lo),
              ult(f.block, hi));
          auto ifOp = scf::IfOp::create(b, loc, TypeRange{f32}, mine, true);
          {
            OpBuilder::InsertionGuard g(b);
            b.setInsertionPointToStart(ifOp.thenBlock());
            Value base = muli(arith::SubIOp::create(b, loc, f.block, lo),
                              idx(chunk));
            Value s = f32c(0);
            for (int64_t e = 0; e < kVec; ++e) {
              Value at = addi(base, addi(f.tid, idx(e * kWholeThreads)));
              Value ok = ult(at, idx(len));
              Value safe = arith::SelectOp::create(b, loc, ok, at, idx(0));
              Value x = loadF(in, safe);
              s = add(s, arith::SelectOp::create(b, loc, ok, mul(x, x),
                                                 f32c(0)));
            }
            scf::YieldOp::create(b, loc, ValueRange{s});
            b.setInsertionPointToStart(ifOp.elseBlock());
            scf::YieldOp::create(b, loc, ValueRange{f32c(0)});
          }
          partial = add(partial, ifOp.getResult(0));
        }
        Value sum = blockReduce(f, partial, false);
        when(thread0(f), [&] {
          memref::StoreOp::create(b, loc, sum, workspace, ValueRange{f.block});
        });
        record(f.func, blocks, kWholeThreads);
      }
      b.setInsertionPointToEnd(mod.getBody());
      Func f = begin(mod, name, kWholeThreads);
      Value total = stride(f, blocks, f32c(0), false,
                           [&](Value i) { return ws(i); });
      when(thread0(f), [&] {
        storeF(o.getResult(), idx(0),
               mul(f32c(o.getScale().convertToDouble()),
                   math::SqrtOp::create(b, loc, total)));
      });
      record(f.func, 1, kWholeThreads);
    } else if (auto o = dyn_cast<graph::CrossEntropyOp>(op)) {
      auto [rows, width] = rowsOf(o.getLogits());
      {
        // A block per token: max, then the sum of exponentials, streamed
        // over the vocabulary row.
        Func f = begin(mod, name + "_rows", kWholeThreads);
        Value rowStart = muli(f.block, idx(width));
        auto z = [&](Value j) { return loadF(o.getLogits(), addi(rowStart, j)); };
        Value mx = stride(f, width, f32c(-INFINITY), true, z);
        Value sum = stride(f, width, f32c(0), false, [&](Value j) {
          return math::ExpOp::create(b, loc,
                                     arith::SubFOp::create(b, loc, z(j), mx));
        });
        when(thread0(f), [&] {
          Value m = loadF(o.getLossMask(), f.block);
          Value keep = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE,
                                             m, f32c(0));
          Value label = index(load(o.getLabels(), f.block));
          Value inRow = ult(label, idx(width));
          Value safe = arith::SelectOp::create(b, loc, inRow, label, idx(0));
          Value nll = arith::SubFOp::create(
              b, loc, add(mx, math::LogOp::create(b, loc, sum)), z(safe));
          Value term = arith::SelectOp::create(b, loc, keep, mul(nll, m),
                                               f32c(0));
          memref::StoreOp::create(b, loc, term, workspace,
                                  ValueRange{f.block});
          memref::StoreOp::create(b, loc, m, workspace,
                                  ValueRange{addi(f.block, idx(rows))});
        });
        record(f.func, rows, kWholeThreads);
      }
      b.setInsertionPointToEnd(mod.getBody());
      Func f = begin(mod, name, kWholeThreads);
      Value total = stride(f, rows, f32c(0), false,
                           [&](Value i) { return ws(i); });
      Value count = stride(f, rows, f32c(0), false,
                           [&](Value i) { return ws(addi(i, idx(rows))); });
      when(thread0(f), [&] {
        storeF(o.getLoss(), idx(0),
               arith::DivFOp::create(
                   b, loc, total,
                   arith::MaximumFOp::create(b, loc, count, f32c(1))));
      });
      record(f.func, 1, kWholeThreads);
    } else if (auto o = dyn_cast<graph::CrossEntropyGradOp>(op)) {
      if (!yielded(o.getResult()))
        return o.emitOpError("result must be a kernel result"), failure();
      auto [rows, width] = rowsOf(o.getLogits());
      {
        Func f = begin(mod, name + "_count", kWholeThreads);
        Value count = stride(f, rows, f32c(0), false,
                             [&](Value i) { return loadF(o.getLossMask(), i); });
        when(thread0(f), [&] {
          memref::StoreOp::create(b, loc, count, workspace,
                                  ValueRange{idx(0)});
        });
        record(f.func, 1, kWholeThreads);
      }
      b.setInsertionPointToEnd(mod.getBody());
      Func f = begin(mod, name, kWholeThreads);
      Value rowStart = muli(f.block, idx(width));
      auto z = [&](Value j) { return loadF(o.getLogits(), addi(rowStart, j)); };
      Value m = loadF(o.getLossMask(), f.block);
      Value norm = arith::DivFOp::create(
          b, loc, loadF(o.getGrad(), idx(0)),
          arith::MaximumFOp::create(b, loc, ws(idx(0)), f32c(1)));
      Value scale = mul(norm, m);
      Value mx = stride(f, width, f32c(-INFINITY), true, z);
      Value sum = stride(f, width, f32c(0), false, [&](Value j) {
        return math::ExpOp::create(b, loc,
                                   arith::SubFOp::create(b, loc, z(j), mx));
      });
      Value lse = add(mx, math::LogOp::create(b, loc, sum));
      Value label = index(load(o.getLabels(), f.block));
      Value keep = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, m,
                                         f32c(0));
      scf::ForOp::create(
          b, loc, f.tid, idx(width), idx(kWholeThreads), ValueRange{},
          [&](OpBuilder &, Location, Value j, ValueRange) {
            Value p = mul(scale, math::ExpOp::create(
                                     b, loc,
                                     arith::SubFOp::create(b, loc, z(j), lse)));
            Value isLabel = arith::CmpIOp::create(
                b, loc, arith::CmpIPredicate::eq, j, label);
            Value g = arith::SelectOp::create(
                b, loc, isLabel, arith::SubFOp::create(b, loc, p, scale), p);
            // Masked tokens get zeros, as the interpreter leaves them.
            g = arith::SelectOp::create(b, loc, keep, g, f32c(0));
            storeF(o.getResult(), addi(rowStart, j), g);
            scf::YieldOp::create(b, loc);
          });
      record(f.func, rows, kWholeThreads);
    } else {
      return op->emitOpError("has no GPU lowering in octet-fused-to-gpu"),
             failure();
    }
  }
  if (!scalarList.empty())
    return scalarOps(mod, sym, scalarList, record);
  return success();
}

// What a region computes, without what names it: the body's ops, attributes
// and types, less the op's name, layer and the tensor and parameter names
// inside. Regions with the same key get the same kernels (every layer of a
// model shares one set), so each is generated and assembled once.
std::string regionKey(kernel::FusedOp fused) {
  std::string text;
  llvm::raw_string_ostream os(text);
  for (Type t : fused.getBodyBlock().getArgumentTypes())
    os << t << ",";
  for (Operation &op : fused.getBodyBlock()) {
    os << op.getName() << "(";
    for (Value v : op.getOperands()) {
      if (auto arg = dyn_cast<BlockArgument>(v))
        os << "a" << arg.getArgNumber();
      else
        os << "r" << cast<OpResult>(v).getResultNumber() << "@"
           << std::distance(fused.getBodyBlock().begin(),
                            v.getDefiningOp()->getIterator());
      os << ",";
    }
    os << ")";
    for (NamedAttribute a : op.getAttrs())
      if (a.getName() != "tensor" && a.getName() != "param")
        os << a.getName().getValue() << "=" << a.getValue() << ";";
    for (Type t : op.getResultTypes())
      os << t << ",";
    os << "\n";
  }
  return text;
}

struct FusedToGpuPass : impl::FusedToGpuBase<FusedToGpuPass> {
  using FusedToGpuBase::FusedToGpuBase;

  void runOnOperation() override {
    ModuleOp moduleOp = getOperation();
    SmallVector<kernel::FusedOp> fusedOps;
    moduleOp.walk([&](kernel::FusedOp op) { fusedOps.push_back(op); });
    if (fusedOps.empty())
      return;
    if (transposeTileRows < 0 || transposeTileRows % kRegisterTileRows) {
      moduleOp.emitError("transpose-tile-rows must be 0 or a multiple of ")
          << kRegisterTileRows << ", not " << (int64_t)transposeTileRows;
      return signalPassFailure();
    }
    OpBuilder b(&getContext());
    moduleOp->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                      b.getUnitAttr());
    llvm::StringSet<> used;
    llvm::StringMap<kernel::FusedOp> built;
    for (kernel::FusedOp fused : fusedOps) {
      // Its stores are memsets (plan::isStoredZeroFill).
      if (fused.isStoredZeroFill())
        continue;
      std::string key = regionKey(fused);
      if (kernel::FusedOp same = built.lookup(key)) {
        for (StringRef name : {"kernels", "launch", "workspace_bytes",
                               "zero_results"})
          fused->setAttr(name, same->getAttr(name));
        continue;
      }
      built[key] = fused;
      // gpu.modules share the module's symbol table with its functions.
      std::string sym = symbolFor(fused.getName());
      for (int i = 2; used.contains(sym) ||
                      SymbolTable::lookupSymbolIn(moduleOp, sym);
           ++i)
        sym = symbolFor(fused.getName()) + "_" + std::to_string(i);
      used.insert(sym);

      b.setInsertionPointToEnd(moduleOp.getBody());
      auto mod = gpu::GPUModuleOp::create(b, fused.getLoc(), sym);
      SmallVector<Attribute> kernels, launches;
      auto record = [&](gpu::GPUFuncOp f, int64_t grid, int64_t block,
                        int64_t sharedBytes = 0, int64_t cluster = 1,
                        bool programmatic = false) {
        auto ref = SymbolRefAttr::get(
            b.getStringAttr(sym), {FlatSymbolRefAttr::get(f.getNameAttr())});
        kernels.push_back(ref);
        SmallVector<NamedAttribute> attrs{
            b.getNamedAttr("kernel", ref),
            b.getNamedAttr("grid", b.getI64IntegerAttr(grid)),
            b.getNamedAttr("block", b.getI64IntegerAttr(block))};
        if (sharedBytes)
          attrs.push_back(
              b.getNamedAttr("shared_bytes", b.getI64IntegerAttr(sharedBytes)));
        if (cluster > 1)
          attrs.push_back(
              b.getNamedAttr("cluster", b.getI64IntegerAttr(cluster)));
        if (programmatic)
          attrs.push_back(b.getNamedAttr("programmatic", b.getUnitAttr()));
        launches.push_back(b.getDictionaryAttr(attrs));
      };
      // A region that cannot be lowered: its diagnostic is out; with
      // keep-going the others still get kernels.
      auto giveUp = [&] {
        mod.erase();
        built.erase(key);
        if (!keepGoing)
          signalPassFailure();
      };
      if (hasWholeOps(fused)) {
        WholeOpBuilder wb(fused, b);
        if (failed(wb.build(mod, sym, record))) {
          giveUp();
          if (!keepGoing)
            return;
          continue;
        }
        fused.setKernelsAttr(b.getArrayAttr(kernels));
        fused->setAttr("launch", b.getArrayAttr(launches));
        fused->setAttr("workspace_bytes",
                       b.getI64IntegerAttr(wb.workspaceFloats() * 4));
        fused->setAttr("zero_results", b.getDenseI64ArrayAttr({}));
        continue;
      }
      if (clusterNormTranspose) {
        if (std::optional<ClusterLaunch> l =
                buildNormTranspose(b, mod, sym, fused, numSMs)) {
          record(mod.lookupSymbol<gpu::GPUFuncOp>(sym), l->grid, l->block,
                 l->sharedBytes, l->cluster);
          fused.setKernelsAttr(b.getArrayAttr(kernels));
          fused->setAttr("launch", b.getArrayAttr(launches));
          fused->setAttr("workspace_bytes", b.getI64IntegerAttr(0));
          fused->setAttr("zero_results",
                         b.getDenseI64ArrayAttr({l->amaxResult}));
          continue;
        }
      }
      FailureOr<Plan> plan = planKernel(
          fused, numSMs, columnBlocksPerSM, rowBytesInFlight, rowBlocksPerSM,
          fused.getKind() == "multi_tensor" ? multiTensorBlocksPerSM
                                            : flatBlocksPerSM,
          flatChunks, transposeTileRows);
      if (failed(plan)) {
        giveUp();
        if (!keepGoing)
          return;
        continue;
      }
      KernelBuilder kb(fused, *plan, b);
      fp8::QuantizeOp quantizeInTranspose = kb.quantizeInTranspose();
      // The launch after the row kernel is its programmatic dependent
      // (H100, llama3-8b LayerNorm backward: 79.0-79.8% -> 80.0-80.4% of
      // copy).
      bool rowKernel = !plan->segments.empty() && !quantizeInTranspose;
      if (rowKernel)
        record(kb.buildMain(mod, sym), plan->totalBlocks, plan->threads);
      if (plan->workspaceFloats && !plan->transposes.empty()) {
        int64_t grid = 0;
        gpu::GPUFuncOp f = kb.buildColumnSumAndTransposes(
            mod, sym + "_colsum_transpose", grid);
        record(f, grid, kTransposeThreads, 0, 1, rowKernel);
      } else if (plan->workspaceFloats) {
        record(kb.buildColumnSum(mod, sym + "_colsum"), kb.columnSumBlocks(),
               kColumnSumThreads, 0, 1, rowKernel);
      } else if (!plan->transposes.empty()) {
        int64_t grid = 0;
        gpu::GPUFuncOp t =
            kb.buildTransposes(mod, sym + "_transpose", grid, quantizeInTranspose);
        record(t, grid, kTransposeThreads, 0, 1, rowKernel);
      }
      SmallVector<int64_t> zeroed;
      auto yield = cast<kernel::YieldOp>(fused.getBodyBlock().getTerminator());
      for (auto [i, v] : llvm::enumerate(yield.getValues())) {
        if (isa<BlockArgument>(v))
          return fused.emitOpError("yields its operand #")
                     << cast<BlockArgument>(v).getArgNumber()
                     << " unchanged; a kernel result must be computed",
                 signalPassFailure();
        for (const Segment &seg : plan->segments)
          if (seg.roles.count(v) && seg.roles.lookup(v) == Role::Amax)
            zeroed.push_back(i);
      }
      fused.setKernelsAttr(b.getArrayAttr(kernels));
      fused->setAttr("launch", b.getArrayAttr(launches));
      fused->setAttr("workspace_bytes",
                     b.getI64IntegerAttr(plan->workspaceFloats * 4));
      fused->setAttr("zero_results", b.getDenseI64ArrayAttr(zeroed));
    }
  }
};

} // namespace
} // namespace octet::codegen
