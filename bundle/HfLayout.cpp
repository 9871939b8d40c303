#include "bundle/HfLayout.h"

#include "support/AtomicFile.h"

#include <algorithm>

namespace octet::bundle {

void setHfPieces(const hf::HfParameterLayout &layout, Parameter &parameter) {
  std::vector<hf::HfPiece> pieces = layout.pieces;
  std::stable_sort(pieces.begin(), pieces.end(),
                   [](const hf::HfPiece &a, const hf::HfPiece &b) {
                     return a.paramRow < b.paramRow;
                   });
  parameter.clear_hf_pieces();
  for (const hf::HfPiece &piece : pieces) {
    HfPiece *p = parameter.add_hf_pieces();
    p->set_tensor(piece.hfName);
    p->set_tensor_row(piece.hfRow);
    p->set_rows(piece.rows);
    auto rows = layout.hfRows.find(piece.hfName);
    if (rows != layout.hfRows.end())
      p->set_tensor_rows(rows->second);
    p->set_transpose(piece.transpose);
  }
}

StatusOr<std::optional<hf::HfParameterLayout>>
hfLayoutOf(const Parameter &parameter) {
  if (parameter.hf_pieces().empty())
    return std::optional<hf::HfParameterLayout>();
  hf::HfParameterLayout layout;
  layout.name = parameter.name();
  layout.shape.assign(parameter.shape().begin(), parameter.shape().end());
  int64_t row = 0;
  for (const HfPiece &p : parameter.hf_pieces()) {
    hf::HfPiece piece;
    piece.hfName = p.tensor();
    piece.hfRow = p.tensor_row();
    piece.paramRow = row;
    piece.rows = p.rows();
    piece.transpose = p.transpose();
    row += p.rows();
    if (p.tensor_rows() != 0)
      layout.hfRows[p.tensor()] = p.tensor_rows();
    layout.pieces.push_back(std::move(piece));
  }
  if (Status s = hf::checkHfLayout(layout); !s)
    return s.withContext("the bundle's hf_pieces (recompile the bundle)");
  return std::optional<hf::HfParameterLayout>(std::move(layout));
}

StatusOr<std::string> hfConfigForExport(const Bundle &bundle,
                                        const std::string &initWeights) {
  std::string config;
  if (!initWeights.empty()) {
    std::string beside = isDirectory(initWeights)
                             ? initWeights + "/config.json"
                             : "";
    if (!beside.empty() && isRegularFile(beside)) {
      auto text = readWholeFile(beside);
      if (!text)
        return text.status();
      config = *text;
    }
  }
  if (config.empty())
    config = bundle.build().hf_config();
  if (config.empty())
    return Status::error(
        "--save-hf: the bundle holds no HF config.json (its model has no "
        "transformers equivalent): export the checkpoint's "
        "model.safetensors with a config.json of your own");
  for (const Parameter &p : bundle.parameters())
    if (p.hf_pieces().empty())
      return Status::error("--save-hf: parameter '" + p.name() +
                           "' has no HF name in this bundle, so "
                           "transformers could not load it; the "
                           "checkpoints of --checkpoint-dir hold it under "
                           "its octet name");
  return config;
}

} // namespace octet::bundle
