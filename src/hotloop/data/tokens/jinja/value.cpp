#include "hotloop/data/tokens/jinja/value.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace hotloop::data::jinja {

std::int64_t Value::as_int() const {
  return is_bool() ? (as_bool() ? 1 : 0) : std::get<std::int64_t>(v_);
}

double Value::as_number() const {
  return is_float() ? std::get<double>(v_) : static_cast<double>(as_int());
}

bool Value::truthy() const {
  if (is_undefined() || is_none()) {
    return false;
  }
  if (is_bool()) {
    return as_bool();
  }
  if (is_int()) {
    return as_int() != 0;
  }
  if (is_float()) {
    return as_number() != 0.0;
  }
  if (is_string()) {
    return !as_string().empty();
  }
  if (is_list()) {
    return !as_list().empty();
  }
  if (is_dict()) {
    return !as_dict().empty();
  }
  return true;
}

const char* Value::type_name() const {
  // In Storage's order.
  static constexpr const char* kNames[] = {
      "Undefined",
      "NoneType",
      "bool",
      "int",
      "float",
      "str",
      "list",
      "dict",
      "Namespace",
      "function"};
  static_assert(std::size(kNames) == std::variant_size_v<Storage>);
  return kNames[v_.index()];
}

const Value* Value::find(std::string_view key) const {
  const Dict* d = is_dict() ? &as_dict()
      : is_namespace()      ? &as_namespace().attributes
                            : nullptr;
  if (d == nullptr) {
    return nullptr;
  }
  for (const auto& [k, v] : *d) {
    if (k == key) {
      return &v;
    }
  }
  return nullptr;
}

namespace {

// Python's repr() of a float: the shortest text that reads back, with ".0"
// on whole numbers.
std::string float_text(double d) {
  if (std::isnan(d)) {
    return "nan";
  }
  if (std::isinf(d)) {
    return d > 0 ? "inf" : "-inf";
  }
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".en") == std::string::npos) {
    s += ".0";
  }
  return s;
}

std::string quoted(const std::string& s) {
  const bool double_quotes =
      s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = double_quotes ? '"' : '\'';
  std::string out(1, q);
  for (const char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c == q) {
          out += '\\';
        }
        out += c;
    }
  }
  out += q;
  return out;
}

void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void json_into(
    std::string& out,
    const Value& v,
    int indent,
    bool sort_keys,
    int depth) {
  if (depth > 256) {
    throw TemplateError("tojson: a value nested more than 256 deep");
  }
  const auto newline = [&](int level) {
    if (indent >= 0) {
      out += '\n';
      out.append(static_cast<std::size_t>(indent * level), ' ');
    }
  };
  const char* comma = indent >= 0 ? "," : ", ";
  if (v.is_none()) {
    out += "null";
  } else if (v.is_bool()) {
    out += v.as_bool() ? "true" : "false";
  } else if (v.is_int()) {
    out += std::to_string(v.as_int());
  } else if (v.is_float()) {
    const double d = v.as_number();
    out += std::isnan(d) ? "NaN"
        : std::isinf(d)  ? (d > 0 ? "Infinity" : "-Infinity")
                         : float_text(d);
  } else if (v.is_string()) {
    json_string(out, v.as_string());
  } else if (v.is_list()) {
    const List& l = v.as_list();
    if (l.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (std::size_t i = 0; i < l.size(); ++i) {
      out += i > 0 ? comma : "";
      newline(depth + 1);
      json_into(out, l[i], indent, sort_keys, depth + 1);
    }
    newline(depth);
    out += ']';
  } else if (v.is_dict() || v.is_namespace()) {
    Dict d = v.is_dict() ? v.as_dict() : v.as_namespace().attributes;
    if (d.empty()) {
      out += "{}";
      return;
    }
    if (sort_keys) {
      std::stable_sort(d.begin(), d.end(), [](const auto& a, const auto& b) {
        return a.first < b.first;
      });
    }
    out += '{';
    for (std::size_t i = 0; i < d.size(); ++i) {
      out += i > 0 ? comma : "";
      newline(depth + 1);
      json_string(out, d[i].first);
      out += ": ";
      json_into(out, d[i].second, indent, sort_keys, depth + 1);
    }
    newline(depth);
    out += '}';
  } else {
    throw TemplateError(
        fmt::format("tojson: a {} is not JSON serializable", v.type_name()));
  }
}

} // namespace

std::string to_str(const Value& v) {
  if (v.is_undefined()) {
    return {};
  }
  if (v.is_string()) {
    return v.as_string();
  }
  return to_repr(v);
}

std::string to_repr(const Value& v) {
  if (v.is_undefined()) {
    return {};
  }
  if (v.is_none()) {
    return "None";
  }
  if (v.is_bool()) {
    return v.as_bool() ? "True" : "False";
  }
  if (v.is_int()) {
    return std::to_string(v.as_int());
  }
  if (v.is_float()) {
    return float_text(v.as_number());
  }
  if (v.is_string()) {
    return quoted(v.as_string());
  }
  if (v.is_list()) {
    std::string out = "[";
    for (const Value& e : v.as_list()) {
      out += out.size() > 1 ? ", " : "";
      out += to_repr(e);
    }
    return out + "]";
  }
  if (v.is_dict()) {
    std::string out = "{";
    for (const auto& [k, e] : v.as_dict()) {
      out += out.size() > 1 ? ", " : "";
      out += quoted(k) + ": " + to_repr(e);
    }
    return out + "}";
  }
  if (v.is_namespace()) {
    return "<Namespace>";
  }
  return "<function>";
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    return a.as_number() == b.as_number();
  }
  if (a.is_undefined() || b.is_undefined()) {
    return a.is_undefined() && b.is_undefined();
  }
  if (a.is_none() || b.is_none()) {
    return a.is_none() && b.is_none();
  }
  if (a.is_string() && b.is_string()) {
    return a.as_string() == b.as_string();
  }
  if (a.is_list() && b.is_list()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    return x.size() == y.size() &&
        std::equal(x.begin(), x.end(), y.begin(), equal);
  }
  if (a.is_dict() && b.is_dict()) {
    const Dict& x = a.as_dict();
    if (x.size() != b.as_dict().size()) {
      return false;
    }
    return std::all_of(x.begin(), x.end(), [&](const auto& kv) {
      const Value* other = b.find(kv.first);
      return other != nullptr && equal(kv.second, *other);
    });
  }
  if (a.is_namespace() && b.is_namespace()) {
    return &a.as_namespace() == &b.as_namespace();
  }
  return false;
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    return a.as_number() < b.as_number();
  }
  if (a.is_string() && b.is_string()) {
    return a.as_string() < b.as_string(); // UTF-8 keeps code point order
  }
  if (a.is_list() && b.is_list()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    return std::lexicographical_compare(
        x.begin(), x.end(), y.begin(), y.end(), less);
  }
  throw TemplateError(fmt::format(
      "'<' is not supported between a {} and a {}",
      a.type_name(),
      b.type_name()));
}

std::string to_json(const Value& v, int indent, bool sort_keys) {
  std::string out;
  json_into(out, v, indent, sort_keys, 0);
  return out;
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return None{};
    case nlohmann::ordered_json::value_t::boolean:
      return j.get<bool>();
    case nlohmann::ordered_json::value_t::number_integer:
      return j.get<std::int64_t>();
    case nlohmann::ordered_json::value_t::number_unsigned:
      return static_cast<std::int64_t>(j.get<std::uint64_t>());
    case nlohmann::ordered_json::value_t::number_float:
      return j.get<double>();
    case nlohmann::ordered_json::value_t::string:
      return j.get<std::string>();
    case nlohmann::ordered_json::value_t::array: {
      List l;
      l.reserve(j.size());
      for (const auto& e : j) {
        l.push_back(from_json(e));
      }
      return l;
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      d.reserve(j.size());
      for (const auto& [k, e] : j.items()) {
        d.emplace_back(k, from_json(e));
      }
      return d;
    }
    default:
      return None{};
  }
}

std::vector<std::size_t> code_point_offsets(std::string_view s) {
  std::vector<std::size_t> out;
  out.reserve(s.size() + 1);
  for (std::size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      out.push_back(i);
    }
  }
  out.push_back(s.size());
  return out;
}

} // namespace hotloop::data::jinja
