#include "tests/gpu/runtime/GpuTest.h"

#include <cstdio>
#include <cstdlib>

namespace octet::test {

Device &device() {
  static std::unique_ptr<Device> dev = [] {
    auto d = Device::open(DeviceOptions{});
    if (!d.isOk()) {
      std::fprintf(stderr, "GPU tests need a Hopper GPU: %s\n",
                   d.status().message().c_str());
      std::abort();
    }
    return std::move(*d);
  }();
  return *dev;
}

} // namespace octet::test

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  octet::test::device();
  return RUN_ALL_TESTS();
}
