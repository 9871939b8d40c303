// train.codegen's attention kernels: unset, the Hopper kernels on sm_90a
// and the mma.sync ones elsewhere; "mma_sync" anywhere; "hopper" where the
// target cannot run it is refused, naming the field.

#include "compiler/Pipelines/Pipelines.h"

#include <gtest/gtest.h>

namespace {

octet::spec::Spec withCodegen(const std::string &forward,
                              const std::string &backward) {
  octet::spec::Spec spec;
  octet::spec::Codegen &codegen = *spec.mutable_train()->mutable_codegen();
  codegen.set_attention_forward(forward);
  codegen.set_attention_backward(backward);
  return spec;
}

mlir::GpuNVVMAttachTargetOptions ampere() {
  mlir::GpuNVVMAttachTargetOptions target = octet::hopperTarget();
  target.chip = "sm_80";
  return target;
}

TEST(CodegenOptions, UnsetIsTheTargetsFastestKernel) {
  auto hopper = octet::codegenOptionsFromSpec(withCodegen("", ""));
  ASSERT_TRUE(hopper) << hopper.status().message();
  EXPECT_TRUE(hopper->attentionToGpu.hopperForward);
  EXPECT_TRUE(hopper->attentionToGpu.hopperBackward);
  EXPECT_EQ(hopper->target.chip, "sm_90a");

  auto other = octet::codegenOptionsFromSpec(withCodegen("", ""), ampere());
  ASSERT_TRUE(other) << other.status().message();
  EXPECT_FALSE(other->attentionToGpu.hopperForward);
  EXPECT_FALSE(other->attentionToGpu.hopperBackward);
  EXPECT_EQ(other->target.chip, "sm_80");
}

TEST(CodegenOptions, MmaSyncIsSelectableOnEachKernel) {
  auto backward = octet::codegenOptionsFromSpec(withCodegen("", "mma_sync"));
  ASSERT_TRUE(backward) << backward.status().message();
  EXPECT_TRUE(backward->attentionToGpu.hopperForward);
  EXPECT_FALSE(backward->attentionToGpu.hopperBackward);

  auto forward = octet::codegenOptionsFromSpec(withCodegen("mma_sync", "hopper"));
  ASSERT_TRUE(forward) << forward.status().message();
  EXPECT_FALSE(forward->attentionToGpu.hopperForward);
  EXPECT_TRUE(forward->attentionToGpu.hopperBackward);
}

TEST(CodegenOptions, HopperForATargetWithoutItIsAnErrorNamingTheField) {
  auto backward =
      octet::codegenOptionsFromSpec(withCodegen("", "hopper"), ampere());
  ASSERT_FALSE(backward);
  EXPECT_NE(backward.status().message().find(
                "train.codegen.attention_backward: \"hopper\" needs an sm_90a "
                "target"),
            std::string::npos)
      << backward.status().message();
  EXPECT_NE(backward.status().message().find("sm_80"), std::string::npos);

  auto forward =
      octet::codegenOptionsFromSpec(withCodegen("hopper", "mma_sync"), ampere());
  ASSERT_FALSE(forward);
  EXPECT_NE(forward.status().message().find("train.codegen.attention_forward"),
            std::string::npos)
      << forward.status().message();
}

} // namespace
