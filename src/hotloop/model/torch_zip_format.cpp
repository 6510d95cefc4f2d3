#include "hotloop/model/torch_zip_format.h"

#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>
#include <zlib.h>

#include "hotloop/errors.h"
#include "hotloop/model/zip_archive.h"

namespace hotloop::model {

namespace {

constexpr const char* kHint =
    "hotloop reads files written by torch.save(model.state_dict(), path); re-save the state dict alone, or export safetensors (safetensors.torch.save_file)";

[[noreturn]] void refuse(const std::string& file, const std::string& why) {
  throw DataError(fmt::format("{}: {}", file, why), kHint);
}

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

const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::None:
      return "None";
    case Value::Kind::Bool:
      return "bool";
    case Value::Kind::Int:
      return "int";
    case Value::Kind::Float:
      return "float";
    case Value::Kind::String:
      return "str";
    case Value::Kind::Tuple:
      return "tuple";
    case Value::Kind::List:
      return "list";
    case Value::Kind::Dict:
      return "dict";
    case Value::Kind::Global:
      return "global";
    case Value::Kind::Storage:
      return "storage";
    case Value::Kind::Tensor:
      return "tensor";
  }
  return "?";
}

// torch's legacy storage classes name the element type of a saved storage.
std::optional<WeightDType> storage_dtype(const std::string& global) {
  static const std::map<std::string, WeightDType> kStorages = {
      {"torch.DoubleStorage", WeightDType::F64},
      {"torch.FloatStorage", WeightDType::F32},
      {"torch.HalfStorage", WeightDType::F16},
      {"torch.BFloat16Storage", WeightDType::BF16},
      {"torch.LongStorage", WeightDType::I64},
      {"torch.IntStorage", WeightDType::I32},
      {"torch.ShortStorage", WeightDType::I16},
      {"torch.CharStorage", WeightDType::I8},
      {"torch.ByteStorage", WeightDType::U8},
      {"torch.BoolStorage", WeightDType::Bool},
  };
  const auto it = kStorages.find(global);
  if (it == kStorages.end()) {
    return std::nullopt;
  }
  return it->second;
}

bool allowed_global(const std::string& g) {
  return g == "collections.OrderedDict" ||
      g == "torch._utils._rebuild_tensor_v2" ||
      g == "torch._utils._rebuild_parameter" ||
      g == "torch._utils._rebuild_parameter_with_state" ||
      storage_dtype(g).has_value();
}

class Unpickler {
 public:
  Unpickler(std::span<const std::uint8_t> pickle, const std::string& file)
      : in_(pickle), file_(file) {}

  Value* run() {
    while (true) {
      const std::size_t at = pos_;
      const std::uint8_t op = byte();
      switch (op) {
        case 0x80: // PROTO
          byte();
          break;
        case 0x95: // FRAME
          bytes(8);
          break;
        case '.': // STOP
          if (stack_.size() != 1 || !marks_.empty()) {
            fail(at, "ends with an unbalanced stack");
          }
          return stack_.back();
        case '(': // MARK
          marks_.push_back(stack_.size());
          break;
        case '0': // POP
          pop(at);
          break;
        case '1': // POP_MARK
          pop_mark(at);
          break;
        case '2': // DUP
          push(top(at));
          break;
        case 'N':
          push(make(Value::Kind::None));
          break;
        case 0x88: // NEWTRUE
        case 0x89: { // NEWFALSE
          Value* v = make(Value::Kind::Bool);
          v->i = op == 0x88;
          push(v);
          break;
        }
        case 'J': // BININT
          push_int(static_cast<std::int32_t>(le(4)));
          break;
        case 'K': // BININT1
          push_int(le(1));
          break;
        case 'M': // BININT2
          push_int(le(2));
          break;
        case 0x8a: { // LONG1
          const std::size_t n = byte();
          if (n > 8) {
            fail(at, "integer wider than 64 bits");
          }
          const auto* p = bytes(n);
          std::uint64_t v = 0;
          for (std::size_t k = n; k > 0; --k) {
            v = (v << 8) | p[k - 1];
          }
          if (n > 0 && n < 8 && (p[n - 1] & 0x80) != 0) {
            v |= ~std::uint64_t{0} << (8 * n); // sign-extend
          }
          push_int(static_cast<std::int64_t>(v));
          break;
        }
        case 'G': { // BINFLOAT, big-endian
          const auto* p = bytes(8);
          std::uint64_t bits = 0;
          for (int k = 0; k < 8; ++k) {
            bits = (bits << 8) | p[k];
          }
          Value* v = make(Value::Kind::Float);
          std::memcpy(&v->f, &bits, 8);
          push(v);
          break;
        }
        case 'X': // BINUNICODE
        case 'B': // BINBYTES
        case 'T': // BINSTRING
          push_string(le(4));
          break;
        case 0x8c: // SHORT_BINUNICODE
        case 'C': // SHORT_BINBYTES
        case 'U': // SHORT_BINSTRING
          push_string(byte());
          break;
        case 0x8d: // BINUNICODE8
        case 0x8e: // BINBYTES8
          push_string(le(8));
          break;
        case ')':
          push(make(Value::Kind::Tuple));
          break;
        case ']':
          push(make(Value::Kind::List));
          break;
        case '}':
          push(make(Value::Kind::Dict));
          break;
        case 0x85: // TUPLE1
        case 0x86: // TUPLE2
        case 0x87: { // TUPLE3
          const std::size_t n = op - 0x84u;
          if (stack_.size() < n + floor()) {
            fail(at, "tuple of missing values");
          }
          Value* t = make(Value::Kind::Tuple);
          t->items.assign(
              stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
          stack_.resize(stack_.size() - n);
          push(t);
          break;
        }
        case 't': { // TUPLE
          Value* t = make(Value::Kind::Tuple);
          t->items = pop_mark(at);
          push(t);
          break;
        }
        case 'l': { // LIST
          Value* l = make(Value::Kind::List);
          l->items = pop_mark(at);
          push(l);
          break;
        }
        case 'd': { // DICT
          Value* d = make(Value::Kind::Dict);
          set_items(at, d, pop_mark(at));
          push(d);
          break;
        }
        case 'a': { // APPEND
          Value* v = pop(at);
          expect(at, top(at), Value::Kind::List, "APPEND")->items.push_back(v);
          break;
        }
        case 'e': { // APPENDS
          auto values = pop_mark(at);
          auto& items =
              expect(at, top(at), Value::Kind::List, "APPENDS")->items;
          items.insert(items.end(), values.begin(), values.end());
          break;
        }
        case 's': { // SETITEM
          Value* v = pop(at);
          Value* k = pop(at);
          set_items(at, top(at), {k, v});
          break;
        }
        case 'u': { // SETITEMS
          auto kv = pop_mark(at);
          set_items(at, top(at), kv);
          break;
        }
        case 'q': // BINPUT
          memo_[static_cast<std::uint32_t>(le(1))] = top(at);
          break;
        case 'r': // LONG_BINPUT
          memo_[static_cast<std::uint32_t>(le(4))] = top(at);
          break;
        case 0x94: // MEMOIZE
          memo_[static_cast<std::uint32_t>(memo_.size())] = top(at);
          break;
        case 'h': // BINGET
        case 'j': { // LONG_BINGET
          const auto key = static_cast<std::uint32_t>(le(op == 'h' ? 1 : 4));
          const auto it = memo_.find(key);
          if (it == memo_.end()) {
            fail(at, fmt::format("memo {} read before it is written", key));
          }
          push(it->second);
          break;
        }
        case 'c': { // GLOBAL "module\nname\n"
          std::string module = line(at);
          std::string name = line(at);
          push(global(at, module + "." + name));
          break;
        }
        case 0x93: { // STACK_GLOBAL
          Value* name = pop(at);
          Value* module = pop(at);
          if (name->kind != Value::Kind::String ||
              module->kind != Value::Kind::String) {
            fail(at, "STACK_GLOBAL of non-strings");
          }
          push(global(at, module->s + "." + name->s));
          break;
        }
        case 'Q': // BINPERSID
          push(persistent_load(at, pop(at)));
          break;
        case 'R': { // REDUCE
          Value* args = pop(at);
          Value* callable = pop(at);
          push(reduce(at, callable, args));
          break;
        }
        case 'b': { // BUILD: only OrderedDict's _metadata attribute, ignored
          pop(at);
          expect(at, top(at), Value::Kind::Dict, "BUILD");
          break;
        }
        default:
          fail(
              at,
              fmt::format(
                  "pickle opcode 0x{:02x} is not one a state dict uses", op));
      }
    }
  }

 private:
  [[noreturn]] void fail(std::size_t at, const std::string& why) const {
    refuse(file_, fmt::format("data.pkl byte {}: {}", at, why));
  }

  Value* make(Value::Kind kind) {
    arena_.push_back(std::make_unique<Value>());
    arena_.back()->kind = kind;
    return arena_.back().get();
  }
  void push(Value* v) {
    stack_.push_back(v);
  }
  void push_int(std::int64_t i) {
    Value* v = make(Value::Kind::Int);
    v->i = i;
    push(v);
  }
  void push_string(std::uint64_t n) {
    Value* v = make(Value::Kind::String);
    const auto* p = bytes(n);
    v->s.assign(reinterpret_cast<const char*>(p), n);
    push(v);
  }
  std::size_t floor() const {
    return marks_.empty() ? 0 : marks_.back();
  }
  Value* top(std::size_t at) const {
    if (stack_.size() <= floor()) {
      fail(at, "reads an empty stack");
    }
    return stack_.back();
  }
  Value* pop(std::size_t at) {
    Value* v = top(at);
    stack_.pop_back();
    return v;
  }
  std::vector<Value*> pop_mark(std::size_t at) {
    if (marks_.empty()) {
      fail(at, "no MARK to pop to");
    }
    const std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Value*> out(
        stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return out;
  }
  Value* expect(std::size_t at, Value* v, Value::Kind kind, const char* op)
      const {
    if (v->kind != kind) {
      fail(at, fmt::format("{} on a {}", op, kind_name(v->kind)));
    }
    return v;
  }
  void set_items(std::size_t at, Value* dict, const std::vector<Value*>& kv) {
    expect(at, dict, Value::Kind::Dict, "SETITEM");
    if (kv.size() % 2 != 0) {
      fail(at, "a key without a value");
    }
    for (std::size_t k = 0; k < kv.size(); k += 2) {
      dict->entries.emplace_back(kv[k], kv[k + 1]);
    }
  }
  Value* global(std::size_t at, const std::string& name) {
    if (!allowed_global(name)) {
      fail(
          at,
          fmt::format(
              "refusing to load: the pickle references '{}', which is neither a tensor nor a plain container "
              "(hotloop never runs code from a weight file)",
              name));
    }
    Value* v = make(Value::Kind::Global);
    v->s = name;
    return v;
  }
  // ('storage', torch.<T>Storage, key, location, numel)
  Value* persistent_load(std::size_t at, Value* pid) {
    if (pid->kind != Value::Kind::Tuple || pid->items.size() != 5 ||
        pid->items[0]->kind != Value::Kind::String ||
        pid->items[0]->s != "storage" ||
        pid->items[1]->kind != Value::Kind::Global ||
        pid->items[2]->kind != Value::Kind::String ||
        pid->items[4]->kind != Value::Kind::Int) {
      fail(
          at,
          "a persistent id that is not a ('storage', type, key, location, numel) tuple");
    }
    const auto dtype = storage_dtype(pid->items[1]->s);
    if (!dtype) {
      fail(
          at,
          fmt::format("storage type {} is not supported", pid->items[1]->s));
    }
    Value* v = make(Value::Kind::Storage);
    v->dtype = *dtype;
    v->s = pid->items[2]->s;
    v->numel = pid->items[4]->i;
    if (v->numel < 0) {
      fail(at, "negative storage size");
    }
    return v;
  }
  std::vector<std::int64_t> ints(std::size_t at, Value* tuple, const char* what)
      const {
    if (tuple->kind != Value::Kind::Tuple || tuple->items.size() > 64) {
      fail(
          at,
          fmt::format("tensor {} is not a tuple of at most 64 integers", what));
    }
    std::vector<std::int64_t> out;
    for (Value* v : tuple->items) {
      if (v->kind != Value::Kind::Int) {
        fail(at, fmt::format("tensor {} holds a {}", what, kind_name(v->kind)));
      }
      out.push_back(v->i);
    }
    return out;
  }
  Value* reduce(std::size_t at, Value* callable, Value* args) {
    if (callable->kind != Value::Kind::Global ||
        args->kind != Value::Kind::Tuple) {
      fail(at, "REDUCE of something that is not an allowed function");
    }
    const std::string& fn = callable->s;
    if (fn == "collections.OrderedDict") {
      if (!args->items.empty()) {
        fail(at, "OrderedDict with arguments");
      }
      return make(Value::Kind::Dict);
    }
    if (fn == "torch._utils._rebuild_tensor_v2") {
      // (storage, storage_offset, size, stride, requires_grad, hooks[,
      // metadata])
      if (args->items.size() < 4 ||
          args->items[0]->kind != Value::Kind::Storage ||
          args->items[1]->kind != Value::Kind::Int) {
        fail(at, "_rebuild_tensor_v2 with unexpected arguments");
      }
      Value* t = make(Value::Kind::Tensor);
      t->storage = args->items[0];
      t->storage_offset = args->items[1]->i;
      t->shape = ints(at, args->items[2], "size");
      t->strides = ints(at, args->items[3], "stride");
      if (t->shape.size() != t->strides.size()) {
        fail(at, "tensor size and stride differ in length");
      }
      return t;
    }
    if (fn == "torch._utils._rebuild_parameter" ||
        fn == "torch._utils._rebuild_parameter_with_state") {
      if (args->items.empty() || args->items[0]->kind != Value::Kind::Tensor) {
        fail(at, "_rebuild_parameter of something other than a tensor");
      }
      return args->items[0];
    }
    fail(at, fmt::format("'{}' cannot be called", fn));
  }

  std::uint8_t byte() {
    return *bytes(1);
  }
  const std::uint8_t* bytes(std::uint64_t n) {
    if (n > in_.size() - pos_) {
      fail(pos_, "the pickle ends early (truncated file?)");
    }
    const auto* p = in_.data() + pos_;
    pos_ += n;
    return p;
  }
  std::uint64_t le(std::size_t n) {
    const auto* p = bytes(n);
    std::uint64_t v = 0;
    for (std::size_t k = n; k > 0; --k) {
      v = (v << 8) | p[k - 1];
    }
    return v;
  }
  std::string line(std::size_t at) {
    std::string out;
    while (true) {
      const char c = static_cast<char>(byte());
      if (c == '\n') {
        return out;
      }
      if (out.size() > 256) {
        fail(at, "a GLOBAL name longer than 256 bytes");
      }
      out.push_back(c);
    }
  }

  std::span<const std::uint8_t> in_;
  const std::string& file_;
  std::size_t pos_ = 0;
  std::vector<Value*> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint32_t, Value*> memo_;
  std::vector<std::unique_ptr<Value>> arena_;
};

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
  Unpickler unpickler(zip_member(bytes, *pickle, scratch, file), file);
  const Value* root = unpickler.run();
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

namespace {

const char* storage_class(WeightDType dtype) {
  switch (dtype) {
    case WeightDType::F64:
      return "DoubleStorage";
    case WeightDType::F32:
      return "FloatStorage";
    case WeightDType::F16:
      return "HalfStorage";
    case WeightDType::BF16:
      return "BFloat16Storage";
    case WeightDType::I64:
      return "LongStorage";
    case WeightDType::I32:
      return "IntStorage";
    case WeightDType::I16:
      return "ShortStorage";
    case WeightDType::I8:
      return "CharStorage";
    case WeightDType::U8:
      return "ByteStorage";
    case WeightDType::Bool:
      return "BoolStorage";
  }
  return "FloatStorage";
}

// Byte writers shared by the pickle and the zip below.
void put_le(std::vector<std::uint8_t>& out, std::uint64_t v, int n) {
  for (int k = 0; k < n; ++k) {
    out.push_back(static_cast<std::uint8_t>(v >> (8 * k)));
  }
}

void append_bytes(std::vector<std::uint8_t>& out, const std::string& s) {
  out.insert(out.end(), s.begin(), s.end());
}

// Protocol-2 pickle, the opcodes torch.save itself emits.
class PickleWriter {
 public:
  void op(char c) {
    out_.push_back(static_cast<std::uint8_t>(c));
  }
  void global(const std::string& module, const std::string& name) {
    op('c');
    append(module + "\n" + name + "\n");
  }
  void str(const std::string& s) {
    op('X');
    le(s.size(), 4);
    append(s);
  }
  void integer(std::int64_t v) {
    op('\x8a'); // LONG1, 8 bytes two's complement
    out_.push_back(8);
    le(static_cast<std::uint64_t>(v), 8);
  }
  std::vector<std::uint8_t>& bytes() {
    return out_;
  }

 private:
  void append(const std::string& s) {
    append_bytes(out_, s);
  }
  void le(std::uint64_t v, int n) {
    put_le(out_, v, n);
  }
  std::vector<std::uint8_t> out_;
};

// A stored (uncompressed) zip with each member's data aligned to 64 bytes, as
// PyTorch writes it so that storages can be memory-mapped.
class ZipWriter {
 public:
  explicit ZipWriter(std::vector<std::uint8_t>& out) : out_(out) {}
  void add(const std::string& name, std::span<const std::uint8_t> data) {
    if (data.size() > 0xFFFFFFFEu || out_.size() > 0xFFFFFFFEu - data.size()) {
      throw DataError(
          "torch zip: files over 4 GiB are not supported; write .safetensors instead");
    }
    const auto crc = static_cast<std::uint32_t>(
        crc32(0, data.data(), static_cast<uInt>(data.size())));
    const auto local = static_cast<std::uint32_t>(out_.size());
    const std::size_t unpadded = out_.size() + 30 + name.size() + 4;
    const auto pad = static_cast<std::uint16_t>((64 - unpadded % 64) % 64);
    header(
        0x04034b50,
        crc,
        data.size(),
        name,
        static_cast<std::uint16_t>(4 + pad));
    le(0xFB46, 2); // extra field: padding, as PyTorch's writer names it
    le(pad, 2);
    out_.insert(out_.end(), pad, 0);
    out_.insert(out_.end(), data.begin(), data.end());
    central_.push_back(
        {name, crc, static_cast<std::uint32_t>(data.size()), local});
  }
  void finish() {
    const auto dir = static_cast<std::uint32_t>(out_.size());
    for (const auto& c : central_) {
      le(0x02014b50, 4);
      le(20, 2); // version made by
      common(c.crc, c.size, c.name, 0);
      le(0, 2); // comment length
      le(0, 2); // disk
      le(0, 2); // internal attributes
      le(0, 4); // external attributes
      le(c.local, 4);
      append(c.name);
    }
    const auto dir_size = static_cast<std::uint32_t>(out_.size() - dir);
    le(0x06054b50, 4);
    le(0, 4);
    le(central_.size(), 2);
    le(central_.size(), 2);
    le(dir_size, 4);
    le(dir, 4);
    le(0, 2);
  }

 private:
  struct Central {
    std::string name;
    std::uint32_t crc;
    std::uint32_t size;
    std::uint32_t local;
  };
  void header(
      std::uint32_t sig,
      std::uint32_t crc,
      std::uint64_t size,
      const std::string& name,
      std::uint16_t extra) {
    le(sig, 4);
    common(crc, size, name, extra);
    append(name);
  }
  // From "version needed" to the extra length: shared by both headers.
  void common(
      std::uint32_t crc,
      std::uint64_t size,
      const std::string& name,
      std::uint16_t extra) {
    le(20, 2); // version needed
    le(0, 2); // flags
    le(0, 2); // stored
    le(0, 2); // time
    le(0x21, 2); // date: 1980-01-01
    le(crc, 4);
    le(size, 4);
    le(size, 4);
    le(name.size(), 2);
    le(extra, 2);
  }
  void append(const std::string& s) {
    append_bytes(out_, s);
  }
  void le(std::uint64_t v, int n) {
    put_le(out_, v, n);
  }
  std::vector<std::uint8_t>& out_;
  std::vector<Central> central_;
};

std::span<const std::uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

} // namespace

void write_torch_zip(
    const std::vector<TensorBytes>& tensors,
    const std::string& archive_name,
    std::vector<std::uint8_t>& out) {
  PickleWriter p;
  p.op('\x80');
  p.bytes().push_back(2); // PROTO 2
  p.global("collections", "OrderedDict");
  p.op(')');
  p.op('R');
  p.op('(');
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const auto& t = tensors[k];
    std::int64_t numel = 1;
    for (const auto d : t.shape) {
      numel *= d;
    }
    p.str(t.name);
    p.global("torch._utils", "_rebuild_tensor_v2");
    p.op('(');
    p.op('(');
    p.str("storage");
    p.global("torch", storage_class(t.dtype));
    p.str(std::to_string(k));
    p.str("cpu");
    p.integer(numel);
    p.op('t');
    p.op('Q');
    p.integer(0);
    p.op('(');
    for (const auto d : t.shape) {
      p.integer(d);
    }
    p.op('t');
    p.op('(');
    for (const auto s : contiguous_strides(t.shape)) {
      p.integer(s);
    }
    p.op('t');
    p.op('\x89'); // requires_grad=False
    p.global("collections", "OrderedDict");
    p.op(')');
    p.op('R');
    p.op('t');
    p.op('R');
  }
  p.op('u');
  p.op('.');

  out.clear();
  ZipWriter zip(out);
  zip.add(archive_name + "/data.pkl", p.bytes());
  zip.add(archive_name + "/byteorder", as_bytes("little"));
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    zip.add(fmt::format("{}/data/{}", archive_name, k), tensors[k].data);
  }
  zip.add(archive_name + "/version", as_bytes("3\n"));
  zip.finish();
}

} // namespace hotloop::model
