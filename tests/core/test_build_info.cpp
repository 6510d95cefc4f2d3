#include <gtest/gtest.h>

#include "hotloop/cuda/build_info.h"

namespace hotloop {

TEST(BuildInfo, NamesTheLibTorchItWasBuiltWith) {
  const BuildInfo info = build_info();
  EXPECT_EQ(info.hotloop_version, "0.1.0");
  EXPECT_FALSE(info.git_commit.empty());
  EXPECT_EQ(info.libtorch_version.rfind("2.", 0), 0u) << info.libtorch_version;
  if (info.libtorch_has_cuda) {
    ASSERT_TRUE(info.cuda_runtime_version.has_value());
    EXPECT_TRUE(info.nccl_version.has_value());
  }
}

TEST(BuildInfo, FormatsEveryVersionOnItsOwnLine) {
  BuildInfo info;
  info.hotloop_version = "1.2.3";
  info.git_commit = "abc123";
  info.libtorch_version = "2.11.0";
  info.libtorch_has_cuda = true;
  info.cuda_runtime_version = "13.0";
  info.cudnn_version = "9.19.0";
  info.nccl_version = "2.28.9";
  info.cuda_arch_list = "sm_90";
  EXPECT_EQ(
      format_build_info(info),
      "hotloop 1.2.3 (commit abc123)\n"
      "LibTorch 2.11.0 with CUDA\n"
      "CUDA runtime 13.0, cuDNN 9.19.0, NCCL 2.28.9\n"
      "CUDA architectures: sm_90\n");
}

} // namespace hotloop
