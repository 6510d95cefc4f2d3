// Weight files <-> tensors: the byte formats are parsed by safetensors_format
// and torch_zip_format (no LibTorch there); this file makes tensors of them and
// loads them into modules.

#include "hotloop/model/weights.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <set>
#include <unordered_map>

#include <ATen/ops/empty.h>
#include <c10/util/irange.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/module.h>
#include <zlib.h>

#include "hotloop/core/atomic_file.h"
#include "hotloop/data/file_io.h"
#include "hotloop/errors.h"
#include "hotloop/model/weight_formats/safetensors_format.h"
#include "hotloop/model/weight_formats/torch_zip_format.h"

namespace hotloop::model {

static_assert(
    std::endian::native == std::endian::little,
    "weight files are little-endian; hotloop reads them in place");

namespace {

at::ScalarType to_scalar_type(WeightDType d) {
  switch (d) {
    case WeightDType::F64:
      return at::kDouble;
    case WeightDType::F32:
      return at::kFloat;
    case WeightDType::F16:
      return at::kHalf;
    case WeightDType::BF16:
      return at::kBFloat16;
    case WeightDType::I64:
      return at::kLong;
    case WeightDType::I32:
      return at::kInt;
    case WeightDType::I16:
      return at::kShort;
    case WeightDType::I8:
      return at::kChar;
    case WeightDType::U8:
      return at::kByte;
    case WeightDType::Bool:
      return at::kBool;
  }
  return at::kFloat;
}

WeightDType to_weight_dtype(at::ScalarType t, const std::string& name) {
  switch (t) {
    case at::kDouble:
      return WeightDType::F64;
    case at::kFloat:
      return WeightDType::F32;
    case at::kHalf:
      return WeightDType::F16;
    case at::kBFloat16:
      return WeightDType::BF16;
    case at::kLong:
      return WeightDType::I64;
    case at::kInt:
      return WeightDType::I32;
    case at::kShort:
      return WeightDType::I16;
    case at::kChar:
      return WeightDType::I8;
    case at::kByte:
      return WeightDType::U8;
    case at::kBool:
      return WeightDType::Bool;
    default:
      throw DataError(fmt::format(
          "tensor '{}' has dtype {}, which weight files here cannot hold",
          name,
          c10::toString(t)));
  }
}

at::Tensor make_tensor(
    const TensorRecord& r,
    std::span<const std::uint8_t> bytes) {
  const std::int64_t elements =
      static_cast<std::int64_t>(r.data_size / item_size(r.dtype));
  at::Tensor storage =
      at::empty({elements}, at::TensorOptions().dtype(to_scalar_type(r.dtype)));
  std::memcpy(
      storage.data_ptr(),
      bytes.data() + r.data_offset,
      elements * item_size(r.dtype));
  return storage.as_strided(r.shape, r.strides, r.storage_offset).contiguous();
}

bool is_zip(std::span<const std::uint8_t> bytes) {
  return bytes.size() >= 4 && bytes[0] == 'P' && bytes[1] == 'K' &&
      (bytes[2] == 3 || bytes[2] == 5) && (bytes[3] == 4 || bytes[3] == 6);
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

bool has_prefix(
    const std::string& name,
    const std::vector<std::string>& prefixes) {
  return std::any_of(
      prefixes.begin(), prefixes.end(), [&](const std::string& p) {
        return name.starts_with(p);
      });
}

} // namespace

namespace {

// CRC-32 of `data`, continuing from `crc` (zlib takes at most 4 GiB a call).
std::uint32_t crc32_of(std::uint32_t crc, std::span<const std::uint8_t> data) {
  constexpr std::size_t kChunk = 1u << 30;
  for (std::size_t at = 0; at < data.size(); at += kChunk) {
    const std::size_t n = std::min(kChunk, data.size() - at);
    crc = static_cast<std::uint32_t>(
        crc32(crc, data.data() + at, static_cast<uInt>(n)));
  }
  return crc;
}

constexpr const char* kChecksumKey = "hotloop.crc32";

} // namespace

WeightFile read_weight_file(const std::string& path) {
  const std::vector<std::uint8_t> bytes = data::read_file(path);
  return parse_weight_file(bytes, path);
}

WeightFile parse_weight_file(
    std::span<const std::uint8_t> bytes,
    const std::string& path) {
  WeightFile out;
  std::vector<TensorRecord> records;
  if (is_zip(bytes)) {
    records = parse_torch_zip(bytes, path);
  } else {
    SafetensorsFile f = parse_safetensors(bytes, path);
    records = std::move(f.tensors);
    out.metadata = std::move(f.metadata);
    // hotloop's own files carry a checksum of the data section: a checkpoint
    // damaged on disk is caught here, not trained from.
    if (const auto it = out.metadata.find(kChecksumKey);
        it != out.metadata.end()) {
      std::uint64_t header = 0;
      std::memcpy(&header, bytes.data(), 8);
      const std::string actual =
          fmt::format("{:08x}", crc32_of(0, bytes.subspan(8 + header)));
      if (actual != it->second) {
        throw DataError(
            fmt::format(
                "{}: checksum mismatch (stored {}, data has {}): the file is corrupt",
                path,
                it->second,
                actual),
            "use another copy or an earlier checkpoint");
      }
    }
  }
  out.tensors.reserve(records.size());
  for (const auto& r : records) {
    out.tensors.emplace_back(r.name, make_tensor(r, bytes));
  }
  return out;
}

StateDict read_weights(const std::string& path) {
  return read_weight_file(path).tensors;
}

void write_weights(
    const std::string& path,
    const StateDict& weights,
    const std::map<std::string, std::string>& metadata,
    const std::function<void()>& before_commit) {
  std::vector<at::Tensor> keep; // the CPU contiguous copies the spans view
  std::vector<TensorBytes> tensors;
  std::set<std::string> names;
  for (const auto& [name, tensor] : weights) {
    if (!names.insert(name).second) {
      throw DataError(
          fmt::format("{}: tensor name '{}' appears twice", path, name));
    }
    at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
    TensorBytes b;
    b.name = name;
    b.dtype = to_weight_dtype(t.scalar_type(), name);
    b.shape = t.sizes().vec();
    b.data = {static_cast<const std::uint8_t*>(t.data_ptr()), t.nbytes()};
    keep.push_back(std::move(t));
    tensors.push_back(std::move(b));
  }
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".pt" || ext == ".pth") {
    std::vector<std::uint8_t> zip;
    write_torch_zip(tensors, std::filesystem::path(path).stem().string(), zip);
    write_file_atomic(path, {zip}, before_commit);
    return;
  }
  std::uint32_t crc = 0;
  for (const auto& t : tensors) {
    crc = crc32_of(crc, t.data);
  }
  std::map<std::string, std::string> meta = metadata;
  meta[kChecksumKey] = fmt::format("{:08x}", crc);
  const std::vector<std::uint8_t> header = safetensors_header(tensors, meta);
  std::vector<std::span<const std::uint8_t>> parts{header};
  for (const auto& t : tensors) {
    parts.push_back(t.data);
  }
  write_file_atomic(path, parts, before_commit);
}

StateDict state_dict(const torch::nn::Module& module) {
  // torch's order: each module's own parameters, then its own buffers, in
  // module order.
  StateDict out;
  for (const auto& item : module.named_modules()) {
    const std::string prefix = item.key().empty() ? "" : item.key() + ".";
    for (const auto& p : item.value()->named_parameters(/*recurse=*/false)) {
      out.emplace_back(prefix + p.key(), p.value());
    }
    for (const auto& b : item.value()->named_buffers(/*recurse=*/false)) {
      out.emplace_back(prefix + b.key(), b.value());
    }
  }
  return out;
}

LoadReport load_state_dict(
    torch::nn::Module& module,
    const StateDict& weights,
    const LoadOptions& options) {
  std::unordered_map<std::string, const at::Tensor*> file;
  for (const auto& [name, t] : weights) {
    file.emplace(name, &t);
  }
  LoadReport report;
  std::vector<std::pair<at::Tensor, const at::Tensor*>> copies;
  std::set<std::string> model_names;
  for (const auto& [name, target] : state_dict(module)) {
    model_names.insert(name);
    if (has_prefix(name, options.skip_prefixes)) {
      report.skipped.push_back(name);
      continue;
    }
    const auto it = file.find(name);
    if (it == file.end()) {
      report.missing.push_back(name);
    } else if (it->second->sizes() != target.sizes()) {
      report.mismatched.push_back(
          {name, target.sizes().vec(), it->second->sizes().vec()});
    } else {
      copies.emplace_back(target, it->second);
      report.loaded.push_back(name);
    }
  }
  for (const auto& [name, t] : weights) {
    if (!model_names.contains(name) &&
        !has_prefix(name, options.skip_prefixes)) {
      report.unexpected.push_back(name);
    }
  }
  if (options.strict && !report.complete()) {
    throw DataError(
        fmt::format(
            "{} does not match the model:\n{}",
            options.source.empty() ? std::string("the weights")
                                   : options.source,
            describe(report)),
        "check --model (and -small), --num-classes and --in-channels against the file; --init-strict false loads what matches");
  }
  at::NoGradGuard no_grad;
  for (auto& [target, source] : copies) {
    if (options.defer && options.defer(target)) {
      report.deferred.emplace_back(target, source);
    } else {
      target.copy_(*source);
    }
  }
  return report;
}

std::string describe(const LoadReport& r, std::size_t max_listed) {
  std::string out = fmt::format(
      "  loaded {}, missing {}, unexpected {}, shape mismatches {}{}\n",
      r.loaded.size(),
      r.missing.size(),
      r.unexpected.size(),
      r.mismatched.size(),
      r.skipped.empty()
          ? std::string()
          : fmt::format(", newly initialized {}", r.skipped.size()));
  auto list = [&](const char* what, const std::vector<std::string>& names) {
    for (std::size_t i = 0; i < names.size() && i < max_listed; ++i) {
      out += fmt::format("  {}: {}\n", what, names[i]);
    }
    if (names.size() > max_listed) {
      out += fmt::format(
          "  ... and {} more {}\n", names.size() - max_listed, what);
    }
  };
  list("missing", r.missing);
  list("unexpected", r.unexpected);
  for (std::size_t i = 0; i < r.mismatched.size() && i < max_listed; ++i) {
    const auto& m = r.mismatched[i];
    out += fmt::format(
        "  shape mismatch: {}: model {} vs file {}\n",
        m.name,
        shape_text(m.model_shape),
        shape_text(m.file_shape));
  }
  if (r.mismatched.size() > max_listed) {
    out += fmt::format(
        "  ... and {} more shape mismatches\n",
        r.mismatched.size() - max_listed);
  }
  return out;
}

} // namespace hotloop::model
