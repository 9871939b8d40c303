#include "compiler/Transforms/Fusion/FusionReport.h"

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "dialects/graph/GraphDialect.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"

#include <map>
#include <set>

using namespace mlir;

namespace octet::fusion {

static int64_t bytesOf(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return 0;
  int64_t bits = t.getElementType().getIntOrFloatBitWidth();
  return t.getNumElements() * ((bits + 7) / 8);
}

static int64_t numel(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  return t && t.hasStaticShape() ? t.getNumElements() : 0;
}

// Floating-point operations per element of an op in a fused body.
static int64_t flopsOf(Operation &op) {
  if (op.getNumResults() == 0)
    return 0;
  int64_t n = numel(op.getResult(0).getType());
  if (isa<graph::RopeOp>(op))
    return numel(op.getOperand(0).getType()) * 4;
  if (auto mm = dyn_cast<graph::MatmulOp>(op)) {
    auto a = cast<RankedTensorType>(mm.getLhs().getType());
    return 2 * n * a.getDimSize(mm.getTransposeA() ? 0 : 1);
  }
  return llvm::TypeSwitch<Operation *, int64_t>(&op)
      .Case<graph::RMSNormOp>([&](auto) { return 4 * n; })
      .Case<graph::LayerNormOp>([&](auto) { return 7 * n; })
      .Case<graph::RMSNormGradOp, graph::LayerNormGradOp>(
          [&](auto) { return 10 * n; })
      .Case<graph::SwigluOp, graph::SiluOp>([&](auto) { return 6 * n; })
      .Case<graph::SwigluGradOp, graph::SiluGradOp>([&](auto) { return 10 * n; })
      .Case<graph::GeluOp, graph::GeluGradOp>([&](auto) { return 12 * n; })
      .Case<graph::CrossEntropyOp, graph::CrossEntropyGradOp>([&](Operation *o) {
        return 5 * numel(o->getOperand(o->getNumOperands() == 3 ? 0 : 1)
                             .getType());
      })
      .Case<graph::AdamWUpdateOp>([&](auto) { return 16 * n; })
      .Case<graph::ReshapeOp, graph::SliceOp, graph::ConcatOp, graph::FillOp,
            graph::EmbeddingOp>([&](auto) { return 0; })
      .Default([&](Operation *o) {
        // quantize, amax, add, mul, casts: one or two per element.
        return numel(o->getOperand(0).getType()) * (o->getNumOperands() > 0);
      });
}

KernelCost kernelCost(Operation *op) {
  KernelCost cost;
  if (!isa_and_nonnull<kernel::KernelDialect>(op->getDialect()) ||
      isa<kernel::YieldOp>(op))
    return cost;
  llvm::SetVector<Value> reads(op->getOperands().begin(),
                               op->getOperands().end());
  for (Value v : reads)
    cost.bytesRead += bytesOf(v.getType());
  for (Value v : op->getResults())
    cost.bytesWritten += bytesOf(v.getType());
  llvm::TypeSwitch<Operation *>(op)
      .Case([&](kernel::GemmOp g) { cost.flops = g.getFlops(); })
      .Case([&](kernel::AttentionFwdOp a) { cost.flops = a.getFlops(); })
      .Case([&](kernel::AttentionBwdOp a) { cost.flops = a.getFlops(); })
      .Case([&](kernel::FusedOp f) {
        for (Operation &inner : f.getBodyBlock().without_terminator())
          cost.flops += flopsOf(inner);
      });
  return cost;
}

std::vector<KernelInfo> collectKernels(ModuleOp module) {
  std::vector<KernelInfo> out;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.getSymName() != "train_microbatch" &&
        func.getSymName() != "optimizer_step")
      continue;
    for (Operation &op : func.getBody().front()) {
      if (!isa_and_nonnull<kernel::KernelDialect>(op.getDialect()))
        continue;
      KernelInfo info;
      auto section = op.getAttrOfType<StringAttr>("section");
      info.section = section ? section.str()
                             : (func.getSymName() == "optimizer_step"
                                    ? "optimizer"
                                    : "backward");
      info.layer = layerOf(&op);
      info.cost = kernelCost(&op);
      llvm::TypeSwitch<Operation *>(&op)
          .Case([&](kernel::GemmOp g) {
            info.kind = "gemm";
            info.name = (g.getParam() ? g.getParam()->str() : std::string("?")) +
                        " " + (g.getRole() ? g.getRole()->str() : "");
            info.ops = "gemm";
            if (g.getEpilogueKind() != "none")
              info.ops += "+" + g.getEpilogueKind().str();
            if (g.getC())
              info.ops += "+accumulate";
            if (g.getAScale())
              info.ops += " fp8";
          })
          .Case([&](kernel::AttentionFwdOp) {
            info.kind = "attention_fwd";
            info.name = info.ops = "attention_fwd";
          })
          .Case([&](kernel::AttentionBwdOp) {
            info.kind = "attention_bwd";
            info.name = info.ops = "attention_bwd";
          })
          .Case([&](kernel::CopyOp c) {
            info.kind = "copy";
            info.name = info.ops = c.getTranspose() ? "transpose" : "copy";
          })
          .Case([&](kernel::CollectiveOp c) {
            info.kind = "collective";
            info.name = c.getKind().str() + "(" + c.getGroup().str() + ")";
            info.ops = std::to_string(c.getInputs().size()) + " tensors";
          })
          .Case([&](kernel::FusedOp f) {
            info.kind = "fused";
            info.name = f.getName().str() + " [" + f.getKind().str() + "]";
            info.hasGemm = !f.getBodyBlock().getOps<graph::MatmulOp>().empty();
            std::map<std::string, int> counts;
            std::vector<std::string> order;
            for (Operation &inner : f.getBodyBlock().without_terminator()) {
              std::string n = inner.getName().getStringRef().str();
              if (!counts.count(n))
                order.push_back(n);
              ++counts[n];
            }
            for (const std::string &n : order) {
              if (!info.ops.empty())
                info.ops += "+";
              info.ops += n;
              if (counts[n] > 1)
                info.ops += "x" + std::to_string(counts[n]);
            }
          })
          .Default([&](Operation *) { info.kind = "other"; });
      out.push_back(std::move(info));
    }
  }
  return out;
}

namespace {

struct Totals {
  int64_t gemm = 0, attention = 0, fused = 0, copy = 0, collective = 0;
  int64_t memBytes = 0, bytes = 0, flops = 0;
  void add(const KernelInfo &k) {
    if (k.kind == "gemm")
      ++gemm;
    else if (k.kind == "attention_fwd" || k.kind == "attention_bwd")
      ++attention;
    else if (k.kind == "fused")
      ++fused;
    else if (k.kind == "copy")
      ++copy;
    else if (k.kind == "collective")
      ++collective;
    int64_t b = k.cost.bytesRead + k.cost.bytesWritten;
    bytes += b;
    if (k.memoryBound())
      memBytes += b;
    flops += k.cost.flops;
  }
  int64_t kernels() const { return gemm + attention + fused + copy + collective; }
};

using Key = std::pair<std::string, int64_t>;

std::map<Key, Totals> perLayer(const std::vector<KernelInfo> &kernels) {
  std::map<Key, Totals> out;
  for (const KernelInfo &k : kernels)
    out[{k.section, k.layer}].add(k);
  return out;
}

double mb(int64_t bytes) { return double(bytes) / 1.0e6; }

const char *kSections[] = {"forward", "backward", "optimizer"};

} // namespace

void printFusionReport(const std::vector<KernelInfo> &before,
                       const std::vector<KernelInfo> &after,
                       llvm::raw_ostream &os) {
  os << "fusion report (train step: @train_microbatch, @optimizer_step)\n\n";
  os << "kernels after fusion:\n";
  os << llvm::format("  %-9s %5s %-13s %-44s %10s %10s %10s  %s\n", "section",
                     "layer", "kind", "name", "read MB", "write MB", "GFLOP",
                     "ops fused");
  for (const KernelInfo &k : after)
    os << llvm::format("  %-9s %5lld %-13s %-44s %10.2f %10.2f %10.3f  %s\n",
                       k.section.c_str(), (long long)k.layer, k.kind.c_str(),
                       k.name.c_str(), mb(k.cost.bytesRead),
                       mb(k.cost.bytesWritten), double(k.cost.flops) / 1e9,
                       k.ops.c_str());

  auto b = perLayer(before), a = perLayer(after);
  os << "\nper layer, before -> after fusion (layer -1: outside the layers):\n";
  os << llvm::format("  %-9s %5s %9s %9s %9s %9s %9s %23s %12s\n", "section",
                     "layer", "kernels", "gemm", "attention", "fused", "copy",
                     "mem-bound MB", "GFLOP");
  // Every (section, layer) either side has: before fusion the optimizer's
  // per-parameter kernels carry layers its one kernel after fusion does not.
  std::set<Key> keys;
  for (auto &entry : b)
    keys.insert(entry.first);
  for (auto &entry : a)
    keys.insert(entry.first);
  for (const char *section : kSections)
    for (const Key &key : keys) {
      if (key.first != section)
        continue;
      const Totals &u = b[key], &t = a[key];
      os << llvm::format(
          "  %-9s %5lld %4lld->%-4lld %4lld->%-4lld %4lld->%-4lld "
          "%4lld->%-4lld %4lld->%-4lld %10.1f->%-10.1f %12.2f\n",
          section, (long long)key.second, (long long)u.kernels(),
          (long long)t.kernels(), (long long)u.gemm, (long long)t.gemm,
          (long long)u.attention, (long long)t.attention, (long long)u.fused,
          (long long)t.fused, (long long)u.copy, (long long)t.copy,
          mb(u.memBytes), mb(t.memBytes), double(t.flops) / 1e9);
    }

  os << "\nper section, before -> after fusion:\n";
  for (const char *section : kSections) {
    Totals u, t;
    for (const KernelInfo &k : before)
      if (k.section == section)
        u.add(k);
    for (const KernelInfo &k : after)
      if (k.section == section)
        t.add(k);
    os << llvm::format("  %-9s kernels %lld -> %lld, memory-bound %.1f -> "
                       "%.1f MB, all bytes %.1f -> %.1f MB, %.1f GFLOP\n",
                       section, (long long)u.kernels(), (long long)t.kernels(),
                       mb(u.memBytes), mb(t.memBytes), mb(u.bytes),
                       mb(t.bytes), double(t.flops) / 1e9);
  }
  Totals u, t;
  for (const KernelInfo &k : before)
    u.add(k);
  for (const KernelInfo &k : after)
    t.add(k);
  os << llvm::format("  %-9s kernels %lld -> %lld, memory-bound %.1f -> "
                     "%.1f MB, all bytes %.1f -> %.1f MB, %.1f GFLOP\n",
                     "step", (long long)u.kernels(), (long long)t.kernels(),
                     mb(u.memBytes), mb(t.memBytes), mb(u.bytes), mb(t.bytes),
                     double(t.flops) / 1e9);

  // The worst transformer layer, which CI bounds.
  os << "\nmaxima over transformer layers (after fusion):\n";
  int64_t worstBefore = 0, worstAfter = 0;
  double worstRatio = 0;
  bool first = true;
  for (const char *section : {"forward", "backward"}) {
    Totals worst;
    for (auto &[key, tl] : a)
      if (key.first == section && key.second >= 0) {
        worst.gemm = std::max(worst.gemm, tl.gemm);
        worst.attention = std::max(worst.attention, tl.attention);
        worst.fused = std::max(worst.fused, tl.fused);
        worst.copy = std::max(worst.copy, tl.copy);
      }
    os << llvm::format("  %-9s gemm %lld, attention %lld, fused %lld, copy "
                       "%lld\n",
                       section, (long long)worst.gemm,
                       (long long)worst.attention, (long long)worst.fused,
                       (long long)worst.copy);
  }
  // Forward and backward only: before fusion the optimizer's per-parameter
  // kernels carry their layer, after it they are one kernel outside the
  // layers, which would flatter the ratio.
  auto inLayer = [](const KernelInfo &k) {
    return k.layer >= 0 && k.memoryBound() &&
           (k.section == "forward" || k.section == "backward");
  };
  std::map<int64_t, std::pair<int64_t, int64_t>> layerBytes;
  for (const KernelInfo &k : before)
    if (inLayer(k))
      layerBytes[k.layer].first += k.cost.bytesRead + k.cost.bytesWritten;
  for (const KernelInfo &k : after)
    if (inLayer(k))
      layerBytes[k.layer].second += k.cost.bytesRead + k.cost.bytesWritten;
  for (auto &[layer, pair] : layerBytes) {
    double ratio = pair.second ? double(pair.first) / double(pair.second) : 0;
    if (first || ratio < worstRatio) {
      worstRatio = ratio;
      worstBefore = pair.first;
      worstAfter = pair.second;
      first = false;
    }
  }
  os << llvm::format("  memory-bound bytes per layer (forward + backward), "
                     "least reduced layer: %.1f -> %.1f MB (%.2fx lower)\n",
                     mb(worstBefore), mb(worstAfter), worstRatio);
}

} // namespace octet::fusion
