// The NCCL binding without a GPU: finding and loading libnccl.so.2 (or the
// one clear error when it is not there), the element-type and reduction
// mapping, split keys and the error macro's message.

#include "runtime/comm/Communicator.h"
#include "runtime/comm/NcclLibrary.h"
#include "tests/unit/comm/Mentions.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace octet;
using namespace octet::comm;
using octet::test::failsWith;

namespace {

TEST(Nccl, AMissingOverrideIsOneLineNamingThePathAndTheFix) {
  NcclLibrary::Search search;
  search.override = "/nonexistent/libnccl.so.2";
  search.candidates = {"libnccl.so.2"}; // never tried when OCTET_NCCL is set
  auto lib = NcclLibrary::open(search);
  EXPECT_TRUE(
      failsWith(lib, "OCTET_NCCL=/nonexistent/libnccl.so.2 cannot be loaded"));
  EXPECT_TRUE(failsWith(lib, "point OCTET_NCCL at NCCL's libnccl.so.2"));
}

TEST(Nccl, NoCandidateLoadingNamesEveryPathTried) {
  NcclLibrary::Search search;
  search.candidates = {"/nonexistent/a/libnccl.so.2",
                       "/nonexistent/b/libnccl.so.2"};
  auto lib = NcclLibrary::open(search);
  for (const char *part :
       {"no libnccl.so.2 could be loaded", "/nonexistent/a/libnccl.so.2",
        "/nonexistent/b/libnccl.so.2", "set OCTET_NCCL=/path/to/libnccl.so.2"})
    EXPECT_TRUE(failsWith(lib, part));
}

TEST(Nccl, ALibraryThatIsNotNcclIsRefused) {
  NcclLibrary::Search search;
  search.override = "libc.so.6";
  EXPECT_TRUE(failsWith(NcclLibrary::open(search), "without ncclGetVersion"));
}

TEST(Nccl, DefaultSearchReadsOctetNccl) {
  ::setenv("OCTET_NCCL", "/somewhere/libnccl.so.2", 1);
  auto search = NcclLibrary::defaultSearch();
  ::unsetenv("OCTET_NCCL");
  ASSERT_TRUE(search.override.has_value());
  EXPECT_EQ(*search.override, "/somewhere/libnccl.so.2");
  EXPECT_FALSE(NcclLibrary::defaultSearch().override.has_value());
}

TEST(Nccl, LoadsTheInstalledNcclAndTurnsNvlsOff) {
  ::setenv("NCCL_NVLS_ENABLE", "1", 1);
  NcclLibrary::Search search = NcclLibrary::defaultSearch();
  search.override.reset();
  auto lib = NcclLibrary::open(search);
  if (!lib.isOk())
    GTEST_SKIP() << "no NCCL on this machine: " << lib.status().message();
  EXPECT_GE((*lib)->version(), kMinNcclVersion);
  EXPECT_EQ(std::string(std::getenv("NCCL_NVLS_ENABLE")), "0");
  auto id = newUniqueId(**lib);
  ASSERT_TRUE(id.isOk()) << id.status().message();
  EXPECT_EQ(id->size(), sizeof(ncclUniqueId));
  EXPECT_TRUE(failsWith(Communicator::init(**lib, "short", 2, 0, CommOptions()),
                        "an NCCL unique id of 5 bytes"));
}

// Data-parallel ranks register their arenas by default wherever NCCL has
// the calls (2.19 and newer), so a library that new must give all four.
TEST(Nccl, ANcclWithBufferRegistrationGivesItsFourCalls) {
  NcclLibrary::Search search = NcclLibrary::defaultSearch();
  search.override.reset();
  auto lib = NcclLibrary::open(search);
  if (!lib.isOk())
    GTEST_SKIP() << "no NCCL on this machine: " << lib.status().message();
  const NcclApi &api = (*lib)->api();
  bool expected = (*lib)->version() >= 21900;
  EXPECT_EQ(api.memAlloc != nullptr, expected);
  EXPECT_EQ(api.memFree != nullptr, expected);
  EXPECT_EQ(api.commRegister != nullptr, expected);
  EXPECT_EQ(api.commDeregister != nullptr, expected);
}

TEST(Nccl, BufferRegistrationsReadByName) {
  EXPECT_EQ(bufferRegistrationNamed("none"), BufferRegistration::None);
  EXPECT_EQ(bufferRegistrationNamed("registered"),
            BufferRegistration::Registered);
  EXPECT_FALSE(bufferRegistrationNamed("symmetric").has_value());
  EXPECT_STREQ(bufferRegistrationName(BufferRegistration::Registered),
               "registered");
  EXPECT_STREQ(bufferRegistrationName(BufferRegistration::None), "none");
}

TEST(Nccl, VersionCodesReadAsNcclWritesThem) {
  EXPECT_EQ(ncclVersionString(22809), "2.28.9");
  EXPECT_EQ(ncclVersionString(21803), "2.18.3");
  EXPECT_EQ(ncclVersionString(2708), "2.7.8");
  EXPECT_EQ(ncclVersionString(0), "(version unknown)");
}

TEST(Nccl, ElementTypesMapToNcclTypes) {
  auto type = [](bundle::DType t, bool reduced, int version = 22809) {
    auto r = ncclTypeFor(t, reduced, version);
    EXPECT_TRUE(r.isOk()) << r.status().message();
    return r ? *r : ncclNumTypes;
  };
  EXPECT_EQ(type(bundle::F32, true), ncclFloat32);
  EXPECT_EQ(type(bundle::BF16, true), ncclBfloat16);
  EXPECT_EQ(type(bundle::F16, true), ncclFloat16);
  EXPECT_EQ(type(bundle::I32, true), ncclInt32);
  EXPECT_EQ(type(bundle::I64, true), ncclInt64);
  EXPECT_EQ(type(bundle::U8, false), ncclUint8);
  EXPECT_EQ(type(bundle::F8E4M3FN, true), ncclFloat8e4m3);
  EXPECT_EQ(type(bundle::F8E5M2, true), ncclFloat8e5m2);
  // Moved, not reduced: FP8 travels as bytes, on any NCCL.
  EXPECT_EQ(type(bundle::F8E4M3FN, false), ncclUint8);
  EXPECT_EQ(type(bundle::F8E5M2, false, 21803), ncclUint8);
  EXPECT_TRUE(failsWith(ncclTypeFor(bundle::F8E4M3FN, true, 22103),
                        "needs NCCL 2.24 or newer, but the loaded NCCL is "
                        "2.21.3"));
  EXPECT_FALSE(ncclTypeFor(bundle::DTYPE_UNSPECIFIED, false, 22809).isOk());
}

TEST(Nccl, ReductionsParseFromTheBundle) {
  EXPECT_EQ(*parseReduceOp("sum"), ReduceOp::Sum);
  EXPECT_EQ(*parseReduceOp("avg"), ReduceOp::Avg);
  EXPECT_EQ(*parseReduceOp("max"), ReduceOp::Max);
  EXPECT_EQ(*parseReduceOp("min"), ReduceOp::Min);
  EXPECT_TRUE(failsWith(parseReduceOp("mean"), "'mean'"));
}

TEST(Nccl, SplitKeysFollowTheGroups) {
  // PP2 x DP2: data-parallel groups {0,2} and {1,3}.
  std::vector<std::vector<int>> dp = {{0, 2}, {1, 3}};
  auto k2 = splitKeyFor(dp, 2);
  ASSERT_TRUE(k2.isOk());
  EXPECT_EQ(k2->color, 0);
  EXPECT_EQ(k2->key, 1);
  auto k1 = splitKeyFor(dp, 1);
  EXPECT_EQ(k1->color, 1);
  EXPECT_EQ(k1->key, 0);
  EXPECT_EQ(splitKeyFor(dp, 7)->color, NCCL_SPLIT_NOCOLOR);
  EXPECT_TRUE(failsWith(splitKeyFor({{0, 1}, {1, 2}}, 1), "groups overlap"));
}

Status failingCall() {
  auto invalid = []() { return ncclInvalidArgument; };
  OCTET_CHECK_NCCL(invalid());
  return Status::ok();
}

TEST(Nccl, TheCheckMacroNamesTheCallAndWhere) {
  Status s = failingCall();
  for (const char *part :
       {"NCCL error ncclInvalidArgument", "in invalid() at ", "NcclTest.cpp:"})
    EXPECT_TRUE(failsWith(s, part));
}

} // namespace
