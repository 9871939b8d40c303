#include "runtime/blas/GemmTuningCache.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <unistd.h>

namespace octet::blas {
namespace {

const std::string kH100 = "NVIDIA H100 80GB HBM3 sm_90";

GemmTuningEntry entry(const std::string &device, const std::string &version,
                      const std::string &descriptor, char fill, double us) {
  GemmTuningEntry e;
  e.device = device;
  e.cublasLtVersion = version;
  e.descriptor = descriptor;
  // Every byte value, as a cublasLtMatmulAlgo_t has them.
  for (int i = 0; i < 64; ++i)
    e.algorithm += char(fill + i * 37);
  e.microseconds = us;
  return e;
}

TEST(GemmTuningCache, KeysOnDeviceVersionAndDescriptor) {
  GemmTuningCache cache;
  cache.put(entry(kH100, "120804", "512,256,1024,4,4,2,", 'a', 41.5));
  cache.put(entry(kH100, "120900", "512,256,1024,4,4,2,", 'b', 40.0));
  cache.put(entry("NVIDIA H200 sm_90", "120804", "512,256,1024,4,4,2,", 'c',
                  35.25));
  ASSERT_EQ(cache.size(), 3u);
  const GemmTuningEntry *e = cache.find(kH100, "120804", "512,256,1024,4,4,2,");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->algorithm, entry("", "", "", 'a', 0).algorithm);
  EXPECT_EQ(cache.find(kH100, "120804", "512,256,1024,4,4,3,"), nullptr);
  EXPECT_EQ(cache.find("NVIDIA H200 sm_90", "120900", "512,256,1024,4,4,2,"),
            nullptr);

  // A second timing of the same GEMM replaces the first, where it was.
  cache.put(entry(kH100, "120804", "512,256,1024,4,4,2,", 'z', 39.0));
  ASSERT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.find(kH100, "120804", "512,256,1024,4,4,2,")->microseconds,
            39.0);
  std::string text = cache.text();
  size_t firstLine = text.find('\n') + 1;
  EXPECT_EQ(text.substr(firstLine, text.find('\n', firstLine) - firstLine)
                .substr(0, kH100.size() + 7),
            kH100 + "\t120804");
  EXPECT_NE(text.find("\t39.000\n"), std::string::npos);
  EXPECT_EQ(text.find("\t41.500\n"), std::string::npos);
}

TEST(GemmTuningCache, TextRoundTripsEveryByte) {
  GemmTuningCache cache;
  cache.put(entry(kH100, "120804", "4096,4096,4096,4,4,2,", '\0', 812.125));
  cache.put(entry(kH100, "120804", "1,8,16,2,2,2,", '\xff', 3.5));
  auto back = GemmTuningCache::parse(cache.text(), "t.gemms");
  ASSERT_TRUE(back.isOk()) << back.status().message();
  EXPECT_EQ(back->text(), cache.text());
  const GemmTuningEntry *e = back->find(kH100, "120804", "1,8,16,2,2,2,");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->algorithm, entry("", "", "", '\xff', 0).algorithm);
  EXPECT_DOUBLE_EQ(e->microseconds, 3.5);
}

TEST(GemmTuningCache, SavesAndLoadsAFile) {
  std::string path = ::testing::TempDir() + "cache-" +
                     std::to_string(::getpid()) + ".gemms";
  std::remove(path.c_str());
  auto missing = GemmTuningCache::load(path);
  ASSERT_TRUE(missing.isOk()) << missing.status().message();
  EXPECT_EQ(missing->size(), 0u) << "a missing file is an empty cache";
  GemmTuningCache cache;
  cache.put(entry(kH100, "120804", "64,64,64,2,2,2,", 'q', 7.0));
  ASSERT_TRUE(cache.save(path).isOk());
  auto loaded = GemmTuningCache::load(path);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().message();
  EXPECT_EQ(loaded->text(), cache.text());
  std::remove(path.c_str());
}

TEST(GemmTuningCache, MalformedLinesNameTheFileLineAndFix) {
  struct Case {
    std::string text, message;
  } cases[] = {
      {"# comment\ndev\t1\tkey\t00\n", "t.gemms:2: expected 5 tab-separated"},
      {"dev\t1\tkey\t0g\t1.0\n", "t.gemms:1: the algorithm '0g'"},
      {"dev\t1\tkey\t012\t1.0\n", "is not hexadecimal"},
      {"dev\t1\tkey\t\t1.0\n", "is not hexadecimal"},
      {"dev\t1\tkey\t00\tfast\n", "the time 'fast'"},
      {"dev\t1\tkey\t00\t-2\n", "the time '-2'"},
      {"\t1\tkey\t00\t1\n", "an empty device"},
  };
  for (const Case &c : cases) {
    auto parsed = GemmTuningCache::parse(c.text, "t.gemms");
    ASSERT_FALSE(parsed.isOk()) << c.text;
    EXPECT_NE(parsed.status().message().find(c.message), std::string::npos)
        << parsed.status().message();
    EXPECT_NE(parsed.status().message().find("to time again"),
              std::string::npos)
        << parsed.status().message();
  }
}

} // namespace
} // namespace octet::blas
