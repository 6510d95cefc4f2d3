#include "hotloop/model/weight_formats/safetensors_format.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/core/json_depth.h"
#include "hotloop/errors.h"

namespace hotloop::model {

namespace {

// The reference implementation refuses headers above 100 MB; so do we (a
// corrupt length must not become a huge allocation).
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

[[noreturn]] void corrupt(const std::string& file, const std::string& why) {
  throw DataError(
      fmt::format("{}: not a valid safetensors file: {}", file, why),
      "export it again (safetensors.torch.save_file(state_dict, path)) or check that the copy is complete");
}

std::uint64_t read_u64_le(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) {
    v = (v << 8) | p[i];
  }
  return v;
}

std::uint64_t checked_elements(
    const std::vector<std::int64_t>& shape,
    bool* overflow) {
  std::uint64_t n = 1;
  for (const auto d : shape) {
    if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n)) {
      *overflow = true;
      return 0;
    }
  }
  return n;
}

// The JSON header: its length fits in the file, it nests no deeper than any
// real one (nlohmann's parser recurses) and it is an object.
nlohmann::json read_header(
    std::span<const std::uint8_t> bytes,
    const std::string& file) {
  if (bytes.size() < 8) {
    corrupt(
        file,
        fmt::format(
            "{} bytes, shorter than its 8-byte header length", bytes.size()));
  }
  const std::uint64_t header_size = read_u64_le(bytes.data());
  if (header_size > kMaxHeaderBytes || header_size > bytes.size() - 8) {
    corrupt(
        file,
        fmt::format(
            "header length {} does not fit in the file ({} bytes)",
            header_size,
            bytes.size()));
  }
  const auto* header_begin = reinterpret_cast<const char*>(bytes.data() + 8);
  if (json_depth(std::string_view(header_begin, header_size)) > kMaxJsonDepth) {
    corrupt(
        file,
        fmt::format(
            "its header nests more than {} levels deep", kMaxJsonDepth));
  }
  nlohmann::json header = nlohmann::json::parse(
      header_begin, header_begin + header_size, nullptr, false);
  if (header.is_discarded() || !header.is_object()) {
    corrupt(file, "its header is not a JSON object");
  }
  return header;
}

} // namespace

SafetensorsFile parse_safetensors(
    std::span<const std::uint8_t> bytes,
    const std::string& file) {
  const nlohmann::json header = read_header(bytes, file);
  const std::uint64_t header_size = read_u64_le(bytes.data());
  const std::uint64_t data_start = 8 + header_size;
  const std::uint64_t data_size = bytes.size() - data_start;

  SafetensorsFile out;
  for (const auto& item : header.items()) {
    // Not a structured binding: lambdas below capture the name (clang 14).
    const std::string& name = item.key();
    const nlohmann::json& entry = item.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) {
        corrupt(file, "__metadata__ is not an object");
      }
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) {
          corrupt(file, fmt::format("__metadata__['{}'] is not a string", key));
        }
        out.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& why) {
      corrupt(file, fmt::format("tensor '{}': {}", name, why));
    };
    if (!entry.is_object()) {
      bad("its entry is not an object");
    }
    const auto dtype_it = entry.find("dtype");
    const auto shape_it = entry.find("shape");
    const auto offsets_it = entry.find("data_offsets");
    if (dtype_it == entry.end() || shape_it == entry.end() ||
        offsets_it == entry.end()) {
      bad("needs dtype, shape and data_offsets");
    }
    if (!dtype_it->is_string()) {
      bad("dtype is not a string");
    }
    const auto dtype = parse_safetensors_dtype(dtype_it->get<std::string>());
    if (!dtype) {
      bad(fmt::format(
          "dtype {} is not supported (F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL are)",
          dtype_it->get<std::string>()));
    }
    TensorRecord r;
    r.name = name;
    r.dtype = *dtype;
    if (!shape_it->is_array() || shape_it->size() > 64) {
      bad("shape is not an array of at most 64 sizes");
    }
    for (const auto& d : *shape_it) {
      if (!d.is_number_unsigned() ||
          d.get<std::uint64_t>() >
              static_cast<std::uint64_t>(
                  std::numeric_limits<std::int64_t>::max())) {
        bad("shape holds something other than a size");
      }
      r.shape.push_back(d.get<std::int64_t>());
    }
    if (!offsets_it->is_array() || offsets_it->size() != 2 ||
        !(*offsets_it)[0].is_number_unsigned() ||
        !(*offsets_it)[1].is_number_unsigned()) {
      bad("data_offsets is not [begin, end]");
    }
    const auto begin = (*offsets_it)[0].get<std::uint64_t>();
    const auto end = (*offsets_it)[1].get<std::uint64_t>();
    if (begin > end || end > data_size) {
      bad(fmt::format(
          "data_offsets [{}, {}] outside the {} data bytes (truncated file?)",
          begin,
          end,
          data_size));
    }
    bool overflow = false;
    const std::uint64_t elements = checked_elements(r.shape, &overflow);
    std::uint64_t expected = 0;
    if (overflow ||
        __builtin_mul_overflow(elements, item_size(r.dtype), &expected) ||
        expected != end - begin) {
      bad(fmt::format(
          "shape and dtype need {} bytes but data_offsets give {}",
          overflow ? std::string("too many") : std::to_string(expected),
          end - begin));
    }
    r.strides = contiguous_strides(r.shape);
    r.data_offset = data_start + begin;
    r.data_size = end - begin;
    out.tensors.push_back(std::move(r));
  }
  // The JSON object has no order; the data does: report tensors in the order
  // they were written.
  std::stable_sort(
      out.tensors.begin(),
      out.tensors.end(),
      [](const TensorRecord& a, const TensorRecord& b) {
        return a.data_offset < b.data_offset;
      });
  return out;
}

std::vector<std::uint8_t> safetensors_header(
    const std::vector<TensorBytes>& tensors,
    const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) {
    header["__metadata__"] = metadata;
  }
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    std::uint64_t elements = 1;
    for (const auto d : t.shape) {
      elements *= static_cast<std::uint64_t>(d);
    }
    if (elements * item_size(t.dtype) != t.data.size()) {
      throw DataError(fmt::format(
          "safetensors: tensor '{}' has {} bytes, its shape needs {}",
          t.name,
          t.data.size(),
          elements * item_size(t.dtype)));
    }
    header[t.name] = {
        {"dtype", safetensors_name(t.dtype)},
        {"shape", t.shape},
        {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<std::uint8_t> out(8 + text.size());
  std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<std::uint8_t>(n >> (8 * i));
  }
  std::memcpy(out.data() + 8, text.data(), text.size());
  return out;
}

} // namespace hotloop::model
