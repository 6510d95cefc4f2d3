#pragma once
// The safetensors format (https://github.com/huggingface/safetensors), as
// bytes:
//   u64 little-endian N | N bytes of JSON header | raw tensor data
// The header maps each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end]} (offsets relative to the data section), plus an optional
// "__metadata__" object of strings. No LibTorch here: weights.cpp builds
// tensors from these records, and fuzz/ fuzzes this parser on its own.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "hotloop/model/weight_formats/weight_dtype.h"

namespace hotloop::model {

struct SafetensorsFile {
  // In data order (the writer's order); data_offset is from the buffer's
  // start.
  std::vector<TensorRecord> tensors;
  std::map<std::string, std::string> metadata;
};

// Parses and validates the header of the file in `bytes` (`file` names it in
// errors): the header length, the JSON, every dtype, shape and offset, and that
// each tensor's bytes lie in the file. Throws DataError otherwise. Never
// allocates more than the input's size.
SafetensorsFile parse_safetensors(
    std::span<const std::uint8_t> bytes,
    const std::string& file);

// The header (length prefix + JSON, padded with spaces to 8 bytes, as the
// reference writer does) for `tensors` laid out in order. Throws DataError
// when a tensor's byte count does not match its shape and dtype.
std::vector<std::uint8_t> safetensors_header(
    const std::vector<TensorBytes>& tensors,
    const std::map<std::string, std::string>& metadata);

} // namespace hotloop::model
