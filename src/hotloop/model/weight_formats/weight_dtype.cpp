#include "hotloop/model/weight_formats/weight_dtype.h"

#include <algorithm>

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::model {

namespace {

struct DTypeInfo {
  WeightDType dtype;
  const char* name;
  std::size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {WeightDType::F64, "F64", 8},
    {WeightDType::F32, "F32", 4},
    {WeightDType::F16, "F16", 2},
    {WeightDType::BF16, "BF16", 2},
    {WeightDType::I64, "I64", 8},
    {WeightDType::I32, "I32", 4},
    {WeightDType::I16, "I16", 2},
    {WeightDType::I8, "I8", 1},
    {WeightDType::U8, "U8", 1},
    {WeightDType::Bool, "BOOL", 1},
};

const DTypeInfo& info(WeightDType dtype) {
  for (const auto& i : kDTypes) {
    if (i.dtype == dtype) {
      return i;
    }
  }
  return kDTypes[1];
}

} // namespace

std::size_t item_size(WeightDType dtype) {
  return info(dtype).size;
}

const char* safetensors_name(WeightDType dtype) {
  return info(dtype).name;
}

std::optional<WeightDType> parse_safetensors_dtype(const std::string& name) {
  for (const auto& i : kDTypes) {
    if (name == i.name) {
      return i.dtype;
    }
  }
  return std::nullopt;
}

std::vector<std::int64_t> contiguous_strides(
    const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> strides(shape.size(), 1);
  for (std::size_t i = shape.size(); i > 1; --i) {
    strides[i - 2] = strides[i - 1] * std::max<std::int64_t>(shape[i - 1], 1);
  }
  return strides;
}

void check_in_bounds(const TensorRecord& r, const std::string& file) {
  auto fail = [&](const std::string& why) {
    throw DataError(
        fmt::format("{}: tensor '{}': {}", file, r.name, why),
        "the weight file is corrupt or truncated; export it again");
  };
  if (r.strides.size() != r.shape.size()) {
    fail("strides and shape differ in length");
  }
  if (r.storage_offset < 0) {
    fail("negative storage offset");
  }
  const std::uint64_t item = item_size(r.dtype);
  const std::uint64_t storage_elements = r.data_size / item;
  // The last element addressed: offset + sum((size - 1) * stride). An empty
  // tensor addresses nothing.
  std::uint64_t last = static_cast<std::uint64_t>(r.storage_offset);
  for (std::size_t d = 0; d < r.shape.size(); ++d) {
    if (r.shape[d] < 0) {
      fail(fmt::format("negative size {} in dimension {}", r.shape[d], d));
    }
    if (r.strides[d] < 0) {
      fail(fmt::format("negative stride in dimension {}", d));
    }
    if (r.shape[d] == 0) {
      return;
    }
    std::uint64_t reach = 0;
    if (__builtin_mul_overflow(
            static_cast<std::uint64_t>(r.shape[d] - 1),
            static_cast<std::uint64_t>(r.strides[d]),
            &reach) ||
        __builtin_add_overflow(last, reach, &last)) {
      fail("sizes and strides overflow");
    }
  }
  if (last >= storage_elements) {
    fail(fmt::format(
        "its elements run past its data ({} bytes of {})",
        r.data_size,
        safetensors_name(r.dtype)));
  }
}

} // namespace hotloop::model
