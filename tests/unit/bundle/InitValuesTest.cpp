// A bundle's initial values, computed on the host from its Init fields,
// equal the reference interpreter's VariableStore for the same spec: a GPU
// run and a CPU run of tiny-llama start from the same bits.

#include "compiler/Interpreter/Interpreter.h"
#include "compiler/Registration.h"
#include "bundle/Bundle.h"
#include "bundle/InitValues.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace {

using namespace octet;

TEST(InitValues, TinyLlamaBundleStartsWhereTheInterpreterDoes) {
  std::string dir = ::testing::TempDir();
  std::string spec = OCTET_SOURCE_DIR "/examples/tiny-llama.pbtxt";
  std::string cmd = std::string(OCTET_BINARY) + " compile " + spec + " -o " +
                    dir + "/init.octet > " + dir +
                    "/init.log 2>&1 && " + OCTET_BINARY + " compile " + spec +
                    " -o " + dir + "/init.mlir >> " + dir + "/init.log 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto b = bundle::readBundle(dir + "/init.octet");
  ASSERT_TRUE(b) << b.status().message();

  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);
  mlir::MLIRContext context(registry);
  auto module = mlir::parseSourceFile<mlir::ModuleOp>(dir + "/init.mlir",
                                                      &context);
  ASSERT_TRUE(module);
  interp::VariableStore store;
  store.initialize(*module, b->schedule().seed());

  int normal = 0, checked = 0;
  auto compare = [&](const std::string &name, const bundle::Init &init,
                     uint32_t slot) {
    const bundle::Slot &s = b->plan().slots(int(slot));
    ASSERT_TRUE(store.has(name)) << name;
    const interp::Tensor &t = store.get(name);
    ASSERT_EQ(uint64_t(t.numel()) * bundle::dtypeBytes(s.dtype()), s.bytes())
        << name;
    auto bytes = bundle::initialBytes(init, s.dtype(), t.numel(), name);
    ASSERT_TRUE(bytes) << bytes.status().message();
    // The interpreter holds floats as f32 already rounded to the type.
    if (s.dtype() == bundle::F32) {
      EXPECT_EQ(std::memcmp(bytes->data(), t.f(), bytes->size()), 0) << name;
    } else if (s.dtype() == bundle::I64) {
      EXPECT_EQ(std::memcmp(bytes->data(), t.i(), bytes->size()), 0) << name;
    } else {
      return;
    }
    normal += init.kind() == bundle::Init::NORMAL;
    ++checked;
  };
  for (const bundle::Parameter &p : b->parameters())
    compare(p.name(), p.init(), p.slot());
  for (const bundle::StateTensor &s : b->state())
    compare(s.name(), s.init(), s.slot());
  EXPECT_EQ(normal, 4 * 4 + 2) << "tiny-llama's normal-initialised weights";
  EXPECT_GT(checked, 100);
}

// octet-run fills a tensor's ranges on several threads, and a sharded
// master only its rank's part: every range, wherever it starts, holds the
// bytes of the whole value there.
TEST(InitValues, RangesFilledApartJoinIntoTheWholeValue) {
  bundle::Init normal;
  normal.set_kind(bundle::Init::NORMAL);
  normal.set_seed(0x5eedull);
  normal.set_mean(0.25);
  normal.set_std(0.02);
  bundle::Init constant;
  constant.set_kind(bundle::Init::CONSTANT);
  constant.set_value(-3.5);
  for (const bundle::Init &init : {normal, constant})
    for (bundle::DType dtype : {bundle::F32, bundle::BF16}) {
      const uint64_t n = 1001;
      auto whole = bundle::initialBytes(init, dtype, n, "w");
      ASSERT_TRUE(whole) << whole.status().message();
      auto width = bundle::initialElementBytes(dtype, "w");
      ASSERT_TRUE(width) << width.status().message();
      ASSERT_EQ(whole->size(), n * *width);
      std::string joined(whole->size(), '\x7f');
      // Uneven ranges, the last one short.
      for (uint64_t first = 0; first < n; first += 333) {
        uint64_t count = std::min<uint64_t>(333, n - first);
        ASSERT_TRUE(bundle::initialRange(init, dtype, first, count,
                                         joined.data() + first * *width, "w"));
      }
      EXPECT_EQ(joined, *whole) << "dtype " << int(dtype);
      // And as initialPart's threads fill a rank's half.
      auto half = bundle::initialPart(init, dtype, 500, 501, "w", 3);
      ASSERT_TRUE(half) << half.status().message();
      EXPECT_EQ(*half, whole->substr(500 * *width));
    }
  // Long enough for initialPart's threads to take a range each.
  const uint64_t big = 3 * (uint64_t(1) << 20) + 7;
  auto whole = bundle::initialBytes(normal, bundle::F32, big, "w");
  ASSERT_TRUE(whole) << whole.status().message();
  auto threaded = bundle::initialPart(normal, bundle::F32, 0, big, "w", 3);
  ASSERT_TRUE(threaded) << threaded.status().message();
  EXPECT_TRUE(*threaded == *whole);
  auto tail = bundle::initialPart(normal, bundle::F32, big / 2, big - big / 2,
                                  "w", 2);
  ASSERT_TRUE(tail) << tail.status().message();
  EXPECT_TRUE(*tail == whole->substr(big / 2 * 4));

  bundle::Init ints = normal;
  auto refused = bundle::initialRange(ints, bundle::I32, 0, 4,
                                      std::string(16, '\0').data(), "ids");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("ids is i32 but its init is normal"),
            std::string::npos)
      << refused.message();
}

} // namespace
