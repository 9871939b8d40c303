// Bundle files: deterministic bytes, content hash, and the errors a user
// sees for a bundle of another format version, a corrupt copy, or a plan
// slot outside its arena.

#include "bundle/Bundle.h"
#include "bundle/Describe.h"
#include "support/Sha256.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>

namespace octet::bundle {
namespace {

Bundle sample() {
  Bundle b;
  b.set_compiler_version("0.1.0");
  b.mutable_build()->set_spec_text("model { architecture: \"llama\" }");
  b.mutable_build()->set_target("sm_90a");
  auto *o = b.mutable_build()->add_options();
  o->set_key("precision");
  o->set_value("delayed");
  b.set_world_size(1);
  b.add_ranks()->set_rank(0);
  auto *arena = b.mutable_plan()->add_arenas();
  arena->set_name("main");
  arena->set_bytes(1 << 20);
  arena->set_alignment(256);
  auto *slot = b.mutable_plan()->add_slots();
  slot->set_name("layers.0.attn.wq");
  slot->set_kind(PARAMETER);
  slot->set_bytes(4096);
  auto *m = b.add_modules();
  m->set_name("fused");
  m->set_ptx(".version 8.0\n");
  return b;
}

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Bundle, SameContentGivesIdenticalBytes) {
  Bundle a = sample(), b = sample();
  std::string pa = ::testing::TempDir() + "/a.octet";
  std::string pb = ::testing::TempDir() + "/b.octet";
  ASSERT_TRUE(writeBundle(a, pa).isOk());
  ASSERT_TRUE(writeBundle(b, pb).isOk());
  EXPECT_EQ(readAll(pa), readAll(pb));
  EXPECT_EQ(a.content_hash().size(), 32u);
  // Rewriting what was read gives the same bytes again.
  auto back = readBundle(pa);
  ASSERT_TRUE(back.isOk()) << back.status().message();
  std::string pc = ::testing::TempDir() + "/c.octet";
  ASSERT_TRUE(writeBundle(*back, pc).isOk());
  EXPECT_EQ(readAll(pa), readAll(pc));
}

// The bundle goes through support/AtomicFile: a rewrite replaces the old
// file whole and leaves no temporary beside it, and a directory that cannot
// take the file is an error naming the bundle and the system's reason.
TEST(Bundle, WritesAtomicallyAndNamesAPathItCannotWrite) {
  std::string dir = ::testing::TempDir() + "/bundle-atomic";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string path = dir + "/m.octet";
  Bundle first = sample();
  ASSERT_TRUE(writeBundle(first, path).isOk());
  Bundle second = sample();
  second.mutable_modules(0)->set_ptx(".version 8.5\n");
  Status rewritten = writeBundle(second, path);
  ASSERT_TRUE(rewritten.isOk()) << rewritten.message();
  auto back = readBundle(path);
  ASSERT_TRUE(back.isOk()) << back.status().message();
  EXPECT_EQ(back->modules(0).ptx(), ".version 8.5\n");
  std::vector<std::string> names;
  for (const auto &entry : std::filesystem::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"m.octet"});

  // A regular file where the directory should be: no one can write there,
  // root included.
  std::string blocked = path + "/x.octet";
  Status st = writeBundle(first, blocked);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find(blocked), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("Not a directory"), std::string::npos)
      << st.message();
  std::string missing = dir + "/no-such-dir/x.octet";
  st = writeBundle(first, missing);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find(missing), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("No such file or directory"), std::string::npos)
      << st.message();
}

TEST(Bundle, HashChangesWithContent) {
  Bundle a = sample(), b = sample();
  b.mutable_build()->mutable_options(0)->set_value("current");
  EXPECT_NE(computeContentHash(a), computeContentHash(b));
}

TEST(Bundle, OtherFormatVersionIsRefusedWithTheFix) {
  Bundle b = sample();
  b.set_format_version(kBundleFormatVersion + 1);
  std::string bytes = finalizeAndSerialize(b);
  auto r = parseBundle(bytes, "bundle 'x.octet'");
  ASSERT_FALSE(r.isOk());
  const std::string &msg = r.status().message();
  EXPECT_NE(msg.find("format version " +
                     std::to_string(kBundleFormatVersion + 1)),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("octet compile"), std::string::npos) << msg;
}

TEST(Bundle, CorruptCopyIsRefused) {
  Bundle b = sample();
  std::string bytes = finalizeAndSerialize(b);
  Bundle edited;
  ASSERT_TRUE(edited.ParseFromString(bytes));
  edited.set_compiler_version("9.9.9");
  auto r = parseBundle(serializeDeterministic(edited), "bundle 'y.octet'");
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("corrupt"), std::string::npos);
  auto junk = parseBundle("not a bundle", "bundle 'z.octet'");
  ASSERT_FALSE(junk.isOk());
  EXPECT_NE(junk.status().message().find("z.octet"), std::string::npos);
}

TEST(Bundle, SlotPastItsArenaIsNamed) {
  Bundle b = sample();
  b.mutable_plan()->mutable_slots(0)->set_offset((1 << 20) - 256);
  Status st = validate(b);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("layers.0.attn.wq"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("arena 'main'"), std::string::npos);
}

Slot *addSlot(Bundle &b, const std::string &name, uint64_t offset,
              const std::string &program, int64_t first, int64_t last,
              const std::string &lastProgram = "") {
  Slot *s = b.mutable_plan()->add_slots();
  s->set_name(name);
  s->set_kind(ACTIVATION);
  s->set_offset(offset);
  s->set_bytes(4096);
  s->set_program(program);
  s->set_first_step(first);
  s->set_last_step(last);
  s->set_last_program(lastProgram);
  return s;
}

// Shared bytes are fine only between slots never live at once: other
// programs, disjoint step ranges. A persistent slot meets everything, and a
// step-local gradient spans the end of the train program and the start of
// the optimizer step.
TEST(Bundle, SlotsSharingBytesWhileLiveAreNamed) {
  Bundle ok = sample();
  addSlot(ok, "a", 8192, "train_microbatch", 0, 4);
  addSlot(ok, "b", 8192, "train_microbatch", 5, 9);
  addSlot(ok, "c", 8192, "optimizer_step", 0, 3);
  addSlot(ok, "grad.w", 12288, "train_microbatch", 6, 2, "optimizer_step");
  addSlot(ok, "d", 12288, "train_microbatch", 0, 5);
  addSlot(ok, "e", 12288, "optimizer_step", 3, 7);
  EXPECT_TRUE(validate(ok).isOk()) << validate(ok).message();

  struct Case {
    const char *name, *program;
    uint64_t offset;
    int64_t first, last;
  };
  for (Case c : {Case{"overlaps a", "train_microbatch", 8192 + 2048, 3, 3},
                 Case{"overlaps grad in train", "train_microbatch", 12288, 7, 8},
                 Case{"overlaps grad in optimizer", "optimizer_step", 12288, 1,
                      1},
                 Case{"overlaps the parameter", "eval", 0, 0, 0}}) {
    Bundle bad = ok;
    addSlot(bad, c.name, c.offset, c.program, c.first, c.last);
    Status st = validate(bad);
    ASSERT_FALSE(st.isOk()) << c.name;
    EXPECT_NE(st.message().find(std::string("'") + c.name + "'"),
              std::string::npos)
        << st.message();
    EXPECT_NE(st.message().find("share memory while both are live"),
              std::string::npos)
        << st.message();
  }
}

// A bundle with one launch whose first argument is a tensor map over a
// bf16 [2·128][4][64] slot (a Hopper attention operand: 64 KiB at byte 4096
// of the arena), boxes of 64 × 1 × 128 with the 128-byte swizzle.
Bundle withTensorMap() {
  Bundle b = sample();
  auto *slot = b.mutable_plan()->add_slots();
  slot->set_name("layers.0.attn.q");
  slot->set_kind(ACTIVATION);
  slot->set_offset(4096);
  slot->set_bytes(2 * 128 * 4 * 64 * 2);
  slot->set_dtype(BF16);
  auto *k = b.add_kernels();
  k->set_symbol("attention_fwd_hopper_0");
  auto *program = b.mutable_ranks(0)->add_programs();
  program->set_kind(TRAIN_MICROBATCH);
  auto *step = program->add_steps();
  step->set_label("attention forward");
  auto *launch = step->mutable_launch();
  launch->mutable_grid()->set_x(8);
  launch->mutable_block()->set_x(384);
  TensorMap *m = launch->add_args()->mutable_tensor_map();
  m->mutable_base()->set_slot(1);
  m->set_dtype(BF16);
  for (uint64_t d : {64, 4, 256})
    m->add_dims(d);
  m->add_strides(64 * 2);
  m->add_strides(4 * 64 * 2);
  for (uint32_t box : {64, 1, 128}) {
    m->add_box(box);
    m->add_element_strides(1);
  }
  m->set_swizzle(TENSOR_MAP_SWIZZLE_128B);
  m->set_l2_promotion(TENSOR_MAP_L2_PROMOTION_256B);
  *launch->add_args()->mutable_slot() = m->base();
  return b;
}

TensorMap &theMap(Bundle &b) {
  return *b.mutable_ranks(0)
              ->mutable_programs(0)
              ->mutable_steps(0)
              ->mutable_launch()
              ->mutable_args(0)
              ->mutable_tensor_map();
}

// Each rule of a tensor map (cuTensorMapEncodeTiled's, and staying inside
// its slot) refuses a record that breaks it, naming the launch, the
// argument, the slot and what is wrong; the record as emitted passes.
TEST(Bundle, TensorMapRulesAreEachChecked) {
  Bundle good = withTensorMap();
  ASSERT_TRUE(validate(good).isOk()) << validate(good).message();

  struct Case {
    const char *rule;
    std::function<void(Bundle &)> breakIt;
    const char *message;
  };
  const std::vector<Case> cases = {
      {"slot exists", [](Bundle &b) { theMap(b).mutable_base()->set_slot(7); },
       "refers to slot 7 but the plan has 2 slots"},
      {"element type", [](Bundle &b) { theMap(b).set_dtype(DTYPE_UNSPECIFIED); },
       "has no element type"},
      {"the slot's type", [](Bundle &b) { theMap(b).set_dtype(F32); },
       "is of f32 but the slot holds bf16"},
      {"rank", [](Bundle &b) {
         TensorMap &m = theMap(b);
         m.clear_dims();
         m.clear_strides();
         m.clear_box();
         m.clear_element_strides();
       },
       "has 0 dimensions; a tensor map has 1 to 5"},
      {"consistent lengths", [](Bundle &b) { theMap(b).add_strides(16); },
       "has 3 dimensions but 3 strides, 3 box sizes and 3 element strides"},
      {"interleaved rank", [](Bundle &b) {
         TensorMap &m = theMap(b);
         m.set_interleave(TENSOR_MAP_INTERLEAVE_16B);
         m.mutable_dims()->RemoveLast();
         m.mutable_strides()->RemoveLast();
         m.mutable_box()->RemoveLast();
         m.mutable_element_strides()->RemoveLast();
       },
       "is interleaved with 2 dimensions"},
      {"address alignment",
       [](Bundle &b) { theMap(b).mutable_base()->set_byte_offset(8); },
       "starts at byte 4104 of arena 'main'"},
      {"dimension size", [](Bundle &b) { theMap(b).set_dims(1, 0); },
       "dimension 1 has 0 elements; it must have 1 to 2^32"},
      {"box within 256", [](Bundle &b) { theMap(b).set_box(2, 512); },
       "dimension 2 has a box of 512 elements; a box is 1 to 256"},
      {"element stride", [](Bundle &b) { theMap(b).set_element_strides(0, 9); },
       "dimension 0 has element stride 9; it must be 1 to 8"},
      {"stride alignment", [](Bundle &b) { theMap(b).set_strides(0, 120); },
       "dimension 1 has a stride of 120 bytes; strides are multiples of 16"},
      {"inside the slot", [](Bundle &b) { theMap(b).set_dims(2, 257); },
       "reaches byte 131584 of a slot of 131072 bytes"},
      {"innermost box bytes", [](Bundle &b) {
         theMap(b).set_box(0, 4);
         theMap(b).set_swizzle(TENSOR_MAP_SWIZZLE_NONE);
       },
       "has an innermost box of 8 bytes; without interleave it must be a "
       "multiple of 16"},
      {"swizzle span", [](Bundle &b) { theMap(b).set_swizzle(TENSOR_MAP_SWIZZLE_64B); },
       "has an innermost box of 128 bytes, wider than its 64-byte swizzle span"},
      {"known swizzle", [](Bundle &b) { theMap(b).set_swizzle(TensorMapSwizzle(9)); },
       "has swizzle 9"},
      {"32-byte interleave", [](Bundle &b) {
         theMap(b).set_interleave(TENSOR_MAP_INTERLEAVE_32B);
       },
       "is interleaved by 32 bytes, which needs the 32-byte swizzle"},
      {"known interleave",
       [](Bundle &b) { theMap(b).set_interleave(TensorMapInterleave(5)); },
       "has interleave 5"},
      {"known L2 promotion",
       [](Bundle &b) { theMap(b).set_l2_promotion(TensorMapL2Promotion(4)); },
       "has L2 promotion 4"},
      {"known fill", [](Bundle &b) { theMap(b).set_oob_fill(TensorMapOobFill(2)); },
       "has out-of-bounds fill 2"},
  };
  for (const Case &c : cases) {
    Bundle b = withTensorMap();
    c.breakIt(b);
    Status st = validate(b);
    ASSERT_FALSE(st.isOk()) << c.rule << ": accepted";
    EXPECT_NE(st.message().find(c.message), std::string::npos)
        << c.rule << ": " << st.message();
    EXPECT_NE(st.message().find("argument 0 (tensor map)"), std::string::npos)
        << c.rule << ": " << st.message();
  }
}

// octet inspect lists a kernel's tensor maps under it, from its first launch.
TEST(Bundle, KernelReportShowsTensorMaps) {
  Bundle b = withTensorMap();
  std::ostringstream os;
  describeKernels(b, os);
  EXPECT_NE(os.str().find("tensor map (argument 0): layers.0.attn.q bf16 dims "
                          "[64, 4, 256] strides [128, 512] box [64, 1, 128] "
                          "swizzle 128B interleave none L2 256B oob zero"),
            std::string::npos)
      << os.str();
}

TEST(Bundle, WorldSizeMustMatchRankPrograms) {
  Bundle b = sample();
  b.set_world_size(2);
  Status st = validate(b);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("world_size is 2"), std::string::npos);
}

TEST(Bundle, PlanReportListsArenaAndLargestSlot) {
  Bundle b = sample();
  std::ostringstream os;
  describePlan(b, os);
  EXPECT_NE(os.str().find("arena 0 'main': 1.0 MiB"), std::string::npos)
      << os.str();
  EXPECT_NE(os.str().find("layers.0.attn.wq"), std::string::npos);
}

TEST(Bundle, WireDTypesConvertBothWays) {
  for (int v = DType_MIN; v <= DType_MAX; ++v) {
    DType wire = DType(v);
    std::optional<octet::DType> dtype = dtypeFromProto(wire);
    if (wire == DTYPE_UNSPECIFIED) {
      EXPECT_FALSE(dtype);
      EXPECT_STREQ(dtypeName(wire), "?");
      EXPECT_EQ(dtypeBytes(wire), 0u);
      continue;
    }
    ASSERT_TRUE(dtype) << DType_Name(wire);
    EXPECT_EQ(dtypeToProto(*dtype), wire);
    EXPECT_STREQ(dtypeName(wire), octet::dtypeName(*dtype));
    EXPECT_EQ(dtypeBytes(wire), octet::dtypeBytes(*dtype));
  }
  EXPECT_EQ(dtypeFromProto(F8E4M3FN), octet::DType::F8E4M3FN);
  // Types the wire format has no value for.
  for (octet::DType d : {octet::DType::F64, octet::DType::I16,
                         octet::DType::I8, octet::DType::Bool})
    EXPECT_EQ(dtypeToProto(d), DTYPE_UNSPECIFIED) << octet::dtypeName(d);
}

TEST(Sha256, KnownDigests) {
  auto hex = [](std::string_view s) {
    auto d = sha256(s);
    return toHex(std::string(d.begin(), d.end()));
  };
  EXPECT_EQ(hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

} // namespace
} // namespace octet::bundle
