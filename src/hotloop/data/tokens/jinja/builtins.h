#pragma once
// What a chat template can call: jinja2's filters and tests, Python's str
// and dict methods, attribute and item access, and the globals transformers
// gives a template (range, namespace, dict, raise_exception, strftime_now).
// Each a TemplateError, naming it, when it is one the interpreter lacks or
// is called wrongly.
//
// Filters: abs, attr, capitalize, count, default/d, dictsort, first, float,
// indent, int, items, join, last, length, list, lower, map, max, min,
// reject, rejectattr, replace, reverse, round, safe, select, selectattr,
// sort, string, sum, title, tojson, trim, unique, upper, wordcount.
// Tests: defined, undefined, none, boolean, true, false, integer, float,
// number, string, mapping, iterable, sequence, callable, sameas, equalto/eq/
// ==, ne/!=, lt/<, le/<=, gt/>, ge/>=, in, odd, even, divisibleby, lower,
// upper.
// Methods: str's strip, lstrip, rstrip, split, rsplit, splitlines,
// startswith, endswith, upper, lower, title, capitalize, replace, find,
// rfind, count, join, format (positional {}); dict's items, keys, values,
// get.

#include <optional>
#include <string_view>
#include <vector>

#include "hotloop/data/tokens/jinja/value.h"

namespace hotloop::data::jinja {

// `value|name(args)`.
Value call_filter(std::string_view name, const Value& value, Arguments& args);
// `value is name(args)`.
bool call_test(
    std::string_view name,
    const Value& value,
    const std::vector<Value>& args);
// `object.name` as jinja2's getattr: a method first, then the item; an
// Undefined naming it when there is neither. TemplateError on an Undefined
// object.
Value attribute(const Value& object, const std::string& name);
// `object[key]` as jinja2's getitem: the item first, then a method.
Value item(const Value& object, const Value& key);
// `object[start:stop:step]` for lists and text (by code point).
Value slice(
    const Value& object,
    const Value& start,
    const Value& stop,
    const Value& step);
// The items of an iteration (a dict's keys, a text's characters); empty for
// an Undefined; TemplateError for what does not iterate.
List iterate(const Value& v);
// The globals: range, namespace, dict, raise_exception, strftime_now.
Dict globals();

} // namespace hotloop::data::jinja
