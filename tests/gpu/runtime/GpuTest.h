#ifndef OCTET_TESTS_GPU_RUNTIME_GPUTEST_H
#define OCTET_TESTS_GPU_RUNTIME_GPUTEST_H

// Shared pieces of the GPU runtime tests: one device for the whole binary
// and a device buffer that frees itself.

#include "runtime/core/Device.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <limits.h>
#include <memory>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace octet::test {

// The process-wide device (opened once; the tests need a Hopper GPU).
Device &device();

// Kernel files sit beside the test binary (the build copies the PTX and
// assembles the cubin there), so the binary can be carried to a GPU host.
inline std::string besideBinary(const std::string &file) {
  char buf[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string exe(buf, n > 0 ? size_t(n) : 0);
  return exe.substr(0, exe.rfind('/') + 1) + file;
}

inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    ::octet::Status st_ = (expr);                                              \
    ASSERT_TRUE(st_.isOk()) << st_.message();                                  \
  } while (0)

template <typename T> T unwrap(StatusOr<T> v) {
  if (!v.isOk()) {
    ADD_FAILURE() << v.status().message();
    return T();
  }
  return std::move(*v);
}

class DeviceBuffer {
public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (cuMemAlloc(&ptr_, bytes ? bytes : 1) != CUDA_SUCCESS)
      ptr_ = 0;
  }
  ~DeviceBuffer() {
    if (ptr_)
      cuMemFree(ptr_);
  }
  CUdeviceptr get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <typename T> void upload(const std::vector<T> &v) {
    ASSERT_EQ(v.size() * sizeof(T), bytes_);
    ASSERT_EQ(cuMemcpyHtoD(ptr_, v.data(), bytes_), CUDA_SUCCESS);
  }
  template <typename T> std::vector<T> download() const {
    std::vector<T> v(bytes_ / sizeof(T));
    EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    EXPECT_EQ(cuMemcpyDtoH(v.data(), ptr_, bytes_), CUDA_SUCCESS);
    return v;
  }
  // Poison, so an output the kernel never wrote cannot pass as zero.
  void poison() { ASSERT_EQ(cuMemsetD8(ptr_, 0x7f, bytes_), CUDA_SUCCESS); }

private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_;
};

} // namespace octet::test

#endif
