#pragma once
// A value of the Jinja subset chat templates use (jinja/render.h): what
// Python's jinja2 would hold, with Python's semantics where a template can
// see them (str(), ==, truth, ordering, json.dumps).
//
// Lists and dicts are shared and never changed after they are made (as in
// transformers' ImmutableSandboxedEnvironment); a namespace() is the one
// thing a template can change. Dicts keep their keys' insertion order
// (tojson writes them so) and their keys are text.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "hotloop/errors.h"

namespace hotloop::data::jinja {

// What a template did wrong or asked for (raise_exception): the caller adds
// which template and which conversation.
class TemplateError : public DataError {
 public:
  using DataError::DataError;
};

// raise_exception(message): the template refuses its input.
class TemplateRaised : public TemplateError {
 public:
  using TemplateError::TemplateError;
};

class Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;

struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
};
using Function = std::function<Value(Arguments&)>;

// A variable the context does not hold (printed as nothing, false, empty
// when iterated; an error when looked into). `name` is for the message.
struct Undefined {
  std::string name;
};
struct None {};
// namespace(): attributes a template sets inside loops.
struct Namespace {
  Dict attributes;
};

class Value {
 public:
  using Storage = std::variant<
      Undefined,
      None,
      bool,
      std::int64_t,
      double,
      std::string,
      std::shared_ptr<const List>,
      std::shared_ptr<const Dict>,
      std::shared_ptr<Namespace>,
      std::shared_ptr<const Function>>;

  Value() : v_(Undefined{}) {}
  Value(Undefined u) : v_(std::move(u)) {}
  Value(None n) : v_(n) {}
  Value(bool b) : v_(b) {}
  Value(std::int64_t i) : v_(i) {}
  Value(int i) : v_(std::int64_t{i}) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(List l) : v_(std::make_shared<const List>(std::move(l))) {}
  Value(Dict d) : v_(std::make_shared<const Dict>(std::move(d))) {}
  Value(std::shared_ptr<Namespace> n) : v_(std::move(n)) {}
  Value(Function f) : v_(std::make_shared<const Function>(std::move(f))) {}

  bool is_undefined() const {
    return std::holds_alternative<Undefined>(v_);
  }
  bool is_none() const {
    return std::holds_alternative<None>(v_);
  }
  bool is_bool() const {
    return std::holds_alternative<bool>(v_);
  }
  bool is_int() const {
    return std::holds_alternative<std::int64_t>(v_);
  }
  bool is_float() const {
    return std::holds_alternative<double>(v_);
  }
  bool is_number() const {
    return is_int() || is_float() || is_bool();
  }
  bool is_string() const {
    return std::holds_alternative<std::string>(v_);
  }
  bool is_list() const {
    return std::holds_alternative<std::shared_ptr<const List>>(v_);
  }
  bool is_dict() const {
    return std::holds_alternative<std::shared_ptr<const Dict>>(v_);
  }
  bool is_namespace() const {
    return std::holds_alternative<std::shared_ptr<Namespace>>(v_);
  }
  bool is_callable() const {
    return std::holds_alternative<std::shared_ptr<const Function>>(v_);
  }

  bool as_bool() const {
    return std::get<bool>(v_);
  }
  std::int64_t as_int() const; // bool and int
  double as_number() const; // bool, int and float
  const std::string& as_string() const {
    return std::get<std::string>(v_);
  }
  const List& as_list() const {
    return *std::get<std::shared_ptr<const List>>(v_);
  }
  const Dict& as_dict() const {
    return *std::get<std::shared_ptr<const Dict>>(v_);
  }
  Namespace& as_namespace() const {
    return *std::get<std::shared_ptr<Namespace>>(v_);
  }
  const Function& as_function() const {
    return *std::get<std::shared_ptr<const Function>>(v_);
  }
  const Undefined& as_undefined() const {
    return std::get<Undefined>(v_);
  }

  // Python's bool().
  bool truthy() const;
  // The Python type's name, for messages ("str", "list", "dict", ...).
  const char* type_name() const;
  // The key's value, or nullptr (dicts and namespaces).
  const Value* find(std::string_view key) const;

 private:
  Storage v_;
};

// Python's str() (jinja2 prints values so; Undefined is "") and repr().
std::string to_str(const Value& v);
std::string to_repr(const Value& v);
// Python's ==, and < for numbers, text and lists (TemplateError else).
bool equal(const Value& a, const Value& b);
bool less(const Value& a, const Value& b);
// json.dumps(v, ensure_ascii=False, indent=indent, sort_keys=sort_keys):
// transformers' tojson. indent < 0: on one line with ", " and ": ".
std::string to_json(const Value& v, int indent, bool sort_keys);
// JSON data as values (a conversation, tools), keys in the file's order;
// numbers stay int or float.
Value from_json(const nlohmann::ordered_json& j);

// Text as Unicode code points' byte offsets (Python indexes text by code
// point): the offset of each code point, then the size.
std::vector<std::size_t> code_point_offsets(std::string_view s);

} // namespace hotloop::data::jinja
