// octet-fuse-qkv: projections of one input become one GEMM over a
// concatenated weight variable.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <map>

namespace octet {
#define GEN_PASS_DEF_OCTETFUSEQKV
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;
using namespace octet::graph;

namespace {

RankedTensorType resized(Type type, int64_t dim, int64_t size) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] = size;
  return RankedTensorType::get(shape, t.getElementType());
}

int64_t lastDim(Type type) {
  return cast<RankedTensorType>(type).getRank() - 1;
}

// "layers.0.attn.wq", "layers.0.attn.wk" → "layers.0.attn.wqk";
// "...w_gate", "...w_up" → "...w_gate_up".
std::string fusedName(ArrayRef<std::string> names) {
  StringRef first = names.front();
  StringRef prefix = first.substr(0, first.rfind('.') + 1);
  SmallVector<StringRef> tails;
  for (const std::string &n : names)
    tails.push_back(StringRef(n).drop_front(prefix.size()));
  size_t common = 0;
  while (llvm::all_of(tails, [&](StringRef t) {
    return t.size() > common + 1 && t[common] == tails[0][common];
  }))
    ++common;
  std::string out = prefix.str() + tails[0].take_front(common).str();
  bool letters = llvm::all_of(tails, [&](StringRef t) {
    return t.size() == common + 1;
  });
  for (auto [i, t] : llvm::enumerate(tails)) {
    if (i && !letters)
      out += "_";
    out += t.drop_front(common).str();
  }
  return out;
}

struct Group {
  std::vector<std::string> names; // weights, in row order
  std::vector<int64_t> rows;
  std::string fused;
};

struct Simplifier {
  // slice(src, dim, off) as (src, off, size) when `v` is one.
  static bool sliceOf(Value v, Value &src, int64_t &off, int64_t &size,
                      int64_t dim) {
    auto s = v.getDefiningOp<SliceOp>();
    if (!s || s.getDim() != dim)
      return false;
    src = s.getInput();
    off = s.getOffset();
    size = cast<RankedTensorType>(v.getType()).getDimSize(dim);
    return true;
  }
};

// concat of slices of one tensor that tile it in order → the tensor.
struct ConcatOfSlices : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConcatOp op,
                                PatternRewriter &rewriter) const override {
    Value src;
    int64_t next = 0;
    for (Value v : op.getInputs()) {
      Value s;
      int64_t off, size;
      if (!Simplifier::sliceOf(v, s, off, size, op.getDim()) ||
          (src && s != src) || off != next)
        return failure();
      src = s;
      next += size;
    }
    if (!src || src.getType() != op.getType())
      return failure();
    rewriter.replaceOp(op, src);
    return success();
  }
};

// concat(add(slice(A, i), slice(B, i))) → add(A, B); same for fills.
struct ConcatOfAdds : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConcatOp op,
                                PatternRewriter &rewriter) const override {
    SmallVector<Value> lhs, rhs;
    for (Value v : op.getInputs()) {
      auto add = v.getDefiningOp<AddOp>();
      if (!add)
        return failure();
      lhs.push_back(add.getLhs());
      rhs.push_back(add.getRhs());
    }
    auto join = [&](ArrayRef<Value> parts) {
      return ConcatOp::create(rewriter, op.getLoc(), op.getType(), parts,
                              op.getDim());
    };
    Value l = join(lhs), r = join(rhs);
    rewriter.replaceOpWithNewOp<AddOp>(op, op.getType(), l, r);
    return success();
  }
};

struct ConcatOfFills : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConcatOp op,
                                PatternRewriter &rewriter) const override {
    std::optional<APFloat> value;
    for (Value v : op.getInputs()) {
      auto fill = v.getDefiningOp<FillOp>();
      if (!fill || (value && *value != fill.getValue()))
        return failure();
      value = fill.getValue();
    }
    rewriter.replaceOpWithNewOp<FillOp>(op, op.getType(),
                                        rewriter.getF64FloatAttr(
                                            value->convertToDouble()));
    return success();
  }
};

// global_norm over every slice of a tensor → over the tensor.
struct NormOfSlices : OpRewritePattern<GlobalNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GlobalNormOp op,
                                PatternRewriter &rewriter) const override {
    std::map<Operation *, int64_t> covered;
    for (Value v : op.getInputs()) {
      Value src;
      int64_t off, size;
      if (Simplifier::sliceOf(v, src, off, size, 0))
        covered[src.getDefiningOp()] += size;
    }
    for (auto &[def, rows] : covered) {
      if (!def || rows != cast<RankedTensorType>(def->getResult(0).getType())
                              .getDimSize(0))
        continue;
      SmallVector<Value> inputs;
      bool placed = false;
      for (Value v : op.getInputs()) {
        Value src;
        int64_t off, size;
        if (Simplifier::sliceOf(v, src, off, size, 0) &&
            src.getDefiningOp() == def) {
          if (!placed)
            inputs.push_back(src);
          placed = true;
          continue;
        }
        inputs.push_back(v);
      }
      rewriter.modifyOpInPlace(op, [&] { op.getInputsMutable().assign(inputs); });
      return success();
    }
    return failure();
  }
};

struct FuseQkv : public octet::impl::OctetFuseQkvBase<FuseQkv> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::vector<Group> groups = findGroups(module);
    if (groups.empty())
      return;
    for (const Group &g : groups)
      if (failed(mergeVariables(module, g)))
        return signalPassFailure();
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      dedupeLoads(func);
      for (bool changed = true; changed;) {
        changed = fuseLinears(func) | fuseDgrads(func) | fuseWgrads(func) |
                  fuseAdamW(func);
        RewritePatternSet patterns(&getContext());
        patterns.add<ConcatOfSlices, ConcatOfAdds, ConcatOfFills,
                     NormOfSlices>(&getContext());
        bool simplified = false;
        (void)applyPatternsGreedily(func, std::move(patterns),
                                    GreedyRewriteConfig(), &simplified);
        changed |= simplified;
      }
    }
  }

  // Bias-free linears of @forward that share their input and read weights
  // of one layer straight from variables.
  std::vector<Group> findGroups(ModuleOp module) {
    std::vector<Group> groups;
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward || forward.isExternal())
      return groups;
    llvm::MapVector<Value, SmallVector<LinearOp>> byInput;
    forward.walk([&](LinearOp l) {
      auto load = l.getWeight().getDefiningOp<LoadOp>();
      if (!l.getBias() && load && l.getParam() &&
          *l.getParam() == load.getVariable())
        byInput[l.getInput()].push_back(l);
    });
    for (auto &[input, linears] : byInput) {
      if (linears.size() < 2)
        continue;
      Group g;
      std::optional<int64_t> layer =
          fusion::layerOfName(*linears.front().getParam());
      bool ok = true;
      for (LinearOp l : linears) {
        ok &= fusion::layerOfName(*l.getParam()) == layer;
        g.names.push_back(l.getParam()->str());
        g.rows.push_back(
            cast<RankedTensorType>(l.getWeight().getType()).getDimSize(0));
      }
      if (!ok)
        continue;
      g.fused = fusedName(g.names);
      groups.push_back(g);
    }
    return groups;
  }

  LogicalResult mergeVariables(ModuleOp module, const Group &g) {
    // Every variable named <prefix><weight> for each weight of the group.
    std::map<std::string, SmallVector<VariableOp>> byPrefix;
    for (auto var : module.getOps<VariableOp>())
      for (auto [i, name] : llvm::enumerate(g.names))
        if (var.getSymName().ends_with(name)) {
          std::string prefix =
              var.getSymName().drop_back(name.size()).str();
          if (!prefix.empty() && prefix.back() != '.')
            continue;
          auto &vars = byPrefix[prefix];
          if (vars.size() == i)
            vars.push_back(var);
        }
    OpBuilder b(module.getContext());
    for (auto &[prefix, vars] : byPrefix) {
      if (vars.size() != g.names.size())
        continue;
      std::string name = prefix + g.fused;
      VariableOp first = vars.front();
      int64_t total = 0;
      SmallVector<Attribute> from, hf;
      for (VariableOp v : vars) {
        total += v.getTensorType().getDimSize(0);
        from.push_back(b.getStringAttr(v.getSymName()));
        if (v.getHfName())
          hf.push_back(b.getStringAttr(*v.getHfName()));
      }
      b.setInsertionPoint(first);
      auto fused = cast<VariableOp>(b.clone(*first));
      fused.setSymName(name);
      fused.setTypeAttr(TypeAttr::get(resized(first.getTensorType(), 0, total)));
      fused->removeAttr("hf_name");
      fused->setAttr("fused_from", b.getArrayAttr(from));
      fused->setAttr("split", b.getDenseI64ArrayAttr(g.rows));
      if (hf.size() == vars.size())
        fused->setAttr("hf_names", b.getArrayAttr(hf));
      for (auto func : module.getOps<func::FuncOp>())
        if (failed(rewriteAccesses(func, vars, fused, g.rows)))
          return failure();
      for (VariableOp v : vars)
        v.erase();
    }
    return success();
  }

  LogicalResult rewriteAccesses(func::FuncOp func, SmallVector<VariableOp> vars,
                                VariableOp fused, ArrayRef<int64_t> rows) {
    OpBuilder b(func.getContext());
    SmallVector<StoreOp> stores(vars.size());
    SmallVector<LoadOp> loads;
    bool any = false;
    func.walk([&](Operation *op) {
      for (auto [i, v] : llvm::enumerate(vars)) {
        if (auto load = dyn_cast<LoadOp>(op);
            load && load.getVariable() == v.getSymName())
          loads.push_back(load);
        if (auto store = dyn_cast<StoreOp>(op);
            store && store.getVariable() == v.getSymName()) {
          if (stores[i])
            any = true; // two writes: handled below as an error
          stores[i] = store;
        }
      }
    });
    if (any)
      return func.emitError("octet-fuse-qkv: a function writes ")
             << fused.getSymName() << "'s parts more than once";
    for (LoadOp load : loads) {
      size_t index = llvm::find_if(vars, [&](VariableOp v) {
                       return v.getSymName() == load.getVariable();
                     }) - vars.begin();
      int64_t offset = 0;
      for (size_t i = 0; i < index; ++i)
        offset += rows[i];
      b.setInsertionPoint(load);
      auto whole = LoadOp::create(b, load.getLoc(), fused.getTensorType(),
                                  fused.getSymName());
      auto slice = SliceOp::create(b, load.getLoc(), load.getType(), whole,
                                   b.getI64IntegerAttr(0),
                                   b.getI64IntegerAttr(offset));
      load.replaceAllUsesWith(slice.getResult());
      load.erase();
    }
    if (llvm::none_of(stores, [](StoreOp s) { return bool(s); }))
      return success();
    if (llvm::any_of(stores, [](StoreOp s) { return !s; }))
      return func.emitError("octet-fuse-qkv: ")
             << fused.getSymName() << " is written only in part";
    StoreOp last = stores.front();
    for (StoreOp s : stores)
      if (last->isBeforeInBlock(s))
        last = s;
    b.setInsertionPoint(last);
    SmallVector<Value> parts;
    for (StoreOp s : stores)
      parts.push_back(s.getValue());
    auto joined = ConcatOp::create(b, last.getLoc(), fused.getTensorType(),
                                   parts, b.getI64IntegerAttr(0));
    StoreOp::create(b, last.getLoc(), joined, fused.getSymName());
    for (StoreOp s : stores)
      s.erase();
    return success();
  }

  // One read of each variable before its first write, at the top.
  void dedupeLoads(func::FuncOp func) {
    Block &body = func.getBody().front();
    std::map<std::string, LoadOp> first;
    std::set<std::string> written;
    SmallVector<LoadOp> loads;
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (auto store = dyn_cast<StoreOp>(op))
        written.insert(store.getVariable().str());
      auto load = dyn_cast<LoadOp>(op);
      if (!load || written.count(load.getVariable().str()))
        continue;
      auto [it, inserted] = first.try_emplace(load.getVariable().str(), load);
      if (inserted) {
        load->moveBefore(&body, body.begin());
        continue;
      }
      load.replaceAllUsesWith(it->second.getResult());
      load.erase();
    }
  }

  // Groups ops of `func` by a key; each group's members in program order.
  template <typename OpT, typename KeyFn>
  std::map<std::pair<Operation *, Operation *>, SmallVector<OpT>>
  groupBy(func::FuncOp func, KeyFn key) {
    std::map<std::pair<Operation *, Operation *>, SmallVector<OpT>> out;
    for (OpT op : func.getBody().front().getOps<OpT>())
      if (auto k = key(op))
        out[*k].push_back(op);
    return out;
  }

  // True if the slices (offset, size) of members tile [0, total).
  template <typename OpT>
  bool tiles(ArrayRef<OpT> members, function_ref<Value(OpT)> sliced,
             int64_t total, SmallVector<OpT> &ordered) {
    std::map<int64_t, OpT> byOffset;
    for (OpT m : members) {
      Value src;
      int64_t off, size;
      Simplifier::sliceOf(sliced(m), src, off, size, 0);
      byOffset[off] = m;
    }
    int64_t next = 0;
    for (auto &[off, m] : byOffset) {
      if (off != next)
        return false;
      next += cast<RankedTensorType>(sliced(m).getType()).getDimSize(0);
      ordered.push_back(m);
    }
    return next == total && ordered.size() == members.size();
  }

  static Operation *sliceSource(Value v) {
    Value src;
    int64_t off, size;
    if (!Simplifier::sliceOf(v, src, off, size, 0))
      return nullptr;
    return src.getDefiningOp();
  }

  static std::string paramOf(Operation *load) {
    return cast<LoadOp>(load).getVariable().str();
  }

  // linear(x, slice(W, i)) for every part of W → one linear.
  bool fuseLinears(func::FuncOp func) {
    bool changed = false;
    auto groups = groupBy<LinearOp>(func, [](LinearOp l)
        -> std::optional<std::pair<Operation *, Operation *>> {
      Operation *w = sliceSource(l.getWeight());
      if (!w || l.getBias() || !isa<LoadOp>(w))
        return std::nullopt;
      return std::make_pair(l.getInput().getDefiningOp() ? l.getInput().getDefiningOp() : nullptr, w);
    });
    for (auto &[key, members] : groups) {
      SmallVector<LinearOp> ordered;
      Value w = key.second->getResult(0);
      // Same input value, not just the same defining op.
      if (llvm::any_of(members, [&](LinearOp l) {
            return l.getInput() != members.front().getInput();
          }))
        continue;
      if (!tiles<LinearOp>(members, [](LinearOp l) { return l.getWeight(); },
                           cast<RankedTensorType>(w.getType()).getDimSize(0),
                           ordered))
        continue;
      OpBuilder b(members.front());
      Value x = members.front().getInput();
      int64_t total = cast<RankedTensorType>(w.getType()).getDimSize(0);
      auto out = LinearOp::create(
          b, members.front().getLoc(),
          resized(members.front().getType(), lastDim(members.front().getType()),
                  total),
          x, w, Value(), b.getStringAttr(paramOf(key.second)));
      b.setInsertionPointAfter(out);
      int64_t offset = 0;
      for (LinearOp l : ordered) {
        auto s = SliceOp::create(b, l.getLoc(), l.getType(), out,
                                 b.getI64IntegerAttr(lastDim(l.getType())),
                                 b.getI64IntegerAttr(offset));
        b.setInsertionPointAfter(s);
        offset += cast<RankedTensorType>(l.getType()).getShape().back();
        l.replaceAllUsesWith(s.getResult());
      }
      // Erased only now: the builder's insertion point may sit on them.
      for (LinearOp l : ordered)
        l.erase();
      changed = true;
    }
    return changed;
  }

  // Σ_i matmul(dy_i, slice(W, i)) → matmul(concat(dy_i), W): the parts add
  // into one input gradient, so the first part carries the whole product and
  // the others drop out of their sums.
  bool fuseDgrads(func::FuncOp func) {
    bool changed = false;
    auto groups = groupBy<MatmulOp>(func, [](MatmulOp m)
        -> std::optional<std::pair<Operation *, Operation *>> {
      Operation *w = sliceSource(m.getRhs());
      if (!w || m.getRole() != "dgrad" || m.getTransposeA() ||
          m.getTransposeB() || !isa<LoadOp>(w))
        return std::nullopt;
      return std::make_pair(nullptr, w);
    });
    for (auto &[key, members] : groups) {
      SmallVector<MatmulOp> ordered;
      Value w = key.second->getResult(0);
      if (!tiles<MatmulOp>(members, [](MatmulOp m) { return m.getRhs(); },
                           cast<RankedTensorType>(w.getType()).getDimSize(0),
                           ordered))
        continue;
      // The product replaces the last part (every dy is defined by then);
      // the others must only feed adds (through one reshape at most), from
      // which they drop out.
      MatmulOp head = members.back();
      bool ok = true;
      auto addOf = [](Operation *op) -> AddOp {
        if (!op->hasOneUse())
          return nullptr;
        Operation *user = *op->getUsers().begin();
        if (auto reshape = dyn_cast<ReshapeOp>(user)) {
          if (!reshape->hasOneUse())
            return nullptr;
          return dyn_cast<AddOp>(*reshape->getUsers().begin());
        }
        return dyn_cast<AddOp>(user);
      };
      for (MatmulOp m : members)
        if (m != head)
          ok &= static_cast<bool>(addOf(m));
      Operation *at = head;
      if (!ok)
        continue;
      OpBuilder b(at);
      SmallVector<Value> dys;
      int64_t total = 0;
      for (MatmulOp m : ordered) {
        dys.push_back(m.getLhs());
        total += cast<RankedTensorType>(m.getLhs().getType()).getDimSize(1);
      }
      auto dy = ConcatOp::create(b, head.getLoc(),
                                 resized(head.getLhs().getType(), 1, total),
                                 dys, b.getI64IntegerAttr(1));
      auto product = MatmulOp::create(b, head.getLoc(), head.getType(), dy, w,
                                      false, false, head.getRoleAttr(),
                                      b.getStringAttr(paramOf(key.second)));
      head.replaceAllUsesWith(product.getResult());
      for (MatmulOp m : members) {
        if (m == head)
          continue;
        AddOp add = addOf(m);
        Operation *mid = *m->getUsers().begin();
        Value part = mid == add.getOperation() ? Value(m.getResult())
                                               : mid->getResult(0);
        Value other = add.getLhs() == part ? add.getRhs() : add.getLhs();
        add.replaceAllUsesWith(other);
        add.erase();
        if (mid != add.getOperation())
          mid->erase();
      }
      for (MatmulOp m : members)
        m.erase();
      changed = true;
    }
    return changed;
  }

  // matmul(dy_i, x, transpose_a) for every part of W (by param) → one
  // product whose row blocks are the parts.
  bool fuseWgrads(func::FuncOp func) {
    bool changed = false;
    std::map<std::string, std::string> partOf; // part param → fused name
    std::map<std::string, SmallVector<int64_t>> split;
    for (auto var : getOperation().getOps<VariableOp>())
      if (auto from = var->getAttrOfType<ArrayAttr>("fused_from"))
        for (Attribute a : from)
          partOf[cast<StringAttr>(a).str()] = var.getSymName().str();
    std::map<std::pair<std::string, void *>, SmallVector<MatmulOp>> groups;
    for (MatmulOp m : func.getBody().front().getOps<MatmulOp>())
      if (m.getRole() == "wgrad" && m.getTransposeA() && !m.getTransposeB() &&
          m.getParam() && partOf.count(m.getParam()->str()))
        groups[{partOf[m.getParam()->str()],
                m.getRhs().getAsOpaquePointer()}]
            .push_back(m);
    for (auto &[entry, members] : groups) {
      std::pair<std::string, Value> key = {entry.first,
                                           members.front().getRhs()};
      auto var = getOperation().lookupSymbol<VariableOp>(key.first);
      auto from = var->getAttrOfType<ArrayAttr>("fused_from");
      if (members.size() != from.size())
        continue;
      // Order by the part's position in the fused variable.
      SmallVector<MatmulOp> ordered;
      for (Attribute a : from)
        for (MatmulOp m : members)
          if (*m.getParam() == cast<StringAttr>(a).getValue())
            ordered.push_back(m);
      if (ordered.size() != members.size())
        continue;
      // At the last part: every dy is defined, and the parts' readers (the
      // accumulation) come later.
      MatmulOp firstOp = members.back();
      bool ok = true;
      for (MatmulOp m : members)
        for (Operation *u : m->getUsers())
          ok &= firstOp->isBeforeInBlock(u);
      if (!ok)
        continue;
      OpBuilder b(firstOp);
      SmallVector<Value> dys;
      int64_t total = 0;
      for (MatmulOp m : ordered) {
        dys.push_back(m.getLhs());
        total += cast<RankedTensorType>(m.getLhs().getType()).getDimSize(1);
      }
      auto dy = ConcatOp::create(b, firstOp.getLoc(),
                                 resized(firstOp.getLhs().getType(), 1, total),
                                 dys, b.getI64IntegerAttr(1));
      auto product = MatmulOp::create(
          b, firstOp.getLoc(), var.getTensorType().clone(
              cast<RankedTensorType>(firstOp.getType()).getElementType()),
          dy, key.second, true, false, firstOp.getRoleAttr(),
          b.getStringAttr(key.first));
      b.setInsertionPointAfter(product);
      int64_t offset = 0;
      for (MatmulOp m : ordered) {
        auto s = SliceOp::create(b, m.getLoc(), m.getType(), product,
                                 b.getI64IntegerAttr(0),
                                 b.getI64IntegerAttr(offset));
        b.setInsertionPointAfter(s);
        offset += cast<RankedTensorType>(m.getType()).getDimSize(0);
        m.replaceAllUsesWith(s.getResult());
      }
      for (MatmulOp m : ordered)
        m.erase();
      changed = true;
    }
    return changed;
  }

  // AdamW over the parts of one parameter (slices at the same offsets of
  // param, grad and moments) → one update over the whole.
  bool fuseAdamW(func::FuncOp func) {
    bool changed = false;
    std::map<Operation *, SmallVector<AdamWUpdateOp>> groups;
    for (auto op : func.getBody().front().getOps<AdamWUpdateOp>())
      if (Operation *p = sliceSource(op.getParam()))
        groups[p].push_back(op);
    for (auto &[param, members] : groups) {
      SmallVector<AdamWUpdateOp> ordered;
      if (members.size() < 2 ||
          !tiles<AdamWUpdateOp>(
              members, [](AdamWUpdateOp a) { return a.getParam(); },
              cast<RankedTensorType>(param->getResult(0).getType())
                  .getDimSize(0),
              ordered))
        continue;
      AdamWUpdateOp first = ordered.front();
      bool ok = true;
      Operation *sources[4];
      for (unsigned i = 0; i < 4; ++i)
        sources[i] = sliceSource(first->getOperand(i));
      for (AdamWUpdateOp m : members) {
        ok &= m->getAttrDictionary() == first->getAttrDictionary();
        for (unsigned i = 0; i < 4; ++i)
          ok &= sources[i] && sliceSource(m->getOperand(i)) == sources[i] &&
                m->getOperand(i).getDefiningOp<SliceOp>().getOffset() ==
                    m.getParam().getDefiningOp<SliceOp>().getOffset();
        for (unsigned i = 4; i < 7; ++i)
          ok &= m->getOperand(i) == first->getOperand(i);
      }
      // At the last member, every result user must come later.
      AdamWUpdateOp last = members.back();
      for (AdamWUpdateOp m : members)
        for (Operation *u : m->getUsers())
          ok &= last->isBeforeInBlock(u);
      if (!ok)
        continue;
      OpBuilder b(last);
      SmallVector<Value> operands;
      for (unsigned i = 0; i < 4; ++i)
        operands.push_back(sources[i]->getResult(0));
      for (unsigned i = 4; i < 7; ++i)
        operands.push_back(first->getOperand(i));
      SmallVector<Type> types;
      for (unsigned i = 0; i < 3; ++i)
        types.push_back(operands[i == 0 ? 0 : i + 1].getType());
      OperationState state(last.getLoc(), last->getName());
      state.addOperands(operands);
      state.addTypes(types);
      state.addAttributes(last->getAttrs());
      Operation *whole = b.create(state);
      b.setInsertionPointAfter(whole);
      for (AdamWUpdateOp m : members) {
        int64_t offset = m.getParam().getDefiningOp<SliceOp>().getOffset();
        for (unsigned i = 0; i < 3; ++i) {
          auto s = SliceOp::create(b, m.getLoc(), m->getResult(i).getType(),
                                   whole->getResult(i), b.getI64IntegerAttr(0),
                                   b.getI64IntegerAttr(offset));
          b.setInsertionPointAfter(s);
          m->getResult(i).replaceAllUsesWith(s.getResult());
        }
      }
      for (AdamWUpdateOp m : members)
        m.erase();
      changed = true;
    }
    return changed;
  }
};

} // namespace
