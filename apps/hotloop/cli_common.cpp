#include "cli_common.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace hotloop::cli {

bool stdout_wants_color() {
  const char* term = std::getenv("TERM");
  return ::isatty(STDOUT_FILENO) == 1 && std::getenv("NO_COLOR") == nullptr &&
      (term == nullptr || std::strcmp(term, "dumb") != 0);
}

void add_json_flag(CLI::App* cmd, bool& json, const char* what) {
  cmd->add_flag("--json", json, fmt::format("Print {} (default: off)", what));
}

void add_no_color_flag(CLI::App* cmd, bool& no_color) {
  cmd->add_flag(
      "--no-color",
      no_color,
      "Plain text even on a terminal (default: off; NO_COLOR=1 also works)");
}

} // namespace hotloop::cli
