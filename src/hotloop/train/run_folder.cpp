#include "hotloop/train/run_folder.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "hotloop/core/atomic_file.h"
#include "hotloop/errors.h"

namespace hotloop::train {

namespace fs = std::filesystem;

std::string RunFolder::file(const char* name) const {
  return (fs::path(dir_) / name).string();
}

std::vector<RunFolder> RunFolder::around(const std::string& weights) {
  const fs::path dir = fs::path(weights).parent_path();
  return {RunFolder(dir.string()), RunFolder(dir.parent_path().string())};
}

void RunFolder::create() const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) {
    throw DataError(
        fmt::format("cannot create the run folder {}: {}", dir_, ec.message()),
        "give a folder on a writable disk");
  }
}

std::optional<nlohmann::json> RunFolder::config_part(const char* part) const {
  std::ifstream in(config());
  if (!in) {
    return std::nullopt;
  }
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains(part) || !j[part].is_object()) {
    return std::nullopt;
  }
  return j[part];
}

void RunFolder::keep_tokenizer(const std::vector<std::string>& files) const {
  const fs::path to = tokenizer();
  std::error_code ec;
  fs::create_directories(to, ec);
  for (const std::string& f : files) {
    if (!ec) {
      fs::copy_file(
          f,
          to / fs::path(f).filename(),
          fs::copy_options::overwrite_existing,
          ec);
    }
  }
  if (ec) {
    throw DataError(fmt::format(
        "cannot copy the tokenizer into {}: {}", to.string(), ec.message()));
  }
}

void RunFolder::write_json(const std::string& path, const nlohmann::json& j) {
  write_text_atomic(path, j.dump(2) + "\n");
}

} // namespace hotloop::train
