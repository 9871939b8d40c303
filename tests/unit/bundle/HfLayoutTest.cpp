// A parameter's HF layout through the bundle: what the compiler writes the
// runtime reads back as it was, and pieces that do not tile the parameter
// are refused with its name.

#include "bundle/HfLayout.h"

#include <gtest/gtest.h>

namespace octet::bundle {
namespace {

bool sameLayout(const hf::HfParameterLayout &a,
                const hf::HfParameterLayout &b) {
  if (a.name != b.name || a.shape != b.shape || a.hfRows != b.hfRows ||
      a.pieces.size() != b.pieces.size())
    return false;
  for (size_t i = 0; i < a.pieces.size(); ++i) {
    const hf::HfPiece &x = a.pieces[i], &y = b.pieces[i];
    if (x.hfName != y.hfName || x.hfRow != y.hfRow ||
        x.paramRow != y.paramRow || x.rows != y.rows ||
        x.transpose != y.transpose)
      return false;
  }
  return true;
}

TEST(HfLayout, FusedQkvRoundTripsThroughTheBundle) {
  auto layout = hf::parameterLayout(
      "layers.0.attn.wqkv", {24, 16},
      {"model.layers.0.self_attn.q_proj.weight",
       "model.layers.0.self_attn.k_proj.weight",
       "model.layers.0.self_attn.v_proj.weight"},
      {16, 4, 4});
  ASSERT_TRUE(layout.isOk()) << layout.status().message();
  Parameter p;
  p.set_name("layers.0.attn.wqkv");
  p.add_shape(24);
  p.add_shape(16);
  setHfPieces(*layout, p);
  ASSERT_EQ(p.hf_pieces_size(), 3);
  EXPECT_EQ(p.hf_pieces(1).tensor(), "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(p.hf_pieces(1).rows(), 4);
  auto back = hfLayoutOf(p);
  ASSERT_TRUE(back.isOk()) << back.status().message();
  ASSERT_TRUE(back->has_value());
  EXPECT_TRUE(sameLayout(**back, *layout));
}

TEST(HfLayout, PartOfATransposedTensorRoundTrips) {
  // GPT-2's c_attn: the key is rows 8..15 of the transposed [8, 24].
  hf::HfParameterLayout layout =
      hf::singleTensorLayout("h.0.attn.wk", {8, 8}, "h.0.attn.c_attn.weight");
  layout.pieces[0].hfRow = 8;
  layout.pieces[0].transpose = true;
  layout.hfRows["h.0.attn.c_attn.weight"] = 24;
  Parameter p;
  p.set_name("h.0.attn.wk");
  p.add_shape(8);
  p.add_shape(8);
  setHfPieces(layout, p);
  EXPECT_EQ(p.hf_pieces(0).tensor_rows(), 24);
  EXPECT_TRUE(p.hf_pieces(0).transpose());
  auto back = hfLayoutOf(p);
  ASSERT_TRUE(back.isOk()) << back.status().message();
  EXPECT_TRUE(sameLayout(**back, layout));
  EXPECT_FALSE(hf::isWholeTensor(**back));
}

TEST(HfLayout, NoPiecesIsNoLayoutAndBadPiecesAreRefused) {
  Parameter p;
  p.set_name("layers.0.attn.wqkv");
  p.add_shape(24);
  p.add_shape(16);
  auto none = hfLayoutOf(p);
  ASSERT_TRUE(none.isOk());
  EXPECT_FALSE(none->has_value());
  // 16 + 4 rows of 24.
  for (int64_t rows : {16, 4}) {
    HfPiece *piece = p.add_hf_pieces();
    piece->set_tensor("t" + std::to_string(rows));
    piece->set_rows(rows);
  }
  auto bad = hfLayoutOf(p);
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("\"layers.0.attn.wqkv\""),
            std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("recompile"), std::string::npos);
}

} // namespace
} // namespace octet::bundle
