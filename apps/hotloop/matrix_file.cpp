#include "matrix_file.h"

#include <optional>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "hotloop/errors.h"
#include "toml_file.h"

namespace hotloop::cli {

namespace {

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw ConfigError(
      fmt::format("{}: {}", path, what),
      "see `hotloop bench --help` for the matrix file's keys");
}

// `key` as one value or an array of them (`fallback` where absent); `what`
// names a value in the message, `ok` checks each one.
template <typename T>
std::vector<T> values(
    const std::string& path,
    const toml::table& t,
    const char* key,
    std::vector<T> fallback,
    const char* what,
    bool (*ok)(const T&) = nullptr) {
  const toml::node* n = t.get(key);
  if (n == nullptr) {
    return fallback;
  }
  const toml::array* a = n->as_array();
  std::vector<T> out;
  const auto take = [&](const toml::node& e) {
    const std::optional<T> v = e.value_exact<T>();
    if (!v || (ok != nullptr && !ok(*v))) {
      bad(path, fmt::format("'{}' must be {} or an array of them", key, what));
    }
    out.push_back(*v);
  };
  if (a == nullptr) {
    take(*n);
  } else {
    for (const auto& e : *a) {
      take(e);
    }
  }
  return out;
}

std::vector<std::string> strings(
    const std::string& path,
    const toml::table& t,
    const char* key,
    std::vector<std::string> fallback) {
  return values<std::string>(path, t, key, std::move(fallback), "a string");
}

std::vector<std::int64_t> integers(
    const std::string& path,
    const toml::table& t,
    const char* key,
    std::vector<std::int64_t> fallback) {
  return values<std::int64_t>(
      path,
      t,
      key,
      std::move(fallback),
      "a positive integer",
      [](const std::int64_t& v) { return v >= 1; });
}

// `n` as a table that holds only `keys`; `what` names it in messages.
const toml::table& keyed_table(
    const std::string& path,
    const toml::node& n,
    const char* what,
    std::initializer_list<const char*> keys) {
  const toml::table* t = n.as_table();
  if (t == nullptr) {
    bad(path, fmt::format("{} must be a table", what));
  }
  for (const auto& [k, v] : *t) {
    bool known = false;
    for (const char* key : keys) {
      known = known || k.str() == key;
    }
    if (!known) {
      bad(path, fmt::format("unknown key '{}' in {}", k.str(), what));
    }
  }
  return *t;
}

} // namespace

void read_matrix_file(
    const std::string& path,
    testplan::MatrixOptions& options) {
  const toml::table file =
      parse_toml_file(path, "matrix file", "the matrix file must be TOML");
  keyed_table(
      path,
      file,
      "the file",
      {"steps", "cpu_row_seconds", "grow_gpu_batch", "matrix", "rows"});
  if (const auto* s = file.get("steps")) {
    if (!s->is_integer() || s->as_integer()->get() < 1) {
      bad(path, "'steps' must be a positive integer");
    }
    options.steps = s->as_integer()->get();
  }
  if (const auto* s = file.get("cpu_row_seconds")) {
    if (!s->is_number()) {
      bad(path, "'cpu_row_seconds' must be a number");
    }
    options.cpu_row_seconds = s->value<double>().value_or(0);
  }
  if (const auto* g = file.get("grow_gpu_batch")) {
    if (!g->is_boolean()) {
      bad(path, "'grow_gpu_batch' must be true or false");
    }
    options.grow_gpu_batch = g->as_boolean()->get();
  }
  options.rows.clear();
  auto check_row = [&](const testplan::BenchRow& r) {
    if (r.device != "cpu" && r.device != "cuda") {
      bad(path, fmt::format("device '{}': expected cpu or cuda", r.device));
    }
    for (const char* p : {"fp32", "tf32", "bf16", "fp16", "mixed"}) {
      if (r.precision == p) {
        return;
      }
    }
    bad(path,
        fmt::format(
            "precision '{}': expected fp32, tf32, bf16, fp16 or mixed",
            r.precision));
  };
  if (const auto* m = file.get("matrix")) {
    const toml::table* t = &keyed_table(
        path,
        *m,
        "[matrix]",
        {"devices", "precisions", "batches", "models", "data"});
    for (const auto& model : strings(path, *t, "models", {"resnet18-small"})) {
      for (const auto& data : strings(path, *t, "data", {"fashion-mnist"})) {
        for (const auto& device :
             strings(path, *t, "devices", {"cpu", "cuda"})) {
          for (const auto& precision :
               strings(path, *t, "precisions", {"fp32", "mixed"})) {
            for (const auto batch : integers(path, *t, "batches", {32, 64})) {
              options.rows.push_back(
                  {device, precision, batch, model, data, false});
              check_row(options.rows.back());
            }
          }
        }
      }
    }
  }
  if (const auto* rows = file.get("rows")) {
    const auto* a = rows->as_array();
    if (a == nullptr) {
      bad(path, "rows must be an array of tables: [[rows]]");
    }
    for (const auto& e : *a) {
      const toml::table* t = &keyed_table(
          path,
          e,
          "[[rows]]",
          {"device", "precision", "batch", "model", "data"});
      testplan::BenchRow r;
      r.device = strings(path, *t, "device", {"cpu"}).front();
      r.precision = strings(path, *t, "precision", {"fp32"}).front();
      r.batch = integers(path, *t, "batch", {32}).front();
      r.model = strings(path, *t, "model", {r.model}).front();
      r.data = strings(path, *t, "data", {r.data}).front();
      check_row(r);
      options.rows.push_back(r);
    }
  }
  if (options.rows.empty()) {
    bad(path, "no rows: give a [matrix] table or [[rows]] entries");
  }
}

} // namespace hotloop::cli
