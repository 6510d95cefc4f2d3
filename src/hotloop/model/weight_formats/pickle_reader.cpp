#include "hotloop/model/weight_formats/pickle_reader.h"

#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::model::pickle {

namespace {

constexpr const char* kHint =
    "hotloop reads files written by torch.save(model.state_dict(), path); re-save the state dict alone, or export safetensors (safetensors.torch.save_file)";

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

 public:
  std::vector<std::unique_ptr<Value>> take_arena() {
    return std::move(arena_);
  }
};

} // namespace

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

void refuse(const std::string& file, const std::string& why) {
  throw DataError(fmt::format("{}: {}", file, why), kHint);
}

Parsed unpickle(std::span<const std::uint8_t> pickle, const std::string& file) {
  Unpickler u(pickle, file);
  Parsed p;
  p.root = u.run();
  p.arena = u.take_arena();
  return p;
}

} // namespace hotloop::model::pickle
