// nvJPEG loaded at run time (cuda/nvjpeg_library.h): the nvidia-nvjpeg wheel
// beside the loaded LibTorch is found and loads here, with no GPU (the
// library needs none to load and say its version); a missing or wrong library
// is an EnvError that names each path tried and how to fix it.
#include <gtest/gtest.h>

#include <filesystem>

#include <torch/cuda.h>

#include "hotloop/cuda/nvjpeg_decoder.h"
#include "hotloop/cuda/nvjpeg_library.h"
#include "hotloop/errors.h"
#include "support/scoped_env.h"

namespace hotloop::cuda {
namespace {

TEST(NvjpegLibrary, TheWheelBesideTorchIsFoundFirstAndLoads) {
  const test::ScopedEnv unset("HOTLOOP_NVJPEG_LIB", std::nullopt);
  const std::vector<std::string> candidates = nvjpeg::library_candidates();
  ASSERT_FALSE(candidates.empty());
  EXPECT_TRUE(candidates.front().ends_with("nvidia/cu13/lib/libnvjpeg.so.13"))
      << candidates.front();
  ASSERT_TRUE(std::filesystem::exists(candidates.front()))
      << "scripts/setup installs the nvidia-nvjpeg wheel";
  const auto lib = nvjpeg::Library::open(candidates);
  EXPECT_EQ(lib->path(), candidates.front());
  EXPECT_TRUE(lib->version().starts_with("13.")) << lib->version();
}

TEST(NvjpegLibrary, TheEnvironmentNamesTheOnlyLibraryToTry) {
  const test::ScopedEnv set("HOTLOOP_NVJPEG_LIB", "/opt/x/libnvjpeg.so.13");
  EXPECT_EQ(
      nvjpeg::library_candidates(),
      std::vector<std::string>{"/opt/x/libnvjpeg.so.13"});
}

TEST(NvjpegLibrary, ALibraryThatIsMissingOrNotNvjpegIsAnEnvErrorNamingEach) {
  try {
    nvjpeg::Library::open({"/nonexistent/libnvjpeg.so.13", "libc.so.6"});
    FAIL() << "no error";
  } catch (const EnvError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("/nonexistent/libnvjpeg.so.13"), std::string::npos);
    EXPECT_NE(
        what.find("libc.so.6: lacks nvjpegGetProperty"), std::string::npos)
        << what;
    EXPECT_NE(e.hint().find("nvidia-nvjpeg"), std::string::npos);
  }
}

TEST(NvjpegLibrary, StatusesHaveNames) {
  EXPECT_EQ(nvjpeg::status_name(nvjpeg::kBadJpeg), "bad JPEG");
  EXPECT_EQ(
      nvjpeg::status_name(nvjpeg::kJpegNotSupported), "JPEG not supported");
  EXPECT_EQ(nvjpeg::status_name(42), "status 42");
}

TEST(NvjpegDecoder, WithoutAGpuOpeningSaysWhyAndWhatToUseInstead) {
  if (torch::cuda::is_available()) {
    GTEST_SKIP() << "a GPU is here";
  }
  try {
    NvjpegDecoder::open(c10::Device(c10::kCUDA, 0), 3);
    FAIL() << "no error";
  } catch (const EnvError& e) {
    EXPECT_NE(
        std::string(e.what()).find("CUDA is not available"), std::string::npos)
        << e.what();
    EXPECT_NE(e.hint().find("--decode-device cpu"), std::string::npos);
  }
}

} // namespace
} // namespace hotloop::cuda
