#include "hotloop/model/weight_formats/torch_zip_format.h"

#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>
#include <zlib.h>

#include "hotloop/errors.h"
#include "hotloop/model/weight_formats/pickle_reader.h"
#include "hotloop/model/weight_formats/zip_archive.h"

namespace hotloop::model {

namespace {

using pickle::kind_name;
using pickle::refuse;
using pickle::Value;

bool holds_tensors(const Value* dict) {
  for (const auto& [k, v] : dict->entries) {
    if (k->kind == Value::Kind::String && v->kind == Value::Kind::Tensor) {
      return true;
    }
  }
  return false;
}

const ZipEntry* find_entry(
    const std::vector<ZipEntry>& entries,
    const std::string& name) {
  for (const auto& e : entries) {
    if (e.name == name) {
      return &e;
    }
  }
  return nullptr;
}

} // namespace

std::vector<TensorRecord> parse_torch_zip(
    std::span<const std::uint8_t> bytes,
    const std::string& file) {
  const auto entries = list_zip(bytes, file);
  const ZipEntry* pickle = nullptr;
  for (const auto& e : entries) {
    if (e.name == "data.pkl" || e.name.ends_with("/data.pkl")) {
      pickle = &e;
      break;
    }
  }
  if (pickle == nullptr) {
    refuse(file, "a zip archive without data.pkl: not a torch.save() file");
  }
  const std::string prefix =
      pickle->name.substr(0, pickle->name.size() - std::strlen("data.pkl"));
  if (const ZipEntry* order = find_entry(entries, prefix + "byteorder")) {
    std::vector<std::uint8_t> scratch;
    const auto text = zip_member(bytes, *order, scratch, file);
    if (std::string(text.begin(), text.end()) != "little") {
      refuse(
          file,
          "saved on a big-endian machine; hotloop reads little-endian files");
    }
  }
  std::vector<std::uint8_t> scratch;
  const pickle::Parsed parsed =
      pickle::unpickle(zip_member(bytes, *pickle, scratch, file), file);
  const Value* root = parsed.root;
  if (root->kind != Value::Kind::Dict) {
    refuse(
        file,
        fmt::format("holds a {}, not a state dict", kind_name(root->kind)));
  }
  if (!holds_tensors(root)) {
    for (const auto& [k, v] : root->entries) {
      if (k->kind == Value::Kind::String && v->kind == Value::Kind::Dict &&
          (k->s == "state_dict" || k->s == "model" || k->s == "module") &&
          holds_tensors(v)) {
        root = v;
        break;
      }
    }
  }
  std::vector<TensorRecord> out;
  for (const auto& [k, v] : root->entries) {
    if (k->kind != Value::Kind::String || v->kind != Value::Kind::Tensor) {
      continue; // e.g. an epoch counter next to the tensors
    }
    const Value* storage = v->storage;
    const ZipEntry* data = find_entry(entries, prefix + "data/" + storage->s);
    if (data == nullptr) {
      refuse(
          file,
          fmt::format(
              "tensor '{}': its storage data/{} is missing", k->s, storage->s));
    }
    if (data->method != 0) {
      refuse(file, fmt::format("tensor '{}': its storage is compressed", k->s));
    }
    TensorRecord r;
    r.name = k->s;
    r.dtype = storage->dtype;
    r.shape = v->shape;
    r.strides = v->strides;
    r.storage_offset = v->storage_offset;
    r.data_offset = data->data_offset;
    r.data_size = data->size;
    std::uint64_t storage_bytes = 0;
    if (__builtin_mul_overflow(
            static_cast<std::uint64_t>(storage->numel),
            item_size(r.dtype),
            &storage_bytes) ||
        storage_bytes > data->size) {
      refuse(
          file,
          fmt::format(
              "tensor '{}': storage data/{} is shorter than its {} elements",
              k->s,
              storage->s,
              storage->numel));
    }
    r.data_size = storage_bytes;
    check_in_bounds(r, file);
    out.push_back(std::move(r));
  }
  if (out.empty()) {
    refuse(file, "holds no tensors");
  }
  return out;
}

} // namespace hotloop::model
