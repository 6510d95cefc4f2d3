#pragma once
// The pickle inside a torch.save() file (torch_zip_format.h), interpreted
// and never run: plain values (None, bools, numbers, strings, tuples, lists,
// dicts, OrderedDict) and the few torch functions that rebuild tensors; any
// other global is refused by name. No LibTorch here (fuzz/ fuzzes it).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hotloop/model/weight_formats/weight_dtype.h"

namespace hotloop::model::pickle {

// The values a state-dict pickle builds. Owned by the Unpickler's arena and
// referred to by raw pointer, so that the cycles a hostile pickle can make
// (a list appended to itself) cannot leak or recurse.
struct Value {
  enum class Kind {
    None,
    Bool,
    Int,
    Float,
    String,
    Tuple,
    List,
    Dict,
    Global,
    Storage,
    Tensor
  };
  Kind kind = Kind::None;
  std::int64_t i = 0;
  double f = 0;
  std::string s; // String; Global "module.name"; Storage key
  std::vector<Value*> items; // Tuple, List
  std::vector<std::pair<Value*, Value*>> entries; // Dict
  // Storage: dtype, numel. Tensor: the storage and the view on it.
  WeightDType dtype = WeightDType::F32;
  std::int64_t numel = 0;
  Value* storage = nullptr;
  std::int64_t storage_offset = 0;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
};

const char* kind_name(Value::Kind k);

// A pickle's values: `root` and everything it refers to, owned by `arena`.
struct Parsed {
  const Value* root = nullptr;
  std::vector<std::unique_ptr<Value>> arena;
};

// Interprets `pickle` from `file`. Throws DataError naming the file and the
// byte offset for anything malformed or refused.
Parsed unpickle(std::span<const std::uint8_t> pickle, const std::string& file);

// DataError "<file>: <why>" with the hint every torch.save() reading error
// gives.
[[noreturn]] void refuse(const std::string& file, const std::string& why);

} // namespace hotloop::model::pickle
