#pragma once
// Builders for the option tables (option_table.cpp, run_options.cpp): one
// call per option makes its typed get, set and check from a member pointer,
// so an entry reads as its name, its field, its help and its range.

#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdlib>
#include <span>
#include <string>
#include <type_traits>

#include <fmt/format.h>

#include "hotloop/core/named.h"
#include "hotloop/errors.h"
#include "hotloop/train/option_table.h"

namespace hotloop::train::options_detail {

// The field an option fills: a member, or a member of a member.
template <typename Owner, typename T>
using Field = std::function<T&(Owner&)>;

template <typename Owner, typename T>
Field<Owner, T> field(T Owner::*member) {
  return [member](Owner& o) -> T& { return o.*member; };
}

template <typename Owner, typename Part, typename T>
Field<Owner, T> field(Part Owner::*part, T Part::*member) {
  return [part, member](Owner& o) -> T& { return (o.*part).*member; };
}

template <typename Owner, typename Part, typename Sub, typename T>
Field<Owner, T> field(Part Owner::*part, Sub Part::*sub, T Sub::*member) {
  return
      [part, sub, member](Owner& o) -> T& { return ((o.*part).*sub).*member; };
}

// A range check: "" when `v` is fine, else what it must be.
template <typename T>
using Check = std::function<std::string(const T&)>;

// Checks for any number type (they convert to the field's Check<T>).
inline auto at_least(double min) {
  return [min](const auto& v) {
    return static_cast<double>(v) >= min
        ? std::string()
        : fmt::format("must be at least {:g}", min);
  };
}

inline auto positive() {
  return [](const auto& v) {
    return v > 0 ? std::string() : std::string("must be positive");
  };
}

// [lo, hi) or, with `closed`, [lo, hi].
inline Check<double> in_range(double lo, double hi, bool closed = false) {
  return [lo, hi, closed](const double& v) {
    const bool ok = v >= lo && (closed ? v <= hi : v < hi);
    return ok ? std::string()
              : fmt::format("must be in [{}, {}{}", lo, hi, closed ? "]" : ")");
  };
}

template <typename Owner, typename T>
Option<Owner> make(
    std::string name,
    std::string section,
    OptionKind kind,
    Field<Owner, T> f,
    std::string help,
    Check<T> check,
    std::function<T(const std::string&)> parse,
    std::function<nlohmann::json(const T&)> print) {
  Option<Owner> o;
  o.name = name;
  o.section = std::move(section);
  o.help = std::move(help);
  o.kind = kind;
  o.get = [f, print](const Owner& owner) {
    return print(f(const_cast<Owner&>(owner)));
  };
  o.check = [f, check](const Owner& owner) {
    return check ? check(f(const_cast<Owner&>(owner))) : std::string();
  };
  o.set = [name, f, check, parse](Owner& owner, const std::string& text) {
    T value = parse(text);
    if (check) {
      if (const std::string why = check(value); !why.empty()) {
        throw UsageError(fmt::format("--{} {}: {}", name, text, why));
      }
    }
    f(owner) = std::move(value);
  };
  return o;
}

// An integer or a real number.
template <typename Owner, typename T>
    requires std::is_arithmetic_v<T> &&
    (!std::same_as<T, bool>)Option<Owner> number(
        std::string name,
        std::string section,
        Field<Owner, T> f,
        std::string help,
        std::type_identity_t<Check<T>> check = {}) {
  auto parse = [name](const std::string& text) {
    T v{};
    const char* end = text.data() + text.size();
    if constexpr (std::is_integral_v<T>) {
      const auto [ptr, ec] = std::from_chars(text.data(), end, v);
      if (ec != std::errc() || ptr != end) {
        throw UsageError(
            fmt::format("--{} {}: expected a whole number", name, text));
      }
    } else {
      char* stop = nullptr;
      v = static_cast<T>(std::strtod(text.c_str(), &stop));
      if (text.empty() || stop != end || !std::isfinite(v)) {
        throw UsageError(fmt::format("--{} {}: expected a number", name, text));
      }
    }
    return v;
  };
  return make<Owner, T>(
      std::move(name),
      std::move(section),
      std::is_integral_v<T> ? OptionKind::Integer : OptionKind::Real,
      f,
      std::move(help),
      std::move(check),
      parse,
      [](const T& v) { return nlohmann::json(v); });
}

// true or false; a bare --flag means true.
template <typename Owner>
Option<Owner> boolean(
    std::string name,
    std::string section,
    Field<Owner, bool> f,
    std::string help) {
  auto parse = [name](const std::string& text) {
    if (text.empty() || text == "true" || text == "1") {
      return true;
    }
    if (text == "false" || text == "0") {
      return false;
    }
    throw UsageError(
        fmt::format("--{} {}: expected true or false", name, text));
  };
  return make<Owner, bool>(
      std::move(name),
      std::move(section),
      OptionKind::Boolean,
      f,
      std::move(help),
      {},
      parse,
      [](const bool& v) { return nlohmann::json(v); });
}

template <typename Owner>
Option<Owner> text(
    std::string name,
    std::string section,
    Field<Owner, std::string> f,
    std::string help,
    Check<std::string> check = {}) {
  return make<Owner, std::string>(
      std::move(name),
      std::move(section),
      OptionKind::Text,
      f,
      std::move(help),
      std::move(check),
      [](const std::string& t) { return t; },
      [](const std::string& v) { return nlohmann::json(v); });
}

// One of the words of an enum's table (named.h).
template <typename Owner, typename E>
Option<Owner> choice(
    std::string name,
    std::string section,
    Field<Owner, E> f,
    std::span<const Named<E>> names,
    std::string help) {
  auto parse = [name, names](const std::string& t) {
    return parse_named<E>(names, t, name);
  };
  Option<Owner> o = make<Owner, E>(
      std::move(name),
      std::move(section),
      OptionKind::Choice,
      f,
      std::move(help),
      {},
      parse,
      [names](const E& v) { return nlohmann::json(name_of<E>(names, v)); });
  for (const auto& n : names) {
    o.choices.emplace_back(n.name);
  }
  return o;
}

// An entry of another table, on the part of `Owner` that holds its owner.
template <typename Owner, typename Inner>
Option<Owner> lift(const Option<Inner>& in, Inner Owner::*part) {
  Option<Owner> o;
  o.name = in.name;
  o.section = in.section;
  o.help = in.help;
  o.kind = in.kind;
  o.choices = in.choices;
  o.recipe = in.recipe;
  o.must_match = in.must_match;
  o.get = [g = in.get, part](const Owner& owner) { return g(owner.*part); };
  o.set = [s = in.set, part](Owner& owner, const std::string& t) {
    s(owner.*part, t);
  };
  o.check = [c = in.check, part](const Owner& owner) { return c(owner.*part); };
  return o;
}

} // namespace hotloop::train::options_detail
