//===- KernelPlan.cpp - Segments, roles and sizes of a row kernel --------===//
//
// planKernel: which ops of a kernel.fused region form segments, the role of
// every value (row, column, per-row, scalar, column sum, amax), the thread
// count, the vector width, the chunks per thread, which blocks run which
// segment and which FP8 transposes the row kernel writes itself.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/KernelPlan.h"
#include "compiler/Codegen/TransposeKernel.h"

#include "dialects/graph/GraphDialect.h"
#include "dialects/kernel/KernelDialect.h"

#include "llvm/ADT/EquivalenceClasses.h"

#include <numeric>

using namespace mlir;

namespace octet::codegen {
namespace {

constexpr int64_t kMaxChunks = 16; // 8·16 = 128 registers per row tensor
// What the transposes a row kernel writes itself may cost: registers a
// thread may give to gathering its columns' bytes, shared bytes a block may
// park (static shared memory stops at 48 KiB), and the registers the
// resident-block request budgets beside the gathering: a base, and a
// current and a prefetched chunk (16 bytes each) per row input.
// Threads of a tiled block: one block a multiprocessor still has 128
// registers a thread.
constexpr int64_t kMaxTiledThreads = 512;
constexpr int64_t kMaxTileRegisters = 32;
constexpr int64_t kMaxParkBytes = 40 * 1024;
constexpr int64_t kTiledBaseRegisters = 32;
constexpr int64_t kRegistersPerRowInput = 8;
constexpr int64_t kRegistersPerSM = 65536;
constexpr int64_t kMaxBlocksPerSM = 32;

bool isColumnSum(Value v) {
  Operation *def = v.getDefiningOp();
  if (auto g = dyn_cast_or_null<graph::RMSNormGradOp>(def))
    return v == g.getWeightGrad();
  if (auto g = dyn_cast_or_null<graph::LayerNormGradOp>(def))
    return v == g.getWeightGrad() || v == g.getBiasGrad();
  return isa_and_nonnull<graph::BiasGradOp>(def);
}

// Whether the transpose launch can quantize `t`'s input itself where no
// result keeps it row-major (a weight's K-major cast,
// octet-step-local-fp8-weights): the region is that one tensorwise
// quantize of a kernel input (through reshapes) and the transpose, in
// whole tiles (RowKernelBuilder::quantizeInTranspose).
bool castsInTransposeLaunch(fp8::TransposeOp t, kernel::YieldOp yield) {
  auto q = t.getInput().getDefiningOp<fp8::QuantizeOp>();
  if (!q || !t.getInput().hasOneUse() || !isa<BlockArgument>(q.getScale()) ||
      !isa<BlockArgument>(t.getScale()) || !isScalarTensor(q.getScale()))
    return false;
  Value source = q.getInput();
  while (auto r = source.getDefiningOp<graph::ReshapeOp>())
    source = r.getInput();
  auto type = cast<RankedTensorType>(q.getInput().getType());
  if (!isa<BlockArgument>(source) || type.getRank() != 2 ||
      !canQuantizeInTranspose(type.getDimSize(0), type.getDimSize(1)))
    return false;
  return llvm::all_of(yield->getBlock()->without_terminator(),
                      [&](Operation &op) {
                        return &op == q.getOperation() ||
                               &op == t.getOperation() ||
                               (isa<graph::ReshapeOp>(op) &&
                                !llvm::is_contained(yield.getValues(),
                                                    op.getResult(0)));
                      });
}

// A transpose can trail the row kernel when its operands are in memory by
// then (kernel inputs or results) and only the kernel's results read it,
// or when the transpose launch quantizes its input itself
// (castsInTransposeLaunch).
bool isTrailingTranspose(Operation *op, kernel::YieldOp yield) {
  auto t = dyn_cast<fp8::TransposeOp>(op);
  if (!t || t.getInput().getType().getRank() != 2)
    return false;
  auto inMemory = [&](Value v) {
    return isa<BlockArgument>(v) || llvm::is_contained(yield.getValues(), v);
  };
  if ((!inMemory(t.getInput()) && !castsInTransposeLaunch(t, yield)) ||
      !inMemory(t.getScale()))
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
             graph::FillOp, fp8::QuantizeOp, fp8::DequantizeOp, fp8::AmaxOp>(
      op);
}

// The block quantizations of an RMSNorm's result in the region, their
// transposes and the reshapes between: the tile kernel after the row kernel
// runs them. Other block quantizations stay (and fail as unsupported).
DenseSet<Operation *> setAsideForTiles(Block &body) {
  DenseSet<Operation *> out;
  for (auto q : body.getOps<fp8::BlockQuantizeOp>()) {
    if (!throughReshapes(q.getInput()).getDefiningOp<graph::RMSNormOp>())
      continue;
    // The scales' factors in cuBLASLt's layout are written with them.
    auto withFactors = [&](Operation *op) {
      out.insert(op);
      for (Operation *user : op->getUsers())
        if (isa<fp8::BlockFactorsOp>(user))
          out.insert(user);
    };
    withFactors(q);
    for (Operation *user : q->getUsers())
      if (isa<fp8::TransposeOp>(user))
        withFactors(user);
    Value v = q.getInput();
    while (auto r = v.getDefiningOp<graph::ReshapeOp>()) {
      out.insert(r);
      v = r.getInput();
    }
  }
  // A reshape that something else reads as well stays in the row kernel,
  // and so do the reshapes it reads (last to first).
  SmallVector<Operation *> reshapes;
  for (auto r : body.getOps<graph::ReshapeOp>())
    if (out.contains(r))
      reshapes.push_back(r);
  for (Operation *r : llvm::reverse(reshapes))
    if (llvm::any_of(r->getUsers(),
                     [&](Operation *user) { return !out.contains(user); }))
      out.erase(r);
  return out;
}

} // namespace

FailureOr<KernelPlan> planKernel(kernel::FusedOp fused,
                                 const PlanOptions &options) {
  auto untiled = [&] {
    PlanOptions rowAtATime = options;
    rowAtATime.transposeTileRows = 0;
    return planKernel(fused, rowAtATime);
  };
  int64_t numSMs = options.numSMs;
  int64_t columnBlocksPerSM = options.columnBlocksPerSM;
  int64_t rowBytesInFlight = options.rowBytesInFlight;
  int64_t rowBlocksPerSM = options.rowBlocksPerSM;
  int64_t flatBlocksPerSM = options.flatBlocksPerSM;
  int64_t flatChunksOverride = options.flatChunks;
  int64_t transposeTileRows = options.transposeTileRows;
  Block &body = fused.getBodyBlock();
  auto yield = cast<kernel::YieldOp>(body.getTerminator());
  KernelPlan plan;
  DenseSet<Operation *> tileQuantized = setAsideForTiles(body);
  llvm::EquivalenceClasses<Operation *> classes;
  DenseMap<Value, Operation *> firstUser;
  for (Operation &op : body.without_terminator()) {
    if (tileQuantized.contains(&op)) {
      plan.tileQuantized.push_back(&op);
      continue;
    }
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
        isa<OpResult>(in) && llvm::is_contained(yield.getValues(), in) &&
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
        bytes += kVec *
                 cast<RankedTensorType>(v.getType())
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
        : looping
            ? std::clamp<int64_t>(rowBytesInFlight / 2 / bytesPerChunk(seg), 2,
                                  8)
            : std::clamp<int64_t>(bytesInFlight / bytesPerChunk(seg), 2, 8);
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
      seg.parkBytes += columns * threads * (seg.tileRows - kRegisterTileRows);
    }
    if (seg.tileRows &&
        (seg.tileRegisters > kMaxTileRegisters ||
         seg.parkBytes > kMaxParkBytes || threads > kMaxTiledThreads))
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
        int64_t dh =
            cast<RankedTensorType>(rope.getInput().getType()).getShape().back();
        int64_t half = dh / 2;
        bool sameThread = half % span == 0;
        bool inWarp = span % dh == 0 && half % vec == 0 && half / vec < kWarp &&
                      llvm::isPowerOf2_64(half / vec);
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
  // The 1/rms factors of each norm the tile kernel evaluates, a float a
  // row, after the column sums.
  for (auto norm : body.getOps<graph::RMSNormOp>())
    if (llvm::any_of(norm->getUsers(), [&](Operation *user) {
          return tileQuantized.contains(user);
        })) {
      auto type = cast<RankedTensorType>(norm.getType());
      plan.normInverseOffset[norm.getResult()] = plan.workspaceFloats;
      plan.workspaceFloats += type.getNumElements() / type.getShape().back();
    }
  return plan;
}

int64_t numElements(Type t) {
  return cast<RankedTensorType>(t).getNumElements();
}

Value throughReshapes(Value v) {
  while (auto r = v.getDefiningOp<graph::ReshapeOp>())
    v = r.getInput();
  return v;
}

bool isScalarTensor(Value v) {
  return cast<RankedTensorType>(v.getType()).getRank() == 0;
}

} // namespace octet::codegen
