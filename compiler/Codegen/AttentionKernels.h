// What the attention kernels of octet-attention-to-gpu share: the op's
// shape, a forward query tile's bounds and its output rows, the backward's
// workspace, and the Hopper forward and backward (HopperAttention.cpp) that
// the pass builds beside the mma.sync kernels (AttentionToGpu.cpp). Internal
// to compiler/Codegen.

#ifndef OCTET_COMPILER_CODEGEN_ATTENTIONKERNELS_H
#define OCTET_COMPILER_CODEGEN_ATTENTIONKERNELS_H

#include "compiler/Codegen/Emitter.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace octet::codegen::attention {

constexpr double kLog2e = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;
// Rows of a 16-row MMA tile; the fragment layouts are those of
// mma.m16n8k16 with A row-major and B column-major.
constexpr int64_t kTile = 16;

// What every attention kernel needs to know about its op.
struct AttnShape {
  int64_t batch = 0, seq = 0, qHeads = 0, kvHeads = 0, headDim = 0;
  bool causal = false;
  double scale = 0;
  int64_t cuLen = 0; // elements of cu_seqlens; 0 without documents
  int64_t group() const { return qHeads / kvHeads; }
};

// Workspace of the backward pass, in 4-byte words: the f32 dQ accumulator,
// D = rowsum(dO∘O) [B,Hq,S], and with documents each token's document
// bounds within its row (i32 [B·S] twice). The prep kernel fills it, the
// main kernel adds into dq, the `_dq` kernel rounds dq to bf16. The dQ
// accumulator is [B,S,Hq,Dh] for the mma.sync backward; the Hopper
// backward's is in tiles (dqTileWord) that one bulk reduction adds whole.
struct BwdWorkspace {
  int64_t dq = 0, delta = 0, docLo = 0, docHi = 0, words = 0;
  explicit BwdWorkspace(const AttnShape &s) {
    int64_t tokens = s.batch * s.seq;
    delta = tokens * s.qHeads * s.headDim;
    docLo = delta + tokens * s.qHeads;
    docHi = docLo + (s.cuLen ? tokens : 0);
    words = docHi + (s.cuLen ? tokens : 0);
  }
};

// The Hopper backward's dQ accumulator: tiles of 64 query rows × 64
// columns, [B][Hq][S/64][Dh/64] of them, each row-major with its 32-byte
// pieces (8 columns) swizzled, piece p of row r at p ^ (r % 8). `i0` is
// the tile's first row within its batch row; the result is the tile's
// first word.
constexpr int64_t kDqTileRows = 64, kDqTileCols = 64;
mlir::Value dqTileWord(Emitter &e, const AttnShape &s, mlir::Value batch,
                       mlir::Value head, mlir::Value i0, mlir::Value colTile);

// Byte offset of (row, 16-byte chunk) in a swizzled tile of `rowBytes`.
mlir::Value swizzled(Emitter &e, mlir::Value row, mlir::Value chunk,
                     int64_t rowBytes);

// A forward CTA's query tile and what its rows see: the CTA's (query tile,
// head, batch row), the longest (last, when causal) tiles dealt first; the
// keys row i sees, [lo(i), hi(i)]; the key tiles [tileBegin, tileEnd) that
// hold every key some row of the tile sees.
struct QueryTile {
  mlir::Value batch, head, kvHead, q0, rowStart, loLast, hiFirst, tileBegin,
      tileEnd;
  std::function<std::pair<mlir::Value, mlir::Value>(mlir::Value)> bounds;
};

QueryTile queryTileOf(Emitter &e, const AttnShape &s, mlir::Value cu,
                      int64_t rows, int64_t keyTile);

// A backward CTA's key tile and the query tiles it visits: (key tile, kv
// head, batch row) from the block id, the first key tiles first (under a
// causal mask they see the most query tiles); the query tiles of
// `queryRows` rows, of every query head of the kv head's group, that hold
// some row seeing a key of [j0, j0 + keyRows) (document bounds from the
// prep's workspace `ws`): `steps` of them, step → (query head, first row).
struct KeyTile {
  mlir::Value batch, kvHead, j0, rowStart, tileLo, tilesPerHead, steps;
  int64_t queryRows = 0, group = 0;
  mlir::Value headOf(Emitter &e, mlir::Value step) const;
  mlir::Value rowOf(Emitter &e, mlir::Value step) const;
};

KeyTile keyTileOf(Emitter &e, const AttnShape &s, mlir::Value ws,
                  int64_t keyRows, int64_t queryRows);

// Query row `row` of the tile from this thread's accumulators: out = O / l
// (bf16; `o` holds the thread's column pairs 8·i + 2·t4, +1), lse = m·scale
// + ln l, with l summed over the row's four threads first.
void storeOutputRow(Emitter &e, const AttnShape &s, const QueryTile &t,
                    mlir::Value out, mlir::Value lse, mlir::Value row,
                    mlir::Value t4, llvm::ArrayRef<mlir::Value> o,
                    mlir::Value m, mlir::Value lsum);

// A CTA of three warpgroups per (128-row query tile, query head, batch row):
// warpgroup 0 loads (one thread issues the bulk tensor copies), warpgroups 1
// and 2 each own 64 query rows. Key/value tiles of 128 rows go through
// `stages` shared slots, each with a `full` mbarrier (the copy's bytes
// arrived) and an `empty` one (every consumer warp is done with it).
struct HopperFwdTiling {
  int64_t queryTile = 128, keyTile = 128, stages = 2;
  static constexpr int64_t threads = 384;
  // Registers a thread after setmaxnreg: the loader gives back what the
  // consumers take (65536 a multiprocessor: 128·24 + 256·240 ≤ 65536).
  static constexpr int64_t loaderRegs = 24, consumerRegs = 240;
};

// The 128-byte swizzle: a tile is stored as column blocks of 64 bf16
// (128 bytes a row), each block rows × 128 bytes, 16-byte chunk c of row r
// at c ^ (r % 8), which is what TMA writes with CU_TENSOR_MAP_SWIZZLE_128B
// and what a wgmma descriptor of layout type 1 reads.
constexpr int64_t kSwizzleRow = 128, kBlockCols = 64;

// The tensor maps a Hopper forward op takes before its buffers, recorded
// on the op for whoever launches it: one per operand named, a 3-D view
// [B·S][heads][Dh] of it (innermost last here, first in
// cuTensorMapEncodeTiled), boxes of box_columns × 1 × box_rows elements.
constexpr llvm::StringLiteral kTensorMapsAttr = "tensor_maps";

// Whether the Hopper forward takes shape `s`; else `why` says what it
// lacks.
bool hopperForwardCovers(const AttnShape &s, std::string &why);

// Arguments: the tensor maps of q, k, v (grid constants), then q, k, v,
// [cu_seqlens], out, lse. Returns the dynamic shared bytes.
int64_t buildHopperForward(mlir::OpBuilder &b, mlir::gpu::GPUModuleOp mod,
                           llvm::StringRef name, const AttnShape &s,
                           const HopperFwdTiling &t, mlir::Location loc);

// A Hopper backward CTA per (128-row key tile, kv head, batch row): the
// loader warpgroup brings K and V once, then a 64-row query tile's Q, dO,
// lse and D (and document bounds) per step through `stages` slots, over
// every query tile of every query head of the kv head's group; consumer
// warpgroups 1 and 2 own 64 key rows each (dK, dV in registers) and split
// the query tile's dQ by columns (Dh 128; with Dh 64 the first computes it
// all), added to the f32 accumulator by bulk reductions, a row each.
struct HopperBwdTiling {
  int64_t keyTile = 128, queryTile = 64, stages = 2;
  static constexpr int64_t threads = 384;
  static constexpr int64_t loaderRegs = 24, consumerRegs = 240;
};

// Whether the Hopper backward takes shape `s`; else `why` says what it
// lacks.
bool hopperBackwardCovers(const AttnShape &s, std::string &why);

// Arguments: the tensor maps of dout, q, k, v (grid constants), then
// dout, q, k, v, out, lse, [cu_seqlens], dq, dk, dv, workspace (the mma.sync
// backward's, filled by its prep kernel). Returns the dynamic shared bytes.
int64_t buildHopperBackward(mlir::OpBuilder &b, mlir::gpu::GPUModuleOp mod,
                            llvm::StringRef name, const AttnShape &s,
                            const HopperBwdTiling &t, mlir::Location loc);

} // namespace octet::codegen::attention

#endif // OCTET_COMPILER_CODEGEN_ATTENTIONKERNELS_H
