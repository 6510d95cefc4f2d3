#pragma once
// The element types weight files hold, without LibTorch: the readers for
// safetensors and torch zip files are plain byte parsers (fuzzed without
// LibTorch), and weights.cpp maps these to ATen dtypes.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace hotloop::model {

enum class WeightDType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, Bool };

std::size_t item_size(WeightDType dtype);
// safetensors' names: "F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8",
// "U8", "BOOL".
const char* safetensors_name(WeightDType dtype);
std::optional<WeightDType> parse_safetensors_dtype(const std::string& name);

// One tensor in a weight file: where its bytes are in the file's buffer.
// Elements are little-endian; `strides` are in elements (row-major when the
// format has no strides).
struct TensorRecord {
  std::string name;
  WeightDType dtype = WeightDType::F32;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  std::uint64_t data_offset = 0; // of the tensor's storage in the buffer
  std::uint64_t data_size = 0; // bytes of that storage
  std::int64_t storage_offset = 0; // first element, within the storage
};

// One tensor to write: its name, dtype, shape and contiguous little-endian
// bytes.
struct TensorBytes {
  std::string name;
  WeightDType dtype = WeightDType::F32;
  std::vector<std::int64_t> shape;
  std::span<const std::uint8_t> data;
};

// Row-major strides for `shape`.
std::vector<std::int64_t> contiguous_strides(
    const std::vector<std::int64_t>& shape);

// Checks that every element `record` addresses lies inside its storage, with no
// integer overflow on the way. Throws DataError naming `file` and the tensor.
void check_in_bounds(const TensorRecord& record, const std::string& file);

} // namespace hotloop::model
