#include "matrix_file.h"

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

std::vector<std::string> strings(
    const std::string& path,
    const toml::table& t,
    const char* key,
    std::vector<std::string> fallback) {
  const toml::node* n = t.get(key);
  if (n == nullptr) {
    return fallback;
  }
  if (const auto* s = n->as_string()) {
    return {s->get()};
  }
  const auto* a = n->as_array();
  if (a == nullptr) {
    bad(path, fmt::format("'{}' must be a string or an array of strings", key));
  }
  std::vector<std::string> out;
  for (const auto& e : *a) {
    if (!e.is_string()) {
      bad(path, fmt::format("'{}' must hold strings", key));
    }
    out.push_back(e.as_string()->get());
  }
  return out;
}

std::vector<std::int64_t> integers(
    const std::string& path,
    const toml::table& t,
    const char* key,
    std::vector<std::int64_t> fallback) {
  const toml::node* n = t.get(key);
  if (n == nullptr) {
    return fallback;
  }
  if (const auto* i = n->as_integer()) {
    return {i->get()};
  }
  const auto* a = n->as_array();
  if (a == nullptr) {
    bad(path,
        fmt::format("'{}' must be an integer or an array of integers", key));
  }
  std::vector<std::int64_t> out;
  for (const auto& e : *a) {
    if (!e.is_integer() || e.as_integer()->get() < 1) {
      bad(path, fmt::format("'{}' must hold positive integers", key));
    }
    out.push_back(e.as_integer()->get());
  }
  return out;
}

void only_keys(
    const std::string& path,
    const toml::table& t,
    const std::string& where,
    std::initializer_list<const char*> keys) {
  for (const auto& [k, v] : t) {
    bool known = false;
    for (const char* key : keys) {
      known = known || k.str() == key;
    }
    if (!known) {
      bad(path, fmt::format("unknown key '{}'{}", k.str(), where));
    }
  }
}

} // namespace

void read_matrix_file(const std::string& path, bench::MatrixOptions& options) {
  const toml::table file =
      parse_toml_file(path, "matrix file", "the matrix file must be TOML");
  only_keys(
      path,
      file,
      "",
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
  auto check_row = [&](const bench::BenchRow& r) {
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
    const auto* t = m->as_table();
    if (t == nullptr) {
      bad(path, "[matrix] must be a table");
    }
    only_keys(
        path,
        *t,
        " in [matrix]",
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
      const auto* t = e.as_table();
      if (t == nullptr) {
        bad(path, "each [[rows]] entry must be a table");
      }
      only_keys(
          path,
          *t,
          " in [[rows]]",
          {"device", "precision", "batch", "model", "data"});
      bench::BenchRow r;
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
