#include "hotloop/data/tokens/jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>

#include <fmt/format.h>

namespace hotloop::data::jinja {

namespace {

constexpr std::size_t kMaxItems = std::size_t{1} << 20;

[[noreturn]] void wrong(std::string_view what, const std::string& why) {
  throw TemplateError(fmt::format("{}: {}", what, why));
}

// ---- Arguments ----

// Argument `i` or the one named `name`, else `fallback`.
Value arg(
    const Arguments& a,
    std::size_t i,
    std::string_view name,
    Value fallback = Undefined{}) {
  for (const auto& [k, v] : a.named) {
    if (k == name) {
      return v;
    }
  }
  return i < a.positional.size() ? a.positional[i] : fallback;
}

const std::string& text_arg(std::string_view fn, const Value& v) {
  if (!v.is_string()) {
    wrong(fn, fmt::format("expected text, got a {}", v.type_name()));
  }
  return v.as_string();
}

std::int64_t int_arg(std::string_view fn, const Value& v) {
  if (!v.is_int() && !v.is_bool()) {
    wrong(fn, fmt::format("expected an integer, got a {}", v.type_name()));
  }
  return v.as_int();
}

// ---- Text as Python sees it ----

// Python's str.isspace() code points, by their UTF-8 bytes.
bool space_at(std::string_view s, std::size_t i, std::size_t& n) {
  const auto c = static_cast<unsigned char>(s[i]);
  n = 1;
  if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1C && c <= 0x1F)) {
    return true;
  }
  static const char* const kWide[] = {
      "\xC2\x85",
      "\xC2\xA0",
      "\xE1\x9A\x80",
      "\xE2\x80\xA8",
      "\xE2\x80\xA9",
      "\xE2\x80\xAF",
      "\xE2\x81\x9F",
      "\xE3\x80\x80"};
  for (const char* w : kWide) {
    const std::string_view wide(w);
    if (s.substr(i, wide.size()) == wide) {
      n = wide.size();
      return true;
    }
  }
  if (s.substr(i, 2) == "\xE2\x80" && i + 2 < s.size()) { // U+2000..U+200A
    const auto last = static_cast<unsigned char>(s[i + 2]);
    if (last >= 0x80 && last <= 0x8A) {
      n = 3;
      return true;
    }
  }
  return false;
}

bool in_chars(
    std::string_view s,
    std::size_t i,
    std::size_t& n,
    const std::string* chars) {
  if (chars == nullptr) {
    return space_at(s, i, n);
  }
  const std::vector<std::size_t> cps = code_point_offsets(*chars);
  for (std::size_t k = 0; k + 1 < cps.size(); ++k) {
    const std::string_view cp(chars->data() + cps[k], cps[k + 1] - cps[k]);
    if (s.substr(i, cp.size()) == cp) {
      n = cp.size();
      return true;
    }
  }
  return false;
}

std::string strip(
    const std::string& s,
    bool left,
    bool right,
    const std::string* chars) {
  std::size_t begin = 0;
  std::size_t end = s.size();
  std::size_t n = 0;
  while (left && begin < end && in_chars(s, begin, n, chars)) {
    begin += n;
  }
  if (right) {
    const std::vector<std::size_t> cps =
        code_point_offsets(std::string_view(s).substr(begin, end - begin));
    std::size_t k = cps.size() - 1;
    while (k > 0) {
      const std::size_t at = begin + cps[k - 1];
      if (!in_chars(s, at, n, chars) || at + n != end) {
        break;
      }
      end = at;
      --k;
    }
  }
  return s.substr(begin, end - begin);
}

std::vector<std::string> split(
    const std::string& s,
    const Value& sep,
    std::int64_t max) {
  std::vector<std::string> out;
  if (sep.is_none() || sep.is_undefined()) {
    std::size_t i = 0;
    std::size_t n = 0;
    while (i < s.size()) {
      while (i < s.size() && space_at(s, i, n)) {
        i += n;
      }
      if (i >= s.size()) {
        break;
      }
      if (max >= 0 && static_cast<std::int64_t>(out.size()) == max) {
        out.push_back(strip(s.substr(i), false, true, nullptr));
        return out;
      }
      std::size_t j = i;
      while (j < s.size() && !space_at(s, j, n)) {
        ++j;
      }
      out.push_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  const std::string& d = text_arg("split", sep);
  if (d.empty()) {
    wrong("split", "empty separator");
  }
  std::size_t i = 0;
  for (;;) {
    const std::size_t j = s.find(d, i);
    if (j == std::string::npos ||
        (max >= 0 && static_cast<std::int64_t>(out.size()) == max)) {
      out.push_back(s.substr(i));
      return out;
    }
    out.push_back(s.substr(i, j - i));
    i = j + d.size();
  }
}

std::string replace_all(
    std::string s,
    const std::string& from,
    const std::string& to,
    std::int64_t count) {
  if (from.empty()) {
    return s;
  }
  std::size_t i = 0;
  for (std::int64_t n = 0; count < 0 || n < count; ++n) {
    i = s.find(from, i);
    if (i == std::string::npos) {
      break;
    }
    s.replace(i, from.size(), to);
    i += to.size();
  }
  return s;
}

std::string ascii_case(
    std::string s,
    int how) { // 0 lower, 1 upper, 2 title, 3 capitalize
  bool word_start = true;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char& c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    const bool up =
        how == 1 || (how == 2 && word_start) || (how == 3 && i == 0);
    if (alpha) {
      c = up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
             : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    word_start = !alpha && !(c >= '0' && c <= '9') && c != '\'';
    if (how == 2) {
      word_start = !alpha;
    }
  }
  return s;
}

std::int64_t length(const Value& v) {
  if (v.is_string()) {
    return static_cast<std::int64_t>(
        code_point_offsets(v.as_string()).size() - 1);
  }
  if (v.is_list()) {
    return static_cast<std::int64_t>(v.as_list().size());
  }
  if (v.is_dict()) {
    return static_cast<std::int64_t>(v.as_dict().size());
  }
  if (v.is_undefined()) {
    return 0;
  }
  wrong("length", fmt::format("a {} has no length", v.type_name()));
}

List pairs(const Dict& d) {
  List out;
  for (const auto& [k, v] : d) {
    out.emplace_back(List{k, v});
  }
  return out;
}

// ---- Methods ----

Value bound(Function f) {
  return Value(std::move(f));
}

// str methods that make new text: strip, lstrip, rstrip, split, rsplit,
// splitlines.
std::optional<Value> reshaping_method(
    const std::string& s,
    const std::string& name) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return bound([s, name](Arguments& a) -> Value {
      const Value chars = arg(a, 0, "chars", None{});
      const std::string* c = chars.is_string() ? &chars.as_string() : nullptr;
      return strip(s, name != "rstrip", name != "lstrip", c);
    });
  }
  if (name == "split" || name == "rsplit") {
    return bound([s, name](Arguments& a) -> Value {
      const std::int64_t max = int_arg(name, arg(a, 1, "maxsplit", -1));
      if (name == "rsplit" && max >= 0) {
        wrong("rsplit", "maxsplit is not supported by hotloop's interpreter");
      }
      List out;
      for (std::string& part : split(s, arg(a, 0, "sep", None{}), max)) {
        out.emplace_back(std::move(part));
      }
      return out;
    });
  }
  if (name == "splitlines") {
    return bound([s](Arguments&) -> Value {
      List out;
      std::size_t i = 0;
      while (i < s.size()) {
        std::size_t j = s.find_first_of("\r\n", i);
        if (j == std::string::npos) {
          out.emplace_back(s.substr(i));
          break;
        }
        out.emplace_back(s.substr(i, j - i));
        i = j + (s[j] == '\r' && j + 1 < s.size() && s[j + 1] == '\n' ? 2 : 1);
      }
      return out;
    });
  }
  return std::nullopt;
}

// The others: startswith, endswith, the case methods, replace, find, rfind,
// count, join, format.
std::optional<Value> other_method(
    const std::string& s,
    const std::string& name) {
  if (name == "startswith" || name == "endswith") {
    return bound([s, name](Arguments& a) -> Value {
      const Value p = arg(a, 0, "prefix");
      const List options = p.is_list() ? p.as_list() : List{p};
      for (const Value& o : options) {
        const std::string& t = text_arg(name, o);
        const bool hit = name == "startswith" ? s.compare(0, t.size(), t) == 0
                                              : s.size() >= t.size() &&
                s.compare(s.size() - t.size(), t.size(), t) == 0;
        if (hit) {
          return true;
        }
      }
      return false;
    });
  }
  if (name == "upper" || name == "lower" || name == "title" ||
      name == "capitalize") {
    const int how = name == "lower" ? 0
        : name == "upper"           ? 1
        : name == "title"           ? 2
                                    : 3;
    return bound([s, how](Arguments&) -> Value { return ascii_case(s, how); });
  }
  if (name == "replace") {
    return bound([s](Arguments& a) -> Value {
      return replace_all(
          s,
          text_arg("replace", arg(a, 0, "old")),
          text_arg("replace", arg(a, 1, "new")),
          int_arg("replace", arg(a, 2, "count", -1)));
    });
  }
  if (name == "find" || name == "rfind" || name == "count") {
    return bound([s, name](Arguments& a) -> Value {
      const std::string t = text_arg(name, arg(a, 0, "sub"));
      if (name == "count") {
        std::int64_t n = 0;
        for (std::size_t i = s.find(t); i != std::string::npos && !t.empty();
             i = s.find(t, i + t.size())) {
          ++n;
        }
        return n;
      }
      const std::size_t at = name == "find" ? s.find(t) : s.rfind(t);
      if (at == std::string::npos) {
        return -1;
      }
      const std::vector<std::size_t> cps = code_point_offsets(s);
      return static_cast<std::int64_t>(
          std::lower_bound(cps.begin(), cps.end(), at) - cps.begin());
    });
  }
  if (name == "join") {
    return bound([s](Arguments& a) -> Value {
      std::string out;
      bool first = true;
      for (const Value& v : iterate(arg(a, 0, "iterable"))) {
        out += first ? "" : s;
        out += text_arg("join", v);
        first = false;
      }
      return out;
    });
  }
  if (name == "format") {
    return bound([s](Arguments& a) -> Value {
      std::string out;
      std::size_t next = 0;
      for (std::size_t i = 0; i < s.size(); ++i) {
        if (s.compare(i, 2, "{}") == 0) {
          if (next >= a.positional.size()) {
            wrong("format", "more {} than arguments");
          }
          out += to_str(a.positional[next++]);
          ++i;
        } else if (s.compare(i, 2, "{{") == 0 || s.compare(i, 2, "}}") == 0) {
          out += s[i++];
        } else if (s[i] == '{') {
          wrong(
              "format",
              "only {} fields are supported by hotloop's interpreter");
        } else {
          out += s[i];
        }
      }
      return out;
    });
  }
  return std::nullopt;
}

std::optional<Value> string_method(
    const std::string& s,
    const std::string& name) {
  if (std::optional<Value> m = reshaping_method(s, name)) {
    return m;
  }
  return other_method(s, name);
}

std::optional<Value> dict_method(const Value& d, const std::string& name) {
  if (name == "items") {
    return bound([d](Arguments&) -> Value { return pairs(d.as_dict()); });
  }
  if (name == "keys" || name == "values") {
    return bound([d, name](Arguments&) -> Value {
      List out;
      for (const auto& [k, v] : d.as_dict()) {
        out.push_back(name == "keys" ? Value(k) : v);
      }
      return out;
    });
  }
  if (name == "get") {
    return bound([d](Arguments& a) -> Value {
      const Value key = arg(a, 0, "key");
      const Value* v = key.is_string() ? d.find(key.as_string()) : nullptr;
      return v != nullptr ? *v : arg(a, 1, "default", None{});
    });
  }
  return std::nullopt;
}

std::optional<Value> method(const Value& object, const std::string& name) {
  if (object.is_string()) {
    return string_method(object.as_string(), name);
  }
  if (object.is_dict()) {
    return dict_method(object, name);
  }
  return std::nullopt;
}

[[noreturn]] void undefined_access(
    const Value& object,
    const std::string& what) {
  throw TemplateError(
      fmt::format(
          "'{}' is undefined (looking up {} in it)",
          object.as_undefined().name,
          what),
      "the template expects it in the conversation: see what it reads there");
}

std::int64_t python_index(std::int64_t i, std::int64_t n) {
  return i < 0 ? i + n : i;
}

// ---- Filters that take a test or a filter by name ----

bool passes(const Value& v, const Arguments& a, std::size_t from) {
  if (a.positional.size() <= from) {
    return v.truthy();
  }
  const std::string& test = text_arg("select", a.positional[from]);
  const std::vector<Value> rest(
      a.positional.begin() + static_cast<long>(from) + 1, a.positional.end());
  return call_test(test, v, rest);
}

Value sorted(const Value& v, const Arguments& a) {
  List items = iterate(v);
  const Value attr = arg(a, 2, "attribute", None{});
  const bool reverse = arg(a, 0, "reverse", false).truthy();
  const bool case_sensitive = arg(a, 1, "case_sensitive", false).truthy();
  const auto key = [&](const Value& x) {
    Value k = attr.is_string() ? attribute(x, attr.as_string()) : x;
    return !case_sensitive && k.is_string()
        ? Value(ascii_case(k.as_string(), 0))
        : k;
  };
  std::stable_sort(
      items.begin(), items.end(), [&](const Value& x, const Value& y) {
        return reverse ? less(key(y), key(x)) : less(key(x), key(y));
      });
  return items;
}

Value to_int(const Value& v, const Value& fallback) {
  if (v.is_int() || v.is_bool()) {
    return v.as_int();
  }
  if (v.is_float()) {
    return static_cast<std::int64_t>(v.as_number());
  }
  if (v.is_string()) {
    const std::string t = strip(v.as_string(), true, true, nullptr);
    char* end = nullptr;
    const long long i = std::strtoll(t.c_str(), &end, 10);
    if (!t.empty() && end == t.c_str() + t.size()) {
      return static_cast<std::int64_t>(i);
    }
    const double d = std::strtod(t.c_str(), &end);
    if (!t.empty() && end == t.c_str() + t.size()) {
      return static_cast<std::int64_t>(d);
    }
  }
  return fallback;
}

} // namespace

Value attribute(const Value& object, const std::string& name) {
  if (object.is_undefined()) {
    undefined_access(object, "'" + name + "'");
  }
  if (std::optional<Value> m = method(object, name)) {
    return *m;
  }
  if (const Value* v = object.find(name)) {
    return *v;
  }
  return Undefined{name};
}

Value item(const Value& object, const Value& key) {
  if (object.is_undefined()) {
    undefined_access(object, to_repr(key));
  }
  if (object.is_list() && (key.is_int() || key.is_bool())) {
    const List& l = object.as_list();
    const std::int64_t i =
        python_index(key.as_int(), static_cast<std::int64_t>(l.size()));
    return i >= 0 && i < static_cast<std::int64_t>(l.size())
        ? l[static_cast<std::size_t>(i)]
        : Value(Undefined{to_repr(key)});
  }
  if (object.is_string() && (key.is_int() || key.is_bool())) {
    const std::string& s = object.as_string();
    const std::vector<std::size_t> cps = code_point_offsets(s);
    const auto n = static_cast<std::int64_t>(cps.size() - 1);
    const std::int64_t i = python_index(key.as_int(), n);
    if (i < 0 || i >= n) {
      return Undefined{to_repr(key)};
    }
    const auto at = static_cast<std::size_t>(i);
    return s.substr(cps[at], cps[at + 1] - cps[at]);
  }
  if (key.is_string()) {
    if (const Value* v = object.find(key.as_string())) {
      return *v;
    }
    if (std::optional<Value> m = method(object, key.as_string())) {
      return *m;
    }
  }
  return Undefined{to_repr(key)};
}

Value slice(
    const Value& object,
    const Value& start,
    const Value& stop,
    const Value& step) {
  const std::int64_t by = step.is_none() ? 1 : int_arg("slice", step);
  if (by == 0) {
    wrong("slice", "step 0");
  }
  std::vector<std::size_t> cps;
  std::int64_t n = 0;
  if (object.is_list()) {
    n = static_cast<std::int64_t>(object.as_list().size());
  } else if (object.is_string()) {
    cps = code_point_offsets(object.as_string());
    n = static_cast<std::int64_t>(cps.size() - 1);
  } else if (object.is_undefined()) {
    undefined_access(object, "a slice");
  } else {
    wrong("slice", fmt::format("a {} cannot be sliced", object.type_name()));
  }
  const auto bound_of = [&](const Value& v, std::int64_t fallback) {
    if (v.is_none()) {
      return fallback;
    }
    std::int64_t i = python_index(int_arg("slice", v), n);
    return by > 0 ? std::clamp<std::int64_t>(i, 0, n)
                  : std::clamp<std::int64_t>(i, -1, n - 1);
  };
  const std::int64_t from = bound_of(start, by > 0 ? 0 : n - 1);
  const std::int64_t to = bound_of(stop, by > 0 ? n : -1);
  List items;
  std::string text;
  for (std::int64_t i = from; by > 0 ? i < to : i > to; i += by) {
    const auto at = static_cast<std::size_t>(i);
    if (object.is_list()) {
      items.push_back(object.as_list()[at]);
    } else {
      text += object.as_string().substr(cps[at], cps[at + 1] - cps[at]);
    }
  }
  return object.is_list() ? Value(std::move(items)) : Value(std::move(text));
}

List iterate(const Value& v) {
  if (v.is_list()) {
    return v.as_list();
  }
  if (v.is_undefined()) {
    return {};
  }
  if (v.is_dict()) {
    List keys;
    for (const auto& [k, e] : v.as_dict()) {
      keys.emplace_back(k);
    }
    return keys;
  }
  if (v.is_string()) {
    const std::string& s = v.as_string();
    const std::vector<std::size_t> cps = code_point_offsets(s);
    List chars;
    for (std::size_t i = 0; i + 1 < cps.size(); ++i) {
      chars.emplace_back(s.substr(cps[i], cps[i + 1] - cps[i]));
    }
    return chars;
  }
  throw TemplateError(fmt::format("a {} is not iterable", v.type_name()));
}

bool call_test(
    std::string_view name,
    const Value& v,
    const std::vector<Value>& args) {
  const auto other = [&]() -> const Value& {
    if (args.empty()) {
      wrong(fmt::format("is {}", name), "needs a value to compare with");
    }
    return args[0];
  };
  if (name == "defined")
    return !v.is_undefined();
  if (name == "undefined")
    return v.is_undefined();
  if (name == "none")
    return v.is_none();
  if (name == "boolean")
    return v.is_bool();
  if (name == "true")
    return v.is_bool() && v.as_bool();
  if (name == "false")
    return v.is_bool() && !v.as_bool();
  if (name == "integer")
    return v.is_int();
  if (name == "float")
    return v.is_float();
  if (name == "number")
    return v.is_number();
  if (name == "string")
    return v.is_string();
  if (name == "mapping")
    return v.is_dict();
  if (name == "iterable")
    return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "sequence")
    return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "callable")
    return v.is_callable();
  if (name == "sameas") {
    const Value& o = other();
    return (v.is_none() && o.is_none()) ||
        (v.is_bool() && o.is_bool() && v.as_bool() == o.as_bool()) ||
        (!v.is_none() && !v.is_bool() && !o.is_none() && !o.is_bool() &&
         equal(v, o));
  }
  if (name == "equalto" || name == "eq" || name == "==")
    return equal(v, other());
  if (name == "ne" || name == "!=")
    return !equal(v, other());
  if (name == "lt" || name == "lessthan" || name == "<")
    return less(v, other());
  if (name == "le" || name == "<=")
    return !less(other(), v);
  if (name == "gt" || name == "greaterthan" || name == ">")
    return less(other(), v);
  if (name == "ge" || name == ">=")
    return !less(v, other());
  if (name == "in") {
    const Value& seq = other();
    if (seq.is_string()) {
      return v.is_string() &&
          seq.as_string().find(v.as_string()) != std::string::npos;
    }
    if (seq.is_dict()) {
      return v.is_string() && seq.find(v.as_string()) != nullptr;
    }
    const List items = iterate(seq);
    return std::any_of(items.begin(), items.end(), [&](const Value& e) {
      return equal(e, v);
    });
  }
  if (name == "odd")
    return int_arg("is odd", v) % 2 != 0;
  if (name == "even")
    return int_arg("is even", v) % 2 == 0;
  if (name == "divisibleby") {
    const std::int64_t d = int_arg("divisibleby", other());
    return d != 0 && int_arg("divisibleby", v) % d == 0;
  }
  if (name == "lower")
    return v.is_string() && ascii_case(v.as_string(), 0) == v.as_string();
  if (name == "upper")
    return v.is_string() && ascii_case(v.as_string(), 1) == v.as_string();
  throw TemplateError(
      fmt::format("the test '{}' is one hotloop's interpreter lacks", name));
}

namespace {

// Filters of text and single values: trim, tojson, length, string, safe,
// default, the case filters, replace.
std::optional<Value> text_filter(
    std::string_view name,
    const Value& v,
    Arguments& a) {
  if (name == "trim") {
    const Value chars = arg(a, 0, "chars", None{});
    return strip(
        to_str(v),
        true,
        true,
        chars.is_string() ? &chars.as_string() : nullptr);
  }
  if (name == "tojson") {
    const Value indent = arg(a, 0, "indent", None{});
    return to_json(
        v,
        indent.is_none() ? -1 : static_cast<int>(int_arg("tojson", indent)),
        arg(a, 99, "sort_keys", false).truthy());
  }
  if (name == "length" || name == "count")
    return length(v);
  if (name == "string")
    return to_str(v);
  if (name == "safe")
    return v;
  if (name == "default" || name == "d") {
    const bool boolean = arg(a, 1, "boolean", false).truthy();
    return v.is_undefined() || (boolean && !v.truthy())
        ? arg(a, 0, "default_value", "")
        : v;
  }
  if (name == "upper")
    return ascii_case(to_str(v), 1);
  if (name == "lower")
    return ascii_case(to_str(v), 0);
  if (name == "title")
    return ascii_case(to_str(v), 2);
  if (name == "capitalize")
    return ascii_case(ascii_case(to_str(v), 0), 3);
  if (name == "replace") {
    return replace_all(
        to_str(v),
        text_arg("replace", arg(a, 0, "old")),
        text_arg("replace", arg(a, 1, "new")),
        int_arg("replace", arg(a, 2, "count", -1)));
  }
  return std::nullopt;
}

// Filters of sequences: join, list, items, first, last, reverse, unique,
// sort, dictsort, select, reject, selectattr, rejectattr, map.
std::optional<Value> sequence_filter(
    std::string_view name,
    const Value& v,
    Arguments& a) {
  if (name == "join") {
    const Value sep = arg(a, 0, "d", "");
    const Value attr = arg(a, 1, "attribute", None{});
    std::string out;
    bool first = true;
    for (const Value& e : iterate(v)) {
      out += first ? "" : to_str(sep);
      out += to_str(attr.is_string() ? attribute(e, attr.as_string()) : e);
      first = false;
    }
    return out;
  }
  if (name == "list")
    return iterate(v);
  if (name == "items") {
    if (v.is_undefined())
      return List{};
    if (!v.is_dict())
      wrong("items", fmt::format("a {} is not a dict", v.type_name()));
    return pairs(v.as_dict());
  }
  if (name == "first" || name == "last") {
    const List items = iterate(v);
    if (items.empty()) {
      return Undefined{fmt::format("{} of an empty sequence", name)};
    }
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      return slice(v, None{}, None{}, std::int64_t{-1});
    }
    List items = iterate(v);
    std::reverse(items.begin(), items.end());
    return items;
  }
  if (name == "unique") {
    List out;
    for (const Value& e : iterate(v)) {
      if (std::none_of(out.begin(), out.end(), [&](const Value& o) {
            return equal(o, e);
          })) {
        out.push_back(e);
      }
    }
    return out;
  }
  if (name == "sort")
    return sorted(v, a);
  if (name == "dictsort") {
    if (!v.is_dict()) {
      wrong("dictsort", fmt::format("a {} is not a dict", v.type_name()));
    }
    List items = pairs(v.as_dict());
    std::stable_sort(
        items.begin(), items.end(), [](const Value& x, const Value& y) {
          return ascii_case(x.as_list()[0].as_string(), 0) <
              ascii_case(y.as_list()[0].as_string(), 0);
        });
    return items;
  }
  if (name == "select" || name == "reject") {
    List out;
    for (const Value& e : iterate(v)) {
      if (passes(e, a, 0) == (name == "select")) {
        out.push_back(e);
      }
    }
    return out;
  }
  if (name == "selectattr" || name == "rejectattr") {
    const std::string attr = text_arg(name, arg(a, 0, "attribute"));
    List out;
    for (const Value& e : iterate(v)) {
      if (passes(attribute(e, attr), a, 1) == (name == "selectattr")) {
        out.push_back(e);
      }
    }
    return out;
  }
  if (name == "map") {
    const Value attr = arg(a, 99, "attribute", None{});
    List out;
    for (const Value& e : iterate(v)) {
      if (attr.is_string()) {
        Value x = attribute(e, attr.as_string());
        out.push_back(x.is_undefined() ? arg(a, 99, "default", x) : x);
      } else {
        if (a.positional.empty()) {
          wrong("map", "needs a filter's name or attribute=");
        }
        Arguments rest;
        rest.positional.assign(a.positional.begin() + 1, a.positional.end());
        out.push_back(call_filter(text_arg("map", a.positional[0]), e, rest));
      }
    }
    return out;
  }
  return std::nullopt;
}

// The rest: attr, numbers (abs, int, float, round, sum, max, min),
// wordcount, indent.
std::optional<Value> other_filter(
    std::string_view name,
    const Value& v,
    Arguments& a) {
  if (name == "attr")
    return attribute(v, text_arg("attr", arg(a, 0, "name")));
  if (name == "abs") {
    if (!v.is_number())
      wrong("abs", fmt::format("a {} is not a number", v.type_name()));
    return v.is_float()
        ? Value(std::fabs(v.as_number()))
        : Value(static_cast<std::int64_t>(std::llabs(v.as_int())));
  }
  if (name == "int")
    return to_int(v, arg(a, 0, "default", 0));
  if (name == "float") {
    if (v.is_number())
      return v.as_number();
    const std::string t = strip(to_str(v), true, true, nullptr);
    char* end = nullptr;
    const double d = std::strtod(t.c_str(), &end);
    return !t.empty() && end == t.c_str() + t.size()
        ? Value(d)
        : arg(a, 0, "default", 0.0);
  }
  if (name == "round") {
    const std::int64_t digits = int_arg("round", arg(a, 0, "precision", 0));
    const std::string method = to_str(arg(a, 1, "method", "common"));
    const double scale = std::pow(10.0, static_cast<double>(digits));
    const double x = v.as_number() * scale;
    const double r = method == "floor" ? std::floor(x)
        : method == "ceil"             ? std::ceil(x)
                                       : std::round(x);
    return r / scale;
  }
  if (name == "sum") {
    const Value attr = arg(a, 0, "attribute", None{});
    Value total = arg(a, 1, "start", 0);
    for (const Value& e : iterate(v)) {
      const Value x = attr.is_string() ? attribute(e, attr.as_string()) : e;
      total = x.is_float() || total.is_float()
          ? Value(total.as_number() + x.as_number())
          : Value(total.as_int() + int_arg("sum", x));
    }
    return total;
  }
  if (name == "max" || name == "min") {
    const List items = iterate(v);
    if (items.empty()) {
      return Undefined{fmt::format("{} of an empty sequence", name)};
    }
    Value best = items[0];
    for (const Value& e : items) {
      if (name == "max" ? less(best, e) : less(e, best)) {
        best = e;
      }
    }
    return best;
  }
  if (name == "wordcount")
    return static_cast<std::int64_t>(split(to_str(v), None{}, -1).size());
  if (name == "indent") {
    const Value width = arg(a, 0, "width", 4);
    const std::string pad = width.is_string()
        ? width.as_string()
        : std::string(
              static_cast<std::size_t>(
                  std::max<std::int64_t>(0, int_arg("indent", width))),
              ' ');
    const bool first = arg(a, 1, "first", false).truthy();
    const bool blank = arg(a, 2, "blank", false).truthy();
    const std::string s = to_str(v);
    std::string out;
    std::size_t i = 0;
    bool at_first = true;
    while (i <= s.size()) {
      std::size_t j = s.find('\n', i);
      const bool last = j == std::string::npos;
      const std::string line = s.substr(i, last ? std::string::npos : j - i);
      if ((!at_first || first) && (blank || !line.empty())) {
        out += pad;
      }
      out += line;
      if (last) {
        break;
      }
      out += '\n';
      i = j + 1;
      at_first = false;
    }
    return out;
  }
  return std::nullopt;
}

} // namespace

Value call_filter(std::string_view name, const Value& v, Arguments& a) {
  for (const auto filter : {text_filter, sequence_filter, other_filter}) {
    if (std::optional<Value> out = filter(name, v, a)) {
      return *std::move(out);
    }
  }
  throw TemplateError(
      fmt::format("the filter '{}' is one hotloop's interpreter lacks", name));
}

Dict globals() {
  Dict g;
  g.emplace_back(
      "range", Value(Function([](Arguments& a) -> Value {
        std::int64_t start = 0;
        std::int64_t stop = 0;
        std::int64_t step = 1;
        if (a.positional.size() == 1) {
          stop = int_arg("range", a.positional[0]);
        } else if (a.positional.size() >= 2) {
          start = int_arg("range", a.positional[0]);
          stop = int_arg("range", a.positional[1]);
          step =
              a.positional.size() > 2 ? int_arg("range", a.positional[2]) : 1;
        }
        if (step == 0) {
          wrong("range", "step 0");
        }
        List out;
        for (std::int64_t i = start; step > 0 ? i < stop : i > stop;
             i += step) {
          if (out.size() >= kMaxItems) {
            wrong("range", fmt::format("more than {} items", kMaxItems));
          }
          out.emplace_back(i);
        }
        return out;
      })));
  g.emplace_back("namespace", Value(Function([](Arguments& a) -> Value {
                   auto ns = std::make_shared<Namespace>();
                   for (const Value& p : a.positional) {
                     if (p.is_dict()) {
                       ns->attributes = p.as_dict();
                     }
                   }
                   for (const auto& [k, v] : a.named) {
                     ns->attributes.emplace_back(k, v);
                   }
                   return ns;
                 })));
  g.emplace_back("dict", Value(Function([](Arguments& a) -> Value {
                   Dict d;
                   for (const auto& [k, v] : a.named) {
                     d.emplace_back(k, v);
                   }
                   return d;
                 })));
  g.emplace_back("raise_exception", Value(Function([](Arguments& a) -> Value {
                   throw TemplateRaised(
                       a.positional.empty() ? std::string("raise_exception()")
                                            : to_str(a.positional[0]));
                 })));
  g.emplace_back("strftime_now", Value(Function([](Arguments& a) -> Value {
                   const std::string format =
                       text_arg("strftime_now", arg(a, 0, "format"));
                   const std::time_t now = std::time(nullptr);
                   std::tm local{};
                   localtime_r(&now, &local);
                   char buffer[256];
                   const std::size_t n = std::strftime(
                       buffer, sizeof buffer, format.c_str(), &local);
                   return std::string(buffer, n);
                 })));
  return g;
}

} // namespace hotloop::data::jinja
