//===- FusedToGpu.cpp - octet-fused-to-gpu --------------------------------===//
//
// The pass: one gpu.module per distinct kernel.fused region, built by the
// kernel family the region belongs to, and the region's launch contract
// (Launches.h). The families:
//   - whole-op kernels (WholeOpKernel.h): embedding, cross-entropy, global
//     norm, the step's scalars;
//   - the clustered RMSNorm + FP8 quantize + transpose (NormTransposeKernel.h);
//   - register-resident row kernels (KernelPlan.h plans them, RowKernel.h
//     builds them with their column sums and FP8 transposes), and the tile
//     kernel of an RMSNorm's blockwise quantizations after them.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen/KernelPlan.h"
#include "compiler/Codegen/Launches.h"
#include "compiler/Codegen/NormTransposeKernel.h"
#include "compiler/Codegen/Passes.h"
#include "compiler/Codegen/RowKernel.h"
#include "compiler/Codegen/WholeOpKernel.h"

#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/StringSet.h"

namespace octet::codegen {
#define GEN_PASS_DEF_FUSEDTOGPU
#include "compiler/Codegen/Passes.h.inc"
} // namespace octet::codegen

using namespace mlir;

namespace octet::codegen {
namespace {

std::string symbolFor(StringRef name) {
  std::string s;
  for (char c : name)
    s.push_back(llvm::isAlnum(c) ? c : '_');
  if (s.empty() || llvm::isDigit(s[0]))
    s.insert(s.begin(), 'k');
  return s;
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
      if (failed(checkOverwritesLowered(fused)))
        return signalPassFailure();
      std::string key = regionKey(fused);
      if (kernel::FusedOp same = built.lookup(key)) {
        copyLaunches(same, fused);
        continue;
      }
      built[key] = fused;
      // gpu.modules share the module's symbol table with its functions.
      std::string sym = symbolFor(fused.getName());
      for (int i = 2;
           used.contains(sym) || SymbolTable::lookupSymbolIn(moduleOp, sym);
           ++i)
        sym = symbolFor(fused.getName()) + "_" + std::to_string(i);
      used.insert(sym);

      b.setInsertionPointToEnd(moduleOp.getBody());
      auto mod = gpu::GPUModuleOp::create(b, fused.getLoc(), sym);
      LaunchList launches(b, sym);
      // A region that cannot be lowered: its diagnostic is out; with
      // keep-going the others still get kernels.
      auto giveUp = [&] {
        mod.erase();
        built.erase(key);
        if (!keepGoing)
          signalPassFailure();
      };
      if (hasWholeOps(fused)) {
        SmallVector<int64_t> zeroed;
        FailureOr<int64_t> workspaceBytes =
            buildWholeOpKernels(fused, b, mod, sym, launches, zeroed);
        if (failed(workspaceBytes)) {
          giveUp();
          if (!keepGoing)
            return;
          continue;
        }
        launches.apply(fused, *workspaceBytes, ArrayRef<int64_t>(zeroed));
        continue;
      }
      if (clusterNormTranspose) {
        if (std::optional<ClusterLaunch> l =
                buildNormTranspose(b, mod, sym, fused, numSMs)) {
          launches.add(sym, l->grid, l->block, l->sharedBytes, l->cluster);
          SmallVector<int64_t> zeroed;
          if (l->amaxResult >= 0)
            zeroed.push_back(l->amaxResult);
          launches.apply(fused, 0, ArrayRef<int64_t>(zeroed));
          continue;
        }
      }
      PlanOptions options;
      options.numSMs = numSMs;
      options.columnBlocksPerSM = columnBlocksPerSM;
      options.rowBytesInFlight = rowBytesInFlight;
      options.rowBlocksPerSM = rowBlocksPerSM;
      options.flatBlocksPerSM = fused.getKind() == "multi_tensor"
                                    ? multiTensorBlocksPerSM
                                    : flatBlocksPerSM;
      options.flatChunks = flatChunks;
      options.transposeTileRows = transposeTileRows;
      FailureOr<KernelPlan> plan = planKernel(fused, options);
      if (failed(plan)) {
        giveUp();
        if (!keepGoing)
          return;
        continue;
      }
      FailureOr<SmallVector<int64_t>> zeroed =
          buildRowKernels(fused, *plan, b, mod, sym, launches);
      if (failed(zeroed))
        return signalPassFailure();
      if (!plan->normInverseOffset.empty() &&
          failed(buildNormTileKernels(fused, b, mod, sym + "_tiles", launches,
                                      plan->normInverseOffset,
                                      plan->workspaceFloats))) {
        giveUp();
        if (!keepGoing)
          return;
        continue;
      }
      launches.apply(fused, plan->workspaceFloats * 4, *zeroed);
    }
  }
};

} // namespace
} // namespace octet::codegen
