#pragma once
// nvJPEG (the `nvidia-nvjpeg` wheel's libnvjpeg.so.13) loaded at run time, as
// NVML is: hotloop never links it, so a machine without it still runs
// everything with the CPU's decoder. Only what --decode-device gpu calls is
// declared here, with nvjpeg.h's values (tests/cuda/test_nvjpeg_library.cpp
// pins them to the wheel's header).

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace hotloop::cuda::nvjpeg {

using Status = int; // nvjpegStatus_t
inline constexpr Status kSuccess = 0;
inline constexpr Status kBadJpeg = 3;
inline constexpr Status kJpegNotSupported = 4;
inline constexpr Status kArchMismatch = 7;
using Backend = int; // nvjpegBackend_t
inline constexpr Backend kBackendDefault = 0; // hybrid: Huffman on the CPU
inline constexpr Backend kBackendHardware = 3; // the A100/H100's engines
using OutputFormat = int; // nvjpegOutputFormat_t
inline constexpr OutputFormat kOutputY = 2;
inline constexpr OutputFormat kOutputRgbi = 5;
inline constexpr int kMaxComponent = 4;

struct Image { // nvjpegImage_t
  unsigned char* channel[kMaxComponent];
  std::size_t pitch[kMaxComponent];
};
struct HandleSt;
using Handle = HandleSt*;
struct StateSt;
using State = StateSt*;
struct StreamSt; // a parsed bitstream
using JpegStream = StreamSt*;
struct ParamsSt;
using DecodeParams = ParamsSt*;
struct CUstream_st;
using CudaStream = CUstream_st*;

using GetPropertyFn = Status (*)(int type, int* value);
using CreateExFn =
    Status (*)(Backend, void* dev_alloc, void* pinned_alloc, unsigned, Handle*);
using DestroyFn = Status (*)(Handle);
using HardwareInfoFn = Status (*)(Handle, unsigned*, unsigned*);
using StateCreateFn = Status (*)(Handle, State*);
using StateDestroyFn = Status (*)(State);
using BatchedInitializeFn = Status (*)(Handle, State, int, int, OutputFormat);
using DecodeBatchedFn = Status (*)(
    Handle,
    State,
    const unsigned char* const*,
    const std::size_t*,
    Image*,
    CudaStream);
using DecodeBatchedExFn = Status (*)(
    Handle,
    State,
    const unsigned char* const*,
    const std::size_t*,
    Image*,
    DecodeParams*,
    CudaStream);
using StreamCreateFn = Status (*)(Handle, JpegStream*);
using StreamDestroyFn = Status (*)(JpegStream);
using StreamParseHeaderFn =
    Status (*)(Handle, const unsigned char*, std::size_t, JpegStream);
using SupportedExFn = Status (*)(Handle, JpegStream, DecodeParams, int*);
using ParamsCreateFn = Status (*)(Handle, DecodeParams*);
using ParamsDestroyFn = Status (*)(DecodeParams);
using ParamsSetOutputFormatFn = Status (*)(DecodeParams, OutputFormat);
using ParamsSetRoiFn = Status (*)(DecodeParams, int, int, int, int);

struct Functions {
  GetPropertyFn get_property = nullptr;
  CreateExFn create_ex = nullptr;
  DestroyFn destroy = nullptr;
  HardwareInfoFn hardware_decoder_info = nullptr;
  StateCreateFn state_create = nullptr;
  StateDestroyFn state_destroy = nullptr;
  BatchedInitializeFn batched_initialize = nullptr;
  DecodeBatchedFn decode_batched = nullptr;
  DecodeBatchedExFn decode_batched_ex = nullptr;
  StreamCreateFn stream_create = nullptr;
  StreamDestroyFn stream_destroy = nullptr;
  StreamParseHeaderFn stream_parse_header = nullptr;
  SupportedExFn batched_supported_ex = nullptr;
  ParamsCreateFn params_create = nullptr;
  ParamsDestroyFn params_destroy = nullptr;
  ParamsSetOutputFormatFn params_set_output_format = nullptr;
  ParamsSetRoiFn params_set_roi = nullptr;
};

// nvjpegStatus_t in words ("bad JPEG", ...).
std::string status_name(Status s);

// Where to look, in order: $HOTLOOP_NVJPEG_LIB alone when set; else the
// nvidia-nvjpeg wheel beside the loaded LibTorch (site-packages/nvidia/cu13/
// lib), torchvision's bundled copy, the loader's search path, and the CUDA
// toolkit's lib64.
std::vector<std::string> library_candidates();

// An open libnvjpeg with every function above resolved.
class Library {
 public:
  // The first of `candidates` that loads and has every function; EnvError
  // listing what each said otherwise.
  static std::unique_ptr<Library> open(
      const std::vector<std::string>& candidates);
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  const Functions& fn() const {
    return fn_;
  }
  const std::string& path() const {
    return path_;
  }
  // "13.3.2" (nvjpegGetProperty: major, minor, patch).
  std::string version() const;

 private:
  Library(void* handle, std::string path, Functions fn);
  void* handle_;
  std::string path_;
  Functions fn_;
};

} // namespace hotloop::cuda::nvjpeg
