#include "compiler/Checkpoint/HfCheckpoint.h"

#include "dialects/graph/GraphDialect.h"

using namespace mlir;

namespace octet {

using hf::HfParameterLayout;
using hf::HfPiece;

bool hasHfName(graph::VariableOp var) {
  return var.getHfName() || var->hasAttr("hf_names");
}

// The graph's side of a parameter's layout: its HF names and rows through
// hf::parameterLayout, then what only the graph says: that the HF tensors
// are stored transposed (GPT-2's Conv1D), or that the parameter is a part
// of one HF tensor (GPT-2's c_attn holds q, k and v side by side).
StatusOr<HfParameterLayout> hfLayoutOf(graph::VariableOp var) {
  std::string name = var.getSymName().str();
  // A sharded master (octet-shard-optimizer's `data_shards`) is laid out in
  // HF tensors as the whole parameter.
  SmallVector<int64_t> shape(var.getTensorType().getShape());
  if (auto parts = var->getAttrOfType<IntegerAttr>("data_shards"))
    shape[0] *= parts.getInt();
  std::vector<std::string> hfNames;
  std::vector<int64_t> rows;
  auto fusedNames = var->getAttrOfType<ArrayAttr>("hf_names");
  if (fusedNames) {
    // Stacked by octet-fuse-qkv: part i has split[i] rows.
    for (Attribute attr : fusedNames)
      hfNames.push_back(cast<StringAttr>(attr).str());
    if (auto split = var->getAttrOfType<DenseI64ArrayAttr>("split"))
      rows.assign(split.asArrayRef().begin(), split.asArrayRef().end());
  } else if (var.getHfName()) {
    hfNames.push_back(var.getHfName()->str());
  }
  StatusOr<HfParameterLayout> layout = hf::parameterLayout(
      name, std::vector<int64_t>(shape.begin(), shape.end()), hfNames, rows);
  if (!layout)
    return layout;

  bool transpose = var->hasAttr("graph.hf_transpose");
  for (HfPiece &piece : layout->pieces)
    piece.transpose = transpose;
  auto chunk = var->getAttrOfType<DenseI64ArrayAttr>("graph.hf_chunk");
  if (!chunk)
    return layout;
  int64_t paramRows = shape.empty() ? 1 : shape[0];
  if (fusedNames) {
    // Parts of one HF tensor sit side by side in it.
    for (HfPiece &piece : layout->pieces) {
      piece.hfRow = piece.paramRow;
      layout->hfRows[piece.hfName] = paramRows;
    }
    return layout;
  }
  if (chunk.size() != 2 || chunk[1] < 1 || chunk[0] < 0 || chunk[0] >= chunk[1])
    return Status::error("parameter \"" + name +
                         "\" has a malformed graph.hf_chunk");
  HfPiece &piece = layout->pieces[0];
  piece.hfRow = chunk[0] * paramRows;
  layout->hfRows[piece.hfName] = chunk[1] * paramRows;
  return layout;
}

StatusOr<std::vector<HfParameterLayout>> hfLayouts(ModuleOp module) {
  std::vector<HfParameterLayout> layouts;
  for (auto var : module.getOps<graph::VariableOp>()) {
    if (!var.isTrainable())
      continue;
    // The interpreter's variable store holds them as float32.
    if (!var.getTensorType().getElementType().isF32())
      return Status::error("parameter \"" + var.getSymName().str() +
                           "\" is not float32 in the graph; HF checkpoints "
                           "load into float32 parameters only");
    StatusOr<HfParameterLayout> layout = hfLayoutOf(var);
    if (!layout)
      return layout.status();
    layouts.push_back(std::move(*layout));
  }
  return layouts;
}

StatusOr<hf::HfLoadSummary> loadHfCheckpoint(const std::string &path,
                                             ModuleOp module,
                                             interp::VariableStore &store) {
  StatusOr<std::vector<HfParameterLayout>> layouts = hfLayouts(module);
  if (!layouts)
    return layouts.status();
  hf::HfLoadSummary summary;
  StatusOr<hf::HfWeights> weights =
      hf::readHfCheckpoint(path, *layouts, summary);
  if (!weights)
    return weights.status();
  for (HfParameterLayout &layout : *layouts)
    store.set(layout.name, interp::Tensor::fromFloats(
                               std::move(layout.shape),
                               std::move(weights->parameters.at(layout.name))));
  return summary;
}

StatusOr<size_t> exportHfCheckpoint(const std::string &directory,
                                    ModuleOp module,
                                    const interp::VariableStore &store,
                                    const hf::HfExportOptions &options) {
  StatusOr<std::vector<HfParameterLayout>> layouts = hfLayouts(module);
  if (!layouts)
    return layouts.status();
  std::map<std::string, std::vector<float>> parameters;
  for (const HfParameterLayout &layout : *layouts) {
    if (!store.has(layout.name))
      return Status::error("parameter \"" + layout.name +
                           "\" has no value to export");
    const interp::Tensor &t = store.get(layout.name);
    if (t.dtype() != DType::F32 || t.shape() != layout.shape)
      return Status::error("parameter \"" + layout.name + "\" holds a " +
                           dtypeName(t.dtype()) + " " +
                           interp::shapeString(t.shape()) +
                           " tensor; the graph declares f32 " +
                           interp::shapeString(layout.shape));
    parameters[layout.name].assign(t.f(), t.f() + t.numel());
  }
  return hf::writeHfCheckpoint(directory, parameters, *layouts, options);
}

} // namespace octet
