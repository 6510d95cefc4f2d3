// hotloop declares the part of nvJPEG it calls in src/hotloop/cuda/
// nvjpeg_library.h (it loads the library at run time and never includes its
// header). This file pins that image struct's layout and each constant to
// NVIDIA's own nvjpeg.h (the nvidia-nvjpeg wheel's, beside torch). It is
// checked when it compiles; the program only says which header it was
// checked against.
#include <nvjpeg.h>

#include <cstddef>
#include <cstdio>

#include "hotloop/cuda/nvjpeg_library.h"

namespace nj = hotloop::cuda::nvjpeg;

static_assert(sizeof(nj::Image) == sizeof(nvjpegImage_t));
static_assert(alignof(nj::Image) == alignof(nvjpegImage_t));
static_assert(offsetof(nj::Image, channel) == offsetof(nvjpegImage_t, channel));
static_assert(offsetof(nj::Image, pitch) == offsetof(nvjpegImage_t, pitch));
static_assert(nj::kMaxComponent == NVJPEG_MAX_COMPONENT);
static_assert(nj::kSuccess == NVJPEG_STATUS_SUCCESS);
static_assert(nj::kBadJpeg == NVJPEG_STATUS_BAD_JPEG);
static_assert(nj::kJpegNotSupported == NVJPEG_STATUS_JPEG_NOT_SUPPORTED);
static_assert(nj::kArchMismatch == NVJPEG_STATUS_ARCH_MISMATCH);
static_assert(nj::kBackendDefault == NVJPEG_BACKEND_DEFAULT);
static_assert(nj::kBackendHardware == NVJPEG_BACKEND_HARDWARE);
static_assert(nj::kOutputY == NVJPEG_OUTPUT_Y);
static_assert(nj::kOutputRgbi == NVJPEG_OUTPUT_RGBI);
static_assert(sizeof(nj::Status) == sizeof(nvjpegStatus_t));
static_assert(sizeof(nj::Backend) == sizeof(nvjpegBackend_t));
static_assert(sizeof(nj::OutputFormat) == sizeof(nvjpegOutputFormat_t));

int main() {
  std::printf("nvjpeg_library.h matches %s\n", HOTLOOP_CHECKED_HEADER);
  return 0;
}
