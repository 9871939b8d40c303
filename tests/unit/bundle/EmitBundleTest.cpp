// `octet compile SPEC -o X.octet` end to end: the bundle is byte-identical
// across runs, parses and validates, carries the spec, parameters, state,
// plan, programs and the codegen's kernels, and every launch matches its
// kernel's PTX parameter list and stays inside the slots it names.

#include "bundle/Bundle.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

using namespace octet::bundle;

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string compile(const std::string &spec, const std::string &out) {
  std::string cmd = std::string(OCTET_BINARY) + " compile " +
                    OCTET_SOURCE_DIR "/examples/" + spec + " -o " + out +
                    " > " + out + ".log 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n"
                                         << readFile(out + ".log");
  return readFile(out);
}

// `.entry symbol(...)` of `ptx` up to the next entry; empty when missing.
std::string entryText(const std::string &ptx, const std::string &symbol) {
  size_t at = ptx.find(".entry " + symbol + "(");
  if (at == std::string::npos)
    return "";
  size_t next = ptx.find(".entry ", at + 1);
  return ptx.substr(at, next == std::string::npos ? std::string::npos
                                                  : next - at);
}

// The parameter types of an entry's text, in order (".u64", ".f32", ...;
// ".b8[128] align 64" for a byte array passed by value, a tensor map).
std::vector<std::string> entryParams(const std::string &entry) {
  std::vector<std::string> types;
  std::string list = entry.substr(0, entry.find(')'));
  static const std::regex param(
      R"(\.param\s+(?:\.align\s+(\d+)\s+(\.b8)\s+\w+\[(\d+)\]|(\.[a-z0-9]+)))");
  for (std::sregex_iterator it(list.begin(), list.end(), param), e; it != e;
       ++it)
    types.push_back((*it)[4].matched
                        ? std::string((*it)[4])
                        : std::string((*it)[2]) + "[" + std::string((*it)[3]) +
                              "] align " + std::string((*it)[1]));
  return types;
}

bool argMatches(const KernelArg &arg, const std::string &ptxType) {
  switch (arg.value_case()) {
  case KernelArg::kSlot:
  case KernelArg::kTable:
  case KernelArg::kU64:
  case KernelArg::kI64:
    return ptxType == ".u64" || ptxType == ".s64" || ptxType == ".b64";
  case KernelArg::kI32:
  case KernelArg::kU32:
    return ptxType == ".u32" || ptxType == ".s32" || ptxType == ".b32";
  case KernelArg::kF32:
    return ptxType == ".f32" || ptxType == ".b32";
  case KernelArg::kTensorMap:
    return ptxType == ".b8[128] align 64";
  default:
    return false;
  }
}

// Every launch of a kernel with code passes as many arguments as its PTX
// entry takes, of matching kinds, each slot reference inside its slot; an
// memset stays inside its slot. A programmatic launch may start before the
// kernel ahead of it ends, so its kernel must wait (griddepcontrol.wait)
// before it reads anything, and it must follow a launch. `checked` counts
// the launches checked, `programmatic` the programmatic ones.
void checkLaunches(const Bundle &b, int &checked, int &programmatic) {
  std::map<uint32_t, std::vector<std::string>> params;
  std::set<uint32_t> waits; // kernels whose entry has griddepcontrol.wait
  for (int k = 0; k < b.kernels_size(); ++k) {
    const Kernel &kernel = b.kernels(k);
    if (kernel.missing_code())
      continue;
    std::string entry =
        entryText(b.modules(int(kernel.module())).ptx(), kernel.symbol());
    params[k] = entryParams(entry);
    if (entry.find("griddepcontrol.wait;") != std::string::npos)
      waits.insert(k);
    EXPECT_FALSE(entry.empty()) << "kernel " << kernel.symbol() << " is not an entry "
                       << "of module " << b.modules(int(kernel.module())).name();
  }
  checked = programmatic = 0;
  const auto &slots = b.plan().slots();
  for (const Program &p : b.ranks(0).programs())
    for (int i = 0; i < p.steps_size(); ++i) {
      const Step &s = p.steps(i);
      std::string at = p.name() + " step " + std::to_string(i) + " (" +
                       s.label() + ")";
      if (s.has_memset()) {
        ASSERT_LT(s.memset().dst().slot(), uint32_t(slots.size())) << at;
        const Slot &slot = slots[int(s.memset().dst().slot())];
        EXPECT_LE(s.memset().dst().byte_offset() + s.memset().bytes(),
                  slot.bytes())
            << at;
      }
      if (!s.has_launch())
        continue;
      const KernelLaunch &l = s.launch();
      ASSERT_LT(l.kernel(), uint32_t(b.kernels_size())) << at;
      if (b.kernels(int(l.kernel())).missing_code())
        continue;
      const std::vector<std::string> &types = params[l.kernel()];
      ASSERT_EQ(size_t(l.args_size()), types.size())
          << at << ": the PTX entry takes " << types.size() << " parameters";
      for (int a = 0; a < l.args_size(); ++a) {
        EXPECT_TRUE(argMatches(l.args(a), types[a]))
            << at << " argument " << a << " vs PTX " << types[a];
        std::vector<SlotRef> refs;
        if (l.args(a).has_slot())
          refs.push_back(l.args(a).slot());
        else if (l.args(a).has_table())
          refs.assign(l.args(a).table().slots().begin(),
                      l.args(a).table().slots().end());
        else if (l.args(a).has_tensor_map())
          refs.push_back(l.args(a).tensor_map().base());
        for (const SlotRef &ref : refs) {
          ASSERT_LT(ref.slot(), uint32_t(slots.size())) << at;
          EXPECT_LT(ref.byte_offset(), std::max<uint64_t>(
                                           1, slots[int(ref.slot())].bytes()))
              << at << " argument " << a;
        }
      }
      if (l.programmatic()) {
        EXPECT_TRUE(waits.count(l.kernel()))
            << at << ": a programmatic launch of a kernel that does not wait";
        EXPECT_TRUE(i > 0 && p.steps(i - 1).has_launch())
            << at << ": a programmatic launch after no kernel";
        ++programmatic;
      }
      EXPECT_GT(l.grid().x(), 0u) << at;
      EXPECT_GT(l.block().x(), 0u) << at;
      EXPECT_LE(uint64_t(l.block().x()) * l.block().y() * l.block().z(), 1024u)
          << at;
      ++checked;
    }
}

// Every module's PTX assembles for its arch (when the build found ptxas),
// and the bundle's cubin is what ptxas makes of it.
void checkModulesAssemble(const Bundle &b, const std::string &dir) {
#ifdef OCTET_PTXAS
  for (const Module &m : b.modules()) {
    std::string ptx = dir + "/" + m.name() + ".ptx";
    std::string cubin = dir + "/" + m.name() + ".cubin";
    std::ofstream(ptx) << m.ptx();
    std::string cmd = std::string(OCTET_PTXAS) + " -arch=sm_90a -O3 " + ptx +
                      " -o " + cubin;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    if (!m.cubin().empty())
      EXPECT_EQ(readFile(cubin), m.cubin())
          << m.name() << ": the bundle's cubin is not ptxas's output";
  }
#else
  (void)b, (void)dir;
  GTEST_SKIP() << "no ptxas in this build: PTX not assembled";
#endif
}

TEST(EmitBundle, TinyLlamaIsDeterministicAndComplete) {
  std::string dir = ::testing::TempDir();
  std::string first = compile("tiny-llama.pbtxt", dir + "/tiny-a.octet");
  std::string second = compile("tiny-llama.pbtxt", dir + "/tiny-b.octet");
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first, second) << "two compiles of the same spec differ";

  auto parsed = parseBundle(first, "tiny-a.octet");
  ASSERT_TRUE(parsed) << parsed.status().message();
  const Bundle &b = *parsed;
  EXPECT_EQ(b.format_version(), kBundleFormatVersion);
  EXPECT_EQ(b.build().spec_format(), "pbtxt");
  EXPECT_NE(b.build().spec_text().find("num_layers"), std::string::npos);
  EXPECT_EQ(b.world_size(), 1u);
  ASSERT_EQ(b.ranks_size(), 1);

  // tiny-llama: 4 layers of 6 parameters (fused QKV and gate/up count once:
  // two norms, wqkv, wo, w_gate_up, w_down) plus embedding, final norm and
  // LM head.
  ASSERT_EQ(b.parameters_size(), 4 * 6 + 3);
  int64_t elements = 0;
  std::set<uint64_t> seeds;
  for (const auto &p : b.parameters()) {
    int64_t n = 1;
    for (int64_t d : p.shape())
      n *= d;
    elements += n;
    EXPECT_EQ(b.plan().slots(int(p.slot())).name(), p.name());
    EXPECT_EQ(b.plan().slots(int(p.grad_slot())).name(), "grad." + p.name());
    if (p.init().kind() == Init::NORMAL)
      EXPECT_TRUE(seeds.insert(p.init().seed()).second)
          << p.name() << " draws the same numbers as another parameter";
  }
  EXPECT_EQ(elements, 3279104);
  ASSERT_EQ(b.parameters(0).hf_pieces_size(), 1);
  EXPECT_EQ(b.parameters(0).hf_pieces(0).tensor(), "model.embed_tokens.weight");
  EXPECT_EQ(b.parameters(0).hf_pieces(0).rows(), 256);
  EXPECT_NE(b.build().hf_config().find("\"LlamaForCausalLM\""),
            std::string::npos);

  // Fused parameters name their HF tensors and the rows of each: q_proj's
  // 4 heads of 64, then k_proj's and v_proj's 2 heads; gate_proj, then
  // up_proj.
  auto piecesOf = [&](const std::string &name) {
    std::vector<std::pair<std::string, int64_t>> out;
    for (const auto &p : b.parameters())
      if (p.name() == name)
        for (const auto &piece : p.hf_pieces()) {
          EXPECT_EQ(piece.tensor_row(), 0);
          EXPECT_EQ(piece.tensor_rows(), 0);
          EXPECT_FALSE(piece.transpose());
          out.push_back({piece.tensor(), piece.rows()});
        }
    return out;
  };
  using Pieces = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(piecesOf("layers.1.attn.wqkv"),
            (Pieces{{"model.layers.1.self_attn.q_proj.weight", 256},
                    {"model.layers.1.self_attn.k_proj.weight", 128},
                    {"model.layers.1.self_attn.v_proj.weight", 128}}));
  Pieces gateUp;
  for (const auto &p : b.parameters())
    if (p.hf_pieces_size() == 2)
      gateUp = piecesOf(p.name());
  EXPECT_EQ(gateUp,
            (Pieces{{"model.layers.3.mlp.gate_proj.weight", 768},
                    {"model.layers.3.mlp.up_proj.weight", 768}}));
  for (const auto &p : b.parameters())
    EXPECT_FALSE(p.hf_pieces().empty()) << p.name() << " has no HF name";

  // Schedule from the spec's train block; FLOPs per token: 6 per linear
  // weight (4 layers x 786432 + LM head 65536) plus 6·L·H·Dh·S of causal
  // attention (4 layers, 4 heads of 64, sequence 128).
  EXPECT_EQ(b.schedule().micro_batch_size(), 8);
  EXPECT_EQ(b.schedule().seq_len(), 128);
  EXPECT_EQ(b.schedule().vocab_size(), 256);
  EXPECT_DOUBLE_EQ(b.schedule().flops_per_token(),
                   6.0 * (4 * 786432 + 65536) + 6.0 * 4 * 4 * 64 * 128);

  std::vector<std::string> programs;
  for (const auto &p : b.ranks(0).programs()) {
    programs.push_back(p.name());
    EXPECT_GT(p.steps_size(), 0) << p.name();
  }
  EXPECT_EQ(programs, (std::vector<std::string>{"forward", "train_microbatch",
                                                "optimizer_step",
                                                "cache_weights"}));
  EXPECT_GT(b.precision_size(), 0);
  EXPECT_EQ(b.plan().arenas(0).alignment(), 256u);
  for (const auto &s : b.plan().slots())
    EXPECT_EQ(s.offset() % 256, 0u) << s.name();

  // Every GEMM gets the one 32 MiB cuBLASLt workspace of the main stream, a
  // persistent slot. An FP8 GEMM's A and B scale pointers read the inverse
  // scales of its operands straight from the FP8 scale state (the scale
  // update writes them beside the scales): no kernel computes a factor
  // before the call. The wgrad GEMMs that alone make their gradient
  // accumulator write it in a step's first microbatch.
  std::set<uint32_t> inverseSlots;
  for (const StateTensor &st : b.state())
    if (st.kind() == FP8_SCALE_INV) {
      EXPECT_TRUE(st.name().size() > 10 &&
                  st.name().substr(st.name().size() - 10) == ".scale_inv")
          << st.name();
      inverseSlots.insert(st.slot());
    }
  EXPECT_EQ(inverseSlots.size(), 4u * 4 * 3) // x, w, dy of 4 linears a layer
      << "FP8_SCALE_INV state tensors";
  for (const Kernel &k : b.kernels())
    EXPECT_EQ(k.symbol().find("dequant"), std::string::npos) << k.symbol();
  int fp8Gemms = 0;
  std::set<std::string> overwritten;
  for (const Program &p : b.ranks(0).programs())
    for (int i = 0; i < p.steps_size(); ++i) {
      if (!p.steps(i).has_gemm())
        continue;
      const GemmCall &call = p.steps(i).gemm();
      const GemmDescriptor &g = b.gemms(int(call.gemm()));
      EXPECT_EQ(g.workspace_bytes(), uint64_t(32) << 20) << g.name();
      ASSERT_TRUE(call.has_workspace()) << g.name();
      const Slot &ws = b.plan().slots(int(call.workspace().slot()));
      EXPECT_EQ(ws.name(), "gemm workspace (stream 0)");
      EXPECT_EQ(ws.kind(), WORKSPACE);
      EXPECT_EQ(ws.bytes(), g.workspace_bytes());
      EXPECT_TRUE(ws.program().empty()) << "the workspace outlives programs";
      EXPECT_EQ(p.steps(i).stream(), 0u) << g.name();
      if (call.first_microbatch_overwrites()) {
        EXPECT_EQ(p.kind(), TRAIN_MICROBATCH) << g.name();
        EXPECT_TRUE(g.accumulate()) << g.name();
        EXPECT_EQ(g.role(), WGRAD) << g.name();
        overwritten.insert(b.plan().slots(int(call.d().slot())).name());
      }
      EXPECT_EQ(g.has_a_scale(), g.has_b_scale()) << g.name();
      if (!g.has_a_scale())
        continue;
      ++fp8Gemms;
      EXPECT_EQ(g.a_scale_mode(), SCALE_TENSORWISE) << g.name();
      EXPECT_EQ(g.b_scale_mode(), SCALE_TENSORWISE) << g.name();
      EXPECT_TRUE(inverseSlots.count(call.a_scale().slot()))
          << g.name() << " A scale reads slot "
          << b.plan().slots(int(call.a_scale().slot())).name();
      EXPECT_TRUE(inverseSlots.count(call.b_scale().slot()))
          << g.name() << " B scale reads slot "
          << b.plan().slots(int(call.b_scale().slot())).name();
      ASSERT_GT(i, 0);
      const Step &before = p.steps(i - 1);
      EXPECT_FALSE(before.has_launch() &&
                   before.label().find(" scale") != std::string::npos)
          << g.name() << " follows '" << before.label() << "'";
    }
  EXPECT_EQ(fp8Gemms, 4 * 4 * 3 * 2 - 4 * 4 * 2) // train: 3 per linear;
      << "FP8 GEMMs of the train and eval programs";  // eval: fprop only

  // With one microbatch a step the train program clears every other
  // gradient accumulator with a memset of its own slot before the kernel
  // that first adds into it (so those gradients are step-local too), but
  // the embedding's, whose scatter kernel starts from zero; the optimizer
  // step clears none and copies no zero tensor into a gradient.
  std::set<std::string> cleared;
  for (const Program &p : b.ranks(0).programs()) {
    if (p.kind() == OPTIMIZER_STEP) {
      int adamw = -1;
      for (int i = 0; i < p.steps_size(); ++i)
        if (p.steps(i).has_launch() &&
            p.steps(i).label().find("optimizer.adamw") != std::string::npos)
          adamw = i;
      EXPECT_GE(adamw, 0) << "no multi-tensor AdamW launch in " << p.name();
    }
    if (p.kind() != OPTIMIZER_STEP && p.kind() != TRAIN_MICROBATCH)
      continue;
    for (int i = 0; i < p.steps_size(); ++i) {
      const Step &s = p.steps(i);
      if (s.has_copy()) {
        const std::string &dst = b.plan().slots(int(s.copy().dst().slot())).name();
        EXPECT_NE(dst.rfind("grad.", 0), 0u) << s.label() << " copies into " << dst;
      }
      if (!s.has_memset() || s.label().rfind("clear ", 0) != 0)
        continue;
      EXPECT_EQ(p.kind(), TRAIN_MICROBATCH) << s.label() << " in " << p.name();
      const auto &slot = b.plan().slots(int(s.memset().dst().slot()));
      EXPECT_EQ("clear " + slot.name(), s.label());
      EXPECT_EQ(s.memset().bytes(), slot.bytes()) << s.label();
      EXPECT_EQ(s.memset().value(), 0u) << s.label();
      EXPECT_TRUE(cleared.insert(slot.name()).second) << s.label() << " twice";
    }
  }
  // 4 layers of wqkv, wo, w_gate_up, w_down and the LM head are written by
  // their wgrad; the norms are cleared.
  EXPECT_EQ(overwritten.size(), 4u * 4 + 1);
  EXPECT_EQ(cleared.count("grad.embed"), 0u);
  EXPECT_EQ(overwritten.count("grad.embed"), 0u);
  std::set<std::string> gradients;
  for (const auto &prm : b.parameters())
    gradients.insert("grad." + prm.name());
  for (const std::string &g : overwritten) {
    EXPECT_EQ(gradients.count(g), 1u) << g;
    EXPECT_EQ(cleared.count(g), 0u) << g << " is written and cleared";
  }
  EXPECT_EQ(cleared.size() + overwritten.size() + 1, gradients.size());

  // Each shared kernel is one module: every layer's RMSNorm runs the same.
  std::set<std::string> names;
  for (const Module &m : b.modules())
    EXPECT_TRUE(names.insert(m.name()).second) << m.name();
  EXPECT_GT(b.modules_size(), 10);
  int launches = 0, programmatic = 0;
  checkLaunches(b, launches, programmatic);
  EXPECT_GT(launches, 100);

  // Heads of 64 over 128 tokens: the Hopper attention forward, whose
  // launches (a layer each in training and in eval) pass the tensor maps of
  // q, k and v first, each over the slot its buffer argument names.
  int hopperLaunches = 0;
  for (const Program &p : b.ranks(0).programs())
    for (const Step &s : p.steps()) {
      if (!s.has_launch() ||
          b.kernels(int(s.launch().kernel())).symbol().find(
              "attention_fwd_hopper_") != 0)
        continue;
      ++hopperLaunches;
      const KernelLaunch &l = s.launch();
      ASSERT_GE(l.args_size(), 6) << s.label();
      for (int m = 0; m < 3; ++m) {
        ASSERT_TRUE(l.args(m).has_tensor_map()) << s.label() << " arg " << m;
        EXPECT_EQ(l.args(m).tensor_map().base().slot(), l.args(3 + m).slot().slot())
            << s.label() << " arg " << m;
        EXPECT_EQ(l.args(m).tensor_map().dtype(), BF16);
      }
      EXPECT_FALSE(l.args(3).has_tensor_map()) << s.label();
    }
  EXPECT_EQ(hopperLaunches, 2 * 4);

  // The optimizer step and init have code; attention and the fused LM head
  // do not yet, and the runtime's check names them.
  std::set<uint32_t> missing;
  for (int k = 0; k < b.kernels_size(); ++k)
    if (b.kernels(k).missing_code())
      missing.insert(k);
  for (const Program &p : b.ranks(0).programs()) {
    if (p.kind() != OPTIMIZER_STEP && p.kind() != INIT)
      continue;
    for (const Step &s : p.steps())
      EXPECT_FALSE(s.has_launch() && missing.count(s.launch().kernel()))
          << p.name() << ": " << s.label() << " has no code";
  }
  octet::Status runnable = checkRunnable(b);
  if (!missing.empty()) {
    EXPECT_FALSE(runnable);
    EXPECT_NE(runnable.message().find(b.kernels(int(*missing.begin())).symbol()),
              std::string::npos)
        << runnable.message();
  } else {
    EXPECT_TRUE(runnable) << runnable.message();
  }
  checkModulesAssemble(b, dir);
}

TEST(EmitBundle, Llama3_8bLaunchesMatchTheirKernels) {
  std::string dir = ::testing::TempDir();
  std::string bytes = compile("llama3-8b.pbtxt", dir + "/llama3-8b.octet");
  auto parsed = parseBundle(bytes, "llama3-8b.octet");
  ASSERT_TRUE(parsed) << parsed.status().message();
  const Bundle &b = *parsed;
  int launches = 0, programmatic = 0;
  checkLaunches(b, launches, programmatic);
  EXPECT_GT(launches, 1000);
  // Every layer's norm gradients end in a column-sum (and transpose) launch
  // that runs as the row kernel's programmatic dependent.
  EXPECT_GE(programmatic, 2 * 32);
  // 32 layers share their kernels: far fewer modules than launches.
  EXPECT_LT(b.modules_size(), 200);
  checkModulesAssemble(b, dir);
}

} // namespace
