#include "hotloop/cuda/nvjpeg_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <ATen/Context.h>
#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::cuda::nvjpeg {
namespace {

namespace fs = std::filesystem;

template <typename Fn>
void resolve(void* handle, const char* name, Fn& out, std::string& missing) {
  out = reinterpret_cast<Fn>(::dlsym(handle, name));
  if (out == nullptr) {
    missing += missing.empty() ? name : fmt::format(", {}", name);
  }
}

// Every function, or the names the library lacks.
Functions resolve_all(void* h, std::string& missing) {
  Functions f;
  resolve(h, "nvjpegGetProperty", f.get_property, missing);
  resolve(h, "nvjpegCreateEx", f.create_ex, missing);
  resolve(h, "nvjpegDestroy", f.destroy, missing);
  resolve(h, "nvjpegGetHardwareDecoderInfo", f.hardware_decoder_info, missing);
  resolve(h, "nvjpegJpegStateCreate", f.state_create, missing);
  resolve(h, "nvjpegJpegStateDestroy", f.state_destroy, missing);
  resolve(h, "nvjpegDecodeBatchedInitialize", f.batched_initialize, missing);
  resolve(h, "nvjpegDecodeBatched", f.decode_batched, missing);
  resolve(h, "nvjpegDecodeBatchedEx", f.decode_batched_ex, missing);
  resolve(h, "nvjpegJpegStreamCreate", f.stream_create, missing);
  resolve(h, "nvjpegJpegStreamDestroy", f.stream_destroy, missing);
  resolve(h, "nvjpegJpegStreamParseHeader", f.stream_parse_header, missing);
  resolve(h, "nvjpegDecodeBatchedSupportedEx", f.batched_supported_ex, missing);
  resolve(h, "nvjpegDecodeParamsCreate", f.params_create, missing);
  resolve(h, "nvjpegDecodeParamsDestroy", f.params_destroy, missing);
  resolve(
      h,
      "nvjpegDecodeParamsSetOutputFormat",
      f.params_set_output_format,
      missing);
  resolve(h, "nvjpegDecodeParamsSetROI", f.params_set_roi, missing);
  return f;
}

// The folder of the loaded libtorch_cpu.so (site-packages/torch/lib for
// pip's torch), or "" when it cannot be told.
fs::path torch_library_dir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&at::globalContext), &info) == 0 ||
      info.dli_fname == nullptr) {
    return {};
  }
  return fs::path(info.dli_fname).parent_path();
}

} // namespace

std::string status_name(Status s) {
  switch (s) {
    case 0:
      return "success";
    case 1:
      return "not initialized";
    case 2:
      return "invalid parameter";
    case 3:
      return "bad JPEG";
    case 4:
      return "JPEG not supported";
    case 5:
      return "allocator failure";
    case 6:
      return "execution failed";
    case 7:
      return "architecture mismatch";
    case 8:
      return "internal error";
    case 9:
      return "implementation not supported";
    case 10:
      return "incomplete bitstream";
    default:
      return fmt::format("status {}", s);
  }
}

std::vector<std::string> library_candidates() {
  const char* env = std::getenv("HOTLOOP_NVJPEG_LIB");
  if (env != nullptr && *env != '\0') {
    return {env};
  }
  std::vector<std::string> out;
  const fs::path torch_lib = torch_library_dir();
  if (!torch_lib.empty()) {
    const fs::path site = torch_lib.parent_path().parent_path();
    out.push_back((site / "nvidia/cu13/lib/libnvjpeg.so.13").string());
    std::error_code ec;
    for (const auto& e :
         fs::directory_iterator(site / "torchvision.libs", ec)) {
      const std::string name = e.path().filename().string();
      if (name.starts_with("libnvjpeg") && name.ends_with(".so.13")) {
        out.push_back(e.path().string());
      }
    }
  }
  out.emplace_back("libnvjpeg.so.13");
  out.emplace_back("/usr/local/cuda/lib64/libnvjpeg.so.13");
  return out;
}

std::unique_ptr<Library> Library::open(
    const std::vector<std::string>& candidates) {
  std::string tried;
  for (const std::string& path : candidates) {
    ::dlerror();
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = ::dlerror();
      tried += fmt::format("\n  {}: {}", path, why != nullptr ? why : "?");
      continue;
    }
    std::string missing;
    Functions fn = resolve_all(handle, missing);
    if (!missing.empty()) {
      ::dlclose(handle);
      tried += fmt::format("\n  {}: lacks {}", path, missing);
      continue;
    }
    return std::unique_ptr<Library>(new Library(handle, path, fn));
  }
  throw EnvError(
      fmt::format("cannot load nvJPEG (--decode-device gpu):{}", tried),
      "install the nvidia-nvjpeg wheel beside torch (pip install nvidia-nvjpeg), or set HOTLOOP_NVJPEG_LIB to a libnvjpeg.so.13; --decode-device cpu needs none");
}

Library::Library(void* handle, std::string path, Functions fn)
    : handle_(handle), path_(std::move(path)), fn_(fn) {}

Library::~Library() {
  ::dlclose(handle_);
}

std::string Library::version() const {
  int major = 0, minor = 0, patch = 0;
  // libraryPropertyType: MAJOR_VERSION 0, MINOR_VERSION 1, PATCH_LEVEL 2.
  if (fn_.get_property(0, &major) != kSuccess ||
      fn_.get_property(1, &minor) != kSuccess ||
      fn_.get_property(2, &patch) != kSuccess) {
    return "unknown";
  }
  return fmt::format("{}.{}.{}", major, minor, patch);
}

} // namespace hotloop::cuda::nvjpeg
